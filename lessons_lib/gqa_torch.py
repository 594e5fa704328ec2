"""Grouped-query attention in PyTorch, mirroring `lessons_lib.gqa_numpy` line for line (lesson 06).

Differences from the NumPy version are only where the libraries differ: ``repeat_interleave``
is NumPy's ``repeat``, and ``nn.Linear`` stores its weight as ``(out, in)``, so the NumPy
``(in, out)`` matrices are copied in transposed (and pooling averages rows, not columns).

An ordinary ``nn.Module`` (``.double()``, ``.to(...)``, ``load_state_dict``). ``state_dict()`` keys:
``wq.weight (D, D)``, ``wk.weight (h_kv * d_h, D)``, ``wv.weight (h_kv * d_h, D)``, ``wo.weight (D, D)``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lessons_lib.gqa_numpy import kv_head_of_query
from lessons_lib.mha_torch import MultiHead, _attention, _merge_heads, _split_heads, linear, linear_weights
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

    Same as `gqa_numpy.repeat_kv`: repeat-interleave, so query head ``i`` meets head ``i // g``.
    """
    check_array("kv", kv, "torch", "(B, h_kv, S, d_h)")
    return _repeat_kv(kv, check_int("group_size", group_size, symbol="g = h / h_kv"))


def _repeat_kv(kv: Tensor, g: int) -> Tensor:
    return kv.repeat_interleave(g, dim=1)  # (B, h_kv, S, d_h) -> (B, h_kv * g, S, d_h)


