"""Grouped-query attention in PyTorch, mirroring `lessons_lib.gqa` line for line (lesson 05).

Differences from the NumPy version are only where the libraries differ: ``repeat_interleave``
is NumPy's ``repeat``, and ``nn.Linear`` stores its weight as ``(out, in)``, so the NumPy
``(in, out)`` matrices are copied in transposed (and pooling averages rows, not columns).
"""

from __future__ import annotations

import numbers

import torch
from torch import Tensor, nn

from lessons_lib.gqa import check_width, kv_head_of_query
from lessons_lib.kv_cache import check_kv_heads
from lessons_lib.numpy_core import init_weights
from lessons_lib.torch_core import MultiHead, attention, blank_linear, merge_heads, split_heads
from lessons_lib.validation import (
    check_layer_array,
    check_layer_inputs,
    check_layer_sizes,
    check_rank,
    layer_mask,
)

__all__ = [
    "GroupedQueryAttention",
    "from_multihead",
    "kv_head_of_query",
    "pool_kv_rows",
    "relative_error",
    "repeat_kv",
]


def repeat_kv(kv: Tensor, group_size: int) -> Tensor:
    """``(B, h_kv, S, d_h) -> (B, h, S, d_h)``: each key/value head repeated ``g`` times in a row.

    Same as `gqa.repeat_kv`: repeat-interleave, so query head ``i`` meets head ``i // g``.
    """
    check_rank("kv", kv.shape, 4, "(B, h_kv, S, d_h)", exact=True)
    if isinstance(group_size, bool) or not isinstance(group_size, numbers.Integral) or group_size <= 0:
        raise ValueError(f"group_size (g = h / h_kv) must be a positive int, got {group_size!r}")
    return kv.repeat_interleave(int(group_size), dim=1)  # (B, h_kv, S, d_h) -> (B, h_kv * g, S, d_h)


