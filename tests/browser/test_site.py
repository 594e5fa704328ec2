"""The website of the lessons in a real browser, opened from disk (file:// URLs, no server).

The site is built afresh into a temporary folder with `scripts/build_site.sh` (a few seconds), then
headless Chromium opens the top of the site, which forwards to the landing page, and lesson 06, the
one lesson with maths, figures, widgets, predictions and solutions together. It checks that:

* the landing page's navigation lists every lesson in order, and each link opens that lesson;
* every figure of lesson 06 is on the page and loaded (``naturalWidth > 0``);
* the lesson's formula was typeset by MathJax from the site's own copy (no request leaves file://);
* every solution is folded, shows its code only after a click, and its checker's verdict stays visible;
* every **Predict:** line comes before the cell that reveals the answer;
* each live widget is replaced by its note, and the next cell's printed output is there;
* the Binder button opens the README's link for the lesson and the download button gives the
  committed notebook, byte for byte.

Three more tests read every page: on a 390 px phone no page is wider than the screen and the landing
page has a launch button; in dark mode every note, admonition, printed output and paragraph reaches
WCAG AA contrast (4.5:1, computed from the rendered colours), and every figure sits undimmed on a white
plate, at twice its displayed pixel density, with a one-sentence alt text (dark-mode screenshots of
each lesson's first figure and widget note are saved); and axe-core finds no critical or serious
accessibility problem, in light mode or in dark mode, on three pages (`AXE_SAMPLE`) or, with
``SITE_AXE_ALL=1`` (a step of `.ci/run`), on every page.

Screenshots go to pytest's tmp_path. Without Chromium or Playwright the test skips (conftest.py),
and so it does without the site tools (`pip install -r requirements-site.txt`).
`BROWSER_TEST_NOTEBOOKS=/path` builds the site from other notebooks, as for the other browser tests.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from axe_check import axe_violations, serious_violations

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = Path(os.environ.get("BROWSER_TEST_NOTEBOOKS", REPO / "notebooks"))
LESSON = "06_grouped_query_attention"
VIEWPORT = {"width": 1280, "height": 1000}
SITE_TOOLS = ("sphinx", "myst_nb", "sphinx_book_theme")
INSTALL_SITE_TOOLS = "the site tools are not installed: `.venv/bin/pip install -r requirements-site.txt` installs them"
BUILD_SECONDS = 120
MATHJAX_SECONDS = 15.0
BADGE = re.compile(r"\(https://mybinder\.org/badge_logo\.svg\)\]\(([^)\s]+)\)")

# For each "Predict:" paragraph (its first words in bold), whether it sits inside a folded block,
# and the code of the first cell after it in the page.
PREDICTIONS_JS = """
() => Array.from(document.querySelectorAll('article p')).filter(p => {
  const first = p.querySelector('strong');
  return first && first.textContent.trim() === 'Predict:';
}).map(p => {
  const cells = Array.from(document.querySelectorAll('article div.cell'));
  const next = cells.find(cell => p.compareDocumentPosition(cell) & Node.DOCUMENT_POSITION_FOLLOWING);
  const input = next ? next.querySelector('.cell_input') : null;
  const toggle = next ? next.querySelector(':scope > details.hide.below-input') : null;
  const output = toggle ? toggle.querySelector('.cell_output') : null;
  return {folded: p.closest('details') !== null, next: input ? input.innerText.trim() : '',
          result: toggle ? toggle.querySelector('summary').innerText.trim() : '',
          hidden: output !== null && !toggle.open && !output.checkVisibility()};
})
"""
IMAGES_JS = """
() => Array.from(document.querySelectorAll('article .cell_output img')).map(img => ({
  src: img.getAttribute('src'), complete: img.complete, width: img.naturalWidth,
}))
"""


def cells(notebook: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return found


def source(cell: dict[str, Any]) -> str:
    text = cell["source"]
    return text if isinstance(text, str) else "".join(text)


def outputs(cell: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cell.get("outputs", [])
    return found


def first_line(text: str) -> str:
    return text.strip().splitlines()[0].strip()


def next_code_cell(all_cells: list[dict[str, Any]], index: int) -> dict[str, Any]:
    return next(cell for cell in all_cells[index + 1 :] if cell["cell_type"] == "code")


def lessons() -> list[str]:
    return [path.stem for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]


def source_tree(tmp: Path) -> Path:
    """The folder to build from: the repository, or a copy of its layout holding BROWSER_TEST_NOTEBOOKS."""
    if NOTEBOOKS.resolve() == (REPO / "notebooks").resolve():
        return REPO
    tree = tmp / "source"
    (tree / "site").mkdir(parents=True)
    shutil.copy2(REPO / "site" / "index.md", tree / "site" / "index.md")
    shutil.copytree(NOTEBOOKS, tree / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return tree


@pytest.fixture(scope="module")
def built_site(playwright_api: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the site into a fresh temporary folder; fail with Sphinx's messages if it warns."""
    if any(importlib.util.find_spec(tool) is None for tool in SITE_TOOLS):
        pytest.skip(INSTALL_SITE_TOOLS)
    base = tmp_path_factory.mktemp("website")
    out = base / "site"
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "build_site.sh"), str(out), str(source_tree(base))],
        capture_output=True,
        text=True,
        timeout=BUILD_SECONDS,
        env={**os.environ, "PYTHON": sys.executable},  # the interpreter running the tests, not .venv's
    )
    if result.returncode != 0:
        pytest.fail(f"scripts/build_site.sh failed (exit {result.returncode}):\n{result.stderr}")
    return out


