"""Quick check for lesson 05 (grouped-query attention and the KV cache).

Each checker compares an answer with the right one and, when it is wrong, looks for the mistake
that produces exactly that answer: forgetting the factor 2 for K and V, counting ``h`` heads
instead of ``h_kv``, tiling K/V heads instead of repeating each one ``g`` times in a row, or
swapping ``g`` (query heads per K/V head) and ``h_kv`` (number of K/V heads).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lessons_lib.checks import Verdict, as_numpy, failed, passed
from lessons_lib.kv_cache import check_kv_heads, kv_cache_bytes

__all__ = ["check_bytes_per_token", "check_group_size", "check_kv_head_mapping", "check_repeat_kv"]


def check_bytes_per_token(
    answer: Any, layers: int, heads: int, kv_heads: int, head_dim: int, bytes_per_element: int = 2
) -> Verdict:
    """Question: how many bytes does one token add to the KV cache (all layers)?"""
    question = "bytes per token"
    check_kv_heads(heads, kv_heads)
    right = kv_cache_bytes(layers, kv_heads, head_dim, bytes_per_element=bytes_per_element)
    try:
        value = int(answer)
    except (TypeError, ValueError):
        return failed(question, f"expected a whole number of bytes, got {answer!r}")
    if value != answer:
        return failed(question, f"expected a whole number of bytes, got {answer!r}")
    if value == right:
        return passed(
            question,
            f"2 (K and V) x {layers} layers x h_kv={kv_heads} x d_h={head_dim} x "
            f"{bytes_per_element} bytes = {right} bytes per token",
        )
    mistakes = {
        "you counted only keys or only values: both are cached, hence the factor 2": right // 2,
        f"you used h={heads} query heads; the cache holds h_kv={kv_heads} K/V heads": right * heads // kv_heads,
        f"you used h={heads} instead of h_kv={kv_heads} and left out the factor 2 for K and V": right
        * heads
        // kv_heads
        // 2,
        f"that is one layer's share; multiply by the {layers} layers": right // layers,
        f"you counted elements, not bytes: multiply by {bytes_per_element} bytes per element": right
        // bytes_per_element,
    }
    if kv_heads == heads:
        del mistakes[f"you used h={heads} query heads; the cache holds h_kv={kv_heads} K/V heads"]
        del mistakes[f"you used h={heads} instead of h_kv={kv_heads} and left out the factor 2 for K and V"]
    found = [reason for reason, wrong in mistakes.items() if wrong == value]
    if found:
        return failed(question, f"{value} is not right: " + "; or ".join(found))
    return failed(
        question,
        f"{value} is not right; use 2 (K and V) x layers x h_kv x d_h x bytes per element",
    )


def check_group_size(answer: Any, heads: int, kv_heads: int) -> Verdict:
    """Question: how many query heads share one K/V head (``g``)?"""
    question = "group size g"
    check_kv_heads(heads, kv_heads)
    right = heads // kv_heads
    if answer == right:
        return passed(question, f"g = h / h_kv = {heads} / {kv_heads} = {right} query heads per K/V head")
    if answer == kv_heads and kv_heads != right:
        return failed(
            question,
            f"{answer} is h_kv, the number of K/V heads; g is how many query heads share each one: "
            f"h / h_kv = {right}. (This is why we never call h_kv 'groups'.)",
        )
    if answer == heads and heads != right:
        return failed(question, f"{answer} is h, the number of query heads; divide it by h_kv={kv_heads}")
    return failed(question, f"{answer!r} is not right; g = h / h_kv")


def check_kv_head_mapping(answer: Any, heads: int, kv_heads: int) -> Verdict:
    """Question: for each query head ``i``, which K/V head does it read? (``h`` integers)."""
    question = "K/V head of each query head"
    check_kv_heads(heads, kv_heads)
    g = heads // kv_heads
    given = as_numpy(answer)
    right = np.arange(heads) // g
    if given.shape != right.shape:
        return failed(question, f"expected {heads} integers (one per query head), got shape {given.shape}")
    if np.array_equal(given, right):
        return passed(question, f"query head i reads K/V head i // g with g={g}: {right.tolist()}")
    if np.array_equal(given, np.arange(heads) % kv_heads):
        return failed(
            question,
            f"that is the tiled order i % h_kv: neighbouring query heads land on different K/V "
            f"heads. GQA repeats each K/V head g={g} times in a row (repeat-interleave): i // g",
        )
    if np.array_equal(given, np.arange(heads) // kv_heads):
        return failed(
            question,
            f"you divided by h_kv={kv_heads}; divide by g = h / h_kv = {g} (query heads per K/V head)",
        )
    return failed(question, f"{given.tolist()} is not right; query head i reads K/V head i // g")


def check_repeat_kv(answer: Any, kv: Any, group_size: int) -> Verdict:
    """Question: expand ``kv (B, h_kv, S, d_h)`` to ``(B, h, S, d_h)`` for the query heads."""
    question = "repeat K/V heads"
    given, kv = as_numpy(answer), as_numpy(kv)
    right = np.repeat(kv, group_size, axis=1)
    if given.shape != right.shape:
        return failed(
            question,
            f"expected shape (B, h, S, d_h) = {right.shape}, got {given.shape}; repeat along the "
            f"head axis (axis 1)",
        )
    if np.allclose(given, right):
        return passed(question, f"each K/V head appears g={group_size} times in a row: shape {right.shape}")
    if np.allclose(given, np.tile(kv, (1, group_size, 1, 1))):
        return failed(
            question,
            "same shape, wrong order: tiling gives heads 0, 1, .., 0, 1, ..; query head i must "
            "meet K/V head i // g, so repeat each head in place (np.repeat / repeat_interleave)",
        )
    return failed(question, "the numbers differ from repeating each K/V head g times along axis 1")
