"""The learner's path in a real browser, on the learner copy that ``several-heads`` writes.

``several-heads prepare`` writes the lessons into a temporary folder and JupyterLab serves it, as
``several-heads lab`` does. In headless Chromium, lesson 02 freshly opened shows no output at all
and no "correct:" anywhere. The learner runs the cells above Your turn 1, types a wrong answer
(``2048 * 16``), runs it and its check and reads the diagnosis; types the right one (``2048 // 16``)
and reads "correct"; every solution is collapsed, and a click opens this exercise's solution,
which shows its code and no output. Saved, the edited lesson is then kept by the next ``prepare``.
Fixtures come from conftest.py beside this file.
"""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from test_jupyterlab import KERNEL_READY_SECONDS, VIEWPORT, assert_clean_page, wait_for_kernel

from lessons_lib import cli
from lessons_lib.checks import VERDICT_WIDTH

LESSON = "02_splitting_into_heads.ipynb"
# Your turn 1 of lesson 02: the answer's name, a typical wrong answer and the right one.
EXERCISE = "one_head_width"
WRONG, RIGHT = "one_head_width = 2048 * 16", "one_head_width = 2048 // 16"
VERDICT_SECONDS = 60.0
RUN_ABOVE_SECONDS = 120.0
# Every code cell, in order: its prompt ("[3]:", "[ ]:") and whether it holds any source.
PROMPTS_JS = """
() => Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell')).map(cell => {
  const prompt = cell.querySelector('.jp-InputArea-prompt');
  return cell.classList.contains('jp-CodeCell') ? (prompt ? prompt.textContent.trim() : '') : null;
})
"""

# A check cell's verdict as JupyterLab lays it out: how many lines its text has, how many lines the
# page shows (more means JupyterLab broke a line, and it breaks anywhere, even inside a word), and
# whether a line of `width` characters in the output's font fits the output area.
VERDICT_LAYOUT_JS = """
([cell, width]) => {
  const pre = cell.querySelector('.jp-OutputArea-output pre');
  const range = document.createRange();
  range.selectNodeContents(pre);
  const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
  const context = document.createElement('canvas').getContext('2d');
  context.font = getComputedStyle(pre).font;
  return {lines: pre.textContent.replace(/\\n$/, '').split('\\n').length, shown: tops.size,
          widest: context.measureText('m'.repeat(width)).width, room: pre.clientWidth};
}
"""


def tags(cell: Any) -> list[str]:
    found: list[str] = cell.get("metadata", {}).get("tags", [])
    return found


def exercise_cells(path: Path, name: str) -> tuple[int, int, list[int]]:
    """Indices (among all cells) of the exercise cell that assigns ``name``, of its check cell and of
    every solution cell of the notebook; the first solution after the exercise is its own."""
    cells = nbformat.read(path, as_version=4).cells  # type: ignore[no-untyped-call]
    solutions = [i for i, cell in enumerate(cells) if "solution" in tags(cell)]
    for i, cell in enumerate(cells):
        if "exercise" in tags(cell) and re.search(rf"^{name} = None", cell.source, re.MULTILINE):
            assert "check" in tags(cells[i + 1]), f"{path.name}: the cell after the exercise is not its check"
            return i, i + 1, solutions
    raise AssertionError(f"{path.name}: no exercise cell assigns {name} = None")


def replace_source(cell: Any, text: str) -> None:
    """Click into the cell's editor, select everything and put ``text`` there, as a learner would."""
    editor = cell.locator(".cm-content").first
    editor.click()
    editor.press("ControlOrMeta+a")
    editor.press("Delete")
    editor.page.keyboard.insert_text(text)


def run_all_above(page: Any, exercise: Any, index: int) -> None:
    """Select the exercise cell, then Run > Run All Above Selected Cell; wait until every code cell
    above it shows an execution count."""
    exercise.locator(".jp-InputPrompt").first.click()
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator('.lm-Menu-item[data-command="notebook:run-all-above"]').click()
    deadline = time.monotonic() + RUN_ABOVE_SECONDS
    while time.monotonic() < deadline:
        prompts = [prompt for prompt in page.evaluate(PROMPTS_JS)[:index] if prompt is not None]
        if prompts and all(re.fullmatch(r"\[\d+\]:", prompt) for prompt in prompts):
            wait_for_kernel(page)
            return
        time.sleep(0.25)
    pytest.fail(f"the cells above the exercise did not all run within {RUN_ABOVE_SECONDS:.0f} s: {prompts}")


