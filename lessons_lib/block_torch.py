"""The pre-norm transformer block in PyTorch, mirroring `lessons_lib.block_numpy` line for line (lesson 09).

Differences from the NumPy version are only where the libraries differ: ``nn.Linear`` stores its
weight as ``(out, in)``, and the LayerNorm gains and biases live in ``nn.LayerNorm`` modules (their
``weight`` is the gain), so ``state_dict()`` has the keys PyTorch users expect. `Block.from_encoder_layer`
and `Block.to_encoder_layer` copy weights from and to PyTorch's own ``nn.TransformerEncoderLayer``
(``norm_first=True``, ``batch_first=True``, no dropout), which computes the same function.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils import skip_init

from lessons_lib.block_numpy import ACTIVATIONS, init_block_weights, weight_shapes
from lessons_lib.mha_torch import MultiHead, causal_mask
from lessons_lib.validation import (
    NORM_OVERFLOW,
    check_array,
    check_eps,
    check_finite,
    check_flag,
    check_float_dtype,
    check_norm_inputs,
    check_overflow,
    check_same_dtype,
    check_weight,
    check_width,
)

__all__ = ["Block", "activate", "layer_norm"]

# nn.Linear's (out, in) layouts: block_numpy.LAYOUTS transposed.
TORCH_LAYOUTS = {
    "wq": "(D, D)",
    "wk": "(D, D)",
    "wv": "(D, D)",
    "wo": "(D, D)",
    "w_in": "(F, D)",
    "b_in": "(F,)",
    "w_out": "(D, F)",
}


def layer_norm(x: Tensor, gain: Tensor, bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """LayerNorm over the last axis of ``x (..., D)``; see `block_numpy.layer_norm` (a finite ``x``
    whose variance overflows is refused the same way)."""
    check_norm_inputs(x, gain, bias, eps, "torch")
    check_finite("x", x)
    return _layer_norm(x, gain, bias, eps)


def _layer_norm(x: Tensor, gain: Tensor, bias: Tensor | None, eps: float) -> Tensor:
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1): the biased variance, as nn.LayerNorm
    check_overflow("LayerNorm", var, {"x": x}, NORM_OVERFLOW)
    y = (x - mean) / torch.sqrt(var + eps) * gain
    return y if bias is None else y + bias


def activate(z: Tensor, activation: str) -> Tensor:
    """``relu(z) = max(z, 0)`` or the exact ``gelu(z) = z * Phi(z)`` (``Phi``: the normal CDF)."""
    check_array("z", z, "torch", "(...)")
    if activation == "relu":
        return torch.clamp(z, min=0)
    if activation == "gelu":
        return z * 0.5 * (1.0 + torch.erf(z / math.sqrt(2.0)))
    raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")


def _linear(weight: Tensor, bias: Tensor | None) -> nn.Linear:
    """An ``nn.Linear`` holding copies of ``weight (out, in)`` and ``bias (out,)``; no random init drawn."""
    out_features, in_features = weight.shape
    layer: nn.Linear = skip_init(  # type: ignore[no-untyped-call]
        nn.Linear, in_features, out_features, bias=bias is not None, dtype=weight.dtype, device=weight.device
    )
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias)
    return layer


def _norm(gain: Tensor, bias: Tensor | None, eps: float) -> nn.LayerNorm:
    norm = nn.LayerNorm(gain.shape[0], eps=eps, bias=bias is not None, dtype=gain.dtype, device=gain.device)
    with torch.no_grad():
        norm.weight.copy_(gain)
        if bias is not None:
            norm.bias.copy_(bias)
    return norm


def _torch_layout(name: str, array: Any, dtype: torch.dtype) -> Tensor:
    """A NumPy ``(in, out)`` array as a tensor in ``nn.Linear``'s ``(out, in)`` layout (vectors unchanged)."""
    return torch.from_numpy(array.T.copy() if array.ndim == 2 else array.copy()).to(dtype)


def _activation_name(activation: Any) -> str | None:
    """``"relu"`` or ``"gelu"`` for the forms ``nn.TransformerEncoderLayer`` keeps: the function
    (``F.relu``, ``F.gelu``, from a name), the module (``nn.ReLU()``, ``nn.GELU()`` with the exact
    erf form); ``None`` for anything else (tanh-approximated GELU included)."""
    if activation is F.relu or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is F.gelu or (isinstance(activation, nn.GELU) and activation.approximate == "none"):
        return "gelu"
    return None


