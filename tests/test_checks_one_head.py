"""Lesson 01 Quick check: every checker accepts the right answer (NumPy, and torch where it makes
sense), says "not answered yet" for a blank exercise, names each mistake it knows in its own words,
never gives the solution away in a "not yet" message, and never raises on a learner's answer."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from lessons_lib import mha_numpy
from lessons_lib.checks import Verdict
from lessons_lib.checks.one_head import (
    check_attention_function,
    check_causal_mask,
    check_scores,
    check_weights,
)
from lessons_lib.mha_numpy import attention, causal_mask, softmax

Floats = NDArray[np.float64]
T, S, d, d_v = 3, 5, 4, 2
# Text that would hand over a solution: the full formulas, the np.tril offset, the masking line.
SOLUTIONS = ("q @ k.T / sqrt(d)", "q @ k.T / np.sqrt", "k=S - T", "k=2", "np.where(", "softmax(scores, axis=-1)",
             "weights @ v, weights", "source @ w_q")


@pytest.fixture
def qkv() -> tuple[Floats, Floats, Floats]:
    rng = np.random.default_rng(1)
    return rng.normal(size=(T, d)), rng.normal(size=(S, d)), rng.normal(size=(S, d_v))


def assert_not_yet(verdict: Verdict, *words: str) -> None:
    """An answered but wrong verdict that names the mistake (every word appears) and gives nothing away."""
    assert isinstance(verdict, Verdict)
    assert not verdict.ok and verdict.answered, verdict
    assert repr(verdict).startswith(f"[{verdict.question}] not yet: ")
    for word in words:
        assert word in verdict.message, (word, verdict.message)
    for solution in SOLUTIONS:
        assert solution not in verdict.message, (solution, verdict.message)


def assert_unanswered(verdict: Verdict, *words: str) -> None:
    """A blank exercise: "not answered yet", with a hint of what to write, not of the answer."""
    assert isinstance(verdict, Verdict) and not verdict.ok and not verdict.answered, verdict
    assert repr(verdict).startswith(f"[{verdict.question}] not answered yet: ")
    for word in words:
        assert word in verdict.message, (word, verdict.message)
    for solution in SOLUTIONS:
        assert solution not in verdict.message, (solution, verdict.message)


def messages(verdicts: list[Verdict]) -> None:
    """Each diagnosed mistake gets its own message."""
    texts = [v.message for v in verdicts]
    assert len(set(texts)) == len(texts), texts


# ---- scores ---------------------------------------------------------------------------------

SCORE_MISTAKES: list[tuple[Callable[[Floats, Floats], Any], list[str]]] = [
    (lambda q, k: q @ k.T, ["forgot the scale", "d = 4"]),
    (lambda q, k: q @ k.T / d, ["divided by d = 4"]),
    (lambda q, k: q @ k.T * math.sqrt(d), ["multiplied by sqrt(d)"]),
    (lambda q, k: k @ q.T / math.sqrt(d), ["k @ q.T", "(T, S) = (3, 5)"]),
    (lambda q, k: k @ q.T, ["k @ q.T", "forgot the scale"]),
    (lambda q, k: q @ k.T / math.sqrt(S), ["sqrt(S)", "feature width"]),
    (lambda q, k: q @ k.T / math.sqrt(T), ["sqrt(T)", "feature width"]),
]


def test_scores_correct(qkv: tuple[Floats, Floats, Floats]) -> None:
    q, k, _ = qkv
    right = q @ k.T / math.sqrt(d)
    verdict = check_scores(right, q, k)
    assert verdict.ok and repr(verdict).startswith("[scores] correct: ")
    assert check_scores(right.astype(np.float32), q, k).ok
    assert check_scores(right.tolist(), q, k).ok


def test_scores_correct_torch(qkv: tuple[Floats, Floats, Floats]) -> None:
    torch = pytest.importorskip("torch")
    q, k, _ = qkv
    tq, tk = torch.from_numpy(q).float(), torch.from_numpy(k).float()
    assert check_scores(tq @ tk.T / math.sqrt(d), q, k).ok


@pytest.mark.parametrize(("wrong", "words"), SCORE_MISTAKES)
def test_scores_recognises(
    qkv: tuple[Floats, Floats, Floats], wrong: Callable[[Floats, Floats], Any], words: list[str]
) -> None:
    q, k, _ = qkv
    assert_not_yet(check_scores(wrong(q, k), q, k), *words)


def test_scores_mistakes_have_their_own_messages(qkv: tuple[Floats, Floats, Floats]) -> None:
    q, k, _ = qkv
    messages([check_scores(wrong(q, k), q, k) for wrong, _ in SCORE_MISTAKES])


def test_scores_blank_other_and_text(qkv: tuple[Floats, Floats, Floats]) -> None:
    q, k, _ = qkv
    assert_unanswered(check_scores(None, q, k), "replace None with", "scaled scores", "(3, 5)")
    assert_not_yet(check_scores(q @ k.T / math.sqrt(d) + 1.0, q, k), "right shape (T, S) = (3, 5), wrong numbers")
    assert_not_yet(check_scores(q @ k.T * 0.3, q, k), "right shape", "dot products times 0.3")
    assert_not_yet(check_scores(np.ones((5, 5)), q, k), "expected shape (T, S) = (3, 5)")


BATCH_SCORE_MISTAKES: list[tuple[Callable[[Floats, Floats], Any], list[str]]] = [
    (lambda q, k: q @ np.swapaxes(k, -1, -2), ["forgot the scale"]),
    (lambda q, k: q[0] @ k[0].T / math.sqrt(d), ["first sequence only", "(2, 3, 5)"]),
    (lambda q, k: np.tensordot(q, k, axes=([-1], [-1])) / math.sqrt(d), ["every sequence's keys", "(B, T, B, S)"]),
    (lambda q, k: np.tensordot(q, k, axes=([-1], [-1])), ["every sequence's keys", "forgot the scale"]),
    (lambda q, k: q @ np.swapaxes(k, -1, -2) / math.sqrt(T), ["sqrt(T)", "q.shape[-1]"]),
    (lambda q, k: k @ np.swapaxes(q, -1, -2) / math.sqrt(d), ["transposed"]),
]


@pytest.mark.parametrize(("wrong", "words"), BATCH_SCORE_MISTAKES)
def test_batched_scores(wrong: Callable[[Floats, Floats], Any], words: list[str]) -> None:
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(2, T, d)), rng.normal(size=(2, S, d))
    right = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
    verdict = check_scores(right, q, k)
    assert verdict.ok and "(B, T, S) = (2, 3, 5)" in verdict.message
    assert check_scores(np.einsum("btd,bsd->bts", q, k) / 2, q, k).ok
    assert check_scores(q @ k.transpose(0, 2, 1) / 2, q, k).ok
    assert_not_yet(check_scores(wrong(q, k), q, k), *words)
    assert_not_yet(check_scores("scores", q, k), "array of numbers")


def test_scores_rejects_bad_problem_inputs(qkv: tuple[Floats, Floats, Floats]) -> None:
    q, k, _ = qkv
    with pytest.raises(TypeError, match="q must hold floating-point"):
        check_scores(q, q.astype(int), k)
    with pytest.raises(ValueError, match="k must have at least 2 axes"):
        check_scores(q, q, k[0])


# ---- weights --------------------------------------------------------------------------------


@pytest.fixture
def scores(qkv: tuple[Floats, Floats, Floats]) -> Floats:
    q, k, _ = qkv
    return q @ k.T / math.sqrt(d)


KEEP = np.array([True, True, True, True, False])  # (S,): the last source position is padding


def _plain_softmax(x: NDArray[np.float64], axis: int) -> NDArray[np.float64]:
    """A learner's own softmax, with no checks: a column of -inf comes out as NaN (the library's refuses)."""
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        out: NDArray[np.float64] = e / e.sum(axis=axis, keepdims=True)
    return out


def _masked(s: Floats, keep: NDArray[np.bool_] = KEEP) -> Floats:
    return np.where(keep, s, -np.inf)


def test_weights_correct(scores: Floats) -> None:
    verdict = check_weights(softmax(scores, axis=-1), scores)
    assert verdict.ok and "axis=-1" in verdict.message
    exps = np.exp(scores)
    assert check_weights(exps / exps.sum(axis=1, keepdims=True), scores).ok
    masked = check_weights(softmax(_masked(scores), axis=-1), scores, KEEP)
    assert masked.ok and "exactly 0" in masked.message
    renormalised = softmax(scores, axis=-1) * KEEP
    assert check_weights(renormalised / renormalised.sum(axis=-1, keepdims=True), scores, KEEP).ok


def test_weights_correct_torch(scores: Floats) -> None:
    torch = pytest.importorskip("torch")
    blocked = torch.from_numpy(_masked(scores)).float()
    assert check_weights(torch.softmax(blocked, dim=-1), scores, torch.from_numpy(KEEP)).ok


WEIGHT_MISTAKES: list[tuple[Callable[[Floats], Any], list[str]]] = [
    (lambda s: softmax(s, axis=0), ["query axis", "axis=-1"]),
    (lambda s: np.exp(s) / np.exp(s).sum(), ["whole matrix"]),
    (lambda s: s / s.sum(axis=-1, keepdims=True), ["without exponentiating"]),
    (lambda s: np.exp(s), ["did not divide"]),
    (lambda s: s, ["scores themselves"]),
    (lambda s: softmax(s, axis=-1) * 2.0, ["right shape (T, S) = (3, 5)", "sum to 2 .. 2, not 1"]),
]


@pytest.mark.parametrize(("wrong", "words"), WEIGHT_MISTAKES)
def test_weights_recognises(scores: Floats, wrong: Callable[[Floats], Any], words: list[str]) -> None:
    assert_not_yet(check_weights(wrong(scores), scores), *words)


MASKED_WEIGHT_MISTAKES: list[tuple[Callable[[Floats], Any], list[str]]] = [
    (lambda s: softmax(s, axis=-1), ["mask is ignored"]),
    (lambda s: softmax(s, axis=-1) * KEEP, ["after the softmax", "sum to 1"]),
    (lambda s: softmax(np.where(KEEP, s, 0.0), axis=-1), ["set the blocked scores to 0", "-inf"]),
    (lambda s: softmax(np.where(KEEP, -np.inf, s), axis=-1), ["inverted mask", "True = may attend"]),
    (lambda s: _plain_softmax(_masked(s), axis=0), ["NaN", "query axis", "use axis=-1"]),
    (lambda s: softmax(_masked(s).ravel()).reshape(s.shape), ["whole matrix"]),
    (lambda s: np.exp(_masked(s)), ["did not divide"]),
    (lambda s: softmax(_masked(s), axis=-1)[::-1], ["right shape (T, S) = (3, 5), wrong numbers", "favour other"]),
    (lambda s: softmax(np.where(KEEP, s, -20.0), axis=-1), ["not exactly 0", "-20"]),
    (lambda s: softmax(np.where(KEEP, s, -14.0), axis=-1), ["not exactly 0"]),
    (lambda s: softmax(np.where(KEEP, s, -12.0), axis=-1), ["not exactly 0"]),
]


@pytest.mark.parametrize(("wrong", "words"), MASKED_WEIGHT_MISTAKES)
def test_masked_weights_recognises(scores: Floats, wrong: Callable[[Floats], Any], words: list[str]) -> None:
    with np.errstate(all="ignore"):
        answer = wrong(scores)
    assert_not_yet(check_weights(answer, scores, KEEP), *words)


def test_weight_mistakes_have_their_own_messages(scores: Floats) -> None:
    messages([check_weights(wrong(scores), scores) for wrong, _ in WEIGHT_MISTAKES])
    with np.errstate(all="ignore"):
        messages([check_weights(wrong(scores), scores, KEEP) for wrong, _ in MASKED_WEIGHT_MISTAKES])


def test_weights_without_keepdims_on_square_scores() -> None:
    square = np.random.default_rng(6).normal(size=(4, 4))
    e = np.exp(square)
    assert_not_yet(check_weights(e / e.sum(axis=-1), square), "without keepdims=True")
    shifted = np.exp(square - square.max(axis=-1))
    assert_not_yet(check_weights(shifted / shifted.sum(axis=-1), square), "keepdims=True")


# A query with no allowed position (Your turn 4): its row must be zeros, the others as usual.
EMPTY = np.array([KEEP, np.zeros(S, dtype=bool), KEEP])  # (T, S): query 1 may attend to nothing


def _zeros_for_empty(s: Floats) -> Floats:
    nothing = ~EMPTY.any(axis=-1, keepdims=True)
    out: Floats = np.where(nothing, 0.0, softmax(np.where(nothing, 0.0, np.where(EMPTY, s, -np.inf)), axis=-1))
    return out


def test_empty_row_correct(scores: Floats) -> None:
    verdict = check_weights(_zeros_for_empty(scores), scores, EMPTY)
    assert verdict.ok and "row of zeros" in verdict.message
    with np.errstate(all="ignore"):
        renormalised = np.exp(scores) * EMPTY
        by_sum = np.nan_to_num(renormalised / renormalised.sum(axis=-1, keepdims=True))
    assert check_weights(by_sum, scores, EMPTY).ok


EMPTY_ROW_MISTAKES: list[tuple[Callable[[Floats], Any], list[str]]] = [
    (lambda s: _plain_softmax(np.where(EMPTY, s, -np.inf), axis=-1), ["no allowed position gets NaN", "zeros"]),
    (lambda s: _plain_softmax(np.where(EMPTY, s, -1e9), axis=-1), ["equal weights 1/S = 1/5", "-1e9"]),
    (lambda s: np.where(EMPTY.any(axis=-1, keepdims=True), _plain_softmax(np.where(EMPTY, s, -1e9), axis=-1), 0.5),
     ["must be all zeros"]),
    (lambda s: np.where(EMPTY.any(axis=-1, keepdims=True), _plain_softmax(np.where(EMPTY, s, -20.0), -1), 0.0),
     ["not exactly 0"]),
    (lambda s: softmax(s, axis=-1) * EMPTY, ["after the softmax"]),
    (lambda s: softmax(s, axis=-1), ["mask is ignored"]),
    (lambda s: np.zeros_like(s), ["right shape (T, S) = (3, 5), wrong numbers", "sums to 0, not 1"]),
]


@pytest.mark.parametrize(("wrong", "words"), EMPTY_ROW_MISTAKES)
def test_empty_row_mistakes(scores: Floats, wrong: Callable[[Floats], Any], words: list[str]) -> None:
    with np.errstate(all="ignore"):
        answer = wrong(scores)
    assert_not_yet(check_weights(answer, scores, EMPTY), *words)


def test_weights_blank(scores: Floats) -> None:
    assert_unanswered(check_weights(None, scores, KEEP), "replace None with", "attention weights", "(3, 5)")


# ---- causal mask ----------------------------------------------------------------------------


def test_mask_correct() -> None:
    verdict = check_causal_mask(np.tril(np.ones((4, 4), dtype=bool)), 4)
    assert verdict.ok and "up to its own" in verdict.message
    assert check_causal_mask(causal_mask(T, S), T, S).ok
    positions = np.arange(S)[None, :] <= (S - T + np.arange(T))[:, None]
    assert check_causal_mask(positions, T, S).ok
    assert check_causal_mask(np.tril(np.ones((S, S), dtype=bool))[-T:], T, S).ok


def test_mask_correct_torch() -> None:
    torch = pytest.importorskip("torch")
    assert check_causal_mask(torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T), T, S).ok


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (~np.tril(np.ones((4, 4), dtype=bool)), ["inverted convention", "True = may attend"]),
        (np.triu(np.ones((4, 4), dtype=bool), k=1), ["inverted convention"]),
        (np.where(np.tril(np.ones((4, 4))) > 0, 0.0, -np.inf), ["additive mask", "True = may attend"]),
        (np.tril(np.ones((4, 4), dtype=int)), ["right pattern", "dtype=bool"]),
        (np.triu(np.ones((4, 4)), k=1), ["inverted convention with numbers"]),
        (np.triu(np.ones((4, 4), dtype=bool)), ["transposed", "lower triangle"]),
        (np.tril(np.ones((4, 4), dtype=bool), k=-1), ["excluded the diagonal"]),
        (np.ones((4, 4), dtype=bool), ["nothing is masked"]),
        (np.ones((4, 5), dtype=bool), ["expected shape (T, S) = (4, 4)"]),
        (np.eye(4, dtype=bool), ["expected query t to see positions"]),
    ],
)
def test_mask_recognises(wrong: NDArray[np.generic], words: list[str]) -> None:
    assert_not_yet(check_causal_mask(wrong, 4), *words)


RECTANGULAR_MISTAKES: list[tuple[NDArray[np.generic], list[str]]] = [
    (np.tril(np.ones((T, S), dtype=bool)), ["top-left triangle", "offset", "LAST 3 of 5"]),
    (~causal_mask(T, S), ["inverted convention", "True = may attend"]),
    (np.triu(np.ones((T, S), dtype=bool), k=1), ["two things", "inverted convention", "offset"]),
    (causal_mask(T, S).astype(float), ["right pattern", "dtype float64"]),
    (np.tril(np.ones((T, S))), ["two things", "dtype float64", "offset"]),
    (np.tril(np.ones((T, S), dtype=bool), k=S - T - 1), ["excluded the diagonal"]),
    (np.ones((S, T), dtype=bool), ["expected shape (T, S) = (3, 5)", "rows are queries"]),
    (np.ones((T, S), dtype=bool), ["nothing is masked"]),
]


@pytest.mark.parametrize(("wrong", "words"), RECTANGULAR_MISTAKES)
def test_mask_rectangular_mistakes(wrong: NDArray[np.generic], words: list[str]) -> None:
    assert_not_yet(check_causal_mask(wrong, T, S), *words)


def test_mask_rectangular_messages_differ() -> None:
    messages([check_causal_mask(wrong, T, S) for wrong, _ in RECTANGULAR_MISTAKES])


def test_mask_blank_and_other_dtypes() -> None:
    assert_unanswered(check_causal_mask(None, T, S), "replace None with", "boolean", "(3, 5)")
    assert_not_yet(check_causal_mask(np.eye(4, dtype=int), 4), "expected a boolean mask, got dtype int")
    assert_not_yet(check_causal_mask(np.full((4, 4), "yes"), 4), "expected a boolean mask, got dtype <U3")


# ---- the attention function ----------------------------------------------------------------


def blank(q: Floats, k: Floats, v: Floats, allowed: Any = None) -> Any:
    """q (..., T, d), k (..., S, d), v (..., S, d_v), allowed (..., T, S) or None -> (output, weights)."""
    ...


def _steps(q: Floats, k: Floats, allowed: Any, scale: float, axis: int = -1, fill: float = -np.inf,
           swap: Callable[[Floats], Floats] = lambda k: np.swapaxes(k, -1, -2)) -> Floats:
    """A learner's scores, mask and softmax, each step changeable."""
    scores = q @ swap(k) / scale
    if allowed is not None:
        scores = np.where(allowed, scores, fill)
    return _plain_softmax(scores, axis)


