"""The ``several-heads`` command: a learner's own copy of the lessons, JupyterLab on it, and the
instructors' hand-out without solutions.

    several-heads lab [DIR] [-- JUPYTER_ARGS]     prepare DIR (default my-lessons/), open lesson 01
    several-heads prepare DIR [--fresh LESSON]    write or refresh the learner copy in DIR
    several-heads student DIR                     the instructors' version: no solutions, no outputs
    several-heads doctor                          a learner's self-check: OK or FAIL per requirement

The committed notebooks (``notebooks/`` of the repository) stay the source: strict nbval and the
website read them with their stored outputs. The learner copy is the same lessons with no output
at all (a Predict's answer appears only when its cell runs), every solution cell collapsed.

A learner's work is never overwritten. ``DIR/.several-heads.json`` (the manifest) records a
fingerprint of each notebook as it was written: the cells' kinds, texts and tags, not their
outputs, so running cells or opening a solution is not an edit. On the next ``prepare`` a missing
lesson is added, an unedited copy of a lesson that has changed is rewritten, and an edited copy is
kept, with a message naming ``--fresh``, which moves the copy aside under a timestamped name
before writing a fresh one. Nothing is ever deleted.

Each subcommand is a `Command` (its arguments and the function that runs it) in `COMMANDS`; a new
subcommand is one more entry. nbformat is imported inside the commands, so ``import lessons_lib``
stays light.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import hashlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lessons_lib.lesson_files import LESSON_PATTERN, default_source

PROGRAM = "several-heads"
DEFAULT_LAB_DIR = Path("my-lessons")
MANIFEST = ".several-heads.json"
SOLUTION_TAG = "solution"
COLAB_TITLE = "#@title "  # a solution's first line in the learner copy: the bar Colab shows for it

ADDED, UPDATED, UP_TO_DATE, KEPT, FRESH = "added", "updated", "up to date", "kept your changes", "fresh copy"


class CommandError(Exception):
    """A request the command cannot carry out: reported as one clear line, with exit code ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


# --- where the lessons come from --------------------------------------------------------------------


def find_lessons(source: Path | None) -> list[Path]:
    """The lesson notebooks (``NN_topic.ipynb``) of ``source`` (default: `default_source`), in order."""
    folder = default_source() if source is None else source
    if not folder.is_dir():
        if source is None:
            raise CommandError(
                f"cannot find the lessons: there is no folder {folder} beside the installed lessons_lib "
                "(it is there when the package is installed from a clone with `pip install -e .`); "
                "give the folder of the lesson notebooks with --source DIR"
            )
        raise CommandError(f"--source {folder}: no such folder")
    lessons = sorted(folder.glob(LESSON_PATTERN))
    if not lessons:
        raise CommandError(f"no lesson notebooks (NN_topic.ipynb) in {folder}")
    return lessons


def output_folder(path: Path, source: Path) -> Path:
    """Check that ``path`` can hold the copies (creating it, never its parents) and return it."""
    if path.exists() and not path.is_dir():
        raise CommandError(f"{path} is a file, not a folder: give a folder to write the lessons into")
    if not path.exists() and not path.parent.is_dir():
        raise CommandError(
            f"cannot create {path}: its parent folder {path.parent} does not exist (create it first, or choose "
            "another place)"
        )
    if path.exists() and path.resolve() == source.resolve():
        raise CommandError(f"{path} is the folder the lessons are read from: choose another folder for the copies")
    path.mkdir(exist_ok=True)
    return path


def resolve_lesson(name: str, lessons: Sequence[Path]) -> Path:
    """The lesson meant by ``name``: its number (``2``, ``02``), its stem or its file name."""
    wanted = name.removesuffix(".ipynb")
    if wanted.isdigit():
        wanted = wanted.zfill(2)
    for lesson in lessons:
        if wanted in (lesson.stem, lesson.name[:2]):
            return lesson
    known = ", ".join(f"{lesson.name[:2]} ({lesson.stem})" for lesson in lessons)
    raise CommandError(f"--fresh {name}: no such lesson; the lessons are {known}")