class PageWatch:
    """What a page asked the network for, and what went wrong in it."""

    def __init__(self, page: Any) -> None:
        self.remote: list[str] = []
        self.errors: list[str] = []
        page.on("request", self.on_request)
        page.on("console", self.on_console)
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def on_request(self, request: Any) -> None:
        if not request.url.startswith(("file:", "data:", "blob:")):
            self.remote.append(request.url)

    def on_console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def assert_clean(self, where: str) -> None:
        assert not self.remote, f"{where} asked the network for {self.remote} (the site must work offline)"
        assert not self.errors, f"{where}: errors in the browser console: {self.errors}"


def path_of(url: str) -> Path:
    return Path(unquote(urlparse(url).path))


def check_navigation(page: Any, site: Path, shots: Path) -> None:
    """The landing page lists every lesson in its sidebar, in order, and each link opens that lesson."""
    page.goto((site / "index.html").as_uri())
    page.wait_for_url("**/site/index.html")
    assert page.locator("article h1").first.inner_text().startswith("Several Heads")
    page.screenshot(path=str(shots / "landing.png"), full_page=True)
    links = page.eval_on_selector_all("nav.bd-docs-nav a.reference.internal", "links => links.map(a => a.href)")
    lesson_links = [link for link in links if "/notebooks/" in link]
    assert [path_of(link).stem for link in lesson_links] == lessons(), f"the sidebar lists {lesson_links}"
    table_links = page.eval_on_selector_all("article table a", "links => links.map(a => a.href)")
    assert table_links == lesson_links, "the landing page's table of lessons should link every lesson in order"
    for link, lesson in zip(lesson_links, lessons(), strict=True):
        assert path_of(link).is_file(), f"the sidebar links {link}, which was not built"
        page.goto(link)
        heading = page.locator("article h1").first.inner_text()
        assert heading.startswith(f"Lesson {lesson[:2]}"), f"{link} opens a page titled {heading!r}"


def check_figures(page: Any, notebook_cells: list[dict[str, Any]]) -> None:
    expected = sum("image/png" in output.get("data", {}) for cell in notebook_cells for output in outputs(cell))
    page.wait_for_load_state("load")
    images = page.evaluate(IMAGES_JS)
    assert len(images) == expected, f"{LESSON} stores {expected} figures, the page shows {len(images)}"
    broken = [image["src"] for image in images if not image["complete"] or image["width"] == 0]
    assert not broken, f"figures that did not load: {broken}"


def check_maths(page: Any, notebook_cells: list[dict[str, Any]], shots: Path) -> None:
    formulas = sum(source(cell).count("$$") // 2 for cell in notebook_cells if cell["cell_type"] == "markdown")
    assert formulas > 0, f"{LESSON} has no $$...$$ formula any more; check the maths on another lesson"
    page.wait_for_function(
        f"document.querySelectorAll('mjx-container').length === {formulas}", timeout=MATHJAX_SECONDS * 1000
    )
    containers = page.locator("mjx-container")
    for i in range(formulas):
        formula = containers.nth(i)
        assert formula.locator("mjx-merror").count() == 0, f"MathJax could not typeset formula {i}"
        assert formula.bounding_box()["width"] > 0
    # The TeX source is gone from the page: what the reader sees is the typeset formula.
    assert "\\text{" not in page.locator("article").inner_text()
    containers.first.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "maths.png"))


