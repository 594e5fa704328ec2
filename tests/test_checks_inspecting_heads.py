"""Lesson 05 Quick-check functions: a blank answer is "not answered yet", the right answer passes
(NumPy and torch), each recognised wrong answer gets its own message, and no "not yet" message
gives the right answer away."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from lessons_lib.checks import Verdict
from lessons_lib.checks.inspecting_heads import (
    check_argmax_shares,
    check_head_count,
    check_head_parts,
    check_score_multiplies,
    check_weight_entries,
)

B, h, T, S, D = 2, 4, 5, 7, 16


def assert_not_yet(verdict: Verdict, phrase: str, label: str, secret: str) -> None:
    """A wrong answer: "not yet", the expected diagnosis, and not a word of the right answer."""
    assert not verdict.ok and verdict.answered, verdict
    assert phrase in verdict.message, (phrase, verdict)
    assert repr(verdict).startswith(f"[{label}] not yet: "), verdict
    assert not re.search(rf"(?<![\d.]){re.escape(secret)}(?![\d.])", verdict.message), (secret, verdict)


def assert_unanswered(verdict: Verdict, label: str, *secrets: str) -> None:
    """A blank answer: "not answered yet" with a hint of what to write, not of the answer."""
    assert not verdict.ok and not verdict.answered, verdict
    assert repr(verdict).startswith(f"[{label}] not answered yet: "), verdict
    for secret in secrets:
        assert secret not in verdict.message, (secret, verdict)


def assert_distinct(verdicts: list[Verdict]) -> None:
    messages = [v.message for v in verdicts]
    assert len(set(messages)) == len(messages), messages


# ---- weight entries ----------------------------------------------------------------------------
RIGHT_ENTRIES = B * h * T * S


def test_weight_entries_blank() -> None:
    assert_unanswered(check_weight_entries(None, B=B, h=h, T=T, S=S), "weight entries", "B * h", "B*h", "280")


def test_weight_entries_right() -> None:
    verdict = check_weight_entries(RIGHT_ENTRIES, B=B, h=h, T=T, S=S)
    assert isinstance(verdict, Verdict) and verdict.ok
    assert "B*h*T*S" in repr(verdict) and repr(verdict).startswith("[weight entries] correct")
    assert check_weight_entries(np.int64(RIGHT_ENTRIES), B=B, h=h, T=T, S=S).ok
    floated = check_weight_entries(float(RIGHT_ENTRIES), B=B, h=h, T=T, S=S)  # issue 19: a count is an int
    assert not floated.ok and "is a float, and the question asks for an int" in floated.message


def test_weight_entries_accepts_torch() -> None:
    torch = pytest.importorskip("torch")
    assert check_weight_entries(torch.tensor(RIGHT_ENTRIES), B=B, h=h, T=T, S=S).ok
    assert check_weight_entries(torch.zeros(B, h, T, S).numel(), B=B, h=h, T=T, S=S).ok


WEIGHT_ENTRY_MISTAKES = [
    (B * T * S, "every head stores its own (T, S) map"),
    (h * T * S, "left out the batch"),
    (B * h * T * T, "used T twice"),
    (B * h * S * S, "used S twice"),
    (4 * RIGHT_ENTRIES, "bytes in float32"),
    (8 * RIGHT_ENTRIES, "bytes in float64"),
    (B * T * S * 3, "as if there were 3 heads"),
    (12345, "shape (B, h, T, S)"),
    (2.5, "one whole number"),
    ("many", "one whole number"),
]


@pytest.mark.parametrize(("answer", "phrase"), WEIGHT_ENTRY_MISTAKES)
def test_weight_entries_wrong(answer: object, phrase: str) -> None:
    verdict = check_weight_entries(answer, B=B, h=h, T=T, S=S)
    assert_not_yet(verdict, phrase, "weight entries", str(RIGHT_ENTRIES))


def test_weight_entries_mistakes_have_their_own_messages() -> None:
    assert_distinct([check_weight_entries(a, B=B, h=h, T=T, S=S) for a, _ in WEIGHT_ENTRY_MISTAKES[:8]])


# ---- head count -------------------------------------------------------------------------------


def test_head_count_blank() -> None:
    assert_unanswered(check_head_count(None, 512, 64), "head count", "D / d_h", "D // d_h", "8")


def test_head_count_right() -> None:
    assert check_head_count(8, 512, 64).ok
    assert check_head_count(np.int32(12), D=768, d_h=64).ok


def test_head_count_accepts_torch() -> None:
    torch = pytest.importorskip("torch")
    assert check_head_count(torch.tensor(8), 512, 64).ok


HEAD_COUNT_MISTAKES = [
    (7, "does not divide D=512"),
    (64, "is the head width d_h"),
    (16, "d_h = 32 wide, not 64"),
    (0, "positive number"),
    (512 * 64, "multiplied D by d_h"),
    (1024, "more heads than the D=512 features"),
    (64 / 512, "upside down"),
]


@pytest.mark.parametrize(("answer", "phrase"), HEAD_COUNT_MISTAKES)
def test_head_count_wrong(answer: int, phrase: str) -> None:
    assert_not_yet(check_head_count(answer, 512, 64), phrase, "head count", "8")


def test_head_count_mistakes_have_their_own_messages() -> None:
    assert_distinct([check_head_count(a, 512, 64) for a, _ in HEAD_COUNT_MISTAKES])


def test_head_count_rejects_bad_question() -> None:
    with pytest.raises(ValueError, match="must divide D"):
        check_head_count(3, 16, 5)


# ---- score multiplies ---------------------------------------------------------------------------
# B, h and d_h all different (and S / T not 2), so each wrong count below is a different number
H, DM = 3, 24  # DM: the model width of this question (d_h = 8)
RIGHT_MULTIPLIES = B * T * S * DM


def test_score_multiplies_blank() -> None:
    verdict = check_score_multiplies(None, B, T, S, DM, H)
    assert_unanswered(verdict, "score multiplies", "d_h", "B *", str(RIGHT_MULTIPLIES))


def test_score_multiplies_right() -> None:
    verdict = check_score_multiplies(RIGHT_MULTIPLIES, B, T, S, DM, H)
    assert verdict.ok and "not by h" in verdict.message


def test_score_multiplies_accepts_torch() -> None:
    torch = pytest.importorskip("torch")
    assert check_score_multiplies(torch.tensor(RIGHT_MULTIPLIES), B, T, S, DM, H).ok


SCORE_MULTIPLY_MISTAKES = [
    (B * H * T * S * DM, "d_h long, not D long"),
    (B * T * S * (DM // H), "counts one head"),
    (B * H * T * S, "number of scores"),
    (2 * RIGHT_MULTIPLIES, "or you added the value mixing"),
    (B * T * T * DM, "used T twice"),
    (B * S * S * DM, "used S twice"),
    (B * T * S * (DM + H), "1/sqrt(d_h) scaling too"),
    (B * H * T * S * (2 * (DM // H) - 1), "counts the additions too"),
    (T * S * DM, "left out the batch"),
    (99, "count the scores first"),
]


@pytest.mark.parametrize(("answer", "phrase"), SCORE_MULTIPLY_MISTAKES)
def test_score_multiplies_wrong(answer: int, phrase: str) -> None:
    verdict = check_score_multiplies(answer, B, T, S, DM, H)
    assert_not_yet(verdict, phrase, "score multiplies", str(RIGHT_MULTIPLIES))
    assert "B*T*S*D" not in verdict.message and "h*T*S*d_h" not in verdict.message


def test_score_multiplies_mistakes_have_their_own_messages() -> None:
    assert_distinct([check_score_multiplies(a, B, T, S, DM, H) for a, _ in SCORE_MULTIPLY_MISTAKES])


# ---- head parts and argmax shares (issue 28: the lesson's two body exercises) ----------------------
def right_parts(head_out: Any, wo: Any) -> Any:
    return head_out @ wo.reshape(head_out.shape[1], head_out.shape[3], -1)[None]


def right_shares(weights: Any, marker: Any) -> Any:
    peak = weights.argmax(axis=-1)
    later = np.arange(1, weights.shape[2])
    return np.array([
        (peak[..., later] == later - 1).mean(axis=(0, 2)),
        (peak[..., later - 1] == later).mean(axis=(0, 2)),
        (peak == marker[:, None, None]).mean(axis=(0, 2)),
    ])


def test_head_parts_and_shares_blank() -> None:
    def blank_parts(head_out: Any, wo: Any) -> Any:
        """head_out (B, h, T, d_h), wo (D, D) -> (B, h, T, D)."""
        ...

    def blank_shares(weights: Any, marker: Any) -> Any:
        ...

    assert_unanswered(check_head_parts(blank_parts), "head parts", "reshape", "einsum")
    assert_unanswered(check_argmax_shares(blank_shares), "argmax shares", "argmax(")


def test_head_parts_and_shares_right_and_on_copies() -> None:
    assert check_head_parts(right_parts).ok and check_argmax_shares(right_shares).ok

    def spoils_parts(head_out: Any, wo: Any) -> Any:
        answer = right_parts(head_out, wo)
        head_out[...], wo[...] = 0.0, 0.0
        return answer

    def spoils_shares(weights: Any, marker: Any) -> Any:
        answer = right_shares(weights, marker)
        weights[...] = 0.0
        return answer

    assert check_head_parts(spoils_parts).ok and check_argmax_shares(spoils_shares).ok
    assert check_head_parts(right_parts).ok and check_argmax_shares(right_shares).ok


def test_the_share_problems_tell_every_mistake_apart() -> None:
    """The checker's own maps make each relationship win some rows and lose others, in every head."""
    from lessons_lib.checks.inspecting_heads import _SHARE_PROBLEMS, _share_problem

    for B_, h_, T_, seed in _SHARE_PROBLEMS:
        weights, marker = _share_problem(B_, h_, T_, seed)
        shares = right_shares(weights, marker)
        assert shares.shape == (3, h_) and np.all(shares < 1)
        assert len({round(float(v), 6) for v in shares.ravel()}) > 2 * h_


