"""Quick check of the lesson "One head" (checkers in ``lessons_lib.checks.one_head``): the scores,
the weights, the causal mask and the output.

Each checker compares a learner's answer with the right one and, when it is wrong, with the
mistakes people make most often (no scale, the wrong axis, an inverted mask, ...). A recognised
mistake is named in the verdict; anything else gets the expected shape and formula.

Notation: ``T`` query length, ``S`` source length, ``d`` query/key width, ``d_v`` value width.
Answers may be NumPy arrays, nested lists or torch tensors.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.checks import (
    Verdict,
    array_answer,
    failed,
    first_match,
    mask_answer,
    passed,
    reference_array,
    reference_mask,
    same,
)
from lessons_lib.mha_numpy import attention, causal_mask, softmax

__all__ = ["check_causal_mask", "check_output", "check_scores", "check_weights"]

Floats = NDArray[np.float64]


def _unscaled(q: Floats, k: Floats) -> Floats:
    return q @ np.swapaxes(k, -1, -2)  # (..., T, d) @ (..., d, S) -> (..., T, S)


def check_scores(answer: Any, q: Any, k: Any) -> Verdict:
    """Question "scores": the scaled scores ``q @ k.T / sqrt(d)``, shape ``(T, S)``.

    Args:
        answer: the learner's scores, expected ``(..., T, S)``.
        q: queries ``(..., T, d)``.
        k: keys ``(..., S, d)``.

    Recognises: no scale, dividing by ``d``, multiplying by ``sqrt(d)``, ``k @ q.T`` (transposed),
    and dividing by the square root of a length (``T`` or ``S``) instead of the width ``d``.
    """
    question = "scores"
    qf = reference_array("q", q, "(..., T, d)", min_rank=2)
    kf = reference_array("k", k, "(..., S, d)", min_rank=2)
    a = array_answer(question, answer, "q @ k.T / np.sqrt(d)")
    if isinstance(a, Verdict):
        return a
    T, d = qf.shape[-2:]
    S = kf.shape[-2]
    raw = _unscaled(qf, kf)
    if same(a, raw / math.sqrt(d)):
        return passed(question, f"scores = q @ k.T / sqrt(d) with d={d}; shape (T, S) = {raw.shape}")
    mistake = first_match(a, [
        (raw,
         f"you forgot the scale: divide q @ k.T by sqrt(d) = sqrt({d}), so the scores keep a "
         f"variance near 1 whatever d is"),
        (lambda: raw / d,
         f"you scaled by 1/d instead of 1/sqrt(d): the variance of q.k grows like d, so its "
         f"standard deviation grows like sqrt(d); divide by np.sqrt({d})"),
        (lambda: raw * math.sqrt(d), "you multiplied by sqrt(d); divide by it instead"),
        (lambda: np.swapaxes(raw, -1, -2) / math.sqrt(d),
         f"you computed k @ q.T, which is (S, T); scores have one row per query: q @ k.T is "
         f"(T, S) = ({T}, {S})"),
        (lambda: np.swapaxes(raw, -1, -2), "you computed k @ q.T and forgot the scale; use q @ k.T / sqrt(d)"),
        (lambda: raw / math.sqrt(S),
         f"you divided by sqrt(S), the number of source positions; d is the feature width "
         f"q.shape[-1] = {d}"),
        (lambda: raw / math.sqrt(T),
         f"you divided by sqrt(T), the number of queries; d is the feature width q.shape[-1] = {d}"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    return failed(
        question,
        f"expected q @ k.T / sqrt(d) with shape {raw.shape} (T={T}, S={S}, d={d}); "
        f"your answer has shape {a.shape} and different values",
    )


def check_weights(answer: Any, scores: Any) -> Verdict:
    """Question "weights": softmax of ``scores (..., T, S)`` over the source axis (the last one).

    Recognises: softmax over the query axis, softmax over the whole matrix, dividing by the row
    sum without ``exp``, ``exp`` without dividing, and returning the scores unchanged.
    """
    question = "weights"
    sf = reference_array("scores", scores, "(..., T, S)", min_rank=2)
    a = array_answer(question, answer, "softmax(scores, axis=-1)")
    if isinstance(a, Verdict):
        return a
    if same(a, softmax(sf, axis=-1)):
        return passed(question, "softmax over the source axis (axis=-1): every query's row sums to 1")
    flat = sf.reshape(*sf.shape[:-2], -1)
    mistake = first_match(a, [
        (lambda: softmax(sf, axis=-2),
         "you took the softmax over the query axis (axis 0 / -2), so each column sums to 1; a "
         "query shares its attention among the source positions: use axis=-1"),
        (lambda: softmax(flat, axis=-1).reshape(sf.shape),
         "you normalised the whole matrix at once (all entries sum to 1); normalise each query's "
         "row separately: softmax(scores, axis=-1)"),
        (lambda: sf / sf.sum(axis=-1, keepdims=True),
         "you divided the scores by their row sum without exponentiating; negative scores then "
         "give negative 'weights'. Apply np.exp first (that is the softmax)"),
        (lambda: np.exp(sf), "you exponentiated but did not divide by the row sum; the rows must sum to 1"),
        (sf, "these are the scores themselves; apply the softmax over axis=-1"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    if a.shape == sf.shape and not same(a.sum(axis=-1), np.ones(sf.shape[:-1])):
        return failed(question, "your rows do not sum to 1; expected softmax(scores, axis=-1)")
    return failed(
        question,
        f"expected softmax(scores, axis=-1) with shape {sf.shape}; your answer has shape "
        f"{a.shape} and different values",
    )


def _numeric_mask_mistake(a: NDArray[Any], expected: NDArray[np.bool_]) -> str:
    """What is wrong with a mask of numbers (not booleans)."""
    mistake = first_match(a, [
        (np.where(expected, 0.0, -np.inf),
         "that is an additive mask (0 = attend, -inf = blocked); our attention takes a boolean "
         "mask, True = may attend: use allowed = (mask == 0)"),
        (expected,
         f"right pattern, but dtype {a.dtype}: build a boolean mask (dtype=bool), e.g. "
         f"np.tril(np.ones((T, S), dtype=bool))"),
        (~expected,
         "inverted convention with numbers: 1 marks the blocked positions; in our library True "
         "means 'may attend', so use a boolean lower triangle"),
    ])
    return mistake or f"expected a boolean mask, got dtype {a.dtype}"


def check_causal_mask(answer: Any, T: int, S: int | None = None) -> Verdict:
    """Question "mask": the boolean causal mask ``(T, S)``, ``True`` = may attend.

    Recognises: the inverted convention (``True`` = blocked), an additive mask of 0 / -inf, the
    right pattern as 0/1 numbers, the transposed (upper) triangle, a missing diagonal, and no mask.
    """
    question = "mask"
    expected = causal_mask(T, S)
    a = mask_answer(question, answer, "a boolean (T, S) array")
    if isinstance(a, Verdict):
        return a
    if a.shape != expected.shape:
        return failed(question, f"expected shape (T, S) = {expected.shape}, got {a.shape}")
    if a.dtype != np.bool_:
        return failed(question, _numeric_mask_mistake(a, expected))
    if same(a, expected):
        return passed(question, "query t may attend to source positions up to t, itself included")
    offset = expected.shape[1] - expected.shape[0]
    mistake = first_match(a, [
        (~expected,
         "inverted convention: your True marks the blocked (future) positions. In our library "
         "True = may attend; negate your mask (~mask)"),
        (np.tril(np.ones_like(a), k=offset - 1),
         "you excluded the diagonal: a query may attend to its own position (the first query "
         "would otherwise have nothing to attend to); use np.tril with k=0"),
        (expected.T,  # only a square mask can be transposed into the same shape
         "transposed: row t (a query) must allow columns 0..t, the lower triangle (np.tril); "
         "your upper triangle lets each query see the future"),
        (np.ones_like(a), "everything is allowed, so nothing is masked; causal means no future"),
    ])
    return failed(question, mistake or f"expected np.tril(np.ones({expected.shape}, dtype=bool), k={offset})")


def check_output(answer: Any, q: Any, k: Any, v: Any, allowed: Any = None) -> Verdict:
    """Question "output": attention output ``(T, d_v)`` of ``q, k, v`` with an optional mask.

    Args:
        answer: the learner's output, expected ``(..., T, d_v)``.
        q: queries ``(..., T, d)``; k: keys ``(..., S, d)``; v: values ``(..., S, d_v)``.
        allowed: optional boolean mask broadcastable to ``(..., T, S)``, ``True`` = may attend.

    Recognises: NaN (an empty row, usually an inverted mask), the weights returned instead of the
    output, no scale, scaling by ``d``, softmax over the query axis, the mask ignored, the mask
    inverted, and ``weights.T @ v``.
    """
    question = "output"
    qf = reference_array("q", q, "(..., T, d)", min_rank=2)
    kf = reference_array("k", k, "(..., S, d)", min_rank=2)
    vf = reference_array("v", v, "(..., S, d_v)", min_rank=2)
    mask = None if allowed is None else reference_mask("allowed", allowed, "(..., T, S)")
    a = array_answer(question, answer, "weights @ v")
    if isinstance(a, Verdict):
        return a
    expected, weights = attention(qf, kf, vf, mask)
    if same(a, expected):
        return passed(question, f"one weighted mixture of the values per query, shape {expected.shape}")
    if np.isnan(a).any():
        return failed(
            question,
            "your output contains NaN: some query row had no allowed position, so its softmax was "
            "0/0. Usually the mask is inverted (True must mean 'may attend')",
        )
    d = qf.shape[-1]
    raw = _unscaled(qf, kf)

    def mixed(scores: Floats, mask_used: Any, axis: int = -1) -> Floats:
        if mask_used is not None:
            scores = np.where(mask_used, scores, -np.inf)
        return softmax(scores, axis=axis) @ vf

    candidates: list[tuple[Any, str]] = [
        (weights, "these are the attention weights (T, S); the output mixes the values: weights @ v"),
        (lambda: mixed(raw, mask), f"you forgot the scale: the scores must be q @ k.T / sqrt(d) with d={d}"),
        (lambda: mixed(raw / d, mask), "you scaled the scores by 1/d instead of 1/sqrt(d)"),
        (lambda: mixed(raw / math.sqrt(d), mask, axis=-2),
         "your softmax ran over the query axis; it must run over the source axis (axis=-1)"),
        (lambda: np.swapaxes(weights, -1, -2) @ vf,
         "you used weights.T @ v; the weights are already (T, S), so use weights @ v"),
    ]
    if mask is not None:
        candidates += [
            (lambda: mixed(raw / math.sqrt(d), None),
             "the mask was not applied: set the scores of disallowed positions to -inf before the softmax"),
            (lambda: mixed(raw / math.sqrt(d), ~mask),
             "inverted mask: you let each query attend exactly where it must not. True = may "
             "attend, so keep the scores where allowed is True"),
        ]
    mistake = first_match(a, candidates)
    return failed(
        question,
        mistake
        or f"expected softmax(q @ k.T / sqrt(d), axis=-1) @ v with shape {expected.shape}; your "
        f"answer has shape {a.shape} and different values",
    )
