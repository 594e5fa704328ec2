"""Typical mistakes in lesson 01 (One head) and the diagnosis each must get.

The exercises' inputs are rebuilt as the notebook builds them (``quiz_rng``, seed 7, once for Your
turn 1 and once for Your turn 4); section 1's ``q`` and ``k`` (seed 0) stand for the arrays of another
section a learner may pick up by mistake. Your turn 3 is a function: each row is a learner's
``attention(q, k, v, allowed=None)`` with one mistake.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id

from lessons_lib import mha_numpy
from lessons_lib.checks import one_head as checks

# Your turn 1: a batch of B = 2 sequences, T = 3 queries, S = 5 keys of width d = 4
quiz_rng = np.random.default_rng(7)
B, T, S, d = 2, 3, 5, 4
qc = quiz_rng.normal(size=(B, T, d))
kc = quiz_rng.normal(size=(B, S, d))
raw = qc @ np.swapaxes(kc, -1, -2)
section_rng = np.random.default_rng(0)
q_section_1 = section_rng.normal(size=(3, 4))  # section 1's q (T = 3, d = 4) and k (S = 4)
k_section_1 = section_rng.normal(size=(4, 4))
# Your turn 4: scores of T = 3 queries over S = 5 positions; the last is padding, query 1 sees nothing
quiz_rng = np.random.default_rng(7)
scores_c = quiz_rng.normal(size=(T, S))
allowed_c = np.array([True, True, True, True, False]) & np.ones((T, 1), dtype=bool)
allowed_c[1] = False
nothing = ~allowed_c.any(axis=-1, keepdims=True)
blocked = np.where(allowed_c, scores_c, -np.inf)


def softmax(x: Any, axis: int = -1) -> Any:
    with np.errstate(all="ignore"):  # a learner's softmax: NaN for an all -inf line, no error
        exps = np.exp(x - x.max(axis=axis, keepdims=True))
        return exps / exps.sum(axis=axis, keepdims=True)


def scores(answer: Any) -> Any:
    return lambda: checks.check_scores(answer, qc, kc)


def mask(answer: Any) -> Any:
    return lambda: checks.check_causal_mask(answer, T, S)


def weights(answer: Any) -> Any:
    return lambda: checks.check_weights(answer, scores_c, allowed_c)


def function(answer: Any) -> Any:
    return lambda: checks.check_attention_function(answer)


def head(scale: Any = None, axis: int = -1, order: str = "out, w", fill: float = -np.inf, transpose: Any = None,
         masked: str = "before") -> Any:
    """A learner's attention(q, k, v, allowed=None): right by default, or with one mistake."""

    def attention(q: Any, k: Any, v: Any, allowed: Any = None) -> Any:
        factor = math.sqrt(q.shape[-1]) if scale is None else scale(q, k, v)
        turned = np.swapaxes(k, -1, -2) if transpose is None else transpose(k)
        s = q @ turned / factor
        if allowed is not None and masked == "before":
            s = np.where(allowed, s, fill)
        w = softmax(s, axis=axis)
        if allowed is not None and masked == "after":
            w = w * allowed
        return (w @ v, w) if order == "out, w" else (w, w @ v) if order == "w, out" else w @ v

    return attention


def calls_the_library(q: Any, k: Any, v: Any, allowed: Any = None) -> Any:
    return mha_numpy.attention(q, k, v, allowed)


def calls_the_private_twin(q: Any, k: Any, v: Any, allowed: Any = None) -> Any:
    return mha_numpy._attention(q, k, v, allowed)


def no_mask_parameter(q: Any, k: Any, v: Any) -> Any:
    return head()(q, k, v)


def mask_even_when_none(q: Any, k: Any, v: Any, allowed: Any = None) -> Any:
    s = np.where(allowed, q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]), -np.inf)
    w = softmax(s)
    return w @ v, w


def sum_without_keepdims(q: Any, k: Any, v: Any, allowed: Any = None) -> Any:
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1)
    return w @ v, w


