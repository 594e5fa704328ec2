"""Multi-head latent attention (MLA), forward only, in NumPy (lesson 06).

MLA (DeepSeek-AI 2024, "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts
Language Model", arXiv:2405.04434, section 2.1) caches one small latent vector per token instead
of every head's keys and values, and rebuilds per-head keys and values from it.

Notation. Ours (SYLLABUS.md) first, the paper's in brackets. The paper multiplies column vectors by
``(out, in)`` matrices; we multiply row vectors by ``(in, out)`` arrays, so ``W^{DKV} == w_dkv.T``.

- ``D`` [d]: model width. ``h`` [n_h]: heads. ``B, T, S``: batch, query length, source length.
- ``d_c`` [d_c]: latent width, ``kv_lora_rank`` in DeepSeek's config files.
- ``d_nope`` [d_h]: per-head width of the position-free query/key part (``qk_nope_head_dim``).
- ``d_v`` [d_h]: per-head value width (``v_head_dim``); the paper uses ``d_h`` for both.
- ``d_rope`` [d_h^R]: width of the rotary part (``qk_rope_head_dim``).

Weights (drawn in this order from one NumPy stream, uniform in ``±1/sqrt(fan_in)``):

- ``w_dkv (D, d_c)`` [W^{DKV}]: down-projection, ``latent = x @ w_dkv`` [c_t^{KV}].
- ``w_uk (h, d_c, d_nope)`` [W^{UK}]: per-head key up-projection, ``k_i = latent @ w_uk[i]`` [k^C_{t,i}].
- ``w_uv (h, d_c, d_v)`` [W^{UV}]: per-head value up-projection [v^C_{t,i}].
- ``w_kr (D, d_rope)`` [W^{KR}]: the rotary key ``rope_key = RoPE(x @ w_kr)`` [k^R_t], one for all heads.
- ``w_q (h, D, d_nope)`` [W^{UQ} W^{DQ}]: per-head queries [q^C_{t,i}]. DeepSeek-V2 also squeezes
  the queries through a latent of width d_c' (1536); that saves training memory, not cache, so we
  project directly.
- ``w_qr (h, D, d_rope)`` [W^{QR}]: per-head rotary queries [q^R_{t,i}].
- ``w_o (h, d_v, D)`` [W^O]: output projection, ``out = sum_i o_i @ w_o[i]`` [u_t].

Head ``i`` attends with the query ``[q_i ; q^R_i]`` and the key ``[k_i ; k^R]`` and the scale
``1 / sqrt(d_nope + d_rope)``. The cache keeps ``latent`` and ``rope_key``: ``d_c + d_rope``
numbers per token and layer.

Absorption (paper, end of section 2.1.2): ``q_i . k_i = (q_i @ w_uk[i].T) . latent``, so the key
up-projection can be folded into the query side, and ``o_i @ w_o[i] = (weights @ latent) @
(w_uv[i] @ w_o[i])``, so the value up-projection folds into the output side. Attention then runs
against the cached latent directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lessons_lib.numpy_core import attention, causal_mask, softmax
from lessons_lib.rope import apply_rope
from lessons_lib.validation import (
    check_float,
    check_positive_int,
    check_rank,
    empty_rows_message,
    layer_mask,
)

__all__ = ["LatentAttention", "LatentCache", "mla_cache_bytes"]

Array = NDArray[np.floating]
Mask = NDArray[np.bool_]


def mla_cache_bytes(
    layers: int,
    latent_width: int,
    rope_width: int,
    tokens: int = 1,
    batch: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes MLA caches: ``layers x (d_c + d_rope) x tokens x batch x bytes``.

    No factor 2 and no head count: one latent (``d_c``) and one shared rotary key (``d_rope``) per
    token and layer serve every head's keys *and* values. ``bytes_per_element=1`` counts elements.
    Compare with `lessons_lib.kv_cache.kv_cache_bytes` (``2 x layers x h_kv x d_h x ...``).
    """
    sizes = {
        "layers": layers,
        "latent_width": latent_width,
        "rope_width": rope_width,
        "tokens": tokens,
        "batch": batch,
        "bytes_per_element": bytes_per_element,
    }
    for name, value in sizes.items():
        check_positive_int(name, value)
    return layers * (latent_width + rope_width) * tokens * batch * bytes_per_element


