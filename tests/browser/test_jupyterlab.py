"""Every lesson with widgets, opened and run in real JupyterLab in headless Chromium, as a learner would.

For each lesson whose code uses ipywidgets (05, 06 and 09 today) the test opens the notebook in
JupyterLab, runs Run > Run All Cells from the menu bar, waits until every code cell has an
execution count, and then checks:

* no cell shows output on stderr (tracebacks and warnings render there in JupyterLab),
* no widget failed to render ("Error displaying widget"),
* every picture in the outputs (figures and widget pictures) has an alt text, and axe-core finds no
  critical or serious problem in the outputs,
* in the widget lessons (the source mentions ipywidgets), every slider moved with the keyboard,
  every dropdown changed with the mouse and every text box retyped (then Enter) makes the displayed
  figure or text change.

nbval (the strict notebook check) already runs every lesson and proves the Python side; this proves
the page side of the lessons that need a browser: the widget manager, the front-end packages and
the widgets' renderers. The lessons without widgets show only text and images, which the site test
(tests/browser/test_site.py) reads in Chromium, and tests/browser/test_exercises.py walks a learner
through an exercise in JupyterLab.
Screenshots (after Run All, of a control that changed nothing, and of the last state) land in pytest's
tmp_path for each notebook (`pytest --basetemp=DIR` keeps them in DIR).

Fixtures (server, browser, skip rules) and the one-test-per-notebook parametrisation live in
conftest.py beside this file.
"""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from axe_check import axe_violations, serious_violations

RUN_ALL_SECONDS = 180.0
KERNEL_READY_SECONDS = 90.0
WIDGET_UPDATE_SECONDS = 20.0
STILL_SECONDS = 0.1  # the outputs unchanged this long after a change: it has all arrived
VIEWPORT = {"width": 1280, "height": 1000}
EXECUTED_PROMPT = re.compile(r"^\[\d+\]:$")

# Everything the learner sees in the output areas, minus the controls themselves (their own readout
# changes whenever they move, which proves nothing about the figure they drive).
SNAPSHOT_JS = """
() => Array.from(document.querySelectorAll('.jp-Notebook .jp-OutputArea')).map(area => {
  const clone = area.cloneNode(true);
  clone.querySelectorAll('.widget-readout, select, input, textarea, .noUi-base').forEach(e => e.remove());
  // A widget's picture has a short blob: URL; a figure's data: URL is long and never changes here, so only its
  // length and tail are kept (the whole of it would cross from the page to the test on every snapshot).
  const images = Array.from(area.querySelectorAll('img')).map(img => {
    const src = img.getAttribute('src') || '';
    return src.length > 256 ? src.length + ':' + src.slice(-128) : src;
  });
  return clone.textContent + '\\n' + images.join('\\n');
}).join('\\n----\\n')
"""

# For every non-empty code cell: its prompt text ("[3]:", "[*]:", "[ ]:").
PROMPTS_JS = """
() => Array.from(document.querySelectorAll('.jp-Notebook .jp-CodeCell')).map(cell => {
  const source = cell.querySelector('.jp-InputArea-editor');
  const prompt = cell.querySelector('.jp-InputArea-prompt');
  return {source: source ? source.textContent.trim() : '', prompt: prompt ? prompt.textContent.trim() : ''};
})
"""

STDERR_JS = """
() => Array.from(document.querySelectorAll(
  '.jp-Notebook .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
)).map(e => e.innerText)
"""


# The prompt of every output area holding a picture with no alt text: every figure and every widget picture
# must carry words (lessons_lib/plotting/alt_text.py, lessons_lib/widgets/access.py).
UNNAMED_IMAGES_JS = """
() => Array.from(document.querySelectorAll('.jp-Notebook .jp-OutputArea img'))
  .filter(img => !(img.getAttribute('alt') || '').trim())
  .map(img => (img.closest('.jp-CodeCell')?.querySelector('.jp-InputArea-prompt')?.textContent || '?').trim())
"""


def code_cell_count(path: Path) -> int:
    """Number of code cells stored in the notebook file."""
    return sum(cell.cell_type == "code" for cell in nbformat.read(path, as_version=4).cells)  # type: ignore[no-untyped-call]


def wait_for_kernel(page: Any) -> None:
    """Wait until the status bar reports the kernel as idle (kernel started and connected)."""
    page.wait_for_function(
        "() => /\\|\\s*Idle\\b/.test(document.querySelector('.jp-StatusBar-Widget')?.innerText ?? '')",
        timeout=KERNEL_READY_SECONDS * 1000,
    )


