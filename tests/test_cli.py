"""The ``several-heads`` command (lessons_lib/cli.py): every subcommand, its messages and exit codes,
and above all that a learner's edited copy is never overwritten.

Most tests run on two small lessons made here with nbformat (fast, and the test can change a
"lesson" to play an update); a few run on the real ``notebooks/``. No kernel is started: ``lab`` is
tested with the call that would start JupyterLab replaced.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat import v4

from lessons_lib import cli, lesson_files

# nbformat's builders are untyped; typed names here keep mypy strict about everything else.
new_code_cell: Callable[..., Any] = v4.new_code_cell
new_markdown_cell: Callable[..., Any] = v4.new_markdown_cell
new_notebook: Callable[..., Any] = v4.new_notebook
new_output: Callable[..., Any] = v4.new_output

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SOLUTION = "# Solution (open it only after you have tried)\nanswer = 2"
HINT = "<details><summary>Hint</summary>\n\nAdd.\n\n</details>"


def read(path: Path) -> Any:
    return nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]


def write(notebook: Any, path: Path) -> None:
    nbformat.write(notebook, path)  # type: ignore[no-untyped-call]


def lesson(title: str) -> Any:
    """A tiny lesson in the exercise format, with stored outputs as a committed lesson has them."""
    shown = new_code_cell("print(1 + 1)", execution_count=1, outputs=[new_output("stream", name="stdout", text="2\n")])
    blank = new_code_cell("answer = None", execution_count=2, metadata={"tags": ["exercise"]})
    check = new_code_cell(
        "print(check(answer))",
        execution_count=3,
        metadata={"tags": ["check"], "execution": {"iopub.status.busy": "2026-01-01T00:00:00Z"}},
        outputs=[new_output("stream", name="stdout", text="[q] not answered yet: replace None\n")],
    )
    hint = new_markdown_cell(HINT, metadata={"tags": ["hint"]})
    # Not collapsed in this source: the learner copy must collapse it anyway.
    solution = new_code_cell(
        SOLUTION, execution_count=4, metadata={"tags": ["solution", "hide-input"]},
        outputs=[new_output("stream", name="stdout", text="[q] correct: 2\n")],
    )  # fmt: skip
    notebook = new_notebook(cells=[new_markdown_cell(f"# {title}"), shown, blank, check, hint, solution])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    return notebook


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "notebooks"
    folder.mkdir()
    write(lesson("Lesson 01 — One"), folder / "01_one.ipynb")
    write(lesson("Lesson 02 — Two"), folder / "02_two.ipynb")
    (folder / "notes.ipynb").write_text("{}", encoding="utf-8")  # not a lesson: not NN_topic.ipynb
    return folder


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def prepare(capsys: pytest.CaptureFixture[str], folder: Path, source: Path, *more: str) -> str:
    code, out, err = run(capsys, "prepare", str(folder), "--source", str(source), *more)
    assert code == 0, err
    return out


def status(out: str, name: str) -> str:
    """The status the report gives ``name``: the rest of its line."""
    match = re.search(rf"^  {re.escape(name)}\s+(.*)$", out, re.MULTILINE)
    assert match, f"no line for {name} in:\n{out}"
    return match[1]


def edit_exercise(path: Path, text: str = "answer = 1 + 1") -> None:
    notebook = read(path)
    exercise = next(cell for cell in notebook.cells if "exercise" in cell.metadata.get("tags", []))
    exercise.source = text
    write(notebook, path)


def update_lesson(path: Path) -> None:
    notebook = read(path)
    notebook.cells.insert(1, new_markdown_cell("A paragraph added by an update."))
    write(notebook, path)


# --- help and usage errors --------------------------------------------------------------------------------


def test_help_explains_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for command in ("lab", "prepare", "student", "nbgrader"):
        assert re.search(rf"^\s+{command}\s+\w", out, re.MULTILINE), f"--help does not describe {command}:\n{out}"
    for command, words in [("lab", "JupyterLab"), ("prepare", "never overwritten"), ("student", "solution")]:
        code, out, _ = run(capsys, command, "--help")
        assert code == 0 and words in out, out
    assert "--fresh" in run(capsys, "prepare", "--help")[1]


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "required: COMMAND"),
        (["teach"], "invalid choice: 'teach'"),
        (["prepare"], "required: DIR"),
        (["student"], "required: DIR"),
        (["nbgrader"], "required: COURSE_DIR"),
        (["prepare", "a", "b"], "unrecognized arguments: b"),
        (["prepare", "a", "--", "--port", "1"], "only `several-heads lab` takes them"),
    ],
)
def test_wrong_arguments_say_what_is_wrong_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err and "usage: several-heads" in err, err


def test_the_module_runs_as_a_command() -> None:
    """`python -m lessons_lib.cli` is what the console script calls; a usage error exits 2 there too."""
    command = [sys.executable, "-m", "lessons_lib.cli"]
    ok = subprocess.run([*command, "--help"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0 and "prepare" in ok.stdout
    wrong = subprocess.run([*command, "prepare"], capture_output=True, text=True, check=False)
    assert wrong.returncode == 2 and "required: DIR" in wrong.stderr


def test_the_console_script_and_the_ignored_folder_are_declared() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^several-heads = "lessons_lib\.cli:main"$', pyproject, re.MULTILINE)
    assert "my-lessons/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()


def test_importing_the_command_module_stays_light() -> None:
    """nbformat (and what it loads) is imported only when a command runs."""
    probe = "import sys, lessons_lib.cli; print(sorted({'nbformat', 'numpy'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# --- prepare --------------------------------------------------------------------------------------------------


def test_prepare_writes_a_learner_copy_of_every_lesson(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "mine"
    out = prepare(capsys, folder, source)
    assert sorted(path.name for path in folder.glob("*.ipynb")) == ["01_one.ipynb", "02_two.ipynb"]
    assert status(out, "01_one.ipynb") == "added" and status(out, "02_two.ipynb") == "added"
    assert str(folder) in out
    copy, original = read(folder / "01_one.ipynb"), read(source / "01_one.ipynb")
    assert [cell.source for cell in copy.cells[:-1]] == [cell.source for cell in original.cells[:-1]]
    assert copy.cells[-1].source == original.cells[-1].source.replace("# Solution", "#@title Solution")
    code_cells = [cell for cell in copy.cells if cell.cell_type == "code"]
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code_cells)
    assert not any("execution" in cell.metadata for cell in copy.cells)
    assert "widgets" not in copy.metadata and copy.metadata["kernelspec"]["name"] == "python3"
    solution = copy.cells[-1]
    assert solution.metadata["jupyter"]["source_hidden"] is True and solution.metadata["cellView"] == "form"
    assert solution.metadata["tags"] == ["solution", "hide-input"]
    hints = [cell for cell in copy.cells if "hint" in cell.metadata.get("tags", [])]
    assert [cell.source for cell in hints] == [HINT]
    manifest = json.loads((folder / cli.MANIFEST).read_text(encoding="utf-8"))
    assert sorted(manifest["lessons"]) == ["01_one.ipynb", "02_two.ipynb"]


def test_prepare_again_leaves_an_unchanged_copy_alone(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "mine"
    prepare(capsys, folder, source)
    before = (folder / "01_one.ipynb").read_bytes()
    out = prepare(capsys, folder, source)
    assert status(out, "01_one.ipynb") == "up to date" and status(out, "02_two.ipynb") == "up to date"
    assert (folder / "01_one.ipynb").read_bytes() == before
    assert "--fresh" not in out


def test_a_changed_copy_is_never_overwritten(capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    prepare(capsys, folder, source)
    edit_exercise(folder / "01_one.ipynb")
    out = prepare(capsys, folder, source)
    assert status(out, "01_one.ipynb") == "kept your changes"
    assert f"several-heads prepare {folder} --fresh 01" in out
    assert "answer = 1 + 1" in [cell.source for cell in read(folder / "01_one.ipynb").cells]
    # ... also when the lesson itself has been updated meanwhile, and on every later run
    update_lesson(source / "01_one.ipynb")
    for _ in range(2):
        out = prepare(capsys, folder, source)
        assert status(out, "01_one.ipynb") == "kept your changes (the lesson has been updated since)"
        assert "answer = 1 + 1" in [cell.source for cell in read(folder / "01_one.ipynb").cells]
        assert status(out, "02_two.ipynb") == "up to date"


def test_an_unchanged_copy_of_an_updated_lesson_is_refreshed(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "mine"
    prepare(capsys, folder, source)
    update_lesson(source / "02_two.ipynb")
    out = prepare(capsys, folder, source)
    assert status(out, "02_two.ipynb") == "updated" and status(out, "01_one.ipynb") == "up to date"
    assert read(folder / "02_two.ipynb").cells[1].source == "A paragraph added by an update."
    assert status(prepare(capsys, folder, source), "02_two.ipynb") == "up to date"


def test_running_cells_and_opening_a_solution_is_not_an_edit(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    """What JupyterLab saves after Run All and a click on the solution bar: outputs, counts, an open
    solution. The copy still counts as unedited, so an update reaches it."""
    folder = tmp_path / "mine"
    prepare(capsys, folder, source)
    path = folder / "01_one.ipynb"
    notebook = read(path)
    for count, cell in enumerate((cell for cell in notebook.cells if cell.cell_type == "code"), 1):
        cell.execution_count = count
        cell.outputs = [new_output("stream", name="stdout", text="ran\n")]
    notebook.cells[-1].metadata["jupyter"]["source_hidden"] = False
    write(notebook, path)
    assert status(prepare(capsys, folder, source), "01_one.ipynb") == "up to date"
    update_lesson(source / "01_one.ipynb")
    assert status(prepare(capsys, folder, source), "01_one.ipynb") == "updated"


@pytest.mark.parametrize("name", ["01", "1", "01_one", "01_one.ipynb"])
def test_fresh_moves_the_old_copy_aside_and_writes_a_fresh_one(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path, name: str
) -> None:
    folder = tmp_path / "mine"
    prepare(capsys, folder, source)
    edit_exercise(folder / "01_one.ipynb")
    out = prepare(capsys, folder, source, "--fresh", name)
    aside = [path for path in folder.glob("01_one.*.ipynb")]
    assert len(aside) == 1 and re.fullmatch(r"01_one\.mine-\d{8}-\d{6}\.ipynb", aside[0].name), aside
    assert status(out, "01_one.ipynb") == f"fresh copy (your copy is now {aside[0].name})"
    assert "answer = 1 + 1" in [cell.source for cell in read(aside[0]).cells]  # the old work is still there
    assert "answer = None" in [cell.source for cell in read(folder / "01_one.ipynb").cells]
    assert status(out, "02_two.ipynb") == "up to date"
    assert status(prepare(capsys, folder, source), "01_one.ipynb") == "up to date"


def test_fresh_twice_in_a_second_keeps_both_old_copies(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "mine"
    prepare(capsys, folder, source)
    edit_exercise(folder / "02_two.ipynb", "answer = 'first try'")
    prepare(capsys, folder, source, "--fresh", "02")
    edit_exercise(folder / "02_two.ipynb", "answer = 'second try'")
    prepare(capsys, folder, source, "--fresh", "02", "--fresh", "01")
    answers = sorted(
        next(cell.source for cell in read(path).cells if "exercise" in cell.metadata.get("tags", []))
        for path in folder.glob("02_two.mine-*.ipynb")
    )
    assert answers == ["answer = 'first try'", "answer = 'second try'"]
    assert len(list(folder.glob("01_one.mine-*.ipynb"))) == 1


def test_fresh_on_a_missing_copy_adds_it(capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    out = prepare(capsys, folder, source, "--fresh", "02")
    assert status(out, "02_two.ipynb") == "added"
    assert not list(folder.glob("*.mine-*"))


def test_a_deleted_copy_is_added_again(capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    prepare(capsys, folder, source)
    (folder / "02_two.ipynb").unlink()
    assert status(prepare(capsys, folder, source), "02_two.ipynb") == "added"
    assert (folder / "02_two.ipynb").is_file()


def test_without_a_manifest_only_identical_copies_count_as_ours(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    """Notebooks put there by hand (or a lost manifest): a different one is kept, never replaced."""
    folder = tmp_path / "mine"
    prepare(capsys, folder, source)
    edit_exercise(folder / "01_one.ipynb")
    (folder / cli.MANIFEST).unlink()
    out = prepare(capsys, folder, source)
    assert status(out, "01_one.ipynb") == "kept your changes" and status(out, "02_two.ipynb") == "up to date"
    (folder / cli.MANIFEST).write_text("not json", encoding="utf-8")
    out = prepare(capsys, folder, source)
    assert "unreadable" in out and status(out, "01_one.ipynb") == "kept your changes"
    assert "answer = 1 + 1" in [cell.source for cell in read(folder / "01_one.ipynb").cells]


def test_a_broken_copy_is_kept(capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    prepare(capsys, folder, source)
    (folder / "01_one.ipynb").write_text('{"cells": [', encoding="utf-8")
    update_lesson(source / "01_one.ipynb")
    assert status(prepare(capsys, folder, source), "01_one.ipynb").startswith("kept your changes")
    assert (folder / "01_one.ipynb").read_text(encoding="utf-8") == '{"cells": ['


def test_prepare_of_the_real_lessons(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """From the repository's notebooks/, found without --source: no output anywhere, solutions
    collapsed, every other cell as committed."""
    out = prepare_default(capsys, tmp_path / "mine")
    lessons = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    assert [status(out, path.name) for path in lessons] == ["added"] * len(lessons)
    for path in lessons:
        copy, original = read(tmp_path / "mine" / path.name), read(path)
        solution = [("solution" in cell.metadata.get("tags", [])) for cell in original.cells]
        assert [cell.source for cell, hidden in zip(copy.cells, solution, strict=True) if not hidden] == [
            cell.source for cell, hidden in zip(original.cells, solution, strict=True) if not hidden
        ]
        assert not any(cell.get("outputs") or cell.get("execution_count") for cell in copy.cells), path.name
        solutions = [cell for cell, hidden in zip(copy.cells, solution, strict=True) if hidden]
        assert solutions and all(cell.metadata["jupyter"]["source_hidden"] for cell in solutions), path.name
        # Colab hides a form cell's code under its title; the title says nothing of the answer.
        assert all(cell.metadata["cellView"] == "form" for cell in solutions), path.name
        originals = [cell for cell, hidden in zip(original.cells, solution, strict=True) if hidden]
        for cell, source in zip(solutions, originals, strict=True):
            assert cell.source == source.source.replace("# Solution", "#@title Solution", 1), path.name
        # colab/ (what the Colab badges open) is exactly this copy: regenerate_notebooks.py writes it.
        committed = ROOT / "colab" / path.name
        assert committed.read_bytes() == (tmp_path / "mine" / path.name).read_bytes(), (
            f"colab/{path.name} is not the learner copy of notebooks/{path.name}: run "
            "python scripts/regenerate_notebooks.py --colab-only"
        )
    assert sorted(p.name for p in (ROOT / "colab").iterdir()) == [path.name for path in lessons]


def test_nbgrader_writes_a_course_of_every_lesson(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The command's side only (no nbgrader needed); tests/classroom/ runs nbgrader on the course."""
    code, out, err = run(capsys, "nbgrader", str(tmp_path / "course"))
    assert code == 0, err
    lessons = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    assert (tmp_path / "course" / "nbgrader_config.py").is_file()
    for path in lessons:
        course_copy = tmp_path / "course" / "source" / path.stem / path.name
        assert str(course_copy) in out
        cells = read(course_copy).cells
        graded = [cell for cell in cells if cell.metadata.get("nbgrader", {}).get("grade")]
        assert len(graded) == sum("check" in cell.metadata.get("tags", []) for cell in read(path).cells), path.name
    code, _, err = run(capsys, "nbgrader", str(tmp_path / "other"), "--source", str(tmp_path / "course"))
    assert code == 2 and "no lesson notebooks" in err, err


