"""Multi-head attention in NumPy: one head (lesson 01), splitting into heads (02), the layer (03).

Notation (see SYLLABUS.md): ``B`` batch, ``T`` query length, ``S`` source length, ``D`` model
width, ``h`` heads, ``d_h = D / h`` head width.

Each public function checks its arguments in one line, then calls a private twin (``_attention``,
``_split_heads``, ``_merge_heads``) that holds the maths and trusts its caller; the layer checks its
inputs once and then uses the private twins. `lessons_lib.mha_torch` mirrors this module line for line.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import DTypeLike, NDArray

from lessons_lib.validation import (
    causal_sizes,
    check_array,
    check_finite,
    check_float_dtype,
    check_int,
    check_layer_inputs,
    check_overflow,
    check_qkv,
    check_same_dtype,
    check_seed,
    check_weight,
    head_width,  # public here too: d_h = D / h, ValueError unless h divides D (lesson 02)
    layer_mask,
)

Array = NDArray[np.floating[Any]]
Mask = NDArray[np.bool_]

__all__ = [
    "MultiHead",
    "attention",
    "causal_mask",
    "head_width",
    "init_weights",
    "merge_heads",
    "softmax",
    "split_heads",
]


def softmax(scores: Array, axis: int = -1) -> Array:
    """Softmax along ``axis``; subtracting the row maximum keeps ``exp`` from overflowing.

    ``scores`` may hold ``-inf`` (a blocked position: weight 0), but not NaN or ``+inf``, and no row
    may be all ``-inf`` (its softmax would be 0/0): both raise ``ValueError``.
    """
    check_array("scores", scores, "numpy", "(..., S)")
    axis = check_int("axis", axis, low=-scores.ndim, high=scores.ndim - 1)
    check_finite("scores", scores, allow_minus_inf=True)
    if scores.shape[axis] == 0 or np.isneginf(scores).all(axis=axis).any():
        raise ValueError(
            f"scores {scores.shape} has a row along axis {axis} that is empty or all -inf, so its softmax would "
            f"be 0/0 = NaN; every row needs at least one finite score"
        )
    return _softmax(scores, axis)


def _softmax(scores: Array, axis: int) -> Array:
    shifted = scores - scores.max(axis=axis, keepdims=True)
    exps: Array = np.exp(shifted)
    weights: Array = exps / exps.sum(axis=axis, keepdims=True)
    return weights


def causal_mask(T: int, S: int | None = None) -> Mask:
    """Boolean ``(T, S)`` mask, ``True`` = may attend.

    The ``T`` queries are the *last* ``T`` of the ``S`` source positions (``S`` defaults to ``T``),
    so query ``t`` may see source positions ``0 .. S - T + t`` (bottom-right alignment). With
    ``S > T`` this is the mask for queries that arrive after ``S - T`` cached tokens.
    """
    T, S = causal_sizes(T, S)
    return np.tril(np.ones((T, S), dtype=bool), k=S - T)


def attention(q: Array, k: Array, v: Array, allowed: Mask | None = None) -> tuple[Array, Array]:
    """Scaled dot-product attention.

    Args:
        q: queries ``(..., T, d)``.
        k: keys ``(..., S, d)``.
        v: values ``(..., S, d_v)``.
        allowed: optional boolean mask broadcastable to ``(..., T, S)``; ``True`` = may attend.

    Returns:
        ``(output (..., T, d_v), weights (..., T, S))``; each row of ``weights`` sums to 1.

    Raises:
        ValueError: if a query row has no allowed position. A softmax over nothing is undefined
            (it would be 0/0 = NaN), so we refuse instead of returning NaN. Also if the inputs are
            finite but so large that the scores overflow (refused, not computed).
    """
    check_qkv(q, k, v, allowed, "numpy")
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below, in words
        output, weights = _attention(q, k, v, allowed)
    check_overflow("attention", output, {"q": q, "k": k, "v": v})
    return output, weights


def _attention(q: Array, k: Array, v: Array, allowed: Mask | None) -> tuple[Array, Array]:
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (..., T, d) @ (..., d, S) -> (..., T, S)
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)  # a blocked position gets weight exp(-inf) = 0
    weights = _softmax(scores, axis=-1)  # (..., T, S)
    return weights @ v, weights  # (..., T, S) @ (..., S, d_v) -> (..., T, d_v)


def split_heads(x: Array, heads: int) -> Array:
    """``(B, T, D) -> (B, h, T, d_h)``: reshape the last axis into heads, then move heads forward."""
    check_array("x", x, "numpy", "(B, T, D)", floating=False)  # any dtype: a split only moves numbers
    head_width(x.shape[-1], heads)
    return _split_heads(x, int(heads))


def _split_heads(x: Array, heads: int) -> Array:
    B, T, D = x.shape
    x = x.reshape(B, T, heads, D // heads)  # (B, T, D) -> (B, T, h, d_h)
    return x.transpose(0, 2, 1, 3)  # (B, T, h, d_h) -> (B, h, T, d_h)


def merge_heads(x: Array) -> Array:
    """``(B, h, T, d_h) -> (B, T, D)``: the inverse of `split_heads` (concatenate the heads)."""
    check_array("x", x, "numpy", "(B, h, T, d_h)", floating=False)
    return _merge_heads(x)


def _merge_heads(x: Array) -> Array:
    B, h, T, d_h = x.shape
    x = x.transpose(0, 2, 1, 3)  # (B, h, T, d_h) -> (B, T, h, d_h)
    return x.reshape(B, T, h * d_h)  # (B, T, h, d_h) -> (B, T, D)


def init_weights(width: int, seed: int = 0) -> dict[str, NDArray[np.float64]]:
    """Four ``(in, out) = (D, D)`` float64 matrices ``wq, wk, wv, wo`` from one NumPy stream.

    Entries are uniform in ``[-1/sqrt(D), 1/sqrt(D)]`` (the range ``nn.Linear`` uses), drawn in
    the order wq, wk, wv, wo. `mha_torch.MultiHead` copies these same numbers, transposed.
    """
    width, seed = check_int("width", width, symbol="D"), check_seed("seed", seed)
    rng = np.random.default_rng(seed)
    bound = 1.0 / math.sqrt(width)
    return {name: rng.uniform(-bound, bound, size=(width, width)) for name in ("wq", "wk", "wv", "wo")}


class MultiHead:
    """Multi-head attention, forward only. Weights are ``(in, out)`` arrays: ``y = x @ w``.

    Attributes ``wq, wk, wv, wo``: ``(D, D)`` each; head ``i`` owns columns
    ``i*d_h : (i+1)*d_h`` of ``wq``, ``wk`` and ``wv`` (and rows ``i*d_h : (i+1)*d_h`` of ``wo``).
    ``MultiHead(D, h, seed)`` draws them from `init_weights`; `MultiHead.from_weights` takes given ones.
    """

    def __init__(self, width: int, heads: int, seed: int = 0, dtype: DTypeLike = np.float64) -> None:
        head_width(width, heads)
        dtype = check_float_dtype(dtype, "numpy")
        w = {name: value.astype(dtype) for name, value in init_weights(width, seed).items()}
        self._set_weights(w["wq"], w["wk"], w["wv"], w["wo"], heads=int(heads))

    @classmethod
    def from_weights(cls, wq: Array, wk: Array, wv: Array, wo: Array, heads: int) -> MultiHead:
        """A layer holding the given ``(in, out) = (D, D)`` arrays (kept, not copied), cut into ``heads``.

        They must share one floating dtype, which becomes the layer's, and hold finite numbers. A
        PyTorch ``nn.Linear`` weight is ``(out, in)``: pass ``linear.weight.detach().numpy().T``.
        """
        check_array("wq", wq, "numpy", "(D, D)")
        D = int(wq.shape[0])
        for name, w in (("wq", wq), ("wk", wk), ("wv", wv), ("wo", wo)):
            check_weight(name, w, (D, D), "numpy", "(D, D)")
        check_same_dtype({"wq": wq, "wk": wk, "wv": wv, "wo": wo})
        head_width(D, heads)
        layer = cls.__new__(cls)
        layer._set_weights(wq, wk, wv, wo, heads=int(heads))
        return layer

    def _set_weights(self, wq: Array, wk: Array, wv: Array, wo: Array, heads: int) -> None:
        self.wq, self.wk, self.wv, self.wo = wq, wk, wv, wo
        self.heads = heads

    @property
    def width(self) -> int:
        """``D``, read from the weights."""
        return int(self.wq.shape[0])

    @property
    def head_width(self) -> int:
        """``d_h = D / h``."""
        return self.width // self.heads

    @property
    def dtype(self) -> np.dtype[Any]:
        """The weights' dtype; inputs must have it too."""
        return self.wq.dtype

    def __call__(
        self, query: Array, context: Array | None = None, allowed: Mask | None = None
    ) -> tuple[Array, Array]:
        """Attend from ``query (B, T, D)`` to ``context (B, S, D)`` (``None``: self-attention).

        ``allowed`` (``True`` = may attend) has shape ``(T, S)``, ``(B, T, S)`` or a shape
        broadcastable to ``(B, h, T, S)``.

        Returns ``(output (B, T, D), weights (B, h, T, S))``.

        Inputs must be finite. Finite inputs so large that the scores overflow are refused with a
        ``ValueError`` that says so (the layer does not rescale them).
        """
        context = query if context is None else context
        B, T, S = check_layer_inputs(query, context, self.width, self.dtype, "numpy")
        allowed = layer_mask(allowed, B, self.heads, T, S, "numpy")  # -> broadcastable to (B, h, T, S)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below, in words
            output, weights = self._forward(query, context, allowed)
        check_overflow("MultiHead", output, {"query": query, "context": context})
        return output, weights

    def _forward(self, query: Array, context: Array, allowed: Mask | None) -> tuple[Array, Array]:
        q = _split_heads(query @ self.wq, self.heads)  # (B, T, D) -> (B, h, T, d_h)
        k = _split_heads(context @ self.wk, self.heads)  # (B, S, D) -> (B, h, S, d_h)
        v = _split_heads(context @ self.wv, self.heads)  # (B, S, D) -> (B, h, S, d_h)
        heads_out, weights = _attention(q, k, v, allowed)  # (B, h, T, d_h), (B, h, T, S)
        return _merge_heads(heads_out) @ self.wo, weights  # (B, T, D) @ (D, D) -> (B, T, D)

    def __repr__(self) -> str:
        return f"MultiHead(width={self.width}, heads={self.heads})  # d_h={self.head_width}"
