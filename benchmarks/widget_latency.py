"""Widget latency as a person feels it: from a control's change in the browser to the new picture painted.

    python benchmarks/widget_latency.py                # every control of the seven lesson widgets
    python benchmarks/widget_latency.py --changes 20   # more changes per control and round
    python benchmarks/widget_latency.py --rounds 3     # more first visits: each round shows fresh widgets
    python benchmarks/widget_latency.py --widgets HeadSharing InductionExplorer

Starts JupyterLab on a temporary folder holding one notebook that shows the seven widgets of lessons 05,
06, 09 and 10 (HeadExplorer, HeadReslicer, SplitExplorer, KVCacheCalculator, HeadSharing, InductionExplorer,
TextExplorer), opens it in headless Chromium (Debian's `/usr/bin/chromium` driven by Playwright, as the
browser tests do; `CHROMIUM=/path` picks another), runs it, and then changes every control as a person
does: picks the next option of a dropdown, clicks a toggle button or a checkbox, presses an arrow key on a
slider (on towards one end, then back), types into a text box and presses Enter (into a multi-line text
box, then Tab: it sends its text when it loses focus). A listener in the page notes the time of the input
event; an observer notes when the widget's image gets its new picture, waits until it is decoded and the
browser's next frame starts (it is then painted), and reports the time between. Before a control's changes
it clicks the widget's picture, untimed: JupyterLab makes a cell the active one on the first click inside
it, which costs the browser some 50 ms once per cell, not per change.

First visits: a change that brings its widget to a state it has not shown before (the controls' values,
read in the page once the picture has come) draws a picture no kept picture can stand for. They are the
slow ones, so they are reported on their own: per control, the median over its first visits and the
median over all its changes. Each of ``--rounds`` rounds (default 2) runs the notebook again, which shows
seven fresh widgets, every state new again, and then makes ``--changes`` changes per control (default
10). Target: both medians <= 150 ms for every discrete control, PASS/MISS per control; exits 1 on a miss.

A slider is also dragged with the mouse across its range in about half a second: the report says how many
pictures arrived during the drag and after the release, and how long after the release the last one came.
A slider that sends only its final value (``continuous_update=False``) draws once, after the release; one
that sent every intermediate value would queue pictures the learner no longer wants.

A burst: every dropdown with at least five options is changed four times 40 ms apart (its next four
options, as a learner holding an arrow key on it does; the page sends the changes itself, so they are 40
ms apart to the millisecond). The report says how many pictures arrived and when the last came after the
first change. A widget that draws every state of the burst sends four pictures, each once the one before
is drawn; one that draws only the burst's last state sends one.

Not a test: timings depend on the machine and on what else runs; the load average is printed beside them.
`LESSONS_PICTURE_CACHE=0` in the environment turns off the widgets' store of recent pictures (see
`lessons_lib.widgets.base`), to time every change drawing its picture.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TARGET_MS = 150.0
WIDGETS = {  # name -> the code of its cell (each cell shows one widget)
    "HeadExplorer": "from lessons_lib.widgets.head_widgets import HeadExplorer\nHeadExplorer()",
    "HeadReslicer": "from lessons_lib.widgets.head_widgets import HeadReslicer\nHeadReslicer()",
    "SplitExplorer": "from lessons_lib.widgets.head_widgets import SplitExplorer\nSplitExplorer()",
    "KVCacheCalculator": "from lessons_lib.widgets.cache_widgets import KVCacheCalculator\nKVCacheCalculator()",
    "HeadSharing": "from lessons_lib.widgets.cache_widgets import HeadSharing\nHeadSharing()",
    "InductionExplorer": "from lessons_lib.widgets.induction_widgets import InductionExplorer\nInductionExplorer()",
    "TextExplorer": "from lessons_lib.widgets.shakespeare_widgets import TextExplorer\nTextExplorer()",
}
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}
# Every kind of control the benchmark moves, as CSS classes (a multi-line text box is a .widget-textarea).
CONTROL_SELECTOR = ".widget-dropdown, .widget-slider, .widget-checkbox, .widget-toggle-buttons, .widget-text, " \
    ".widget-textarea"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
BURST_CHANGES, BURST_GAP_MS = 4, 40  # a burst: this many dropdown changes, this far apart

# In the page (given CONTROL_SELECTOR): window.lessonLatency.arm(widget) starts watching widget number
# `widget` (its top-level VBox in output order): the next input event inside it starts the clock and the
# next new picture of its image stops it, once decoded and at the start of the following frame. Every new
# picture is also counted. state(widget) reads its controls' values; burst(...) changes a dropdown quickly.
PROBE_JS = """
controls => {
  const roots = () => Array.from(document.querySelectorAll('.jp-OutputArea-output .widget-vbox'))
    .filter(box => !box.parentElement.closest('.widget-vbox'));
  const probe = {pictures: [], start: null, done: null, watching: null};
  probe.roots = roots;
  probe.arm = index => {
    const root = roots()[index];
    const img = root.querySelector('img');
    probe.start = null; probe.done = null; probe.pictures = [];
    if (probe.watching) { probe.watching.observer.disconnect(); probe.watching.stop(); }
    const onInput = event => { if (probe.start === null) probe.start = event.timeStamp; };
    const kinds = ['change', 'click', 'keydown', 'pointerdown'];
    kinds.forEach(kind => root.addEventListener(kind, onInput, true));
    const observer = new MutationObserver(async () => {
      const src = img.getAttribute('src');
      try { await img.decode(); } catch (error) { return; }
      if (img.getAttribute('src') !== src) return;  // replaced again meanwhile
      requestAnimationFrame(frame => {
        probe.pictures.push(frame);
        if (probe.done === null && probe.start !== null) probe.done = frame;
      });
    });
    observer.observe(img, {attributes: true, attributeFilter: ['src']});
    probe.watching = {observer, stop: () => kinds.forEach(kind => root.removeEventListener(kind, onInput, true))};
  };
  probe.result = () => (probe.done === null || probe.start === null) ? null : probe.done - probe.start;
  // The state widget `index` shows: every control's value, as the page has it.
  probe.state = index => Array.from(roots()[index].querySelectorAll(controls)).map(control => {
    const select = control.querySelector('select');
    if (select) return 'd' + select.selectedIndex;
    const handle = control.querySelector('.noUi-handle');
    if (handle) return 's' + handle.getAttribute('aria-valuenow');
    const pressed = control.querySelector('.mod-active');
    if (control.classList.contains('widget-toggle-buttons')) return 't' + (pressed ? pressed.textContent : '');
    const field = control.querySelector('input, textarea');
    return 'v' + (field.type === 'checkbox' ? field.checked : field.value);
  }).join('|');
  // A burst: `changes` changes of dropdown `position` of widget `index`, `gap` ms apart, each to the next
  // option, sent as the dropdown sends a learner's choice (its select's input and change events).
  probe.burst = (index, position, changes, gap) => {
    const select = roots()[index].querySelectorAll(controls)[position].querySelector('select');
    probe.arm(index);
    for (let k = 1; k <= changes; k++) {
      setTimeout(() => {
        select.selectedIndex = (select.selectedIndex + 1) % select.options.length;
        select.dispatchEvent(new Event('input', {bubbles: true}));
        select.dispatchEvent(new Event('change', {bubbles: true}));
      }, (k - 1) * gap);
    }
  };
  window.lessonLatency = probe;
}
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_notebook(path: Path, names: list[str]) -> None:
    cells: list[dict[str, Any]] = [
        {"cell_type": "code", "execution_count": None, "id": f"w{i}", "metadata": {}, "outputs": [],
         "source": WIDGETS[name]}
        for i, name in enumerate(names)
    ]
    notebook = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(notebook), encoding="utf-8")


