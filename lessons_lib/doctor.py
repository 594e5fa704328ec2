"""``several-heads doctor``: a learner's self-check before the first lesson, one line per check.

Each check says OK or FAIL and, on a failure, what to do. Checked: the Python version; each package
the lessons import, installed and at least the oldest version this course is tested with
(``requirements-oldest.txt``); the lessons folder; the shipped data (the Shakespeare text against its
SHA-256, the trained weights); and one small attention computed by NumPy and by PyTorch, which must
agree. Nothing here needs a network or writes a file.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import sys
from collections.abc import Callable
from dataclasses import dataclass

from lessons_lib.lesson_files import LESSON_PATTERN, default_source

__all__ = ["MINIMUM_PYTHON", "MINIMUM_VERSIONS", "Check", "run_checks", "version_tuple"]

MINIMUM_PYTHON = (3, 10)
# The oldest versions the tests run with (requirements-oldest.txt); JupyterLab's from requirements.txt's era.
MINIMUM_VERSIONS = {
    "numpy": "1.26.0",
    "torch": "2.5.1",
    "matplotlib": "3.8.0",
    "ipywidgets": "8.0.0",
    "anywidget": "0.11.0",
    "ipykernel": "7.3.0",
    "nbformat": "5.11.1",
    "jupyterlab": "4.0.0",
}
INSTALL = "pip install -r requirements.txt (from the repository's folder; README, first command)"


@dataclass(frozen=True)
class Check:
    """One line of the report: ``name``, ``ok``, and what was found or what to do."""

    name: str
    ok: bool
    detail: str

    def __str__(self) -> str:
        return f"{'OK  ' if self.ok else 'FAIL'}  {self.name}: {self.detail}"


def version_tuple(version: str) -> tuple[int, ...]:
    """``"2.13.0+cpu"`` -> ``(2, 13, 0)``: the leading numbers of a version string."""
    if not isinstance(version, str):
        raise TypeError(f"version must be a str such as '2.2.6', got {type(version).__name__}")
    numbers = []
    for part in version.split("+")[0].split("."):
        digits = len(part) - len(part.lstrip("0123456789"))  # how many leading digits ("0rc1": 1)
        if not digits:
            break
        numbers.append(int(part[:digits]))
        if digits < len(part):
            break
    if not numbers:
        raise ValueError(f"version {version!r} does not start with a number")
    return tuple(numbers)


def _python() -> Check:
    found = ".".join(map(str, sys.version_info[:3]))
    ok = sys.version_info[:2] >= MINIMUM_PYTHON
    want = ".".join(map(str, MINIMUM_PYTHON))
    return Check("Python", ok, found if ok else f"{found}; the lessons need {want} or newer")


def _package(name: str, oldest: str) -> Check:
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return Check(name, False, f"not installed: {INSTALL}")
    if version_tuple(version) < version_tuple(oldest):
        oldest_note = f"{version} is older than {oldest}, the oldest the lessons are tested with"
        return Check(name, False, f"{oldest_note}: {INSTALL}")
    try:
        importlib.import_module(name)
    except Exception as error:  # an installed package that fails to import, whatever the reason
        return Check(name, False, f"{version} is installed but does not import ({type(error).__name__}: {error})")
    return Check(name, True, version)


def _lessons() -> Check:
    folder = default_source()
    lessons = sorted(folder.glob(LESSON_PATTERN)) if folder.is_dir() else []
    if not lessons:
        return Check("lessons", False, f"no lesson notebooks in {folder}: install this package from a clone of the "
                                       "repository with `pip install -e .` (README)")
    return Check("lessons", True, f"{len(lessons)} in {folder}")


def _data() -> Check:
    import json

    from lessons_lib import shakespeare

    manifest = json.loads((shakespeare.DATA / "shakespeare_text.json").read_text())
    for split, facts in manifest["splits"].items():
        try:
            text = shakespeare.load_text(split)
        except (OSError, EOFError, ValueError) as error:
            return Check("data", False, f"the {split} text cannot be read ({error}): reinstall or `git checkout "
                                        "lessons_lib/data`")
        if hashlib.sha256(text.encode("ascii")).hexdigest() != facts["sha256"]:
            return Check("data", False, f"the {split} text differs from its manifest (SHA-256): `git checkout "
                                        "lessons_lib/data` restores it")
    try:
        shakespeare.load_arrays()
    except (OSError, ValueError, KeyError) as error:
        return Check("data", False, f"lesson 10's weights cannot be loaded ({error}): `git checkout lessons_lib/data`")
    return Check("data", True, "the Shakespeare text matches its SHA-256; lesson 10's weights load")


def _agreement() -> Check:
    import numpy as np

    from lessons_lib import mha_numpy

    try:
        import torch

        from lessons_lib import mha_torch
    except ImportError:
        return Check("NumPy = PyTorch", False, f"torch does not import: {INSTALL}")
    x = np.random.default_rng(0).normal(size=(2, 5, 8))
    ours, _ = mha_numpy.MultiHead(8, 2, seed=0)(x)
    theirs, _ = mha_torch.MultiHead(8, 2, seed=0, dtype=torch.float64)(torch.from_numpy(x))
    error = float(np.abs(ours - theirs.detach().numpy()).max())
    if not error < 1e-10:
        return Check("NumPy = PyTorch", False, f"one small multi-head layer differs by {error:.2g} between the two "
                                               "libraries: reinstall numpy and torch from requirements.txt")
    return Check("NumPy = PyTorch", True, f"one multi-head layer agrees to {error:.1g}")


def run_checks() -> list[Check]:
    """Every check, in order: Python, each package, the lessons, the data, NumPy against PyTorch."""
    steps: list[Callable[[], Check]] = [_python]
    steps += [functools.partial(_package, name, oldest) for name, oldest in MINIMUM_VERSIONS.items()]
    steps += [_lessons, _data, _agreement]
    found = []
    for step in steps:
        try:
            found.append(step())
        except Exception as error:  # a check that breaks is a failed check, reported like one
            name = getattr(step, "__name__", "check").strip("_")
            found.append(Check(name, False, f"{type(error).__name__}: {error}"))
    return found
