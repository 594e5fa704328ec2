"""Attention in PyTorch, mirroring `lessons_lib.numpy_core` line for line.

Differences from the NumPy version are only where the libraries differ: ``transpose`` swaps two
axes (``permute`` takes all of them), and ``nn.Linear`` stores its weight as ``(out, in)``, so the
NumPy ``(in, out)`` matrices are copied in transposed.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn.utils import skip_init

from lessons_lib.numpy_core import init_weights
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

__all__ = ["attention", "causal_mask", "merge_heads", "MultiHead", "split_heads"]


def causal_mask(T: int, S: int | None = None) -> Tensor:
    """Boolean ``(T, S)`` mask, ``True`` = may attend; see `numpy_core.causal_mask`."""
    S = T if S is None else S
    check_int("T", T)
    check_int("S", S)
    if T <= 0 or S < T:
        raise ValueError(f"causal_mask needs 0 < T <= S, got T={T}, S={S}")
    return torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T)


def attention(
    q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention; same contract as `numpy_core.attention`.

    ``q (..., T, d)``, ``k (..., S, d)``, ``v (..., S, d_v)``, ``allowed`` boolean, broadcastable
    to ``(..., T, S)``, ``True`` = may attend. Returns ``(output (..., T, d_v), weights (..., T, S))``.
    Raises ``ValueError`` when a query row has no allowed position (instead of returning NaN).
    """
    check_qkv(q, k, v, "torch")
    d = q.shape[-1]
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # (..., T, d) @ (..., d, S) -> (..., T, S)
    if allowed is not None:
        check_bool_mask(allowed, "torch")
        mask_shape(allowed.shape, scores.shape)
        if not bool(allowed.any(dim=-1).all()):
            raise ValueError(empty_rows_message())
        scores = scores.masked_fill(~allowed, -math.inf)
    weights = torch.softmax(scores, dim=-1)  # (..., T, S)
    return weights @ v, weights  # (..., T, S) @ (..., S, d_v) -> (..., T, d_v)


def split_heads(x: Tensor, heads: int) -> Tensor:
    """``(B, T, D) -> (B, h, T, d_h)``: reshape the last axis into heads, then move heads forward."""
    check_array("x", x)
    check_rank("x", x.shape, 3, "(B, T, D)", exact=True)
    B, T, D = x.shape
    check_layer_sizes(D, heads)
    x = x.reshape(B, T, heads, D // heads)  # (B, T, D) -> (B, T, h, d_h)
    return x.transpose(1, 2)  # (B, T, h, d_h) -> (B, h, T, d_h)


def merge_heads(x: Tensor) -> Tensor:
    """``(B, h, T, d_h) -> (B, T, D)``: the inverse of `split_heads` (concatenate the heads)."""
    check_array("x", x)
    check_rank("x", x.shape, 4, "(B, h, T, d_h)", exact=True)
    B, h, T, d_h = x.shape
    x = x.transpose(1, 2)  # (B, h, T, d_h) -> (B, T, h, d_h), no longer contiguous
    return x.reshape(B, T, h * d_h)  # (B, T, h, d_h) -> (B, T, D); reshape copies, view would fail


def blank_linear(in_features: int, out_features: int, dtype: torch.dtype) -> nn.Linear:
    """A bias-free ``nn.Linear`` whose weight we fill ourselves.

    ``skip_init`` skips the default random init, so building a layer leaves torch's global random
    state alone (a learner's ``torch.manual_seed`` keeps meaning what it did).
    """
    layer: nn.Linear = skip_init(  # type: ignore[no-untyped-call]
        nn.Linear, in_features, out_features, bias=False, dtype=dtype
    )
    return layer


class MultiHead(nn.Module):
    """Multi-head attention as an ``nn.Module`` with four bias-free ``nn.Linear`` layers.

    ``wq, wk, wv, wo`` hold the same numbers as `numpy_core.MultiHead` with the same seed:
    ``layer.wq.weight == numpy_layer.wq.T`` because ``nn.Linear`` stores ``(out, in)``.
    """

    def __init__(self, width: int, heads: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> None:
        check_layer_sizes(width, heads)
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise TypeError(f"dtype must be a floating-point type such as torch.float32 or torch.float64, got {dtype}")
        super().__init__()
        self.width = width
        self.heads = heads
        self.head_width = width // heads
        self.dtype = dtype
        weights = init_weights(width, seed)
        self.wq = blank_linear(width, width, dtype)
        self.wk = blank_linear(width, width, dtype)
        self.wv = blank_linear(width, width, dtype)
        self.wo = blank_linear(width, width, dtype)
        with torch.no_grad():
            for name, linear in (("wq", self.wq), ("wk", self.wk), ("wv", self.wv), ("wo", self.wo)):
                linear.weight.copy_(torch.from_numpy(weights[name].T))  # (in, out) -> (out, in)

    def forward(
        self, query: Tensor, context: Tensor | None = None, allowed: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``query (B, T, D)`` to ``context (B, S, D)`` (``None``: self-attention).

        ``allowed`` (``True`` = may attend) has shape ``(T, S)``, ``(B, T, S)`` or a shape
        broadcastable to ``(B, h, T, S)``. Returns ``(output (B, T, D), weights (B, h, T, S))``.
        """
        context = query if context is None else context
        check_layer_array("query", query, self.dtype, "torch")
        check_layer_array("context", context, self.dtype, "torch")
        B, T, S = check_layer_inputs(query.shape, context.shape, self.width)
        q = split_heads(self.wq(query), self.heads)  # (B, T, D) -> (B, h, T, d_h)
        k = split_heads(self.wk(context), self.heads)  # (B, S, D) -> (B, h, S, d_h)
        v = split_heads(self.wv(context), self.heads)  # (B, S, D) -> (B, h, S, d_h)
        if allowed is not None:
            allowed = layer_mask(allowed, B, self.heads, T, S, "torch")  # -> broadcastable to (B, h, T, S)
        heads_out, weights = attention(q, k, v, allowed)  # (B, h, T, d_h), (B, h, T, S)
        return self.wo(merge_heads(heads_out)), weights  # (B, T, D) -> (B, T, D)

    def extra_repr(self) -> str:
        return f"width={self.width}, heads={self.heads}, d_h={self.head_width}"


def __getattr__(name: str) -> object:
    """Lesson 05's grouped-query layer, reachable from here too: ``torch_core.GroupedQueryAttention``.

    It lives in `lessons_lib.gqa_torch` (which builds on this module) and is loaded on first use.
    """
    if name in ("GroupedQueryAttention", "from_multihead", "repeat_kv"):
        from lessons_lib import gqa_torch

        return getattr(gqa_torch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
