"""Lesson 05 Quick-check functions: a blank answer is "not answered yet", the right answer passes
(NumPy and torch), each recognised wrong answer gets its own message, and no "not yet" message
gives the right answer away."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from lessons_lib.checks import Verdict
from lessons_lib.checks.inspecting_heads import (
    check_argmax_shares,
    check_head_columns,
    check_head_count,
    check_head_parts,
    check_score_multiplies,
    check_strongest_source,
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
]


@pytest.mark.parametrize(("answer", "phrase"), HEAD_COUNT_MISTAKES)
def test_head_count_wrong(answer: int, phrase: str) -> None:
    assert_not_yet(check_head_count(answer, 512, 64), phrase, "head count", "8")


def test_head_count_mistakes_have_their_own_messages() -> None:
    assert_distinct([check_head_count(a, 512, 64) for a, _ in HEAD_COUNT_MISTAKES])


def test_head_count_rejects_bad_question() -> None:
    with pytest.raises(ValueError, match="must divide D"):
        check_head_count(3, 16, 5)


# ---- head columns -----------------------------------------------------------------------------


@pytest.fixture()
def wq() -> NDArray[np.float64]:
    return np.random.default_rng(0).normal(size=(D, D))


def test_head_columns_blank(wq: NDArray[np.float64]) -> None:
    verdict = check_head_columns(None, wq, head=2, heads=4)
    assert_unanswered(verdict, "head columns", "8:12", "head*d_h", "[:")
    assert "(16, 4)" in verdict.message


def test_head_columns_right(wq: NDArray[np.float64]) -> None:
    assert check_head_columns(wq[:, 8:12], wq, head=2, heads=4).ok
    assert check_head_columns(wq[:, 8:12].tolist(), wq, head=2, heads=4).ok


def test_head_columns_accepts_torch(wq: NDArray[np.float64]) -> None:
    torch = pytest.importorskip("torch")
    assert check_head_columns(torch.from_numpy(wq[:, 8:12].copy()), torch.from_numpy(wq), head=2, heads=4).ok
    assert check_head_columns(torch.from_numpy(wq).float()[:, 8:12], wq, head=2, heads=4).ok


HEAD_COLUMN_MISTAKES: list[tuple[Callable[[NDArray[np.float64]], Any], str]] = [
    (lambda w: w[8:12, :], "those are rows"),
    (lambda w: w[:, 8:12].T, "transposed"),
    (lambda w: w[:, 2::4], "every h-th column"),
    (lambda w: w[:, 4:8], "block of head 1"),
    (lambda w: w[:, 12:16], "block of head 3"),
    (lambda w: w[:, 9:13], "right shape (D, d_h) = (16, 4), but not head 2's numbers"),
    (lambda w: w[:, :3], "expected shape (D, d_h)"),
    (lambda w: "block", "expected an array of numbers"),
]


@pytest.mark.parametrize(("pick", "phrase"), HEAD_COLUMN_MISTAKES)
def test_head_columns_wrong(wq: NDArray[np.float64], pick: Callable[[NDArray[np.float64]], Any], phrase: str) -> None:
    assert_not_yet(check_head_columns(pick(wq), wq, head=2, heads=4), phrase, "head columns", "8:12")


def test_head_columns_mistakes_have_their_own_messages(wq: NDArray[np.float64]) -> None:
    assert_distinct([check_head_columns(pick(wq), wq, head=2, heads=4) for pick, _ in HEAD_COLUMN_MISTAKES])


def test_head_columns_neighbours_do_not_say_where_the_block_starts(wq: NDArray[np.float64]) -> None:
    for other in (wq[:, 4:8], wq[:, 12:16]):
        message = check_head_columns(other, wq, head=2, heads=4).message
        assert "8" not in message and "column" not in message.split(":")[-1], message


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
    (2 * RIGHT_MULTIPLIES, "value mixing"),
    (B * T * T * DM, "used T twice"),
    (B * S * S * DM, "used S twice"),
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


# ---- strongest source ---------------------------------------------------------------------------
Weights = NDArray[np.float64]


def right_strongest(weights: Weights, head: int) -> Any:
    return weights[:, head].argmax(axis=-1)  # (B, h, T, S) -> (B, T, S) -> (B, T)


def blank_strongest(weights: Weights, head: int) -> Any:
    """weights (B, h, T, S), head -> (B, T) integers."""
    ...


def test_strongest_source_blank() -> None:
    for blank in (blank_strongest, None):
        verdict = check_strongest_source(blank)
        assert_unanswered(verdict, "strongest source", "argmax", "axis", "[:, head]")
        assert "(B, T)" in verdict.message


def test_strongest_source_right() -> None:
    verdict = check_strongest_source(right_strongest)
    assert verdict.ok and repr(verdict).startswith("[strongest source] correct")
    assert check_strongest_source(lambda w, i: np.argmax(w, axis=-1)[:, i].tolist()).ok


def test_strongest_source_tries_a_second_size_and_wants_integers() -> None:
    fixed = check_strongest_source(lambda w, i: w[:, 1].argmax(axis=-1))  # head 1 hard-coded
    assert not fixed.ok
    assert "right on a first batch but not on weights of shape (B, h, T, S) = (3, 4, 5, 3)" in fixed.message
    reshaped = check_strongest_source(lambda w, i: w[:, i].reshape(2, 4, 6).argmax(axis=-1))  # (B, T, S) hard-coded
    assert not reshaped.ok and "take every size from weights itself" in reshaped.message
    floats = check_strongest_source(lambda w, i: w[:, i].argmax(axis=-1).astype(float))
    assert not floats.ok and "the right positions, but as float64 numbers" in floats.message


def test_strongest_source_refuses_a_tensor_for_numpy_weights() -> None:
    torch = pytest.importorskip("torch")  # issue 19: a tensor question refuses an array, and the reverse
    for function in (lambda w, i: torch.from_numpy(w)[:, i].argmax(dim=-1),
                      lambda w, i: torch.from_numpy(w).float()[:, i].max(dim=-1).indices):
        verdict = check_strongest_source(function)
        assert not verdict.ok
        assert "given a NumPy array and must return a NumPy array, got torch tensor" in verdict.message


def raises(weights: Weights, head: int) -> Any:
    return weights[:, head].argmax(axis=4)


def forgets_return(weights: Weights, head: int) -> None:
    weights[:, head].argmax(axis=-1)


def describes(weights: Weights, head: int) -> Any:
    return f"position {weights[:, head].argmax()}"


STRONGEST_SOURCE_MISTAKES: list[tuple[Any, str]] = [
    (lambda w, i: w[:, i].argmax(axis=-2), "the query that weighs it most"),
    (lambda w, i: w.mean(axis=1).argmax(axis=-1), "averaged over the heads"),
    (lambda w, i: w[i].argmax(axis=-1), "on axis 0, which is the batch"),
    (lambda w, i: w[:, :, i].argmax(axis=-1), "on axis 2, which is the queries"),
    (lambda w, i: w.argmax(axis=-1), "every head's answer"),
    (lambda w, i: w[0, i].argmax(axis=-1), "sequence 0 only"),
    (lambda w, i: w[:, i].max(axis=-1), "largest weights themselves"),
    (lambda w, i: w[:, i].argmax(), "without an axis flattens"),
    (lambda w, i: w[:, i - 1].argmax(axis=-1), "that is head 0, a neighbour"),
    (lambda w, i: w[:, i + 1].argmax(axis=-1), "that is head 2, a neighbour"),
    (lambda w, i: w[:, i].argmin(axis=-1), "right shape (B, T), but"),
    (lambda w, i: w[:, i, 0], "expected one source position per sequence and query"),
    (raises, "your function raised AxisError"),
    (forgets_return, "is a `return` missing?"),
    (describes, "expected an array of numbers"),
    ("argmax", "expected a function"),
]


@pytest.mark.parametrize(("function", "phrase"), STRONGEST_SOURCE_MISTAKES)
def test_strongest_source_wrong(function: Any, phrase: str) -> None:
    verdict = check_strongest_source(function)
    assert_not_yet(verdict, phrase, "strongest source", "argmax(axis=-1)")
    assert "[:, head]" not in verdict.message


def test_strongest_source_mistakes_have_their_own_messages() -> None:
    assert_distinct([check_strongest_source(f) for f, _ in STRONGEST_SOURCE_MISTAKES[:12]])


def test_strongest_source_runs_on_a_copy() -> None:
    def spoils(weights: Weights, head: int) -> Any:
        answer = weights[:, head].argmax(axis=-1)
        weights[...] = 0.0
        return answer

    assert check_strongest_source(spoils).ok
    assert check_strongest_source(right_strongest).ok


@pytest.mark.parametrize(
    "answer",
    [3, "x", [], [[1, 2], [3]], float("nan"), object(), lambda: 1, lambda w, i: object(), lambda w, i: {"a": 1}],
    ids=["int", "str", "empty list", "ragged", "nan", "object", "no arguments", "returns object", "returns dict"],
)
def test_strongest_source_never_raises(answer: Any) -> None:
    verdict = check_strongest_source(answer)
    assert isinstance(verdict, Verdict) and not verdict.ok and verdict.question == "strongest source"


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