# --- the two versions of a notebook -------------------------------------------------------------------


def tags(cell: Any) -> list[str]:
    found: list[str] = cell.get("metadata", {}).get("tags", [])
    return found


def _clear(notebook: Any) -> Any:
    """A copy of ``notebook`` with no outputs, execution counts, timing or stored widget state."""
    cleared = copy.deepcopy(notebook)
    cleared.metadata.pop("widgets", None)
    for cell in cleared.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return cleared


def learner_notebook(notebook: Any) -> Any:
    """The learner's version: nothing stored under any cell, every solution kept but collapsed.

    JupyterLab collapses a cell whose ``jupyter.source_hidden`` is true; Colab ignores that and hides
    the code of a *form* cell (``cellView: "form"``) instead, showing its ``#@title`` line as a bar
    that opens it. A solution gets both, its first line becoming the same neutral title
    (`COLAB_TITLE`), so the copy that Colab opens (``colab/``) hides the solutions too.
    """
    learner = _clear(notebook)
    for cell in learner.cells:
        if SOLUTION_TAG in tags(cell):
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
            cell.metadata["cellView"] = "form"
            first, _, rest = cell.source.partition("\n")
            if first.startswith("# "):
                cell.source = f"{COLAB_TITLE}{first.removeprefix('# ')}\n{rest}"
    return learner


def student_notebook(notebook: Any) -> Any:
    """The instructors' hand-out: no solution cells and no outputs (hints and checks stay)."""
    student = _clear(notebook)
    student.cells = [cell for cell in student.cells if SOLUTION_TAG not in tags(cell)]
    return student


def fingerprint(notebook: Any) -> str:
    """What the learner could have edited: each cell's kind, text and tags (not outputs, counts or
    whether a solution is open), hashed."""
    cells = [[cell.cell_type, cell.source, sorted(tags(cell))] for cell in notebook.cells]
    return hashlib.sha256(json.dumps(cells, ensure_ascii=False).encode()).hexdigest()


def file_fingerprint(path: Path) -> str | None:
    """`fingerprint` of the notebook at ``path``; None when it is not a notebook nbformat can read."""
    import nbformat

    try:
        return fingerprint(nbformat.read(path, as_version=4))  # type: ignore[no-untyped-call]
    except Exception:  # a file the learner broke (invalid JSON, ...) counts as edited: it is kept
        return None


def write_notebook(notebook: Any, path: Path) -> None:
    """Write ``notebook`` to ``path`` through a temporary file, so a copy is never left half written."""
    import nbformat

    partial = path.with_name(f".{path.name}.partial")
    nbformat.write(notebook, partial)  # type: ignore[no-untyped-call]
    os.replace(partial, path)


# --- the learner copy ---------------------------------------------------------------------------------


def read_manifest(folder: Path) -> dict[str, str]:
    """Lesson file name -> fingerprint of the copy last written there (empty when there is none)."""
    path = folder / MANIFEST
    if not path.is_file():
        return {}
    try:
        lessons = json.loads(path.read_text(encoding="utf-8"))["lessons"]
    except (ValueError, KeyError, TypeError):
        print(f"note: {path} is unreadable; every copy that differs from its lesson is kept as your work")
        return {}
    return {str(name): str(value) for name, value in lessons.items()}


