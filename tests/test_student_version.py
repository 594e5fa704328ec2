"""The student version: what an instructor hands out must run, and must give nothing away.

`bash scripts/student_version.sh DIR` (the README's command) writes every lesson without its
`solution` cells and without outputs. Here we build it into a temporary folder, then execute each
student notebook top to bottom in a fresh kernel, as a student pressing Run All would, and check
that nothing raises and that every exercise's checker reports "not answered yet".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
LESSONS = sorted((REPO / "notebooks").glob("*.ipynb"))


def tags(cell: Any) -> list[str]:
    found: list[str] = cell.get("metadata", {}).get("tags", [])
    return found


def output_text(cell: Any) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        elif "data" in output:
            parts.append(output["data"].get("text/plain", ""))
        elif output.get("output_type") == "error":
            parts.append(f"{output.get('ename')}: {output.get('evalue')}")
    return "".join(parts)


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("student")
    env = {**os.environ, "PYTHON": sys.executable}
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "student_version.sh"), str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.parametrize("lesson", LESSONS, ids=[path.name for path in LESSONS])
def test_student_version_runs_and_every_exercise_is_open(lesson: Path, student_dir: Path) -> None:
    path = student_dir / lesson.name
    assert path.is_file(), f"{lesson.name} is missing from the student version"
    original = nbformat.read(lesson, as_version=4)  # type: ignore[no-untyped-call]
    student = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    solutions = [cell for cell in original.cells if "solution" in tags(cell)]
    assert solutions, f"{lesson.name} has no solution cells to remove"
    assert not [cell for cell in student.cells if "solution" in tags(cell)], "solution cells were handed out"
    assert len(student.cells) == len(original.cells) - len(solutions)
    assert not any(cell.get("outputs") for cell in student.cells), "outputs (answers, reveals) were handed out"

    resources = {"metadata": {"path": str(student_dir)}}
    client = NotebookClient(student, kernel_name="python3", timeout=600, resources=resources)
    client.execute()  # raises CellExecutionError, naming the cell, if anything fails

    checks = [cell for cell in student.cells if "check" in tags(cell)]
    assert len(checks) == len(solutions)
    for cell in checks:
        text = output_text(cell)
        assert "not answered yet" in text and "] correct" not in text and "] not yet" not in text, (
            f"{lesson.name}: a blank exercise's checker printed {text!r} for\n{cell.source}"
        )
