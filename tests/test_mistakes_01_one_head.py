"""Typical mistakes in lesson 01 (One head) and the diagnosis each must get.

The exercises' inputs are rebuilt as the notebook builds them (``quiz_rng``, seed 7, once for Your
turn 1 and once for Your turn 4); section 1's ``q`` and ``k`` (seed 0) stand for the arrays of another
section a learner may pick up by mistake. Your turns 2 and 3 are functions: each row is a learner's
``my_causal_mask(T, S)`` or ``attention(q, k, v, allowed=None)`` with one mistake.
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


def mask(build: Any) -> Any:
    """Your turn 2 is a function ``my_causal_mask(T, S)``: ``build`` is a learner's version of it."""
    return lambda: checks.check_causal_mask_function(build, T, S)


def weights(answer: Any) -> Any:
    return lambda: checks.check_weights(answer, scores_c, allowed_c)


def forgets_return(T: int, S: int) -> Any:
    allowed = np.tril(np.ones((T, S), dtype=bool), k=S - T)  # built, but not returned
    del allowed


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


def inverted_where(q: Any, k: Any, v: Any, allowed: Any = None) -> Any:
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if allowed is not None:
        s = np.where(allowed, -np.inf, s)  # blocks exactly the allowed positions
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
    Mistake("01 YT1 scores", "k @ q^T quotes the batch shapes", scores(np.swapaxes(raw, -1, -2) / 2),
            "shape (B, S, T) = (2, 5, 3)"),
    Mistake("01 YT1 scores", "sequence 0's keys for every sequence", scores(qc @ kc[0].T / 2), "keys of sequence 0"),
    Mistake("01 YT1 scores", "sequence 1's keys for every sequence", scores(qc @ kc[1].T / 2), "keys of sequence 1"),
    Mistake("01 YT1 scores", "sequence 0's queries for every sequence", scores(qc[0] @ np.swapaxes(kc, -1, -2) / 2),
            "queries of sequence 0"),
    Mistake("01 YT1 scores", "the softmax applied too", scores(softmax(raw / 2)), "these are weights, not scores"),
    Mistake("01 YT1 scores", "the softmax applied, no scale", scores(softmax(raw)), "these are weights, not scores"),
    Mistake("01 YT1 scores", "kc reshaped to (B, d, S) instead of transposed", scores(qc @ kc.reshape(B, d, S) / 2),
            "does not transpose"),
    # Your turn 2: my_causal_mask(T, S), tried on T = 3, S = 5 and then other sizes
    Mistake("01 YT2 mask", "top-left triangle, no offset", mask(lambda T, S: np.tril(np.ones((T, S), dtype=bool))),
            "ignores the offset"),
    Mistake("01 YT2 mask", "True = blocked", mask(lambda T, S: ~np.tril(np.ones((T, S), dtype=bool), k=S - T)),
            "inverted convention"),
    Mistake("01 YT2 mask", "offset with the wrong sign",
            mask(lambda T, S: np.tril(np.ones((T, S), dtype=bool), k=T - S)), "wrong sign"),
    Mistake("01 YT2 mask", "the diagonal excluded",
            mask(lambda T, S: np.tril(np.ones((T, S), dtype=bool), k=S - T - 1)), "excluded the diagonal"),
    Mistake("01 YT2 mask", "0/1 numbers", mask(lambda T, S: np.tril(np.ones((T, S), dtype=int), k=S - T)),
            "build a boolean mask"),
    Mistake("01 YT2 mask", "an additive 0 / -inf mask",
            mask(lambda T, S: np.where(np.tril(np.ones((T, S), dtype=bool), k=S - T), 0.0, -np.inf)), "additive mask"),
    Mistake("01 YT2 mask", "shape (S, T)", mask(lambda T, S: np.tril(np.ones((T, S), dtype=bool), k=S - T).T),
            "rows are queries"),
    Mistake("01 YT2 mask", "everything allowed", mask(lambda T, S: np.ones((T, S), dtype=bool)), "nothing is masked"),
    Mistake("01 YT2 mask", "upper triangle with the offset, True = blocked",
            mask(lambda T, S: np.triu(np.ones((T, S), dtype=bool), k=1)), "two things"),
    Mistake("01 YT2 mask", "calls mha_numpy.causal_mask", mask(lambda T, S: mha_numpy.causal_mask(T, S)),
            "calls the library's causal_mask"),
    Mistake("01 YT2 mask", "is mha_numpy.causal_mask itself", mask(mha_numpy.causal_mask),
            "calls the library's causal_mask"),
    Mistake("01 YT2 mask", "sizes hard-coded (3, 5)", mask(lambda T, S: np.tril(np.ones((3, 5), dtype=bool), k=2)),
            "hard-coded"),
    Mistake("01 YT2 mask", "offset hard-coded k=2", mask(lambda T, S: np.tril(np.ones((T, S), dtype=bool), k=2)),
            "offset is hard-coded"),
    Mistake("01 YT2 mask", "the notebook's T, S instead of the arguments",
            mask(lambda n_queries, n_source: right_mask), "hard-coded"),
    Mistake("01 YT2 mask", "no return", mask(forgets_return), "`return` missing"),
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
    Mistake("01 YT3 attention function", "transpose(0, 2, 1) for every rank",
            function(head(transpose=lambda k: k.transpose(0, 2, 1))), "names every axis"),
    Mistake("01 YT3 attention function", "np.transpose(k, (0, 2, 1)) for every rank",
            function(head(transpose=lambda k: np.transpose(k, (0, 2, 1)))), "np.swapaxes(k, -1, -2)"),
    Mistake("01 YT3 attention function", "inverted: np.where(allowed, -inf, scores)", function(inverted_where),
            "inverted mask"),
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
    Mistake("01 YT4 weights", "all zeros", weights(np.zeros((T, S))), "row 0 of yours sums to 0, not 1"),
    Mistake("01 YT4 weights", "softmax over the queries, -1e9 fill",
            weights(softmax(np.where(allowed_c, scores_c, -1e9), 0)), "runs over the query axis"),
    Mistake("01 YT4 weights", "softmax over the queries, the empty row zeroed",
            weights(np.where(nothing, 0.0, softmax(blocked, 0))), "runs over the query axis"),
    Mistake("01 YT4 weights", "softmax over the queries, NaN turned into 0",
            weights(np.nan_to_num(softmax(blocked, 0))), "runs over the query axis"),
    Mistake("01 YT4 weights", "padding ignored, only the empty row zeroed",
            weights(np.where(nothing, 0.0, softmax(scores_c))), "padding mask is ignored"),
    Mistake("01 YT4 weights", "scores rescaled by 1/sqrt(S)",
            weights(np.where(nothing, 0.0, softmax(np.where(allowed_c, scores_c / math.sqrt(S), -np.inf)))),
            "rescaled the scores"),
    Mistake("01 YT4 weights", "scores rescaled by 1/sqrt(T), NaN turned into 0",
            weights(np.nan_to_num(softmax(np.where(allowed_c, scores_c / math.sqrt(T), -np.inf)))),
            "rescaled the scores"),
    Mistake("01 YT4 weights", "blocked scores -1 (weight left on them)",
            weights(np.where(nothing, 0.0, softmax(np.where(allowed_c, scores_c, -1.0)))),
            "some blocked positions get weight"),
    Mistake("01 YT1 scores", "a loop over the batch building nested lists", scores((raw / 2).tolist()),
            "but a Python list"),
    Mistake("01 YT1 scores", "each sequence's queries against the other sequence's keys",
            scores(qc @ np.swapaxes(kc[::-1], -1, -2) / math.sqrt(d)), "met the keys of sequence 1"),
]