def write_manifest(folder: Path, written: dict[str, str]) -> None:
    record = {
        "about": f"written by `{PROGRAM} prepare`: a fingerprint of each lesson as it was written here, "
        "so that a copy you have edited is never overwritten",
        "lessons": dict(sorted(written.items())),
    }
    (folder / MANIFEST).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def set_aside(path: Path) -> Path:
    """Rename ``path`` to ``<stem>.mine-<date>-<time>.ipynb`` beside it (never over an existing file)."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.stem}.mine-{stamp}{path.suffix}")
    count = 1
    while target.exists():
        count += 1
        target = path.with_name(f"{path.stem}.mine-{stamp}-{count}{path.suffix}")
    path.rename(target)
    return target


@dataclass(frozen=True)
class Outcome:
    lesson: str
    status: str  # ADDED, UPDATED, UP_TO_DATE, KEPT or FRESH
    note: str = ""


def prepare(folder: Path, lessons: Sequence[Path], fresh: Sequence[Path] = ()) -> list[Outcome]:
    """Bring the learner copy in ``folder`` up to date with ``lessons`` without losing any edit."""
    import nbformat

    written = read_manifest(folder)
    outcomes = []
    for lesson in lessons:
        target = folder / lesson.name
        notebook = learner_notebook(nbformat.read(lesson, as_version=4))  # type: ignore[no-untyped-call]
        new: str | None = fingerprint(notebook)
        recorded = written.get(lesson.name)
        if lesson in fresh and target.exists():
            aside = set_aside(target)
            write_notebook(notebook, target)
            outcome = Outcome(lesson.name, FRESH, f"your copy is now {aside.name}")
        elif not target.exists():
            write_notebook(notebook, target)
            outcome = Outcome(lesson.name, ADDED)
        else:
            current = file_fingerprint(target)
            if current == new:
                outcome = Outcome(lesson.name, UP_TO_DATE)
            elif recorded is not None and current == recorded:
                write_notebook(notebook, target)
                outcome = Outcome(lesson.name, UPDATED)
            else:  # edited by the learner (or not written by us): keep it, and what we know of it
                newer = recorded is not None and recorded != new
                outcome = Outcome(lesson.name, KEPT, "the lesson has been updated since" if newer else "")
                new = recorded
        if new is not None:
            written[lesson.name] = new
        write_manifest(folder, written)
        outcomes.append(outcome)
    return outcomes


def report(outcomes: Sequence[Outcome], folder: Path, source: Path, fresh_command: str) -> None:
    """Say what happened to each lesson, and how to get a fresh copy of a kept one."""
    print(f"Your copy of the lessons is in {folder}{os.sep} (from {source}):")
    width = max(len(outcome.lesson) for outcome in outcomes)
    for outcome in outcomes:
        note = f" ({outcome.note})" if outcome.note else ""
        print(f"  {outcome.lesson:<{width}}  {outcome.status}{note}")
    kept = [outcome.lesson[:2] for outcome in outcomes if outcome.status == KEPT]
    if kept:
        print(
            f"Your edited copies were left as they are. For a fresh copy of one, run `{fresh_command} --fresh "
            f"{kept[0]}`: it renames your copy to <lesson>.mine-<date>-<time>.ipynb (nothing is deleted) and "
            "writes the current lesson."
        )


def prepared(args: argparse.Namespace, folder: Path, command: str) -> list[Path]:
    """Run `prepare` for ``args`` into ``folder``, print the report; the lessons it read."""
    lessons = find_lessons(args.source)
    source = lessons[0].parent
    fresh = [resolve_lesson(name, lessons) for name in args.fresh]
    output_folder(folder, source)
    report(prepare(folder, lessons, fresh), folder, source, command)
    return lessons


# --- the subcommands ----------------------------------------------------------------------------------


def add_source_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--source",
        type=Path,
        metavar="DIR",
        help="read the lessons from DIR (default: notebooks/ of the repository this package is installed from)",
    )


def add_fresh_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fresh",
        action="append",
        default=[],
        metavar="LESSON",
        help="rename your copy of LESSON (a number like 02, or its file name) to <lesson>.mine-<date>-<time>.ipynb "
        "and write a fresh one; may be repeated",
    )


def prepare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, metavar="DIR", help="the folder for your copy (created if missing)")
    add_fresh_argument(parser)
    add_source_argument(parser)


def run_prepare(args: argparse.Namespace) -> int:
    prepared(args, args.dir, f"{PROGRAM} prepare {shlex.quote(str(args.dir))}")
    return 0


def lab_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        type=Path,
        nargs="?",
        default=DEFAULT_LAB_DIR,
        metavar="DIR",
        help=f"the folder for your copy (default: {DEFAULT_LAB_DIR}{os.sep} in the current folder)",
    )
    add_fresh_argument(parser)
    add_source_argument(parser)


def launch(command: list[str]) -> int:
    """Replace this process with ``command`` (on Windows, which cannot, run it and return its code)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "nt":
        return subprocess.call(command)
    os.execv(command[0], command)