class Block(nn.Module):
    """A pre-norm transformer block as an ``nn.Module``; the same numbers as `block_numpy.Block`.

    Submodules: ``attention`` (`mha_torch.MultiHead`), ``norm1``, ``norm2`` (``nn.LayerNorm``: the
    gain is ``.weight``), ``ffn_in`` ``(D -> F)`` and ``ffn_out`` ``(F -> D)`` (``nn.Linear``).

    Weights and inputs must be finite; a finite input so large that a LayerNorm's variance or the
    attention scores overflow is refused with a ``ValueError`` that says so (not rescaled).
    """

    def __init__(
        self,
        width: int,
        heads: int,
        hidden: int,
        seed: int = 0,
        dtype: torch.dtype = torch.float32,
        activation: str = "relu",
        bias: bool = True,
        eps: float = 1e-5,
    ) -> None:
        dtype = check_float_dtype(dtype, "torch")
        weights = {
            name: _torch_layout(name, w, dtype)
            for name, w in init_block_weights(width, heads, hidden, seed, bias).items()
        }
        super().__init__()
        self._set_weights(weights, int(heads), activation, eps)

    @classmethod
    def from_weights(cls, weights: dict[str, Tensor], heads: int, activation: str = "relu", eps: float = 1e-5) -> Block:
        """A block holding copies of the given tensors, named as in `block_numpy.weight_shapes` but in
        ``nn.Linear``'s ``(out, in)`` layout (``w_in`` is ``(F, D)``). All four biases or none."""
        if not isinstance(weights, dict) or "w_in" not in weights or "wq" not in weights:
            raise TypeError("weights must be a dict of tensors with the names of weight_shapes(), e.g. 'wq', 'w_in'")
        check_array("wq", weights["wq"], "torch", "(D, D)")
        check_array("w_in", weights["w_in"], "torch", "(F, D)")
        D, F_ = int(weights["wq"].shape[0]), int(weights["w_in"].shape[0])
        if weights["w_in"].shape[1] != D:
            flipped = "; it looks like NumPy's (in, out) layout: pass w_in.T" if weights["w_in"].shape[0] == D else ""
            raise ValueError(
                f"w_in must have shape (F, D) = (F, {D}), nn.Linear's (out, in) layout with D={D} read from wq, "
                f"got {tuple(weights['w_in'].shape)}{flipped}"
            )
        with_bias, without = weight_shapes(D, F_, True), weight_shapes(D, F_, False)
        if set(weights) not in (set(with_bias), set(without)):
            raise ValueError(
                f"weights must hold exactly {sorted(without)}, plus {sorted(set(with_bias) - set(without))} "
                f"for a block with biases; got {sorted(weights)}"
            )
        for name, shape in weight_shapes(D, F_, set(weights) == set(with_bias)).items():
            check_weight(name, weights[name], shape[::-1], "torch", TORCH_LAYOUTS.get(name, "(D,)"))
        check_same_dtype(weights)
        block = cls.__new__(cls)
        nn.Module.__init__(block)
        block._set_weights(dict(weights), int(heads), activation, eps)
        return block

    def _set_weights(self, w: dict[str, Tensor], heads: int, activation: str, eps: float) -> None:
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        eps = check_eps(eps)
        self.attention = MultiHead.from_weights(w["wq"], w["wk"], w["wv"], w["wo"], heads)
        self.norm1 = _norm(w["norm1_gain"], w.get("norm1_bias"), eps)
        self.norm2 = _norm(w["norm2_gain"], w.get("norm2_bias"), eps)
        self.ffn_in, self.ffn_out = _linear(w["w_in"], w.get("b_in")), _linear(w["w_out"], w.get("b_out"))
        self.activation, self.eps = activation, eps

    @property
    def width(self) -> int:
        """``D``."""
        return self.attention.width

    @property
    def hidden(self) -> int:
        """``F``, the feed-forward width (often ``4 D``)."""
        return int(self.ffn_in.weight.shape[0])

    @property
    def dtype(self) -> torch.dtype:
        """The parameters' dtype (follows ``.double()``, ``.to(...)``); inputs must have it too."""
        return self.attention.dtype

    def ffn(self, z: Tensor) -> Tensor:
        """The feed-forward sub-layer on ``z (B, T, D)``: each position on its own, ``(B, T, D)``."""
        check_array("z", z, "torch", "(B, T, D)", self.dtype)
        check_width("z", tuple(z.shape), self.width)
        return self._ffn(z)

    def _ffn(self, z: Tensor) -> Tensor:
        hidden = self.ffn_in(z)  # (B, T, D) -> (B, T, F)
        out: Tensor = self.ffn_out(activate(hidden, self.activation))  # (B, T, F) -> (B, T, D)
        return out

    def forward(self, x: Tensor, causal: bool = True) -> tuple[Tensor, Tensor]:
        """The block on the residual stream ``x (B, T, D)``; ``causal``: position ``t`` sees ``0 .. t``.

        Returns ``(new stream (B, T, D), attention weights (B, h, T, T))``.
        """
        check_array("x", x, "torch", "(B, T, D)", self.dtype)
        check_width("x", tuple(x.shape), self.width)
        check_finite("x", x)
        if x.shape[1] == 0:  # a softmax over no position is undefined (the NumPy block says the same)
            raise ValueError(f"x has no tokens (T=0, shape {tuple(x.shape)}); give at least one token")
        allowed = causal_mask(x.shape[1]).to(x.device) if check_flag("causal", causal) else None
        normalised = _layer_norm(x, self.norm1.weight, self.norm1.bias, self.eps)
        attended, weights = self.attention(normalised, allowed=allowed)
        stream = x + attended  # the heads write into the stream
        stream = stream + self._ffn(_layer_norm(stream, self.norm2.weight, self.norm2.bias, self.eps))  # the FFN too
        check_overflow("Block", stream, {"x": x})
        return stream, weights

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}, eps={self.eps}"

    # ----- PyTorch's own layer -------------------------------------------------------------------
    @classmethod
    def from_encoder_layer(cls, layer: nn.TransformerEncoderLayer) -> Block:
        """Copy the weights of ``nn.TransformerEncoderLayer(..., norm_first=True, batch_first=True)``.

        The layer must not use dropout, and its attention biases (``in_proj_bias``, ``out_proj.bias``)
        must be absent (``bias=False``) or zero, because `mha_torch.MultiHead` has none.
        """
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(f"layer must be an nn.TransformerEncoderLayer, got {type(layer).__name__}")
        if not (layer.norm_first and layer.self_attn.batch_first):
            raise ValueError("layer must be built with norm_first=True (pre-norm) and batch_first=True")
        if any(d.p != 0 for d in (layer.dropout, layer.dropout1, layer.dropout2)) or layer.self_attn.dropout != 0:
            raise ValueError("layer must be built with dropout=0.0: the block has no dropout")
        attn = layer.self_attn
        for name, b in (("self_attn.in_proj_bias", attn.in_proj_bias), ("self_attn.out_proj.bias", attn.out_proj.bias)):
            if b is not None and bool(b.detach().any()):
                raise ValueError(f"{name} is not zero; MultiHead has no attention biases (use bias=False)")
        activation = _activation_name(layer.activation)
        if activation is None:
            raise ValueError(
                f"layer.activation must be relu or exact gelu (the function F.relu / F.gelu, the module "
                f"nn.ReLU() / nn.GELU(), or the name), got {layer.activation!r}"
            )
        if layer.norm1.eps != layer.norm2.eps:
            raise ValueError(f"norm1 and norm2 must share one eps, got {layer.norm1.eps} and {layer.norm2.eps}")
        wq, wk, wv = attn.in_proj_weight.detach().chunk(3)  # in_proj_weight (3D, D): q, k, v stacked
        weights = {"wq": wq, "wk": wk, "wv": wv, "wo": attn.out_proj.weight.detach()}
        weights |= {"norm1_gain": layer.norm1.weight.detach(), "norm2_gain": layer.norm2.weight.detach()}
        weights |= {"w_in": layer.linear1.weight.detach(), "w_out": layer.linear2.weight.detach()}
        if layer.linear1.bias is not None:
            weights |= {"norm1_bias": layer.norm1.bias.detach(), "norm2_bias": layer.norm2.bias.detach()}
            weights |= {"b_in": layer.linear1.bias.detach(), "b_out": layer.linear2.bias.detach()}
        return cls.from_weights(weights, attn.num_heads, activation, float(layer.norm1.eps))

    def to_encoder_layer(self) -> nn.TransformerEncoderLayer:
        """An ``nn.TransformerEncoderLayer`` computing this block (call it with a causal ``src_mask``).

        With biases, its attention biases are set to zero. Building it leaves torch's random state alone.
        """
        bias = self.ffn_in.bias is not None
        with torch.random.fork_rng(devices=[]):  # its random init is overwritten below
            layer = nn.TransformerEncoderLayer(
                self.width,
                self.attention.heads,
                self.hidden,
                dropout=0.0,
                activation=self.activation,
                layer_norm_eps=self.eps,
                batch_first=True,
                norm_first=True,
                bias=bias,
                dtype=self.dtype,
            )
        a = self.attention
        with torch.no_grad():
            layer.self_attn.in_proj_weight.copy_(torch.cat([a.wq.weight, a.wk.weight, a.wv.weight]))
            layer.self_attn.out_proj.weight.copy_(a.wo.weight)
            for mine, theirs in (
                (self.norm1, layer.norm1),
                (self.norm2, layer.norm2),
                (self.ffn_in, layer.linear1),
                (self.ffn_out, layer.linear2),
            ):
                theirs.load_state_dict(mine.state_dict())
            if bias:
                layer.self_attn.in_proj_bias.zero_()
                layer.self_attn.out_proj.bias.zero_()
        return layer
