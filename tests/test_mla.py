"""Latent attention: explicit == absorbed, absorbed == multi-query attention over the latent (against
PyTorch's SDPA), the cache size, decoding with the latent cache, the multiply-add counts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lessons_lib.kv_cache import kv_cache_bytes
from lessons_lib.mha_numpy import attention, causal_mask
from lessons_lib.mla import (
    LatentAttention,
    LatentCache,
    attention_multiply_adds,
    latent_scores,
    mla_cache_bytes,
    multi_query_attention,
    per_head_projection,
    query_absorption_numbers,
)
from lessons_lib.rope import apply_rope


def random_layers(count: int, seed: int = 0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    for i in range(count):
        heads = int(rng.integers(1, 5))
        width = heads * int(rng.integers(1, 5))
        layer = LatentAttention(
            width,
            heads,
            latent_width=int(rng.integers(1, 9)),
            rope_width=2 * int(rng.integers(1, 4)),
            nope_width=int(rng.integers(1, 6)),
            value_width=int(rng.integers(1, 6)),
            seed=i,
        )
        x = rng.standard_normal((int(rng.integers(1, 4)), int(rng.integers(1, 8)), width))
        yield layer, x


@pytest.mark.parametrize("causal", [False, True])
def test_explicit_and_absorbed_agree(causal: bool) -> None:
    for layer, x in random_layers(40, seed=int(causal)):
        T = x.shape[1]
        allowed = causal_mask(T) if causal else None
        out_e, w_e = layer.explicit(x, allowed)
        out_a, w_a = layer.absorbed(x, allowed)
        assert out_e.shape == out_a.shape == x.shape
        assert w_e.shape == w_a.shape == (x.shape[0], layer.heads, T, T)
        assert np.abs(out_e - out_a).max() <= 1e-12
        assert np.abs(w_e - w_a).max() <= 1e-12
        assert np.allclose(w_a.sum(-1), 1.0)
        if causal:
            assert np.all(w_a[..., ~causal_mask(T)] == 0)


def test_batch_mask_and_call_route() -> None:
    layer = LatentAttention(12, 3, latent_width=5, rope_width=4, seed=3)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 6, 12))
    allowed = rng.random((2, 6, 6)) < 0.6
    allowed[..., 0] = True
    out_e, _ = layer(x, allowed, absorbed=False)
    out_a, _ = layer(x, allowed)
    assert np.abs(out_e - out_a).max() <= 1e-12


def test_explicit_matches_independent_per_head_loop() -> None:
    """Rebuild every head by hand with mha_numpy.attention and compare."""
    layer = LatentAttention(8, 2, latent_width=3, rope_width=2, nope_width=5, value_width=3, seed=7)
    x = np.random.default_rng(5).standard_normal((1, 4, 8))
    pos = np.arange(4)
    latent = x[0] @ layer.w_dkv
    rope_key = apply_rope(x[0] @ layer.w_kr, pos)
    out = np.zeros((4, 8))
    for i in range(2):
        q = np.concatenate([x[0] @ layer.w_q[i], apply_rope(x[0] @ layer.w_qr[i], pos)], axis=1)
        k = np.concatenate([latent @ layer.w_uk[i], rope_key], axis=1)
        o, _ = attention(q, k, latent @ layer.w_uv[i], causal_mask(4))
        out += o @ layer.w_o[i]
    assert np.allclose(layer.explicit(x, causal_mask(4))[0][0], out, atol=1e-12)


def test_cache_holds_latent_plus_rope_key_per_token() -> None:
    layer = LatentAttention(16, 4, latent_width=6, rope_width=4, seed=1)
    cache = layer.new_cache(batch=2)
    x = np.random.default_rng(2).standard_normal((2, 5, 16))
    for t in range(5):
        layer.decode(x[:, t : t + 1], cache)
    assert cache.length == 5
    assert cache.latent.shape == (2, 5, 6) and cache.rope_key.shape == (2, 5, 4)
    assert cache.elements_per_token == 6 + 4
    assert (cache.latent.size + cache.rope_key.size) == 2 * 5 * (6 + 4)
    # multi-head attention of the same layer would cache 2 * h * d_h per token
    assert 2 * 4 * 4 > cache.elements_per_token


def test_decoding_with_latent_cache_equals_full_computation() -> None:
    for layer, x in random_layers(15, seed=11):
        B, T, _ = x.shape
        full, _ = layer.explicit(x, causal_mask(T))
        cache = layer.new_cache(B)
        steps = [layer.decode(x[:, t : t + 1], cache) for t in range(T)]
        assert np.abs(np.concatenate(steps, axis=1) - full).max() <= 1e-12
        # a prompt first, then single tokens
        if T > 2:
            cache = layer.new_cache(B)
            first = layer.decode(x[:, :2], cache)
            rest = [layer.decode(x[:, t : t + 1], cache) for t in range(2, T)]
            assert np.abs(np.concatenate([first, *rest], axis=1) - full).max() <= 1e-12


def test_absorbed_weights_have_latent_shapes() -> None:
    layer = LatentAttention(10, 2, latent_width=3, rope_width=2, nope_width=4, value_width=6)
    assert layer.absorbed_query_weight.shape == (2, 10, 3)
    assert layer.absorbed_output_weight.shape == (2, 3, 10)
    assert np.allclose(layer.absorbed_query_weight[1], layer.w_q[1] @ layer.w_uk[1].T)


def test_cache_byte_counts() -> None:
    # DeepSeek-V2: 60 layers, d_c = 512, d_rope = 64 -> 60 * 576 elements per token
    assert mla_cache_bytes(60, 512, 64, bytes_per_element=1) == 34560
    assert mla_cache_bytes(60, 512, 64, tokens=10, batch=2, bytes_per_element=2) == 34560 * 40
    # equal to GQA with 2.25 KV heads of width 128: 2 * 2.25 * 128 = 576
    assert kv_cache_bytes(60, 9, 128, bytes_per_element=1) == 4 * mla_cache_bytes(60, 512, 64, bytes_per_element=1)
    with pytest.raises(ValueError, match="latent_width must be positive"):
        mla_cache_bytes(60, 0, 64)
    with pytest.raises(TypeError, match="layers must be an int"):
        mla_cache_bytes(60.0, 512, 64)  # type: ignore[arg-type]


def test_bad_sizes_rejected() -> None:
    with pytest.raises(ValueError, match=r"rope_width .* even"):
        LatentAttention(8, 2, latent_width=4, rope_width=3)
    with pytest.raises(ValueError, match=r"latent_width \(d_c\) must be positive"):
        LatentAttention(8, 2, latent_width=0, rope_width=2)
    with pytest.raises(ValueError, match=r"heads \(h\) must be positive"):
        LatentAttention(8, 0, latent_width=4, rope_width=2)
    with pytest.raises(ValueError, match="leaves the default d_nope = D // h at 0"):
        LatentAttention(2, 4, latent_width=4, rope_width=2)
    with pytest.raises(TypeError, match="width must be an int"):
        LatentAttention(8.0, 2, latent_width=4, rope_width=2)  # type: ignore[arg-type]


def test_bad_inputs_rejected() -> None:
    layer = LatentAttention(8, 2, latent_width=4, rope_width=2)
    x = np.ones((1, 3, 8))
    with pytest.raises(ValueError, match="layer width D is 8"):
        layer(np.ones((1, 3, 6)))
    with pytest.raises(ValueError, match="exactly 3 axes"):
        layer(np.ones((3, 8)))
    with pytest.raises(TypeError, match="floating-point"):
        layer(np.ones((1, 3, 8), dtype=int))
    with pytest.raises(TypeError, match="dtype float32"):
        layer(np.ones((1, 3, 8), dtype=np.float32))
    with pytest.raises(ValueError, match="no allowed position"):
        layer(x, np.zeros((3, 3), dtype=bool))
    with pytest.raises(ValueError, match="allowed has shape"):
        layer(x, np.ones((3, 4), dtype=bool))
    with pytest.raises(ValueError, match="batch size 2"):
        layer.decode(x, layer.new_cache(2))
    cache = LatentCache(np.zeros((1, 0, 4)), np.zeros((1, 0, 2)))
    with pytest.raises(ValueError, match="latent to append"):
        cache.append(np.zeros((1, 1, 5)), np.zeros((1, 1, 2)))


def test_sizes_follow_the_weights() -> None:
    layer = LatentAttention(10, 2, latent_width=3, rope_width=4, nope_width=5, value_width=6)
    assert layer.sizes == {"D": 10, "h": 2, "d_c": 3, "d_nope": 5, "d_rope": 4, "d_v": 6}
    small = LatentAttention.from_weights(
        layer.w_dkv[:, :2], layer.w_uk[:, :2], layer.w_uv[:, :2], layer.w_kr, layer.w_q, layer.w_qr, layer.w_o
    )
    assert small.sizes["d_c"] == 2


def _counted_by_loops(route: str, T: int, S: int, h: int, d_c: int, d_n: int, d_r: int, d_v: int) -> int:
    """Multiply-adds by walking the causal mask: an independent count of what each route does."""
    allowed = causal_mask(T, S)  # (T, S), new queries at the last T positions
    total = 0
    for _ in range(h):
        if route in ("explicit", "cached"):
            rebuilt = S if route == "explicit" else T  # every position, or only the new tokens
            total += sum(d_c * (d_n + d_v) for _ in range(rebuilt))  # rebuild k_s and v_s
            total += sum((d_n + d_r) + d_v for t in range(T) for s in range(S) if allowed[t, s])
        else:
            total += sum(d_n * d_c + d_c * d_v for _ in range(T))  # fold W_uk into q, W_uv after mixing
            total += sum((d_c + d_r) + d_c for t in range(T) for s in range(S) if allowed[t, s])
    return total


@pytest.mark.parametrize("route", ["explicit", "cached", "absorbed"])
def test_multiply_adds_match_a_loop_over_the_mask(route: str) -> None:
    rng = np.random.default_rng(11)
    for _ in range(30):
        h, d_c, d_n, d_r, d_v = (int(n) for n in rng.integers(1, 7, size=5))
        S = int(rng.integers(1, 9))
        T = int(rng.integers(1, S + 1))
        sizes = dict(heads=h, latent_width=d_c, nope_width=d_n, rope_width=2 * d_r, value_width=d_v)
        assert attention_multiply_adds(route, T, S, **sizes) == _counted_by_loops(
            route, T, S, h, d_c, d_n, 2 * d_r, d_v
        )


def test_multiply_adds_decode_favours_absorbed_prefill_explicit() -> None:
    ds = dict(heads=128, latent_width=512, nope_width=128, rope_width=64, value_width=128)
    # per (query, cached token) and head: absorbed 576 + 512, explicit 192 + 128
    decode_e = attention_multiply_adds("explicit", 1, 4096, **ds)
    decode_a = attention_multiply_adds("absorbed", 1, 4096, **ds)
    assert decode_e == 128 * (4096 * 512 * 256 + 4096 * 320)
    assert decode_a == 128 * (128 * 512 + 4096 * 1088 + 512 * 128)
    assert decode_e > 100 * decode_a
    prefill_e = attention_multiply_adds("explicit", 4096, 4096, **ds)
    prefill_a = attention_multiply_adds("absorbed", 4096, 4096, **ds)
    assert prefill_a == pytest.approx(3 * prefill_e, rel=1e-3)
    for S in range(2, 50):  # absorbed wins a decoding step from two cached tokens on
        assert attention_multiply_adds("absorbed", 1, S, **ds) < attention_multiply_adds("explicit", 1, S, **ds)


def test_multiply_adds_bad_arguments() -> None:
    sizes = dict(heads=2, latent_width=4, nope_width=3, rope_width=2, value_width=3)
    with pytest.raises(ValueError, match="route must be 'rebuild', 'cached' or 'absorbed'"):
        attention_multiply_adds("fused", 1, 4, **sizes)
    with pytest.raises(ValueError, match=r"S >= T"):
        attention_multiply_adds("explicit", 5, 4, **sizes)
    with pytest.raises(ValueError, match=r"new_tokens \(T\) must be positive"):
        attention_multiply_adds("explicit", 0, 4, **sizes)
    with pytest.raises(TypeError, match="cached_tokens must be an int"):
        attention_multiply_adds("absorbed", 1, 4.0, **sizes)  # type: ignore[arg-type]
    assert attention_multiply_adds("absorbed", 1, 4, **{**sizes, "rope_width": 0}) > 0


def test_decoding_costs_at_deepseek_v2_sizes() -> None:
    """The numbers lesson 07 states: per decoded token and layer at S = 4096, and the caches."""
    ds = dict(heads=128, latent_width=512, nope_width=128, rope_width=64, value_width=128)
    rebuild, cached, absorbed = (attention_multiply_adds(r, 1, 4096, **ds) for r in ("rebuild", "cached", "absorbed"))
    assert rebuild == attention_multiply_adds("explicit", 1, 4096, **ds)  # the older name of the same route
    assert (cached, absorbed) == (184_549_376, 587_202_560)
    assert round(absorbed / cached, 2) == 3.18 and round(rebuild / absorbed) == 117
    long_absorbed, long_cached = (attention_multiply_adds(r, 1, 10**6, **ds) for r in ("absorbed", "cached"))
    assert round(long_absorbed / long_cached, 2) == 3.4  # tends to (576 + 512) / (192 + 128) = 3.4 as S grows
    kv_cache, latent_cache = 128 * (128 + 64 + 128), 512 + 64
    assert round(kv_cache / latent_cache, 1) == 71.1
    # pre-multiplied W_q W_uk^T against its two factors (and per query, the same ratio)
    merged, factors = 128 * 5120 * 512, 128 * 5120 * 128 + 128 * 512 * 128
    assert (merged, factors) == (335_544_320, 92_274_688) and round(merged / factors, 2) == 3.64
    assert round((128 * 1536 * 512) / (128 * 1536 * 128 + 128 * 512 * 128), 2) == 3.0  # with query compression


def test_latent_scores_equal_explicit_scores() -> None:
    for layer, x in random_layers(10, seed=3):
        positions = np.arange(x.shape[1])
        latent, _ = layer.compress(x, positions)
        q, _ = layer.queries(x, positions)
        k = np.einsum("bsc,hcn->bhsn", latent, layer.w_uk)
        np.testing.assert_allclose(latent_scores(q, latent, layer.w_uk), q @ np.swapaxes(k, -1, -2), atol=1e-12)
    with pytest.raises(ValueError, match="must agree"):
        latent_scores(np.ones((1, 2, 3, 4)), np.ones((1, 5, 6)), np.ones((2, 4, 6)))


@pytest.mark.parametrize("causal", [False, True])
def test_absorbed_decoding_is_multi_query_attention_as_in_pytorch(causal: bool) -> None:
    """One shared key [latent ; rope_key] and one shared value (the latent): PyTorch's SDPA with one
    K/V head (enable_gqa) and with the head repeated gives the layer's output after w_uv and w_o."""
    for layer, x in random_layers(8, seed=5):
        B, T, _ = x.shape
        positions = np.arange(T)
        cache = LatentCache(*layer.compress(x, positions))
        queries, key, value = layer.multi_query_inputs(x, positions, cache)
        assert key.shape == (B, 1, T, layer.latent_width + layer.rope_width)
        assert value.shape == (B, 1, T, layer.latent_width)
        assert queries.shape == (B, layer.heads, T, layer.latent_width + layer.rope_width)
        scale = 1 / np.sqrt(layer.nope_width + layer.rope_width)
        mask = causal_mask(T) if causal else None
        context, _ = multi_query_attention(queries, key, value, scale, mask)
        expected, _ = layer.explicit(x, mask)
        np.testing.assert_allclose(layer.output_from_latent(context), expected, atol=1e-12)
        tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(a)) for a in (queries, key, value))
        tmask = None if mask is None else torch.from_numpy(mask)
        gqa = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask, scale=float(scale), enable_gqa=True)
        repeated = F.scaled_dot_product_attention(tq, tk.expand_as(tq), tv.expand(B, layer.heads, T, -1),
                                                  attn_mask=tmask, scale=float(scale))
        np.testing.assert_allclose(gqa.numpy(), context, atol=1e-12)
        np.testing.assert_allclose(repeated.numpy(), context, atol=1e-12)