def index_mask(q: Any, k: Any, v: Any, allowed: Any = None) -> Any:
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if allowed is not None:
        s[~allowed] = -np.inf  # right when the mask has the scores' shape, an IndexError otherwise
    w = softmax(s)
    return w @ v, w


def times_inf(q: Any, k: Any, v: Any, allowed: Any = None) -> Any:
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if allowed is not None:
        with np.errstate(invalid="ignore"):
            s = s + (~allowed) * -np.inf  # 0 * -inf is NaN for every allowed entry
    w = softmax(s)
    return w @ v, w


def returns_scores(q: Any, k: Any, v: Any, allowed: Any = None) -> Any:
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    return softmax(s if allowed is None else np.where(allowed, s, -np.inf)) @ v, s


def log_of_mask(q: Any, k: Any, v: Any, allowed: Any = None) -> Any:
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if allowed is not None:
        with np.errstate(divide="ignore"):
            s = s + np.log(allowed)  # log(1) = 0, log(0) = -inf: right
    w = softmax(s)
    return w @ v, w


with np.errstate(invalid="ignore"):  # the empty row: 0 / 0, turned into zeros
    renormalised = np.nan_to_num(softmax(scores_c) * allowed_c / (softmax(scores_c) * allowed_c).sum(-1, keepdims=True))
ones = np.ones((T, S), dtype=bool)
right_mask = np.tril(ones, k=S - T)
right_weights = np.where(nothing, 0.0, mha_numpy.softmax(np.where(nothing, 0.0, blocked), axis=-1))

