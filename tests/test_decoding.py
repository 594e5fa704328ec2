"""Incremental decoding with a KV cache equals full causal attention (lesson 06)."""

from __future__ import annotations

import numpy as np
import pytest

from lessons_lib.gqa_numpy import GroupedQueryAttention
from lessons_lib.kv_cache import KVCache, decode_causal, decode_incrementally, decode_step, kv_cache_bytes


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
