"""Incremental decoding with a KV cache equals full causal attention (lesson 06)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lessons_lib import gqa_torch
from lessons_lib.gqa_numpy import GroupedQueryAttention
from lessons_lib.kv_cache import (
    KVCache,
    attention_multiply_adds,
    decode_causal,
    decode_incrementally,
    decode_step,
    decode_step_cost,
    kv_cache_bytes,
    time_decode_step,
)


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2), (6, 3), (4, 1), (8, 1)])  # MHA, GQA, GQA, MQA, MQA
@pytest.mark.parametrize("prompt", [1, 3])
def test_incremental_equals_full_causal(heads: int, kv_heads: int, prompt: int) -> None:
    width, T, B, n_layers = 2 * heads, 7, 2, 3
    layers = [GroupedQueryAttention(width, heads, kv_heads, seed=s) for s in range(n_layers)]
    x = np.random.default_rng(heads + kv_heads).normal(size=(B, T, width))
    incremental, cache = decode_incrementally(layers, x, prompt=prompt)
    np.testing.assert_allclose(incremental, decode_causal(layers, x), rtol=0, atol=1e-12)
    assert len(cache) == T
    for k, v in zip(cache.keys, cache.values, strict=False):
        assert k is not None and v is not None
        assert k.shape == v.shape == (B, kv_heads, T, 2)  # h_kv heads are cached, not h
    assert cache.nbytes == kv_cache_bytes(n_layers, kv_heads, 2, tokens=T, batch=B, bytes_per_element=8)


def test_cache_holds_exactly_the_projected_keys() -> None:
    layer = GroupedQueryAttention(8, 4, 2, seed=1)
    x = np.random.default_rng(0).normal(size=(1, 5, 8))
    _, cache = decode_incrementally([layer], x)
    k, v = layer.keys_values(x)
    # One token at a time vs all at once: same numbers up to the order of floating-point sums.
    cached_k, cached_v = cache.keys[0], cache.values[0]
    assert cached_k is not None and cached_v is not None
    np.testing.assert_allclose(cached_k, k, rtol=0, atol=1e-14)
    np.testing.assert_allclose(cached_v, v, rtol=0, atol=1e-14)


def test_forgetting_the_cache_changes_the_output() -> None:
    """A step that sees only its own token is not causal attention over the sequence."""
    layers = [GroupedQueryAttention(8, 4, 2, seed=0)]
    x = np.random.default_rng(1).normal(size=(1, 4, 8))
    full = decode_causal(layers, x)
    alone = np.concatenate([decode_step(layers, x[:, t : t + 1], KVCache(1)) for t in range(4)], axis=1)
    np.testing.assert_allclose(alone[:, 0], full[:, 0], atol=1e-12)  # the first token has no past
    assert not np.allclose(alone[:, 1:], full[:, 1:])


def test_cache_errors() -> None:
    with pytest.raises(ValueError, match="layers must be positive"):
        KVCache(0)
    cache = KVCache(2)
    assert len(cache) == 0 and cache.nbytes == 0
    k = np.zeros((1, 2, 3, 4))
    cache.append(0, k, k)
    with pytest.raises(ValueError, match=r"layer must be in 0 .. 1"):
        cache.append(2, k, k)
    with pytest.raises(ValueError, match="same shape"):
        cache.append(0, k, k[:, :, :1])
    with pytest.raises(ValueError, match="B, h_kv and d_h must match"):
        cache.append(0, np.zeros((1, 1, 3, 4)), np.zeros((1, 1, 3, 4)))
    with pytest.raises(ValueError, match="exactly 4 axes"):
        cache.append(0, k[0], k[0])
    assert "tokens=3" in repr(cache)


def test_decode_errors() -> None:
    layers = [GroupedQueryAttention(8, 4, 2)]
    x = np.zeros((1, 3, 8))
    with pytest.raises(ValueError, match="at least one"):
        decode_causal([], x)
    with pytest.raises(ValueError, match=r"prompt must be in 1 .. 3"):
        decode_incrementally(layers, x, prompt=4)
    with pytest.raises(ValueError, match="cache has 2 layers but the stack has 1"):
        decode_step(layers, x, KVCache(2))
    with pytest.raises(ValueError, match="exactly 3 axes"):
        decode_causal(layers, x[0])


# ----- what one decoding step costs (issue 28: why fewer K/V heads decode faster) -------------
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2), (6, 3), (8, 1)])
def test_step_cost_counts_the_arrays_the_layers_really_read(heads: int, kv_heads: int) -> None:
    """The bytes of the formula are the bytes of the cache a step attends to; the multiply-adds are
    those of the query against the repeated keys and values that the layer multiplies."""
    width, T, B, n_layers = 2 * heads, 6, 2, 3
    layers = [GroupedQueryAttention(width, heads, kv_heads, seed=s) for s in range(n_layers)]
    x = np.random.default_rng(1).normal(size=(B, T, width))
    _, cache = decode_incrementally(layers, x)  # the last step attended to all T cached tokens
    cost = decode_step_cost(n_layers, heads, kv_heads, 2, tokens=T, batch=B, bytes_per_element=8)
    assert cost.bytes_read == cache.nbytes
    q = np.zeros((B, heads, 1, 2))  # the new token's query, (B, h, 1, d_h)
    per_layer = [attention_multiply_adds(q, k) for k in cache.keys if k is not None]
    assert cost.multiply_adds == sum(per_layer) == n_layers * 2 * B * heads * T * 2
    assert cost.multiply_adds_per_byte == pytest.approx(heads / kv_heads / 8)


def test_step_cost_bytes_follow_h_kv_and_multiply_adds_follow_h() -> None:
    costs = {n: decode_step_cost(32, 32, n, 128, tokens=4096) for n in (32, 8, 1)}
    assert {c.multiply_adds for c in costs.values()} == {2 * 32 * 32 * 128 * 4096}
    assert costs[32].bytes_read == 4 * costs[8].bytes_read == 32 * costs[1].bytes_read
    assert costs[32].bytes_read == kv_cache_bytes(32, 32, 128, tokens=4096)  # the whole cache, every step


@pytest.mark.parametrize(("heads", "kv_heads", "T", "S"), [(4, 2, 1, 9), (6, 3, 5, 5), (8, 1, 1, 16), (4, 4, 3, 7)])
def test_attention_multiply_adds_match_pytorch_flop_counter(heads: int, kv_heads: int, T: int, S: int) -> None:
    """PyTorch's FlopCounterMode counts 2 FLOPs per multiply-add of attention's two matrix products
    (the K/V heads repeated with our torch twin, as SDPA's enable_gqa does)."""
    from torch.utils.flop_counter import FlopCounterMode

    B, d_h = 2, 4
    rng = np.random.default_rng(0)
    q, k, v = (torch.from_numpy(rng.normal(size=(B, n, t, d_h))) for n, t in ((heads, T), (kv_heads, S), (kv_heads, S)))
    g = heads // kv_heads
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        scores = q @ gqa_torch.repeat_kv(k, g).transpose(-2, -1)  # (B, h, T, S)
        out = torch.softmax(scores, dim=-1) @ gqa_torch.repeat_kv(v, g)  # (B, h, T, d_h)
    assert out.shape == (B, heads, T, d_h)
    assert counter.get_total_flops() == 2 * attention_multiply_adds(q.numpy(), k.numpy())


def test_step_cost_and_timing_refuse_bad_input() -> None:
    with pytest.raises(ValueError, match="divisor"):
        decode_step_cost(1, 8, 3, 4, tokens=5)
    with pytest.raises(ValueError, match="tokens"):
        decode_step_cost(1, 8, 2, 4, tokens=0)
    with pytest.raises(TypeError, match="tokens"):
        decode_step_cost(1, 8, 2, 4, tokens=5.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="share B and d_h"):
        attention_multiply_adds(np.zeros((1, 4, 1, 3)), np.zeros((1, 2, 5, 4)))
    layer = GroupedQueryAttention(8, 4, 2)
    with pytest.raises(TypeError, match="cached must be True or False"):
        time_decode_step([layer], 4, cached="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="list of GroupedQueryAttention"):
        time_decode_step(layer, 4, cached=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="repeats"):
        time_decode_step([layer], 4, cached=True, repeats=0)


def test_the_cache_makes_a_long_step_much_cheaper() -> None:
    """Measured, with wide margins for a loaded 2-core machine: counting multiply-adds, a step without
    the cache at T = 256 does over 100 times the work of a cached one; we ask only for 5 times the time
    (the shortest of 15 runs cached, 3 uncached), and that the cached step grows no faster than T does
    (8-fold from T = 32 to 256: its attention reads 8 times the keys, its projections stay the same).
    The bound was 4-fold until the tests ran one BLAS thread per process: the step then measured 4.1
    times its T = 32 time in a CI rehearsal, still well under linear growth."""
    stack = [GroupedQueryAttention(64, 8, 2, seed=s) for s in range(2)]
    cached = {T: time_decode_step(stack, T, cached=True, repeats=15) for T in (32, 256)}
    recomputed = time_decode_step(stack, 256, cached=False, repeats=3)
    assert recomputed > 5 * cached[256]
    assert cached[256] < 8 * cached[32]