class GroupedQueryAttention(nn.Module):
    """Grouped-query attention as an ``nn.Module`` with four bias-free ``nn.Linear`` layers.

    ``wq (D -> D)``, ``wk`` and ``wv (D -> h_kv * d_h)``, ``wo (D -> D)``. They hold the same
    numbers as `gqa_numpy.GroupedQueryAttention` with the same seed, transposed:
    ``layer.wk.weight == numpy_layer.wk.T``. With ``kv_heads == heads`` this is
    `mha_torch.MultiHead`. `GroupedQueryAttention.from_weights` takes given weights instead.

    Inputs and weights must be finite. Finite inputs so large that the scores overflow are refused
    with a ``ValueError`` that says so (the layer does not rescale them).
    """

    def __init__(
        self, width: int, heads: int, kv_heads: int, seed: int = 0, dtype: torch.dtype = torch.float32
    ) -> None:
        d_h = head_width(width, heads)
        kv_width = int(heads) // group_size(heads, kv_heads) * d_h  # h_kv * d_h
        w = linear_weights(width, seed, check_float_dtype(dtype, "torch"))
        super().__init__()
        self.wq = linear(w["wq"])
        self.wk = linear(w["wk"][:kv_width])  # (D, D) -> (h_kv * d_h, D): the first h_kv heads' rows
        self.wv = linear(w["wv"][:kv_width])  # (D, D) -> (h_kv * d_h, D)
        self.wo = linear(w["wo"])
        self.heads, self.kv_heads = int(heads), int(kv_heads)

    @classmethod
    def from_weights(
        cls, wq: Tensor, wk: Tensor, wv: Tensor, wo: Tensor, heads: int, kv_heads: int
    ) -> GroupedQueryAttention:
        """A layer holding copies of the given ``(out, in)`` tensors (``nn.Linear``'s layout):
        ``wq, wo (D, D)``, ``wk, wv (h_kv * d_h, D)``, one floating dtype."""
        check_array("wq", wq, "torch", "(D, D)")
        D = int(wq.shape[0])
        d_h = head_width(D, heads)
        kv_width = int(heads) // group_size(heads, kv_heads) * d_h  # h_kv * d_h
        for name, w in (("wq", wq), ("wo", wo)):
            check_weight(name, w, (D, D), "torch", "(D, D)")
        for name, w in (("wk", wk), ("wv", wv)):
            check_weight(name, w, (kv_width, D), "torch", "(h_kv * d_h, D)")
        check_same_dtype({"wq": wq, "wk": wk, "wv": wv, "wo": wo})
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer.wq, layer.wk, layer.wv, layer.wo = linear(wq), linear(wk), linear(wv), linear(wo)
        layer.heads, layer.kv_heads = int(heads), int(kv_heads)
        return layer

    @property
    def width(self) -> int:
        """``D``."""
        return int(self.wq.weight.shape[1])

    @property
    def head_width(self) -> int:
        """``d_h = D / h``."""
        return self.width // self.heads

    @property
    def group_size(self) -> int:
        """``g = h / h_kv``: query heads per key/value head."""
        return self.heads // self.kv_heads

    @property
    def dtype(self) -> torch.dtype:
        """The parameters' dtype (follows ``.double()``, ``.to(...)``)."""
        return self.wq.weight.dtype

    def keys_values(self, context: Tensor) -> tuple[Tensor, Tensor]:
        """Project ``context (B, S, D)`` to keys and values, each ``(B, h_kv, S, d_h)``."""
        check_array("context", context, "torch", "(B, S, D)", self.dtype)
        check_width("context", tuple(context.shape), self.width)
        check_finite("context", context)
        return self._keys_values(context)

    def _keys_values(self, context: Tensor) -> tuple[Tensor, Tensor]:
        k = _split_heads(self.wk(context), self.kv_heads)  # (B, S, h_kv*d_h) -> (B, h_kv, S, d_h)
        v = _split_heads(self.wv(context), self.kv_heads)  # (B, S, h_kv*d_h) -> (B, h_kv, S, d_h)
        return k, v

    def attend(self, query: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Attend from ``query (B, T, D)`` to projected ``k, v (B, h_kv, S, d_h)``.

        Returns ``(output (B, T, D), weights (B, h, T, S))``.
        """
        B, T, S = check_attend_inputs(query, k, v, self, "torch")
        allowed = layer_mask(allowed, B, self.heads, T, S, "torch")
        output, weights = self._attend(query, k, v, allowed)
        check_overflow("GroupedQueryAttention.attend", output, {"query": query, "k": k, "v": v})
        return output, weights

    def _attend(self, query: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None) -> tuple[Tensor, Tensor]:
        q = _split_heads(self.wq(query), self.heads)  # (B, T, D) -> (B, h, T, d_h)
        k = _repeat_kv(k, self.group_size)  # (B, h_kv, S, d_h) -> (B, h, S, d_h)
        v = _repeat_kv(v, self.group_size)  # (B, h_kv, S, d_h) -> (B, h, S, d_h)
        heads_out, weights = _attention(q, k, v, allowed)  # (B, h, T, d_h), (B, h, T, S)
        return self.wo(_merge_heads(heads_out)), weights  # (B, T, D) -> (B, T, D)

    def forward(
        self, query: Tensor, context: Tensor | None = None, allowed: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``query (B, T, D)`` to ``context (B, S, D)`` (``None``: self-attention).

        ``allowed`` (``True`` = may attend) has shape ``(T, S)``, ``(B, T, S)`` or a shape
        broadcastable to ``(B, h, T, S)``. Returns ``(output (B, T, D), weights (B, h, T, S))``.
        """
        context = query if context is None else context
        B, T, S = check_layer_inputs(query, context, self.width, self.dtype, "torch")
        allowed = layer_mask(allowed, B, self.heads, T, S, "torch")  # -> broadcastable to (B, h, T, S)
        k, v = self._keys_values(context)  # (B, h_kv, S, d_h) each
        output, weights = self._attend(query, k, v, allowed)
        check_overflow("GroupedQueryAttention", output, {"query": query, "context": context})
        return output, weights

    def extra_repr(self) -> str:
        return (
            f"width={self.width}, heads={self.heads}, kv_heads={self.kv_heads}, "
            f"d_h={self.head_width}, g={self.group_size}"
        )


def pool_kv_rows(w: Tensor, heads: int, kv_heads: int) -> Tensor:
    """``(h * d_h, D) -> (h_kv * d_h, D)``: average the rows (``nn.Linear`` outputs) of each group.

    The transpose of `gqa_numpy.pool_kv_columns`.
    """
    check_array("w", w, "torch", "(h * d_h, D)")
    head_width(w.shape[0], heads)
    g = group_size(heads, kv_heads)
    width, D = w.shape
    per_head = w.reshape(int(kv_heads), g, width // int(heads), D)  # (h*d_h, D) -> (h_kv, g, d_h, D)
    return per_head.mean(dim=1).reshape(-1, D)  # (h_kv, d_h, D) -> (h_kv*d_h, D)


def from_multihead(layer: MultiHead, kv_heads: int) -> GroupedQueryAttention:
    """A GQA module made from a multi-head one by mean-pooling K/V projections of each group.

    Same conversion as `gqa_numpy.from_multihead` (Ainslie et al. 2023), on ``nn.Linear`` weights.
    """
    if not isinstance(layer, MultiHead):
        raise TypeError(f"layer must be a mha_torch.MultiHead, got {type(layer).__name__}")
    with torch.no_grad():
        wk = pool_kv_rows(layer.wk.weight, layer.heads, kv_heads)
        wv = pool_kv_rows(layer.wv.weight, layer.heads, kv_heads)
        return GroupedQueryAttention.from_weights(layer.wq.weight, wk, wv, layer.wo.weight, layer.heads, kv_heads)


def relative_error(output: Tensor, reference: Tensor) -> float:
    """``||output - reference|| / ||reference||`` (Frobenius norms over every entry)."""
    check_relative_error_inputs(output, reference, "torch")
    return float(torch.linalg.norm(output - reference) / torch.linalg.norm(reference))
