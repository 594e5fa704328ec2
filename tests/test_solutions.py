"""Every exercise starts blank and every solution is right, checked by running each lesson once.

The committed solution cells are silent (they print nothing, so no answer is stored under them),
so no stored output shows that a solution passes its checker: this test does. For each lesson it
builds the student variant (``several-heads student``: solution cells removed, outputs cleared) and
puts, right after every check cell, one extra cell that

* copies the kernel's globals (a shallow copy: the lesson's own names are untouched, so the cells
  that follow still run as a learner's would run them, without any solution),
* runs the removed solution's code in that copy, capturing anything it prints,
* runs the check cell's statements in the copy and evaluates the expression its last statement
  prints (``print(<module>.check_<something>(...))``),
* prints one marker line with the verdict, as JSON, and whether the notation letters the exercise's
  statement declares (``several_heads.exercise.sizes`` on its "Your turn" cell) hold the values it
  says in the kernel, before the solution runs (a learner typing ``T`` gets the statement's ``T``).

Then it executes the notebook once, in a fresh kernel started in the lesson's folder, and requires:
the whole notebook runs (nothing depends on a solution), every check cell printed "not answered
yet" (the exercises are blank), every solution printed nothing and its checker said "correct".

The machinery is first tried on small notebooks made here, one per kind of problem it must catch.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat import v4

from lessons_lib import cli
from lessons_lib.checks import SOLUTION_FIRST_LINE

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MARKER = "@@several-heads-solution-verdict@@ "
CORRECT = re.compile(r"^\[[^\]]+\] correct:")
BLANK = re.compile(r"^\[[^\]]+\] not answered yet:", re.MULTILINE)

new_code_cell: Callable[..., Any] = v4.new_code_cell
new_markdown_cell: Callable[..., Any] = v4.new_markdown_cell
new_notebook: Callable[..., Any] = v4.new_notebook

# The extra cell. Everything it defines lives inside the function, which it deletes at the end,
# so the kernel's globals are the same after it as before it.
VERIFY = '''\
def _several_heads_verify():
    import contextlib, io, json, traceback
    namespace = dict(globals())
    report = {{"exercise": {number}, "printed": "", "verdict": None, "error": None, "sizes": []}}
    for name, wanted in {sizes!r}.items():
        held = namespace.get(name, "<not defined>")
        try:
            same = bool(held == wanted) or (isinstance(wanted, list) and tuple(held) == tuple(wanted))
        except Exception:
            same = False
        if not same:
            report["sizes"].append(f"{{name}} is {{held!r}} in the kernel; the statement says {{wanted!r}}")
    try:
        solution = get_ipython().transform_cell({solution!r})
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            exec(compile(solution, "<solution of exercise {number}>", "exec"), namespace)
        report["printed"] = printed.getvalue()
        exec(compile({setup!r}, "<check of exercise {number}>", "exec"), namespace)
        report["verdict"] = str(eval(compile({verdict!r}, "<check of exercise {number}>", "eval"), namespace))
    except BaseException:
        report["error"] = traceback.format_exc()
    print({marker!r} + json.dumps(report))
_several_heads_verify()
del _several_heads_verify
'''


def tags(cell: Any) -> list[str]:
    found: list[str] = cell.get("metadata", {}).get("tags", [])
    return found


@dataclass(frozen=True)
class Exercise:
    number: int
    check: str  # the check cell's source
    solution: str  # the solution cell's source
    sizes: dict[str, Any]  # the notation letters the statement uses and their values


def exercises(notebook: Any) -> list[Exercise]:
    """Each check cell with the solution cell that follows it (a hint may stand between them)."""
    found: list[Exercise] = []
    cells = notebook.cells
    for i, cell in enumerate(cells):
        if "check" not in tags(cell):
            continue
        following = [c for c in cells[i + 1 : i + 3] if "solution" in tags(c)]
        assert following, f"check cell {i} is not followed by its solution (or a hint, then the solution)"
        start = max([j + 1 for j, c in enumerate(cells[:i]) if "check" in tags(c)], default=0)  # after the last check
        statements = [
            c for c in cells[start:i] if c.cell_type == "markdown" and c.source.lstrip().startswith("**Your turn")
        ]
        spec = statements[-1].get("metadata", {}).get("several_heads", {}).get("exercise", {}) if statements else {}
        found.append(Exercise(len(found) + 1, cell.source, following[0].source, dict(spec.get("sizes", {}))))
    return found


def split_check(source: str) -> tuple[str, str]:
    """The check cell's statements before its last one, and the expression the last one prints."""
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body else None
    call = last.value if isinstance(last, ast.Expr) else None
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "print"
        and len(call.args) == 1
        and not call.keywords
    ):
        raise ValueError(f"the check cell's last statement must be print(<checker call>), got:\n{source}")
    assert last is not None
    setup = "\n".join(source.splitlines()[: last.lineno - 1])
    verdict = ast.get_source_segment(source, call.args[0])
    assert verdict is not None
    return setup, verdict


