"""Grouped-query attention in NumPy (lesson 05).

Notation (see SYLLABUS.md): ``B`` batch, ``T`` query length, ``S`` source length, ``D`` model
width, ``h`` query heads, ``d_h = D / h`` head width, ``h_kv`` key/value heads, ``g = h / h_kv``
query heads per key/value head. ``h_kv = h`` is multi-head attention (MHA), ``h_kv = 1`` is
multi-query attention (MQA, Shazeer 2019), anything between is GQA (Ainslie et al. 2023).

Query head ``i`` reads key/value head ``i // g``: consecutive query heads share (repeat-interleave,
not tile). `lessons_lib.gqa_torch` mirrors this module line for line.
"""

from __future__ import annotations

import numbers

import numpy as np
from numpy.typing import DTypeLike, NDArray

from lessons_lib.kv_cache import check_kv_heads
from lessons_lib.numpy_core import MultiHead, attention, init_weights, merge_heads, split_heads
from lessons_lib.validation import (
    check_layer_array,
    check_layer_inputs,
    check_layer_sizes,
    check_rank,
    layer_mask,
)

Array = NDArray[np.floating]
Mask = NDArray[np.bool_]

__all__ = [
    "GroupedQueryAttention",
    "from_multihead",
    "kv_head_of_query",
    "pool_kv_columns",
    "relative_error",
    "repeat_kv",
]


def check_width(name: str, shape: tuple[int, ...], width: int) -> None:
    """``ValueError`` unless the last axis of ``shape`` is the layer width ``D``."""
    if shape[-1] != width:
        raise ValueError(
            f"{name} has width {shape[-1]} on its last axis but the layer width D is {width}; "
            f"make sure the last axis holds the features (got shape {tuple(shape)})"
        )


def kv_head_of_query(heads: int, kv_heads: int) -> NDArray[np.int64]:
    """``(h,)`` integers: entry ``i`` is the key/value head that query head ``i`` reads, ``i // g``."""
    check_kv_heads(heads, kv_heads)
    return np.arange(heads) // (heads // kv_heads)


def repeat_kv(kv: Array, group_size: int) -> Array:
    """``(B, h_kv, S, d_h) -> (B, h, S, d_h)``: each key/value head repeated ``g`` times in a row.

    Copies ``0, 0, .., 1, 1, ..`` (repeat-interleave), so query head ``i`` meets head ``i // g``.
    Tiling (``0, 1, .., 0, 1, ..``) would give the same shape with heads paired up wrongly.
    """
    check_rank("kv", kv.shape, 4, "(B, h_kv, S, d_h)", exact=True)
    if isinstance(group_size, bool) or not isinstance(group_size, numbers.Integral) or group_size <= 0:
        raise ValueError(f"group_size (g = h / h_kv) must be a positive int, got {group_size!r}")
    return np.repeat(kv, group_size, axis=1)  # (B, h_kv, S, d_h) -> (B, h_kv * g, S, d_h)


