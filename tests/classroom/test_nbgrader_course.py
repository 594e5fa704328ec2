"""The nbgrader round trip on the course that `lessons_lib.classroom.write_course` writes.

In a temporary course folder: ``generate_assignment`` for every lesson, ``validate`` on each source
(every test cell passes with the reference answers), ``validate --invert`` on each release (no test
cell passes with the blanks), then ``autograde`` a simulated class on lesson 01 whose scores are
asserted cell by cell, and ``export`` to CSV. Needs ``requirements-classroom.txt``.
"""

from __future__ import annotations

import csv
import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from classroom_support import NOTEBOOKS, require, run_tool

from lessons_lib import classroom

LESSON = "01_one_head"  # the lesson the simulated class hands in
STUB = classroom.CODE_STUB

# Typical wrong answers to lesson 01, by the name its exercise defines (each one a mistake its
# checker names: the missing 1/sqrt(d), the causal triangle anchored top-left, an unscaled head).
MISTAKES = {
    "answer_1": "answer_1 = qc @ np.swapaxes(kc, -1, -2)  # the scale 1/sqrt(d) is missing",
    "my_causal_mask": "return np.tril(np.ones((T, S), dtype=bool))  # anchored top-left",
    "attention": (
        "scores = q @ np.swapaxes(k, -1, -2)  # unscaled\n"
        "if allowed is not None:\n"
        "    scores = np.where(allowed, scores, -np.inf)\n"
        "weights = mha_numpy.softmax(scores, axis=-1)\n"
        "return weights @ v, weights"
    ),
}