def check_solutions(page: Any, notebook_cells: list[dict[str, Any]], shots: Path) -> None:
    solutions = [cell for cell in notebook_cells if "solution" in cell.get("metadata", {}).get("tags", [])]
    folded = page.locator("article div.cell.tag_solution")
    assert solutions and folded.count() == len(solutions), f"{len(solutions)} solutions, {folded.count()} on the page"
    for i in range(folded.count()):
        details = folded.nth(i).locator("details")
        assert details.count() == 1 and details.get_attribute("open") is None, f"solution {i} is not folded"
        assert not folded.nth(i).locator(".cell_input").is_visible(), f"solution {i} shows its code unasked"
        # Nothing below the fold gives the answer away: a solution stores no output.
        assert folded.nth(i).locator(".cell_output").count() == 0, f"solution {i} shows an output"
        assert "correct" not in folded.nth(i).inner_text(), f"solution {i} shows a verdict"
    first = folded.first
    first.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "solution_folded.png"))
    first.locator("summary").click()
    first.locator(".cell_input").wait_for(state="visible", timeout=5_000)
    # The code fades in (0.3 s); let that finish so the screenshot shows it as the reader will.
    first.locator("details").evaluate("d => Promise.all(d.getAnimations({subtree: true}).map(a => a.finished))")
    assert first.locator(".cell_input").inner_text().strip().startswith(first_line(source(solutions[0])))
    page.screenshot(path=str(shots / "solution_open.png"))


def check_predictions(page: Any, notebook_cells: list[dict[str, Any]]) -> None:
    reveals = [
        first_line(source(next_code_cell(notebook_cells, i)))
        for i, cell in enumerate(notebook_cells)
        if cell["cell_type"] == "markdown" and "**Predict:**" in source(cell)
    ]
    shown = page.evaluate(PREDICTIONS_JS)
    assert reveals and len(shown) == len(reveals), f"{len(reveals)} predictions in {LESSON}, {len(shown)} on the page"
    for prediction, reveal in zip(shown, reveals, strict=True):
        assert not prediction["folded"], "a Predict: line is folded away"
        assert prediction["next"].startswith(reveal), f"a Predict: line is followed by {prediction['next'][:60]!r}"
        # The reveal's output is folded: a reader decides before clicking "Show the result".
        assert prediction["result"] == "Show the result" and prediction["hidden"], prediction


def check_widget_notes(page: Any, notebook_cells: list[dict[str, Any]], shots: Path) -> None:
    widget_view = "application/vnd.jupyter.widget-view+json"
    widget_cells = [
        i for i, cell in enumerate(notebook_cells) if any(widget_view in o.get("data", {}) for o in outputs(cell))
    ]
    notes = page.locator("article .lesson-widget-note")
    assert widget_cells and notes.count() == len(widget_cells), f"{notes.count()} notes for {len(widget_cells)} widgets"
    assert page.locator(f'script[type="{widget_view}"]').count() == 0, "a widget view was written into the page"
    text = page.locator("article").inner_text()
    for i in range(notes.count()):
        assert notes.nth(i).is_visible() and "Binder" in notes.nth(i).inner_text()
    for index in widget_cells:
        printed = "".join(
            "".join(o["text"]) for o in outputs(next_code_cell(notebook_cells, index)) if o["output_type"] == "stream"
        )
        assert printed and first_line(printed) in text, f"the output of the cell after widget cell {index} is missing"
    notes.first.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "widget_note.png"))


def check_buttons(page: Any, notebook: Path) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    badge = next(link for link in BADGE.findall(readme) if link.endswith(f"/{LESSON}.ipynb"))
    assert page.locator(f'a[href="{badge}"]').count() == 1, f"no Binder button opening {badge}"
    colab = f"/colab/{LESSON}.ipynb"  # the learner copy, not notebooks/ with every stored answer
    assert page.locator(f'a[href*="colab.research.google.com"][href$="{colab}"]').count() == 1, "no Colab button"
    assert page.locator('a[href*="colab.research.google.com"][href*="/notebooks/"]').count() == 0
    assert page.locator(".dropdown-launch-buttons").is_visible()
    download = page.locator(f'a[href$="_sources/notebooks/{LESSON}.ipynb"]')
    assert download.count() == 1 and page.locator(".dropdown-download-buttons").is_visible()
    offered = path_of(download.evaluate("a => a.href"))
    assert offered.read_bytes() == notebook.read_bytes(), "the download button does not give the committed notebook"


