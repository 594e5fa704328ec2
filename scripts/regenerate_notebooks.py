"""Re-execute notebooks top to bottom, each in a fresh kernel, and store the outputs in place.

    python scripts/regenerate_notebooks.py                 # every notebook in notebooks/
    python scripts/regenerate_notebooks.py notebooks/03_concatenate_and_project.ipynb
    python scripts/regenerate_notebooks.py --colab-only     # only rewrite colab/ from notebooks/

Execution counts then read 1, 2, 3, ... which the hygiene test checks. Run it after editing a
lesson, then run the test command from the README to see what changed.

A solution cell (tag ``solution``) must run silently: its stored output would show the answer under
the collapsed solution. If one produces any output the script stops with an error naming the
cells, and does not write that notebook.

Each lesson of ``notebooks/`` it writes also gets its learner copy written to ``colab/`` (what the
README's "Open in Colab" badges open: no outputs, blank exercises, solutions hidden as Colab hides
them), exactly as ``several-heads prepare`` writes it; ``tests/test_cli.py`` checks they are equal.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "notebooks"
COLAB = ROOT / "colab"


def write_colab_copy(path: Path) -> None:
    """The learner copy of the lesson at ``path`` into colab/, as `several-heads prepare` writes it."""
    from lessons_lib import cli

    COLAB.mkdir(exist_ok=True)
    cli.write_notebook(cli.learner_notebook(nbformat.read(path, as_version=4)), COLAB / path.name)  # type: ignore[no-untyped-call]


def merge_streams(outputs: list[Any]) -> list[Any]:
    """Join consecutive stdout (or stderr) chunks: how a print is cut into messages depends on
    timing, so the stored outputs would otherwise differ from run to run without any change."""
    merged: list[Any] = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (
            output.output_type == "stream"
            and previous is not None
            and previous.output_type == "stream"
            and previous.name == output.name
        ):
            previous.text += output.text
        else:
            merged.append(output)
    return merged


class LoudSolution(Exception):
    """A solution cell produced output: the notebook is left as it was."""


def loud_solutions(notebook: Any) -> list[str]:
    """One line for each solution cell that produced output: its position and the output's start."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if "solution" in cell.metadata.get("tags", []) and cell.get("outputs"):
            first = cell.outputs[0]
            shown = first.get("text") or first.get("ename") or next(iter(first.get("data", {})), first.output_type)
            found.append(f"cell {index}: {str(shown).strip()[:100]!r}")
    return found


def regenerate(path: Path) -> float:
    """Execute ``path`` in a fresh ``python3`` kernel, write it back; return seconds taken."""
    notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)  # timestamps an earlier run (or another tool) stored
    start = time.perf_counter()
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=600,
        record_timing=False,  # per-cell timestamps would change the diff on every run
        store_widget_state=False,  # widget models get new random ids on every run; a live kernel rebuilds them
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = merge_streams(cell.outputs)
    loud = loud_solutions(notebook)
    if loud:
        raise LoudSolution(
            f"{path}: NOT written: these solution cells produced output (a solution is the answer code only: "
            "no print, no checker call, nothing displayed):\n  " + "\n  ".join(loud)
        )
    nbformat.write(notebook, path)  # type: ignore[no-untyped-call]
    if path.parent == LESSONS:
        write_colab_copy(path)
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    if {"-h", "--help"} & set(argv):
        print(__doc__)
        return 0
    if argv == ["--colab-only"]:
        for path in sorted(LESSONS.glob("[0-9][0-9]_*.ipynb")):
            write_colab_copy(path)
        print(f"wrote the learner copies of notebooks/ into {COLAB}")
        return 0
    paths = [Path(p).resolve() for p in argv] or sorted(LESSONS.glob("*.ipynb"))
    failed = 0
    for path in paths:
        try:
            seconds = regenerate(path)
        except LoudSolution as error:
            print(f"ERROR: {error}", file=sys.stderr)
            failed += 1
            continue
        print(f"{path}: executed in {seconds:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