def _cells(path: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return cells


def _grade_id(cell: dict[str, Any]) -> str:
    return str(cell["metadata"].get("nbgrader", {}).get("grade_id", ""))


def _text(cell: dict[str, Any]) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else str(source)


def _defined_name(blank: str) -> str:
    """The name an answer cell defines: ``answer_1`` for ``answer_1 = None``, ``attention`` for a def."""
    match = re.search(r"^def (\w+)\(|^(\w+) = None", blank, flags=re.MULTILINE)
    assert match, f"cannot tell what this answer cell defines:\n{blank}"
    return match.group(1) or match.group(2)


def _reference(source_cell: dict[str, Any]) -> str:
    """The reference answer of a source answer cell: the lines between the markers, dedented."""
    lines = _text(source_cell).split("\n")
    begin = next(i for i, line in enumerate(lines) if line.strip() == classroom.BEGIN_SOLUTION)
    end = next(i for i, line in enumerate(lines) if line.strip() == classroom.END_SOLUTION)
    return textwrap.dedent("\n".join(lines[begin + 1 : end]))


def _fill(release_source: str, code: str) -> str:
    """A student's answer cell: the release cell with its stub replaced by ``code`` at the stub's indent."""
    lines = release_source.split("\n")
    where = next(i for i, line in enumerate(lines) if line.strip() == STUB)
    indent = lines[where][: len(lines[where]) - len(lines[where].lstrip())]
    return "\n".join([*lines[:where], textwrap.indent(code, indent), *lines[where + 1 :]])


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    require("nbgrader")
    folder = tmp_path_factory.mktemp("course")
    classroom.write_course(folder, NOTEBOOKS)
    yield folder


def _lessons() -> list[str]:
    return sorted(path.stem for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("lesson", _lessons())
def test_source_passes_and_release_fails(course: Path, lesson: str) -> None:
    generated = run_tool(["nbgrader", "generate_assignment", lesson, "--force"], course)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    release = course / "release" / lesson / f"{lesson}.ipynb"
    source = course / "source" / lesson / f"{lesson}.ipynb"
    released_text = release.read_text(encoding="utf-8")
    assert classroom.BEGIN_SOLUTION not in released_text and classroom.END_SOLUTION not in released_text
    graded = [cell for cell in _cells(source) if cell["metadata"]["nbgrader"]["grade"]]
    assert graded, f"{lesson} has no graded cell"

    valid = run_tool(["nbgrader", "validate", str(source)], course)
    assert "Success! Your notebook passes all the tests." in valid.stdout, valid.stdout + valid.stderr
    blank = run_tool(["nbgrader", "validate", "--invert", str(release)], course)
    assert "Success! The notebook does not pass any tests." in blank.stdout, blank.stdout + blank.stderr


def _submit(course: Path, student: str, cells: list[dict[str, Any]]) -> None:
    folder = course / "submitted" / student / LESSON
    folder.mkdir(parents=True, exist_ok=True)
    notebook = json.loads((course / "release" / LESSON / f"{LESSON}.ipynb").read_text(encoding="utf-8"))
    notebook["cells"] = cells
    (folder / f"{LESSON}.ipynb").write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    (folder / "timestamp.txt").write_text("2026-12-01 09:00:00.000000 UTC", encoding="utf-8")


def test_simulated_class_autogrades_to_exact_scores(course: Path) -> None:
    generated = run_tool(["nbgrader", "generate_assignment", LESSON, "--force"], course)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    source_cells = {_grade_id(cell): cell for cell in _cells(course / "source" / LESSON / f"{LESSON}.ipynb")}
    release = _cells(course / "release" / LESSON / f"{LESSON}.ipynb")
    answers = {_grade_id(c): c for c in release if c["metadata"].get("nbgrader", {}).get("solution")}
    points = {
        gid.removesuffix("-check"): int(cell["metadata"]["nbgrader"]["points"])
        for gid, cell in source_cells.items()
        if cell["metadata"]["nbgrader"]["grade"]
    }
    exercise_of = {_defined_name(_text(cell)): gid.removesuffix("-answer") for gid, cell in answers.items()}
    assert set(MISTAKES) <= set(exercise_of), f"lesson 01's exercises changed: {sorted(exercise_of)}"
    total = sum(points.values())

    def answered(choose: dict[str, str]) -> list[dict[str, Any]]:
        """The release with the answer cells filled: "right", "wrong", "raise" or (missing) blank."""
        cells: list[dict[str, Any]] = json.loads(json.dumps(release))
        for cell in cells:
            gid = _grade_id(cell)
            if gid not in answers:
                continue
            exercise = gid.removesuffix("-answer")
            name = _defined_name(_text(cell))
            how = choose.get(exercise, "blank")
            if how == "right":
                cell["source"] = _fill(_text(cell), _reference(source_cells[gid]))
            elif how == "wrong":
                cell["source"] = _fill(_text(cell), MISTAKES[name])
            elif how == "raise":
                cell["source"] = _fill(_text(cell), 'raise RuntimeError("I will finish this later")')
        return cells

    everything = {exercise: "right" for exercise in points}
    wrong = {exercise_of[name] for name in MISTAKES}
    first, second, heaviest = sorted(points)[0], sorted(points)[1], max(points, key=lambda e: (points[e], e))

    submissions: dict[str, tuple[list[dict[str, Any]], dict[str, int]]] = {}
    submissions["blank"] = (answered({}), dict.fromkeys(points, 0))
    mixed = {exercise: "wrong" if exercise in wrong else "right" for exercise in points}
    submissions["mistakes"] = (answered(mixed), {e: 0 if e in wrong else points[e] for e in points})
    submissions["correct"] = (answered(everything), dict(points))
    # Deletes the heaviest exercise's graded cell: nbgrader puts it back (add_missing_cells) and grades it.
    kept = [c for c in answered(everything) if _grade_id(c) != f"{heaviest}-check"]
    submissions["deleted_check"] = (kept, dict(points))
    # Deletes an answer cell: its check finds no answer (nothing to restore: answers are the student's).
    kept = [c for c in answered(everything) if _grade_id(c) != f"{second}-answer"]
    submissions["deleted_answer"] = (kept, {e: 0 if e == second else points[e] for e in points})
    # An answer that raises, and a cell of the student's own near the top that raises too.
    cells = answered({**everything, first: "raise"})
    cells.insert(3, {"cell_type": "code", "metadata": {}, "source": "1 / 0", "outputs": [], "execution_count": None})
    submissions["raises"] = (cells, {e: 0 if e == first else points[e] for e in points})
    # Blank answers, every locked check rewritten to print "correct": autograde restores the checks.
    cells = answered({})
    for cell in cells:
        if _grade_id(cell).endswith("-check"):
            cell["source"] = 'print("correct")'
    submissions["tampered"] = (cells, dict.fromkeys(points, 0))

    for student, (cells, _) in submissions.items():
        _submit(course, student, cells)
    graded = run_tool(["nbgrader", "autograde", LESSON, "--force"], course, timeout=1800)
    assert graded.returncode == 0, graded.stdout + graded.stderr

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student, (_, expected) in submissions.items():
            notebook = gradebook.find_submission_notebook(LESSON, LESSON, student)
            scores = {g.name.removesuffix("-check"): g.score for g in notebook.grades if g.name.endswith("-check")}
            assert scores == expected, f"{student}: {scores} != {expected}"
    restored = (course / "autograded" / "deleted_check" / LESSON / f"{LESSON}.ipynb").read_text(encoding="utf-8")
    assert "was missing from the submission. It was added back by nbgrader." in restored

    exported = run_tool(["nbgrader", "export", "--to", str(course / "grades.csv")], course)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    with (course / "grades.csv").open(newline="", encoding="utf-8") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle) if row["assignment"] == LESSON}
    assert set(rows) == set(submissions)
    for student, (_, expected) in submissions.items():
        assert float(rows[student]["score"]) == sum(expected.values()), (student, rows[student])
        assert float(rows[student]["max_score"]) == total
    print(f"\nlesson {LESSON}, out of {total}:", {s: sum(e.values()) for s, (_, e) in submissions.items()})