class GroupedQueryAttention(nn.Module):
    """Grouped-query attention as an ``nn.Module`` with four bias-free ``nn.Linear`` layers.

    ``wq (D -> D)``, ``wk`` and ``wv (D -> h_kv * d_h)``, ``wo (D -> D)``. They hold the same
    numbers as `gqa.GroupedQueryAttention` with the same seed, transposed:
    ``layer.wk.weight == numpy_layer.wk.T``. With ``kv_heads == heads`` this is
    `torch_core.MultiHead`.
    """

    def __init__(
        self, width: int, heads: int, kv_heads: int, seed: int = 0, dtype: torch.dtype = torch.float32
    ) -> None:
        check_layer_sizes(width, heads)
        check_kv_heads(heads, kv_heads)
        super().__init__()
        self.width = width
        self.heads = heads
        self.kv_heads = kv_heads
        self.head_width = width // heads
        self.group_size = heads // kv_heads
        self.dtype = dtype
        kv_width = kv_heads * self.head_width
        weights = init_weights(width, seed)
        weights["wk"] = weights["wk"][:, :kv_width]  # (D, D) -> (D, h_kv * d_h)
        weights["wv"] = weights["wv"][:, :kv_width]  # (D, D) -> (D, h_kv * d_h)
        self.wq = blank_linear(width, width, dtype)
        self.wk = blank_linear(width, kv_width, dtype)
        self.wv = blank_linear(width, kv_width, dtype)
        self.wo = blank_linear(width, width, dtype)
        with torch.no_grad():
            for name, linear in (("wq", self.wq), ("wk", self.wk), ("wv", self.wv), ("wo", self.wo)):
                linear.weight.copy_(torch.from_numpy(weights[name].T.copy()))  # (in, out) -> (out, in)

    def keys_values(self, context: Tensor) -> tuple[Tensor, Tensor]:
        """Project ``context (B, S, D)`` to keys and values, each ``(B, h_kv, S, d_h)``."""
        check_layer_array("context", context, self.dtype, "torch")
        check_rank("context", context.shape, 3, "(B, S, D)", exact=True)
        check_width("context", tuple(context.shape), self.width)
        k = split_heads(self.wk(context), self.kv_heads)  # (B, S, h_kv*d_h) -> (B, h_kv, S, d_h)
        v = split_heads(self.wv(context), self.kv_heads)  # (B, S, h_kv*d_h) -> (B, h_kv, S, d_h)
        return k, v

    def attend(
        self, query: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``query (B, T, D)`` to projected ``k, v (B, h_kv, S, d_h)``.

        Returns ``(output (B, T, D), weights (B, h, T, S))``.
        """
        check_layer_array("query", query, self.dtype, "torch")
        check_rank("k", k.shape, 4, "(B, h_kv, S, d_h)", exact=True)
        B, h_kv, S, d_h = k.shape
        if (h_kv, d_h) != (self.kv_heads, self.head_width) or v.shape != k.shape:
            raise ValueError(
                f"k and v must both be (B, h_kv, S, d_h) with h_kv={self.kv_heads}, "
                f"d_h={self.head_width}; got k {tuple(k.shape)} and v {tuple(v.shape)}"
            )
        _, T, _ = check_layer_inputs(query.shape, (B, S, self.width), self.width)
        q = split_heads(self.wq(query), self.heads)  # (B, T, D) -> (B, h, T, d_h)
        k = repeat_kv(k, self.group_size)  # (B, h_kv, S, d_h) -> (B, h, S, d_h)
        v = repeat_kv(v, self.group_size)  # (B, h_kv, S, d_h) -> (B, h, S, d_h)
        if allowed is not None:
            allowed = layer_mask(allowed, B, self.heads, T, S, "torch")  # -> broadcastable to (B, h, T, S)
        heads_out, weights = attention(q, k, v, allowed)  # (B, h, T, d_h), (B, h, T, S)
        return self.wo(merge_heads(heads_out)), weights  # (B, T, D) -> (B, T, D)

    def forward(
        self, query: Tensor, context: Tensor | None = None, allowed: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``query (B, T, D)`` to ``context (B, S, D)`` (``None``: self-attention).

        ``allowed`` (``True`` = may attend) has shape ``(T, S)``, ``(B, T, S)`` or a shape
        broadcastable to ``(B, h, T, S)``. Returns ``(output (B, T, D), weights (B, h, T, S))``.
        """
        context = query if context is None else context
        check_layer_array("query", query, self.dtype, "torch")  # before context, so a bad query is named
        k, v = self.keys_values(context)  # checks context; attend() checks query against it  # (B, h_kv, S, d_h) each
        return self.attend(query, k, v, allowed)

    def extra_repr(self) -> str:
        return (
            f"width={self.width}, heads={self.heads}, kv_heads={self.kv_heads}, "
            f"d_h={self.head_width}, g={self.group_size}"
        )


def pool_kv_rows(w: Tensor, heads: int, kv_heads: int) -> Tensor:
    """``(h * d_h, D) -> (h_kv * d_h, D)``: average the rows (``nn.Linear`` outputs) of each group.

    The transpose of `gqa.pool_kv_columns`.
    """
    check_kv_heads(heads, kv_heads)
    width, D = w.shape
    d_h = width // heads
    per_head = w.reshape(kv_heads, heads // kv_heads, d_h, D)  # (h*d_h, D) -> (h_kv, g, d_h, D)
    return per_head.mean(dim=1).reshape(kv_heads * d_h, D)  # (h_kv, d_h, D) -> (h_kv*d_h, D)


def from_multihead(layer: MultiHead, kv_heads: int) -> GroupedQueryAttention:
    """A GQA module made from a multi-head one by mean-pooling K/V projections of each group.

    Same conversion as `gqa.from_multihead` (Ainslie et al. 2023), on ``nn.Linear`` weights.
    """
    if not isinstance(layer, MultiHead):
        raise TypeError(f"layer must be a torch_core.MultiHead, got {type(layer).__name__}")
    gqa = GroupedQueryAttention(layer.width, layer.heads, kv_heads, dtype=layer.dtype)
    with torch.no_grad():
        gqa.wq.weight.copy_(layer.wq.weight)
        gqa.wk.weight.copy_(pool_kv_rows(layer.wk.weight, layer.heads, kv_heads))
        gqa.wv.weight.copy_(pool_kv_rows(layer.wv.weight, layer.heads, kv_heads))
        gqa.wo.weight.copy_(layer.wo.weight)
    return gqa


def relative_error(output: Tensor, reference: Tensor) -> float:
    """``||output - reference|| / ||reference||`` (Frobenius norms over every entry)."""
    return float(torch.linalg.norm(output - reference) / torch.linalg.norm(reference))
