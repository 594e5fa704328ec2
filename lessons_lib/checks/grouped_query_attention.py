"""Quick check of the lesson "Grouped-query attention" and the KV cache (checkers in
``lessons_lib.checks.grouped_query_attention``).

Each checker compares an answer with the right one and, when it is wrong, looks for the mistake
that produces exactly that answer: forgetting the factor 2 for K and V, counting ``h`` heads
instead of ``h_kv``, tiling K/V heads instead of repeating each one ``g`` times in a row, or
swapping ``g`` (query heads per K/V head) and ``h_kv`` (number of K/V heads).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lessons_lib.checks import (
    Verdict,
    array_answer,
    failed,
    first_match,
    int_answer,
    int_array_answer,
    passed,
    reference_array,
    same,
)
from lessons_lib.kv_cache import kv_cache_bytes
from lessons_lib.validation import check_int, group_size

__all__ = ["check_bytes_per_token", "check_group_size", "check_kv_head_mapping", "check_repeat_kv"]


def check_bytes_per_token(
    answer: Any, layers: int, heads: int, kv_heads: int, head_dim: int, bytes_per_element: int = 2
) -> Verdict:
    """Question "bytes per token": how many bytes does one token add to the KV cache (all layers)?"""
    question = "bytes per token"
    group_size(heads, kv_heads)
    right = kv_cache_bytes(layers, kv_heads, head_dim, bytes_per_element=bytes_per_element)
    value = int_answer(question, answer, "the number of bytes")
    if isinstance(value, Verdict):
        return value
    if value == right:
        return passed(
            question,
            f"2 (K and V) x {layers} layers x h_kv={kv_heads} x d_h={head_dim} x "
            f"{bytes_per_element} bytes = {right} bytes per token",
        )
    all_heads = right * heads // kv_heads
    mistakes = [
        (right // 2, "you counted only keys or only values: both are cached, hence the factor 2"),
        (all_heads, f"you used h={heads} query heads; the cache holds h_kv={kv_heads} K/V heads"),
        (all_heads // 2, f"you used h={heads} instead of h_kv={kv_heads} and left out the factor 2 for K and V"),
        (right // layers, f"that is one layer's share; multiply by the {layers} layers"),
        (right // bytes_per_element,
         f"you counted elements, not bytes: multiply by {bytes_per_element} bytes per element"),
    ]
    if kv_heads == heads:  # h = h_kv: "h instead of h_kv" is no mistake
        del mistakes[1:3]
    found = [message for wrong, message in mistakes if same(value, wrong)]
    if found:
        return failed(question, f"{value} is not right: " + "; or ".join(found))
    return failed(question, f"{value} is not right; use 2 (K and V) x layers x h_kv x d_h x bytes per element")


def check_group_size(answer: Any, heads: int, kv_heads: int) -> Verdict:
    """Question "group size": how many query heads share one K/V head (``g``)?"""
    question = "group size"
    right = group_size(heads, kv_heads)
    value = int_answer(question, answer, "g = h // h_kv")
    if isinstance(value, Verdict):
        return value
    if value == right:
        return passed(question, f"g = h / h_kv = {heads} / {kv_heads} = {right} query heads per K/V head")
    if value == kv_heads:
        return failed(
            question,
            f"{value} is h_kv, the number of K/V heads; g is how many query heads share each one: "
            f"h / h_kv = {right}. (This is why we never call h_kv 'groups'.)",
        )
    if value == heads:
        return failed(question, f"{value} is h, the number of query heads; divide it by h_kv={kv_heads}")
    return failed(question, f"{value} is not right; g = h / h_kv")


def check_kv_head_mapping(answer: Any, heads: int, kv_heads: int) -> Verdict:
    """Question "K/V head mapping": for each query head ``i``, which K/V head does it read? (``h`` integers)"""
    question = "K/V head mapping"
    g = group_size(heads, kv_heads)
    given = int_array_answer(question, answer, f"a list of {heads} integers, one per query head")
    if isinstance(given, Verdict):
        return given
    right = np.arange(heads) // g
    if given.shape != right.shape:
        return failed(question, f"expected {heads} integers (one per query head), got shape {given.shape}")
    if same(given, right):
        return passed(question, f"query head i reads K/V head i // g with g={g}: {right.tolist()}")
    mistake = first_match(given, [
        (np.arange(heads) % kv_heads,
         f"that is the tiled order i % h_kv: neighbouring query heads land on different K/V "
         f"heads. GQA repeats each K/V head g={g} times in a row (repeat-interleave): i // g"),
        (np.arange(heads) // kv_heads,
         f"you divided by h_kv={kv_heads}; divide by g = h / h_kv = {g} (query heads per K/V head)"),
    ])
    return failed(question, mistake or f"{given.tolist()} is not right; query head i reads K/V head i // g")


def check_repeat_kv(answer: Any, kv: Any, group_size: int) -> Verdict:
    """Question "repeated K/V heads": expand ``kv (B, h_kv, S, d_h)`` to ``(B, h, S, d_h)`` for the query heads."""
    question = "repeated K/V heads"
    kv_array = reference_array("kv", kv, "(B, h_kv, S, d_h)", rank=4)
    g = check_int("group_size", group_size, symbol="g")
    given = array_answer(question, answer, "np.repeat(kv, g, axis=1)")
    if isinstance(given, Verdict):
        return given
    right = np.repeat(kv_array, g, axis=1)
    if given.shape != right.shape:
        return failed(
            question,
            f"expected shape (B, h, S, d_h) = {right.shape}, got {given.shape}; repeat along the head axis (axis 1)",
        )
    if same(given, right):
        return passed(question, f"each K/V head appears g={g} times in a row: shape {right.shape}")
    if same(given, np.tile(kv_array, (1, g, 1, 1))):
        return failed(
            question,
            "same shape, wrong order: tiling gives heads 0, 1, .., 0, 1, ..; query head i must "
            "meet K/V head i // g, so repeat each head in place (np.repeat / repeat_interleave)",
        )
    return failed(question, "the numbers differ from repeating each K/V head g times along axis 1")