MISTAKES: list[Mistake] = [
    # Your turn 1: scores of a batch
    Mistake("01 YT1 scores", "no scale", scores(raw), "forgot the scale"),
    Mistake("01 YT1 scores", "divided by d", scores(raw / d), "divided by d = 4"),
    Mistake("01 YT1 scores", "multiplied by sqrt(d)", scores(raw * 2), "multiplied by sqrt(d)"),
    Mistake("01 YT1 scores", "k @ q^T", scores(np.swapaxes(raw, -1, -2) / 2), "transposed"),
    Mistake("01 YT1 scores", "divided by sqrt(S)", scores(raw / math.sqrt(S)), "sqrt(S), a length"),
    Mistake("01 YT1 scores", "divided by sqrt(qc.shape[1]) = sqrt(T)", scores(raw / math.sqrt(T)), "q.shape[-1]"),
    Mistake("01 YT1 scores", "the first sequence only", scores(qc[0] @ kc[0].T / 2), "first sequence only"),
    Mistake("01 YT1 scores", "np.tensordot: every sequence against every other",
            scores(np.tensordot(qc, kc, axes=([-1], [-1])) / 2), "every sequence's keys"),
    Mistake("01 YT1 scores", "section 1's q and k instead of qc and kc",
            scores(q_section_1 @ k_section_1.T / 2), "expected shape (B, T, S)"),
    Mistake("01 YT1 scores", "scaled by 0.3 (a typo in the scale)", scores(raw * 0.3), "dot products times 0.3"),
    Mistake("01 YT1 scores", "right numbers, batch axis moved (T, B, S)", scores(np.swapaxes(raw, 0, 1) / 2),
            "axes in another order"),
    Mistake("01 YT1 scores", "divided by sqrt(B)", scores(raw / math.sqrt(B)), "times 0.7071"),
    # Your turn 2: causal mask with T < S
    Mistake("01 YT2 mask", "top-left triangle, no offset", mask(np.tril(ones)), "ignores the offset"),
    Mistake("01 YT2 mask", "True = blocked", mask(~right_mask), "inverted convention"),
    Mistake("01 YT2 mask", "offset with the wrong sign", mask(np.tril(ones, k=T - S)), "wrong sign"),
    Mistake("01 YT2 mask", "the diagonal excluded", mask(np.tril(ones, k=S - T - 1)), "excluded the diagonal"),
    Mistake("01 YT2 mask", "0/1 numbers", mask(right_mask.astype(int)), "build a boolean mask"),
    Mistake("01 YT2 mask", "an additive 0 / -inf mask", mask(np.where(right_mask, 0.0, -np.inf)), "additive mask"),
    Mistake("01 YT2 mask", "shape (S, T)", mask(right_mask.T), "rows are queries"),
    Mistake("01 YT2 mask", "everything allowed", mask(ones), "nothing is masked"),
    Mistake("01 YT2 mask", "upper triangle with the offset, True = blocked", mask(np.triu(ones, k=1)), "two things"),
    # Your turn 3: the batched, masked head
    Mistake("01 YT3 attention function", "calls mha_numpy.attention", function(calls_the_library),
            "calls the library's attention"),
    Mistake("01 YT3 attention function", "calls mha_numpy._attention (the private twin)",
            function(calls_the_private_twin), "calls the library's _attention"),
    Mistake("01 YT3 attention function", "no scale", function(head(scale=lambda q, k, v: 1.0)), "no scale"),
    Mistake("01 YT3 attention function", "sqrt(4), the notebook's d, hard-coded",
            function(head(scale=lambda q, k, v: 2.0)), "d hard-coded"),
    Mistake("01 YT3 attention function", "scaled by sqrt(S)",
            function(head(scale=lambda q, k, v: math.sqrt(k.shape[-2]))), "sqrt(S), a length"),
    Mistake("01 YT3 attention function", "scaled by sqrt(d_v)",
            function(head(scale=lambda q, k, v: math.sqrt(v.shape[-1]))), "sqrt(d_v)"),
    Mistake("01 YT3 attention function", "d read from q.shape[1]",
            function(head(scale=lambda q, k, v: math.sqrt(q.shape[1]))), "q.shape[1]"),
    Mistake("01 YT3 attention function", "softmax over the queries", function(head(axis=-2)), "query axis"),
    Mistake("01 YT3 attention function", "softmax sums without keepdims", function(sum_without_keepdims),
            "without keepdims=True"),
    Mistake("01 YT3 attention function", "k.T on a batch", function(head(transpose=lambda k: k.T)),
            "k.T reverses EVERY axis"),
    Mistake("01 YT3 attention function", "transpose(0, 2, 1): three axes only",
            function(head(transpose=lambda k: k.T if k.ndim == 2 else k.transpose(0, 2, 1))), "names every axis"),
    Mistake("01 YT3 attention function", "no allowed parameter", function(no_mask_parameter),
            "add the optional mask parameter"),
    Mistake("01 YT3 attention function", "mask applied when None", function(mask_even_when_none),
            "apply the mask only when one is given"),
    Mistake("01 YT3 attention function", "blocked scores -20", function(head(fill=-20.0)), "not exactly 0"),
    Mistake("01 YT3 attention function", "blocked scores 0", function(head(fill=0.0)), "blocked scores set to 0"),
    Mistake("01 YT3 attention function", "mask applied after the softmax", function(head(masked="after")),
            "after the softmax"),
    Mistake("01 YT3 attention function", "mask ignored", function(head(masked="never")), "mask is ignored"),
    Mistake("01 YT3 attention function", "scores[~allowed] = -inf (needs the full shape)", function(index_mask),
            "use np.where, which broadcasts"),
    Mistake("01 YT3 attention function", "mask added as (~allowed) * -inf (NaN)", function(times_inf),
            "0 * -inf = NaN"),
    Mistake("01 YT3 attention function", "returns (output, scores)", function(returns_scores),
            "your second item is the scores"),
    Mistake("01 YT3 attention function", "returns (weights, output)", function(head(order="w, out")),
            "returned (weights, output)"),
    Mistake("01 YT3 attention function", "returns the output only", function(head(order="out")), "right output"),
    # Your turn 4: a query with no allowed position gets zeros
    Mistake("01 YT4 weights", "-inf and a plain softmax: NaN row", weights(softmax(blocked)), "gets NaN"),
    Mistake("01 YT4 weights", "-1e9 instead of -inf: uniform row",
            weights(softmax(np.where(allowed_c, scores_c, -1e9))), "equal weights 1/S"),
    Mistake("01 YT4 weights", "-20 and the empty row zeroed",
            weights(np.where(nothing, 0.0, softmax(np.where(allowed_c, scores_c, -20.0)))), "not exactly 0"),
    Mistake("01 YT4 weights", "mask ignored", weights(softmax(scores_c)), "mask is ignored"),
    Mistake("01 YT4 weights", "weights zeroed after the softmax", weights(softmax(scores_c) * allowed_c),
            "after the softmax"),
    Mistake("01 YT4 weights", "blocked scores set to 0", weights(softmax(np.where(allowed_c, scores_c, 0.0))),
            "exp(0) = 1"),
    Mistake("01 YT4 weights", "mask inverted",
            weights(np.where(allowed_c.all(axis=-1, keepdims=True), 0.0,
                             softmax(np.where(allowed_c, -np.inf, scores_c)))), "inverted mask"),
    Mistake("01 YT4 weights", "the empty row left uniform (1/S)",
            weights(np.where(nothing, 1.0 / S, right_weights)), "equal weights 1/S"),
    Mistake("01 YT4 weights", "the empty row given something else",
            weights(np.where(nothing, 0.3, right_weights)), "must be all zeros"),
    Mistake("01 YT4 weights", "the empty query's row dropped", weights(right_weights[[0, 2]]), "dropped the row"),
    Mistake("01 YT4 weights", "all zeros", weights(np.zeros((T, S))), "sum to 0"),
    Mistake("01 YT4 weights", "softmax over the queries", weights(softmax(np.where(allowed_c, scores_c, -1e9), 0)),
            "right shape (T, S) = (3, 5), wrong numbers", named=False),
]

