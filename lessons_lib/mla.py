"""Multi-head latent attention (MLA), forward only, in NumPy (lesson 07).

MLA (DeepSeek-AI 2024, "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts
Language Model", arXiv:2405.04434, section 2.1 and appendix C) caches one small latent vector per
token instead of every head's keys and values, and rebuilds per-head keys and values from it.

Notation. Ours (SYLLABUS.md) first, the paper's in brackets. The paper multiplies column vectors by
``(out, in)`` matrices; we multiply row vectors by ``(in, out)`` arrays, so ``W^{DKV} == w_dkv.T``.

- ``D`` [d]: model width. ``h`` [n_h]: heads. ``B, T, S``: batch, query length, source length.
- ``d_c`` [d_c]: latent width, ``kv_lora_rank`` in DeepSeek's config files.
- ``d_nope`` [d_h]: per-head width of the position-free query/key part (``qk_nope_head_dim``).
- ``d_v`` [d_h]: per-head value width (``v_head_dim``); the paper uses ``d_h`` for both.
- ``d_rope`` [d_h^R]: width of the rotary part (``qk_rope_head_dim``).

The head widths are free sizes, not ``D / h``: DeepSeek-V2 has ``D = 5120``, ``h = 128`` and
``d_nope = d_v = 128``, so ``h * d_v = 16384 > D``.

Weights (drawn in this order from one NumPy stream, uniform in ``±1/sqrt(fan_in)``):

- ``w_dkv (D, d_c)`` [W^{DKV}]: down-projection, ``latent = x @ w_dkv`` [c_t^{KV}].
- ``w_uk (h, d_c, d_nope)`` [W^{UK}]: per-head key up-projection, ``k_i = latent @ w_uk[i]`` [k^C_{t,i}].
- ``w_uv (h, d_c, d_v)`` [W^{UV}]: per-head value up-projection [v^C_{t,i}].
- ``w_kr (D, d_rope)`` [W^{KR}]: the rotary key ``rope_key = RoPE(x @ w_kr)`` [k^R_t], one for all heads.
- ``w_q (h, D, d_nope)`` [W^{UQ} W^{DQ}]: per-head queries [q^C_{t,i}], projected directly from ``x``.
- ``w_qr (h, D, d_rope)`` [W^{QR}]: per-head rotary queries [q^R_{t,i}].
- ``w_o (h, d_v, D)`` [W^O]: output projection, ``out = sum_i o_i @ w_o[i]`` [u_t].

Left out of this layer (DeepSeek-V2 has both; neither changes what is cached or the absorption):

- Query compression (``q_lora_rank`` = 1536 [d_c']): DeepSeek-V2 squeezes the queries through
  their own latent, ``c^Q = x W^{DQ}``, then ``q = c^Q W^{UQ}`` and ``q^R = RoPE(c^Q W^{QR})``. The
  paper does it to save activation memory in training; it does not shrink the cache.
- RMSNorm on the latents (paper section 3.1.2; ``kv_a_layernorm`` and ``q_a_layernorm`` in the
  official code): each token's latent is normalised before it is up-projected. The norm acts on
  the latent alone, before ``W^{UK}``, so the normalised latent can be cached and the absorption
  below still holds.

Head ``i`` attends with the query ``[q_i ; q^R_i]`` and the key ``[k_i ; k^R]`` and the scale
``1 / sqrt(d_nope + d_rope)``. The cache keeps ``latent`` and ``rope_key``: ``d_c + d_rope``
numbers per token and layer.

Absorption (paper, section 2.1.2 and appendix C): ``q_i . k_i = (q_i @ w_uk[i].T) . latent``, so
the key up-projection can be folded into the query side, and ``o_i @ w_o[i] = ((weights @ latent)
@ w_uv[i]) @ w_o[i]``, so the value up-projection moves to the output side. Attention then runs
against the cached latent directly, at a price: scores over ``d_c + d_rope`` features instead of
``d_nope + d_rope`` (`attention_multiply_adds` counts the routes).

The absorbed route here re-associates the products at run time, as decoders do (vLLM's MLA decode
path applies ``W_UK`` to each head's query and ``W_UV`` after attention): ``w_uk[i].T`` is applied
to the query ``q_i``, and ``w_uv[i]`` then ``w_o[i]`` to the mixed latent. Pre-multiplied matrices
(`LatentAttention.absorbed_query_weight`, ``(h, D, d_c)``) give the same numbers but are larger than
their factors when ``d_c > d_nope``: at DeepSeek-V2's sizes ``h*D*d_c`` is 3.6 times
``h*D*d_nope + h*d_c*d_nope``, and so is the work per query.

Absorbed decoding is multi-query attention over the latent (`LatentAttention.multi_query_inputs`):
every head's query ``[q_i @ w_uk[i].T ; q^R_i]`` (width ``d_c + d_rope``) meets ONE key shared by
all heads, ``[latent ; rope_key]``, and mixes ONE shared value, ``latent`` (width ``d_c``), with
the scale ``1 / sqrt(d_nope + d_rope)``; each head's result then goes through ``w_uv[i]`` and
``w_o[i]`` (`LatentAttention.output_from_latent`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lessons_lib.mha_numpy import _attention, _softmax, causal_mask
from lessons_lib.rope import _check_base, _rope
from lessons_lib.validation import (
    check_array,
    check_finite,
    check_int,
    check_layer_inputs,
    check_overflow,
    check_seed,
    check_weight,
    layer_mask,
)

__all__ = ["LatentAttention", "LatentCache", "attention_multiply_adds", "latent_scores", "mla_cache_bytes",
           "multi_query_attention", "per_head_projection", "query_absorption_numbers"]

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
    sizes = dict(layers=layers, latent_width=latent_width, rope_width=rope_width, tokens=tokens, batch=batch,
                 bytes_per_element=bytes_per_element)
    layers, d_c, d_rope, tokens, batch, size = (check_int(name, value) for name, value in sizes.items())
    return layers * (d_c + d_rope) * tokens * batch * size


def attention_multiply_adds(
    route: str, new_tokens: int, cached_tokens: int, *, heads: int, latent_width: int, nope_width: int,
    rope_width: int, value_width: int,
) -> int:
    """Multiply-adds one layer spends on the work where the routes ``"rebuild"`` (also accepted under
    its older name ``"explicit"``), ``"cached"`` and ``"absorbed"`` differ.

    ``new_tokens`` (T) queries attend causally to ``cached_tokens`` (S >= T) positions, the new
    ones last: ``pairs = T*S - T*(T-1)/2`` (query, position) pairs are scored. Per head:

    - rebuild: rebuild K and V of all S positions, ``S*d_c*(d_nope + d_v)``; scores
      ``pairs*(d_nope + d_rope)``; weights @ values ``pairs*d_v``.
    - cached: a cache of rebuilt K and V (``d_nope + d_rope + d_v`` numbers per head and token)
      up-projects only the T new tokens, ``T*d_c*(d_nope + d_v)``; scores and weights @ values
      as rebuild.
    - absorbed: ``q_i @ w_uk[i].T`` for the T queries, ``T*d_nope*d_c``; scores against the latent
      and the rotary key ``pairs*(d_c + d_rope)``; weights @ latents ``pairs*d_c``; the mixed latent
      @ ``w_uv[i]``, ``T*d_c*d_v``.

    Times ``heads``. Work both routes share (the down-projections, the queries, RoPE, softmax,
    ``w_o``) is left out. Decoding (T = 1, long S) favours absorbed over rebuild; prefill (T = S) rebuild.
    """
    if route not in ("rebuild", "explicit", "cached", "absorbed"):
        raise ValueError(f"route must be 'rebuild', 'cached' or 'absorbed', got {route!r}")
    T, S = check_int("new_tokens", new_tokens, symbol="T"), check_int("cached_tokens", cached_tokens, symbol="S")
    if T > S:
        raise ValueError(f"cached_tokens S={S} must include the new_tokens T={T} (S >= T)")
    h, d_c = check_int("heads", heads, symbol="h"), check_int("latent_width", latent_width, symbol="d_c")
    d_n, d_v = check_int("nope_width", nope_width, symbol="d_nope"), check_int("value_width", value_width, symbol="d_v")
    d_r = check_int("rope_width", rope_width, low=0, symbol="d_rope")
    pairs = T * S - T * (T - 1) // 2
    if route in ("rebuild", "explicit"):
        return h * (S * d_c * (d_n + d_v) + pairs * (d_n + d_r) + pairs * d_v)
    if route == "cached":
        return h * (T * d_c * (d_n + d_v) + pairs * (d_n + d_r) + pairs * d_v)
    return h * (T * d_n * d_c + pairs * (d_c + d_r) + pairs * d_c + T * d_c * d_v)


def query_absorption_numbers(input_width: int, heads: int, nope_width: int, latent_width: int) -> dict[str, int]:
    """Weights on the query side of the absorbed scores, per layer, kept two ways.

    ``"multiplied out"``: one ``(input_width, d_c)`` matrix per head, ``W_q[i] W_uk[i]^T``;
    ``"as factors"``: ``W_q[i] (input_width, d_nope)`` and ``W_uk[i] (d_c, d_nope)``, applied one after
    the other at run time. ``input_width`` is ``D`` for queries projected from ``x``, or the query
    latent's width ``d_c'`` in DeepSeek-V2. Applied to one query, each route costs one multiply-add per
    weight.
    """
    n = check_int("input_width", input_width)
    h, d_n = check_int("heads", heads, symbol="h"), check_int("nope_width", nope_width, symbol="d_nope")
    d_c = check_int("latent_width", latent_width, symbol="d_c")
    return {"multiplied out": h * n * d_c, "as factors": h * (n * d_n + d_c * d_n)}


def per_head_projection(inputs: Array, weights: Array) -> Array:
    """Every head's own projection of every token: ``inputs (B, T, n) @ weights[i] (n, m)`` for each
    head ``i`` of ``weights (h, n, m)``, returned as ``(B, h, T, m)``, heads before tokens.

    With the latent and ``w_uk`` these are every head's keys, with ``w_uv`` its values, with ``x`` and
    ``w_q`` its queries.
    """
    check_array("inputs", inputs, "numpy", "(B, T, n)", np.float64)
    check_array("weights", weights, "numpy", "(h, n, m)", np.float64)
    if inputs.shape[-1] != weights.shape[1]:
        raise ValueError(f"inputs (B, T, n) and weights (h, n, m) must agree on n, got {inputs.shape} and "
                         f"{weights.shape}")
    projected: Array = inputs[:, None] @ weights[None]  # (B, 1, T, n) @ (1, h, n, m) -> (B, h, T, m)
    return projected


def latent_scores(q: Array, latent: Array, w_uk: Array) -> Array:
    """Raw scores of every head against the latent, no key built: ``(q_i @ w_uk[i].T) @ latent.T``.

    ``q (B, h, T, d_nope)`` per-head position-free queries, ``latent (B, S, d_c)``, ``w_uk (h, d_c,
    d_nope)``; returns ``(B, h, T, S)``, unscaled and unmasked. The key up-projection is applied to
    the T queries at run time (re-associating ``q_i @ (latent @ w_uk[i]).T``), never to the S latents.
    """
    check_array("q", q, "numpy", "(B, h, T, d_nope)", np.float64)
    check_array("latent", latent, "numpy", "(B, S, d_c)", np.float64)
    check_array("w_uk", w_uk, "numpy", "(h, d_c, d_nope)", np.float64)
    (B, h, _, d_n), (B_c, _, d_c) = q.shape, latent.shape
    if B_c != B or w_uk.shape != (h, d_c, d_n):
        raise ValueError(f"q (B, h, T, d_nope), latent (B, S, d_c) and w_uk (h, d_c, d_nope) must agree, got "
                         f"{q.shape}, {latent.shape} and {w_uk.shape}")
    q_latent = np.einsum("bhtn,hcn->bhtc", q, w_uk)  # (B, h, T, d_nope) x (h, d_c, d_nope) -> (B, h, T, d_c)
    scores: Array = q_latent @ np.swapaxes(latent, -1, -2)[:, None]  # @ (B, 1, d_c, S) -> (B, h, T, S)
    return scores


def multi_query_attention(
    queries: Array, key: Array, value: Array, scale: float, allowed: Mask | None = None
) -> tuple[Array, Array]:
    """Multi-query attention: ``h`` query heads, ONE key head and ONE value head shared by all.

    ``queries (B, h, T, d_k)``, ``key (B, 1, S, d_k)``, ``value (B, 1, S, d_v)``, ``scale`` the
    factor the scores are multiplied by, ``allowed`` a boolean mask broadcastable to ``(B, h, T, S)``.
    Returns ``(output (B, h, T, d_v), weights (B, h, T, S))``. Same as PyTorch's
    ``scaled_dot_product_attention(queries, key, value, attn_mask=allowed, scale=scale, enable_gqa=True)``.
    """
    check_array("queries", queries, "numpy", "(B, h, T, d_k)", np.float64)
    check_array("key", key, "numpy", "(B, 1, S, d_k)", np.float64)
    check_array("value", value, "numpy", "(B, 1, S, d_v)", np.float64)
    (B, _, _, d_k), S = queries.shape, value.shape[2]
    if key.shape != (B, 1, S, d_k) or value.shape[:2] != (B, 1):
        raise ValueError(f"multi-query attention needs key (B, 1, S, d_k) = {(B, 1, S, d_k)} and value "
                         f"(B, 1, S, d_v) with one head each, got key {key.shape} and value {value.shape}")
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or not scale > 0:
        raise ValueError(f"scale must be a positive number, got {scale!r}")
    scores = queries @ np.swapaxes(key, -1, -2) * scale  # (B, h, T, d_k) @ (B, 1, d_k, S) -> (B, h, T, S)
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    weights = _softmax(scores, axis=-1)
    output: Array = weights @ value  # (B, h, T, S) @ (B, 1, S, d_v) -> (B, h, T, d_v)
    return output, weights


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
        nope_width: ``d_nope`` [qk_nope_head_dim]; defaults to ``D // h``.
        value_width: ``d_v`` [v_head_dim]; defaults to ``nope_width``.
        seed: seed of the NumPy stream the weights are drawn from.
        base: RoPE base (10000).

    `LatentAttention.from_weights` builds one from given weights instead (sizes read from their shapes).

    Inputs and weights must be finite. Finite inputs so large that the scores overflow are refused
    with a ``ValueError`` that says so (the layer does not rescale them).
    """

    def __init__(
        self,
        width: int,
        heads: int,
        latent_width: int,
        rope_width: int,
        nope_width: int | None = None,
        value_width: int | None = None,
        seed: int = 0,
        base: float = 10000.0,
    ) -> None:
        D, h = check_int("width", width, symbol="D"), check_int("heads", heads, symbol="h")
        if nope_width is None and h > D:
            raise ValueError(f"heads h={h} > width D={D} leaves the default d_nope = D // h at 0; pass nope_width")
        d_n = D // h if nope_width is None else check_int("nope_width", nope_width, symbol="d_nope")
        d_v = d_n if value_width is None else check_int("value_width", value_width, symbol="d_v")
        d_c = check_int("latent_width", latent_width, symbol="d_c")
        d_r = check_int("rope_width", rope_width, symbol="d_rope")
        if d_r % 2 != 0:
            raise ValueError(f"rope_width (d_rope) must be even because RoPE rotates pairs, got {d_r}")
        rng = np.random.default_rng(check_seed("seed", seed))

        def draw(shape: tuple[int, ...], fan_in: int) -> NDArray[np.float64]:
            bound = 1.0 / math.sqrt(fan_in)
            return rng.uniform(-bound, bound, size=shape)

        self.w_dkv: Array = draw((D, d_c), D)
        self.w_uk: Array = draw((h, d_c, d_n), d_c)
        self.w_uv: Array = draw((h, d_c, d_v), d_c)
        self.w_kr: Array = draw((D, d_r), D)
        self.w_q: Array = draw((h, D, d_n), D)
        self.w_qr: Array = draw((h, D, d_r), D)
        self.w_o: Array = draw((h, d_v, D), h * d_v)
        self.base = _check_base(base)

    @classmethod
    def from_weights(
        cls,
        w_dkv: Array,
        w_uk: Array,
        w_uv: Array,
        w_kr: Array,
        w_q: Array,
        w_qr: Array,
        w_o: Array,
        base: float = 10000.0,
    ) -> LatentAttention:
        """A layer holding the given float64 arrays (kept, not copied), shaped as in the module docstring.

        ``D, d_c`` come from ``w_dkv (D, d_c)``, ``h, d_nope`` from ``w_uk (h, d_c, d_nope)``, ``d_v``
        from ``w_uv``, ``d_rope`` from ``w_kr (D, d_rope)``; every other shape must agree.
        """
        check_array("w_dkv", w_dkv, "numpy", "(D, d_c)", np.float64)
        check_array("w_uk", w_uk, "numpy", "(h, d_c, d_nope)", np.float64)
        check_array("w_uv", w_uv, "numpy", "(h, d_c, d_v)", np.float64)
        check_array("w_kr", w_kr, "numpy", "(D, d_rope)", np.float64)
        (D, d_c), (h, _, d_n), d_v, d_r = w_dkv.shape, w_uk.shape, w_uv.shape[-1], w_kr.shape[-1]
        for name, size, symbol, source in (
            ("width", D, "D", "w_dkv"), ("latent_width", d_c, "d_c", "w_dkv"), ("heads", h, "h", "w_uk"),
            ("nope_width", d_n, "d_nope", "w_uk"), ("value_width", d_v, "d_v", "w_uv"),
            ("rope_width", d_r, "d_rope", "w_kr"),
        ):  # the constructor's rule: every size at least 1 (a size of 0 gives a layer that outputs 0)
            if size < 1:
                raise ValueError(f"{name} ({symbol}) must be positive, got {symbol}=0 from the shape of {source}")
        check_finite("w_dkv", w_dkv)
        expected = {
            "w_uk": (w_uk, (h, d_c, d_n), "(h, d_c, d_nope)"),
            "w_uv": (w_uv, (h, d_c, d_v), "(h, d_c, d_v)"),
            "w_kr": (w_kr, (D, d_r), "(D, d_rope)"),
            "w_q": (w_q, (h, D, d_n), "(h, D, d_nope)"),
            "w_qr": (w_qr, (h, D, d_r), "(h, D, d_rope)"),
            "w_o": (w_o, (h, d_v, D), "(h, d_v, D)"),
        }
        for name, (weight, shape, layout) in expected.items():
            check_weight(name, weight, shape, "numpy", layout)
            check_array(name, weight, "numpy", layout, np.float64)
        if d_r % 2 != 0:
            raise ValueError(f"w_kr's width d_rope must be even because RoPE rotates pairs, got {d_r}")
        layer = cls.__new__(cls)
        layer.w_dkv, layer.w_uk, layer.w_uv, layer.w_kr = w_dkv, w_uk, w_uv, w_kr
        layer.w_q, layer.w_qr, layer.w_o, layer.base = w_q, w_qr, w_o, _check_base(base)
        return layer

    # Sizes, read from the weights so they can never disagree with them.
    width = property(lambda self: int(self.w_dkv.shape[0]), doc="``D``")
    heads = property(lambda self: int(self.w_uk.shape[0]), doc="``h``")
    latent_width = property(lambda self: int(self.w_dkv.shape[1]), doc="``d_c``")
    nope_width = property(lambda self: int(self.w_uk.shape[2]), doc="``d_nope``")
    value_width = property(lambda self: int(self.w_uv.shape[2]), doc="``d_v``")
    rope_width = property(lambda self: int(self.w_kr.shape[1]), doc="``d_rope``")

    @property
    def sizes(self) -> dict[str, int]:
        """``{"D", "h", "d_c", "d_nope", "d_rope", "d_v"}``, e.g. for `lessons_lib.plotting.latent_flow`."""
        return {"D": self.width, "h": self.heads, "d_c": self.latent_width, "d_nope": self.nope_width,
                "d_rope": self.rope_width, "d_v": self.value_width}

    # ----- pieces shared by both routes -------------------------------------------------------
    def _check_x(self, name: str, x: Array, allowed: Mask | None = None) -> tuple[int, int, Mask | None]:
        """``x (B, T, D)`` in float64 and an optional self-attention mask; returns ``(B, T, mask)``."""
        fix = f"LatentAttention computes in float64 only: convert the input with {name}.astype(np.float64)"
        B, T, _ = check_layer_inputs(x, x, self.width, np.float64, "numpy", names=(name, name), dtype_fix=fix)
        return B, T, layer_mask(allowed, B, self.heads, T, T, "numpy")

    def compress(self, x: Array, positions: NDArray[np.integer]) -> tuple[Array, Array]:
        """What the cache stores: ``latent (B, S, d_c)`` and the rotated ``rope_key (B, S, d_rope)``."""
        latent = x @ self.w_dkv  # (B, S, D) @ (D, d_c) -> (B, S, d_c)
        rope_key = _rope(x @ self.w_kr, positions, self.base)  # (B, S, d_rope), rotated once
        return latent, rope_key

    def queries(self, x: Array, positions: NDArray[np.integer]) -> tuple[Array, Array]:
        """Per-head ``q (B, h, T, d_nope)`` and rotated ``q_rope (B, h, T, d_rope)``."""
        q = np.einsum("btd,hdn->bhtn", x, self.w_q)  # (B, T, D) x (h, D, d_nope) -> (B, h, T, d_nope)
        q_rope = np.einsum("btd,hdr->bhtr", x, self.w_qr)  # -> (B, h, T, d_rope)
        return q, _rope(q_rope, positions, self.base)

    # ----- the explicit route: rebuild every head's K and V -----------------------------------
    def explicit(self, x: Array, allowed: Mask | None = None) -> tuple[Array, Array]:
        """Self-attention over ``x (B, T, D)`` rebuilding per-head K, V from the latent.

        Returns ``(output (B, T, D), weights (B, h, T, T))``.
        """
        B, T, mask = self._check_x("x", x, allowed)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
            output, weights = self._explicit(x, B, T, mask)
        check_overflow("LatentAttention", output, {"x": x})
        return output, weights

    def _explicit(self, x: Array, B: int, T: int, mask: Mask | None) -> tuple[Array, Array]:
        positions = np.arange(T)
        latent, rope_key = self.compress(x, positions)
        q, q_rope = self.queries(x, positions)
        k = np.einsum("bsc,hcn->bhsn", latent, self.w_uk)  # (B, S, d_c) x (h, d_c, d_nope) -> (B, h, S, d_nope)
        v = np.einsum("bsc,hcv->bhsv", latent, self.w_uv)  # -> (B, h, S, d_v)
        k_rope = np.broadcast_to(rope_key[:, None], (B, self.heads, T, self.rope_width))  # shared by heads
        q_full = np.concatenate([q, q_rope], axis=-1)  # (B, h, T, d_nope + d_rope)
        k_full = np.concatenate([k, k_rope], axis=-1)  # (B, h, S, d_nope + d_rope)
        heads_out, weights = _attention(q_full, k_full, v, mask)  # (B, h, T, d_v), (B, h, T, S)
        return np.einsum("bhtv,hvd->btd", heads_out, self.w_o), weights  # -> (B, T, D)

    # ----- the absorbed route: attend against the latent --------------------------------------
    @property
    def absorbed_query_weight(self) -> NDArray[np.float64]:
        """``(h, D, d_c)``: ``w_q[i] @ w_uk[i].T``, the key up-projection folded into the queries.

        Pre-multiplied, for comparison only: the layer itself applies ``w_uk[i].T`` to each query at run
        time, which is cheaper when ``d_c > d_nope`` (see the module docstring).
        """
        absorbed: NDArray[np.float64] = np.einsum("hdn,hcn->hdc", self.w_q, self.w_uk)
        return absorbed

    @property
    def absorbed_output_weight(self) -> NDArray[np.float64]:
        """``(h, d_c, D)``: ``w_uv[i] @ w_o[i]``, the value up-projection folded into the output (for
        comparison only, like `absorbed_query_weight`)."""
        absorbed: NDArray[np.float64] = np.einsum("hcv,hvd->hcd", self.w_uv, self.w_o)
        return absorbed

    def multi_query_inputs(
        self, x: Array, positions: NDArray[np.integer], cache: LatentCache
    ) -> tuple[Array, Array, Array]:
        """The absorbed route as multi-query attention: ``(queries, key, value)``.

        ``queries (B, h, T, d_c + d_rope)`` is ``[q_i @ w_uk[i].T ; q^R_i]`` for the tokens ``x (B, T, D)``
        at ``positions``; ``key (B, 1, S, d_c + d_rope)`` is ``[latent ; rope_key]`` and ``value
        (B, 1, S, d_c)`` is ``latent``, read from ``cache``: one key head and one value head for all
        heads. Attend with the scale ``1 / sqrt(d_nope + d_rope)``.
        """
        q, q_rope = self.queries(x, positions)  # (B, h, T, d_nope), (B, h, T, d_rope)
        q_latent = np.einsum("bhtn,hcn->bhtc", q, self.w_uk)  # w_uk[i].T applied to the query: (B, h, T, d_c)
        queries = np.concatenate([q_latent, q_rope], axis=-1)  # (B, h, T, d_c + d_rope)
        key = np.concatenate([cache.latent, cache.rope_key], axis=-1)[:, None]  # (B, 1, S, d_c + d_rope)
        return queries, key, cache.latent[:, None]  # value (B, 1, S, d_c)

    def output_from_latent(self, context: Array) -> Array:
        """``context (B, h, T, d_c)``, each head's weighted latent -> output ``(B, T, D)``.

        ``w_uv[i]`` turns head ``i``'s mixed latent into its values, then ``w_o[i]`` projects them.
        """
        values = np.einsum("bhtc,hcv->bhtv", context, self.w_uv)  # (B, h, T, d_c) x (h, d_c, d_v) -> (B, h, T, d_v)
        output: Array = np.einsum("bhtv,hvd->btd", values, self.w_o)  # sum over heads -> (B, T, D)
        return output

    def _attend_latent(
        self, x: Array, positions: NDArray[np.integer], cache: LatentCache, mask: Mask | None
    ) -> tuple[Array, Array]:
        """Queries from ``x (B, T, D)`` attend to ``cache``; returns ``(output (B, T, D), weights)``."""
        queries, key, value = self.multi_query_inputs(x, positions, cache)
        scores = queries @ np.swapaxes(key, -1, -2) / math.sqrt(self.nope_width + self.rope_width)  # (B, h, T, S)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        weights = _softmax(scores, axis=-1)
        return self.output_from_latent(weights @ value), weights  # (B, h, T, S) @ (B, 1, S, d_c)

    def absorbed(self, x: Array, allowed: Mask | None = None) -> tuple[Array, Array]:
        """Same as `explicit`, computed against the latent with the absorbed weights."""
        _, T, mask = self._check_x("x", x, allowed)
        positions = np.arange(T)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
            cache = LatentCache(*self.compress(x, positions))
            output, weights = self._attend_latent(x, positions, cache, mask)
        check_overflow("LatentAttention", output, {"x": x})
        return output, weights

    def __call__(self, x: Array, allowed: Mask | None = None, absorbed: bool = True) -> tuple[Array, Array]:
        """``(output (B, T, D), weights (B, h, T, T))``; ``absorbed`` picks the route (same numbers)."""
        return self.absorbed(x, allowed) if absorbed else self.explicit(x, allowed)

    # ----- decoding with the latent cache -----------------------------------------------------
    def new_cache(self, batch: int) -> LatentCache:
        """An empty cache for ``batch`` sequences."""
        batch = check_int("batch", batch, symbol="B")
        return LatentCache(np.zeros((batch, 0, self.latent_width)), np.zeros((batch, 0, self.rope_width)))

    def decode(self, x_new: Array, cache: LatentCache) -> Array:
        """Append ``x_new (B, T_new, D)`` to ``cache`` and attend causally; returns ``(B, T_new, D)``.

        The new tokens sit at positions ``cache.length .. cache.length + T_new - 1``.
        """
        if not isinstance(cache, LatentCache):
            raise TypeError(
                f"cache must be a LatentCache (make one with layer.new_cache(B)), got {type(cache).__name__}"
            )
        B, T_new, _ = self._check_x("x_new", x_new)
        if cache.latent.shape[0] != B:
            raise ValueError(f"cache holds batch size {cache.latent.shape[0]} but x_new has B={B}")
        positions = cache.length + np.arange(T_new)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
            latent, rope_key = self.compress(x_new, positions)
            check_overflow("LatentAttention.decode", latent.sum() + rope_key.sum(), {"x_new": x_new})
            cache.append(latent, rope_key)
            output, _ = self._attend_latent(x_new, positions, cache, causal_mask(T_new, cache.length))
        check_overflow("LatentAttention.decode", output, {"x_new": x_new})
        return output

    def __repr__(self) -> str:
        return (
            f"LatentAttention(width={self.width}, heads={self.heads}, latent_width={self.latent_width}, "
            f"rope_width={self.rope_width}, nope_width={self.nope_width}, value_width={self.value_width})"
        )
