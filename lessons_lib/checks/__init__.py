"""Quick-check helpers: each lesson's checker returns a `Verdict` that explains a wrong answer.

Per-lesson checkers live in ``lessons_lib.checks.lessonNN``; they import only NumPy, and accept
torch tensors too by converting them with `as_numpy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["Verdict", "as_numpy", "failed", "number_answer", "passed"]


@dataclass(frozen=True)
class Verdict:
    """The outcome of one Quick-check question: shown as a one-line message in the notebook."""

    question: str
    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        mark = "correct" if self.ok else "not yet"
        return f"[{self.question}] {mark}: {self.message}"

    __str__ = __repr__


def passed(question: str, message: str) -> Verdict:
    return Verdict(question, True, message)


def failed(question: str, message: str) -> Verdict:
    return Verdict(question, False, message)


def as_numpy(value: Any) -> NDArray[Any]:
    """A NumPy copy of an array, a torch tensor (detached) or a nested list."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def number_answer(question: str, answer: Any, what: str) -> float | Verdict:
    """The learner's ``answer`` as one float, or a `Verdict` saying why it is not one number.

    ``what`` completes "replace None with ..." for an unanswered question.
    """
    if answer is None:
        return failed(question, f"no answer yet: replace None with {what}")
    if isinstance(answer, bool):
        return failed(question, f"expected a number, got the boolean {answer}")
    try:
        return float(np.asarray(as_numpy(answer), dtype=np.float64).item())
    except (TypeError, ValueError):
        return failed(question, f"expected one number, got {type(answer).__name__} {answer!r}")
