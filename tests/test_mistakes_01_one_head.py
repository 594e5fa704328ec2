"""Typical mistakes in lesson 01 (One head) and the diagnosis each must get.

The Quick check's inputs are rebuilt as the notebook builds them (``quiz_rng``, seed 7); section 1's
``q`` and ``k`` (seed 0) stand for the arrays of another section a learner may pick up by mistake.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id

from lessons_lib import mha_numpy
from lessons_lib.checks import one_head as checks

quiz_rng = np.random.default_rng(7)
T, S, d = 3, 5, 4
qc = quiz_rng.normal(size=(T, d))
kc = quiz_rng.normal(size=(S, d))
scores_c = quiz_rng.normal(size=(T, S))
keep = np.array([True, True, True, True, False])
section_rng = np.random.default_rng(0)
q_section_1 = section_rng.normal(size=(3, 4))  # section 1's q (T = 3, d = 4) and k (S = 4)
k_section_1 = section_rng.normal(size=(4, 4))
stream_rng = np.random.default_rng(1)
w_q, w_k, w_v = (stream_rng.normal(size=(4, 4)) / 2 for _ in range(3))
source, target = stream_rng.normal(size=(5, 4)), stream_rng.normal(size=(3, 4))

raw = qc @ kc.T
blocked = np.where(keep, scores_c, -np.inf)


def softmax(x: Any, axis: int = -1) -> Any:
    with np.errstate(all="ignore"):  # a learner's softmax: NaN for an all -inf line, no error
        exps = np.exp(x - x.max(axis=axis, keepdims=True))
        return exps / exps.sum(axis=axis, keepdims=True)


def scores(answer: Any) -> Any:
    return lambda: checks.check_scores(answer, qc, kc)


def mask(answer: Any) -> Any:
    return lambda: checks.check_causal_mask(answer, T, S)


def weights(answer: Any) -> Any:
    return lambda: checks.check_weights(answer, scores_c, keep)


def function(answer: Any) -> Any:
    return lambda: checks.check_attention_function(answer)


def cross(answer: Any) -> Any:
    return lambda: checks.check_cross_attention(answer, source, target, w_q, w_k, w_v)


def head(scale: Any = None, axis: int = -1, order: str = "out, w") -> Any:
    """A learner's attention(q, k, v): right by default, or with one mistake."""

    def attention(q: Any, k: Any, v: Any) -> Any:
        factor = math.sqrt(q.shape[-1]) if scale is None else scale(q, k)
        w = softmax(q @ k.T / factor, axis=axis)
        return (w @ v, w) if order == "out, w" else (w, w @ v) if order == "w, out" else w @ v

    return attention


def calls_the_library(q: Any, k: Any, v: Any) -> Any:
    return mha_numpy.attention(q, k, v)


def my_attention(q: Any, k: Any, v: Any) -> Any:  # stands for the lesson's section 1 function
    w = softmax(q @ k.T / math.sqrt(q.shape[-1]))
    return w @ v, w


def calls_my_attention(q: Any, k: Any, v: Any) -> Any:
    return my_attention(q, k, v)


ones = np.ones((T, S), dtype=bool)
right_mask = np.tril(ones, k=S - T)

