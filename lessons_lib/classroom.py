"""An nbgrader course from the lessons: ``several-heads nbgrader COURSE_DIR``.

`write_course` turns every lesson in ``notebooks/`` into an nbgrader *source* notebook
(``COURSE_DIR/source/<lesson>/<lesson>.ipynb``) and writes ``COURSE_DIR/nbgrader_config.py``.
It reads the exercise format of the lessons (a task cell ``**Your turn N** (difficulty D/3, ...)``,
then cells tagged ``exercise``, ``check``, optionally ``hint``, and ``solution``) and rewrites it the
way nbgrader 0.9 expects (its cell metadata format, schema version 3):

- the exercise cell becomes an autograded-answer cell (``solution: true``): the learner's blank as the
  lesson has it, followed by the reference answer (the solution cell without its first line) between
  ``### BEGIN SOLUTION`` and ``### END SOLUTION``. nbgrader never deletes a cell, so the separate
  solution cell is dropped here; ``generate_assignment`` then removes the marked answer from the
  students' copy, leaving the lesson's own blank;
- the check cell becomes a locked, graded test cell worth D points (the exercise's difficulty): it
  runs the check's set-up lines, evaluates the checker call that the check prints, prints the
  verdict and asserts that it is correct; a check that sets something up (``mistral = ...``) also
  gets a locked copy of those set-up lines just above the answer cell, since the reference answer
  may use them (in the lesson the solution runs after the check);
- every other cell (text, code, hints, widgets) is locked, so ``autograde`` restores it from the
  source if a student edits or deletes it.

Nothing here imports nbgrader: the course is plain ``.ipynb`` JSON, and the tests in
``tests/classroom/`` run nbgrader's own commands on it (``requirements-classroom.txt``).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lessons_lib.checks import SOLUTION_FIRST_LINE
from lessons_lib.lesson_files import LESSON_PATTERN, default_source

__all__ = [
    "BEGIN_SOLUTION",
    "CODE_STUB",
    "END_SOLUTION",
    "SCHEMA_VERSION",
    "CourseError",
    "Exercise",
    "answer_cell_source",
    "convert_lesson",
    "default_source",
    "exercises",
    "graded_cell_source",
    "nbgrader_main",
    "split_check",
    "write_course",
]

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
SCHEMA_VERSION = 3
# What `generate_assignment` leaves where the reference answer was (nbgrader's `ClearSolutions.code_stub`,
# set in the course's nbgrader_config.py). nbgrader's default adds `raise NotImplementedError()`; the
# lessons' blanks already stand for "not answered yet" (the check says so and scores 0), and a raise
# would stop "Run All" at the first exercise although nothing after an exercise depends on it.
CODE_STUB = "# YOUR CODE HERE"

TASK_HEADER = re.compile(r"\*\*Your turn (\d+)\*\* \(difficulty ([123])/3, importance ([123])/3, about (\d+) min\): ")
PLACEHOLDER_LINES = {"...", "pass"}


class CourseError(ValueError):
    """A lesson does not follow the exercise format, so its nbgrader version would be wrong."""


@dataclass(frozen=True)
class Exercise:
    """One exercise of a lesson, as its cells give it."""

    number: int
    difficulty: int
    task: int  # index of the task cell
    exercise: int  # index of the blank exercise cell
    check: int
    solution: int
    hint: int | None


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _tags(cell: dict[str, Any]) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def exercises(notebook: dict[str, Any], name: str = "lesson") -> list[Exercise]:
    """Every exercise of ``notebook``, in order; raises `CourseError` on a cell out of the format."""
    cells = notebook["cells"]
    found: list[Exercise] = []
    for index, cell in enumerate(cells):
        match = TASK_HEADER.match(_source(cell)) if cell["cell_type"] == "markdown" else None
        if match is None:
            continue
        number, difficulty = int(match.group(1)), int(match.group(2))
        where = f"{name}, Your turn {number}"
        following = [(i, _tags(cells[i])) for i in range(index + 1, min(index + 5, len(cells)))]
        if len(following) < 3 or "exercise" not in following[0][1] or "check" not in following[1][1]:
            raise CourseError(f"{where}: the task must be followed by an `exercise` cell and a `check` cell")
        hint: int | None = None
        position = 2
        if position < len(following) and "hint" in following[position][1]:
            hint = following[position][0]
            position += 1
        if position >= len(following) or "solution" not in following[position][1]:
            raise CourseError(f"{where}: no `solution` cell after the check (and the hint, if any)")
        solution = following[position][0]
        if not _source(cells[solution]).startswith(SOLUTION_FIRST_LINE):
            raise CourseError(f"{where}: the solution cell must start with {SOLUTION_FIRST_LINE!r}")
        found.append(Exercise(number, difficulty, index, following[0][0], following[1][0], solution, hint))
    tagged = sum("exercise" in _tags(cell) for cell in cells)
    if tagged != len(found):
        raise CourseError(f"{name}: {tagged} cells are tagged `exercise` but {len(found)} task cells were read")
    return found


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _with_stub(lines: list[str]) -> str:
    """The code a student gets: the marked region replaced by `CODE_STUB`, as ClearSolutions does."""
    out: list[str] = []
    inside = False
    for line in lines:
        if line.strip() == BEGIN_SOLUTION:
            inside = True
            out.append(_indent(line) + CODE_STUB)
        elif line.strip() == END_SOLUTION:
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)


def _compiles(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def answer_cell_source(blank: str, solution: str, where: str = "exercise") -> str:
    """The exercise cell of the nbgrader source: the blank, then the reference answer between the markers.

    ``solution`` is the lesson's solution cell; its first line (`SOLUTION_FIRST_LINE`) is left out.
    Lines that the blank and the answer share at the top (a ``def`` line and its docstring) are
    written once, outside the markers, so the student keeps them; the blank's ``...`` or ``pass``
    body is dropped when the student's copy still compiles without it.
    """
    blank_lines = blank.rstrip("\n").split("\n")
    answer_lines = solution.rstrip("\n").split("\n")[1:]
    while answer_lines and not answer_lines[-1].strip():
        answer_lines.pop()
    if not any(line.strip() for line in answer_lines):
        raise CourseError(f"{where}: the solution cell holds no answer after its first line")
    shared = 0
    while shared < min(len(blank_lines), len(answer_lines)) and blank_lines[shared] == answer_lines[shared]:
        shared += 1
    rest = answer_lines[shared:]
    if not rest:
        raise CourseError(f"{where}: the solution is the same code as the blank exercise")
    indent = min((_indent(line) for line in rest if line.strip()), key=len)
    region = [indent + BEGIN_SOLUTION, *rest, indent + END_SOLUTION]
    kept = blank_lines[shared:]
    slim = [line for line in kept if line.strip() not in PLACEHOLDER_LINES]
    for choice in (slim, kept):
        lines = [*blank_lines[:shared], *choice, *region]
        if _compiles("\n".join(lines)) and _compiles(_with_stub(lines)):
            return "\n".join(lines)
    raise CourseError(f"{where}: the blank and the answer together, or the student's copy, do not compile")


def split_check(check: str, where: str = "check") -> tuple[str, str]:
    """A check cell's set-up lines and the checker call that its last statement, ``print(...)``, prints."""
    try:
        tree = ast.parse(check)
    except SyntaxError as error:
        raise CourseError(f"{where}: the check cell does not compile: {error}") from error
    last = tree.body[-1] if tree.body else None
    if not (
        isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and isinstance(last.value.func, ast.Name)
        and last.value.func.id == "print"
        and len(last.value.args) == 1
        and not last.value.keywords
    ):
        raise CourseError(f"{where}: the check cell's last statement must be print(<checker call>)")
    checker_call = ast.get_source_segment(check, last.value.args[0])
    if checker_call is None:  # pragma: no cover - ast always has positions for parsed source
        raise CourseError(f"{where}: cannot read the checker call")
    setup = check.split("\n")[: last.lineno - 1]
    while setup and not setup[-1].strip():
        setup.pop()
    return "\n".join(setup), checker_call