@dataclass
class LatentCache:
    """What MLA keeps per earlier token: ``latent (B, S, d_c)`` and ``rope_key (B, S, d_rope)``."""

    latent: Array
    rope_key: Array

    @property
    def length(self) -> int:
        """Number of cached tokens ``S``."""
        return int(self.latent.shape[1])

    @property
    def elements_per_token(self) -> int:
        """``d_c + d_rope``: numbers stored per token (per batch row, for this layer)."""
        return int(self.latent.shape[2] + self.rope_key.shape[2])

    def append(self, latent: Array, rope_key: Array) -> None:
        """Add ``latent (B, T_new, d_c)`` and ``rope_key (B, T_new, d_rope)`` at the end."""
        for name, new, old in (("latent", latent, self.latent), ("rope_key", rope_key, self.rope_key)):
            if new.ndim != 3 or new.shape[0] != old.shape[0] or new.shape[2] != old.shape[2]:
                raise ValueError(
                    f"{name} to append must have shape (B={old.shape[0]}, T_new, {old.shape[2]}), "
                    f"got {tuple(new.shape)}"
                )
        if latent.shape[1] != rope_key.shape[1]:
            raise ValueError(
                f"latent and rope_key must cover the same tokens, got {latent.shape[1]} and {rope_key.shape[1]}"
            )
        self.latent = np.concatenate([self.latent, latent], axis=1)
        self.rope_key = np.concatenate([self.rope_key, rope_key], axis=1)


