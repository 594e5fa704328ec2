"""Typical mistakes in lesson 03 (Concatenate and project) and the diagnosis each must get.

The Quick check's inputs are rebuilt as the notebook builds them: ``quiz_heads`` (seed 3), ``wo``
(``init_weights(8, seed=1)``), ``w_wide`` (seed 4), ``x`` (the first draw of seed 0) and the weights of
``numpy_layer`` (``init_weights(8, seed=0)``). The rows include the cases issue 19 lists: the library
layer or a function that ignores its arguments accepted as the fixed layer, ``np.concatenate`` of the
array, averaging before ``W_o``, the softmax over the query axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id
from torch import nn

from lessons_lib import mha_numpy, mha_torch
from lessons_lib.checks import concatenate_and_project as checks

B, T, D, h = 2, 4, 8, 2
d_h = D // h
quiz_heads = np.random.default_rng(3).normal(size=(B, h, T, d_h))
wo = mha_numpy.init_weights(D, seed=1)["wo"]
w_wide = np.random.default_rng(4).uniform(-0.5, 0.5, size=(D, 3 * D))
x = np.random.default_rng(0).normal(size=(B, T, D))
numpy_layer = mha_numpy.MultiHead(D, h, seed=0)
layer_weights = (numpy_layer.wq, numpy_layer.wk, numpy_layer.wv, numpy_layer.wo)


def merge_check(fn: Any) -> Any:
    return lambda: checks.check_merge_function(fn, quiz_heads)


def combine(answer: Any) -> Any:
    return lambda: checks.check_combine(answer, quiz_heads, wo)


def linear_check(fn: Any) -> Any:
    return lambda: checks.check_linear_from_numpy(fn, w_wide)


def fixed_check(fn: Any) -> Any:
    return lambda: checks.check_fixed_forward(fn, x, *layer_weights, h)


def merged(heads: Any) -> Any:
    b, n, t, width = heads.shape
    return heads.transpose(0, 2, 1, 3).reshape(b, t, n * width)


# ----- Your turn 4: a learner's fixed_forward, right or with one mistake ---------------------------
def forward(split: str = "right", scale: str = "sqrt(d_h)", axis: int = -1, merge: str = "right",
            heads_used: int | None = None) -> Any:
    def fixed_forward(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
        n = heads if heads_used is None else heads_used
        b, t, width = x.shape
        size = width // n

        def cut(y: Any) -> Any:
            return y.reshape(b, n, t, size) if split == "direct" else y.reshape(b, t, n, size).transpose(0, 2, 1, 3)

        q, k, v = cut(x @ wq), cut(x @ wk), cut(x @ wv)
        factor = {"sqrt(d_h)": np.sqrt(size), "none": 1.0, "d_h": size, "sqrt(D)": np.sqrt(width)}[scale]
        out = mha_numpy.softmax(q @ k.transpose(0, 1, 3, 2) / factor, axis=axis) @ v
        return (out.reshape(b, t, width) if merge == "direct" else merged(out)) @ wo

    return fixed_forward


def library_layer(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
    return mha_numpy.MultiHead.from_weights(wq, wk, wv, wo, heads=heads)(x)[0]


def notebook_output(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
    return numpy_layer(x)[0]  # the lesson's layer on whatever x comes in


def notebook_answer(*args: Any) -> Any:
    return numpy_layer(globals()["x"])[0]  # ignores every argument


# ----- Your turn 3: a learner's linear_from_numpy --------------------------------------------------
def linear(transpose: bool = True, bias: bool = False, swap: bool = False, no_grad: bool = True,
           from_notebook: bool = False, return_weight: bool = False) -> Any:
    def linear_from_numpy(w_in_out: Any) -> Any:
        w = w_wide if from_notebook else w_in_out
        n_in, n_out = w.shape
        layer = nn.Linear(n_out, n_in, bias=bias, dtype=torch.float64) if swap else nn.Linear(
            n_in, n_out, bias=bias, dtype=torch.float64)
        values = torch.from_numpy(w.T.copy() if transpose else w.copy())
        if no_grad:
            with torch.no_grad():
                layer.weight.copy_(values)
        else:
            layer.weight.copy_(values)
        return layer.weight if return_weight else layer

    return linear_from_numpy


MISTAKES: list[Mistake] = [
    # Your turn 1: merge by concatenation
    Mistake("03 YT1 merge by hand", "one reshape straight to (B, T, D)",
            merge_check(lambda a: a.reshape(a.shape[0], a.shape[2], -1)), "direct reshape"),
    Mistake("03 YT1 merge by hand", "np.concatenate(heads_out, -1) (issue 19)",
            merge_check(lambda a: np.concatenate(a, -1)), "walks its FIRST axis, the batch"),
    Mistake("03 YT1 merge by hand", "head blocks glued along axis 0",
            merge_check(lambda a: np.concatenate([a[:, i] for i in range(a.shape[1])], axis=0)), "along axis 0"),
    Mistake("03 YT1 merge by hand", "head blocks glued along the tokens",
            merge_check(lambda a: np.concatenate([a[:, i] for i in range(a.shape[1])], axis=1)), "token axis"),
    Mistake("03 YT1 merge by hand", "heads averaged", merge_check(lambda a: a.mean(axis=1)), "you averaged the heads"),
    Mistake("03 YT1 merge by hand", "heads in reverse order", merge_check(lambda a: merged(a[:, ::-1])),
            "reverse order"),
    Mistake("03 YT1 merge by hand", "the notebook's B, T, D hard-coded",
            merge_check(lambda a: a.transpose(0, 2, 1, 3).reshape(B, T, D)), "sizes hard-coded"),
    Mistake("03 YT1 merge by hand", "a call of mha_numpy.merge_heads",
            merge_check(lambda a: mha_numpy.merge_heads(a)), "calls the library's merge_heads"),
    # Your turn 2: the layer output
    Mistake("03 YT2 layer output", "heads averaged, no W_o", combine(quiz_heads.mean(axis=1)), "you averaged"),
    Mistake("03 YT2 layer output", "heads averaged, then W_o's first d_h rows (issue 19)",
            combine(quiz_heads.mean(axis=1) @ wo[:d_h]), "only through their average"),
    Mistake("03 YT2 layer output", "heads averaged, then the mean of W_o's row blocks",
            combine(quiz_heads.mean(axis=1) @ wo.reshape(h, d_h, D).mean(axis=0)), "only through their average"),
    Mistake("03 YT2 layer output", "heads summed, then W_o's last d_h rows",
            combine(quiz_heads.sum(axis=1) @ wo[-d_h:]), "only through their average (or sum)"),
    Mistake("03 YT2 layer output", "the merge without W_o", combine(merged(quiz_heads)), "W_o is missing"),
    Mistake("03 YT2 layer output", "W_o transposed", combine(merged(quiz_heads) @ wo.T), "W_o is transposed"),
    Mistake("03 YT2 layer output", "a direct-reshape merge", combine(quiz_heads.reshape(B, T, D) @ wo),
            "direct reshape"),
    Mistake("03 YT2 layer output", "np.concatenate(heads_out, -1) @ W_o (issue 19)",
            combine(np.concatenate(quiz_heads, -1) @ wo), "walks its FIRST axis"),
    Mistake("03 YT2 layer output", "averaged the heads' projections", combine(merged(quiz_heads) @ wo / h), "1/h"),
    # Your turn 3: nn.Linear from a NumPy matrix
    Mistake("03 YT3 nn.Linear from NumPy", "copied without .T (the copy fails)", linear_check(linear(transpose=False)),
            "(out_features, in_features)"),
    Mistake("03 YT3 nn.Linear from NumPy", "in and out swapped, copied without .T",
            linear_check(linear(transpose=False, swap=True)), "not transposed"),
    Mistake("03 YT3 nn.Linear from NumPy", "the default bias left in", linear_check(linear(bias=True)),
            "has a bias"),
    Mistake("03 YT3 nn.Linear from NumPy", "the copy outside torch.no_grad()", linear_check(linear(no_grad=False)),
            "inside `with torch.no_grad():`"),
    Mistake("03 YT3 nn.Linear from NumPy", "built from the notebook's w_wide", linear_check(linear(from_notebook=True)),
            "not from the notebook's w_wide"),
    Mistake("03 YT3 nn.Linear from NumPy", "returned the weight, not the layer",
            linear_check(linear(return_weight=True)), "expected an nn.Linear layer"),
    # Your turn 4: the fixed layer
    Mistake("03 YT4 fixed layer", "nothing fixed", fixed_check(forward(split="direct", scale="none")),
            "both bugs remain"),
    Mistake("03 YT4 fixed layer", "only the split fixed", fixed_check(forward(scale="none")), "one bug remains"),
    Mistake("03 YT4 fixed layer", "only the scale fixed", fixed_check(forward(split="direct")), "one bug remains"),
    Mistake("03 YT4 fixed layer", "scaled by d_h", fixed_check(forward(scale="d_h")), "divided by d_h"),
    Mistake("03 YT4 fixed layer", "scaled by sqrt(D)", fixed_check(forward(scale="sqrt(D)")), "sqrt(D)"),
    Mistake("03 YT4 fixed layer", "softmax over axis -2 (issue 19)", fixed_check(forward(axis=-2)),
            "axis -2, the query axis"),
    Mistake("03 YT4 fixed layer", "a direct-reshape merge", fixed_check(forward(merge="direct")),
            "merge is now a direct reshape"),
    Mistake("03 YT4 fixed layer", "the library layer (issue 19)", fixed_check(library_layer),
            "calls the library's MultiHead"),
    Mistake("03 YT4 fixed layer", "returns numpy_layer(x)[0] whatever it is given (issue 19)",
            fixed_check(notebook_answer), "same output whatever it is given"),
    Mistake("03 YT4 fixed layer", "the notebook's layer on the given x", fixed_check(notebook_output),
            "not with the weights it was given"),
    Mistake("03 YT4 fixed layer", "the notebook's h = 2 instead of heads", fixed_check(forward(heads_used=2)),
            "used 2 heads"),
]


def forward_with_library_steps(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
    q, k, v = (mha_numpy.split_heads(x @ m, heads) for m in (wq, wk, wv))
    return mha_numpy.merge_heads(mha_numpy.attention(q, k, v)[0]) @ wo


def forward_in_torch(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
    xt, qt, kt, vt, ot = (torch.from_numpy(m).float() for m in (x, wq, wk, wv, wo))
    q, k, v = (mha_torch.split_heads(xt @ m, heads) for m in (qt, kt, vt))
    return mha_torch.merge_heads(mha_torch.attention(q, k, v)[0]) @ ot


def linear_by_parameter(w_in_out: Any) -> Any:
    n_in, n_out = w_in_out.shape
    layer = nn.Linear(n_in, n_out, bias=False)
    layer.weight = nn.Parameter(torch.from_numpy(w_in_out.T.copy()).float())
    return layer


RIGHT: list[RightAnswer] = [
    RightAnswer("03 YT1 merge by hand", "np.concatenate of the head blocks",
                merge_check(lambda a: np.concatenate([a[:, i] for i in range(a.shape[1])], axis=-1))),
    RightAnswer("03 YT1 merge by hand", "np.dstack of the head blocks",
                merge_check(lambda a: np.dstack(list(a.swapaxes(0, 1))))),
    RightAnswer("03 YT1 merge by hand", "transpose and reshape", merge_check(merged)),
    RightAnswer("03 YT2 layer output", "merge_heads @ wo", combine(mha_numpy.merge_heads(quiz_heads) @ wo)),
    RightAnswer("03 YT2 layer output", "sum over heads of head_i @ its rows of W_o",
                combine(sum(quiz_heads[:, i] @ wo[i * d_h:(i + 1) * d_h] for i in range(h)))),
    RightAnswer("03 YT2 layer output", "einsum",
                combine(np.einsum("bhtj,hjo->bto", quiz_heads, wo.reshape(h, d_h, D)))),
    RightAnswer("03 YT3 nn.Linear from NumPy", "copy_ of the transpose in float64", linear_check(linear())),
    RightAnswer("03 YT3 nn.Linear from NumPy", "a new float32 Parameter", linear_check(linear_by_parameter)),
    RightAnswer("03 YT4 fixed layer", "both bugs fixed", fixed_check(forward())),
    RightAnswer("03 YT4 fixed layer", "the library's split, attention and merge",
                fixed_check(forward_with_library_steps)),
    RightAnswer("03 YT4 fixed layer", "the same steps in float32 torch", fixed_check(forward_in_torch)),
]


@pytest.mark.parametrize("row", MISTAKES, ids=row_id)
def test_typical_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=row_id)
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