def right(q: Floats, k: Floats, v: Floats, allowed: Any = None) -> tuple[Any, Any]:
    weights = _steps(q, k, allowed, math.sqrt(q.shape[-1]))
    return weights @ v, weights


def right_torch(q: Floats, k: Floats, v: Floats, allowed: Any = None) -> Any:
    torch = pytest.importorskip("torch")
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    scores = tq @ tk.transpose(-2, -1) / math.sqrt(tq.shape[-1])
    if allowed is not None:
        scores = scores.masked_fill(~torch.from_numpy(np.asarray(allowed)), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ tv, weights


def _variant(scale: Callable[[Floats, Floats, Floats], float] = lambda q, k, v: math.sqrt(q.shape[-1]),
             axis: int = -1, fill: float = -np.inf, swap: Callable[[Floats], Floats] = lambda k: np.swapaxes(k, -1, -2),
             ) -> Callable[..., tuple[Any, Any]]:
    def attention_with_a_bug(q: Floats, k: Floats, v: Floats, allowed: Any = None) -> tuple[Any, Any]:
        weights = _steps(q, k, allowed, scale(q, k, v), axis, fill, swap)
        return weights @ v, weights

    return attention_with_a_bug


def dot_t(q: Floats, k: Floats, v: Floats, allowed: Any = None) -> tuple[Any, Any]:
    scores = q @ k.T / math.sqrt(q.shape[-1])  # right for 2-D, wrong for a batch
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    weights = _plain_softmax(scores, -1)
    return weights @ v, weights


def three_arguments(q: Floats, k: Floats, v: Floats) -> tuple[Any, Any]:
    return right(q, k, v)


def mask_always(q: Floats, k: Floats, v: Floats, allowed: Any = None) -> tuple[Any, Any]:
    scores = np.where(allowed, q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]), -np.inf)  # no None test
    weights = _plain_softmax(scores, -1)
    return weights @ v, weights


