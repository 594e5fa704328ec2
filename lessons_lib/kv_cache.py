"""The KV cache: how many bytes decoding keeps for every earlier token (lesson 05)."""

from __future__ import annotations

__all__ = ["kv_cache_bytes"]


def kv_cache_bytes(
    layers: int,
    kv_heads: int,
    head_dim: int,
    tokens: int = 1,
    batch: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes of cached keys and values: ``2 (K and V) x layers x h_kv x d_h x tokens x batch x bytes``.

    ``bytes_per_element`` is 2 for float16/bfloat16, 4 for float32, 1 for an 8-bit cache.
    """
    sizes = {
        "layers": layers,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "tokens": tokens,
        "batch": batch,
        "bytes_per_element": bytes_per_element,
    }
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {name}={value}")
    return 2 * layers * kv_heads * head_dim * tokens * batch * bytes_per_element