def jupyterlab_installed() -> bool:
    return importlib.util.find_spec("jupyterlab") is not None


def run_lab(args: argparse.Namespace) -> int:
    if not jupyterlab_installed():
        raise CommandError(
            f"JupyterLab is not installed for {sys.executable}: `pip install -r requirements.txt` installs it", code=1
        )
    given = "" if args.dir == DEFAULT_LAB_DIR else f" {shlex.quote(str(args.dir))}"
    lessons = prepared(args, args.dir, f"{PROGRAM} lab{given}")
    first = (args.dir / lessons[0].name).resolve()
    print(f"Starting JupyterLab on {first} (stop it with Ctrl+C in this terminal)")
    return launch([sys.executable, "-m", "jupyter", "lab", str(first), *args.jupyter_args])


def student_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, metavar="DIR", help="the folder to write the student version into")
    add_source_argument(parser)


def doctor_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no arguments


def run_doctor(args: argparse.Namespace) -> int:
    del args
    from lessons_lib.doctor import run_checks

    found = run_checks()
    for check in found:
        print(check)
    failed = [check.name for check in found if not check.ok]
    if failed:
        print(f"{len(failed)} of {len(found)} checks failed ({', '.join(failed)}): fix them before the first lesson.")
        return 1
    print(f"All {len(found)} checks passed: `{PROGRAM} lab` opens the lessons.")
    return 0


def run_student(args: argparse.Namespace) -> int:
    import nbformat

    lessons = find_lessons(args.source)
    folder = output_folder(args.dir, lessons[0].parent)
    if (folder / MANIFEST).exists():
        raise CommandError(f"{folder} holds a learner copy (it has {MANIFEST}): write the student version elsewhere")
    print(f"The student version of the lessons (no solutions, no outputs) is in {folder}{os.sep}:")
    width = max(len(lesson.name) for lesson in lessons)
    for lesson in lessons:
        notebook = nbformat.read(lesson, as_version=4)  # type: ignore[no-untyped-call]
        student = student_notebook(notebook)
        replaced = (folder / lesson.name).exists()
        write_notebook(student, folder / lesson.name)
        removed = len(notebook.cells) - len(student.cells)
        print(f"  {lesson.name:<{width}}  {'replaced' if replaced else 'written'} ({removed} solution cells removed)")
    return 0


def nbgrader_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("course_dir", type=Path, metavar="COURSE_DIR", help="the course folder (created if missing)")
    add_source_argument(parser)