def mask_after(q: Floats, k: Floats, v: Floats, allowed: Any = None) -> tuple[Any, Any]:
    weights = _steps(q, k, None, math.sqrt(q.shape[-1]))
    if allowed is not None:
        weights = weights * allowed
    return weights @ v, weights


def no_keepdims(q: Floats, k: Floats, v: Floats, allowed: Any = None) -> tuple[Any, Any]:
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1)
    return weights @ v, weights


def three_axes_only(q: Floats, k: Floats, v: Floats, allowed: Any = None) -> tuple[Any, Any]:
    weights = _steps(q, k, allowed, math.sqrt(q.shape[-1]), swap=lambda k: k.transpose(0, 2, 1) if k.ndim == 3
                     else np.swapaxes(k, 0, 1) if k.ndim == 2 else k.transpose(0, 2, 1))
    return weights @ v, weights


def _pair(weights: Floats, v: Floats) -> Floats:
    return weights @ v


ATTENTION_MISTAKES: list[tuple[Callable[..., Any], list[str]]] = [
    (_variant(scale=lambda q, k, v: 1.0), ["2-D self-attention", "no scale"]),
    (_variant(scale=lambda q, k, v: q.shape[-1]), ["divided the scores by d = 4"]),
    (_variant(scale=lambda q, k, v: math.sqrt(v.shape[-1])), ["sqrt(d_v) = sqrt(2)"]),
    (_variant(scale=lambda q, k, v: math.sqrt(k.shape[-2])), ["sqrt(S)"]),
    (_variant(axis=-2), ["query axis"]),
    (_variant(swap=lambda k: k), ["product does not fit", "(d, S)"]),
    (_variant(scale=lambda q, k, v: 2.0), ["right for 2-D self-attention", "d hard-coded", "sqrt(4)"]),
    (_variant(scale=lambda q, k, v: math.sqrt(q.shape[1])), ["right for 2-D cross-attention", "q.shape[1]"]),
    (_variant(fill=-20.0), ["not exactly 0", "-20"]),
    (_variant(fill=0.0), ["blocked scores set to 0"]),
    (dot_t, ["right for 2-D cross-attention", "k.T reverses EVERY axis", "np.swapaxes(k, -1, -2)"]),
    (three_arguments, ["add the optional mask parameter", "allowed=None"]),
    (mask_always, ["with allowed=None every score became -inf"]),
    (mask_after, ["zeroed the blocked weights after the softmax"]),
    (no_keepdims, ["without keepdims=True"]),
    (three_axes_only, ["right for a batch", "names every axis"]),
    (lambda q, k, v, allowed=None: (right(q, k, v, allowed)[1], right(q, k, v, allowed)[1]), ["not applied to v"]),
    (lambda q, k, v, allowed=None: (np.swapaxes(right(q, k, v, allowed)[1], -1, -2) @ v, right(q, k, v, allowed)[1]),
     ["weights.T @ v"]),
    (lambda q, k, v, allowed=None: (v, right(q, k, v, allowed)[1]), ["v itself"]),
    (lambda q, k, v, allowed=None: right(q, k, v, allowed)[::-1], ["returned (weights, output)"]),
    (lambda q, k, v, allowed=None: right(q, k, v, allowed)[0], ["right output", "pair"]),
    (lambda q, k, v, allowed=None: right(q, k, v, allowed)[1], ["not a single value"]),
    (lambda q, k, v, allowed=None: (*right(q, k, v, allowed), q), ["3 items"]),
    (lambda q, k, v, allowed=None: ("output", right(q, k, v, allowed)[1]), ["two arrays"]),
    (lambda q, k, v, allowed=None: q[0, 10], ["raised IndexError"]),
    (lambda q, k, v, allowed=None: {"forgot": q}.clear(), ["returned None", "return"]),
    (lambda q, k, v, allowed=None: attention(q, k, v, allowed), ["calls the library's attention", "asks you to write"]),
    (lambda q, k, v, allowed=None: mha_numpy._attention(q, k, v, allowed), ["calls the library's _attention"]),
]