RIGHT: list[RightAnswer] = [
    RightAnswer("01 YT1 scores", "float32", scores((raw / 2).astype(np.float32))),
    RightAnswer("01 YT1 scores", "einsum", scores(np.einsum("btd,bsd->bts", qc, kc) / d**0.5)),
    RightAnswer("01 YT1 scores", "transpose(0, 2, 1)", scores(qc @ kc.transpose(0, 2, 1) / math.sqrt(d))),
    RightAnswer("01 YT1 scores", "np.matmul and a loop stacked",
                scores(np.stack([qc[b] @ kc[b].T for b in range(B)]) / 2)),
    RightAnswer("01 YT2 mask", "comparing positions",
                mask(lambda T, S: np.arange(S)[None, :] <= (S - T + np.arange(T))[:, None])),
    RightAnswer("01 YT2 mask", "np.tri", mask(lambda T, S: np.tri(T, S, S - T, dtype=bool))),
    RightAnswer("01 YT2 mask", "np.tril with k = S - T",
                mask(lambda T, S: np.tril(np.ones((T, S), dtype=bool), k=S - T))),
    RightAnswer("01 YT2 mask", "the last T rows of an (S, S) triangle",
                mask(lambda T, S: np.tril(np.ones((S, S), dtype=bool))[S - T:])),
    RightAnswer("01 YT2 mask", "np.triu of the blocked part, inverted",
                mask(lambda T, S: ~np.triu(np.ones((T, S), dtype=bool), k=S - T + 1))),
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
    RightAnswer("01 YT4 weights", "-1e9 fill, the empty row zeroed",
                weights(np.where(nothing, 0.0, softmax(np.where(allowed_c, scores_c, -1e9))))),
]


@pytest.mark.parametrize("row", MISTAKES, ids=row_id)
def test_typical_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=row_id)
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