def verifying_notebook(lesson: Any) -> tuple[Any, list[Exercise]]:
    """The student variant of ``lesson`` with a verifying cell after each check cell."""
    found = exercises(lesson)
    student = cli.student_notebook(lesson)
    cells, checks = [], iter(found)
    for cell in student.cells:
        cells.append(cell)
        if "check" in tags(cell):
            exercise = next(checks)
            setup, verdict = split_check(exercise.check)
            source = VERIFY.format(
                number=exercise.number, solution=exercise.solution, setup=setup, verdict=verdict, marker=MARKER,
                sizes=exercise.sizes,
            )
            cells.append(new_code_cell(source, metadata={"tags": ["verify-solution"]}))
    student.cells = cells
    return student, found


def text_of(cell: Any) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        elif output.get("output_type") == "error":
            parts.append(f"{output.get('ename')}: {output.get('evalue')}")
        elif "data" in output:
            parts.append(output["data"].get("text/plain", ""))
    return "".join(parts)


def solution_problems(lesson: Any, folder: Path) -> list[str]:
    """Run the verifying notebook of ``lesson`` once, in a fresh kernel in ``folder``; what is wrong."""
    notebook, found = verifying_notebook(lesson)
    client = NotebookClient(notebook, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(folder)}})
    try:
        client.execute()
    except CellExecutionError as error:  # its message names the cell and shows the traceback
        shown = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # the traceback without its terminal colours
        return [f"the lesson without its solutions does not run to the end ({error.ename}: {error.evalue}):\n{shown}"]
    problems = []
    checks = [cell for cell in notebook.cells if "check" in tags(cell)]
    for exercise, cell in zip(found, checks, strict=True):
        text = text_of(cell)
        if not BLANK.search(text) or "] correct:" in text or "] not yet:" in text:
            problems.append(f"exercise {exercise.number}: the blank exercise's check printed {text.strip()!r}")
    reports = [
        json.loads(line.removeprefix(MARKER))
        for cell in notebook.cells
        if "verify-solution" in tags(cell)
        for line in text_of(cell).splitlines()
        if line.startswith(MARKER)
    ]
    assert [report["exercise"] for report in reports] == [exercise.number for exercise in found]
    for report in reports:
        where = f"exercise {report['exercise']}'s solution"
        if report["error"]:
            problems.append(f"{where} (or its check) raised:\n{report['error']}")
        elif not CORRECT.match(report["verdict"]):
            problems.append(f"{where}: the checker said {report['verdict']!r}")
        problems += [f"exercise {report['exercise']}: {wrong}" for wrong in report["sizes"]]
        if report["printed"]:
            problems.append(f"{where} printed {report['printed']!r}; a solution cell prints nothing")
    return problems


