"""The format of the typical-mistake tables, one per lesson in ``tests/test_mistakes_<NN>_<topic>.py``.

Each table is a list of `Mistake` rows (a wrong answer a learner is likely to hand in, and the words
its diagnosis must contain) and a list of `RightAnswer` rows (answers that must be accepted, such as
a number rounded as the lesson prints it). `tests/test_mistake_coverage.py` reads every table and
requires that at least `NAMED_GOAL` of all the mistakes get a diagnosis that names them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lessons_lib.checks import Verdict

NAMED_GOAL = 0.85


@dataclass(frozen=True)
class Mistake:
    """A typical wrong answer to one exercise and what its diagnosis must say.

    ``exercise``: e.g. ``"02 YT3 split"``; ``mistake``: what the learner did, in a few words;
    ``verdict``: runs the checker on that wrong answer; ``diagnosis``: words the message must
    contain; ``named``: False for a generic message (a shape, "not it") that does not name the
    mistake, counted against `NAMED_GOAL`.
    """

    exercise: str
    mistake: str
    verdict: Callable[[], Verdict]
    diagnosis: str
    named: bool = True


@dataclass(frozen=True)
class RightAnswer:
    """An answer that must be accepted (another correct way, a rounding the lesson prints)."""

    exercise: str
    answer: str
    verdict: Callable[[], Verdict]


def row_id(row: Mistake | RightAnswer) -> str:
    text = row.mistake if isinstance(row, Mistake) else row.answer
    return f"{row.exercise}: {text}"


def assert_diagnosed(row: Mistake) -> None:
    """The wrong answer is refused (answered, not ok) with the promised words."""
    verdict = row.verdict()
    assert isinstance(verdict, Verdict), verdict
    assert verdict.answered and not verdict.ok, f"{row.exercise}: {row.mistake!r} was accepted: {verdict}"
    assert row.diagnosis in verdict.message, f"{row.exercise}: {row.mistake!r} got {verdict.message!r}"


def assert_accepted(row: RightAnswer) -> None:
    verdict = row.verdict()
    assert isinstance(verdict, Verdict) and verdict.ok, f"{row.exercise}: {row.answer!r} was refused: {verdict}"
