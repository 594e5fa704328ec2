"""The pre-norm transformer block in NumPy (lesson 09): the multi-head layer put to work.

The block reads and writes the *residual stream* ``x (B, T, D)``; each sub-layer reads a normalised
copy and adds its output back::

    x = x + MHA(LN1(x))      # heads move information between positions (causal: only from the past)
    x = x + FFN(LN2(x))      # FFN(z) = act(z @ w_in + b_in) @ w_out + b_out, at each position alone

``LN`` is LayerNorm over the ``D`` features of each position:
``LN(z) = (z - mean(z)) / sqrt(var(z) + eps) * gain + bias`` (``var`` divides by ``D``, not ``D - 1``).
RMSNorm (used by Llama and most recent models) differs in two ways: it does not subtract the mean,
``z / sqrt(mean(z**2) + eps) * gain``, and it has no bias.

The attention sub-layer is `mha_numpy.MultiHead` (bias-free, as in lessons 01-04). With
``bias=False`` the whole block is bias-free (no LayerNorm or FFN biases either), which is exactly
PyTorch's ``nn.TransformerEncoderLayer(..., bias=False, norm_first=True)``; `lessons_lib.block_torch`
mirrors this module line for line and converts to and from that layer.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import DTypeLike, NDArray

from lessons_lib.mha_numpy import MultiHead, causal_mask
from lessons_lib.validation import (
    NORM_OVERFLOW,
    check_array,
    check_eps,
    check_finite,
    check_flag,
    check_float_dtype,
    check_int,
    check_norm_inputs,
    check_overflow,
    check_same_dtype,
    check_weight,
    check_width,
)

Array = NDArray[np.floating[Any]]

__all__ = ["ACTIVATIONS", "Block", "activate", "init_block_weights", "layer_norm", "weight_shapes"]

LAYOUTS = {
    "wq": "(D, D)",
    "wk": "(D, D)",
    "wv": "(D, D)",
    "wo": "(D, D)",
    "w_in": "(D, F)",
    "b_in": "(F,)",
    "w_out": "(F, D)",
}
ACTIVATIONS = ("relu", "gelu")  # the two nn.TransformerEncoderLayer accepts by name
_erf = np.vectorize(math.erf, otypes=[np.float64])  # NumPy has no erf; math.erf is exact to float64


def layer_norm(x: Array, gain: Array, bias: Array | None = None, eps: float = 1e-5) -> Array:
    """LayerNorm over the last axis of ``x (..., D)`` with ``gain (D,)`` and optional ``bias (D,)``.

    ``x`` must be finite; a finite ``x`` so large that its variance overflows is refused with a
    ``ValueError`` that says so (it would silently normalise to 0).
    """
    check_norm_inputs(x, gain, bias, eps, "numpy")
    check_finite("x", x)
    return _layer_norm(x, gain, bias, eps)


def _layer_norm(x: Array, gain: Array, bias: Array | None, eps: float) -> Array:
    mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below, in words
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # (..., 1): the biased variance, as nn.LayerNorm
    check_overflow("LayerNorm", var, {"x": x}, NORM_OVERFLOW)
    y: Array = (x - mean) / np.sqrt(var + eps) * gain
    return y if bias is None else y + bias


def activate(z: Array, activation: str) -> Array:
    """``relu(z) = max(z, 0)`` or the exact ``gelu(z) = z * Phi(z)`` (``Phi``: the normal CDF)."""
    check_array("z", z, "numpy", "(...)")
    if activation == "relu":
        return np.maximum(z, 0)
    if activation == "gelu":
        out: Array = (z * 0.5 * (1.0 + _erf(z / math.sqrt(2.0)))).astype(z.dtype)
        return out
    raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")


def weight_shapes(width: int, hidden: int, bias: bool = True) -> dict[str, tuple[int, ...]]:
    """The block's arrays and their NumPy ``(in, out)`` shapes; ``hidden`` is the FFN width ``F``."""
    D, F = check_int("width", width, symbol="D"), check_int("hidden", hidden, symbol="F")
    bias = check_flag("bias", bias)
    shapes: dict[str, tuple[int, ...]] = {"wq": (D, D), "wk": (D, D), "wv": (D, D), "wo": (D, D)}
    shapes |= {"norm1_gain": (D,), "norm2_gain": (D,), "w_in": (D, F), "w_out": (F, D)}
    if bias:
        shapes |= {"norm1_bias": (D,), "norm2_bias": (D,), "b_in": (F,), "b_out": (D,)}
    return shapes


