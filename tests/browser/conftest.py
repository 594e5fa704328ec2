"""Fixtures for the browser tests: one JupyterLab server and one headless Chromium per module.

The browser tests need two things that `pip install -r requirements.txt` alone does not give:

* the Playwright Python package (pinned in requirements.txt), and
* a Chromium binary. We drive the system one (`/usr/bin/chromium` from Debian's `chromium`
  package; `bash scripts/install_browser.sh` installs it). We never run `playwright install`:
  it downloads a browser build of its own, which this project does not rely on.

When either is missing the tests SKIP with a message that says how to install it.
`CHROMIUM=/path/to/chromium` picks another binary.

The server (`lab_server`) runs on a copy of `notebooks/` in a temporary folder (`learner_lab`: on the
learner copy that `several-heads prepare` writes there), with fresh JupyterLab settings,
workspaces and runtime folders, so running cells in the browser never touches the committed
notebooks and no state leaks in from the machine's own JupyterLab configuration.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from axe_check import AXE_VERSION, fetch_axe

REPO = Path(__file__).resolve().parents[2]
# Where the lessons are read from. Override only to try the suite on other notebooks.
NOTEBOOKS = Path(os.environ.get("BROWSER_TEST_NOTEBOOKS", REPO / "notebooks"))

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL_CHROMIUM = (
    "no Chromium found: install Debian's browser with `bash scripts/install_browser.sh` "
    "(as root: apt-get install chromium) or point CHROMIUM=/path/to/chromium at one"
)
INSTALL_PLAYWRIGHT = (
    "the playwright package is not importable: `pip install -r requirements.txt` installs it "
    "(never run `playwright install`; the tests drive the system Chromium)"
)
SERVER_START_SECONDS = 90.0
_SHUTTING_DOWN: list[threading.Thread] = []  # kernels being shut down in the background

# JupyterLab user settings for the test server. Windowing off: every cell stays in the page, so
# the tests can read every prompt and output. Autosave off: nothing is written back, even to the copy.
LAB_SETTINGS: dict[str, dict[str, Any]] = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def notebook_paths() -> list[Path]:
    """Every notebook the suite runs, in lesson order."""
    return sorted(NOTEBOOKS.glob("*.ipynb"))


WIDGET_MARKERS = ("ipywidgets", "lessons_lib.widgets")


def uses_widgets(path: Path) -> bool:
    """True when any code cell of the notebook mentions ipywidgets or our widget package."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return any(
        cell["cell_type"] == "code" and any(marker in "".join(cell["source"]) for marker in WIDGET_MARKERS)
        for cell in cells
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One browser test per notebook file (``notebook``), or per lesson with widgets
    (``widget_notebook``: only a browser can show that a widget renders and answers; strict nbval
    already runs every lesson), named after the file."""
    if "notebook" in metafunc.fixturenames:
        paths = notebook_paths()
        metafunc.parametrize("notebook", paths, ids=[path.name for path in paths])
    if "widget_notebook" in metafunc.fixturenames:
        paths = [path for path in notebook_paths() if uses_widgets(path)]
        metafunc.parametrize("widget_notebook", paths, ids=[path.name for path in paths])


def find_chromium() -> str | None:
    """Return the Chromium executable to drive, or None when there is none."""
    chosen = os.environ.get("CHROMIUM")
    if chosen:
        return chosen if Path(chosen).is_file() else None
    for candidate in CHROMIUM_CANDIDATES:
        if Path(candidate).is_file():
            return candidate
    return shutil.which("chromium")


def free_port() -> int:
    """Ask the OS for a free TCP port on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class LabServer:
    """A running JupyterLab server: where it listens and the token that opens it."""

    base_url: str
    token: str
    root: Path
    log: Path

    def url(self, path: str) -> str:
        """Full URL of ``path`` (no leading slash) with the token attached."""
        joiner = "&" if "?" in path else "?"
        return f"{self.base_url}/{path}{joiner}token={self.token}"

    def api(self, method: str, path: str) -> Any:
        """Call the server's REST API; return the decoded JSON body (None when empty)."""
        request = urllib.request.Request(
            f"{self.base_url}/{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shut_down_kernels(self) -> None:
        """Delete every session (and so its kernel), in the background: the next notebook starts a fresh
        kernel of its own, so nothing waits for the old ones to stop (a kernel takes a second or two).
        The server waits for these deletions before it stops."""
        sessions = [session["id"] for session in self.api("GET", "api/sessions")]

        def delete() -> None:
            for session in sessions:
                with contextlib.suppress(OSError):  # already gone, or the server is stopping
                    self.api("DELETE", f"api/sessions/{session}")

        worker = threading.Thread(target=delete, daemon=True)
        worker.start()
        _SHUTTING_DOWN.append(worker)


def write_lab_settings(settings_dir: Path) -> None:
    """Write the LAB_SETTINGS files into a JupyterLab user-settings folder."""
    for relative, values in LAB_SETTINGS.items():
        path = settings_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")


def wait_until_answering(server: LabServer, process: subprocess.Popen[bytes]) -> None:
    """Poll /api/status until the server answers; fail with its log if it dies or never answers."""
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"JupyterLab exited with code {process.returncode}:\n{server.log.read_text()}")
        try:
            server.api("GET", "api/status")
            return
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.5)
    pytest.fail(f"JupyterLab did not answer within {SERVER_START_SECONDS:.0f} s:\n{server.log.read_text()}")