def start_lab(base: Path) -> tuple[subprocess.Popen[bytes], str]:
    root = base / "root"
    root.mkdir()
    for relative, values in LAB_SETTINGS.items():
        target = base / "settings" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values), encoding="utf-8")
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(base / "config"), JUPYTER_RUNTIME_DIR=str(base / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(base / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"))
    # The lessons_lib the kernel imports: this checkout's, unless PYTHONPATH names another first.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH", ""), str(REPO)]))
    port, token = free_port(), secrets.token_hex(16)
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={root}", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               "--LabApp.news_url=None", "--ServerApp.terminals_enabled=False"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--ServerApp.allow_root=True")
    log = (base / "server.log").open("wb")
    process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            request = urllib.request.Request(f"{url}/api/status", headers={"Authorization": f"token {token}"})
            urllib.request.urlopen(request, timeout=5).read()
            return process, f"{url}/lab/tree/latency.ipynb?reset&token={token}"
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.5)
    process.terminate()
    raise SystemExit(f"JupyterLab did not start:\n{(base / 'server.log').read_text()}")


def run_all(page: Any, cells: int) -> None:
    """Run every cell (again, in a later round: fresh widgets) and wait until each new widget shows its picture."""
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_function("() => /\\|\\s*Idle\\b/.test(document.querySelector('.jp-StatusBar-Widget')?.innerText"
                           " ?? '')", timeout=90_000)
    page.evaluate("() => document.querySelectorAll('.jp-OutputArea-output img').forEach(img => img.dataset.old = 1)")
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()
    page.wait_for_function(
        f"() => Array.from(document.querySelectorAll('.jp-OutputArea-output .widget-vbox img'))"
        f".filter(img => img.naturalWidth > 0 && !img.dataset.old).length >= {cells}", timeout=180_000)
    page.wait_for_timeout(1000)  # let the last pictures settle before the clock starts