def init_block_weights(
    width: int, heads: int, hidden: int, seed: int = 0, bias: bool = True
) -> dict[str, NDArray[np.float64]]:
    """Float64 starting weights: attention from `mha_numpy.init_weights` (via `MultiHead`), gains 1,
    LayerNorm biases 0, FFN weights and biases uniform in ``[-1/sqrt(fan_in), 1/sqrt(fan_in)]``."""
    width, hidden = check_int("width", width, symbol="D"), check_int("hidden", hidden, symbol="F")
    bias = check_flag("bias", bias)
    attention = MultiHead(width, heads, seed)
    rng = np.random.default_rng((seed, 1))  # a stream of its own, apart from the attention weights
    shapes = weight_shapes(width, hidden, bias)
    weights = {name: getattr(attention, name) for name in ("wq", "wk", "wv", "wo")}
    for name in ("w_in", "b_in", "w_out", "b_out"):
        if name in shapes:
            bound = 1.0 / math.sqrt(width if name.endswith("_in") else hidden)
            weights[name] = rng.uniform(-bound, bound, size=shapes[name])
    for name in ("norm1", "norm2"):
        weights[f"{name}_gain"] = np.ones(width)
        if bias:
            weights[f"{name}_bias"] = np.zeros(width)
    return weights


class Block:
    """A pre-norm transformer block, forward only. Weights are ``(in, out)`` arrays: ``y = x @ w``.

    Attributes: ``attention`` (a `MultiHead`), ``norm1_gain, norm1_bias, norm2_gain, norm2_bias``
    ``(D,)`` (biases ``None`` when ``bias=False``), ``w_in (D, F)``, ``b_in (F,)``, ``w_out (F, D)``,
    ``b_out (D,)``, ``activation`` and ``eps`` (a finite positive float).

    Weights and inputs must be finite; a finite input so large that a LayerNorm's variance or the
    attention scores overflow is refused with a ``ValueError`` that says so (not rescaled).
    """

    def __init__(
        self,
        width: int,
        heads: int,
        hidden: int,
        seed: int = 0,
        dtype: DTypeLike = np.float64,
        activation: str = "relu",
        bias: bool = True,
        eps: float = 1e-5,
    ) -> None:
        dtype = check_float_dtype(dtype, "numpy")
        weights = {name: w.astype(dtype) for name, w in init_block_weights(width, heads, hidden, seed, bias).items()}
        self._set_weights(weights, int(heads), activation, eps)

    @classmethod
    def from_weights(cls, weights: dict[str, Array], heads: int, activation: str = "relu", eps: float = 1e-5) -> Block:
        """A block holding the given ``(in, out)`` arrays (named as in `weight_shapes`, all one dtype).

        Give all four biases or none (``bias=False``). From a PyTorch block, transpose each matrix.
        """
        if not isinstance(weights, dict) or "w_in" not in weights or "wq" not in weights:
            raise TypeError("weights must be a dict of arrays with the names of weight_shapes(), e.g. 'wq', 'w_in'")
        check_array("wq", weights["wq"], "numpy", "(D, D)")
        check_array("w_in", weights["w_in"], "numpy", "(D, F)")
        D, F = int(weights["wq"].shape[0]), int(weights["w_in"].shape[1])
        if weights["w_in"].shape[0] != D:
            flipped = "; it looks transposed: pass w_in.T" if weights["w_in"].shape[1] == D else ""
            raise ValueError(
                f"w_in must have shape (D, F) = ({D}, F), with D={D} read from wq (NumPy's (in, out) layout), "
                f"got {tuple(weights['w_in'].shape)}{flipped}"
            )
        with_bias, without = weight_shapes(D, F, True), weight_shapes(D, F, False)
        if set(weights) not in (set(with_bias), set(without)):
            raise ValueError(
                f"weights must hold exactly {sorted(without)}, plus {sorted(set(with_bias) - set(without))} "
                f"for a block with biases; got {sorted(weights)}"
            )
        for name, shape in weight_shapes(D, F, set(weights) == set(with_bias)).items():
            check_weight(name, weights[name], shape, "numpy", LAYOUTS.get(name, "(D,)"))
        check_same_dtype(weights)
        block = cls.__new__(cls)
        block._set_weights(dict(weights), int(heads), activation, eps)
        return block

    def _set_weights(self, w: dict[str, Array], heads: int, activation: str, eps: float) -> None:
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        eps = check_eps(eps)
        self.attention = MultiHead.from_weights(w["wq"], w["wk"], w["wv"], w["wo"], heads)
        self.norm1_gain, self.norm1_bias = w["norm1_gain"], w.get("norm1_bias")
        self.norm2_gain, self.norm2_bias = w["norm2_gain"], w.get("norm2_bias")
        self.w_in, self.b_in, self.w_out, self.b_out = w["w_in"], w.get("b_in"), w["w_out"], w.get("b_out")
        self.activation, self.eps = activation, eps

    @property
    def width(self) -> int:
        """``D``."""
        return self.attention.width

    @property
    def hidden(self) -> int:
        """``F``, the feed-forward width (often ``4 D``)."""
        return int(self.w_in.shape[1])

    @property
    def dtype(self) -> np.dtype[Any]:
        """The weights' dtype; inputs must have it too."""
        return self.attention.dtype

    def ffn(self, z: Array) -> Array:
        """The feed-forward sub-layer on ``z (B, T, D)``: each position on its own, ``(B, T, D)``."""
        check_array("z", z, "numpy", "(B, T, D)", self.dtype)
        check_width("z", tuple(z.shape), self.width)
        return self._ffn(z)

    def _ffn(self, z: Array) -> Array:
        hidden = z @ self.w_in if self.b_in is None else z @ self.w_in + self.b_in  # (B, T, D) -> (B, T, F)
        out = activate(hidden, self.activation) @ self.w_out  # (B, T, F) -> (B, T, D)
        return out if self.b_out is None else out + self.b_out

    def __call__(self, x: Array, causal: bool = True) -> tuple[Array, Array]:
        """The block on the residual stream ``x (B, T, D)``; ``causal``: position ``t`` sees ``0 .. t``.

        Returns ``(new stream (B, T, D), attention weights (B, h, T, T))``.

        ``x`` must be finite. A finite ``x`` so large that a LayerNorm's variance (or a later sum)
        overflows is refused with a ``ValueError`` that says so (the block does not rescale it).
        """
        check_array("x", x, "numpy", "(B, T, D)", self.dtype)
        check_width("x", tuple(x.shape), self.width)
        check_finite("x", x)
        if x.shape[1] == 0:  # a softmax over no position is undefined (the torch block says the same)
            raise ValueError(f"x has no tokens (T=0, shape {tuple(x.shape)}); give at least one token")
        allowed = causal_mask(x.shape[1]) if check_flag("causal", causal) else None
        normalised = _layer_norm(x, self.norm1_gain, self.norm1_bias, self.eps)  # finite: its variance was checked
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below, in words
            attended, weights = self.attention._forward(normalised, normalised, allowed)  # checked above
            stream = x + attended  # the heads write into the stream
            stream = stream + self._ffn(_layer_norm(stream, self.norm2_gain, self.norm2_bias, self.eps))  # the FFN too
        check_overflow("Block", stream, {"x": x})
        return stream, weights

    def __repr__(self) -> str:
        bias = self.b_in is not None
        return f"Block(width={self.width}, heads={self.attention.heads}, hidden={self.hidden}, bias={bias})"