class GroupedQueryAttention:
    """Grouped-query attention, forward only. Weights are ``(in, out)`` arrays: ``y = x @ w``.

    Attributes: ``wq (D, D)``, ``wk`` and ``wv (D, h_kv * d_h)``, ``wo (D, D)``; ``width, heads,
    kv_heads, head_width, group_size, dtype``.

    Initialisation: the four ``(D, D)`` matrices of `numpy_core.init_weights` with the same seed,
    of which ``wk`` and ``wv`` keep their first ``h_kv * d_h`` columns (the columns of the first
    ``h_kv`` heads). So with ``kv_heads == heads`` this layer *is* `numpy_core.MultiHead`.
    """

    def __init__(
        self, width: int, heads: int, kv_heads: int, seed: int = 0, dtype: DTypeLike = np.float64
    ) -> None:
        check_layer_sizes(width, heads)
        check_kv_heads(heads, kv_heads)
        self.width = width
        self.heads = heads
        self.kv_heads = kv_heads
        self.head_width = width // heads
        self.group_size = heads // kv_heads
        self.dtype = np.dtype(dtype)
        kv_width = kv_heads * self.head_width
        weights = init_weights(width, seed)
        self.wq: Array = weights["wq"].astype(self.dtype)
        self.wk: Array = weights["wk"][:, :kv_width].astype(self.dtype)  # (D, D) -> (D, h_kv * d_h)
        self.wv: Array = weights["wv"][:, :kv_width].astype(self.dtype)  # (D, D) -> (D, h_kv * d_h)
        self.wo: Array = weights["wo"].astype(self.dtype)

    def keys_values(self, context: Array) -> tuple[Array, Array]:
        """Project ``context (B, S, D)`` to keys and values, each ``(B, h_kv, S, d_h)``.

        These are what a decoder caches: ``h_kv`` heads per token, not ``h``.
        """
        check_layer_array("context", context, self.dtype, "numpy")
        check_rank("context", context.shape, 3, "(B, S, D)", exact=True)
        check_width("context", context.shape, self.width)
        k = split_heads(context @ self.wk, self.kv_heads)  # (B, S, h_kv*d_h) -> (B, h_kv, S, d_h)
        v = split_heads(context @ self.wv, self.kv_heads)  # (B, S, h_kv*d_h) -> (B, h_kv, S, d_h)
        return k, v

    def attend(
        self, query: Array, k: Array, v: Array, allowed: Mask | None = None
    ) -> tuple[Array, Array]:
        """Attend from ``query (B, T, D)`` to projected ``k, v (B, h_kv, S, d_h)``.

        Returns ``(output (B, T, D), weights (B, h, T, S))``.
        """
        check_layer_array("query", query, self.dtype, "numpy")
        check_rank("k", k.shape, 4, "(B, h_kv, S, d_h)", exact=True)
        B, h_kv, S, d_h = k.shape
        if (h_kv, d_h) != (self.kv_heads, self.head_width) or v.shape != k.shape:
            raise ValueError(
                f"k and v must both be (B, h_kv, S, d_h) with h_kv={self.kv_heads}, "
                f"d_h={self.head_width}; got k {tuple(k.shape)} and v {tuple(v.shape)}"
            )
        _, T, _ = check_layer_inputs(query.shape, (B, S, self.width), self.width)
        q = split_heads(query @ self.wq, self.heads)  # (B, T, D) -> (B, h, T, d_h)
        k = repeat_kv(k, self.group_size)  # (B, h_kv, S, d_h) -> (B, h, S, d_h)
        v = repeat_kv(v, self.group_size)  # (B, h_kv, S, d_h) -> (B, h, S, d_h)
        if allowed is not None:
            allowed = layer_mask(allowed, B, self.heads, T, S, "numpy")  # -> broadcastable to (B, h, T, S)
        heads_out, weights = attention(q, k, v, allowed)  # (B, h, T, d_h), (B, h, T, S)
        return merge_heads(heads_out) @ self.wo, weights  # (B, T, D) @ (D, D) -> (B, T, D)

    def __call__(
        self, query: Array, context: Array | None = None, allowed: Mask | None = None
    ) -> tuple[Array, Array]:
        """Attend from ``query (B, T, D)`` to ``context (B, S, D)`` (``None``: self-attention).

        ``allowed`` (``True`` = may attend) has shape ``(T, S)``, ``(B, T, S)`` or a shape
        broadcastable to ``(B, h, T, S)``. Returns ``(output (B, T, D), weights (B, h, T, S))``.
        """
        context = query if context is None else context
        check_layer_array("query", query, self.dtype, "numpy")  # before context, so a bad query is named
        k, v = self.keys_values(context)  # checks context; attend() checks query against it  # (B, h_kv, S, d_h) each
        return self.attend(query, k, v, allowed)

    def __repr__(self) -> str:
        return (
            f"GroupedQueryAttention(width={self.width}, heads={self.heads}, kv_heads={self.kv_heads})"
            f"  # d_h={self.head_width}, g={self.group_size}"
        )


def pool_kv_columns(w: Array, heads: int, kv_heads: int) -> Array:
    """``(D, h * d_h) -> (D, h_kv * d_h)``: average the columns of each run of ``g`` heads.

    Key/value head ``j`` gets the mean of the projections of query heads ``j*g .. j*g + g - 1``.
    """
    check_kv_heads(heads, kv_heads)
    D, width = w.shape
    d_h = width // heads
    per_head = w.reshape(D, kv_heads, heads // kv_heads, d_h)  # (D, h*d_h) -> (D, h_kv, g, d_h)
    pooled: Array = per_head.mean(axis=2).reshape(D, kv_heads * d_h)  # (D, h_kv, d_h) -> (D, h_kv*d_h)
    return pooled


def from_multihead(layer: MultiHead, kv_heads: int) -> GroupedQueryAttention:
    """A GQA layer made from a multi-head one by mean-pooling K/V projections of each group.

    Ainslie et al. 2023 ("GQA: Training Generalized Multi-Query Transformer Models from
    Multi-Head Checkpoints") convert this way and then train briefly; here we only convert, so
    the outputs move. ``wq`` and ``wo`` are copied unchanged. ``kv_heads == layer.heads`` gives
    back the same layer.
    """
    if not isinstance(layer, MultiHead):
        raise TypeError(f"layer must be a numpy_core.MultiHead, got {type(layer).__name__}")
    gqa = GroupedQueryAttention(layer.width, layer.heads, kv_heads, dtype=layer.dtype)
    gqa.wq = layer.wq.copy()
    gqa.wk = pool_kv_columns(layer.wk, layer.heads, kv_heads)
    gqa.wv = pool_kv_columns(layer.wv, layer.heads, kv_heads)
    gqa.wo = layer.wo.copy()
    return gqa


def relative_error(output: Array, reference: Array) -> float:
    """``||output - reference|| / ||reference||`` (Frobenius norms over every entry)."""
    return float(np.linalg.norm(output - reference) / np.linalg.norm(reference))
