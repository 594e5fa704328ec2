"""Grouped-query attention in NumPy (lesson 06).

Notation (see SYLLABUS.md): ``B`` batch, ``T`` query length, ``S`` source length, ``D`` model
width, ``h`` query heads, ``d_h = D / h`` head width, ``h_kv`` key/value heads, ``g = h / h_kv``
query heads per key/value head. ``h_kv = h`` is multi-head attention (MHA), ``h_kv = 1`` is
multi-query attention (MQA, Shazeer 2019), anything between is GQA (Ainslie et al. 2023).

Query head ``i`` reads key/value head ``i // g``: consecutive query heads share (repeat-interleave,
not tile). `lessons_lib.gqa_torch` mirrors this module line for line.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import DTypeLike, NDArray

from lessons_lib.mha_numpy import MultiHead, _attention, _merge_heads, _split_heads, init_weights
from lessons_lib.validation import (
    check_array,
    check_attend_inputs,
    check_finite,
    check_float_dtype,
    check_int,
    check_layer_inputs,
    check_overflow,
    check_relative_error_inputs,
    check_same_dtype,
    check_weight,
    check_width,
    group_size,
    head_width,
    layer_mask,
)

Array = NDArray[np.floating[Any]]
Mask = NDArray[np.bool_]

__all__ = [
    "GroupedQueryAttention",
    "from_multihead",
    "kv_head_of_query",
    "pool_kv_columns",
    "relative_error",
    "repeat_kv",
]


def kv_head_of_query(heads: int, kv_heads: int) -> NDArray[np.int64]:
    """``(h,)`` integers: entry ``i`` is the key/value head that query head ``i`` reads, ``i // g``."""
    return np.arange(int(heads)) // group_size(heads, kv_heads)


def repeat_kv(kv: Array, group_size: int) -> Array:
    """``(B, h_kv, S, d_h) -> (B, h, S, d_h)``: each key/value head repeated ``g`` times in a row.

    Copies ``0, 0, .., 1, 1, ..`` (repeat-interleave), so query head ``i`` meets head ``i // g``.
    Tiling (``0, 1, .., 0, 1, ..``) would give the same shape with heads paired up wrongly.
    """
    check_array("kv", kv, "numpy", "(B, h_kv, S, d_h)")
    return _repeat_kv(kv, check_int("group_size", group_size, symbol="g = h / h_kv"))


def _repeat_kv(kv: Array, g: int) -> Array:
    return np.repeat(kv, g, axis=1)  # (B, h_kv, S, d_h) -> (B, h_kv * g, S, d_h)