def test_the_website_in_chromium(built_site: Path, browser: Any, tmp_path: Path) -> None:
    notebook = NOTEBOOKS / f"{LESSON}.ipynb"
    notebook_cells = cells(notebook)
    page = browser.new_page(viewport=VIEWPORT)
    watch = PageWatch(page)
    try:
        check_navigation(page, built_site, tmp_path)
        watch.assert_clean("the landing page and the lessons")

        page.goto((built_site / "notebooks" / f"{LESSON}.html").as_uri())
        page.screenshot(path=str(tmp_path / "lesson_top.png"))
        check_buttons(page, notebook)
        check_figures(page, notebook_cells)
        check_maths(page, notebook_cells, tmp_path)
        check_predictions(page, notebook_cells)
        check_widget_notes(page, notebook_cells, tmp_path)
        check_solutions(page, notebook_cells, tmp_path)
        watch.assert_clean(f"the page of {LESSON}")
    finally:
        with contextlib.suppress(Exception):  # a diagnostic only: never hide the real failure
            page.screenshot(path=str(tmp_path / "last_state.png"), full_page=True)
        page.close()


# ---------------------------------------------------------------------------------------------------
# Every page on a phone, in dark mode, and for a screen reader.

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1440, "height": 900}  # the HiDPI laptop of issue 21, in CSS pixels
AA_CONTRAST = 4.5  # WCAG 2 level AA for body text
WHITE = "rgb(255, 255, 255)"
# What must stay legible in dark mode: every widget note, admonition (and its title), printed output and
# paragraph of text. For each, its text colour and the first opaque background behind it, both as
# composited [r, g, b], and the WCAG contrast ratio between them.
CONTRAST_JS = """
() => {
  const rgba = text => (text.match(/[\\d.]+/g) || ['0', '0', '0', '0']).map(Number).concat([1]).slice(0, 4);
  const over = (top, bottom) => [0, 1, 2].map(i => top[i] * top[3] + bottom[i] * (1 - top[3]));
  const background = element => {
    const layers = [];
    for (let e = element; e; e = e.parentElement) {
      const colour = rgba(getComputedStyle(e).backgroundColor);
      if (colour[3] > 0) layers.push(colour);
      if (colour[3] >= 1) break;
    }
    return layers.reverse().reduce((below, layer) => over(layer, below), [255, 255, 255]);
  };
  const luminance = rgb => {
    const [r, g, b] = rgb.map(v => v / 255).map(v => v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4));
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const selectors = ['.lesson-widget-note p', '.admonition p', '.admonition .admonition-title',
                     'div.cell_output pre', 'article p', 'article li', 'article code'];
  const found = [];
  for (const selector of selectors) {
    for (const element of document.querySelectorAll(selector)) {
      if (!element.offsetParent || !element.innerText.trim()) continue;  // hidden (a folded solution)
      const back = background(element);
      const colour = over(rgba(getComputedStyle(element).color), back);
      const [light, dark] = [luminance(colour), luminance(back)].sort((a, b) => b - a);
      found.push({selector, text: element.innerText.trim().slice(0, 50), ratio: (light + 0.05) / (dark + 0.05)});
    }
  }
  return found;
}
"""
FIGURES_JS = """
() => Array.from(document.querySelectorAll('article .cell_output img')).map(img => {
  const style = getComputedStyle(img);
  return {src: img.getAttribute('src'), alt: img.getAttribute('alt') || '', background: style.backgroundColor,
          filter: style.filter, shown: img.getBoundingClientRect().width, natural: img.naturalWidth,
          attribute: Number(img.getAttribute('width') || 0)};
})
"""


def page_width(page: Any) -> int:
    width: int = page.evaluate("Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)")
    return width


def real_alt_text(alt: str) -> bool:
    """One sentence that describes the figure: words, not a file name or a placeholder."""
    return len(alt.split()) >= 6 and alt.endswith(".") and not re.search(r"\.(png|svg|jpe?g)\b|_images/", alt)