def run_all_cells(page: Any) -> None:
    """Run > Run All Cells, through the menu bar like a person."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()


def stderr_texts(page: Any) -> list[str]:
    """Text of every output the page renders as stderr (warnings, tracebacks), non-empty only."""
    return [text for text in page.evaluate(STDERR_JS) if text.strip()]


def wait_until_executed(page: Any, name: str) -> list[dict[str, str]]:
    """Wait until every non-empty code cell shows an execution count and the kernel is idle.

    Run All stops at the first cell that raises; the later cells then never get a count, so a
    traceback on the page ends the wait at once instead of after RUN_ALL_SECONDS.
    """
    deadline = time.monotonic() + RUN_ALL_SECONDS
    pending: list[str] = []
    while time.monotonic() < deadline:
        prompts = page.evaluate(PROMPTS_JS)
        pending = [p["prompt"] for p in prompts if p["source"] and not EXECUTED_PROMPT.match(p["prompt"])]
        if not pending:
            wait_for_kernel(page)
            return list(prompts)
        if "[*]:" not in pending and any("Traceback" in text or "Error" in text for text in stderr_texts(page)):
            pytest.fail(f"{name}: Run All stopped at an error:\n" + "\n---\n".join(stderr_texts(page)))
        time.sleep(0.25)
    pytest.fail(f"{name}: cells still not executed after {RUN_ALL_SECONDS:.0f} s (prompts {pending})")


# What a screen reader gets from the lesson widgets: each widget's picture in words (a span kept out of
# sight under its readout), any element whose tooltip ipywidgets filled with "null", and any widget view
# that failed in the front end (ipywidgets shows "Click to show javascript error." in its place).
ACCESS_JS = """
() => ({
  words: Array.from(document.querySelectorAll('.jp-Notebook .lesson-widget')).map(box => {
    const span = box.querySelector('.lesson-sr-only');
    const hidden = span && span.getBoundingClientRect().width <= 1;
    return span ? (hidden ? span.textContent.trim() : 'VISIBLE: ' + span.textContent.trim()) : '';
  }),
  nulls: Array.from(document.querySelectorAll('.jp-Notebook .lesson-widget [title="null"]')).map(
    e => (e.className || e.tagName) + ' in ' + (e.parentElement ? e.parentElement.className : '')),
  broken: document.querySelectorAll('.jp-Notebook .jupyter-widgets-error-widget').length,
})
"""


def assert_clean_page(page: Any, name: str, when: str) -> None:
    """Fail when any cell shows stderr output, a widget (or a part of one) failed to render, a lesson
    widget has no picture in words for screen readers, or a control shows a "null" tooltip."""
    stderr = stderr_texts(page)
    assert not stderr, f"{name} ({when}): a cell wrote to stderr:\n" + "\n---\n".join(stderr)
    notebook_text = page.locator(".jp-NotebookPanel .jp-Notebook").inner_text()
    assert "Error displaying widget" not in notebook_text, f"{name} ({when}): a widget failed to render"
    found = page.evaluate(ACCESS_JS)
    assert not found["broken"], f"{name} ({when}): {found['broken']} widget views failed in the front end"
    assert all(text.startswith("The picture above: ") and len(text) > 60 for text in found["words"]), (
        f"{name} ({when}): a lesson widget's picture has no words for a screen reader: {found['words']}"
    )
    assert not found["nulls"], f"{name} ({when}): elements with a 'null' tooltip: {found['nulls']}"


def snapshot(page: Any) -> str:
    """What the output areas show right now, without the controls' own readouts."""
    return str(page.evaluate(SNAPSHOT_JS))


def wait_for_change(page: Any, before: str) -> bool:
    """True once the outputs differ from ``before`` and then stay the same for STILL_SECONDS (a widget's
    picture and its readout arrive as separate messages: the next control's "before" must not be taken
    between them); False after WIDGET_UPDATE_SECONDS."""
    deadline = time.monotonic() + WIDGET_UPDATE_SECONDS
    while time.monotonic() < deadline:
        now = snapshot(page)
        if now == before:
            time.sleep(0.2)
            continue
        while time.monotonic() < deadline:  # it changed: wait until the rest of the change has come too
            time.sleep(STILL_SECONDS)
            later = snapshot(page)
            if later == now:
                break
            now = later
        return True
    return False


def control_label(control: Any) -> str:
    """The description text shown beside a widget control, for failure messages."""
    label = control.locator(".widget-label")
    text = label.first.inner_text().strip() if label.count() else ""
    return text or "(no description)"