# --- the lessons ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", LESSONS, ids=[path.name for path in LESSONS])
def test_blank_exercises_and_right_solutions(path: Path) -> None:
    lesson = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    assert exercises(lesson), f"{path.name} has no exercises"
    problems = solution_problems(lesson, path.parent)
    assert not problems, f"{path.name}:\n" + "\n\n".join(problems)


# --- the machinery, on small notebooks made here ------------------------------------------------------------

CHECKER = '''\
from lessons_lib.checks import failed, passed, unanswered

def check_double(answer):
    if answer is None:
        return unanswered("double", "replace None with a number")
    return passed("double", "2 * 21 = 42") if answer == 42 else failed("double", f"{answer} is not 2 * 21")

def check_area(function, width):
    if function(1, 1) is None:
        return unanswered("area", "write area(w, h)")
    return passed("area", "w * h") if function(width, 2) == width * 2 else failed("area", "not w * h")
'''


def tiny_lesson(**changes: str) -> Any:
    """Two exercises in the format; ``changes`` replaces the source of named cells."""
    sources = {
        "checker": CHECKER,
        "shared": "x = 21",
        "exercise1": "answer_1 = None",
        "check1": "print(check_double(answer_1))",
        "solution1": f"{SOLUTION_FIRST_LINE}\nanswer_1 = 2 * x",
        "exercise2": "def area(w, h):\n    ...",
        "check2": "width = 5\nprint(check_area(area, width))",
        "solution2": f"{SOLUTION_FIRST_LINE}\ndef area(w, h):\n    return w * h",
        "after": "print('the lesson goes on', x)",
        **changes,
    }
    tagged = {"exercise1": "exercise", "check1": "check", "solution1": "solution"}
    tagged |= {"exercise2": "exercise", "check2": "check", "solution2": "solution"}
    cells = []
    for name, text in sources.items():
        cells.append(new_code_cell(text, metadata={"tags": [tagged[name]]} if name in tagged else {}))
        if name == "check2":
            cells.append(new_markdown_cell("<details><summary>Hint</summary>\n\nw times h\n\n</details>",
                                           metadata={"tags": ["hint"]}))  # fmt: skip
    return new_notebook(cells=cells)


def test_a_well_formed_lesson_has_no_problems(tmp_path: Path) -> None:
    assert solution_problems(tiny_lesson(), tmp_path) == []


def test_the_machinery_names_every_kind_of_problem(tmp_path: Path) -> None:
    lesson = tiny_lesson(
        exercise1="answer_1 = 42",  # not blank
        solution1=f"{SOLUTION_FIRST_LINE}\nanswer_1 = 2 * x\nprint(check_double(answer_1))",  # prints
        solution2=f"{SOLUTION_FIRST_LINE}\ndef area(w, h):\n    return w * 3",  # wrong
    )
    problems = solution_problems(lesson, tmp_path)
    assert len(problems) == 3, problems
    assert problems[0].startswith("exercise 1: the blank exercise's check printed '[double] correct: 2 * 21 = 42'")
    assert problems[1].startswith("exercise 1's solution printed '[double] correct")
    assert problems[2] == "exercise 2's solution: the checker said '[area] not yet: not w * h'"


def test_a_solution_that_raises_is_reported_and_the_lesson_goes_on(tmp_path: Path) -> None:
    problems = solution_problems(tiny_lesson(solution1=f"{SOLUTION_FIRST_LINE}\nanswer_1 = 2 * y"), tmp_path)
    assert len(problems) == 1 and "exercise 1's solution (or its check) raised" in problems[0], problems
    assert "NameError: name 'y' is not defined" in problems[0]


def test_a_lesson_that_needs_a_solution_is_reported(tmp_path: Path) -> None:
    """A later cell using a name only the solution defines fails without the solutions: the
    verifying cell must not leak the solution's names into the lesson."""
    solution = f"{SOLUTION_FIRST_LINE}\nanswer_1 = 2 * x\ndoubled = answer_1"
    problems = solution_problems(tiny_lesson(solution1=solution, after="print(doubled)"), tmp_path)
    assert len(problems) == 1 and "does not run to the end" in problems[0], problems
    assert "NameError: name 'doubled' is not defined" in problems[0]


