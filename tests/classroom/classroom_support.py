"""Shared by the classroom tests (an nbgrader course, a JupyterHub, the Colab cell): where things are, skips.

They need the tools pinned in ``requirements-classroom.txt`` (nbgrader, JupyterHub, its proxy,
nbgitpuller, psutil, build), installed in an environment of their own; `.ci/run` makes one. Where
those packages are missing (the plain ``requirements.txt`` environment of the README's test command)
every test here that needs them SKIPS with a message naming that file.

``CLASSROOM_TEST_NOTEBOOKS=/path/to/folder`` runs them on other lesson notebooks than ``notebooks/``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = Path(os.environ.get("CLASSROOM_TEST_NOTEBOOKS", REPO / "notebooks"))
REQUIREMENTS = "requirements-classroom.txt"
BIN = Path(sys.executable).parent  # the environment's scripts (nbgrader calls `alembic` by name)


def require(*modules: str) -> None:
    """Skip the calling test unless every module is importable, naming the requirements file.

    A folder of the same name in the working directory (the site's build/, say) is a namespace
    package, not the module: it does not count."""
    specs = {name: importlib.util.find_spec(name) for name in modules}
    missing = [name for name, spec in specs.items() if spec is None or spec.origin in (None, "namespace")]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed: the classroom tests need their own environment, "
            f"`python3 -m venv .venv-classroom && .venv-classroom/bin/pip install -r {REQUIREMENTS}` "
            f"(see README, Teaching a class)"
        )


def tool_env(**extra: str) -> dict[str, str]:
    """The environment for the tools' command lines: this interpreter's scripts first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def run_tool(args: list[str], cwd: Path, timeout: float = 900, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run a command line to its end; its output is kept for the assertion messages."""
    program = shutil.which(args[0], path=str(BIN)) or args[0]
    return subprocess.run(
        [program, *args[1:]], cwd=cwd, env=tool_env(**extra), capture_output=True, text=True, timeout=timeout
    )