# Every figure wider than its output box on this screen that does not both link to its own file (a tap
# opens it whole) and show the line above it that says so.
FIGURE_CUE_JS = r"""
() => Array.from(document.querySelectorAll('.bd-content div.cell_output img')).filter(img => {
  const box = img.closest('div.cell_output');
  if (img.getBoundingClientRect().width <= box.clientWidth + 1) return false;
  const link = img.closest('a');
  const cue = getComputedStyle(box, '::before').content || '';
  return !(link && /\.(png|svg)$/.test(link.getAttribute('href') || '') && cue.includes('Tap the figure'));
}).map(img => img.getAttribute('src'))
"""


def test_every_page_fits_a_phone(built_site: Path, browser: Any, tmp_path: Path) -> None:
    """At 390 px no page scrolls sideways: long inline code, titles and printed lines wrap, wide figures
    scroll inside their own box, under a line that says a tap opens them whole (and the tap does: each
    links to its file); the landing page has a launch button too."""
    page = browser.new_page(viewport=PHONE, device_scale_factor=2)
    try:
        page.goto((built_site / "site" / "index.html").as_uri())
        button = page.locator("article a.launch-binder")
        assert button.count() == 1 and button.is_visible(), "the landing page has no visible launch button"
        assert button.get_attribute("href").endswith("my-lessons/01_one_head.ipynb")
        box = button.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], "the launch button is cut off"
        widths = {"index": page_width(page)}
        missing: list[str] = []
        page.screenshot(path=str(tmp_path / "phone_index.png"))
        for lesson in lessons():
            page.goto((built_site / "notebooks" / f"{lesson}.html").as_uri())
            page.wait_for_load_state("load")
            widths[lesson] = page_width(page)
            if widths[lesson] > PHONE["width"]:
                page.screenshot(path=str(tmp_path / f"phone_{lesson}.png"), full_page=True)
            missing.extend(f"{lesson}: {src}" for src in page.evaluate(FIGURE_CUE_JS))
        too_wide = {name: width for name, width in widths.items() if width > PHONE["width"]}
        assert not too_wide, f"pages wider than a {PHONE['width']} px phone (px): {too_wide}"
        assert not missing, f"figures wider than the phone's column with no cue or no link to open them: {missing}"
    finally:
        page.close()


def test_dark_mode_and_figures(built_site: Path, browser: Any, tmp_path: Path) -> None:
    """On a laptop screen (1440 x 900 CSS px) in dark mode every note, admonition and output reaches WCAG AA
    contrast; every figure sits undimmed on a white plate, at twice its displayed pixel density, with a
    one-sentence alt text, shown at its own size (the page column does not shrink it, so its text keeps
    the size tests/test_figure_plots.py measures)."""
    context = browser.new_context(viewport=LAPTOP, color_scheme="dark")  # layout only: 1x screenshots are quicker
    page = context.new_page()
    problems: list[str] = []
    try:
        for lesson in lessons():
            page.goto((built_site / "notebooks" / f"{lesson}.html").as_uri())
            page.wait_for_load_state("load")
            assert page.evaluate("document.documentElement.dataset.theme") == "dark", "the site ignores dark mode"
            for found in page.evaluate(CONTRAST_JS):
                if found["ratio"] < AA_CONTRAST:
                    problems.append(f"{lesson}: {found['selector']} {found['text']!r} contrast {found['ratio']:.2f}")
            for figure in page.evaluate(FIGURES_JS):
                where = f"{lesson}: figure {figure['src']}"
                if figure["background"] != WHITE or figure["filter"] not in ("none", ""):
                    problems.append(f"{where} on {figure['background']} with filter {figure['filter']}")
                if not real_alt_text(figure["alt"]):
                    problems.append(f"{where} has the alt text {figure['alt']!r}")
                if not 0 <= figure["natural"] - 2 * figure["attribute"] < 2:  # an odd width is halved down
                    problems.append(f"{where} is {figure['natural']} px for a width of {figure['attribute']} px")
                if figure["shown"] < figure["attribute"] - 1:
                    problems.append(f"{where} is shrunk to {figure['shown']:.0f} px from {figure['attribute']} px")
            notes = page.locator("article .lesson-widget-note")
            if notes.count():
                notes.first.scroll_into_view_if_needed()
                page.screenshot(path=str(tmp_path / f"dark_{lesson}_note.png"))
            images = page.locator("article .cell_output img")
            if images.count():
                images.first.scroll_into_view_if_needed()
                page.screenshot(path=str(tmp_path / f"dark_{lesson}_figure.png"))
        assert not problems, "\n".join(problems)
    finally:
        context.close()