def test_the_check_cell_statements_run_in_the_copy(tmp_path: Path) -> None:
    """The check cell's setup runs again in the copy: there it finds the width the check cell left
    in the kernel (5) and makes it 6, and only a width of 6 passes this solution."""
    check = 'width = globals().get("width", 4) + 1\nprint(check_area(area, width))'
    only_6 = f"{SOLUTION_FIRST_LINE}\ndef area(w, h):\n    return 12 if w == 6 else 0"
    assert solution_problems(tiny_lesson(check2=check, solution2=only_6), tmp_path) == []


def test_a_notation_letter_the_kernel_holds_otherwise_is_reported(tmp_path: Path) -> None:
    """The statement of exercise 1 says x = 20 (the kernel holds 21) and T = 3 (never defined)."""
    lesson = tiny_lesson()
    declared = {"several_heads": {"exercise": {"solution": "s", "sizes": {"x": 20, "T": 3}}}}
    statement = new_markdown_cell("**Your turn 1** (difficulty 1/3, importance 1/3, about 1 min): double x.",
                                  metadata=declared)
    lesson.cells.insert(2, statement)
    problems = solution_problems(lesson, tmp_path)
    assert problems == ["exercise 1: x is 21 in the kernel; the statement says 20",
                        "exercise 1: T is '<not defined>' in the kernel; the statement says 3"], problems
    statement.metadata["several_heads"]["exercise"]["sizes"] = {"x": 21}
    assert solution_problems(lesson, tmp_path) == []


@pytest.mark.parametrize("source", ["check_double(1)", "print(check_double(1), end='')", "x = 1\nprint(1, 2)", ""])
def test_a_check_cell_must_end_in_one_print(source: str) -> None:
    with pytest.raises(ValueError, match="last statement must be print"):
        split_check(source)


def test_split_check_keeps_the_setup_and_the_printed_expression() -> None:
    setup, verdict = split_check("width = 5\nsizes = [\n    1,\n]\nprint(checks.check_area(area,\n  width))")
    assert setup == "width = 5\nsizes = [\n    1,\n]"
    assert verdict == "checks.check_area(area,\n  width)"


def test_regenerating_a_lesson_refuses_a_solution_that_prints(tmp_path: Path) -> None:
    """scripts/regenerate_notebooks.py stops, and leaves the notebook as it was, when a solution
    cell produces output; a silent solution is written normally."""
    spec = importlib.util.spec_from_file_location("regenerate_notebooks", ROOT / "scripts" / "regenerate_notebooks.py")
    assert spec is not None and spec.loader is not None
    regenerate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(regenerate)
    loud = tmp_path / "loud.ipynb"
    solution = new_code_cell(f"{SOLUTION_FIRST_LINE}\nanswer = 2\nanswer", metadata={"tags": ["solution"]})
    nbformat.write(new_notebook(cells=[new_code_cell("x = 1"), solution]), loud)  # type: ignore[no-untyped-call]
    before = loud.read_bytes()
    silent = tmp_path / "silent.ipynb"
    solution = new_code_cell(f"{SOLUTION_FIRST_LINE}\nanswer = 2", metadata={"tags": ["solution"]})
    nbformat.write(new_notebook(cells=[new_code_cell("print(1)"), solution]), silent)  # type: ignore[no-untyped-call]
    assert regenerate.main([str(loud), str(silent)]) == 1
    assert loud.read_bytes() == before
    written = nbformat.read(silent, as_version=4)  # type: ignore[no-untyped-call]
    assert [cell.execution_count for cell in written.cells] == [1, 2]
    assert written.cells[0].outputs[0].text == "1\n"