class GroupedQueryAttention:
    """Grouped-query attention, forward only. Weights are ``(in, out)`` arrays: ``y = x @ w``.

    Attributes: ``wq (D, D)``, ``wk`` and ``wv (D, h_kv * d_h)``, ``wo (D, D)``; ``heads``,
    ``kv_heads``; ``width``, ``head_width``, ``group_size`` and ``dtype`` are read from them.

    Initialisation: the four ``(D, D)`` matrices of `mha_numpy.init_weights` with the same seed,
    of which ``wk`` and ``wv`` keep their first ``h_kv * d_h`` columns (the columns of the first
    ``h_kv`` heads). So with ``kv_heads == heads`` this layer *is* `mha_numpy.MultiHead`.
    `GroupedQueryAttention.from_weights` takes given weights instead.

    Inputs and weights must be finite. Finite inputs so large that the scores overflow are refused
    with a ``ValueError`` that says so (the layer does not rescale them).
    """

    def __init__(self, width: int, heads: int, kv_heads: int, seed: int = 0, dtype: DTypeLike = np.float64) -> None:
        d_h = head_width(width, heads)
        kv_width = int(heads) // group_size(heads, kv_heads) * d_h  # h_kv * d_h
        dtype = check_float_dtype(dtype, "numpy")
        w = init_weights(width, seed)
        self.wq: Array = w["wq"].astype(dtype)
        self.wk: Array = w["wk"][:, :kv_width].astype(dtype)  # (D, D) -> (D, h_kv * d_h)
        self.wv: Array = w["wv"][:, :kv_width].astype(dtype)  # (D, D) -> (D, h_kv * d_h)
        self.wo: Array = w["wo"].astype(dtype)
        self.heads, self.kv_heads = int(heads), int(kv_heads)

    @classmethod
    def from_weights(
        cls, wq: Array, wk: Array, wv: Array, wo: Array, heads: int, kv_heads: int
    ) -> GroupedQueryAttention:
        """A layer holding the given ``(in, out)`` arrays (kept, not copied): ``wq, wo (D, D)``,
        ``wk, wv (D, h_kv * d_h)``, one floating dtype. ``nn.Linear`` weights are ``(out, in)``: transpose."""
        check_array("wq", wq, "numpy", "(D, D)")
        D = int(wq.shape[0])
        d_h = head_width(D, heads)
        kv_width = int(heads) // group_size(heads, kv_heads) * d_h  # h_kv * d_h
        for name, w in (("wq", wq), ("wo", wo)):
            check_weight(name, w, (D, D), "numpy", "(D, D)")
        for name, w in (("wk", wk), ("wv", wv)):
            check_weight(name, w, (D, kv_width), "numpy", "(D, h_kv * d_h)")
        check_same_dtype({"wq": wq, "wk": wk, "wv": wv, "wo": wo})
        layer = cls.__new__(cls)
        layer.wq, layer.wk, layer.wv, layer.wo = wq, wk, wv, wo
        layer.heads, layer.kv_heads = int(heads), int(kv_heads)
        return layer

    @property
    def width(self) -> int:
        """``D``."""
        return int(self.wq.shape[0])

    @property
    def head_width(self) -> int:
        """``d_h = D / h``."""
        return self.width // self.heads

    @property
    def group_size(self) -> int:
        """``g = h / h_kv``: query heads per key/value head."""
        return self.heads // self.kv_heads

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.wq.dtype

    def keys_values(self, context: Array) -> tuple[Array, Array]:
        """Project ``context (B, S, D)`` to keys and values, each ``(B, h_kv, S, d_h)``.

        These are what a decoder caches: ``h_kv`` heads per token, not ``h``.
        """
        check_array("context", context, "numpy", "(B, S, D)", self.dtype)
        check_width("context", tuple(context.shape), self.width)
        check_finite("context", context)
        return self._keys_values(context)

    def _keys_values(self, context: Array) -> tuple[Array, Array]:
        k = _split_heads(context @ self.wk, self.kv_heads)  # (B, S, h_kv*d_h) -> (B, h_kv, S, d_h)
        v = _split_heads(context @ self.wv, self.kv_heads)  # (B, S, h_kv*d_h) -> (B, h_kv, S, d_h)
        return k, v

    def attend(self, query: Array, k: Array, v: Array, allowed: Mask | None = None) -> tuple[Array, Array]:
        """Attend from ``query (B, T, D)`` to projected ``k, v (B, h_kv, S, d_h)``.

        Returns ``(output (B, T, D), weights (B, h, T, S))``.
        """
        B, T, S = check_attend_inputs(query, k, v, self, "numpy")
        allowed = layer_mask(allowed, B, self.heads, T, S, "numpy")
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
            output, weights = self._attend(query, k, v, allowed)
        check_overflow("GroupedQueryAttention.attend", output, {"query": query, "k": k, "v": v})
        return output, weights

    def _attend(self, query: Array, k: Array, v: Array, allowed: Mask | None) -> tuple[Array, Array]:
        q = _split_heads(query @ self.wq, self.heads)  # (B, T, D) -> (B, h, T, d_h)
        k = _repeat_kv(k, self.group_size)  # (B, h_kv, S, d_h) -> (B, h, S, d_h)
        v = _repeat_kv(v, self.group_size)  # (B, h_kv, S, d_h) -> (B, h, S, d_h)
        heads_out, weights = _attention(q, k, v, allowed)  # (B, h, T, d_h), (B, h, T, S)
        return _merge_heads(heads_out) @ self.wo, weights  # (B, T, D) @ (D, D) -> (B, T, D)

    def __call__(self, query: Array, context: Array | None = None, allowed: Mask | None = None) -> tuple[Array, Array]:
        """Attend from ``query (B, T, D)`` to ``context (B, S, D)`` (``None``: self-attention).

        ``allowed`` (``True`` = may attend) has shape ``(T, S)``, ``(B, T, S)`` or a shape
        broadcastable to ``(B, h, T, S)``. Returns ``(output (B, T, D), weights (B, h, T, S))``.
        """
        context = query if context is None else context
        B, T, S = check_layer_inputs(query, context, self.width, self.dtype, "numpy")
        allowed = layer_mask(allowed, B, self.heads, T, S, "numpy")  # -> broadcastable to (B, h, T, S)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
            k, v = self._keys_values(context)  # (B, h_kv, S, d_h) each
            output, weights = self._attend(query, k, v, allowed)
        check_overflow("GroupedQueryAttention", output, {"query": query, "context": context})
        return output, weights

    def __repr__(self) -> str:
        return (
            f"GroupedQueryAttention(width={self.width}, heads={self.heads}, kv_heads={self.kv_heads})"
            f"  # d_h={self.head_width}, g={self.group_size}"
        )


def pool_kv_columns(w: Array, heads: int, kv_heads: int) -> Array:
    """``(D, h * d_h) -> (D, h_kv * d_h)``: average the columns of each run of ``g`` heads.

    Key/value head ``j`` gets the mean of the projections of query heads ``j*g .. j*g + g - 1``.
    """
    check_array("w", w, "numpy", "(D, h * d_h)")
    head_width(w.shape[1], heads)
    g = group_size(heads, kv_heads)
    D, width = w.shape
    per_head = w.reshape(D, int(kv_heads), g, width // int(heads))  # (D, h*d_h) -> (D, h_kv, g, d_h)
    pooled: Array = per_head.mean(axis=2).reshape(D, -1)  # (D, h_kv, d_h) -> (D, h_kv*d_h)
    return pooled


def from_multihead(layer: MultiHead, kv_heads: int) -> GroupedQueryAttention:
    """A GQA layer made from a multi-head one by mean-pooling K/V projections of each group.

    Ainslie et al. 2023 ("GQA: Training Generalized Multi-Query Transformer Models from
    Multi-Head Checkpoints") convert this way and then train briefly; here we only convert, so
    the outputs move. ``wq`` and ``wo`` are copied unchanged. ``kv_heads == layer.heads`` gives
    back the same layer.
    """
    if not isinstance(layer, MultiHead):
        raise TypeError(f"layer must be a mha_numpy.MultiHead, got {type(layer).__name__}")
    wk = pool_kv_columns(layer.wk, layer.heads, kv_heads)
    wv = pool_kv_columns(layer.wv, layer.heads, kv_heads)
    return GroupedQueryAttention.from_weights(layer.wq.copy(), wk, wv, layer.wo.copy(), layer.heads, kv_heads)


def relative_error(output: Array, reference: Array) -> float:
    """``||output - reference|| / ||reference||`` (Frobenius norms over every entry)."""
    check_relative_error_inputs(output, reference, "numpy")
    return float(np.linalg.norm(output - reference) / np.linalg.norm(reference))