def controls_of(page: Any, index: int) -> list[dict[str, Any]]:
    """Each control of widget ``index``: its kind, description, (a dropdown) number of options and whether it
    is disabled (HeadReslicer's "heads shown" while every head fits), in display order."""
    found: list[dict[str, Any]] = page.evaluate(
        """([index, controls]) => Array.from(window.lessonLatency.roots()[index].querySelectorAll(controls))
           .map(e => ({kind: e.classList.contains('widget-dropdown') ? 'dropdown'
                           : e.classList.contains('widget-slider') ? 'slider'
                           : e.classList.contains('widget-checkbox') ? 'checkbox'
                           : e.classList.contains('widget-toggle-buttons') ? 'toggle'
                           : e.classList.contains('widget-textarea') ? 'textarea'
                           : e.querySelector('input[type=number]') ? 'number' : 'text',
                       label: (e.querySelector('.widget-label')?.textContent || '').replace(/\u200b/g, '').trim()
                              || (e.querySelector('.widget-label-basic')?.textContent || '').trim(),
                       options: e.querySelector('select')?.options.length ?? 0,
                       disabled: Boolean(e.querySelector('select, input, textarea, button')?.disabled)}))""",
        [index, CONTROL_SELECTOR],
    )
    return found


def control_handle(page: Any, index: int, position: int) -> Any:
    """The element of control ``position`` of widget ``index``."""
    roots = page.evaluate_handle("() => window.lessonLatency.roots()")
    root = roots.evaluate_handle(f"roots => roots[{index}]").as_element()
    return root.query_selector_all(CONTROL_SELECTOR)[position]


def state(page: Any, index: int) -> str:
    return str(page.evaluate("index => window.lessonLatency.state(index)", index))


def time_changes(page: Any, index: int, position: int, kind: str, changes: int,
                 seen: set[str]) -> list[tuple[float, bool]]:
    """``changes`` changes of control ``position`` of widget ``index``: for each that brought a new picture,
    its time in ms and whether it was a first visit (a state not in ``seen``, the states the widget has shown)."""
    control = control_handle(page, index, position)
    select = control.query_selector("select") if kind == "dropdown" else None
    start_index = int(select.evaluate("s => s.selectedIndex")) if select else 0
    # A click on the widget's picture first (untimed): JupyterLab makes a cell the active one on the first
    # click inside it, which takes the browser some 50 ms; that is the notebook's, once per cell, not the widget's.
    page.evaluate("index => window.lessonLatency.roots()[index].querySelector('img').scrollIntoView({block: 'center'})",
                  index)
    page.evaluate_handle(f"() => window.lessonLatency.roots()[{index}].querySelector('img')").as_element().click()
    page.wait_for_timeout(300)
    times: list[tuple[float, bool]] = []
    walk = {"direction": 1}
    for step in range(changes):
        page.evaluate("index => window.lessonLatency.arm(index)", index)
        change_with_handle(control, kind, step, walk)
        try:
            page.wait_for_function("() => window.lessonLatency.result() !== null", timeout=5_000)
        except Exception:  # no new picture: report it, keep measuring
            # e.g. InductionExplorer's "typed below", which keeps the tokens and so the picture
            print(f"    change {step}: no new picture within 5 s (left out of the medians)")
            seen.add(state(page, index))
            continue
        page.wait_for_timeout(150)  # let late pictures of this change (and other controls' updates) arrive
        now = state(page, index)
        times.append((float(page.evaluate("() => window.lessonLatency.result()")), now not in seen))
        seen.add(now)
    if select and int(select.evaluate("s => s.selectedIndex")) != start_index:
        # Back to where it started (untimed), so the next control starts from the widget's own state:
        # HeadSharing's h_kv offers one option only when h has come round to 1.
        select.select_option(index=start_index)
        page.wait_for_timeout(1000)
        seen.add(state(page, index))
    return times