def move_slider(page: Any, slider: Any) -> None:
    """Focus the slider handle and press an arrow key, like a keyboard user; back off at the end."""
    handle = slider.locator(".noUi-handle").first
    readout = slider.locator(".widget-readout").first
    start = readout.inner_text() if readout.count() else None
    handle.focus()
    handle.press("ArrowRight")
    if readout.count():
        page.wait_for_timeout(300)
        if readout.inner_text() == start:  # already at the maximum: go the other way
            handle.press("ArrowLeft")
            handle.press("ArrowLeft")


def change_dropdown(dropdown: Any) -> None:
    """Pick the next option of a dropdown (wrapping round), as a person would with the mouse."""
    select = dropdown.locator("select").first
    options = select.locator("option").count()
    current = int(select.evaluate("s => s.selectedIndex"))
    select.select_option(index=(current + 1) % options)


def retype_text(box: Any) -> None:
    """Type the box's words in reverse order and press Enter, as a learner editing token ids would."""
    field = box.locator('input[type="text"]').first
    words = field.input_value().split()
    field.fill(" ".join(reversed(words)) if len(words) > 1 else "1 2 3")
    field.press("Enter")


# For every widget control: whether its option texts and its text fit (a dropdown's longest option, measured
# in the select's own font, plus room for the arrow; a text box's whole value), and whether its label sits
# beside it (inline, on the same line) rather than above it.
CONTROLS_FIT_JS = """
() => {
  const canvas = document.createElement('canvas').getContext('2d');
  const width = (text, element) => {
    canvas.font = getComputedStyle(element).font;
    return canvas.measureText(text).width;
  };
  const found = [];
  for (const control of document.querySelectorAll('.jp-Notebook .widget-vbox .widget-inline-hbox')) {
    const label = control.querySelector('.widget-label');
    const name = label ? label.textContent.trim() : '';
    const select = control.querySelector('select');
    const input = control.querySelector('input[type="text"]');
    const field = select || input || control.querySelector('.noUi-target, input');
    if (label && field && label.textContent.trim()) {
      const a = label.getBoundingClientRect(), b = field.getBoundingClientRect();
      if (a.bottom <= b.top + 2 || a.right > b.left + 2) found.push(name + ': the label is not beside its control');
    }
    if (select) {
      const longest = Math.max(...Array.from(select.options).map(option => width(option.text, select)));
      if (longest + 24 > select.clientWidth) {
        found.push(`${name}: options need ${Math.round(longest + 24)} px, the box is ${select.clientWidth} px`);
      }
    }
    if (input && input.scrollWidth > input.clientWidth + 1) {
      found.push(`${name}: its text needs ${input.scrollWidth} px, the box is ${input.clientWidth} px`);
    }
  }
  return found;
}
"""


def exercise_widgets(page: Any, name: str, shots: Path) -> int:
    """Drive every enabled slider, dropdown and text box once; assert each changes what is displayed."""
    page.wait_for_selector(".jp-Notebook .jupyter-widgets", timeout=30_000)
    sliders = page.locator(".jp-Notebook .widget-slider:not(.mod-disabled)")
    dropdowns = page.locator(".jp-Notebook .widget-dropdown:not(.mod-disabled)")
    texts = page.locator('.jp-Notebook .widget-text:not(.mod-disabled):has(input[type="text"])')
    controls = [("slider", sliders.nth(i)) for i in range(sliders.count())]
    controls += [("dropdown", dropdowns.nth(i)) for i in range(dropdowns.count())]
    controls += [("text", texts.nth(i)) for i in range(texts.count())]
    assert controls, f"{name}: the notebook uses widgets but no slider, dropdown or text box rendered"
    assert page.locator(".jp-Notebook .lesson-widget img").count(), f"{name}: no lesson widget's picture rendered"
    cramped = page.evaluate(CONTROLS_FIT_JS)
    assert not cramped, f"{name}: widget controls that cut their text or put their label above them: {cramped}"
    for index, (kind, control) in enumerate(controls):
        control.scroll_into_view_if_needed()
        before = snapshot(page)
        if kind == "slider":
            move_slider(page, control)
        elif kind == "dropdown":
            change_dropdown(control)
        else:
            retype_text(control)
        if wait_for_change(page, before):
            continue
        page.screenshot(path=str(shots / f"{index:02d}_{kind}.png"))  # only when it failed: 0.1 s each
        raise AssertionError(
            f"{name}: changing the {kind} '{control_label(control)}' did not change any figure or text "
            f"within {WIDGET_UPDATE_SECONDS:.0f} s (screenshot {shots / f'{index:02d}_{kind}.png'})"
        )
    return len(controls)


