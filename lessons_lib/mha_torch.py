"""Multi-head attention in PyTorch, mirroring `lessons_lib.mha_numpy` line for line (lesson 03).

Differences from the NumPy version are only where the libraries differ: ``transpose`` swaps two
axes (``permute`` takes all of them), and ``nn.Linear`` stores its weight as ``(out, in)``, so the
NumPy ``(in, out)`` matrices are copied in transposed.

The layer is an ordinary ``nn.Module``: ``.double()``, ``.to(dtype)``, ``.to(device)`` and
``load_state_dict`` just work, because its dtype is read from its parameters, never stored.
``state_dict()`` keys: ``wq.weight``, ``wk.weight``, ``wv.weight``, ``wo.weight``, each ``(out, in)``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn.utils import skip_init

from lessons_lib.mha_numpy import init_weights
from lessons_lib.validation import (
    causal_sizes,
    check_array,
    check_float_dtype,
    check_layer_inputs,
    check_overflow,
    check_qkv,
    check_same_dtype,
    check_weight,
    head_width,
    layer_mask,
)

__all__ = ["MultiHead", "attention", "causal_mask", "merge_heads", "split_heads"]


def causal_mask(T: int, S: int | None = None) -> Tensor:
    """Boolean ``(T, S)`` mask, ``True`` = may attend; see `mha_numpy.causal_mask`."""
    T, S = causal_sizes(T, S)
    return torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T)


def attention(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention; same contract as `mha_numpy.attention`.

    ``q (..., T, d)``, ``k (..., S, d)``, ``v (..., S, d_v)``, ``allowed`` boolean, broadcastable
    to ``(..., T, S)``, ``True`` = may attend. Returns ``(output (..., T, d_v), weights (..., T, S))``.
    Raises ``ValueError`` when a query row has no allowed position (instead of returning NaN), and
    when finite inputs are so large that the scores overflow.
    """
    check_qkv(q, k, v, allowed, "torch")
    output, weights = _attention(q, k, v, allowed)
    check_overflow("attention", output, {"q": q, "k": k, "v": v})
    return output, weights


def _attention(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None) -> tuple[Tensor, Tensor]:
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (..., T, d) @ (..., d, S) -> (..., T, S)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, -math.inf)  # a blocked position gets weight exp(-inf) = 0
    weights = torch.softmax(scores, dim=-1)  # (..., T, S)
    return weights @ v, weights  # (..., T, S) @ (..., S, d_v) -> (..., T, d_v)


def split_heads(x: Tensor, heads: int) -> Tensor:
    """``(B, T, D) -> (B, h, T, d_h)``: reshape the last axis into heads, then move heads forward."""
    check_array("x", x, "torch", "(B, T, D)", floating=False)  # any dtype: a split only moves numbers
    head_width(x.shape[-1], heads)
    return _split_heads(x, int(heads))