# ---------------------------------------------------------------------------------------------------
# axe-core on every page, in light and in dark mode.

# The page at the top of the site forwards to site/index.html at once (a refresh after 0 s), before axe
# could read it: it is read without that line.
REFRESH = re.compile(r'<meta http-equiv="refresh"[^>]*>')
# What a reader sees after clicking: every solution and every folded output opened. An opened fold fades in
# (0.3 s): skip to the end of the fade, or axe measures the contrast of half-transparent text.
OPEN_FOLDS_JS = """
() => {
  document.querySelectorAll('details').forEach(details => { details.open = true; });
  document.getAnimations().filter(a => isFinite(a.effect.getComputedTiming().endTime)).forEach(a => a.finish());
}
"""


# Resolves once MathJax has typeset the page (its startup promise), at once on a page without it.
MATHJAX_DONE_JS = "() => window.MathJax?.startup?.promise ? window.MathJax.startup.promise.then(() => true) : true"


def site_pages(site: Path) -> list[Path]:
    """Every page of the built site: the landing page, the lessons, the search and index pages and the
    forwarding page at the top (not the theme's template fragments under _static/)."""
    return sorted(path for path in site.rglob("*.html") if not path.relative_to(site).parts[0].startswith("_"))


# The pages axe reads in the README's test command: the forwarding page, the landing page, and lesson 06
# (maths, figures, a widget's note, Predicts and solutions together); the theme's frame is the same on
# every page. `SITE_AXE_ALL=1` reads every page, as `.ci/run` does in a step of its own (about 50 s more).
AXE_SAMPLE = ("index.html", "site/index.html", "notebooks/06_grouped_query_attention.html")


def axe_pages(site: Path) -> list[Path]:
    """The pages the axe test reads: every page with ``SITE_AXE_ALL=1``, else `AXE_SAMPLE`."""
    pages = site_pages(site)
    if os.environ.get("SITE_AXE_ALL") == "1":
        return pages
    chosen = [path for path in pages if path.relative_to(site).as_posix() in AXE_SAMPLE]
    assert len(chosen) == len(AXE_SAMPLE), f"the site lacks a page of {AXE_SAMPLE}"
    return chosen


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_axe_finds_nothing_serious_on_any_page(
    built_site: Path, browser: Any, axe_ready: Path, mode: str, tmp_path: Path
) -> None:
    """axe-core (WCAG 2.0 to 2.2, levels A and AA, and its best practices) on a laptop screen, every fold
    opened, on `axe_pages` (three, or every page with ``SITE_AXE_ALL=1``): no critical or serious violation.
    The moderate and minor ones are counted by rule (printed, and saved in axe_<mode>.json with the elements
    they name)."""
    context = browser.new_context(viewport=LAPTOP, color_scheme=mode)
    page = context.new_page()
    refused: list[str] = []
    nodes: collections.Counter[str] = collections.Counter()
    pages: dict[str, set[str]] = collections.defaultdict(set)
    report: dict[str, list[dict[str, Any]]] = {}
    try:
        for path in axe_pages(built_site):
            name = path.relative_to(built_site).as_posix()
            if name == "index.html":
                stub, refreshes = REFRESH.subn("", path.read_text(encoding="utf-8"))
                assert refreshes == 1, f'{name} should forward with one <meta http-equiv="refresh">'
                page.set_content(stub)
            else:
                page.goto(path.as_uri())
                page.wait_for_load_state("load")
                theme = page.evaluate("document.documentElement.dataset.theme")
                assert theme == mode, f"{name} is in {theme} mode in a browser that prefers {mode}"
            page.evaluate(MATHJAX_DONE_JS)  # axe reads the page as typeset, not half-way
            page.evaluate(OPEN_FOLDS_JS)
            report[name] = found = axe_violations(page)
            refused.extend(f"{name}: {line}" for line in serious_violations(found))
            for violation in found:
                rule = f"{violation['id']} ({violation['impact']})"
                nodes[rule] += len(violation["nodes"])
                pages[rule].add(name)
        (tmp_path / f"axe_{mode}.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
        counts = ", ".join(f"{rule}: {nodes[rule]} on {len(pages[rule])} pages" for rule in sorted(nodes))
        print(f"axe-core, {len(report)} pages in {mode} mode: {counts or 'no violation'}")
        assert not refused, f"axe-core in {mode} mode:\n" + "\n".join(refused)
    finally:
        context.close()