# What the focused element is, for the keyboard walk: its kind, which lesson widget box it sits in (-1: none),
# a key naming the control (a toggle group is one control), and the notebook's active cell.
FOCUSED_JS = """
() => {
  const e = document.activeElement;
  const boxes = Array.from(document.querySelectorAll('.jp-Notebook .lesson-widget'));
  const box = e ? e.closest('.lesson-widget') : null;
  const cells = Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell'));
  const active = cells.findIndex(c => c.classList.contains('jp-mod-active'));
  let kind = 'other';
  if (e && e.matches('select')) kind = 'select';
  else if (e && e.matches('.widget-toggle-button')) kind = 'toggle';
  else if (e && e.matches('.noUi-handle')) kind = 'slider';
  else if (e && e.matches('input[type="checkbox"]')) kind = 'checkbox';
  else if (e && e.matches('input[type="number"]')) kind = 'number';
  else if (e && e.matches('input[type="text"]')) kind = 'text';
  else if (e && e.matches('textarea')) kind = 'textarea';
  const CONTROL = '.widget-toggle-buttons, .widget-inline-hbox, .widget-checkbox';
  const control = e ? e.closest(CONTROL) : null;
  const FOCUSABLE = 'select, button, .noUi-handle, input, textarea';
  const controls = box ? Array.from(box.querySelectorAll(CONTROL)).filter(c => c.querySelector(FOCUSABLE)) : [];
  const label = control ? (control.querySelector('.widget-label')?.textContent.trim() || '') : '';
  return {kind, box: boxes.indexOf(box), control: controls.indexOf(control), controls: controls.length, label, active,
          pressed: e ? e.getAttribute('aria-pressed') : null, value: e && 'value' in e ? String(e.value) : null,
          now: e && e.getAttribute('aria-valuenow')};
}
"""

# What the widgets tell a screen reader, per lesson widget box: each picture's alt and the words under the
# readout, each slider handle's name, each toggle button's aria-pressed against its look, the live region.
ANNOUNCED_JS = """
() => Array.from(document.querySelectorAll('.jp-Notebook .lesson-widget')).map(box => {
  const words = box.querySelector('.lesson-sr-only');
  return {
    alts: Array.from(box.querySelectorAll('img')).map(img => img.getAttribute('alt')),
    words: words ? words.textContent.trim().replace(/^The picture above: /, '') : null,
    handles: Array.from(box.querySelectorAll('.noUi-handle')).map(h => h.getAttribute('aria-label')),
    toggles: Array.from(box.querySelectorAll('.widget-toggle-button')).map(
      b => [b.getAttribute('aria-pressed'), b.classList.contains('mod-active') ? 'true' : 'false']),
    live: Array.from(box.querySelectorAll('.lesson-readout')).map(r => r.getAttribute('aria-live')),
    keys: Array.from(box.querySelectorAll('select, .widget-toggle-button, .noUi-handle')).every(
      c => c.hasAttribute('data-lm-suppress-shortcuts')),
  };
})
"""


def assert_announced(page: Any, name: str, when: str) -> None:
    """Every lesson widget's picture has an alt (the readout's words for it), every slider handle a name,
    every toggle button an aria-pressed that matches its look, every readout is a polite live region, and
    every dropdown, toggle and handle keeps its keys from the notebook's shortcuts."""
    boxes = page.evaluate(ANNOUNCED_JS)
    assert boxes, f"{name} ({when}): no lesson widget on the page"
    for index, box in enumerate(boxes):
        where = f"{name} ({when}), lesson widget {index}"
        assert box["alts"] and all(alt and alt == box["words"] for alt in box["alts"]), (
            f"{where}: its picture's alt {box['alts']} is not the picture in words {box['words']!r}")
        assert all(box["handles"]), f"{where}: a slider handle without a name: {box['handles']}"
        assert all(said == shown for said, shown in box["toggles"]), f"{where}: aria-pressed is wrong: {box['toggles']}"
        assert box["live"] == ["polite"], f"{where}: the readout is not one polite live region: {box['live']}"
        assert box["keys"], f"{where}: a control whose keys still reach the notebook's shortcuts"