MISTAKES: list[Mistake] = [
    # Your turn 1: scores
    Mistake("01 YT1 scores", "no scale", scores(raw), "forgot the scale"),
    Mistake("01 YT1 scores", "divided by d", scores(raw / d), "divided by d = 4"),
    Mistake("01 YT1 scores", "multiplied by sqrt(d)", scores(raw * 2), "multiplied by sqrt(d)"),
    Mistake("01 YT1 scores", "k @ q.T", scores(raw.T / 2), "transposed"),
    Mistake("01 YT1 scores", "divided by sqrt(S)", scores(raw / math.sqrt(S)), "sqrt(S), a length"),
    Mistake("01 YT1 scores", "section 1's q and k instead of qc and kc",
            scores(q_section_1 @ k_section_1.T / 2), "scores of other arrays"),
    # Your turn 2: causal mask with T < S
    Mistake("01 YT2 mask", "top-left triangle, no offset", mask(np.tril(ones)), "ignores the offset"),
    Mistake("01 YT2 mask", "True = blocked", mask(~right_mask), "inverted convention"),
    Mistake("01 YT2 mask", "offset with the wrong sign", mask(np.tril(ones, k=T - S)), "wrong sign"),
    Mistake("01 YT2 mask", "the diagonal excluded", mask(np.tril(ones, k=S - T - 1)), "excluded the diagonal"),
    Mistake("01 YT2 mask", "0/1 numbers", mask(right_mask.astype(int)), "build a boolean mask"),
    Mistake("01 YT2 mask", "an additive 0 / -inf mask", mask(np.where(right_mask, 0.0, -np.inf)), "additive mask"),
    Mistake("01 YT2 mask", "shape (S, T)", mask(right_mask.T), "rows are queries"),
    Mistake("01 YT2 mask", "everything allowed", mask(ones), "nothing is masked"),
    # Your turn 3: weights with padding
    Mistake("01 YT3 weights", "mask ignored", weights(softmax(scores_c)), "mask is ignored"),
    Mistake("01 YT3 weights", "blocked weights zeroed after the softmax", weights(softmax(scores_c) * keep),
            "after the softmax"),
    Mistake("01 YT3 weights", "blocked scores set to 0", weights(softmax(np.where(keep, scores_c, 0.0))),
            "exp(0) = 1"),
    Mistake("01 YT3 weights", "mask inverted", weights(softmax(np.where(keep, -np.inf, scores_c))), "inverted mask"),
    Mistake("01 YT3 weights", "softmax over the queries (NaN)", weights(softmax(blocked, axis=0)), "query axis"),
    Mistake("01 YT3 weights", "padded column dropped", weights(softmax(scores_c[:, keep])),
            "dropped the blocked positions"),
    Mistake("01 YT3 weights", "whole matrix normalised at once",
            weights(softmax(blocked.ravel()).reshape(T, S)), "whole matrix at once"),
    Mistake("01 YT3 weights", "exp without the division", weights(np.exp(blocked)), "did not divide"),
    # Your turn 4: one head as a function
    Mistake("01 YT4 attention function", "calls mha_numpy.attention", function(calls_the_library),
            "calls the library's attention"),
    Mistake("01 YT4 attention function", "calls the lesson's my_attention", function(calls_my_attention),
            "calls my_attention"),
    Mistake("01 YT4 attention function", "no scale", function(head(scale=lambda q, k: 1.0)), "no scale"),
    Mistake("01 YT4 attention function", "sqrt(4), the notebook's d, hard-coded",
            function(head(scale=lambda q, k: 2.0)), "d hard-coded"),
    Mistake("01 YT4 attention function", "scaled by sqrt(S)", function(head(scale=lambda q, k: math.sqrt(len(k)))),
            "sqrt(S), a length"),
    Mistake("01 YT4 attention function", "softmax over the queries", function(head(axis=0)), "query axis"),
    Mistake("01 YT4 attention function", "returns (weights, output)", function(head(order="w, out")),
            "returned (weights, output)"),
    Mistake("01 YT4 attention function", "returns the output only", function(head(order="out")), "right output"),
    # Your turn 5: cross-attention the other way round
    Mistake("01 YT5 cross-attention", "the same direction as section 4",
            cross(mha_numpy.attention(target @ w_q, source @ w_k, source @ w_v)[0]), "other direction"),
    Mistake("01 YT5 cross-attention", "self-attention of source",
            cross(mha_numpy.attention(source @ w_q, source @ w_k, source @ w_v)[0]), "self-attention of the asking"),
    Mistake("01 YT5 cross-attention", "no projections", cross(mha_numpy.attention(source, target, target)[0]),
            "skipped the projections"),
    Mistake("01 YT5 cross-attention", "the weights instead of the output",
            cross(mha_numpy.attention(source @ w_q, target @ w_k, target @ w_v)[1]), "attention weights"),
    Mistake("01 YT5 cross-attention", "values from the asking stream (shapes do not fit)",
            cross(np.zeros((5, 3))), "one row per query", named=False),
]

RIGHT: list[RightAnswer] = [
    RightAnswer("01 YT1 scores", "float32", scores((raw / 2).astype(np.float32))),
    RightAnswer("01 YT1 scores", "nested lists", scores((raw / 2).tolist())),
    RightAnswer("01 YT1 scores", "np.dot and d ** 0.5", scores(np.dot(qc, kc.T) / d**0.5)),
    RightAnswer("01 YT2 mask", "comparing positions", mask(np.arange(S)[None, :] <= (S - T + np.arange(T))[:, None])),
    RightAnswer("01 YT2 mask", "np.tri", mask(np.tri(T, S, S - T, dtype=bool))),
    RightAnswer("01 YT2 mask", "the library's mask", mask(mha_numpy.causal_mask(T, S))),
    RightAnswer("01 YT3 weights", "-inf then softmax", weights(softmax(blocked))),
    RightAnswer("01 YT3 weights", "-1e9 then softmax", weights(softmax(np.where(keep, scores_c, -1e9)))),
    RightAnswer("01 YT4 attention function", "the three steps", function(head())),
    RightAnswer("01 YT4 attention function", "d from k's shape", function(head(scale=lambda q, k: k.shape[-1] ** 0.5))),
    RightAnswer("01 YT5 cross-attention", "source reads target",
                cross(mha_numpy.attention(source @ w_q, target @ w_k, target @ w_v)[0])),
]


@pytest.mark.parametrize("row", MISTAKES, ids=row_id)
def test_typical_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=row_id)
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
