"""No Predict's answer shares the screen with its question, in JupyterLab, on the learner copy.

``several-heads prepare`` writes the lessons and JupyterLab serves them, as ``several-heads lab``
does, in headless Chromium at 1440 x 900 (a laptop). For every ``**Predict:**`` of a lesson, the
screen the learner sees with the question scrolled to the top of the notebook is read off the laid-out
page (every piece of text inside it; a folded ``<details>`` block shows only its summary): none may
contain an answer phrase the Predict declares (``several_heads.predict.answer``, see
``tests/answer_guard.py``). Nothing is run: this is the screen of a learner who has not yet run the
reveal.
Fixtures come from conftest.py beside this file.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from test_jupyterlab import KERNEL_READY_SECONDS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the guard's own module
from answer_guard import LESSONS, contains

LAPTOP = {"width": 1440, "height": 900}
CHECKED = [path.name for path in LESSONS]
# Two halves, each one JupyterLab page: pytest-xdist runs them side by side (one test over all nine
# lessons was the longest single test of the suite).
HALVES = [CHECKED[: len(CHECKED) // 2], CHECKED[len(CHECKED) // 2 :]]

# Where every Predict's screen would be, measured on the laid-out page in one pass. Windowing is off
# in the test server (every cell is in the page), so each text box has its place in the notebook's
# scrolled content. Scrolling a question to the top shows the content from the question's top to one
# screen below it, unless the notebook ends first: then the screen shows its last screenful. The text
# of every shown text node with a box inside that window is read; text inside a closed <details> (a
# hint, a "What happened?") is laid out but not shown, and is left out.
SCREENS_JS = """
(indices) => {
  const notebook = document.querySelector('.jp-NotebookPanel .jp-Notebook');
  const cells = Array.from(notebook.querySelectorAll('.jp-Cell'));
  const scroller = cells[0].closest('.jp-WindowedPanel-outer');  // the element that scrolls the cells
  const view = scroller.getBoundingClientRect();
  const origin = view.top - scroller.scrollTop;  // content offset 0, in viewport coordinates
  const lowest = scroller.scrollHeight - scroller.clientHeight;  // the furthest the notebook scrolls
  const pieces = [];  // [top, bottom, text] of every shown text node, in content coordinates
  for (const cell of cells) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      if (!node.parentElement || !node.parentElement.checkVisibility()) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      for (const box of range.getClientRects()) {
        if (box.width > 0 && box.height > 0) pieces.push([box.top - origin, box.bottom - origin, node.textContent]);
      }
    }
  }
  return indices.map(index => {
    const top = Math.min(cells[index].getBoundingClientRect().top - origin, Math.max(lowest, 0));
    const bottom = top + view.height;
    const seen = new Set();
    const shown = [];
    for (const [upper, lower, text] of pieces) {
      if (lower > top + 1 && upper < bottom - 1 && !seen.has(upper + '|' + text)) {
        seen.add(upper + '|' + text);
        shown.push(text);
      }
    }
    return shown.join(' ');
  });
}
"""

# The page is laid out when every markdown cell is rendered, every image has loaded, and the cells'
# places stop moving.
LAYOUT_JS = """
(markdown) => {
  const notebook = document.querySelector('.jp-NotebookPanel .jp-Notebook');
  if (notebook.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown').length < markdown) return null;
  if (Array.from(notebook.querySelectorAll('img')).some(img => !img.complete)) return null;
  return Array.from(notebook.querySelectorAll('.jp-Cell')).map(cell => Math.round(cell.offsetTop)).join(',');
}
"""
SETTLE_SECONDS = 60.0
STILL_SECONDS = 0.5
TRIES = 3


def wait_for_layout(page: Any, markdown: int, lesson: str) -> None:
    """Until every markdown cell is rendered, every image loaded and the cells' places stay the same
    for STILL_SECONDS (markdown and images still rendering change the heights of the cells above a
    question; a loaded machine renders slowly)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = page.evaluate(LAYOUT_JS, markdown)
        if now is not None and now == last:
            if time.monotonic() - since >= STILL_SECONDS:
                return
        else:
            last, since = now, time.monotonic()
        page.wait_for_timeout(100)
    pytest.fail(f"{lesson}: the notebook's layout did not settle within {SETTLE_SECONDS:.0f} s")


def screens(page: Any, path: Path, found: list[tuple[int, list[str]]]) -> list[str]:
    """The text on each Predict's screen, read once the layout has settled. A screen that does not
    show its own question was read while something still moved: settle and read again."""
    markdown = sum(cell.cell_type == "markdown" for cell in cells_of(path))
    for _ in range(TRIES):
        wait_for_layout(page, markdown, path.name)
        shown: list[str] = page.evaluate(SCREENS_JS, [index for index, _ in found])
        if all("Predict:" in text for text in shown):
            return shown
        page.wait_for_timeout(1000)
    return shown


def cells_of(path: Path) -> list[Any]:
    return list(nbformat.read(path, as_version=4).cells)  # type: ignore[no-untyped-call]


def predicts(path: Path) -> list[tuple[int, list[str]]]:
    """(cell index, declared answer phrases) of every Predict of the lesson."""
    cells = cells_of(path)
    return [
        (i, list(cell.metadata.get("several_heads", {}).get("predict", {}).get("answer", [])))
        for i, cell in enumerate(cells)
        if cell.cell_type == "markdown" and "**Predict:**" in cell.source
    ]


def open_lesson(page: Any, lab: Any, lesson: str, first: bool) -> None:
    """Open ``lesson`` as the only notebook tab: the first by its URL (JupyterLab loads once), the
    others from the file browser, after closing the one before (a page load per lesson would cost
    most of this test's time)."""
    if first:
        page.goto(lab.url(f"lab/tree/{lesson}?reset"))
    else:
        page.locator(".lm-DockPanel .lm-TabBar-tab.jp-mod-current .lm-TabBar-tabCloseIcon").first.click()
        page.locator(".jp-NotebookPanel").first.wait_for(state="detached", timeout=KERNEL_READY_SECONDS * 1000)
        page.locator(".jp-DirListing-item", has_text=lesson).first.dblclick()
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=KERNEL_READY_SECONDS * 1000)


