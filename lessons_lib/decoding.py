"""Incremental decoding with a real KV cache, in NumPy (lesson 05).

A decoder produces one token at a time. Every new token's query must see the keys and values of
all earlier tokens; recomputing them each step would repeat work, so each layer keeps them in a
cache and appends the new token's K and V. With grouped-query attention the cache holds
``h_kv`` heads per token, not ``h``: that is where GQA saves memory.

The toy decoder here is a stack of `gqa.GroupedQueryAttention` layers with residual connections
(``x <- x + layer(x)``), enough to show that a cache per layer reproduces full causal attention.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from lessons_lib.gqa import GroupedQueryAttention
from lessons_lib.numpy_core import causal_mask
from lessons_lib.validation import check_float, check_rank

Array = NDArray[np.floating]

__all__ = ["KVCache", "decode_causal", "decode_incrementally", "decode_step"]


class KVCache:
    """Keys and values of every token seen so far, one pair of arrays per layer.

    ``keys[l]`` and ``values[l]`` are ``(B, h_kv, t, d_h)`` after ``t`` tokens (``None`` before
    the first). `append` adds the new tokens' K and V along the token axis.
    """

    def __init__(self, layers: int) -> None:
        if isinstance(layers, bool) or not isinstance(layers, int) or layers <= 0:
            raise ValueError(f"layers must be a positive int, got {layers!r}")
        self.keys: list[Array | None] = [None] * layers
        self.values: list[Array | None] = [None] * layers

    @property
    def layers(self) -> int:
        return len(self.keys)

    def __len__(self) -> int:
        """Number of cached tokens ``t`` (taken from layer 0)."""
        first = self.keys[0]
        return 0 if first is None else first.shape[2]

    def append(self, layer: int, k: Array, v: Array) -> tuple[Array, Array]:
        """Add ``k, v (B, h_kv, t_new, d_h)`` to layer ``layer``; return the full ``(B, h_kv, t, d_h)``."""
        if not 0 <= layer < self.layers:
            raise ValueError(f"layer must be in 0 .. {self.layers - 1}, got {layer}")
        check_rank("k", k.shape, 4, "(B, h_kv, t_new, d_h)", exact=True)
        if v.shape != k.shape:
            raise ValueError(f"k and v must have the same shape, got k {k.shape} and v {v.shape}")
        old_k, old_v = self.keys[layer], self.values[layer]
        if old_k is None or old_v is None:
            self.keys[layer], self.values[layer] = k, v
        else:
            if old_k.shape[:2] + old_k.shape[3:] != k.shape[:2] + k.shape[3:]:
                raise ValueError(
                    f"new k {k.shape} does not fit the cache of layer {layer}, which holds "
                    f"(B, h_kv, t, d_h) = {old_k.shape}: B, h_kv and d_h must match"
                )
            self.keys[layer] = np.concatenate([old_k, k], axis=2)  # (B, h_kv, t + t_new, d_h)
            self.values[layer] = np.concatenate([old_v, v], axis=2)  # (B, h_kv, t + t_new, d_h)
        full_k, full_v = self.keys[layer], self.values[layer]
        assert full_k is not None and full_v is not None
        return full_k, full_v

    @property
    def nbytes(self) -> int:
        """Bytes held: every layer's keys and values."""
        return sum(a.nbytes for a in (*self.keys, *self.values) if a is not None)

    def __repr__(self) -> str:
        return f"KVCache(layers={self.layers}, tokens={len(self)}, nbytes={self.nbytes})"


def _check_stack(layers: Sequence[GroupedQueryAttention], x: Array) -> None:
    if len(layers) == 0:
        raise ValueError("layers must hold at least one GroupedQueryAttention layer")
    check_float("x", x)
    check_rank("x", x.shape, 3, "(B, T, D)", exact=True)


def decode_step(layers: Sequence[GroupedQueryAttention], x_new: Array, cache: KVCache) -> Array:
    """Run ``x_new (B, t_new, D)``, the next ``t_new`` tokens, through the stack; fill ``cache``.

    Each layer appends the new tokens' K and V to its cache entry, then the new queries attend to
    all cached tokens under a causal mask (new token ``i`` sees every earlier token and itself).
    ``t_new > 1`` processes a prompt in one go ("prefill"); ``t_new = 1`` is one decoding step.
    Returns the stack's output for the new tokens, ``(B, t_new, D)``.
    """
    _check_stack(layers, x_new)
    if cache.layers != len(layers):
        raise ValueError(f"cache has {cache.layers} layers but the stack has {len(layers)}")
    t_new = x_new.shape[1]
    for index, layer in enumerate(layers):
        k_new, v_new = layer.keys_values(x_new)  # (B, h_kv, t_new, d_h) each
        k, v = cache.append(index, k_new, v_new)  # (B, h_kv, t, d_h) each
        allowed = causal_mask(t_new, k.shape[2])  # (t_new, t): the new tokens are the last ones
        out, _ = layer.attend(x_new, k, v, allowed)  # (B, t_new, D)
        x_new = x_new + out  # residual connection
    return x_new


def decode_incrementally(
    layers: Sequence[GroupedQueryAttention], x: Array, prompt: int = 1
) -> tuple[Array, KVCache]:
    """Feed ``x (B, T, D)`` through the stack: the first ``prompt`` tokens at once, then one by one.

    Returns ``(output (B, T, D), cache)``; the cache ends up holding all ``T`` tokens.
    """
    _check_stack(layers, x)
    T = x.shape[1]
    if isinstance(prompt, bool) or not isinstance(prompt, int) or not 1 <= prompt <= T:
        raise ValueError(f"prompt must be an int in 1 .. T={T}, got {prompt!r}")
    cache = KVCache(len(layers))
    outputs = [decode_step(layers, x[:, :prompt], cache)]
    for t in range(prompt, T):
        outputs.append(decode_step(layers, x[:, t : t + 1], cache))  # one token: (B, 1, D)
    return np.concatenate(outputs, axis=1), cache  # (B, T, D)


def decode_causal(layers: Sequence[GroupedQueryAttention], x: Array) -> Array:
    """The same stack over the whole sequence at once, with a causal mask and no cache: ``(B, T, D)``."""
    _check_stack(layers, x)
    allowed = causal_mask(x.shape[1])  # (T, T)
    for layer in layers:
        out, _ = layer(x, allowed=allowed)
        x = x + out  # residual connection
    return x