def _split_heads(x: Tensor, heads: int) -> Tensor:
    B, T, D = x.shape
    x = x.reshape(B, T, heads, D // heads)  # (B, T, D) -> (B, T, h, d_h)
    return x.transpose(1, 2)  # (B, T, h, d_h) -> (B, h, T, d_h)


def merge_heads(x: Tensor) -> Tensor:
    """``(B, h, T, d_h) -> (B, T, D)``: the inverse of `split_heads` (concatenate the heads)."""
    check_array("x", x, "torch", "(B, h, T, d_h)", floating=False)
    return _merge_heads(x)


def _merge_heads(x: Tensor) -> Tensor:
    B, h, T, d_h = x.shape
    x = x.transpose(1, 2)  # (B, h, T, d_h) -> (B, T, h, d_h), no longer contiguous
    return x.reshape(B, T, h * d_h)  # (B, T, h, d_h) -> (B, T, D); reshape copies, view would fail


def linear(weight: Tensor) -> nn.Linear:
    """A bias-free ``nn.Linear`` holding a copy of ``weight (out, in)``.

    ``skip_init`` skips the default random init, so building a layer leaves torch's global random
    state alone (a learner's ``torch.manual_seed`` keeps meaning what it did).
    """
    out_features, in_features = weight.shape
    layer: nn.Linear = skip_init(  # type: ignore[no-untyped-call]
        nn.Linear, in_features, out_features, bias=False, dtype=weight.dtype, device=weight.device
    )
    with torch.no_grad():
        layer.weight.copy_(weight)
    return layer


def linear_weights(width: int, seed: int, dtype: torch.dtype) -> dict[str, Tensor]:
    """`mha_numpy.init_weights` as ``(out, in)`` tensors of ``dtype``, ready for `linear`."""
    return {name: torch.from_numpy(w.T.copy()).to(dtype) for name, w in init_weights(width, seed).items()}


class MultiHead(nn.Module):
    """Multi-head attention as an ``nn.Module`` with four bias-free ``nn.Linear`` layers.

    ``wq, wk, wv, wo`` hold the same numbers as `mha_numpy.MultiHead` with the same seed:
    ``layer.wq.weight == numpy_layer.wq.T`` because ``nn.Linear`` stores ``(out, in)``.
    `MultiHead.from_weights` builds one from given ``(out, in)`` tensors.
    """

    def __init__(self, width: int, heads: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> None:
        head_width(width, heads)
        w = linear_weights(width, seed, check_float_dtype(dtype, "torch"))
        super().__init__()
        self._set_weights(w["wq"], w["wk"], w["wv"], w["wo"], heads=int(heads))

    @classmethod
    def from_weights(cls, wq: Tensor, wk: Tensor, wv: Tensor, wo: Tensor, heads: int) -> MultiHead:
        """A layer holding copies of the given ``(out, in) = (D, D)`` tensors (``nn.Linear``'s layout).

        They must share one floating dtype, which becomes the layer's, and hold finite numbers. NumPy
        ``(in, out)`` arrays are transposed: pass ``torch.from_numpy(w.T.copy())``.
        """
        check_array("wq", wq, "torch", "(D, D)")
        D = int(wq.shape[0])
        for name, w in (("wq", wq), ("wk", wk), ("wv", wv), ("wo", wo)):
            check_weight(name, w, (D, D), "torch", "(D, D)")
        check_same_dtype({"wq": wq, "wk": wk, "wv": wv, "wo": wo})
        head_width(D, heads)
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer._set_weights(wq, wk, wv, wo, heads=int(heads))
        return layer

    def _set_weights(self, wq: Tensor, wk: Tensor, wv: Tensor, wo: Tensor, heads: int) -> None:
        self.wq, self.wk, self.wv, self.wo = linear(wq), linear(wk), linear(wv), linear(wo)
        self.heads = heads

    @property
    def width(self) -> int:
        """``D``, read from the weights."""
        return int(self.wq.weight.shape[1])

    @property
    def head_width(self) -> int:
        """``d_h = D / h``."""
        return self.width // self.heads

    @property
    def dtype(self) -> torch.dtype:
        """The parameters' dtype (follows ``.double()``, ``.to(...)``); inputs must have it too."""
        return self.wq.weight.dtype

    def forward(
        self, query: Tensor, context: Tensor | None = None, allowed: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``query (B, T, D)`` to ``context (B, S, D)`` (``None``: self-attention).

        ``allowed`` (``True`` = may attend) has shape ``(T, S)``, ``(B, T, S)`` or a shape
        broadcastable to ``(B, h, T, S)``. Returns ``(output (B, T, D), weights (B, h, T, S))``.

        Inputs must be finite. Finite inputs so large that the scores overflow are refused with a
        ``ValueError`` that says so (the layer does not rescale them).
        """
        context = query if context is None else context
        B, T, S = check_layer_inputs(query, context, self.width, self.dtype, "torch")
        allowed = layer_mask(allowed, B, self.heads, T, S, "torch")  # -> broadcastable to (B, h, T, S)
        q = _split_heads(self.wq(query), self.heads)  # (B, T, D) -> (B, h, T, d_h)
        k = _split_heads(self.wk(context), self.heads)  # (B, S, D) -> (B, h, S, d_h)
        v = _split_heads(self.wv(context), self.heads)  # (B, S, D) -> (B, h, S, d_h)
        heads_out, weights = _attention(q, k, v, allowed)  # (B, h, T, d_h), (B, h, T, S)
        output = self.wo(_merge_heads(heads_out))  # (B, T, D) -> (B, T, D)
        check_overflow("MultiHead", output, {"query": query, "context": context})
        return output, weights

    def extra_repr(self) -> str:
        return f"width={self.width}, heads={self.heads}, d_h={self.head_width}"