def run_nbgrader(args: argparse.Namespace) -> int:
    from lessons_lib.classroom import CourseError, write_course

    try:
        written = write_course(args.course_dir, args.source)
    except CourseError as error:
        raise CommandError(str(error)) from error
    print(f"The nbgrader course is in {args.course_dir}{os.sep} ({len(written)} files):")
    for path in written:
        print(f"  {path}")
    print(f"Next: cd {args.course_dir} && nbgrader generate_assignment 01_one_head  (see README, Teaching a class)")
    return 0


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    description: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS = [
    Command(
        "lab",
        "prepare your copy of the lessons and open lesson 01 in JupyterLab",
        f"Prepare your copy of the lessons in DIR (as `{PROGRAM} prepare DIR` does), then start JupyterLab on it "
        "with lesson 01 open. Arguments after `--` go to `jupyter lab` (e.g. `-- --port 8890`, or "
        "`-- --allow-root` in a container).",
        lab_arguments,
        run_lab,
    ),
    Command(
        "prepare",
        "write or refresh your copy of the lessons in DIR",
        "Write a learner copy of every lesson into DIR: no stored outputs (a prediction's answer appears "
        "only when you run its cell), blank exercises, solutions collapsed. Run it again after an update: a "
        "missing lesson is added and an unedited copy of a changed lesson is rewritten, but a copy you have "
        "edited is never overwritten (running cells is not editing). --fresh LESSON renames your copy "
        "aside, with the date and time in its name, and writes a fresh one. Nothing is ever deleted.",
        prepare_arguments,
        run_prepare,
    ),
    Command(
        "student",
        "write the instructors' hand-out (no solutions, no outputs) into DIR",
        "Write every lesson without its solution cells and without outputs into DIR, for instructors to "
        "hand out. Hints and checkers stay. Files of the same name in DIR are replaced.",
        student_arguments,
        run_student,
    ),
    Command(
        "doctor",
        "check this machine before the first lesson: Python, packages, lessons, data",
        "Check, one line each with OK or FAIL and what to do: the Python version, each package the lessons "
        "import (installed, and at least the oldest version the course is tested with), the lessons folder, "
        "the shipped data, and one small attention layer computed by NumPy and by PyTorch. Exit code 1 if a "
        "check fails.",
        doctor_arguments,
        run_doctor,
    ),
    Command(
        "nbgrader",
        "write an nbgrader course from the lessons into COURSE_DIR",
        "Write COURSE_DIR/nbgrader_config.py and COURSE_DIR/source/<lesson>/<lesson>.ipynb for every lesson: "
        "each exercise becomes an nbgrader solution cell holding the reference answer between "
        "### BEGIN SOLUTION / ### END SOLUTION, each check a locked, graded test cell (points from the "
        "exercise's difficulty), everything else locked. nbgrader itself is in requirements-classroom.txt.",
        nbgrader_arguments,
        run_nbgrader,
    ),
]


OVERVIEW = f"""\
Your own copy of the Several Heads lessons on multi-head attention, JupyterLab on it, and the
instructors' version without solutions.

  {PROGRAM} lab                    write or refresh my-lessons/, open lesson 01 in JupyterLab
  {PROGRAM} prepare DIR            write or refresh your copy in DIR
  {PROGRAM} lab --fresh 02         set your copy of lesson 02 aside, write a fresh one, open lab
  {PROGRAM} student DIR            the instructors' hand-out: no solutions, no outputs
  {PROGRAM} nbgrader COURSE_DIR    an nbgrader course of the lessons, for autograding
  {PROGRAM} doctor                 check Python, the packages and the data before the first lesson

Your copy has no stored outputs (a prediction's answer appears when you run its cell), blank
exercises and collapsed solutions. Refreshing it adds new lessons and updates the ones you have
not edited; a lesson you have edited is kept as it is (running cells does not count as editing),
and nothing is ever deleted.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description=OVERVIEW,
        epilog=f"`{PROGRAM} COMMAND --help` explains one command.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub = commands.add_parser(command.name, help=command.summary, description=command.description)
        command.arguments(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    jupyter_args: list[str] = []
    if "--" in words:
        split = words.index("--")
        words, jupyter_args = words[:split], words[split + 1 :]
    parser = build_parser()
    try:
        args = parser.parse_args(words)
        if jupyter_args and args.command != "lab":
            parser.error(f"arguments after -- go to JupyterLab: only `{PROGRAM} lab` takes them")
    except SystemExit as exit_:  # --help (0) or a usage error (2, after argparse's message)
        return exit_.code if isinstance(exit_.code, int) else 2
    args.jupyter_args = jupyter_args
    try:
        code: int = args.run(args)
    except CommandError as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return error.code
    return code


if __name__ == "__main__":
    sys.exit(main())