@pytest.mark.parametrize(
    "answer",
    [3, "x", [], object(), lambda: 1, lambda a, b: object(), lambda a, b: {"a": 1}, lambda a, b: 1 / 0],
    ids=["int", "str", "empty list", "object", "no arguments", "returns object", "returns dict", "raises"],
)
def test_head_parts_and_shares_never_raise(answer: Any) -> None:
    for check, question in ((check_head_parts, "head parts"), (check_argmax_shares, "argmax shares")):
        verdict = check(answer)
        assert isinstance(verdict, Verdict) and not verdict.ok and verdict.question == question


# ---- issue 28, blind trial: the cost questions without h in the call, and the named row mistakes -----
def test_cost_checks_take_h_from_d_and_d_h() -> None:
    assert check_weight_entries(3 * 6 * 20 * 30, B=3, T=20, S=30, D=384, d_h=64).ok
    assert check_score_multiplies(3 * 20 * 30 * 384, B=3, T=20, S=30, D=384, d_h=64).ok
    work = check_weight_entries(3 * 20 * 30 * 384, B=3, T=20, S=30, D=384, d_h=64)
    assert_not_yet(work, "you multiplied by a width", "weight entries", str(3 * 6 * 20 * 30))
    assert "384 heads" not in work.message
    with pytest.raises(ValueError, match="give h, or both D and d_h"):
        check_weight_entries(None, B=1, T=2, S=3, D=8)
    with pytest.raises(ValueError, match="d_h=3 is not D / h"):
        check_weight_entries(None, B=1, T=2, S=3, h=2, D=8, d_h=3)


