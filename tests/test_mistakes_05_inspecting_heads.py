"""Typical mistakes in lesson 05 (Inspecting heads) and the diagnosis each must get.

The exercises: every head's part of the output, ``all_head_parts(head_out, wo)`` (Your turn 1), the
share of rows peaking on each relationship, ``peak_shares(weights, marker)`` (Your turn 2), both run
by their checkers on problems of their own; ``D = 1280, d_h = 64`` (Your turn 3); a cross-attention
layer with ``B = 3``, ``h = 6``, ``T = 20``, ``S = 30``, ``D = 384`` (Your turns 4 and 5). Issue 19's
rule that an int question refuses a float, naming the type, is a row of its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id
from numpy.typing import NDArray

from lessons_lib import inspect_heads, mha_numpy
from lessons_lib.checks import inspecting_heads as checks

B, H, T, S, D = 3, 6, 20, 30, 384
Array = NDArray[np.float64]


def head_count(answer: Any) -> Any:
    return lambda: checks.check_head_count(answer, D=1280, d_h=64)


def entries(answer: Any) -> Any:
    """As the lesson's check cell calls it: h is not shown, only D = 384 and d_h = 64."""
    return lambda: checks.check_weight_entries(answer, B=B, T=T, S=S, D=D, d_h=D // H)


def multiplies(answer: Any) -> Any:
    return lambda: checks.check_score_multiplies(answer, B=B, T=T, S=S, D=D, d_h=D // H)


def parts(function: Any) -> Any:
    return lambda: checks.check_head_parts(function)


def shares(function: Any) -> Any:
    return lambda: checks.check_argmax_shares(function)


# ----- Your turn 1: learner versions of all_head_parts -------------------------------------------------
def _parts(head_out: Array, wo: Array) -> Array:
    d_h = head_out.shape[3]
    return np.stack([head_out[:, i] @ wo[i * d_h : (i + 1) * d_h] for i in range(head_out.shape[1])], axis=1)


def _merged(head_out: Array) -> Array:
    B_, h, T_, d_h = head_out.shape
    return head_out.transpose(0, 2, 1, 3).reshape(B_, T_, h * d_h)


# ----- Your turn 2: learner versions of peak_shares --------------------------------------------------
def _peaks(
    weights: Array, marker: Any, axis: int = -1, swap: bool = False, all_queries: bool = False, length: int = 0
) -> Array:
    n, _, T_, _ = weights.shape
    T_ = length or T_
    best = weights.argmax(axis=axis)
    t = np.arange(T_)
    count = n * (T_ if all_queries else T_ - 1)
    back = (best[:, :, 1:] == t[1:] - 1).sum(axis=(0, 2)) / count
    ahead = (best[:, :, :-1] == t[:-1] + 1).sum(axis=(0, 2)) / count
    marked = (best == np.asarray(marker)[:, None, None]).mean(axis=(0, 2))
    return np.stack([ahead, back, marked] if swap else [back, ahead, marked])


def _with_rows(weights: Array, marker: Any, rows: dict[int, Array]) -> Array:
    answer = _peaks(weights, marker)
    for row, values in rows.items():
        answer[row] = values
    return answer


def _rolled(weights: Array, marker: Any) -> Array:
    """Neighbours found with np.roll, which wraps around: query 0's 'previous' is position T - 1."""
    peak, t = weights.argmax(axis=-1), np.arange(weights.shape[2])
    return _with_rows(weights, marker, {0: (peak == np.roll(t, 1)).mean(axis=(0, 2)),
                                        1: (peak == np.roll(t, -1)).mean(axis=(0, 2))})


def _thresholds(weights: Array, marker: Any) -> Array:
    """A weight above 0.5 on the relationship's position, instead of the row's argmax."""
    t = np.arange(1, weights.shape[2])
    on_marker = weights[np.arange(len(marker)), :, :, marker]
    return np.array([(weights[:, :, t, t - 1] > 0.5).mean(axis=(0, 2)),
                     (weights[:, :, t - 1, t] > 0.5).mean(axis=(0, 2)), (on_marker > 0.5).mean(axis=(0, 2))])


def _marker_queries_left_out(weights: Array, marker: Any) -> Array:
    peak = weights.argmax(axis=-1)
    kept = np.arange(weights.shape[2])[None, :] != np.asarray(marker)[:, None]  # (n, T): not the marked query
    return _with_rows(weights, marker, {2: np.array([(peak[:, i][kept] == np.broadcast_to(
        np.asarray(marker)[:, None], kept.shape)[kept]).mean() for i in range(weights.shape[1])])})


def _marker_two_axes(weights: Array, marker: Any) -> Array:
    peak = weights.argmax(axis=-1)
    return _with_rows(weights, marker, {2: (peak == np.asarray(marker)[:, None]).mean(axis=(0, 2))})


MISTAKES: list[Mistake] = [
    # ----- Your turn 1: every head's part of the output ----------------------------------------------
    Mistake(
        "05 YT1 head parts", "the parts summed", parts(lambda o, wo: _parts(o, wo).sum(axis=1)), "you summed the parts"
    ),
    Mistake(
        "05 YT1 head parts",
        "wo.T cut into rows",
        parts(lambda o, wo: o @ wo.T.reshape(o.shape[1], o.shape[3], -1)[None]),
        "those come from wo's columns",
    ),
    Mistake(
        "05 YT1 head parts",
        "columns of wo (a shape error)",
        parts(lambda o, wo: np.stack([o[:, i] @ wo[:, i * 2 : (i + 1) * 2] for i in range(o.shape[1])], 1)),
        "d_h of wo's rows",
    ),
    Mistake(
        "05 YT1 head parts",
        "every h-th row",
        parts(lambda o, wo: o @ wo.reshape(o.shape[3], o.shape[1], -1).transpose(1, 0, 2)[None]),
        "every h-th row",
    ),
    Mistake(
        "05 YT1 head parts", "divided by h (an average)", parts(lambda o, wo: _parts(o, wo) / len(o[0])), "divided by h"
    ),
    Mistake(
        "05 YT1 head parts",
        "heads on axis 2",
        parts(lambda o, wo: _parts(o, wo).transpose(0, 2, 1, 3)),
        "put the heads on axis 1",
    ),
    Mistake("05 YT1 head parts", "head 0 only", parts(lambda o, wo: _parts(o, wo)[:, 0]), "head 0's part only"),
    Mistake("05 YT1 head parts", "outputs before W_o", parts(lambda o, wo: o.copy()), "before W_o"),
    Mistake(
        "05 YT1 head parts",
        "h = 4, d_h = 4 hard-coded",
        parts(lambda o, wo: o @ wo.reshape(4, 4, -1)[None]),
        "a size is written into the function",
    ),
    Mistake(
        "05 YT1 head parts",
        "a loop over range(4)",
        parts(lambda o, wo: np.stack([o[:, i] @ wo[i * o.shape[3] : (i + 1) * o.shape[3]] for i in range(4)], 1)),
        "a size is written into the function",
    ),
    Mistake(
        "05 YT1 head parts",
        "a torch tensor returned",
        parts(lambda o, wo: torch.from_numpy(_parts(o, wo))),
        "must return a NumPy array, got torch tensor",
    ),
    Mistake(
        "05 YT1 head parts",
        "the library's head_parts",
        parts(lambda o, wo: inspect_heads.head_parts(o, wo)),
        "calls the library's head_parts",
    ),
    Mistake(
        "05 YT1 head parts",
        "merged with a reshape and no transpose, one head at a time",
        parts(lambda o, wo: np.stack([
            (o * (np.arange(o.shape[1]) == i)[:, None, None]).reshape(o.shape[0], o.shape[2], -1) @ wo
            for i in range(o.shape[1])], axis=1)),
        "merged (or moved to axis 2) by a reshape alone",
    ),
    Mistake(
        "05 YT1 head parts",
        "heads moved to axis 2 with a reshape",
        parts(lambda o, wo: np.einsum("bthd,hdo->bhto", o.reshape(o.shape[0], o.shape[2], o.shape[1], -1),
                                      wo.reshape(o.shape[1], o.shape[3], -1))),
        "swap axes 1 and 2 first",
    ),
    Mistake(
        "05 YT1 head parts",
        "one head's part replaced by another's",
        parts(lambda o, wo: _parts(o, wo)[:, [1, 1, *range(2, o.shape[1])]]),
        "the parts of heads [0] are not right",
        named=False,
    ),
    Mistake(
        "05 YT1 head parts",
        "the layer output divided evenly over the heads",
        parts(lambda o, wo: np.repeat(_parts(o, wo).sum(axis=1, keepdims=True) / o.shape[1], o.shape[1], axis=1)),
        "the parts sum to the output but are not per-head: every part is the whole output divided by h",
    ),
    # ----- Your turn 2: share of rows peaking on each relationship ------------------------------------
    Mistake(
        "05 YT2 peak shares",
        "offsets t-1 and t+1 swapped (right query sets)",
        shares(lambda w, m: _with_rows(w, m, {
            0: (w.argmax(axis=-1)[:, :, 1:] == np.arange(2, w.shape[2] + 1)).mean(axis=(0, 2)),
            1: (w.argmax(axis=-1)[:, :, :-1] == np.arange(-1, w.shape[2] - 2)).mean(axis=(0, 2))})),
        "previous and next are swapped",
    ),
    Mistake(
        "05 YT2 peak shares",
        "previous row compares with t + 1",
        shares(lambda w, m: _with_rows(w, m, {
            0: (w.argmax(axis=-1)[:, :, 1:] == np.arange(2, w.shape[2] + 1)).mean(axis=(0, 2))})),
        "row 0 (previous): previous and next are swapped",
    ),
    Mistake(
        "05 YT2 peak shares",
        "previous row holds the next shares",
        shares(lambda w, m: _with_rows(w, m, {0: _peaks(w, m)[1]})),
        "row 0 (previous): previous and next are swapped",
    ),
    Mistake(
        "05 YT2 peak shares",
        "mean weights, by hand",
        shares(
            lambda w, m: np.stack([
                w[:, :, np.arange(1, w.shape[2]), np.arange(w.shape[2] - 1)].mean(axis=(0, 2)),
                w[:, :, np.arange(w.shape[2] - 1), np.arange(1, w.shape[2])].mean(axis=(0, 2)),
                w[np.arange(w.shape[0]), :, :, m].mean(axis=(0, 2)),
            ])
        ),
        "those are mean weights",
    ),
    Mistake(
        "05 YT2 peak shares",
        "head_behaviour called",
        shares(lambda w, m: np.stack(list(inspect_heads.head_behaviour(w, m).values()))),
        "calls the library's head_behaviour, which measures mean weights",
    ),
    Mistake(
        "05 YT2 peak shares",
        "argmax_shares called",
        shares(lambda w, m: inspect_heads.argmax_shares(w, m)),
        "calls the library's argmax_shares",
    ),
    Mistake(
        "05 YT2 peak shares", "argmax over the queries", shares(lambda w, m: _peaks(w, m, axis=-2)), "over axis -2"
    ),
    Mistake("05 YT2 peak shares", "previous and next swapped", shares(lambda w, m: _peaks(w, m, swap=True)), "swapped"),
    Mistake(
        "05 YT2 peak shares",
        "divided by all T queries",
        shares(lambda w, m: _peaks(w, m, all_queries=True)),
        "query 0 has no previous",
    ),
    Mistake(
        "05 YT2 peak shares",
        "T = 8 hard-coded",
        shares(lambda w, m: _peaks(w, m, length=8)),
        "a size is written into the function",
    ),
    Mistake("05 YT2 peak shares", "(h, 3) instead of (3, h)", shares(lambda w, m: _peaks(w, m).T), "transposed"),
    Mistake(
        "05 YT2 peak shares",
        "counts instead of shares",
        shares(lambda w, m: _peaks(w, m) * np.array([[len(w) * (w.shape[2] - 1)]] * 2 + [[len(w) * w.shape[2]]])),
        "those are counts",
    ),
    Mistake(
        "05 YT2 peak shares",
        "heads averaged first",
        shares(lambda w, m: _peaks(w.mean(axis=1, keepdims=True), m)[:, 0]),
        "you averaged over the heads first",
    ),
    Mistake(
        "05 YT2 peak shares",
        "a dict, as head_behaviour returns",
        shares(lambda w, m: dict(zip(inspect_heads.RELATIONSHIPS, _peaks(w, m), strict=True))),
        "a dict, as head_behaviour returns",
    ),
    Mistake(
        "05 YT2 peak shares",
        "a torch tensor returned",
        shares(lambda w, m: torch.from_numpy(_peaks(w, m))),
        "must return a NumPy array, got torch tensor",
    ),
    Mistake(
        "05 YT2 peak shares",
        "the marker compared with the query positions",
        shares(lambda w, m: _with_rows(w, m, {2: (w.argmax(axis=-1) == np.arange(w.shape[2])).mean(axis=(0, 2))})),
        "row 2 (marker): compares each row's peak with its own query position",
    ),
    Mistake(
        "05 YT2 peak shares",
        "sequence 0's marker for every sequence",
        shares(lambda w, m: _with_rows(w, m, {2: (w.argmax(axis=-1) == m[0]).mean(axis=(0, 2))})),
        "uses sequence 0's marked position for every sequence",
    ),
    Mistake(
        "05 YT2 peak shares",
        "the marker moved to position 0",
        shares(lambda w, m: np.concatenate([_peaks(w, m)[:2], _peaks(w, np.zeros_like(m))[2:]])),
        "row 2 (marker): not right; the other rows are right",
        named=False,
    ),
    Mistake(
        "05 YT2 peak shares",
        "np.roll for the neighbours (wraps around)",
        shares(_rolled),
        "row 0 (previous): compares query 0 with position T - 1: np.roll wraps around",
    ),
    Mistake(
        "05 YT2 peak shares",
        "np.roll, next row only",
        shares(lambda w, m: _with_rows(w, m, {1: _rolled(w, m)[1]})),
        "row 1 (next): compares the last query with position 0",
    ),
    Mistake(
        "05 YT2 peak shares",
        "a weight above 0.5 instead of the argmax",
        shares(_thresholds),
        "rows 0 (previous), 1 (next), 2 (marker): counts rows whose weight there is above 0.5",
    ),
    Mistake(
        "05 YT2 peak shares",
        "a weight above 0.5 on the marker only",
        shares(lambda w, m: _with_rows(w, m, {2: _thresholds(w, m)[2]})),
        "row 2 (marker): counts rows whose weight there is above 0.5",
    ),
    Mistake(
        "05 YT2 peak shares",
        "queries at the marker itself left out",
        shares(_marker_queries_left_out),
        "leaves out the queries at the marked position itself",
    ),
    Mistake(
        "05 YT2 peak shares",
        "marker[:, None] (a broadcasting error)",
        shares(_marker_two_axes),
        "marker[:, None] has shape (n, 1)",
    ),
    Mistake(
        "05 YT2 peak shares",
        "n = 256 hard-coded in a share",
        shares(lambda w, m: _peaks(w, m) * len(w) / 256),
        "the counts are divided by the wrong number",
    ),
    # ----- Your turn 3: how many heads -------------------------------------------------------------
    Mistake(
        "05 YT3 head count", "1280 / 64, a float", head_count(1280 / 64), "is a float, and the question asks for an int"
    ),
    Mistake("05 YT3 head count", "64 / 1280 (upside down)", head_count(64 / 1280), "upside down"),
    Mistake("05 YT3 head count", "64 // 1280 (upside down)", head_count(64 // 1280), "upside down"),
    Mistake("05 YT3 head count", "D * d_h", head_count(1280 * 64), "you multiplied D by d_h"),
    Mistake("05 YT3 head count", "d_h itself", head_count(64), "is the head width d_h itself"),
    Mistake("05 YT3 head count", "a head count that does not divide D", head_count(12), "does not divide D"),
    Mistake("05 YT3 head count", "another divisor (16 heads)", head_count(16), "each head would be d_h = 80 wide"),
    # ----- Your turn 4: weight entries of a cross-attention layer ---------------------------------
    Mistake("05 YT4 weight entries", "heads left out", entries(B * T * S), "you left out the heads"),
    Mistake("05 YT4 weight entries", "batch left out", entries(H * T * S), "you left out the batch"),
    Mistake("05 YT4 weight entries", "T * T (self-attention)", entries(B * H * T * T), "you used T twice"),
    Mistake("05 YT4 weight entries", "S * S", entries(B * H * S * S), "you used S twice"),
    Mistake("05 YT4 weight entries", "d_h = 64 taken for h", entries(B * 64 * T * S), "as if there were 64 heads"),
    Mistake(
        "05 YT4 weight entries",
        "the score multiplications (entries x d_h = B*T*S*D)",
        entries(B * T * S * D),
        "you multiplied by a width",
    ),
    Mistake(
        "05 YT4 weight entries",
        "scores and value mixing multiplications",
        entries(2 * B * T * S * D),
        "multiplied by a width and by 2",
    ),
    Mistake("05 YT4 weight entries", "D taken for h", entries(B * D * T * S), "took the width D for the head count h"),
    Mistake("05 YT4 weight entries", "4*D*D, the layer's parameters", entries(4 * D * D), "the parameters of the"),
    Mistake("05 YT4 weight entries", "4*D*D + 4*D, parameters with biases", entries(4 * D * D + 4 * D),
            "the layer's parameters"),
    Mistake("05 YT4 weight entries", "D*D, one projection", entries(D * D), "one projection matrix"),
    Mistake("05 YT4 weight entries", "bytes in float32", entries(4 * B * H * T * S), "bytes in float32"),
    Mistake("05 YT4 weight entries", "T + S for both axes", entries(B * H * (T + S) ** 2), "T + S for both axes"),
    Mistake("05 YT4 weight entries", "T + S instead of T * S", entries(B * H * (T + S)), "you added T and S"),
    Mistake(
        "05 YT4 weight entries", "a float from /", entries(B * (D / 64) * T * S), "is a float, and the question asks"
    ),
    # ----- Your turn 5: score multiplications -------------------------------------------------------
    Mistake("05 YT5 score multiplies", "dot products D long", multiplies(B * H * T * S * D), "d_h long, not D long"),
    Mistake("05 YT5 score multiplies", "one head only", multiplies(B * T * S * 64), "that counts one head"),
    Mistake("05 YT5 score multiplies", "the number of scores", multiplies(B * H * T * S), "the number of scores"),
    Mistake(
        "05 YT5 score multiplies",
        "the value mixing counted too",
        multiplies(2 * B * H * T * S * 64),
        "or you added the value mixing",
    ),
    Mistake(
        "05 YT5 score multiplies",
        "multiply and add both counted (x 2)",
        multiplies(2 * B * H * T * S * 64),
        "you counted an addition for every multiplication",
    ),
    Mistake(
        "05 YT5 score multiplies",
        "d_h multiplications and d_h - 1 additions",
        multiplies(B * H * T * S * (2 * 64 - 1)),
        "that counts the additions too",
    ),
    Mistake(
        "05 YT5 score multiplies",
        "the 1/sqrt(d_h) scaling counted (x (d_h + 1))",
        multiplies(B * H * T * S * 65),
        "you counted the 1/sqrt(d_h) scaling too",
    ),
    Mistake(
        "05 YT5 score multiplies",
        "the scaling counted as B*h*T*S more",
        multiplies(B * H * T * S * 64 + B * H * T * S),
        "you counted the 1/sqrt(d_h) scaling too",
    ),
    Mistake(
        "05 YT5 score multiplies",
        "the scaling counted, dot products D long",
        multiplies(B * H * T * S * (D + 1)),
        "you counted the 1/sqrt(d_h) scaling too, and each head's dot products are d_h long",
    ),
    Mistake("05 YT5 score multiplies", "T twice", multiplies(B * H * T * T * 64), "you used T twice"),
    Mistake("05 YT5 score multiplies", "batch left out", multiplies(H * T * S * 64), "you left out the batch"),
    Mistake("05 YT5 score multiplies", "T + S scores per head", multiplies(B * H * (T + S) * 64), "you added T and S"),
    Mistake(
        "05 YT5 score multiplies",
        "bytes of float32 entries",
        multiplies(4 * B * H * T * S),
        "the weight tensor's size in bytes",
    ),
    Mistake("05 YT5 score multiplies", "D / 64, a float", multiplies(B * T * S * (D / 64) * 64), "is a float"),
]

RIGHT: list[RightAnswer] = [
    RightAnswer("05 YT1 head parts", "a loop over the heads", parts(_parts)),
    RightAnswer(
        "05 YT1 head parts",
        "one reshape and a broadcast product",
        parts(lambda o, wo: o @ wo.reshape(o.shape[1], o.shape[3], -1)[None]),
    ),
    RightAnswer(
        "05 YT1 head parts",
        "einsum",
        parts(lambda o, wo: np.einsum("bhtd,hdo->bhto", o, wo.reshape(o.shape[1], o.shape[3], -1))),
    ),
    RightAnswer(
        "05 YT1 head parts",
        "merge with the other heads zeroed, one head at a time",
        parts(lambda o, wo: np.stack([_merged(np.where(np.arange(o.shape[1])[:, None, None] == i, o, 0.0)) @ wo
                                      for i in range(o.shape[1])], axis=1)),
    ),
    RightAnswer(
        "05 YT1 head parts",
        "with mha_numpy.merge_heads",
        parts(lambda o, wo: np.stack([mha_numpy.merge_heads(o * (np.arange(o.shape[1]) == i)[:, None, None]) @ wo
                                      for i in range(o.shape[1])], axis=1)),
    ),
    RightAnswer("05 YT1 head parts", "as nested lists", parts(lambda o, wo: _parts(o, wo).tolist())),
    RightAnswer("05 YT2 peak shares", "the argmax, then comparisons", shares(_peaks)),
    RightAnswer("05 YT2 peak shares", "as nested lists", shares(lambda w, m: _peaks(w, m).tolist())),
    RightAnswer(
        "05 YT2 peak shares",
        "loops over sequences and queries",
        shares(lambda w, m: np.array([
            [np.mean([w[b, i, t].argmax() == t - 1 for b in range(w.shape[0]) for t in range(1, w.shape[2])])
             for i in range(w.shape[1])],
            [np.mean([w[b, i, t].argmax() == t + 1 for b in range(w.shape[0]) for t in range(w.shape[2] - 1)])
             for i in range(w.shape[1])],
            [np.mean([w[b, i, t].argmax() == m[b] for b in range(w.shape[0]) for t in range(w.shape[2])])
             for i in range(w.shape[1])],
        ])),
    ),
    RightAnswer("05 YT3 head count", "1280 // 64", head_count(1280 // 64)),
    RightAnswer("05 YT3 head count", "a NumPy integer", head_count(np.int64(20))),
    RightAnswer("05 YT4 weight entries", "B*h*T*S", entries(3 * 6 * 20 * 30)),
    RightAnswer("05 YT4 weight entries", "with h from //", entries(3 * (384 // 64) * 20 * 30)),
    RightAnswer("05 YT5 score multiplies", "B*h*T*S*d_h", multiplies(3 * 6 * 20 * 30 * 64)),
    RightAnswer("05 YT5 score multiplies", "B*T*S*D", multiplies(3 * 20 * 30 * 384)),
    RightAnswer("05 YT5 score multiplies", "a NumPy integer", multiplies(np.int64(691200))),
    RightAnswer("05 YT4 weight entries", "a NumPy integer", entries(np.prod([3, 6, 20, 30]))),
    RightAnswer("05 YT2 peak shares", "the marker as (n, 1, 1) by reshape", shares(
        lambda w, m: _with_rows(w, m, {2: (w.argmax(axis=-1) == np.reshape(m, (-1, 1, 1))).mean(axis=(0, 2))}))),
]


@pytest.mark.parametrize("row", MISTAKES, ids=[row_id(row) for row in MISTAKES])
def test_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=[row_id(row) for row in RIGHT])
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