def test_multi_query_attention_bad_inputs() -> None:
    q, k, v = np.ones((1, 2, 3, 4)), np.ones((1, 1, 5, 4)), np.ones((1, 1, 5, 6))
    with pytest.raises(ValueError, match="one head each"):
        multi_query_attention(q, np.ones((1, 2, 5, 4)), v, 0.5)
    with pytest.raises(ValueError, match="scale must be a positive number"):
        multi_query_attention(q, k, v, 0.0)
    out, weights = multi_query_attention(q, k, v, 0.5)
    assert out.shape == (1, 2, 3, 6) and np.allclose(weights.sum(-1), 1)


def test_per_head_projection_matches_torch_einsum() -> None:
    rng = np.random.default_rng(5)
    inputs, weights = rng.standard_normal((2, 7, 5)), rng.standard_normal((3, 5, 4))
    ours = per_head_projection(inputs, weights)
    theirs = torch.einsum("btn,hnm->bhtm", torch.from_numpy(inputs), torch.from_numpy(weights)).numpy()
    assert ours.shape == (2, 3, 7, 4)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    for i in range(3):
        np.testing.assert_allclose(ours[:, i], inputs @ weights[i], rtol=1e-12, atol=1e-12)


def test_query_absorption_numbers_count_torch_parameters() -> None:
    """The counts are the parameters of the two ways to keep the query side, built as torch tensors
    on the meta device (shapes only), at DeepSeek-V2's sizes and from its query latent."""
    for n in (5120, 1536):
        h, d_nope, d_c = 128, 128, 512
        merged = torch.empty(h, n, d_c, device="meta").numel()
        factors = torch.empty(h, n, d_nope, device="meta").numel() + torch.empty(h, d_c, d_nope, device="meta").numel()
        assert query_absorption_numbers(n, h, d_nope, d_c) == {"multiplied out": merged, "as factors": factors}
    numbers = query_absorption_numbers(5120, 128, 128, 512)
    assert round(numbers["multiplied out"] / numbers["as factors"], 2) == 3.64
    with pytest.raises(ValueError, match="latent_width"):
        query_absorption_numbers(16, 2, 4, 0)