@pytest.mark.parametrize("lessons", HALVES, ids=[f"{half[0][:2]}-{half[-1][:2]}" for half in HALVES])
def test_no_predict_answer_is_on_screen_before_its_reveal(
    lessons: list[str], learner_lab: Any, browser: Any, tmp_path: Path
) -> None:
    page = browser.new_page(viewport=LAPTOP)
    problems: list[str] = []
    try:
        for number, lesson in enumerate(lessons):
            open_lesson(page, learner_lab, lesson, first=number == 0)
            cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
            found = predicts(learner_lab.root / lesson)
            assert len(found) >= 3 and all(phrases for _, phrases in found), f"{lesson}: {found}"
            total = len(cells_of(learner_lab.root / lesson))
            page.wait_for_function(  # every cell of this lesson (and no other notebook's) is on the page
                "n => document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell').length === n",
                arg=total, timeout=KERNEL_READY_SECONDS * 1000,
            )
            shown_on = screens(page, learner_lab.root / lesson, found)
            for (index, phrases), shown in zip(found, shown_on, strict=True):
                assert "Predict:" in shown, f"{lesson} cell {index}: the question is not on its own screen"
                visible = [phrase for phrase in phrases if contains(shown, phrase)]
                problems += [f"{lesson} cell {index}: {phrase!r} is on screen with the question" for phrase in visible]
                if visible:
                    cells.nth(index).evaluate("cell => cell.scrollIntoView({block: 'start'})")
                    page.screenshot(path=str(tmp_path / f"predict_{lesson[:2]}_{index}.png"))
        assert not problems, "at 1440 x 900, an answer is visible before its reveal runs:\n" + "\n".join(problems)
    finally:
        with contextlib.suppress(Exception):  # a diagnostic only: never hide the real failure
            page.screenshot(path=str(tmp_path / "last_state.png"))
        page.close()
        learner_lab.shut_down_kernels()