def prepare_default(capsys: pytest.CaptureFixture[str], folder: Path) -> str:
    code, out, err = run(capsys, "prepare", str(folder))
    assert code == 0, err
    return out


# --- where things are, and what cannot be done ------------------------------------------------------------


def test_the_lessons_are_found_beside_the_package() -> None:
    assert lesson_files.default_source() == NOTEBOOKS
    assert cli.find_lessons(None) == sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def test_no_lessons_beside_the_package_asks_for_source(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(cli, "default_source", lambda: tmp_path / "site-packages" / "notebooks")
    code, _, err = run(capsys, "prepare", str(tmp_path / "mine"))
    assert code == 2 and "cannot find the lessons" in err and "--source DIR" in err
    assert not (tmp_path / "mine").exists()


@pytest.mark.parametrize("case", ["parent missing", "a file", "no such source", "empty source", "the source"])
def test_impossible_folders_are_refused_with_exit_2(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path, case: str
) -> None:
    target, given_source, expected = tmp_path / "mine", source, ""
    if case == "parent missing":
        target, expected = tmp_path / "nowhere" / "mine", f"its parent folder {tmp_path / 'nowhere'} does not exist"
    elif case == "a file":
        target.write_text("x", encoding="utf-8")
        expected = f"{target} is a file, not a folder"
    elif case == "no such source":
        given_source, expected = tmp_path / "nothing", f"--source {tmp_path / 'nothing'}: no such folder"
    elif case == "empty source":
        given_source = tmp_path / "empty"
        given_source.mkdir()
        expected = "no lesson notebooks (NN_topic.ipynb) in"
    else:
        target, expected = source, "is the folder the lessons are read from"
    for command in ("prepare", "student"):
        code, out, err = run(capsys, command, str(target), "--source", str(given_source))
        assert code == 2, (command, out, err)
        assert err.startswith("several-heads: error: ") and expected in err, err
    assert sorted(path.name for path in source.iterdir()) == ["01_one.ipynb", "02_two.ipynb", "notes.ipynb"]


def test_an_unknown_lesson_for_fresh_lists_the_lessons(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    prepare(capsys, tmp_path / "mine", source)
    edit_exercise(tmp_path / "mine" / "01_one.ipynb")
    code, _, err = run(capsys, "prepare", str(tmp_path / "mine"), "--source", str(source), "--fresh", "07")
    assert code == 2 and "--fresh 07: no such lesson; the lessons are 01 (01_one), 02 (02_two)" in err
    assert not list((tmp_path / "mine").glob("*.mine-*")), "nothing may move when the request is refused"


# --- lab ------------------------------------------------------------------------------------------------------


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Record the command `lab` would replace itself with, instead of starting JupyterLab (which need
    not be installed: the oldest supported set, requirements-oldest.txt, has no JupyterLab)."""
    calls: list[list[str]] = []

    def record(command: list[str]) -> int:
        calls.append(command)
        return 0

    monkeypatch.setattr(cli, "launch", record)
    monkeypatch.setattr(cli, "jupyterlab_installed", lambda: True)
    return calls


def test_lab_prepares_my_lessons_and_opens_lesson_01(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, source: Path, tmp_path: Path,
    launched: list[list[str]],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "lab", "--source", str(source))
    assert code == 0, err
    first = tmp_path / "my-lessons" / "01_one.ipynb"
    assert launched == [[sys.executable, "-m", "jupyter", "lab", str(first)]]
    assert first.is_file() and status(out, "01_one.ipynb") == "added"
    assert "Starting JupyterLab" in out
    edit_exercise(first)
    out = run(capsys, "lab", "--source", str(source))[1]
    assert status(out, "01_one.ipynb") == "kept your changes" and "`several-heads lab --fresh 01`" in out


def test_lab_passes_what_follows_the_double_dash_to_jupyter(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path, launched: list[list[str]]
) -> None:
    folder = tmp_path / "elsewhere"
    code, out, err = run(capsys, "lab", str(folder), "--source", str(source), "--", "--port", "8890", "--no-browser")
    assert code == 0, err
    assert launched == [[sys.executable, "-m", "jupyter", "lab", str(folder / "01_one.ipynb"), "--port", "8890",
                         "--no-browser"]]  # fmt: skip
    assert f"several-heads lab {folder}" not in out  # nothing kept, so no advice


def test_lab_refuses_a_file_as_its_folder(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path, launched: list[list[str]]
) -> None:
    (tmp_path / "my-file").write_text("x", encoding="utf-8")
    code, _, err = run(capsys, "lab", str(tmp_path / "my-file"), "--source", str(source))
    assert code == 2 and "is a file, not a folder" in err and launched == []


# --- student --------------------------------------------------------------------------------------------------


def test_student_writes_every_lesson_without_solutions_or_outputs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "student"
    code, out, err = run(capsys, "student", str(folder))
    assert code == 0, err
    lessons = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    assert sorted(path.name for path in folder.iterdir()) == [path.name for path in lessons]
    for path in lessons:
        original, student = read(path), read(folder / path.name)
        kept = [cell for cell in original.cells if "solution" not in cell.metadata.get("tags", [])]
        removed = len(original.cells) - len(kept)
        assert removed > 0, f"{path.name} has no solution cells"
        assert re.search(rf"{path.name}\s+written \({removed} solution cells removed\)", out)
        assert [cell.source for cell in student.cells] == [cell.source for cell in kept], path.name
        assert not any(cell.get("outputs") or cell.get("execution_count") for cell in student.cells), path.name
    assert "replaced" in run(capsys, "student", str(folder))[1]


def test_student_keeps_hints_and_checks(capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path) -> None:
    assert run(capsys, "student", str(tmp_path / "out"), "--source", str(source))[0] == 0
    cells = read(tmp_path / "out" / "01_one.ipynb").cells
    assert [cell.metadata.get("tags", []) for cell in cells] == [[], [], ["exercise"], ["check"], ["hint"]]
    assert cells[-1].source == HINT


def test_student_refuses_a_learner_copy(capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path) -> None:
    prepare(capsys, tmp_path / "mine", source)
    edit_exercise(tmp_path / "mine" / "01_one.ipynb")
    code, _, err = run(capsys, "student", str(tmp_path / "mine"), "--source", str(source))
    assert code == 2 and "holds a learner copy" in err
    assert "answer = 1 + 1" in [cell.source for cell in read(tmp_path / "mine" / "01_one.ipynb").cells]


def test_lab_without_jupyterlab_says_how_to_install_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, source: Path, tmp_path: Path
) -> None:
    monkeypatch.setattr(cli, "jupyterlab_installed", lambda: False)
    code, _, err = run(capsys, "lab", str(tmp_path / "mine"), "--source", str(source))
    assert code == 1 and "JupyterLab is not installed" in err and "pip install -r requirements.txt" in err
    assert not (tmp_path / "mine").exists()  # nothing written before the check
