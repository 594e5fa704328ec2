"""Typical mistakes in lesson 03 (Concatenate and project) and the diagnosis each must get.

The exercises' inputs are rebuilt as the notebook builds them: ``labels`` (section 1, as floats),
``quiz_heads`` (seed 3), ``wo`` (``init_weights(8, seed=1)``), ``w_wide`` (seed 4), ``x`` (the first draw
of seed 0), the weights of ``numpy_layer`` (``init_weights(8, seed=0)``) and ``folded_heads``
(``quiz_heads`` folded to ``(B*h, T, d_h)``). The rows include the cases issue 19 lists (the library
layer or a function that ignores its arguments accepted as the fixed layer, ``np.concatenate`` of the
array, the softmax over the query axis) and those of issue 27: the lesson's own ``merge`` handed in as
the answer, another ``W_o`` than the one given, only some of q, k and v split right, ``.T`` on a 4-D
array; those of the first blind trial: the interleaved split, a column block of ``W_o`` that raises, and
the library helpers that do an exercise's work (``split_heads`` and ``attention`` in Your turn 4,
``merge_heads`` in Your turn 5, ``mha_torch.linear`` in Your turn 3), which are refused; and those of
the second: head i's features read interleaved in Your turn 2, ``nn.Linear(8, 24)`` hard-coded and a
float32 layer in Your turn 3 (float64 is required), the split reshaped to ``(B, T, h, d_h)`` and never
transposed in Your turn 4.
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
from lessons_lib.plotting import head_merge

B, T, D, h = 2, 4, 8, 2
d_h = D // h
quiz_heads = np.random.default_rng(3).normal(size=(B, h, T, d_h))
wo = mha_numpy.init_weights(D, seed=1)["wo"]
w_wide = np.random.default_rng(4).uniform(-0.5, 0.5, size=(D, 3 * D))
x = np.random.default_rng(0).normal(size=(B, T, D))
numpy_layer = mha_numpy.MultiHead(D, h, seed=0)
layer_weights = (numpy_layer.wq, numpy_layer.wk, numpy_layer.wv, numpy_layer.wo)
labels = np.broadcast_to(
    100 * np.arange(h).reshape(1, h, 1, 1) + 10 * np.arange(T).reshape(1, 1, T, 1) + np.arange(d_h),
    (B, h, T, d_h),
).astype(float)
folded_heads = quiz_heads.reshape(B * h, T, d_h)


def merge(x: Any) -> Any:
    """The lesson's own merge (section 1), defined in the notebook after Your turn 1."""
    b, n, t, width = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, n * width)


def merge_check(fn: Any) -> Any:
    return lambda: checks.check_merge_function(fn, labels)


def contribution_check(fn: Any) -> Any:
    return lambda: checks.check_head_contribution(fn, quiz_heads, wo)


def sequence_first_check(fn: Any) -> Any:
    return lambda: checks.check_time_major_merge(fn, folded_heads, h)


def linear_check(fn: Any) -> Any:
    return lambda: checks.check_linear_from_numpy(fn, w_wide)


def fixed_check(fn: Any) -> Any:
    return lambda: checks.check_fixed_forward(fn, x, *layer_weights, h)


def merged(heads: Any) -> Any:
    b, n, t, width = heads.shape
    return heads.transpose(0, 2, 1, 3).reshape(b, t, n * width)