def press_on(page: Any, focused: dict[str, Any]) -> None:
    """Change the focused control with the keyboard only, as a keyboard user does."""
    kind = focused["kind"]
    if kind in ("select", "slider", "toggle"):
        page.keyboard.press("ArrowDown" if kind == "select" else "ArrowRight")
        page.wait_for_timeout(150)
        after = page.evaluate(FOCUSED_JS)
        if (after["value"], after["now"], after["pressed"]) == (focused["value"], focused["now"], focused["pressed"]) \
                and kind != "toggle":  # at the last option or the maximum: the other way
            page.keyboard.press("ArrowUp" if kind == "select" else "ArrowLeft")
    elif kind == "checkbox":
        page.keyboard.press("Space")
    elif kind == "number":
        page.keyboard.press("ArrowUp")
        page.keyboard.press("Enter")
    elif kind in ("text", "textarea"):
        page.keyboard.press("End")
        page.keyboard.type(" 3")
        page.keyboard.press("Enter" if kind == "text" else "Tab")
        if kind == "textarea":  # Tab sent it and moved on: come back, so the walk goes on from here
            page.keyboard.press("Shift+Tab")


def drive_by_keyboard(page: Any, name: str) -> int:
    """In every lesson widget: start on its first control, then Tab from control to control and change each
    with the keyboard alone (arrows, Space, typing, Enter). Each change must change what the widget shows,
    leave the notebook's active cell where it was (the keys went to the control), and keep toggles' state
    announced. Returns how many controls were driven."""
    boxes = page.locator(".jp-Notebook .lesson-widget")
    driven = 0
    for index in range(boxes.count()):
        box = boxes.nth(index)
        box.scroll_into_view_if_needed()
        box.locator("select, .widget-toggle-button:not([tabindex='-1']), .noUi-handle, input, textarea").first.focus()
        done: set[int] = set()
        controls = 0
        for _ in range(40):
            focused = page.evaluate(FOCUSED_JS)
            if focused["box"] != index:
                break
            controls = focused["controls"]
            if focused["kind"] != "other" and focused["control"] not in done:
                done.add(focused["control"])
                before = snapshot(page)
                press_on(page, focused)
                what = f"{name}: widget {index}, the {focused['kind']} '{focused['label']}' changed by keyboard"
                assert wait_for_change(page, before), f"{what} did not change what the widget shows"
                after = page.evaluate(FOCUSED_JS)
                assert after["active"] == focused["active"], f"{what}: the key moved the notebook's active cell"
                if focused["kind"] == "toggle":  # the arrow pressed the next button and moved the focus to it
                    same_group = after["control"] == focused["control"]
                    moved = same_group and (after["kind"], after["pressed"]) == ("toggle", "true")
                    assert moved, f"{what}: the arrow did not move the choice to the focused button ({after})"
                driven += 1
            page.keyboard.press("Tab")
        assert len(done) == controls > 0, f"{name}: Tab reached {len(done)} of widget {index}'s {controls} controls"
    return driven


def test_widget_lesson_runs_in_jupyterlab(
    widget_notebook: Path, lab_server: Any, browser: Any, tmp_path: Path, axe_if_ready: Path | None
) -> None:
    """Open the lesson, Run All Cells, and check outputs and widgets as a learner sees them."""
    notebook = widget_notebook
    name = notebook.name
    page = browser.new_page(viewport=VIEWPORT)
    try:
        # ?reset: a clean workspace, so no tab from the previous notebook is restored beside this one
        page.goto(lab_server.url(f"lab/tree/notebooks/{name}?reset"))
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=KERNEL_READY_SECONDS * 1000)
        wait_for_kernel(page)
        run_all_cells(page)
        prompts = wait_until_executed(page, name)
        page.screenshot(path=str(tmp_path / "after_run_all.png"))
        assert len(prompts) == code_cell_count(notebook), f"{name}: the page shows a different number of code cells"
        assert_clean_page(page, name, "after Run All Cells")
        assert_announced(page, name, "after Run All Cells")
        assert exercise_widgets(page, name, tmp_path) > 0, f"{name}: no widget control found on the page"
        assert_clean_page(page, name, "after using the widgets")
        assert drive_by_keyboard(page, name) > 0, f"{name}: no widget control driven by keyboard"
        assert_announced(page, name, "after the keyboard walk")
        assert_clean_page(page, name, "after the keyboard walk")
        unnamed = page.evaluate(UNNAMED_IMAGES_JS)
        assert not unnamed, f"{name}: pictures without alt text in the outputs (cells {unnamed})"
        if axe_if_ready is not None:
            refused = serious_violations(axe_violations(page, ".jp-Notebook .jp-OutputArea"))
            assert not refused, f"{name}: axe finds in the outputs (figures and widgets):\n" + "\n".join(refused)
    finally:
        with contextlib.suppress(Exception):  # a diagnostic only: never hide the real failure
            page.screenshot(path=str(tmp_path / "last_state.png"))
        page.close()
        lab_server.shut_down_kernels()
