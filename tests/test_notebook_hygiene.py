"""Hygiene of the committed notebooks: what strict nbval does not check by itself.

Each check is a small function returning a list of problems (empty = clean), run on every
``notebooks/*.ipynb``. The checks are first tested on tiny hand-made notebooks, so they would
catch a problem even before any lesson exists.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lessons_lib.checks import SOLUTION_FIRST_LINE, VERDICT_WIDTH

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
FOLD_SCRIPT = NOTEBOOK_DIR.parent / "scripts" / "fold_predict_reveals.py"
_spec = importlib.util.spec_from_file_location("fold_predict_reveals", FOLD_SCRIPT)
assert _spec is not None and _spec.loader is not None
FOLD = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(FOLD)
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))

Notebook = dict[str, Any]
IGNORE_WITH_REASON = re.compile(r"NBVAL_IGNORE_OUTPUT\W+\w+")
ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{4,}")
TEXT_MIMETYPES = ("text/plain", "text/html", "text/markdown", "text/latex")


def source(cell: dict[str, Any]) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


def code_cells(nb: Notebook) -> list[dict[str, Any]]:
    return [cell for cell in nb["cells"] if cell["cell_type"] == "code"]


def output_texts(output: dict[str, Any]) -> list[str]:
    """The human-readable text of one stored output (images and widget state are skipped)."""
    if output["output_type"] == "stream":
        return [source({"source": output.get("text", "")})]
    if output["output_type"] == "error":
        return ["\n".join(output.get("traceback", []))]
    data = output.get("data", {})
    return [source({"source": data[kind]}) for kind in TEXT_MIMETYPES if kind in data]


def kernelspec_problems(nb: Notebook) -> list[str]:
    name = nb.get("metadata", {}).get("kernelspec", {}).get("name")
    return [] if name == "python3" else [f"kernelspec name is {name!r}, expected 'python3'"]


def execution_count_problems(nb: Notebook) -> list[str]:
    counts = [cell.get("execution_count") for cell in code_cells(nb)]
    expected = list(range(1, len(counts) + 1))
    if counts == expected:
        return []
    return [f"execution counts are {counts}, expected {expected}: run scripts/regenerate_notebooks.py"]


def timestamp_problems(nb: Notebook) -> list[str]:
    """Execution timestamps in cell metadata change on every run: noise in every diff."""
    return [
        f"code cell {i} stores execution timestamps in its metadata: run scripts/regenerate_notebooks.py"
        for i, cell in enumerate(code_cells(nb), 1)
        if "execution" in cell.get("metadata", {})
    ]


def error_output_problems(nb: Notebook) -> list[str]:
    return [
        f"code cell {i} stores an error output ({output.get('ename')}); catch it and print it instead"
        for i, cell in enumerate(code_cells(nb), 1)
        for output in cell.get("outputs", [])
        if output["output_type"] == "error"
    ]


def stderr_problems(nb: Notebook) -> list[str]:
    return [
        f"code cell {i} stores stderr output: {source({'source': output.get('text', '')})[:80]!r}"
        for i, cell in enumerate(code_cells(nb), 1)
        for output in cell.get("outputs", [])
        if output["output_type"] == "stream" and output.get("name") == "stderr"
    ]


def ignore_marker_problems(nb: Notebook) -> list[str]:
    """``# NBVAL_IGNORE_OUTPUT: <reason>`` and the cell tag ``nbval-ignore-output`` go together.

    nbval 0.11 only honours a comment that is exactly ``# NBVAL_IGNORE_OUTPUT``, with nothing after
    it, so a comment that also gives the reason is not seen by nbval. The tag is what nbval acts
    on; the comment is what a reader sees. One without the other misleads someone.
    """
    problems = []
    for i, cell in enumerate(code_cells(nb), 1):
        lines = [line for line in source(cell).splitlines() if "NBVAL_IGNORE_OUTPUT" in line]
        problems += [
            f"code cell {i}: NBVAL_IGNORE_OUTPUT needs a reason on the same line: {line.strip()!r}"
            for line in lines
            if not IGNORE_WITH_REASON.search(line)
        ]
        tagged = "nbval-ignore-output" in cell.get("metadata", {}).get("tags", [])
        if lines and not tagged:
            problems.append(
                f"code cell {i}: has the NBVAL_IGNORE_OUTPUT comment but not the cell tag "
                f"'nbval-ignore-output', so nbval still compares its output"
            )
        if tagged and not lines:
            problems.append(
                f"code cell {i}: tagged 'nbval-ignore-output' without a '# NBVAL_IGNORE_OUTPUT: <reason>' comment"
            )
    return problems


def machine_specific_output_problems(nb: Notebook) -> list[str]:
    problems = []
    for i, cell in enumerate(code_cells(nb), 1):
        for output in cell.get("outputs", []):
            for text in output_texts(output):
                if "/tmp/" in text:
                    problems.append(f"code cell {i} output contains a /tmp/ path")
                address = ADDRESS.search(text)
                if address:
                    problems.append(f"code cell {i} output contains a memory address: {address[0]}")
    return problems


def title_problems(nb: Notebook) -> list[str]:
    cells = nb["cells"]
    if not cells or cells[0]["cell_type"] != "markdown":
        return ["the first cell must be markdown with the lesson title"]
    lines = [line for line in source(cells[0]).splitlines() if line.strip()]
    if not lines or not re.match(r"# \S", lines[0]):
        return [f"the first cell must start with a level-1 title ('# ...'), got {lines[:1]}"]
    return []


def heading_problems(nb: Notebook) -> list[str]:
    markdown = "\n".join(source(cell) for cell in nb["cells"] if cell["cell_type"] == "markdown")
    return [
        f"no markdown heading containing {title!r}"
        for title in ("Quick check", "What comes next")
        if not re.search(rf"^#{{1,6}}\s.*\b{title}\b", markdown, flags=re.MULTILINE | re.IGNORECASE)
    ]


LIBRARY_IMPORT = re.compile(r"^\s*(from\s+(lessons_lib\S*)\s+import\s+(.+)|import\s+(lessons_lib\S*)(.*))$")
INTERNAL_MODULES = ("validation",)
LIBRARY_PACKAGES = ("lessons_lib", "lessons_lib.checks", "lessons_lib.plotting", "lessons_lib.widgets")


def _imported_names(text: str) -> list[str]:
    return [name.strip() for name in text.strip().strip("()").split(",") if name.strip()]


def library_import_problems(nb: Notebook) -> list[str]:
    """One import style: ``from lessons_lib[.sub] import module`` for modules only, no ``as``
    aliases, nothing internal, so ``mha_numpy.attention`` reads the same in every lesson."""
    problems = []
    for i, cell in enumerate(code_cells(nb), 1):
        text = re.sub(r"\(\s*([^)]*?)\s*\)", lambda m: "(" + " ".join(m[1].split()) + ")", source(cell))
        for line in text.splitlines():
            match = LIBRARY_IMPORT.match(line)
            if not match:
                continue
            if match[4]:
                problems.append(f"code cell {i}: write 'from lessons_lib import <module>', not {line.strip()!r}")
                continue
            package, names = match[2], _imported_names(match[3])
            for name in names:
                if " as " in name:
                    problems.append(f"code cell {i}: no alias for library modules: {line.strip()!r}")
                elif name in INTERNAL_MODULES or package.endswith(".validation"):
                    problems.append(f"code cell {i}: {name!r} is internal; notebooks use the public modules")
                elif not name.islower():
                    problems.append(
                        f"code cell {i}: import the module, not {name!r}: 'from {package.rsplit('.', 1)[0]} "
                        f"import {package.rsplit('.', 1)[-1]}' then '{package.rsplit('.', 1)[-1]}.{name}'"
                    )
            if package not in LIBRARY_PACKAGES:
                problems.append(f"code cell {i}: import modules from their package: {line.strip()!r}")
    return problems


def tags(cell: dict[str, Any]) -> list[str]:
    found: list[str] = cell.get("metadata", {}).get("tags", [])
    return found


def all_output_text(cell: dict[str, Any]) -> str:
    return "\n".join(text for output in cell.get("outputs", []) for text in output_texts(output))


# The exercise format (issue 19): the task's first words, a collapsed hint, what a check cell ends with.
YOUR_TURN = re.compile(r"\*\*Your turn (\d+)\*\* \(difficulty ([1-3])/3, importance ([1-3])/3, about (\d+) min\): \S")
HINT = re.compile(r"<details><summary>Hint</summary>\n\n(?=.*\S).+\n\n</details>\n?", re.DOTALL)
HINT_FROM_MINUTES = 5


def _is_checker_print(statement: ast.stmt) -> bool:
    """``print(<module>.check_<something>(...))``: a check cell's last statement."""
    call = statement.value if isinstance(statement, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print"):
        return False
    if len(call.args) != 1 or call.keywords:
        return False
    inner = call.args[0]
    return (
        isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Attribute)
        and isinstance(inner.func.value, ast.Name)
        and inner.func.attr.startswith("check_")
    )


