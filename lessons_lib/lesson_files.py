"""Where the lessons are: the file pattern of a lesson notebook and the repository's ``notebooks/``.

Shared by the learner-copy command (`lessons_lib.cli`) and the course builder for instructors
(`lessons_lib.classroom`), which both find the lessons the same way and otherwise do not need each other.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["LESSON_PATTERN", "default_source"]

LESSON_PATTERN = "[0-9][0-9]_*.ipynb"


def default_source() -> Path:
    """``notebooks/`` beside the package: the repository's lessons when installed with ``pip install -e .``."""
    return Path(__file__).resolve().parents[1] / "notebooks"