def change_with_handle(control: Any, kind: str, step: int, walk: dict[str, int]) -> None:
    """Change ``control`` (an ElementHandle) once, as a person does; a slider walks on to one end, then back."""
    if kind == "dropdown":
        select = control.query_selector("select")
        options = int(select.evaluate("s => s.options.length"))
        current = int(select.evaluate("s => s.selectedIndex"))
        select.select_option(index=(current + 1) % options)
    elif kind == "slider":
        handle = control.query_selector(".noUi-handle")
        handle.focus()
        now, low, high = (handle.get_attribute(a) for a in ("aria-valuenow", "aria-valuemin", "aria-valuemax"))
        if now == high:
            walk["direction"] = -1
        elif now == low:
            walk["direction"] = 1
        handle.press("ArrowLeft" if walk["direction"] < 0 else "ArrowRight")
    elif kind == "checkbox":
        control.query_selector("input").click()
    elif kind == "toggle":
        control.query_selector("button:not(.mod-active)").click()
    elif kind == "textarea":  # a new text each time (its words rotated by one), sent when the box loses focus
        field = control.query_selector("textarea")
        words = field.input_value().split()
        field.fill(" ".join(words[1:] + words[:1]))
        field.press("Tab")
    else:
        field = control.query_selector("input")
        if kind == "number":
            value = int(field.input_value())
            field.fill(str(value * 2 if step % 2 == 0 else max(1, value // 2)))
        else:
            field.fill(" ".join(reversed(field.input_value().split())))
        field.press("Enter")


def drag_slider(page: Any, index: int, position: int) -> dict[str, float]:
    """Drag a slider's handle across its track in ~0.5 s; count the pictures during and after the drag."""
    control = control_handle(page, index, position)
    handle = control.query_selector(".noUi-handle").bounding_box()
    track = control.query_selector(".noUi-base").bounding_box()
    page.evaluate("index => window.lessonLatency.arm(index)", index)
    y = handle["y"] + handle["height"] / 2
    page.mouse.move(handle["x"] + handle["width"] / 2, y)
    page.mouse.down()
    begin = float(page.evaluate("() => performance.now()"))
    steps = 20
    for k in range(1, steps + 1):
        page.mouse.move(track["x"] + track["width"] * k / steps, y)
        page.wait_for_timeout(25)
    released = float(page.evaluate("() => performance.now()"))
    page.mouse.up()
    page.wait_for_timeout(3000)
    pictures = [float(t) for t in page.evaluate("() => window.lessonLatency.pictures")]
    during = sum(begin <= t < released for t in pictures)
    after = [t for t in pictures if t >= released]
    return {"drag_ms": released - begin, "during": during, "after": len(after),
            "last_after_release_ms": (max(after) - released) if after else float("nan")}


def burst(page: Any, index: int, position: int) -> dict[str, float]:
    """`BURST_CHANGES` changes of a dropdown `BURST_GAP_MS` apart: how many pictures came, and the last when."""
    control = control_handle(page, index, position)
    select = control.query_selector("select")
    start_index = int(select.evaluate("s => s.selectedIndex"))
    page.evaluate("([index, position, changes, gap]) => window.lessonLatency.burst(index, position, changes, gap)",
                  [index, position, BURST_CHANGES, BURST_GAP_MS])
    page.wait_for_timeout(BURST_CHANGES * BURST_GAP_MS + 3000)
    start = page.evaluate("() => window.lessonLatency.start")
    pictures = [float(t) for t in page.evaluate("() => window.lessonLatency.pictures")]
    select.select_option(index=start_index)  # back, untimed
    page.wait_for_timeout(1000)
    return {"pictures": len(pictures),
            "last_ms": (max(pictures) - float(start)) if pictures and start is not None else float("nan")}


def median_text(times: list[float]) -> str:
    if not times:
        return f"{'-':>6}   {'':19}"
    return f"{statistics.median(times):6.0f}   (max {max(times):5.0f}, n={len(times):2d})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=10, help="changes per control and round (default 10)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, each with fresh widgets (default 2)")
    parser.add_argument("--widgets", nargs="*", default=list(WIDGETS), choices=list(WIDGETS))
    parser.add_argument("--no-bursts", action="store_true", help="skip the bursts")
    args = parser.parse_args(argv)
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    from playwright.sync_api import sync_playwright

    def load() -> str:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())

    print(f"load average at the start: {load()}; {args.rounds} rounds of {args.changes} changes per control; "
          f"target: median <= {TARGET_MS:.0f} ms per discrete control, over its first visits and over all its "
          f"changes; LESSONS_PICTURE_CACHE={os.environ.get('LESSONS_PICTURE_CACHE', 'unset')}, "
          f"LESSONS_SETTLE_MS={os.environ.get('LESSONS_SETTLE_MS', 'unset')}")
    results: dict[tuple[int, int], list[tuple[float, bool]]] = {}
    described: dict[tuple[int, int], dict[str, Any]] = {}
    drags: dict[tuple[int, int], list[dict[str, float]]] = {}
    bursts: dict[tuple[int, int], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="widget_latency_") as folder:
        base = Path(folder)
        process, url = start_lab(base)
        write_notebook(base / "root" / "latency.ipynb", args.widgets)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
                page = browser.new_page(viewport={"width": 1440, "height": 900}, device_scale_factor=2)
                page.goto(url)
                for round_number in range(args.rounds):
                    run_all(page, len(args.widgets))
                    page.evaluate(PROBE_JS, CONTROL_SELECTOR)
                    for index in range(len(args.widgets)):
                        seen = {state(page, index)}  # a fresh widget: its first state only
                        for position, control in enumerate(controls_of(page, index)):
                            key = (index, position)
                            described[key] = control
                            if control["disabled"]:  # nothing a learner can change
                                continue
                            times = time_changes(page, index, position, control["kind"], args.changes, seen)
                            results.setdefault(key, []).extend(times)
                            if control["kind"] == "slider":
                                drags.setdefault(key, []).append(drag_slider(page, index, position))
                                seen.add(state(page, index))
                            if control["kind"] == "dropdown" and control["options"] >= 5 and not args.no_bursts:
                                bursts.setdefault(key, []).append(burst(page, index, position))
                                seen.add(state(page, index))
                    print(f"round {round_number + 1} done, load average {load()}", flush=True)
                browser.close()
        finally:
            process.terminate()
            process.wait(timeout=20)
    misses = 0
    print(f"\n{'widget':18} {'control':18} {'kind':8}   first visits: median (ms)      all changes: median (ms)")
    for (index, position), control in described.items():
        name, label = args.widgets[index], control["label"] or control["kind"]
        if (index, position) not in results:
            print(f"{name:18} {label:18} {control['kind']:8}   disabled: nothing to change")
            continue
        times = results[(index, position)]
        first = [t for t, new in times if new]
        every = [t for t, _ in times]
        medians = [statistics.median(x) for x in (first, every) if x]
        verdict = "PASS" if every and all(m <= TARGET_MS for m in medians) else "MISS"
        misses += verdict == "MISS"
        print(f"{name:18} {label:18} {control['kind']:8}   {median_text(first)}   {median_text(every)}   {verdict}")
        for drag in drags.get((index, position), []):
            print(f"{'':18} {'(mouse drag)':18} {'slider':8}   {drag['drag_ms']:.0f} ms drag: {drag['during']:.0f} "
                  f"pictures during it, {drag['after']:.0f} after the release, the last "
                  f"{drag['last_after_release_ms']:.0f} ms after it")
        for result in bursts.get((index, position), []):
            print(f"{'':18} {'(burst)':18} {'dropdown':8}   {BURST_CHANGES} changes {BURST_GAP_MS} ms apart: "
                  f"{result['pictures']:.0f} pictures, the last {result['last_ms']:.0f} ms after the first change")
    print(f"load average at the end: {load()}")
    print(f"{'all PASS' if not misses else f'{misses} MISS'}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