def _calls(text: str) -> list[str]:
    """The names of the functions and methods a cell calls (empty when it is not plain Python)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                names.append(node.func.id)
            elif isinstance(node.func, ast.Attribute):
                names.append(node.func.attr)
    return names


def _check_cell_problems(where: str, check: dict[str, Any]) -> list[str]:
    problems = []
    try:
        body = ast.parse(source(check)).body
    except SyntaxError:
        body = []
    if not body or not _is_checker_print(body[-1]):
        problems.append(f"{where}: the check cell's last statement must be print(<module>.check_<something>(...))")
    text = all_output_text(check)
    if "not answered yet" not in text or "] correct" in text or "] not yet" in text:
        problems.append(f"{where}: its check cell must report only 'not answered yet', got {text[:120]!r}")
    # JupyterLab breaks a line wider than the notebook anywhere, even inside a word: a verdict comes in
    # lines of at most VERDICT_WIDTH characters (a single word longer than that may keep its own line).
    problems += [
        f"{where}: its verdict has a line of {len(line)} characters (at most {VERDICT_WIDTH}): {line[:60]!r}..."
        for line in text.splitlines() if len(line) > VERDICT_WIDTH and " " in line.strip()
    ]
    return problems


def _solution_cell_problems(where: str, solution: dict[str, Any]) -> list[str]:
    problems = []
    if solution["cell_type"] != "code":
        problems.append(f"{where}: the solution must be a code cell")
    if source(solution).split("\n", 1)[0] != SOLUTION_FIRST_LINE:
        problems.append(f"{where}: the solution's first line must be exactly {SOLUTION_FIRST_LINE!r}")
    if solution.get("outputs"):
        problems.append(f"{where}: the solution cell stores output (the answer, on screen before the learner tries)")
    called = [name for name in _calls(source(solution)) if name == "print" or name.startswith("check_")]
    if called:
        problems.append(f"{where}: a solution is the answer code only; it calls {sorted(set(called))}")
    if not solution.get("metadata", {}).get("jupyter", {}).get("source_hidden"):
        problems.append(f"{where}: the solution cell must be collapsed (metadata jupyter.source_hidden = true)")
    if "hide-input" not in tags(solution):
        problems.append(f"{where}: the solution cell must also be tagged 'hide-input' (collapsed on the website)")
    return problems


def exercise_problems(nb: Notebook) -> list[str]:
    """Every exercise follows the format of issue 19, and a lesson has 4 to 6 of them:

    1. a markdown task starting ``**Your turn N** (difficulty D/3, importance I/3, about M min): ``,
       numbered 1, 2, 3, ... in order;
    2. a blank code cell tagged ``exercise`` (``answer = None``, or a body of ``...``);
    3. a cell tagged ``check`` ending in ``print(<module>.check_<something>(...))``, which stores
       "not answered yet";
    4. for M >= 5, a markdown cell tagged ``hint``, collapsed in ``<details>``;
    5. a silent solution: tagged ``solution`` and ``hide-input``, collapsed, first line
       ``SOLUTION_FIRST_LINE``, no print, no checker call, no stored output.
    """
    cells = nb["cells"]
    problems = []
    starts = [i for i, cell in enumerate(cells) if "exercise" in tags(cell)]
    if not 4 <= len(starts) <= 6:
        problems.append(f"{len(starts)} cells tagged 'exercise'; a lesson has 4 to 6")
    tasks = [
        i for i, cell in enumerate(cells) if cell["cell_type"] == "markdown" and source(cell).startswith("**Your turn")
    ]
    problems += [
        f"cell {i}: a 'Your turn' task is a markdown cell of its own that starts with '**Your turn N** (...): '"
        for i, cell in enumerate(cells)
        if i not in tasks and re.search(r"\*\*Your turn \d", source(cell))  # prose may name "Your turn 3"
    ]
    for position, i in enumerate(tasks, 1):
        match = YOUR_TURN.match(source(cells[i]))
        if match is None:
            problems.append(
                f"cell {i}: a task must start '**Your turn N** (difficulty D/3, importance I/3, about M min): ' "
                f"(D and I from 1 to 3), got {source(cells[i])[:90]!r}"
            )
        elif int(match[1]) != position:
            problems.append(f"cell {i}: 'Your turn {match[1]}' is exercise {position}: number them 1, 2, 3, ...")
        if i + 1 >= len(cells) or "exercise" not in tags(cells[i + 1]):
            problems.append(f"cell {i}: a 'Your turn' task must be followed at once by its cell tagged 'exercise'")
    for number, i in enumerate(starts, 1):
        where = f"exercise {number} (cell {i})"
        if cells[i]["cell_type"] != "code" or not re.search(r"\bNone\b|^\s*\.\.\.\s*$", source(cells[i]), re.MULTILINE):
            problems.append(f"{where}: must be a code cell left blank (answer = None, or a body of ...)")
        task = YOUR_TURN.match(source(cells[i - 1])) if i > 0 and cells[i - 1]["cell_type"] == "markdown" else None
        if task is None:
            problems.append(f"{where}: the cell before it must be its '**Your turn N** (...)' task")
        following = cells[i + 1 : i + 4]
        if not following or "check" not in tags(following[0]):
            problems.append(f"{where}: must be followed by its cell tagged 'check'")
            continue
        problems += _check_cell_problems(where, following[0])
        hint = following[1] if len(following) > 1 and "hint" in tags(following[1]) else None
        solution = following[2 if hint else 1] if len(following) > (2 if hint else 1) else None
        if task is not None and int(task[4]) >= HINT_FROM_MINUTES and hint is None:
            problems.append(f"{where}: an exercise of {task[4]} min needs a hint cell between its check and solution")
        if solution is None or "solution" not in tags(solution):
            problems.append(f"{where}: after its check (and hint, if any) must come the cell tagged 'solution'")
            continue
        problems += _solution_cell_problems(where, solution)
    return problems


def hint_problems(nb: Notebook) -> list[str]:
    """Every hint is a markdown cell folded in ``<details><summary>Hint</summary>``, so it opens only on
    a click (in JupyterLab and on the website), and it follows a check cell."""
    cells = nb["cells"]
    problems = []
    for i, cell in enumerate(cells):
        if "hint" not in tags(cell):
            continue
        if cell["cell_type"] != "markdown" or not HINT.fullmatch(source(cell)):
            problems.append(
                f"cell {i}: a hint is a markdown cell reading exactly "
                f"'<details><summary>Hint</summary>\\n\\n...\\n\\n</details>', got {source(cell)[:80]!r}"
            )
        if i == 0 or "check" not in tags(cells[i - 1]):
            problems.append(f"cell {i}: a hint stands right after its exercise's check cell")
    return problems


def silent_solution_problems(nb: Notebook) -> list[str]:
    """No solution cell anywhere stores output: a stored output is the answer, shown under the bar."""
    return [
        f"cell {i} (a solution) stores output: {all_output_text(cell)[:80]!r}"
        for i, cell in enumerate(nb["cells"])
        if "solution" in tags(cell) and cell.get("outputs")
    ]


def predict_problems(nb: Notebook) -> list[str]:
    """At least three "**Predict:**" prompts, each right before the code cell that reveals it."""
    cells = nb["cells"]
    prompts = [i for i, cell in enumerate(cells) if cell["cell_type"] == "markdown" and "**Predict:**" in source(cell)]
    problems = [] if len(prompts) >= 3 else [f"{len(prompts)} '**Predict:**' prompts; a lesson asks at least 3"]
    problems += [
        f"cell {i}: a Predict prompt must come right before the code cell that reveals the answer"
        for i in prompts
        if i + 1 >= len(cells) or cells[i + 1]["cell_type"] != "code"
    ]
    # On the website the reveal's output is folded under a button (myst-nb's hide-output tag), so a
    # reader decides before seeing it; JupyterLab and Colab ignore the tag (the copy there has no output).
    problems += [
        f"cell {i + 1}: the reveal of the Predict in cell {i} is not folded on the site (tag 'hide-output' and its "
        "toggle's words): run python scripts/fold_predict_reveals.py"
        for i in prompts
        if i + 1 < len(cells) and cells[i + 1]["cell_type"] == "code" and not FOLD.folded(cells[i + 1])
    ]
    return problems


PLOTTING_CALL = re.compile(r"\b(" + "|".join(("attention_flow", "head_split", "head_merge", "mask_conventions",
    "attention_maps", "cache_charts", "latent_flow", "tiling", "residual_stream", "induction_maps",
    "text_maps")) + r")\.\w+\(")


def figure_problems(nb: Notebook) -> list[str]:
    """Every lesson shows at least one figure (a stored PNG) drawn by a ``lessons_lib.plotting``
    function from the lesson's own arrays; nbval does not compare PNGs, so the cell that draws it
    (or the next one) must also print what the figure shows."""
    figures = [
        (i, cell) for i, cell in enumerate(code_cells(nb), 1)
        if any("image/png" in output.get("data", {}) for output in cell.get("outputs", []))
    ]
    if not figures:
        return ["no figure: a lesson shows at least one picture drawn by a lessons_lib.plotting function"]
    if not any(PLOTTING_CALL.search(source(cell)) for _, cell in figures):
        return ["no figure is drawn by a lessons_lib.plotting function (pasted or inline-only pictures)"]
    return []


CHECKS: dict[str, Callable[[Notebook], list[str]]] = {
    "figures": figure_problems,
    "exercises": exercise_problems,
    "hints": hint_problems,
    "silent_solutions": silent_solution_problems,
    "predictions": predict_problems,
    "one_library_import_style": library_import_problems,
    "kernelspec": kernelspec_problems,
    "execution_counts": execution_count_problems,
    "no_timestamps": timestamp_problems,
    "no_error_outputs": error_output_problems,
    "no_stderr": stderr_problems,
    "ignore_markers_have_reasons": ignore_marker_problems,
    "no_machine_specific_output": machine_specific_output_problems,
    "title_first": title_problems,
    "quick_check_and_what_next": heading_problems,
}


# --- the committed notebooks ---------------------------------------------------------------------


def test_notebooks_folder_exists() -> None:
    assert NOTEBOOK_DIR.is_dir(), f"{NOTEBOOK_DIR} is missing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_file_name_is_numbered(path: Path) -> None:
    assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", path.name), f"{path.name}: expected NN_topic.ipynb"


@pytest.mark.parametrize("check", list(CHECKS), ids=list(CHECKS))
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_hygiene(path: Path, check: str) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    problems = CHECKS[check](nb)
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


# --- the checks themselves, on tiny hand-made notebooks -------------------------------------------


def markdown(text: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code(
    text: str, count: int | None, outputs: list[dict[str, Any]] | None = None, tags: list[str] | None = None
) -> dict[str, Any]:
    metadata = {"tags": tags} if tags else {}
    cell = {"cell_type": "code", "metadata": metadata, "source": text, "execution_count": count}
    return {**cell, "outputs": outputs or []}


def stream(text: str, name: str = "stdout") -> dict[str, Any]:
    return {"output_type": "stream", "name": name, "text": text}


def exercise(number: int, count: int, minutes: int = 5) -> list[dict[str, Any]]:
    """One well-formed exercise: task, blank cell, check (not answered yet), a hint when it takes 5
    minutes or more, a collapsed and silent solution."""
    solution = code(f"{SOLUTION_FIRST_LINE}\nanswer_{number} = 2", count + 2, tags=["solution", "hide-input"])
    solution["metadata"]["jupyter"] = {"source_hidden": True}
    check = f"x = 1\nprint(one_head.check_sum(answer_{number}))"
    hint = markdown("<details><summary>Hint</summary>\n\nAdd the two.\n\n</details>")
    hint["metadata"]["tags"] = ["hint"]
    return [
        markdown(f"**Your turn {number}** (difficulty 1/3, importance 2/3, about {minutes} min): what is 1 + 1?"),
        code(f"answer_{number} = None", count, tags=["exercise"]),
        code(check, count + 1, [stream("[q] not answered yet: replace None\n")], ["check"]),
        *([hint] if minutes >= 5 else []),
        solution,
    ]


def clean_notebook() -> Notebook:
    return {
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [
            markdown("# 01 - One head\n\nBuilds on nothing."),
            code("print(1 + 1)", 1, [stream("2\n")]),
            code("# NBVAL_IGNORE_OUTPUT: live widget; the next cell drives it\nw", 2, tags=["nbval-ignore-output"]),
            markdown("## Quick check"),
            code("from lessons_lib import mha_numpy\nfrom lessons_lib.checks import one_head\nx = 10", 3),
            *[
                cell
                for n in range(4)
                for cell in [markdown("**Predict:** what prints?"), folded_reveal(code("print(0)", 4 + n))]
            ],
            *[cell for n in range(4) for cell in exercise(n + 1, 8 + 3 * n, minutes=2 + 3 * n)],
            figure(20),
            markdown("## What comes next\n\nLesson 02."),
        ],
    }


def folded_reveal(cell: dict[str, Any]) -> dict[str, Any]:
    FOLD.fold(cell)
    return cell


def figure(count: int) -> dict[str, Any]:
    data = {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}
    png = {"output_type": "display_data", "metadata": {}, "data": data}
    return code("fig = attention_maps.plot_heads(weights)\nplt.show()", count, [png])


def test_checks_pass_a_clean_notebook() -> None:
    nb = clean_notebook()
    assert {name: check(nb) for name, check in CHECKS.items()} == {name: [] for name in CHECKS}


def broken(change: Callable[[Notebook], None]) -> Notebook:
    nb = clean_notebook()
    change(nb)
    return nb


def set_kernel(nb: Notebook) -> None:
    nb["metadata"]["kernelspec"]["name"] = "venv-local"


def set_count(nb: Notebook) -> None:
    nb["cells"][2]["execution_count"] = 7


def add_timestamp(nb: Notebook) -> None:
    nb["cells"][1]["metadata"]["execution"] = {"iopub.status.busy": "2026-11-29T09:22:31.887155Z"}


def add_error(nb: Notebook) -> None:
    nb["cells"][1]["outputs"].append({"output_type": "error", "ename": "ValueError", "evalue": "x", "traceback": []})


def add_stderr(nb: Notebook) -> None:
    nb["cells"][1]["outputs"].append(stream("UserWarning: careful\n", name="stderr"))


def drop_reason(nb: Notebook) -> None:
    nb["cells"][2]["source"] = "# NBVAL_IGNORE_OUTPUT\nw"


def drop_ignore_tag(nb: Notebook) -> None:
    nb["cells"][2]["metadata"] = {}


def drop_ignore_comment(nb: Notebook) -> None:
    nb["cells"][2]["source"] = "w"


def add_path(nb: Notebook) -> None:
    nb["cells"][1]["outputs"].append(stream("saved to /tmp/ipykernel_42/1.py\n"))


def add_address(nb: Notebook) -> None:
    nb["cells"][1]["outputs"].append(
        {"output_type": "execute_result", "execution_count": 1, "metadata": {},
         "data": {"text/plain": "<Figure object at 0x7f3a2b4c5d60>"}}
    )


def drop_title(nb: Notebook) -> None:
    nb["cells"][0]["source"] = "## One head"


def code_first(nb: Notebook) -> None:
    nb["cells"].insert(0, code("import numpy", None))


def exercise_cells(nb: Notebook) -> list[int]:
    return [i for i, cell in enumerate(nb["cells"]) if "exercise" in cell.get("metadata", {}).get("tags", [])]


def drop_an_exercise(nb: Notebook) -> None:
    first = exercise_cells(nb)[0]
    del nb["cells"][first - 1 : first + 3]  # the first exercise (2 min) has no hint


def cell_after_exercise(nb: Notebook, tag: str, which: int = 1) -> dict[str, Any]:
    """The first cell tagged ``tag`` after exercise ``which`` (1-based)."""
    start = exercise_cells(nb)[which - 1]
    return next(cell for cell in nb["cells"][start:] if tag in cell.get("metadata", {}).get("tags", []))


def fill_an_exercise(nb: Notebook) -> None:
    nb["cells"][exercise_cells(nb)[0]]["source"] = "answer_1 = 2"


def no_minutes(nb: Notebook) -> None:
    nb["cells"][exercise_cells(nb)[0] - 1]["source"] = "**Your turn 1** (difficulty 1/3, importance 2/3): 1 + 1?"


def no_difficulty(nb: Notebook) -> None:
    nb["cells"][exercise_cells(nb)[0] - 1]["source"] = "**Your turn 1** (about 2 min): what is 1 + 1?"


def difficulty_out_of_range(nb: Notebook) -> None:
    nb["cells"][exercise_cells(nb)[0] - 1]["source"] = (
        "**Your turn 1** (difficulty 4/3, importance 2/3, about 2 min): what is 1 + 1?"
    )


def numbers_out_of_order(nb: Notebook) -> None:
    second, third = exercise_cells(nb)[1:3]
    nb["cells"][second - 1]["source"], nb["cells"][third - 1]["source"] = (
        nb["cells"][third - 1]["source"], nb["cells"][second - 1]["source"],
    )  # fmt: skip


def text_between_task_and_exercise(nb: Notebook) -> None:
    nb["cells"].insert(exercise_cells(nb)[0], markdown("Some more words."))


def task_inside_other_text(nb: Notebook) -> None:
    task = exercise_cells(nb)[0] - 1
    nb["cells"][task]["source"] = "Now an exercise.\n\n" + nb["cells"][task]["source"]


def expanded_solution(nb: Notebook) -> None:
    cell_after_exercise(nb, "solution")["metadata"].pop("jupyter")


def solution_open_on_the_website(nb: Notebook) -> None:
    cell_after_exercise(nb, "solution")["metadata"]["tags"] = ["solution"]


def check_says_correct(nb: Notebook) -> None:
    cell_after_exercise(nb, "check")["outputs"] = [stream("[q] correct: 2\n")]


def check_prints_a_long_line(nb: Notebook) -> None:
    cell_after_exercise(nb, "check")["outputs"] = [stream("[q] not answered yet: " + "replace None " * 8 + "\n")]


def check_without_print(nb: Notebook) -> None:
    cell_after_exercise(nb, "check")["source"] = "one_head.check_sum(answer_1)"


def check_not_last(nb: Notebook) -> None:
    cell_after_exercise(nb, "check")["source"] = "print(one_head.check_sum(answer_1))\nx = 1"


def solution_stores_output(nb: Notebook) -> None:
    cell_after_exercise(nb, "solution")["outputs"] = [stream("[q] correct: 2\n")]


def solution_calls_the_checker(nb: Notebook) -> None:
    cell_after_exercise(nb, "solution")["source"] += "\nprint(one_head.check_sum(answer_1))"


def solution_first_line_gives_a_hint(nb: Notebook) -> None:
    solution = cell_after_exercise(nb, "solution")
    solution["source"] = "# Solution: add the two\n" + solution["source"].split("\n", 1)[1]


def drop_a_hint(nb: Notebook) -> None:
    hint = cell_after_exercise(nb, "hint", which=2)  # exercise 2 takes 5 min
    nb["cells"].remove(hint)


def hint_not_folded(nb: Notebook) -> None:
    cell_after_exercise(nb, "hint", which=2)["source"] = "Hint: add the two."


def hint_after_the_solution(nb: Notebook) -> None:
    hint = cell_after_exercise(nb, "hint", which=2)
    i = nb["cells"].index(hint)
    nb["cells"][i], nb["cells"][i + 1] = nb["cells"][i + 1], nb["cells"][i]


def drop_a_check_cell(nb: Notebook) -> None:
    del nb["cells"][exercise_cells(nb)[0] + 1]


def two_predictions(nb: Notebook) -> None:
    prompts = [i for i, c in enumerate(nb["cells"]) if "**Predict:**" in source(c)]
    for i in prompts[2:]:
        nb["cells"][i]["source"] = "What prints?"


def reveal_not_folded_on_the_site(nb: Notebook) -> None:
    first = next(i for i, c in enumerate(nb["cells"]) if "**Predict:**" in source(c))
    nb["cells"][first + 1]["metadata"] = {}


def prediction_at_the_end(nb: Notebook) -> None:
    nb["cells"].append(markdown("**Predict:** what comes next?"))


def drop_quick_check(nb: Notebook) -> None:
    nb["cells"][3]["source"] = "Some questions."


def import_a_name(nb: Notebook) -> None:
    nb["cells"][4]["source"] = "from lessons_lib.mha_numpy import attention"


def import_an_alias(nb: Notebook) -> None:
    nb["cells"][4]["source"] = "from lessons_lib import mha_numpy as nc"


def import_internal(nb: Notebook) -> None:
    nb["cells"][4]["source"] = "from lessons_lib import (\n    mha_numpy,\n    validation,\n)"


def import_dotted(nb: Notebook) -> None:
    nb["cells"][4]["source"] = "import lessons_lib.mha_numpy"


def drop_figure(nb: Notebook) -> None:
    nb["cells"] = [cell for cell in nb["cells"] if "fig = " not in source(cell)]


def inline_figure(nb: Notebook) -> None:
    next(cell for cell in nb["cells"] if "fig = " in source(cell))["source"] = "fig = plt.imshow(w)\nplt.show()"


BROKEN = [
    ("figures", drop_figure),
    ("figures", inline_figure),
    ("exercises", drop_an_exercise),
    ("exercises", fill_an_exercise),
    ("exercises", no_minutes),
    ("exercises", no_difficulty),
    ("exercises", difficulty_out_of_range),
    ("exercises", numbers_out_of_order),
    ("exercises", text_between_task_and_exercise),
    ("exercises", task_inside_other_text),
    ("exercises", expanded_solution),
    ("exercises", solution_open_on_the_website),
    ("exercises", check_says_correct),
    ("exercises", check_without_print),
    ("exercises", check_not_last),
    ("exercises", solution_stores_output),
    ("exercises", check_prints_a_long_line),
    ("silent_solutions", solution_stores_output),
    ("exercises", solution_calls_the_checker),
    ("exercises", solution_first_line_gives_a_hint),
    ("exercises", drop_a_hint),
    ("hints", hint_not_folded),
    ("hints", hint_after_the_solution),
    ("exercises", hint_after_the_solution),
    ("exercises", drop_a_check_cell),
    ("predictions", two_predictions),
    ("predictions", prediction_at_the_end),
    ("predictions", reveal_not_folded_on_the_site),
    ("one_library_import_style", import_a_name),
    ("one_library_import_style", import_an_alias),
    ("one_library_import_style", import_internal),
    ("one_library_import_style", import_dotted),
    ("kernelspec", set_kernel),
    ("execution_counts", set_count),
    ("execution_counts", code_first),
    ("no_timestamps", add_timestamp),
    ("no_error_outputs", add_error),
    ("no_stderr", add_stderr),
    ("ignore_markers_have_reasons", drop_reason),
    ("ignore_markers_have_reasons", drop_ignore_tag),
    ("ignore_markers_have_reasons", drop_ignore_comment),
    ("no_machine_specific_output", add_path),
    ("no_machine_specific_output", add_address),
    ("title_first", drop_title),
    ("title_first", code_first),
    ("quick_check_and_what_next", drop_quick_check),
]


@pytest.mark.parametrize("check, change", BROKEN, ids=[f"{c}-{f.__name__}" for c, f in BROKEN])
def test_each_check_catches_its_problem(check: str, change: Callable[[Notebook], None]) -> None:
    nb = broken(change)
    assert CHECKS[check](nb), f"{check} did not notice {change.__name__}"


TITLE = re.compile(r"# Lesson (\d\d) — \S")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_title_names_the_lesson_number_of_its_file(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    first = source(nb["cells"][0]).splitlines()[0]
    match = TITLE.match(first)
    assert match, f"{path.name}: the title must read '# Lesson NN — Title', got {first!r}"
    assert match[1] == path.name[:2], f"{path.name}: the title says lesson {match[1]}"


def test_lessons_are_numbered_without_gaps() -> None:
    numbers = [int(path.name[:2]) for path in NOTEBOOKS]
    assert numbers == list(range(1, len(numbers) + 1)), f"lesson numbers {numbers}"


def test_readme_lists_every_lesson_in_order() -> None:
    readme = (NOTEBOOK_DIR.parent / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `(\d\d_[a-z0-9_]+)` \|", readme, flags=re.MULTILINE)
    assert listed == [path.stem for path in NOTEBOOKS], "README's lesson table differs from notebooks/"


def test_ten_x_is_not_mistaken_for_an_address() -> None:
    nb = broken(lambda nb: nb["cells"][1]["outputs"].append(stream("10x fewer bytes, 0x1 flag\n")))
    assert machine_specific_output_problems(nb) == []
