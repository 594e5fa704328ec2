"""lessons_lib.classroom on a synthetic lesson (every shape of exercise) and on the real lessons.

The conversion itself needs only the standard library, so these run in any environment; the last
test takes the synthetic course through nbgrader (``requirements-classroom.txt``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from classroom_support import NOTEBOOKS, require, run_tool

from lessons_lib import classroom
from lessons_lib.checks import SOLUTION_FIRST_LINE

CHECKERS = '''import math

from lessons_lib.checks import failed, is_blank, passed, unanswered


def check_double(answer, x):
    if answer is None:
        return unanswered("double", "replace None with twice x")
    return passed("double", "twice x") if answer == 2 * x else failed("double", "not twice x")


def check_function(name, function, value, expected):
    if is_blank(function):
        return unanswered(name, "write the body")
    return passed(name, "right") if function(value) == expected else failed(name, "wrong value")


x = 3'''


SOLUTION_TAGS = ["solution", "hide-input"]


def code(source: str, tags: list[str] | None = None, cell_id: str = "") -> dict[str, Any]:
    metadata: dict[str, Any] = {"tags": tags} if tags else {}
    if tags and "solution" in tags:
        metadata["jupyter"] = {"source_hidden": True}
    output = [{"output_type": "stream", "name": "stdout", "text": "stored\n"}] if tags == ["check"] else []
    return {"cell_type": "code", "execution_count": None, "id": cell_id, "metadata": metadata,
            "outputs": output, "source": source}  # fmt: skip


def markdown(source: str, tags: list[str] | None = None, cell_id: str = "") -> dict[str, Any]:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {"tags": tags} if tags else {}, "source": source}


def task(number: int, difficulty: int, minutes: int, text: str) -> str:
    return f"**Your turn {number}** (difficulty {difficulty}/3, importance 2/3, about {minutes} min): {text}"


def synthetic() -> dict[str, Any]:
    """A lesson with a value exercise, a function with a docstring and a hint, a bare function whose
    check sets up a name the solution uses, and an exercise cell that sets up an input itself."""
    cells = [
        markdown("# Lesson 99 - Synthetic\n\nEvery shape of exercise."),
        code(CHECKERS),
        markdown(task(1, 1, 2, "store twice `x` in `answer_1`.")),
        code("answer_1 = None  # twice x", ["exercise"]),
        code("print(check_double(answer_1, x))", ["check"]),
        code(f"{SOLUTION_FIRST_LINE}\nanswer_1 = 2 * x  # x + x works too", ["solution", "hide-input"]),
        markdown(task(2, 3, 8, "write `square(v)`.")),
        code('def square(v):\n    """v squared."""\n    ...', ["exercise"]),
        code('print(check_function("square", square, 5, 25))', ["check"]),
        markdown("<details><summary>Hint</summary>\n\nMultiply.\n\n</details>", ["hint"]),
        code(SOLUTION_FIRST_LINE + '\ndef square(v):\n    """v squared."""\n    return v * v', SOLUTION_TAGS),
        markdown(task(3, 2, 3, "write `shifted(v)`, `v` plus `offset`.")),
        code("def shifted(v):\n    ...", ["exercise"]),
        code('offset = 10\nprint(check_function(\n    "shifted", shifted, 1, 11))', ["check"]),
        code(f"{SOLUTION_FIRST_LINE}\ndef shifted(v):\n    return v + offset", ["solution", "hide-input"]),
        markdown(task(4, 2, 2, "halve `y`.")),
        code("y = 8\nanswer_4 = None", ["exercise"]),
        code('print(check_function("half", lambda _: answer_4, 0, y // 2))', ["check"]),
        code(f"{SOLUTION_FIRST_LINE}\nanswer_4 = y // 2", ["solution", "hide-input"]),
        markdown("The end."),
    ]
    for index, cell in enumerate(cells):
        cell["id"] = f"c{index:02d}"
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
            "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}  # fmt: skip


def by_id(notebook: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {cell["metadata"]["nbgrader"]["grade_id"]: cell for cell in notebook["cells"]}


def test_every_cell_gets_nbgraders_schema_3_metadata_and_nothing_else() -> None:
    course = classroom.convert_lesson(synthetic(), "99_synthetic")
    assert len(course["cells"]) == 20 - 4 + 1  # four solutions dropped, one set-up cell added
    for cell in course["cells"]:
        meta = cell["metadata"]["nbgrader"]
        always = {"grade", "grade_id", "locked", "schema_version", "solution"}
        expected = always | ({"points"} if meta["grade"] else set())
        assert set(meta) == expected and meta["schema_version"] == 3
        assert meta["locked"] == (not meta["solution"])
        assert "tags" not in cell["metadata"] or "solution" not in cell["metadata"]["tags"]
        assert cell.get("outputs", []) == []
    cells = by_id(course)
    assert {gid: c["metadata"]["nbgrader"]["points"] for gid, c in cells.items() if gid.endswith("-check")} == {
        "your-turn-1-check": 1, "your-turn-2-check": 3, "your-turn-3-check": 2, "your-turn-4-check": 2,
    }  # fmt: skip
    hint = next(c for c in course["cells"] if "hint" in c["metadata"].get("tags", []))
    assert hint["cell_type"] == "markdown" and hint["metadata"]["nbgrader"]["locked"]
    if classroom_validator := _validator():
        classroom_validator.validate_nb(_as_node(course))


def _validator() -> Any:
    try:
        from nbgrader.nbgraderformat.v3 import MetadataValidatorV3
    except ImportError:
        return None
    return MetadataValidatorV3()


def _as_node(notebook: dict[str, Any]) -> Any:
    import nbformat

    return nbformat.from_dict(json.loads(json.dumps(notebook)))  # type: ignore[no-untyped-call]


def test_answer_cells_hold_the_blank_and_the_reference_answer_between_the_markers() -> None:
    cells = by_id(classroom.convert_lesson(synthetic(), "99_synthetic"))
    assert cells["your-turn-1-answer"]["source"] == (
        "answer_1 = None  # twice x\n### BEGIN SOLUTION\nanswer_1 = 2 * x  # x + x works too\n### END SOLUTION"
    )
    # The shared def line and docstring are written once; the blank's `...` goes.
    assert cells["your-turn-2-answer"]["source"] == (
        'def square(v):\n    """v squared."""\n    ### BEGIN SOLUTION\n    return v * v\n    ### END SOLUTION'
    )
    # Without a docstring the `...` stays: the student's copy must still compile.
    assert cells["your-turn-3-answer"]["source"] == (
        "def shifted(v):\n    ...\n    ### BEGIN SOLUTION\n    return v + offset\n    ### END SOLUTION"
    )
    assert cells["your-turn-4-answer"]["source"] == (
        "y = 8\nanswer_4 = None\n### BEGIN SOLUTION\nanswer_4 = y // 2\n### END SOLUTION"
    )


def test_checks_become_graded_cells_and_their_set_up_also_comes_before_the_answer() -> None:
    course = classroom.convert_lesson(synthetic(), "99_synthetic")
    cells = by_id(course)
    assert cells["your-turn-1-check"]["source"] == (
        "verdict = check_double(answer_1, x)\nprint(verdict)\n"
        'assert verdict.ok, "not correct yet: the message above says why"'
    )
    assert cells["your-turn-3-check"]["source"] == (
        'offset = 10\nverdict = check_function(\n    "shifted", shifted, 1, 11)\nprint(verdict)\n'
        'assert verdict.ok, "not correct yet: the message above says why"'
    )
    order = [cell["metadata"]["nbgrader"]["grade_id"] for cell in course["cells"]]
    assert order.index("your-turn-3-setup") == order.index("your-turn-3-answer") - 1
    assert cells["your-turn-3-setup"]["source"] == "offset = 10"
    assert cells["your-turn-3-setup"]["metadata"]["nbgrader"]["locked"]
    assert "your-turn-1-setup" not in cells  # nothing to set up


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda cells: cells[5].update(source="# Solution\nanswer_1 = 2 * x"), "must start with"),
        (lambda cells: cells[4].update(source="check_double(answer_1, x)"), "print(<checker call>)"),
        (lambda cells: cells[2].update(source="**Your turn 1** (about 2 min): double"), "tagged `exercise`"),
        (lambda cells: cells.pop(5), "no `solution` cell"),
        (lambda cells: cells[5].update(source=SOLUTION_FIRST_LINE + "\n"), "no answer"),
    ],
    ids=["solution-first-line", "check-without-print", "old-task-header", "solution-missing", "empty-solution"],
)
def test_a_lesson_out_of_the_format_is_refused_with_a_reason(change: Any, message: str) -> None:
    notebook = synthetic()
    change(notebook["cells"])
    with pytest.raises(classroom.CourseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        classroom.convert_lesson(notebook, "99_synthetic")


def test_nbgrader_main_writes_the_course_and_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "99_synthetic.ipynb").write_text(json.dumps(synthetic()), encoding="utf-8")
    assert classroom.nbgrader_main([str(tmp_path / "course"), "--source", str(lessons)]) == 0
    assert (tmp_path / "course" / "source" / "99_synthetic" / "99_synthetic.ipynb").is_file()
    config = (tmp_path / "course" / "nbgrader_config.py").read_text(encoding="utf-8")
    assert "c.OverwriteCells.add_missing_cells = True" in config and "99_synthetic" in config
    assert classroom.nbgrader_main([str(tmp_path / "other"), "--source", str(tmp_path / "empty")]) == 1
    assert "no lesson notebooks" in capsys.readouterr().err


def test_every_lesson_converts_with_one_graded_cell_per_exercise(tmp_path: Path) -> None:
    written = classroom.write_course(tmp_path, NOTEBOOKS)
    lessons = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    assert len(written) == len(lessons) + 1
    for path in lessons:
        original = json.loads(path.read_text(encoding="utf-8"))
        found = classroom.exercises(original, path.stem)
        assert found, f"{path.stem} has no exercise"
        course = json.loads((tmp_path / "source" / path.stem / path.name).read_text(encoding="utf-8"))
        graded = [c for c in course["cells"] if c["metadata"]["nbgrader"]["grade"]]
        assert [c["metadata"]["nbgrader"]["points"] for c in graded] == [item.difficulty for item in found]
        assert sum(c["metadata"]["nbgrader"]["solution"] for c in course["cells"]) == len(found)
        if validator := _validator():
            validator.validate_nb(_as_node(course))


def test_the_synthetic_course_round_trips_through_nbgrader(tmp_path: Path) -> None:
    require("nbgrader")
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "99_synthetic.ipynb").write_text(json.dumps(synthetic()), encoding="utf-8")
    course = tmp_path / "course"
    classroom.write_course(course, lessons)
    generated = run_tool(["nbgrader", "generate_assignment", "99_synthetic"], course)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    release = course / "release" / "99_synthetic" / "99_synthetic.ipynb"
    student = by_id(json.loads(release.read_text(encoding="utf-8")))
    stub = f'def square(v):\n    """v squared."""\n    {classroom.CODE_STUB}'
    assert "".join(student["your-turn-2-answer"]["source"]) == stub
    source = course / "source" / "99_synthetic" / "99_synthetic.ipynb"
    passes = run_tool(["nbgrader", "validate", str(source)], course)
    assert "Success! Your notebook passes all the tests." in passes.stdout, passes.stdout + passes.stderr
    blank = run_tool(["nbgrader", "validate", "--invert", str(release)], course)
    assert "Success! The notebook does not pass any tests." in blank.stdout, blank.stdout + blank.stderr