def test_attention_function_correct() -> None:
    verdict = check_attention_function(right)
    assert verdict.ok and repr(verdict).startswith("[attention function] correct: ")
    assert check_attention_function(right_torch).ok
    assert check_attention_function(_variant(fill=-1e9)).ok  # exp(-1e9) is exactly 0
    assert check_attention_function(_variant(swap=lambda k: np.moveaxis(k, -1, -2))).ok
    assert check_attention_function(
        lambda q, k, v, allowed=None: (lambda w: (w @ v, w))(_steps(q, k, allowed, k.shape[-1] ** 0.5))
    ).ok


def test_attention_function_blank() -> None:
    assert_unanswered(check_attention_function(blank), "write the body", "(output, weights)")
    assert_unanswered(check_attention_function(None), "write the body")


@pytest.mark.parametrize(("wrong", "words"), ATTENTION_MISTAKES)
def test_attention_function_recognises(wrong: Callable[..., Any], words: list[str]) -> None:
    assert_not_yet(check_attention_function(wrong), *words)


def test_attention_function_messages_differ() -> None:
    messages([check_attention_function(wrong) for wrong, _ in ATTENTION_MISTAKES])


def test_attention_function_borrowed_through_the_module() -> None:
    verdict = check_attention_function(lambda q, k, v, allowed=None: mha_numpy.attention(q, k, v, allowed))
    assert_not_yet(verdict, "calls the library's attention")


