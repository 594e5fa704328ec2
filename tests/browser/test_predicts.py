"""No Predict's answer shares the screen with its question, in JupyterLab, on the learner copy.

``several-heads prepare`` writes the lessons and JupyterLab serves them, as ``several-heads lab``
does, in headless Chromium at 1440 x 900 (a laptop). For every ``**Predict:**`` of a lesson, the
question is scrolled to the top of the notebook and every piece of text the learner can then see is
read (a folded ``<details>`` block shows only its summary): none may contain an answer phrase the
Predict declares (``several_heads.predict.answer``, see ``tests/answer_guard.py``). Nothing is run:
this is the screen of a learner who has not yet run the reveal. Lessons whose items are still listed
in ``KNOWN_LEAKS`` (``tests/test_answer_guard.py``) are left out until they are rebuilt.
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
from test_answer_guard import KNOWN_LEAKS

LAPTOP = {"width": 1440, "height": 900}
CHECKED = [path.name for path in LESSONS if path.name[:2] not in KNOWN_LEAKS]

# The text of every shown text node of the notebook that has a box inside the notebook's visible area.
VISIBLE_TEXT_JS = """
(notebook) => {
  const scroller = notebook.closest('.jp-WindowedPanel-outer') || notebook.parentElement;
  const view = scroller.getBoundingClientRect();
  const seen = [];
  for (const cell of notebook.querySelectorAll('.jp-Cell')) {
  const around = cell.getBoundingClientRect();
  if (around.bottom <= view.top || around.top >= view.bottom) continue;
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    // Text inside a closed <details> (a hint, a "What happened?") is laid out but not shown.
    if (!node.parentElement || !node.parentElement.checkVisibility()) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const box of range.getClientRects()) {
      if (box.width > 0 && box.height > 0 && box.bottom > view.top + 1 && box.top < view.bottom - 1) {
        seen.push(node.textContent);
        break;
      }
    }
  }
  }
  return seen.join(' ');
}
"""


# Scroll the cell to the top of the notebook's visible area; how far below that top it now starts.
SCROLL_TO_TOP_JS = """
(cell) => {
  cell.scrollIntoView({block: 'start'});
  const scroller = cell.closest('.jp-WindowedPanel-outer') || cell.parentElement;
  return cell.getBoundingClientRect().top - scroller.getBoundingClientRect().top;
}
"""
OFFSET_JS = """
(cell) => cell.getBoundingClientRect().top
  - (cell.closest('.jp-WindowedPanel-outer') || cell.parentElement).getBoundingClientRect().top
"""
SETTLE_SECONDS = 10.0


def settle_at_top(page: Any, cell: Any) -> None:
    """Scroll ``cell`` to the top until it stays there: markdown above it may still be rendering (and
    change height) when a loaded machine first scrolls."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        if abs(cell.evaluate(SCROLL_TO_TOP_JS)) < 2:
            page.wait_for_timeout(100)
            if abs(cell.evaluate(OFFSET_JS)) < 2:
                return
        page.wait_for_timeout(100)
    pytest.fail(f"the cell did not stay at the top of the notebook within {SETTLE_SECONDS:.0f} s")


def predicts(path: Path) -> list[tuple[int, list[str]]]:
    """(cell index, declared answer phrases) of every Predict of the lesson."""
    cells = nbformat.read(path, as_version=4).cells  # type: ignore[no-untyped-call]
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


def test_no_predict_answer_is_on_screen_before_its_reveal(learner_lab: Any, browser: Any, tmp_path: Path) -> None:
    page = browser.new_page(viewport=LAPTOP)
    problems: list[str] = []
    try:
        for number, lesson in enumerate(CHECKED):
            open_lesson(page, learner_lab, lesson, first=number == 0)
            notebook = page.locator(".jp-NotebookPanel .jp-Notebook").first
            cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
            found = predicts(learner_lab.root / lesson)
            assert len(found) >= 3 and all(phrases for _, phrases in found), f"{lesson}: {found}"
            total = len(nbformat.read(learner_lab.root / lesson, as_version=4).cells)  # type: ignore[no-untyped-call]
            page.wait_for_function(  # every cell of this lesson (and no other notebook's) is on the page
                "n => document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell').length === n",
                arg=total, timeout=KERNEL_READY_SECONDS * 1000,
            )
            for index, phrases in found:
                question = cells.nth(index)
                question.locator(".jp-RenderedMarkdown").first.wait_for(timeout=10_000)
                settle_at_top(page, question)
                shown = page.evaluate(VISIBLE_TEXT_JS, notebook.element_handle())
                assert "Predict:" in shown, f"{lesson} cell {index}: the question is not on screen after scrolling"
                visible = [phrase for phrase in phrases if contains(shown, phrase)]
                problems += [f"{lesson} cell {index}: {phrase!r} is on screen with the question" for phrase in visible]
                if visible:
                    page.screenshot(path=str(tmp_path / f"predict_{lesson[:2]}_{index}.png"))
        assert not problems, "at 1440 x 900, an answer is visible before its reveal runs:\n" + "\n".join(problems)
    finally:
        with contextlib.suppress(Exception):  # a diagnostic only: never hide the real failure
            page.screenshot(path=str(tmp_path / "last_state.png"))
        page.close()
        learner_lab.shut_down_kernels()