def graded_cell_source(check: str, where: str = "check") -> str:
    """The graded test cell: the check's set-up, its checker call as ``verdict``, printed and asserted."""
    setup, checker_call = split_check(check, where)
    return "\n".join(
        [
            *([setup] if setup else []),
            f"verdict = {checker_call}",
            "print(verdict)",
            'assert verdict.ok, "not correct yet: the message above says why"',
        ]
    )


def _nbgrader(grade_id: str, *, solution: bool = False, grade: bool = False, points: int = 0) -> dict[str, Any]:
    """nbgrader's cell metadata, schema 3: every cell is locked unless it holds an answer."""
    metadata: dict[str, Any] = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": not solution,
        "schema_version": SCHEMA_VERSION,
        "solution": solution,
    }
    if grade:
        metadata["points"] = points
    return metadata


def _clean(cell: dict[str, Any], source: str, nbgrader: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``cell`` with ``source``, nbgrader's metadata and no stored outputs."""
    metadata = {key: value for key, value in cell.get("metadata", {}).items() if key != "nbgrader"}
    metadata["nbgrader"] = nbgrader
    if cell["cell_type"] == "code":
        metadata.pop("jupyter", None)  # nothing stays collapsed in the course copy
    new: dict[str, Any] = {"cell_type": cell["cell_type"], "metadata": metadata, "source": source}
    if "id" in cell:
        new["id"] = cell["id"]
    if cell["cell_type"] == "code":
        new["execution_count"] = None
        new["outputs"] = []
    if "attachments" in cell:
        new["attachments"] = cell["attachments"]
    return new


def convert_lesson(notebook: dict[str, Any], lesson: str) -> dict[str, Any]:
    """The nbgrader source version of one lesson (a new notebook dict; ``notebook`` is not changed)."""
    found = exercises(notebook, lesson)
    cells = notebook["cells"]
    by_exercise = {item.exercise: item for item in found}
    by_check = {item.check: item for item in found}
    solutions = {item.solution for item in found}
    converted: list[dict[str, Any]] = []
    for index, cell in enumerate(cells):
        if index in solutions:
            continue
        source = _source(cell)
        if index in by_exercise:
            item = by_exercise[index]
            where = f"{lesson}, Your turn {item.number}"
            answer = answer_cell_source(source, _source(cells[item.solution]), where)
            setup, _ = split_check(_source(cells[item.check]), where)
            if setup:  # the answer may use what the check sets up (the lesson's solution runs after it)
                setup_cell = _clean(cells[item.check], setup, _nbgrader(f"your-turn-{item.number}-setup"))
                setup_cell.pop("id", None)
                if "id" in cells[item.check]:
                    setup_cell["id"] = f"{cells[item.check]['id']}-setup"[:64]
                setup_cell["metadata"].pop("tags", None)
                converted.append(setup_cell)
            meta = _nbgrader(f"your-turn-{item.number}-answer", solution=True)
            converted.append(_clean(cell, answer, meta))
        elif index in by_check:
            item = by_check[index]
            where = f"{lesson}, Your turn {item.number}"
            meta = _nbgrader(f"your-turn-{item.number}-check", grade=True, points=item.difficulty)
            converted.append(_clean(cell, graded_cell_source(source, where), meta))
        else:
            converted.append(_clean(cell, source, _nbgrader(f"cell-{index:03d}")))
    ids = [cell.get("id") for cell in converted if cell.get("id") is not None]
    if len(ids) != len(set(ids)):
        raise CourseError(f"{lesson}: two cells share an id")
    return {
        "cells": converted,
        "metadata": notebook.get("metadata", {}),
        "nbformat": notebook.get("nbformat", 4),
        "nbformat_minor": notebook.get("nbformat_minor", 5),
    }


def _config_text(lessons: list[str]) -> str:
    return f'''"""nbgrader's configuration for the Several Heads course (written by `several-heads nbgrader`).

Run nbgrader from this folder, for example:
    nbgrader generate_assignment 01_one_head     # release/01_one_head/: the students' copy
    nbgrader validate source/01_one_head/01_one_head.ipynb
    nbgrader autograde 01_one_head               # grades submitted/<student>/01_one_head/
    nbgrader export                              # grades.csv
"""

c = get_config()  # noqa: F821 - traitlets provides it when nbgrader loads this file

c.CourseDirectory.course_id = "several-heads"
# The lessons, in order: {", ".join(lessons)}.
# A student who deletes a graded cell gets it back, marked, at autograding (nbgrader leaves it out by default).
c.OverwriteCells.add_missing_cells = True
# The lessons' blanks stay as they are; the reference answers between the markers are removed.
c.ClearSolutions.code_stub = {{"python": {CODE_STUB!r}}}
# Some lessons train a small model or drive widgets: give each cell time.
c.Execute.timeout = 600
'''


def write_course(course_dir: Path, source: Path | None = None) -> list[Path]:
    """Write ``nbgrader_config.py`` and ``source/<lesson>/<lesson>.ipynb`` for every lesson in ``source``.

    Returns the paths written. Raises `CourseError` if a lesson breaks the exercise format.
    """
    folder = default_source() if source is None else Path(source)
    lessons = sorted(folder.glob(LESSON_PATTERN))
    if not lessons:
        raise CourseError(f"no lesson notebooks (NN_name.ipynb) in {folder}")
    converted = []
    for path in lessons:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        converted.append((path.stem, convert_lesson(notebook, path.stem)))
    course_dir = Path(course_dir)
    written: list[Path] = []
    for lesson, notebook in converted:
        target = course_dir / "source" / lesson / f"{lesson}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(target)
    config = course_dir / "nbgrader_config.py"
    config.write_text(_config_text([lesson for lesson, _ in converted]), encoding="utf-8")
    return [config, *written]


def nbgrader_main(argv: list[str] | None = None) -> int:
    """``several-heads nbgrader COURSE_DIR [--source NOTEBOOKS]``: write the course; 0 on success."""
    parser = argparse.ArgumentParser(
        prog="several-heads nbgrader",
        description="Write an nbgrader course (nbgrader_config.py and source/<lesson>/) from the lessons.",
    )
    parser.add_argument("course_dir", type=Path, help="the course folder to write (created if missing)")
    parser.add_argument("--source", type=Path, default=None, help="the lessons' folder (default: notebooks/)")
    args = parser.parse_args(argv)
    try:
        written = write_course(args.course_dir, args.source)
    except (CourseError, OSError) as error:
        print(f"several-heads nbgrader: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    print(f"next: cd {args.course_dir} && nbgrader generate_assignment 01_one_head", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(nbgrader_main())