def run_and_read_verdict(page: Any, exercise: Any, check: Any) -> str:
    """Shift+Enter in the exercise (runs it, moves to the check cell), Shift+Enter again; the verdict."""
    previous = check.locator(".jp-OutputArea").inner_text()
    exercise.locator(".cm-content").first.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    check.locator(".jp-OutputArea-output").first.wait_for(timeout=VERDICT_SECONDS * 1000)
    page.wait_for_function(
        "([cell, before]) => { const t = cell.querySelector('.jp-OutputArea').innerText;"
        " return t !== before && /\\] (correct|not yet|not answered yet):/.test(t); }",
        arg=[check.element_handle(), previous],
        timeout=VERDICT_SECONDS * 1000,
    )
    wait_for_kernel(page)
    return str(check.locator(".jp-OutputArea").inner_text()).strip()


def wait_for_saved(path: Path, before: float) -> None:
    deadline = time.monotonic() + 30
    while path.stat().st_mtime == before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert path.stat().st_mtime != before, f"{path.name} was not saved"


def test_the_learner_answers_an_exercise_in_the_learner_copy(
    learner_lab: Any, browser: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = learner_lab.root / LESSON
    index, check_index, solutions = exercise_cells(path, EXERCISE)
    own_solution = next(i for i in solutions if i > index)
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.goto(learner_lab.url(f"lab/tree/{LESSON}?reset"))
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=KERNEL_READY_SECONDS * 1000)
        wait_for_kernel(page)
        notebook = page.locator(".jp-NotebookPanel .jp-Notebook")
        page.screenshot(path=str(tmp_path / "fresh.png"))
        assert page.locator(".jp-Notebook .jp-OutputArea-output").count() == 0, "the fresh copy shows stored output"
        assert "correct:" not in notebook.inner_text(), "an answer is on the page before the learner has tried"

        cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
        exercise, check = cells.nth(index), cells.nth(check_index)
        exercise.scroll_into_view_if_needed()
        run_all_above(page, exercise, index)
        assert_clean_page(page, LESSON, "after running the cells above the exercise")
        assert "correct:" not in notebook.inner_text(), "running the lesson shows an answer"

        replace_source(exercise, WRONG)
        wrong_verdict = run_and_read_verdict(page, exercise, check)
        page.screenshot(path=str(tmp_path / "wrong_answer.png"))
        assert wrong_verdict.startswith("[head width] not yet"), wrong_verdict
        layout = page.evaluate(VERDICT_LAYOUT_JS, [check.element_handle(), VERDICT_WIDTH])
        assert layout["lines"] > 1, f"this verdict is long enough to come in several lines: {wrong_verdict!r}"
        assert layout["shown"] == layout["lines"], f"JupyterLab broke the verdict's lines (mid-word): {layout}"
        assert layout["widest"] <= layout["room"], f"a {VERDICT_WIDTH}-character line does not fit: {layout}"

        replace_source(exercise, RIGHT)
        right_verdict = run_and_read_verdict(page, exercise, check)
        page.screenshot(path=str(tmp_path / "right_answer.png"))
        assert right_verdict.startswith("[head width] correct:"), right_verdict
        assert_clean_page(page, LESSON, "after answering")

        # Every solution starts collapsed: its code is not on the page until the learner asks.
        for i in solutions:
            cell = cells.nth(i)
            assert cell.locator(".jp-InputPlaceholder").count() == 1, f"solution cell {i} does not open collapsed"
            assert not cell.locator(".jp-InputArea").is_visible(), f"solution cell {i} shows its code"
        solution = cells.nth(own_solution)
        solution.scroll_into_view_if_needed()
        solution.locator(".jp-InputPlaceholder").first.click()
        solution.locator(".jp-InputArea").wait_for(state="visible", timeout=10_000)
        opened = solution.locator(".jp-InputArea").inner_text()
        assert "#@title Solution (open it only after you have tried)" in opened and EXERCISE in opened, opened
        assert solution.locator(".jp-OutputArea-output").count() == 0, "the solution shows an output"
        page.screenshot(path=str(tmp_path / "solution_open.png"))

        # Saved from JupyterLab, the edited lesson is the learner's: the next prepare keeps it.
        before = path.stat().st_mtime
        exercise.locator(".cm-content").first.click()
        page.keyboard.press("ControlOrMeta+s")
        wait_for_saved(path, before)
        capsys.readouterr()
        assert cli.main(["prepare", str(learner_lab.root)]) == 0
        report = capsys.readouterr().out
        assert re.search(rf"^  {LESSON}\s+kept your changes", report, re.MULTILINE), report
        assert re.search(r"^  01_one_head\.ipynb\s+up to date", report, re.MULTILINE), report
        assert RIGHT in path.read_text(encoding="utf-8")
    finally:
        with contextlib.suppress(Exception):  # a diagnostic only: never hide the real failure
            page.screenshot(path=str(tmp_path / "last_state.png"))
        page.close()
        learner_lab.shut_down_kernels()
