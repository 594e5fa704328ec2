"""axe-core, the accessibility checker the site and JupyterLab tests run in the page.

One pinned release from the npm registry, checked against the registry's own integrity hash and kept
under ``build/`` (ignored by git): downloaded by the first test that needs it, then reused.
`axe_violations` runs it in a Playwright page; `serious_violations` picks what the tests refuse.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
AXE_VERSION = "4.14.1"
AXE_TARBALL = f"https://registry.npmjs.org/axe-core/-/axe-core-{AXE_VERSION}.tgz"
AXE_INTEGRITY = "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ=="
AXE_FILE = REPO / "build" / f"axe-core-{AXE_VERSION}" / "axe.min.js"
# The rules axe runs: WCAG 2.0, 2.1 and 2.2 at levels A and AA, and its best practices.
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]


def fetch_axe() -> Path:
    """axe-core's ``axe.min.js`` at ``AXE_FILE``: downloaded once (and its hash checked), then reused."""
    if AXE_FILE.is_file():
        return AXE_FILE
    with urllib.request.urlopen(AXE_TARBALL, timeout=60) as response:
        tarball = response.read()
    digest = "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
    if digest != AXE_INTEGRITY:
        raise RuntimeError(f"{AXE_TARBALL} does not match its pinned integrity hash ({digest})")
    with tarfile.open(fileobj=io.BytesIO(tarball)) as archive:
        member = archive.extractfile("package/axe.min.js")
        assert member is not None
        script = member.read()
    AXE_FILE.parent.mkdir(parents=True, exist_ok=True)
    partial = AXE_FILE.with_name(f"{AXE_FILE.name}.{os.getpid()}")  # test workers may fetch it side by side
    partial.write_bytes(script)
    partial.replace(AXE_FILE)
    return AXE_FILE


def axe_violations(page: Any, include: str | None = None) -> list[dict[str, Any]]:
    """Run axe-core in ``page`` (on the elements matching the CSS selector ``include``, else the whole page)
    and return its violations: each with ``id``, ``impact``, ``help`` and the ``nodes`` it found."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(fetch_axe()))
    found: list[dict[str, Any]] = page.evaluate(
        """async ([include, tags]) => {
          const context = include ? {include: [include]} : document;
          const result = await axe.run(context, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
          return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 200),
                                      summary: n.failureSummary}))}));
        }""",
        [include, AXE_TAGS],
    )
    return found


def serious_violations(found: list[dict[str, Any]]) -> list[str]:
    """The critical and serious ones among ``found``, a line each (rule, node, what to fix)."""
    return [
        f"{v['id']} ({v['impact']}): {node['target']}: {node['summary']}"
        for v in found if v["impact"] in ("critical", "serious") for node in v["nodes"]
    ]  # fmt: skip