def shares_with(weights: Any, marker: Any, rows: dict[int, Any]) -> Any:
    answer = right_shares(weights, marker)
    for row, values in rows.items():
        answer[row] = values
    return answer


def test_argmax_shares_names_every_wrong_row() -> None:
    def rolled(weights: Any, marker: Any) -> Any:
        peak, t = weights.argmax(axis=-1), np.arange(weights.shape[2])
        return shares_with(weights, marker, {0: (peak == np.roll(t, 1)).mean(axis=(0, 2)),
                                             1: (peak == np.roll(t, -1)).mean(axis=(0, 2))})

    def thresholds(weights: Any, marker: Any) -> Any:
        t = np.arange(1, weights.shape[2])
        on_marker = weights[np.arange(len(marker)), :, :, marker]
        return np.array([(weights[:, :, t, t - 1] > 0.5).mean(axis=(0, 2)),
                         (weights[:, :, t - 1, t] > 0.5).mean(axis=(0, 2)), (on_marker > 0.5).mean(axis=(0, 2))])

    rolled_verdict = check_argmax_shares(rolled)
    assert "row 0 (previous)" in rolled_verdict.message and "row 1 (next)" in rolled_verdict.message
    assert rolled_verdict.message.count("np.roll wraps around") == 2
    assert "the other row is right" in rolled_verdict.message
    threshold_verdict = check_argmax_shares(thresholds)
    assert "rows 0 (previous), 1 (next), 2 (marker): counts rows whose weight there is above 0.5" in (
        threshold_verdict.message)