@pytest.fixture(scope="session")
def axe_ready() -> Path:
    """axe-core on disk, or SKIP when it cannot be downloaded (it needs the network once; then build/ keeps it)."""
    try:
        return fetch_axe()
    except (urllib.error.URLError, OSError) as error:
        pytest.skip(f"axe-core {AXE_VERSION} could not be downloaded from the npm registry ({error})")


@pytest.fixture(scope="session")
def axe_if_ready() -> Path | None:
    """axe-core on disk, or None with a warning when it cannot be downloaded: for a test that checks more than
    axe does, which then runs without its axe step instead of being skipped whole."""
    try:
        return fetch_axe()
    except (urllib.error.URLError, OSError) as error:
        warnings.warn(f"axe-core {AXE_VERSION} could not be downloaded ({error}): the axe step is left out",
                      stacklevel=1)
        return None


@pytest.fixture(scope="module")
def playwright_api() -> Any:
    """The playwright.sync_api module, or SKIP when it or Chromium is missing."""
    if find_chromium() is None:
        pytest.skip(INSTALL_CHROMIUM)
    try:
        import playwright.sync_api as sync_api
    except ImportError:
        pytest.skip(INSTALL_PLAYWRIGHT)
    return sync_api


@contextlib.contextmanager
def running_lab(base: Path, root: Path) -> Iterator[LabServer]:
    """JupyterLab serving ``root``, with its settings and runtime files under ``base``; always stopped."""
    write_lab_settings(base / "settings")
    env = dict(os.environ)
    env.update(
        JUPYTER_CONFIG_DIR=str(base / "config"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
    )
    port, token = free_port(), secrets.token_hex(16)
    server = LabServer(base_url=f"http://127.0.0.1:{port}", token=token, root=root, log=base / "server.log")
    command = [
        sys.executable, "-m", "jupyter", "lab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=None",
        "--LabApp.extension_manager=readonly",
        "--ServerApp.terminals_enabled=False",
    ]  # fmt: skip
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--ServerApp.allow_root=True")  # CI and containers run as root
    with server.log.open("wb") as log:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_answering(server, process)
            yield server
        finally:
            for worker in _SHUTTING_DOWN:
                worker.join(timeout=30)
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@pytest.fixture(scope="module")
def lab_server(playwright_api: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """Start JupyterLab on a copy of notebooks/ on a free loopback port; always stop it."""
    base = tmp_path_factory.mktemp("jupyterlab")
    root = base / "root"
    shutil.copytree(NOTEBOOKS, root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    with running_lab(base, root) as server:
        yield server


@pytest.fixture(scope="module")
def learner_lab(playwright_api: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """JupyterLab on a learner copy written by `several-heads prepare`, as `several-heads lab` serves it."""
    from lessons_lib import cli

    base = tmp_path_factory.mktemp("learner")
    root = base / "my-lessons"
    assert cli.main(["prepare", str(root)]) == 0
    with running_lab(base, root) as server:
        yield server


@pytest.fixture(scope="module")
def browser(playwright_api: Any) -> Iterator[Any]:
    """One headless Chromium for the whole module, closed at the end."""
    with playwright_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=find_chromium(), headless=True, args=CHROMIUM_FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()