# ----- Your turn 4: a learner's fixed_forward, right or with one mistake ---------------------------
def forward(split: str = "right", scale: str = "sqrt(d_h)", axis: int = -1, merge: str = "right",
            heads_used: int | None = None, key_dot_t: bool = False) -> Any:
    """``split``: "right", "direct" (q, k and v), "interleaved" (q, k and v reshaped to (B, T, d_h, h)),
    or the letters of those split by a direct reshape."""
    direct = "qkv" if split == "direct" else "" if split in ("right", "interleaved") else split

    def fixed_forward(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
        n = heads if heads_used is None else heads_used
        b, t, width = x.shape
        size = width // n

        def cut(y: Any, name: str) -> Any:
            if split == "interleaved":  # head i gets features i, i + h, ...
                return y.reshape(b, t, size, n).transpose(0, 3, 1, 2)
            return y.reshape(b, n, t, size) if name in direct else y.reshape(b, t, n, size).transpose(0, 2, 1, 3)

        q, k, v = cut(x @ wq, "q"), cut(x @ wk, "k"), cut(x @ wv, "v")
        factor = {"sqrt(d_h)": np.sqrt(size), "none": 1.0, "d_h": size, "sqrt(D)": np.sqrt(width)}[scale]
        keys_t = k.T if key_dot_t else k.transpose(0, 1, 3, 2)
        out = mha_numpy.softmax(q @ keys_t / factor, axis=axis) @ v
        return (out.reshape(b, t, width) if merge == "direct" else merged(out)) @ wo

    return fixed_forward


def library_layer(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
    return mha_numpy.MultiHead.from_weights(wq, wk, wv, wo, heads=heads)(x)[0]


def notebook_output(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
    return numpy_layer(x)[0]  # the lesson's layer on whatever x comes in


def notebook_answer(*args: Any) -> Any:
    return numpy_layer(globals()["x"])[0]  # ignores every argument


# ----- Your turn 2: a learner's head_contribution ---------------------------------------------------
def contribution(kind: str = "right") -> Any:
    def head_contribution(heads_out: Any, w: Any, i: int) -> Any:
        n, width = heads_out.shape[1], heads_out.shape[-1]
        rows = w[i * width:(i + 1) * width]
        if kind == "columns":
            return heads_out[:, i] @ w[:, i * width:(i + 1) * width]
        if kind == "transposed":
            return heads_out[:, i] @ w.T[i * width:(i + 1) * width]
        if kind == "next head":
            j = (i + 1) % n
            return heads_out[:, j] @ w[j * width:(j + 1) * width]
        if kind == "first rows":
            return heads_out[:, i] @ w[:width]
        if kind == "every h-th row":
            return heads_out[:, i] @ w[i::n]
        if kind == "whole output":
            return merge(heads_out) @ w
        if kind == "equal share":
            return merge(heads_out) @ w / n
        if kind == "no W_o":
            return heads_out[:, i]
        if kind == "notebook wo":
            return heads_out[:, i] @ wo[i * width:(i + 1) * width]
        if kind == "d_h = 4":
            return heads_out[:, i] @ w[i * 4:(i + 1) * 4]
        if kind == "zeroed, direct reshape":
            kept = np.zeros_like(heads_out)
            kept[:, i] = heads_out[:, i]
            return kept.reshape(heads_out.shape[0], heads_out.shape[2], -1) @ w
        if kind == "averaged blocks":
            return heads_out[:, i] @ w.reshape(n, width, -1).mean(axis=0)
        if kind == "rows by h":
            return heads_out[:, i] @ w[i * n:(i + 1) * n]
        if kind == "zeroed, merged":
            kept = np.zeros_like(heads_out)
            kept[:, i] = heads_out[:, i]
            return merge(kept) @ w
        return heads_out[:, i] @ rows

    return head_contribution


def contribution_with(matrix: Any) -> Any:
    """A head_contribution that reads W_o from ``matrix`` (a closure), never from its argument."""
    def head_contribution(heads_out: Any, w: Any, i: int) -> Any:
        width = heads_out.shape[-1]
        return heads_out[:, i] @ matrix[i * width:(i + 1) * width]

    return head_contribution


def forward_with_wo(matrix: Any) -> Any:
    """A fixed_forward, right but for W_o: it projects with ``matrix`` (a closure), not its argument wo."""
    right = forward()

    def fixed_forward(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
        return right(x, wq, wk, wv, matrix, heads)

    return fixed_forward


# ----- Your turn 5: a learner's merge_sequence_first ----------------------------------------------
def sequence_first(kind: str = "right") -> Any:
    def merge_sequence_first(folded: Any, heads: int) -> Any:
        rows, t, width = folded.shape
        b = rows // heads
        if kind == "batch first":
            return merged(folded.reshape(b, heads, t, width))
        if kind == "head-major":
            return merged(folded.reshape(heads, b, t, width).swapaxes(0, 1)).swapaxes(0, 1)
        if kind == "direct":
            return folded.reshape(t, b, heads * width)
        if kind == "no reshape":
            return folded.swapaxes(0, 1)
        if kind == "reshape of batch first":
            return merged(folded.reshape(b, heads, t, width)).reshape(t, b, heads * width)
        if kind == "interleaved":
            return folded.reshape(b, heads, t, width).transpose(2, 0, 3, 1).reshape(t, b, heads * width)
        if kind == "hard-coded":
            return folded.swapaxes(0, 1).reshape(4, 2, 8)
        if kind == "notebook B":
            return folded.swapaxes(0, 1).reshape(t, B, -1)
        if kind == "heads reversed":
            return merged(folded.reshape(b, heads, t, width)[:, ::-1]).swapaxes(0, 1)
        if kind == "unfold, transpose, reshape":
            return folded.reshape(b, heads, t, width).transpose(2, 0, 1, 3).reshape(t, b, heads * width)
        if kind == "torch":
            return torch.from_numpy(folded).transpose(0, 1).reshape(t, b, heads * width)
        return folded.swapaxes(0, 1).reshape(t, b, heads * width)

    return merge_sequence_first


def weight_assigned_a_tensor(w_in_out: Any) -> Any:
    n_in, n_out = w_in_out.shape
    layer = nn.Linear(n_in, n_out, bias=False)
    layer.weight = torch.from_numpy(w_in_out.T.copy())  # a plain tensor: nn.Module refuses it
    return layer


def forward_scaled(where: str) -> Any:
    """A fixed_forward whose split is right but whose scale or projection is not."""
    def fixed_forward(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
        b, t, width = x.shape
        size = width // heads

        def cut(y: Any) -> Any:
            return y.reshape(b, t, heads, size).transpose(0, 2, 1, 3)

        q, k, v = (cut(x @ m) for m in (wq, wk, wv))
        if where == "k with wq":
            k = cut(x @ wq)
        scores = q @ (k if where == "q @ k" else np.swapaxes(k, -1, -2))
        if where == "wo.T":
            wo = wo.T
        if where == "after softmax":
            weights = mha_numpy.softmax(scores) / np.sqrt(size)
        elif where == "multiplied":
            weights = mha_numpy.softmax(scores * np.sqrt(size))
        else:
            weights = mha_numpy.softmax(scores / np.sqrt(size))
        merged_heads = mha_numpy.merge_heads(weights @ v)
        return merged_heads if where == "no W_o" else merged_heads @ wo

    return fixed_forward


def contributes(kind: str = "right") -> Any:
    return contribution_check(contribution(kind))


def merges_first(kind: str = "right") -> Any:
    return sequence_first_check(sequence_first(kind))


# ----- Your turn 3: a learner's linear_from_numpy --------------------------------------------------
def linear(transpose: bool = True, bias: bool = False, swap: bool = False, no_grad: bool = True,
           from_notebook: bool = False, return_weight: bool = False, reshape: bool = False) -> Any:
    def linear_from_numpy(w_in_out: Any) -> Any:
        w = w_wide if from_notebook else w_in_out
        n_in, n_out = w.shape
        layer = nn.Linear(n_out, n_in, bias=bias, dtype=torch.float64) if swap else nn.Linear(
            n_in, n_out, bias=bias, dtype=torch.float64)
        if reshape:
            values = torch.from_numpy(w.reshape(n_out, n_in).copy())
        else:
            values = torch.from_numpy(w.T.copy() if transpose else w.copy())
        if no_grad:
            with torch.no_grad():
                layer.weight.copy_(values)
        else:
            layer.weight.copy_(values)
        return layer.weight if return_weight else layer

    return linear_from_numpy


def loaded(w_in_out: Any, transpose: bool = True) -> Any:
    """The Predict's way of filling a layer, load_state_dict, with or without the transpose."""
    n_in, n_out = w_in_out.shape
    layer = nn.Linear(n_in, n_out, bias=False).double()
    layer.load_state_dict({"weight": torch.from_numpy(w_in_out.T if transpose else w_in_out)})
    return layer


def linear_untransposed_parameter(w_in_out: Any) -> Any:
    n_in, n_out = w_in_out.shape
    layer = nn.Linear(n_in, n_out, bias=False)
    layer.weight = nn.Parameter(torch.from_numpy(w_in_out.copy()))  # (in, out): no complaint when assigned
    return layer


def linear_by_data(w_in_out: Any, dtype: torch.dtype = torch.float64) -> Any:
    n_in, n_out = w_in_out.shape
    layer = nn.Linear(n_in, n_out, bias=False, dtype=dtype)
    layer.weight.data = torch.from_numpy(w_in_out.T.copy()).to(dtype)
    return layer


def linear_in_float32(w_in_out: Any) -> Any:
    n_in, n_out = w_in_out.shape
    layer = nn.Linear(n_in, n_out, bias=False)  # no dtype: float32
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(w_in_out.T))
    return layer


def linear_hard_coded(w_in_out: Any) -> Any:
    layer = nn.Linear(8, 24, bias=False, dtype=torch.float64)  # the sizes of w_wide, written in
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(w_in_out.T))
    return layer


def linear_hard_coded_replaced(w_in_out: Any) -> Any:
    layer = nn.Linear(8, 24, bias=False, dtype=torch.float64)  # w_wide's sizes, then a new weight
    layer.weight = nn.Parameter(torch.from_numpy(w_in_out.T.copy()))
    return layer


def interleaved_contribution(a: Any, w: Any, i: int) -> Any:
    n = a.shape[1]
    return merge(a)[..., i::n] @ w[i::n]  # every h-th feature and every h-th row (blind trial 2)


def across_heads(merge_by: str, scaled: bool = True) -> Any:
    """A fixed_forward whose split reshapes to (B, T, h, d_h) and never transposes."""
    def fixed_forward(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
        b, t, width = x.shape
        size = width // heads
        q, k, v = ((x @ m).reshape(b, t, heads, size) for m in (wq, wk, wv))
        out = mha_numpy.softmax(q @ k.transpose(0, 1, 3, 2) / (np.sqrt(size) if scaled else 1.0), axis=-1) @ v
        if merge_by == "merge_heads":  # the body's merge: raises, as T != h
            return mha_numpy.merge_heads(out) @ wo
        if merge_by == "transpose":
            return out.transpose(0, 2, 1, 3).reshape(b, t, width) @ wo
        return out.reshape(b, t, width) @ wo

    return fixed_forward


def linear_by_parameter(w_in_out: Any, dtype: torch.dtype = torch.float32) -> Any:
    n_in, n_out = w_in_out.shape
    layer = nn.Linear(n_in, n_out, bias=False, dtype=dtype)
    layer.weight = nn.Parameter(torch.from_numpy(w_in_out.T.copy()).to(dtype))
    return layer


def forward_with_library_steps(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
    q, k, v = (mha_numpy.split_heads(x @ m, heads) for m in (wq, wk, wv))
    return mha_numpy.merge_heads(mha_numpy.attention(q, k, v)[0]) @ wo


def forward_in_torch(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
    xt, qt, kt, vt, ot = (torch.from_numpy(m).float() for m in (x, wq, wk, wv, wo))
    q, k, v = (mha_torch.split_heads(xt @ m, heads) for m in (qt, kt, vt))
    return mha_torch.merge_heads(mha_torch.attention(q, k, v)[0]) @ ot


def forward_with_library_attention(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
    b, t, _ = x.shape
    q, k, v = ((x @ m).reshape(b, t, heads, -1).transpose(0, 2, 1, 3) for m in (wq, wk, wv))
    return mha_numpy.merge_heads(mha_numpy.attention(q, k, v)[0]) @ wo


MISTAKES: list[Mistake] = [
    # Your turn 1: the merge, written before the lesson shows its own
    Mistake("03 YT1 merge by hand", "one reshape straight to (B, T, D)",
            merge_check(lambda a: a.reshape(a.shape[0], a.shape[2], -1)), "direct reshape"),
    Mistake("03 YT1 merge by hand", "reshape to (B, T, h, d_h), then to (B, T, D): no transpose",
            merge_check(lambda a: a.reshape(a.shape[0], a.shape[2], a.shape[1], -1).reshape(
                a.shape[0], a.shape[2], -1)), "direct reshape"),
    Mistake("03 YT1 merge by hand", "np.concatenate(heads_out, -1) (issue 19)",
            merge_check(lambda a: np.concatenate(a, -1)), "walks its FIRST axis, the batch"),
    Mistake("03 YT1 merge by hand", "head blocks glued along axis 0",
            merge_check(lambda a: np.concatenate([a[:, i] for i in range(a.shape[1])], axis=0)), "along axis 0"),
    Mistake("03 YT1 merge by hand", "head blocks glued along the tokens (np.hstack)",
            merge_check(lambda a: np.hstack([a[:, i] for i in range(a.shape[1])])), "token axis"),
    Mistake("03 YT1 merge by hand", "heads averaged", merge_check(lambda a: a.mean(axis=1)), "you averaged the heads"),
    Mistake("03 YT1 merge by hand", "heads in reverse order",
            merge_check(lambda a: np.concatenate([a[:, i] for i in reversed(range(a.shape[1]))], axis=-1)),
            "reverse order"),
    Mistake("03 YT1 merge by hand", "head axis moved last: features interleaved",
            merge_check(lambda a: np.stack([a[:, i] for i in range(a.shape[1])], axis=-1).reshape(
                a.shape[0], a.shape[2], -1)), "interleaved"),
    Mistake("03 YT1 merge by hand", "the transpose without the reshape", merge_check(lambda a: a.swapaxes(1, 2)),
            "the reshape to (B, T, D) is missing"),
    Mistake("03 YT1 merge by hand", ".T on the 4-D array, then reshape",
            merge_check(lambda a: a.T.reshape(a.shape[0], a.shape[2], -1)), "reverses ALL four axes"),
    Mistake("03 YT1 merge by hand", "the last two axes swapped instead of axes 1 and 2",
            merge_check(lambda a: a.swapaxes(-1, -2).reshape(a.shape[0], a.shape[2], -1)), "swapped the last two axes"),
    Mistake("03 YT1 merge by hand", "the h blocks returned as a list",
            merge_check(lambda a: [a[:, i] for i in range(a.shape[1])]), "one after another"),
    Mistake("03 YT1 merge by hand", "reshape sizes read from the transposed axes' old places",
            merge_check(lambda a: a.swapaxes(1, 2).reshape(a.shape[0], a.shape[1], -1)), "from the wrong axes"),
    Mistake("03 YT1 merge by hand", "torch's transpose(1, 2) written in NumPy (raises)",
            merge_check(lambda a: a.transpose(1, 2).reshape(a.shape[0], a.shape[2], -1)), "ALL the axes"),
    Mistake("03 YT1 merge by hand", "batch and head axes swapped before the reshape",
            merge_check(lambda a: a.swapaxes(0, 1).reshape(a.shape[0], a.shape[2], -1)), "the batch axis and the head"),
    Mistake("03 YT1 merge by hand", "token axis moved first: (T, B, D)",
            merge_check(lambda a: a.transpose(2, 0, 1, 3).reshape(a.shape[2], a.shape[0], -1)), "token first"),
    Mistake("03 YT1 merge by hand", "the notebook's B, T, D hard-coded",
            merge_check(lambda a: a.transpose(0, 2, 1, 3).reshape(B, T, D)), "sizes hard-coded"),
    Mistake("03 YT1 merge by hand", "a call of mha_numpy.merge_heads",
            merge_check(lambda a: mha_numpy.merge_heads(a)), "calls the library's merge_heads"),
    Mistake("03 YT1 merge by hand", "a call of the private mha_numpy._merge_heads",
            merge_check(lambda a: mha_numpy._merge_heads(a)), "calls the library's _merge_heads"),
    Mistake("03 YT1 merge by hand", "the lesson's own merge (review S8)", merge_check(lambda a: merge(a)),
            "calls the lesson's merge"),
    Mistake("03 YT1 merge by hand", "the figure's merge_blocks, sequence by sequence",
            merge_check(lambda a: np.stack([head_merge.merge_blocks(s)[0] for s in a])), "merge_blocks"),
    # Your turn 2: one head's share of the output
    Mistake("03 YT2 head contribution", "a block of columns of W_o (raises; blind trial)", contributes("columns"),
            "columns, not rows"),
    Mistake("03 YT2 head contribution", "W_o cut with np.split(wo, h, axis=1), columns (raises)",
            contribution_check(lambda a, w, i: a[:, i] @ np.split(w, a.shape[1], axis=1)[i]), "columns, not rows"),
    Mistake("03 YT2 head contribution", "W_o cut with np.hsplit, columns (raises)",
            contribution_check(lambda a, w, i: a[:, i] @ np.hsplit(w, a.shape[1])[i]), "columns, not rows"),
    Mistake("03 YT2 head contribution", "a block of columns of W_o, written with ... (raises)",
            contribution_check(lambda a, w, i: a[:, i] @ w[..., i * a.shape[-1]:(i + 1) * a.shape[-1]]),
            "columns, not rows"),
    Mistake("03 YT2 head contribution", "rows of W_o transposed", contributes("transposed"),
            "W_o is transposed"),
    Mistake("03 YT2 head contribution", "the next head's rows (counted from 1)", contributes("next head"),
            "counted from 0"),
    Mistake("03 YT2 head contribution", "W_o's first d_h rows for every head", contributes("first rows"),
            "belong to head 0"),
    Mistake("03 YT2 head contribution", "every h-th row of W_o", contributes("every h-th row"),
            "every h-th row"),
    Mistake("03 YT2 head contribution", "the whole output", contributes("whole output"),
            "the whole output"),
    Mistake("03 YT2 head contribution", "an equal share of the output", contributes("equal share"),
            "equal share"),
    Mistake("03 YT2 head contribution", "W_o left out", contributes("no W_o"), "W_o is missing"),
    Mistake("03 YT2 head contribution", "the notebook's wo, not the argument (review P16)",
            contributes("notebook wo"), "your W_o is not the wo given"),
    Mistake("03 YT2 head contribution", "rows of numpy_layer.wo, not the wo given (P16)",
            contribution_check(contribution_with(numpy_layer.wo)), "ignores the W_o it is given"),
    Mistake("03 YT2 head contribution", "rows of another matrix of the notebook (P16)",
            contribution_check(contribution_with(np.random.default_rng(6).uniform(-1, 1, size=(D, D)))),
            "ignores the W_o it is given"),
    Mistake("03 YT2 head contribution", "d_h = 4 hard-coded", contributes("d_h = 4"),
            "sizes hard-coded"),
    Mistake("03 YT2 head contribution", "other heads zeroed, then a direct-reshape merge",
            contributes("zeroed, direct reshape"), "direct reshape"),
    Mistake("03 YT2 head contribution", "the mean of W_o's row blocks", contributes("averaged blocks"),
            "averaged W_o's h blocks"),
    Mistake("03 YT2 head contribution", "the right block divided by h",
            contribution_check(lambda a, w, i: contribution()(a, w, i) / a.shape[1]), "nothing is divided by h"),
    Mistake("03 YT2 head contribution", "the diagonal block of W_o",
            contribution_check(lambda a, w, i: a[:, i] @ w[i * d_h:(i + 1) * d_h, i * d_h:(i + 1) * d_h]),
            "diagonal block"),
    Mistake("03 YT2 head contribution", "head i's columns of the whole output",
            contribution_check(lambda a, w, i: (merge(a) @ w)[..., i * d_h:(i + 1) * d_h]), "sliced the OUTPUT"),
    Mistake("03 YT2 head contribution", "heads_out[i] (a sequence) for head i",
            contribution_check(lambda a, w, i: a[i] @ w[i * a.shape[-1]:(i + 1) * a.shape[-1]]), "picks sequence i"),
    Mistake("03 YT2 head contribution", "merged[..., i::h] @ wo[i::h], interleaved (blind trial 2)",
            contribution_check(interleaved_contribution), "interleaved. Head i owns one contiguous block"),
    Mistake("03 YT2 head contribution", "every h-th feature of the merged row, head i's rows of W_o",
            contribution_check(lambda a, w, i: merge(a)[..., i::a.shape[1]] @ w[i * d_h:(i + 1) * d_h]),
            "every h-th feature of the merged row"),
    Mistake("03 YT2 head contribution", "rows i*h to (i+1)*h (raises)", contributes("rows by h"),
            "meet d_h rows of wo"),
    # Your turn 3: nn.Linear from a NumPy matrix
    Mistake("03 YT3 nn.Linear from NumPy", "copied without .T (the copy fails)", linear_check(linear(transpose=False)),
            "(out_features, in_features)"),
    Mistake("03 YT3 nn.Linear from NumPy", "in and out swapped, copied without .T",
            linear_check(linear(transpose=False, swap=True)), "not transposed"),
    Mistake("03 YT3 nn.Linear from NumPy", "an untransposed nn.Parameter assigned",
            linear_check(linear_untransposed_parameter), "not transposed"),
    Mistake("03 YT3 nn.Linear from NumPy", "reshaped to (out, in) instead of transposed",
            linear_check(linear(reshape=True)), "reshaped, not transposed"),
    Mistake("03 YT3 nn.Linear from NumPy", "a plain tensor assigned to weight (raises)",
            linear_check(weight_assigned_a_tensor), "must stay an nn.Parameter"),
    Mistake("03 YT3 nn.Linear from NumPy", "the default bias left in", linear_check(linear(bias=True)),
            "has a bias"),
    Mistake("03 YT3 nn.Linear from NumPy", "the copy outside torch.no_grad()", linear_check(linear(no_grad=False)),
            "inside `with torch.no_grad():`"),
    Mistake("03 YT3 nn.Linear from NumPy", "built from the notebook's w_wide", linear_check(linear(from_notebook=True)),
            "not from the notebook's w_wide"),
    Mistake("03 YT3 nn.Linear from NumPy", "load_state_dict of the matrix as it is, as the Predict did (raises)",
            linear_check(lambda w: loaded(w, transpose=False)), "copied in the shape they have"),
    Mistake("03 YT3 nn.Linear from NumPy", "a call of mha_torch.linear (blind trial)",
            linear_check(lambda w: mha_torch.linear(torch.from_numpy(w.T.copy()))), "calls the library's linear"),
    Mistake("03 YT3 nn.Linear from NumPy", "nn.Linear(8, 24) hard-coded (blind trial 2)",
            linear_check(linear_hard_coded), "a layer that fits w_wide, nn.Linear(8, 24), holds a (24, 8) weight"),
    Mistake("03 YT3 nn.Linear from NumPy", "nn.Linear(8, 24) hard-coded, its weight replaced",
            linear_check(linear_hard_coded_replaced), "in_features, out_features = (8, 24)"),
    Mistake("03 YT3 nn.Linear from NumPy", "a float32 layer, no dtype (blind trial 2)",
            linear_check(linear_in_float32), "default dtype is float32: pass dtype=torch.float64"),
    Mistake("03 YT3 nn.Linear from NumPy", "a new float32 Parameter", linear_check(linear_by_parameter),
            "default dtype is float32"),
    Mistake("03 YT3 nn.Linear from NumPy", "weight.data assigned in float32",
            linear_check(lambda w: linear_by_data(w, torch.float32)), "default dtype is float32"),
    Mistake("03 YT3 nn.Linear from NumPy", "returned the weight, not the layer",
            linear_check(linear(return_weight=True)), "expected an nn.Linear layer"),
    # Your turn 4: the fixed layer
    Mistake("03 YT4 fixed layer", "nothing fixed", fixed_check(forward(split="direct", scale="none")),
            "both bugs remain"),
    Mistake("03 YT4 fixed layer", "only the split fixed", fixed_check(forward(scale="none")), "one bug remains"),
    Mistake("03 YT4 fixed layer", "only the scale fixed", fixed_check(forward(split="direct")), "one bug remains"),
    Mistake("03 YT4 fixed layer", "q and k split right, v still direct (review P16)", fixed_check(forward(split="v")),
            "v is still split by a direct reshape"),
    Mistake("03 YT4 fixed layer", "only q split right", fixed_check(forward(split="kv")),
            "k and v are still split by a direct reshape"),
    Mistake("03 YT4 fixed layer", "v still direct and the scale missing", fixed_check(forward(split="v", scale="none")),
            "unscaled"),
    Mistake("03 YT4 fixed layer", "weights divided by sqrt(d_h) after the softmax",
            fixed_check(forward_scaled("after softmax")), "to the weights, after the softmax"),
    Mistake("03 YT4 fixed layer", "scores multiplied by sqrt(d_h)", fixed_check(forward_scaled("multiplied")),
            "multiplied by the scale factor"),
    Mistake("03 YT4 fixed layer", "W_o left out", fixed_check(forward_scaled("no W_o")), "W_o is missing"),
    Mistake("03 YT4 fixed layer", "q @ k without swapping k's last two axes (runs since T = d_h)",
            fixed_check(forward_scaled("q @ k")), "not by k with its last two axes swapped"),
    Mistake("03 YT4 fixed layer", "keys projected with wq (copy and paste)", fixed_check(forward_scaled("k with wq")),
            "k is projected with wq"),
    Mistake("03 YT4 fixed layer", "W_o transposed", fixed_check(forward_scaled("wo.T")), "W_o is transposed"),
    Mistake("03 YT4 fixed layer", "scaled by d_h", fixed_check(forward(scale="d_h")), "divided by d_h"),
    Mistake("03 YT4 fixed layer", "scaled by sqrt(D)", fixed_check(forward(scale="sqrt(D)")), "sqrt(D)"),
    Mistake("03 YT4 fixed layer", "softmax over axis -2 (issue 19)", fixed_check(forward(axis=-2)),
            "axis -2, the query axis"),
    Mistake("03 YT4 fixed layer", "a direct-reshape merge", fixed_check(forward(merge="direct")),
            "merge is now a direct reshape"),
    Mistake("03 YT4 fixed layer", "k.T on the 4-D keys (raises)", fixed_check(forward(key_dot_t=True)),
            "reverses all four axes"),
    Mistake("03 YT4 fixed layer", "the library layer (issue 19)", fixed_check(library_layer),
            "calls the library's MultiHead"),
    Mistake("03 YT4 fixed layer", "split interleaved, (B, T, d_h, h) (blind trial)",
            fixed_check(forward(split="interleaved")), "the features are interleaved"),
    Mistake("03 YT4 fixed layer", "split interleaved and the scale missing",
            fixed_check(forward(split="interleaved", scale="none")), "the features are interleaved"),
    Mistake("03 YT4 fixed layer", "the library's split, attention and merge (blind trial)",
            fixed_check(forward_with_library_steps), "calls the library's split_heads"),
    Mistake("03 YT4 fixed layer", "a library call refused in the words of a repair (blind trial 2)",
            fixed_check(forward_with_library_steps), "steps this exercise asks you to repair"),
    Mistake("03 YT4 fixed layer", "(B, T, h, d_h) never transposed, the body's merge_heads (raises; blind trial 2)",
            fixed_check(across_heads("merge_heads")), "across the h heads of each token"),
    Mistake("03 YT4 fixed layer", "(B, T, h, d_h) never transposed, reshaped back to (B, T, D)",
            fixed_check(across_heads("reshape")), "across the h heads of each token"),
    Mistake("03 YT4 fixed layer", "(B, T, h, d_h) never transposed, merged by transpose and reshape",
            fixed_check(across_heads("transpose")), "across the h heads of each token"),
    Mistake("03 YT4 fixed layer", "(B, T, h, d_h) never transposed and unscaled",
            fixed_check(across_heads("reshape", scaled=False)), "unscaled"),
    Mistake("03 YT4 fixed layer", "the library's split and attention in torch",
            fixed_check(forward_in_torch), "calls the library's split_heads"),
    Mistake("03 YT4 fixed layer", "split by hand, then the library's attention",
            fixed_check(forward_with_library_attention), "calls the library's attention"),
    Mistake("03 YT4 fixed layer", "returns numpy_layer(x)[0] whatever it is given (issue 19)",
            fixed_check(notebook_answer), "same output whatever it is given"),
    Mistake("03 YT4 fixed layer", "the notebook's layer on the given x", fixed_check(notebook_output),
            "not with the weights it was given"),
    Mistake("03 YT4 fixed layer", "the notebook's h = 2 instead of heads", fixed_check(forward(heads_used=2)),
            "used 2 heads"),
    Mistake("03 YT4 fixed layer", "projects with the notebook's global wo, not its argument (P16)",
            fixed_check(forward_with_wo(wo)), "ignores the W_o it is given"),
    Mistake("03 YT4 fixed layer", "projects with numpy_layer.wo, not its argument (P16)",
            fixed_check(forward_with_wo(numpy_layer.wo)), "ignores the W_o it is given"),
    Mistake("03 YT4 fixed layer", "projects with another matrix of the notebook (P16)",
            fixed_check(forward_with_wo(np.random.default_rng(5).uniform(-0.3, 0.3, size=(D, D)))),
            "ignores the W_o it is given"),
    # Your turn 5: a merge for the folded, sequence-first layout
    Mistake("03 YT5 sequence-first merge", "batch-first result", merges_first("batch first"),
            "batch first"),
    Mistake("03 YT5 sequence-first merge", "the fold read head-major", merges_first("head-major"),
            "head-major"),
    Mistake("03 YT5 sequence-first merge", "one direct reshape", merges_first("direct"),
            "direct reshape"),
    Mistake("03 YT5 sequence-first merge", "token axis moved, no reshape",
            merges_first("no reshape"), "a reshape is missing"),
    Mistake("03 YT5 sequence-first merge", "batch-first result reshaped to (T, B, D)",
            merges_first("reshape of batch first"), "relabels the numbers"),
    Mistake("03 YT5 sequence-first merge", "features interleaved", merges_first("interleaved"),
            "interleaved"),
    Mistake("03 YT5 sequence-first merge", "heads in reverse order",
            merges_first("heads reversed"), "reverse order"),
    Mistake("03 YT5 sequence-first merge", "unfolded as (h, B), right only when B = h",
            sequence_first_check(lambda f, n: merged(f.reshape(n, -1, *f.shape[1:])).swapaxes(0, 1)),
            "unfolded the folded axis as (h, B)"),
    Mistake("03 YT5 sequence-first merge", "the sequences glued too: (T, B*D)",
            sequence_first_check(lambda f, n: f.swapaxes(0, 1).reshape(f.shape[1], -1)), "glued together too"),
    Mistake("03 YT5 sequence-first merge", "(T, D, B)",
            sequence_first_check(lambda f, n: f.swapaxes(0, 1).reshape(f.shape[1], len(f) // n, -1).swapaxes(1, 2)),
            "the last two axes are swapped"),
    Mistake("03 YT5 sequence-first merge", "sizes (4, 2, 8) hard-coded", merges_first("hard-coded"),
            "sizes hard-coded"),
    Mistake("03 YT5 sequence-first merge", "unfold, merge_heads, swap B and T (blind trial)",
            sequence_first_check(
                lambda f, n: mha_numpy.merge_heads(f.reshape(len(f) // n, n, *f.shape[1:])).swapaxes(0, 1)),
            "calls the library's merge_heads"),
    Mistake("03 YT5 sequence-first merge", "unfold, the lesson's merge, swap B and T",
            sequence_first_check(lambda f, n: merge(f.reshape(len(f) // n, n, *f.shape[1:])).swapaxes(0, 1)),
            "calls the lesson's merge"),
    Mistake("03 YT5 sequence-first merge", "the notebook's B", merges_first("notebook B"),
            "sizes hard-coded"),
]


def forward_repaired_body(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
    """The solution: one_function_forward's body with both bugs repaired."""
    b, t, width = x.shape
    size = width // heads
    q, k, v = ((x @ m).reshape(b, t, heads, size).transpose(0, 2, 1, 3) for m in (wq, wk, wv))
    weights = mha_numpy.softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(size), axis=-1)
    return mha_numpy.merge_heads(weights @ v) @ wo


def forward_by_hand_in_torch(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
    xt, qt, kt, vt, ot = (torch.from_numpy(m).float() for m in (x, wq, wk, wv, wo))
    b, t, width = xt.shape
    q, k, v = ((xt @ m).view(b, t, heads, -1).transpose(1, 2) for m in (qt, kt, vt))
    weights = torch.softmax(q @ k.transpose(-2, -1) / (width // heads) ** 0.5, dim=-1)
    return (weights @ v).transpose(1, 2).reshape(b, t, width) @ ot


def forward_by_einsum(x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: int) -> Any:
    b, t, width = x.shape
    q, k, v = (np.moveaxis((x @ m).reshape(b, t, heads, -1), 2, 1) for m in (wq, wk, wv))
    scores = np.einsum("bhtd,bhsd->bhts", q, k) / np.sqrt(width // heads)
    out = np.einsum("bhts,bhsd->bhtd", mha_numpy.softmax(scores), v)
    return np.moveaxis(out, 1, 2).reshape(b, t, width) @ wo


RIGHT: list[RightAnswer] = [
    RightAnswer("03 YT1 merge by hand", "np.concatenate of the head blocks",
                merge_check(lambda a: np.concatenate([a[:, i] for i in range(a.shape[1])], axis=-1))),
    RightAnswer("03 YT1 merge by hand", "np.dstack of the head blocks",
                merge_check(lambda a: np.dstack(list(a.swapaxes(0, 1))))),
    RightAnswer("03 YT1 merge by hand", "transpose and reshape", merge_check(lambda a: a.transpose(0, 2, 1, 3).reshape(
        a.shape[0], a.shape[2], -1))),
    RightAnswer("03 YT1 merge by hand", "np.moveaxis and reshape", merge_check(lambda a: np.moveaxis(a, 1, 2).reshape(
        a.shape[0], a.shape[2], -1))),
    RightAnswer("03 YT1 merge by hand", "torch transpose(1, 2) and reshape",
                merge_check(lambda a: torch.from_numpy(a).transpose(1, 2).reshape(a.shape[0], a.shape[2], -1))),
    RightAnswer("03 YT2 head contribution", "head i @ its rows of W_o", contributes()),
    RightAnswer("03 YT2 head contribution", "the other heads zeroed, merged, projected",
                contributes("zeroed, merged")),
    RightAnswer("03 YT2 head contribution", "the other heads zeroed, mha_numpy.merge_heads (allowed), projected",
                contribution_check(lambda a, w, i: mha_numpy.merge_heads(
                    np.where(np.arange(a.shape[1])[:, None, None] == i, a, 0.0)) @ w)),
    RightAnswer("03 YT2 head contribution", "W_o cut with np.split along the rows",
                contribution_check(lambda a, w, i: a[:, i] @ np.split(w, a.shape[1])[i])),
    RightAnswer("03 YT2 head contribution", "einsum over the row blocks",
                contribution_check(lambda a, w, i: np.einsum("btj,jo->bto", a[:, i], w.reshape(
                    a.shape[1], a.shape[-1], -1)[i]))),
    RightAnswer("03 YT2 head contribution", "in float32 torch",
                contribution_check(lambda a, w, i: torch.from_numpy(a[:, i]).float() @ torch.from_numpy(
                    w[i * a.shape[-1]:(i + 1) * a.shape[-1]]).float())),
    RightAnswer("03 YT3 nn.Linear from NumPy", "copy_ of the transpose in float64", linear_check(linear())),
    RightAnswer("03 YT3 nn.Linear from NumPy", "a new float64 Parameter",
                linear_check(lambda w: linear_by_parameter(w, torch.float64))),
    RightAnswer("03 YT3 nn.Linear from NumPy", "load_state_dict of the transpose", linear_check(loaded)),
    RightAnswer("03 YT3 nn.Linear from NumPy", "weight.data assigned, float64", linear_check(linear_by_data)),
    RightAnswer("03 YT3 nn.Linear from NumPy", "a float32 layer made float64 with .double()",
                linear_check(lambda w: linear_in_float32(w).double())),
    RightAnswer("03 YT4 fixed layer", "both bugs fixed", fixed_check(forward())),
    RightAnswer("03 YT4 fixed layer", "the body repaired, its softmax and merge_heads kept",
                fixed_check(forward_repaired_body)),
    RightAnswer("03 YT4 fixed layer", "the same steps by hand in float32 torch", fixed_check(forward_by_hand_in_torch)),
    RightAnswer("03 YT4 fixed layer", "einsum and moveaxis", fixed_check(forward_by_einsum)),
    RightAnswer("03 YT5 sequence-first merge", "swapaxes and reshape", merges_first()),
    RightAnswer("03 YT5 sequence-first merge", "unfold to (B, h, T, d_h), one transpose, reshape",
                merges_first("unfold, transpose, reshape")),
    RightAnswer("03 YT5 sequence-first merge", "torch transpose and reshape", merges_first("torch")),
]


@pytest.mark.parametrize("row", MISTAKES, ids=row_id)
def test_typical_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=row_id)
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
