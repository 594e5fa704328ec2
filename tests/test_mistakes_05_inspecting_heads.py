"""Typical mistakes in lesson 05 (Inspecting heads) and the diagnosis each must get.

The Quick check's inputs are those of the notebook: ``D = 768, d_h = 64`` (Your turn 1), the trained
toy layer's ``wq`` with ``h = 4`` (Your turn 2), a cross-attention layer with ``B = 3``, ``h = 6``,
``T = 20``, ``S = 30``, ``D = 384`` (Your turns 3 and 4), and the checker's own weights for Your turn 5.
Issue 19's rule that an int question refuses a float, naming the type, is a row of its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id

from lessons_lib import inspect_heads
from lessons_lib.checks import inspecting_heads as checks

WQ = inspect_heads.load_toy_heads().layer.wq  # (16, 16), (in, out)
HEADS, D_H = 4, 4
B, H, T, S, D = 3, 6, 20, 30, 384


def head_count(answer: Any) -> Any:
    return lambda: checks.check_head_count(answer, D=768, d_h=64)


def columns(answer: Any) -> Any:
    return lambda: checks.check_head_columns(answer, WQ, head=2, heads=HEADS)


def entries(answer: Any) -> Any:
    return lambda: checks.check_weight_entries(answer, B=B, h=H, T=T, S=S)


def multiplies(answer: Any) -> Any:
    return lambda: checks.check_score_multiplies(answer, B=B, T=T, S=S, D=D, h=H)


def strongest(function: Any) -> Any:
    return lambda: checks.check_strongest_source(function)


MISTAKES: list[Mistake] = [
    # ----- Your turn 1: how many heads -------------------------------------------------------------
    Mistake(
        "05 YT1 head count", "768 / 64, a float", head_count(768 / 64), "is a float, and the question asks for an int"
    ),
    Mistake("05 YT1 head count", "D * d_h", head_count(768 * 64), "you multiplied D by d_h"),
    Mistake("05 YT1 head count", "d_h itself", head_count(64), "is the head width d_h itself"),
    Mistake("05 YT1 head count", "a head count that does not divide D", head_count(10), "does not divide D"),
    Mistake("05 YT1 head count", "another divisor (8 heads)", head_count(8), "each head would be d_h = 96 wide"),
    # ----- Your turn 2: head 2's columns of wq -----------------------------------------------------
    Mistake("05 YT2 head columns", "rows instead of columns", columns(WQ[2 * D_H : 3 * D_H, :]), "those are rows"),
    Mistake("05 YT2 head columns", "the block transposed", columns(WQ[:, 2 * D_H : 3 * D_H].T), "transposed"),
    Mistake("05 YT2 head columns", "every h-th column", columns(WQ[:, 2::HEADS]), "every h-th column"),
    Mistake(
        "05 YT2 head columns",
        "head 1's block (counted from 1)",
        columns(WQ[:, D_H : 2 * D_H]),
        "that is the block of head 1",
    ),
    Mistake("05 YT2 head columns", "head 3's block", columns(WQ[:, 3 * D_H : 4 * D_H]), "that is the block of head 3"),
    Mistake(
        "05 YT2 head columns", "columns 2..5 (off by d_h)", columns(WQ[:, 2:6]), "not head 2's numbers", named=False
    ),
    # ----- Your turn 3: weight entries of a cross-attention layer ---------------------------------
    Mistake("05 YT3 weight entries", "heads left out", entries(B * T * S), "you left out the heads"),
    Mistake("05 YT3 weight entries", "batch left out", entries(H * T * S), "you left out the batch"),
    Mistake("05 YT3 weight entries", "T * T (self-attention)", entries(B * H * T * T), "you used T twice"),
    Mistake("05 YT3 weight entries", "S * S", entries(B * H * S * S), "you used S twice"),
    Mistake("05 YT3 weight entries", "d_h = 64 taken for h", entries(B * 64 * T * S), "as if there were 64 heads"),
    Mistake("05 YT3 weight entries", "bytes in float32", entries(4 * B * H * T * S), "bytes in float32"),
    Mistake(
        "05 YT3 weight entries", "a float from /", entries(B * (D / 64) * T * S), "is a float, and the question asks"
    ),
    # ----- Your turn 4: score multiplications -------------------------------------------------------
    Mistake("05 YT4 score multiplies", "dot products D long", multiplies(B * H * T * S * D), "d_h long, not D long"),
    Mistake("05 YT4 score multiplies", "one head only", multiplies(B * T * S * 64), "that counts one head"),
    Mistake("05 YT4 score multiplies", "the number of scores", multiplies(B * H * T * S), "the number of scores"),
    Mistake(
        "05 YT4 score multiplies",
        "the value mixing counted too",
        multiplies(2 * B * H * T * S * 64),
        "also counts the value mixing",
    ),
    Mistake("05 YT4 score multiplies", "T twice", multiplies(B * H * T * T * 64), "you used T twice"),
    Mistake("05 YT4 score multiplies", "batch left out", multiplies(H * T * S * 64), "you left out the batch"),
    # ----- Your turn 5: strongest source -------------------------------------------------------------
    Mistake(
        "05 YT5 strongest source",
        "argmax over the query axis",
        strongest(lambda w, i: w[:, i].argmax(axis=-2)),
        "the maximum over axis -2",
    ),
    Mistake(
        "05 YT5 strongest source",
        "heads averaged first",
        strongest(lambda w, i: w.mean(axis=1).argmax(axis=-1)),
        "you averaged over the heads first",
    ),
    Mistake(
        "05 YT5 strongest source",
        "head number on the batch axis",
        strongest(lambda w, i: w[i].argmax(axis=-1)),
        "on axis 0, which is the batch",
    ),
    Mistake(
        "05 YT5 strongest source",
        "the weights, not their positions",
        strongest(lambda w, i: w[:, i].max(axis=-1)),
        "the largest weights themselves",
    ),
    Mistake(
        "05 YT5 strongest source",
        "argmax without an axis",
        strongest(lambda w, i: w[:, i].argmax()),
        "without an axis flattens",
    ),
    Mistake(
        "05 YT5 strongest source",
        "the head number hard-coded",
        strongest(lambda w, i: w[:, 1].argmax(axis=-1)),
        "take every size from weights itself",
    ),
    Mistake(
        "05 YT5 strongest source",
        "positions as floats",
        strongest(lambda w, i: w[:, i].argmax(axis=-1).astype(np.float64)),
        "as float64 numbers",
    ),
    Mistake(
        "05 YT5 strongest source",
        "a torch tensor returned for NumPy weights",
        strongest(lambda w, i: torch.from_numpy(w)[:, i].argmax(dim=-1)),
        "must return a NumPy array, got torch tensor",
    ),
]

RIGHT: list[RightAnswer] = [
    RightAnswer("05 YT1 head count", "768 // 64", head_count(768 // 64)),
    RightAnswer("05 YT1 head count", "a NumPy integer", head_count(np.int64(12))),
    RightAnswer("05 YT2 head columns", "the column block", columns(WQ[:, 2 * D_H : 3 * D_H])),
    RightAnswer("05 YT2 head columns", "as a torch tensor", columns(torch.from_numpy(WQ)[:, 8:12])),
    RightAnswer("05 YT3 weight entries", "B*h*T*S", entries(3 * 6 * 20 * 30)),
    RightAnswer("05 YT3 weight entries", "with h from //", entries(3 * (384 // 64) * 20 * 30)),
    RightAnswer("05 YT4 score multiplies", "B*h*T*S*d_h", multiplies(3 * 6 * 20 * 30 * 64)),
    RightAnswer("05 YT4 score multiplies", "B*T*S*D", multiplies(3 * 20 * 30 * 384)),
    RightAnswer(
        "05 YT5 strongest source", "argmax over the last axis", strongest(lambda w, i: w[:, i].argmax(axis=-1))
    ),
    RightAnswer(
        "05 YT5 strongest source", "as nested lists", strongest(lambda w, i: np.argmax(w, axis=-1)[:, i].tolist())
    ),
]


@pytest.mark.parametrize("row", MISTAKES, ids=[row_id(row) for row in MISTAKES])
def test_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=[row_id(row) for row in RIGHT])
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
