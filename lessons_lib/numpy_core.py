"""Attention in NumPy: one head (lesson 01), splitting into heads (02), the full layer (03).

Notation (see SYLLABUS.md): ``B`` batch, ``T`` query length, ``S`` source length, ``D`` model
width, ``h`` heads, ``d_h = D / h`` head width.

`lessons_lib.torch_core` mirrors this module line for line; read the two side by side.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from lessons_lib.validation import (
    check_array,
    check_bool_mask,
    check_int,
    check_layer_array,
    check_layer_inputs,
    check_layer_sizes,
    check_qkv,
    check_rank,
    empty_rows_message,
    layer_mask,
    mask_shape,
)

Array = NDArray[np.floating]
Mask = NDArray[np.bool_]

__all__ = [
    "attention",
    "causal_mask",
    "init_weights",
    "merge_heads",
    "MultiHead",
    "softmax",
    "split_heads",
]


def softmax(scores: Array, axis: int = -1) -> Array:
    """Softmax along ``axis``; subtracting the row maximum keeps ``exp`` from overflowing."""
    shifted = scores - scores.max(axis=axis, keepdims=True)
    exps: Array = np.exp(shifted)
    total: Array = exps.sum(axis=axis, keepdims=True)
    return exps / total


def causal_mask(T: int, S: int | None = None) -> Mask:
    """Boolean ``(T, S)`` mask, ``True`` = may attend.

    The ``T`` queries are the *last* ``T`` positions of the ``S`` source positions (``S`` defaults
    to ``T``), so query ``t`` may see source positions ``0 .. S - T + t``. With ``S > T`` this is
    the mask for queries that arrive after ``S - T`` cached tokens.
    """
    S = T if S is None else S
    check_int("T", T)
    check_int("S", S)
    if T <= 0 or S < T:
        raise ValueError(f"causal_mask needs 0 < T <= S, got T={T}, S={S}")
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
            (it would be 0/0 = NaN), so we refuse instead of returning NaN.
    """
    check_qkv(q, k, v, "numpy")
    d = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)  # (..., T, d) @ (..., d, S) -> (..., T, S)
    if allowed is not None:
        check_bool_mask(allowed, "numpy")
        mask_shape(allowed.shape, scores.shape)
        if not np.all(np.any(allowed, axis=-1)):
            raise ValueError(empty_rows_message())
        scores = np.where(allowed, scores, -np.inf)
    weights = softmax(scores, axis=-1)  # (..., T, S)
    return weights @ v, weights  # (..., T, S) @ (..., S, d_v) -> (..., T, d_v)


def split_heads(x: Array, heads: int) -> Array:
    """``(B, T, D) -> (B, h, T, d_h)``: reshape the last axis into heads, then move heads forward."""
    check_array("x", x)
    check_rank("x", x.shape, 3, "(B, T, D)", exact=True)
    B, T, D = x.shape
    check_layer_sizes(D, heads)
    x = x.reshape(B, T, heads, D // heads)  # (B, T, D) -> (B, T, h, d_h)
    return x.transpose(0, 2, 1, 3)  # (B, T, h, d_h) -> (B, h, T, d_h)


def merge_heads(x: Array) -> Array:
    """``(B, h, T, d_h) -> (B, T, D)``: the inverse of `split_heads` (concatenate the heads)."""
    check_array("x", x)
    check_rank("x", x.shape, 4, "(B, h, T, d_h)", exact=True)
    B, h, T, d_h = x.shape
    x = x.transpose(0, 2, 1, 3)  # (B, h, T, d_h) -> (B, T, h, d_h)
    return x.reshape(B, T, h * d_h)  # (B, T, h, d_h) -> (B, T, D)


def init_weights(width: int, seed: int = 0) -> dict[str, NDArray[np.float64]]:
    """Four ``(in, out) = (D, D)`` float64 matrices ``wq, wk, wv, wo`` from one NumPy stream.

    Entries are uniform in ``[-1/sqrt(D), 1/sqrt(D)]`` (the range ``nn.Linear`` uses), drawn in
    the order wq, wk, wv, wo. `torch_core.MultiHead` copies these same numbers, transposed.
    """
    rng = np.random.default_rng(seed)
    bound = 1.0 / math.sqrt(width)
    return {name: rng.uniform(-bound, bound, size=(width, width)) for name in ("wq", "wk", "wv", "wo")}


class MultiHead:
    """Multi-head attention, forward only. Weights are ``(in, out)`` arrays: ``y = x @ w``.

    Attributes ``wq, wk, wv, wo``: ``(D, D)`` each; head ``i`` owns columns
    ``i*d_h : (i+1)*d_h`` of ``wq``, ``wk`` and ``wv`` (and rows ``i*d_h : (i+1)*d_h`` of ``wo``).
    """

    def __init__(self, width: int, heads: int, seed: int = 0, dtype: type = np.float64) -> None:
        check_layer_sizes(width, heads)
        self.width = width
        self.heads = heads
        self.head_width = width // heads
        self.dtype = np.dtype(dtype)
        if self.dtype.kind != "f":
            raise TypeError(f"dtype must be a floating-point type such as np.float32 or np.float64, got {self.dtype}")
        weights = init_weights(width, seed)
        self.wq = weights["wq"].astype(self.dtype)
        self.wk = weights["wk"].astype(self.dtype)
        self.wv = weights["wv"].astype(self.dtype)
        self.wo = weights["wo"].astype(self.dtype)

    def __call__(
        self, query: Array, context: Array | None = None, allowed: Mask | None = None
    ) -> tuple[Array, Array]:
        """Attend from ``query (B, T, D)`` to ``context (B, S, D)`` (``None``: self-attention).

        ``allowed`` (``True`` = may attend) has shape ``(T, S)``, ``(B, T, S)`` or a shape
        broadcastable to ``(B, h, T, S)``.

        Returns ``(output (B, T, D), weights (B, h, T, S))``.
        """
        context = query if context is None else context
        check_layer_array("query", query, self.dtype, "numpy")
        check_layer_array("context", context, self.dtype, "numpy")
        B, T, S = check_layer_inputs(query.shape, context.shape, self.width)
        q = split_heads(query @ self.wq, self.heads)  # (B, T, D) -> (B, h, T, d_h)
        k = split_heads(context @ self.wk, self.heads)  # (B, S, D) -> (B, h, S, d_h)
        v = split_heads(context @ self.wv, self.heads)  # (B, S, D) -> (B, h, S, d_h)
        if allowed is not None:
            allowed = layer_mask(allowed, B, self.heads, T, S, "numpy")  # -> broadcastable to (B, h, T, S)
        heads_out, weights = attention(q, k, v, allowed)  # (B, h, T, d_h), (B, h, T, S)
        return merge_heads(heads_out) @ self.wo, weights  # (B, T, D) @ (D, D) -> (B, T, D)

    def __repr__(self) -> str:
        return f"MultiHead(width={self.width}, heads={self.heads})  # d_h={self.head_width}"



def __getattr__(name: str) -> object:
    """Lesson 05's grouped-query layer, reachable from here too: ``numpy_core.GroupedQueryAttention``.

    It lives in `lessons_lib.gqa` (which builds on this module) and is loaded on first use.
    """
    if name in ("GroupedQueryAttention", "from_multihead", "repeat_kv"):
        from lessons_lib import gqa

        return getattr(gqa, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
