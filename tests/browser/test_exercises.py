"""The learner's loop in a real browser: write an answer into a blank exercise, run it and its
checker, read the verdict; open a collapsed solution.

Lesson 01 in JupyterLab, headless Chromium: Run All (the blank exercises report "not answered
yet"), then in one exercise cell type a wrong answer and see the checker's diagnosis, type a right
one and see "correct", and check that every solution cell opens collapsed and expands on a click.
Fixtures come from conftest.py beside this file.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import nbformat
from test_jupyterlab import (
    KERNEL_READY_SECONDS,
    VIEWPORT,
    assert_clean_page,
    run_all_cells,
    wait_for_kernel,
    wait_until_executed,
)

LESSON = "01_one_head.ipynb"
# The exercise the learner answers, one known wrong answer, and the words its diagnosis must contain.
EXERCISE = "answer_2"
WRONG = ("answer_2 = np.tril(np.ones((T, S), dtype=bool))", "offset")
VERDICT_SECONDS = 60.0


def tags(cell: Any) -> list[str]:
    found: list[str] = cell.get("metadata", {}).get("tags", [])
    return found


def exercise_cells(path: Path, name: str) -> tuple[int, str]:
    """Index (among all cells) of the exercise cell that assigns ``name``, and the right answer:
    the assignment to ``name`` in its solution cell."""
    cells = nbformat.read(path, as_version=4).cells  # type: ignore[no-untyped-call]
    for i, cell in enumerate(cells):
        if "exercise" in tags(cell) and re.search(rf"^{name} = None", cell.source, re.MULTILINE):
            solution = cells[i + 2].source
            right = next(line for line in solution.splitlines() if line.startswith(f"{name} ="))
            return i, right
    raise AssertionError(f"{path.name}: no exercise cell assigns {name} = None")


def replace_source(cell: Any, text: str) -> None:
    """Click into the cell's editor, select everything and put ``text`` there, as a learner would."""
    editor = cell.locator(".cm-content").first
    editor.click()
    editor.press("ControlOrMeta+a")
    editor.press("Delete")
    editor.page.keyboard.insert_text(text)


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
    return str(check.locator(".jp-OutputArea").inner_text())


def test_learner_answers_an_exercise_and_opens_a_solution(lab_server: Any, browser: Any, tmp_path: Path) -> None:
    path = lab_server.root / "notebooks" / LESSON
    index, right = exercise_cells(path, EXERCISE)
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.goto(lab_server.url(f"lab/tree/notebooks/{LESSON}?reset"))
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=KERNEL_READY_SECONDS * 1000)
        wait_for_kernel(page)
        run_all_cells(page)
        wait_until_executed(page, LESSON)
        assert_clean_page(page, LESSON, "after Run All Cells")
        cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
        exercise, check, solution = cells.nth(index), cells.nth(index + 1), cells.nth(index + 2)
        assert "not answered yet" in check.locator(".jp-OutputArea").inner_text()

        exercise.scroll_into_view_if_needed()
        replace_source(exercise, WRONG[0])
        wrong_verdict = run_and_read_verdict(page, exercise, check)
        page.screenshot(path=str(tmp_path / "wrong_answer.png"))
        assert "not yet" in wrong_verdict and WRONG[1] in wrong_verdict, wrong_verdict

        replace_source(exercise, right)
        right_verdict = run_and_read_verdict(page, exercise, check)
        page.screenshot(path=str(tmp_path / "right_answer.png"))
        assert "] correct" in right_verdict, right_verdict
        assert_clean_page(page, LESSON, "after answering")

        # Every solution starts collapsed: its code is not on the page until the learner asks.
        all_cells = nbformat.read(path, as_version=4).cells  # type: ignore[no-untyped-call]
        solutions = [i for i, cell in enumerate(all_cells) if "solution" in tags(cell)]
        assert solutions
        for i in solutions:
            cell = cells.nth(i)
            assert cell.locator(".jp-InputPlaceholder").count() == 1, f"solution cell {i} does not open collapsed"
            assert not cell.locator(".jp-InputArea").is_visible(), f"solution cell {i} shows its code"
        solution.scroll_into_view_if_needed()
        solution.locator(".jp-InputPlaceholder").first.click()
        solution.locator(".jp-InputArea").wait_for(state="visible", timeout=10_000)
        assert "# Solution" in solution.locator(".jp-InputArea").inner_text()
        page.screenshot(path=str(tmp_path / "solution_open.png"))
    finally:
        with contextlib.suppress(Exception):  # a diagnostic only: never hide the real failure
            page.screenshot(path=str(tmp_path / "last_state.png"))
        page.close()
        lab_server.shut_down_kernels()