def test_attention_function_refuses_any_finished_attention() -> None:
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional

    def through_torch(q: Floats, k: Floats, v: Floats, allowed: Any = None) -> Any:
        return functional.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v))

    assert_not_yet(check_attention_function(through_torch), "scaled_dot_product_attention")
    from lessons_lib import efficient

    def through_tiles(q: Floats, k: Floats, v: Floats, allowed: Any = None) -> Any:
        return efficient.tiled_attention(q, k, v, allowed)

    assert_not_yet(check_attention_function(through_tiles), "tiled_attention", "finished attention")


def test_attention_function_not_a_function() -> None:
    assert_not_yet(check_attention_function("attention"), "expected a function")
    assert_not_yet(check_attention_function(3), "expected a function")


# ---- no checker raises on a learner's answer --------------------------------------------------


def odd_answers() -> list[Any]:
    return [
        None, "text", 3, 2.5, True, [], [[1, 2], [3]], {"a": 1}, {1, 2}, np.array([object()]),
        np.full((3, 5), np.nan), np.ones((3, 5), dtype=complex), np.ones((3, 5), dtype=bool), np.ones((9, 9)),
        lambda q, k, v: 1 / 0, blank,
    ]


def test_every_checker_survives_odd_answers(qkv: tuple[Floats, Floats, Floats]) -> None:
    q, k, _ = qkv
    checkers: list[Callable[[Any], Verdict]] = [
        lambda a: check_scores(a, q, k),
        lambda a: check_weights(a, q @ k.T, KEEP),
        lambda a: check_causal_mask(a, T, S),
        check_attention_function,
    ]
    for checker in checkers:
        for answer in odd_answers():
            verdict = checker(answer)
            assert isinstance(verdict, Verdict) and not verdict.ok, (answer, verdict)
            blank_function = answer is blank and checker is check_attention_function
            assert verdict.answered == (answer is not None and not blank_function), (answer, verdict)