class LatentAttention:
    """Multi-head latent attention for self-attention, forward only (see the module docstring).

    Args:
        width: model width ``D``.
        heads: number of heads ``h``.
        latent_width: ``d_c`` [kv_lora_rank], the cached latent per token.
        rope_width: ``d_rope`` [qk_rope_head_dim], even (RoPE rotates pairs).
        head_width: ``d_nope`` [qk_nope_head_dim]; defaults to ``D // h``.
        value_width: ``d_v`` [v_head_dim]; defaults to ``head_width``.
        seed: seed of the NumPy stream the weights are drawn from.
        base: RoPE base (10000).
    """

    def __init__(
        self,
        width: int,
        heads: int,
        latent_width: int,
        rope_width: int,
        head_width: int | None = None,
        value_width: int | None = None,
        seed: int = 0,
        base: float = 10000.0,
    ) -> None:
        check_positive_int("width", width)
        check_positive_int("heads", heads)
        head_width = width // heads if head_width is None else head_width
        value_width = head_width if value_width is None else value_width
        check_positive_int("head_width", head_width, " (with the default d_nope = D // h, make heads <= width)")
        check_positive_int("value_width", value_width)
        check_positive_int("latent_width", latent_width)
        check_positive_int("rope_width", rope_width)
        if rope_width % 2 != 0:
            raise ValueError(f"rope_width (d_rope) must be even because RoPE rotates pairs, got {rope_width}")
        self.width, self.heads = width, heads
        self.latent_width, self.rope_width = latent_width, rope_width
        self.head_width, self.value_width = head_width, value_width
        self.base = base
        rng = np.random.default_rng(seed)

        def draw(shape: tuple[int, ...], fan_in: int) -> NDArray[np.float64]:
            bound = 1.0 / math.sqrt(fan_in)
            return rng.uniform(-bound, bound, size=shape)

        D, h, d_c, d_r, d_n, d_v = width, heads, latent_width, rope_width, head_width, value_width
        self.w_dkv = draw((D, d_c), D)
        self.w_uk = draw((h, d_c, d_n), d_c)
        self.w_uv = draw((h, d_c, d_v), d_c)
        self.w_kr = draw((D, d_r), D)
        self.w_q = draw((h, D, d_n), D)
        self.w_qr = draw((h, D, d_r), D)
        self.w_o = draw((h, d_v, D), h * d_v)

    # ----- pieces shared by both routes -------------------------------------------------------
    def _check_x(self, name: str, x: Array) -> tuple[int, int]:
        check_float(name, x)
        if x.dtype != np.float64:
            raise TypeError(
                f"{name} has dtype {x.dtype} but LatentAttention computes in float64; convert the input "
                f"with {name}.astype(np.float64)"
            )
        check_rank(name, x.shape, 3, "(B, T, D)", exact=True)
        if x.shape[-1] != self.width:
            raise ValueError(
                f"{name} has width {x.shape[-1]} on its last axis but the layer width D is {self.width}; "
                f"make sure the last axis holds the features (got shape {tuple(x.shape)})"
            )
        return int(x.shape[0]), int(x.shape[1])

    def compress(self, x: Array, positions: NDArray[np.integer]) -> tuple[Array, Array]:
        """What the cache stores: ``latent (B, S, d_c)`` and the rotated ``rope_key (B, S, d_rope)``."""
        latent = x @ self.w_dkv  # (B, S, D) @ (D, d_c) -> (B, S, d_c)
        rope_key = apply_rope(x @ self.w_kr, positions, self.base)  # (B, S, d_rope), rotated once
        return latent, rope_key

    def queries(self, x: Array, positions: NDArray[np.integer]) -> tuple[Array, Array]:
        """Per-head ``q (B, h, T, d_nope)`` and rotated ``q_rope (B, h, T, d_rope)``."""
        q = np.einsum("btd,hdn->bhtn", x, self.w_q)  # (B, T, D) x (h, D, d_nope) -> (B, h, T, d_nope)
        q_rope = np.einsum("btd,hdr->bhtr", x, self.w_qr)  # -> (B, h, T, d_rope)
        return q, apply_rope(q_rope, positions, self.base)

    def _prepare_mask(self, allowed: Mask | None, B: int, T: int, S: int) -> Mask | None:
        if allowed is None:
            return None
        allowed = layer_mask(allowed, B, self.heads, T, S, "numpy")  # -> broadcastable to (B, h, T, S)
        if not np.all(np.any(allowed, axis=-1)):
            raise ValueError(empty_rows_message())
        return allowed

    # ----- the explicit route: rebuild every head's K and V -----------------------------------
    def explicit(self, x: Array, allowed: Mask | None = None) -> tuple[Array, Array]:
        """Self-attention over ``x (B, T, D)`` rebuilding per-head K, V from the latent.

        Returns ``(output (B, T, D), weights (B, h, T, T))``.
        """
        B, T = self._check_x("x", x)
        positions = np.arange(T)
        mask = self._prepare_mask(allowed, B, T, T)
        latent, rope_key = self.compress(x, positions)
        q, q_rope = self.queries(x, positions)
        k = np.einsum("bsc,hcn->bhsn", latent, self.w_uk)  # (B, S, d_c) x (h, d_c, d_nope) -> (B, h, S, d_nope)
        v = np.einsum("bsc,hcv->bhsv", latent, self.w_uv)  # -> (B, h, S, d_v)
        k_rope = np.broadcast_to(rope_key[:, None], (B, self.heads, T, self.rope_width))  # shared by heads
        q_full = np.concatenate([q, q_rope], axis=-1)  # (B, h, T, d_nope + d_rope)
        k_full = np.concatenate([k, k_rope], axis=-1)  # (B, h, S, d_nope + d_rope)
        heads_out, weights = attention(q_full, k_full, v, mask)  # (B, h, T, d_v), (B, h, T, S)
        return np.einsum("bhtv,hvd->btd", heads_out, self.w_o), weights  # -> (B, T, D)

    # ----- the absorbed route: attend against the latent --------------------------------------
    @property
    def absorbed_query_weight(self) -> NDArray[np.float64]:
        """``(h, D, d_c)``: ``w_q[i] @ w_uk[i].T``, the key up-projection folded into the queries."""
        absorbed: NDArray[np.float64] = np.einsum("hdn,hcn->hdc", self.w_q, self.w_uk)
        return absorbed

    @property
    def absorbed_output_weight(self) -> NDArray[np.float64]:
        """``(h, d_c, D)``: ``w_uv[i] @ w_o[i]``, the value up-projection folded into the output."""
        absorbed: NDArray[np.float64] = np.einsum("hcv,hvd->hcd", self.w_uv, self.w_o)
        return absorbed

    def _attend_latent(
        self, x: Array, positions: NDArray[np.integer], cache: LatentCache, mask: Mask | None
    ) -> tuple[Array, Array]:
        """Queries from ``x (B, T, D)`` attend to ``cache``; returns ``(output (B, T, D), weights)``."""
        q_latent = np.einsum("btd,hdc->bhtc", x, self.absorbed_query_weight)  # (B, h, T, d_c)
        q_rope = apply_rope(np.einsum("btd,hdr->bhtr", x, self.w_qr), positions, self.base)  # (B, h, T, d_rope)
        scores = (
            q_latent @ np.swapaxes(cache.latent, -1, -2)[:, None]  # (B, h, T, d_c) @ (B, 1, d_c, S)
            + q_rope @ np.swapaxes(cache.rope_key, -1, -2)[:, None]  # (B, h, T, d_rope) @ (B, 1, d_rope, S)
        ) / math.sqrt(self.head_width + self.rope_width)  # -> (B, h, T, S)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        weights = softmax(scores, axis=-1)
        context = weights @ cache.latent[:, None]  # (B, h, T, S) @ (B, 1, S, d_c) -> (B, h, T, d_c)
        return np.einsum("bhtc,hcd->btd", context, self.absorbed_output_weight), weights

    def absorbed(self, x: Array, allowed: Mask | None = None) -> tuple[Array, Array]:
        """Same as `explicit`, computed against the latent with the absorbed weights."""
        B, T = self._check_x("x", x)
        positions = np.arange(T)
        mask = self._prepare_mask(allowed, B, T, T)
        cache = LatentCache(*self.compress(x, positions))
        return self._attend_latent(x, positions, cache, mask)

    def __call__(self, x: Array, allowed: Mask | None = None, absorbed: bool = True) -> tuple[Array, Array]:
        """``(output (B, T, D), weights (B, h, T, T))``; ``absorbed`` picks the route (same numbers)."""
        return self.absorbed(x, allowed) if absorbed else self.explicit(x, allowed)

    # ----- decoding with the latent cache -----------------------------------------------------
    def new_cache(self, batch: int) -> LatentCache:
        """An empty cache for ``batch`` sequences."""
        check_positive_int("batch", batch)
        return LatentCache(np.zeros((batch, 0, self.latent_width)), np.zeros((batch, 0, self.rope_width)))

    def decode(self, x_new: Array, cache: LatentCache) -> Array:
        """Append ``x_new (B, T_new, D)`` to ``cache`` and attend causally; returns ``(B, T_new, D)``.

        The new tokens sit at positions ``cache.length .. cache.length + T_new - 1``.
        """
        B, T_new = self._check_x("x_new", x_new)
        if cache.latent.shape[0] != B:
            raise ValueError(f"cache holds batch size {cache.latent.shape[0]} but x_new has B={B}")
        positions = cache.length + np.arange(T_new)
        cache.append(*self.compress(x_new, positions))
        output, _ = self._attend_latent(x_new, positions, cache, causal_mask(T_new, cache.length))
        return output

    def __repr__(self) -> str:
        return (
            f"LatentAttention(width={self.width}, heads={self.heads}, latent_width={self.latent_width}, "
            f"rope_width={self.rope_width}, head_width={self.head_width}, value_width={self.value_width})"
        )