RIGHT: list[RightAnswer] = [
    RightAnswer("01 YT1 scores", "float32", scores((raw / 2).astype(np.float32))),
    RightAnswer("01 YT1 scores", "nested lists", scores((raw / 2).tolist())),
    RightAnswer("01 YT1 scores", "einsum", scores(np.einsum("btd,bsd->bts", qc, kc) / d**0.5)),
    RightAnswer("01 YT1 scores", "transpose(0, 2, 1)", scores(qc @ kc.transpose(0, 2, 1) / math.sqrt(d))),
    RightAnswer("01 YT1 scores", "np.matmul and a loop stacked",
                scores(np.stack([qc[b] @ kc[b].T for b in range(B)]) / 2)),
    RightAnswer("01 YT2 mask", "comparing positions", mask(np.arange(S)[None, :] <= (S - T + np.arange(T))[:, None])),
    RightAnswer("01 YT2 mask", "np.tri", mask(np.tri(T, S, S - T, dtype=bool))),
    RightAnswer("01 YT2 mask", "np.tril with k = S - T", mask(np.tril(ones, k=S - T))),
    RightAnswer("01 YT3 attention function", "the three steps", function(head())),
    RightAnswer("01 YT3 attention function", "d from k's shape",
                function(head(scale=lambda q, k, v: k.shape[-1] ** 0.5))),
    RightAnswer("01 YT3 attention function", "-1e9 fill (exp gives exactly 0)", function(head(fill=-1e9))),
    RightAnswer("01 YT3 attention function", "adds log(allowed)", function(log_of_mask)),
    RightAnswer("01 YT3 attention function", "np.moveaxis", function(head(transpose=lambda k: np.moveaxis(k, -1, -2)))),
    RightAnswer("01 YT4 weights", "zeros for the empty row", weights(right_weights)),
    RightAnswer("01 YT4 weights", "renormalised, NaN turned into 0", weights(renormalised)),
    RightAnswer("01 YT4 weights", "NaN of a plain softmax turned into 0", weights(np.nan_to_num(softmax(blocked)))),
    RightAnswer("01 YT4 weights", "float32", weights(right_weights.astype(np.float32))),
]


@pytest.mark.parametrize("row", MISTAKES, ids=row_id)
def test_typical_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=row_id)
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
