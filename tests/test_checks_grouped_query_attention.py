"""Quick-check functions of lesson 05: the right answer passes, each known mistake is named."""

from __future__ import annotations

import numpy as np
import torch

from lessons_lib.checks.grouped_query_attention import (
    check_bytes_per_token,
    check_group_size,
    check_kv_head_mapping,
    check_repeat_kv,
)

# Llama 3 8B: 32 layers, h = 32, h_kv = 8, d_h = 128, 2 bytes per element.
SIZES = {"layers": 32, "heads": 32, "kv_heads": 8, "head_dim": 128}
RIGHT = 2 * 32 * 8 * 128 * 2


def test_bytes_right_answer() -> None:
    verdict = check_bytes_per_token(RIGHT, **SIZES)
    assert verdict.ok and "131072" in verdict.message
    assert check_bytes_per_token(np.int64(RIGHT), **SIZES).ok


def test_bytes_known_mistakes() -> None:
    assert "factor 2" in check_bytes_per_token(RIGHT // 2, **SIZES).message
    heads_instead = check_bytes_per_token(RIGHT * 4, **SIZES)
    assert not heads_instead.ok and "h=32 query heads" in heads_instead.message
    both = check_bytes_per_token(RIGHT * 2, **SIZES)
    assert "instead of h_kv=8 and left out the factor 2" in both.message
    assert "32 layers" in check_bytes_per_token(RIGHT // 32, **SIZES).message
    in_float32 = check_bytes_per_token(RIGHT // 4, **SIZES, bytes_per_element=4)
    assert "bytes per element" in in_float32.message  # RIGHT // 4 counts elements when each has 4 bytes
    assert "use 2 (K and V)" in check_bytes_per_token(12345, **SIZES).message
    assert "whole number" in check_bytes_per_token("lots", **SIZES).message
    assert "whole number" in check_bytes_per_token(RIGHT + 0.5, **SIZES).message


def test_bytes_mha_model_has_no_heads_mistake() -> None:
    verdict = check_bytes_per_token(2 * 32 * 32 * 128 * 2, layers=32, heads=32, kv_heads=32, head_dim=128)
    assert verdict.ok
    half = check_bytes_per_token(32 * 32 * 128 * 2, layers=32, heads=32, kv_heads=32, head_dim=128)
    assert "factor 2" in half.message and "query heads" not in half.message


def test_group_size() -> None:
    assert check_group_size(4, heads=32, kv_heads=8).ok
    confused = check_group_size(8, heads=32, kv_heads=8)
    assert not confused.ok and "h_kv, the number of K/V heads" in confused.message
    assert "number of query heads" in check_group_size(32, heads=32, kv_heads=8).message
    assert not check_group_size(3, heads=32, kv_heads=8).ok
    assert repr(check_group_size(4, 32, 8)).startswith("[group size] correct")


def test_kv_head_mapping() -> None:
    assert check_kv_head_mapping([0, 0, 0, 1, 1, 1], heads=6, kv_heads=2).ok
    assert check_kv_head_mapping(torch.tensor([0, 0, 1, 1]), heads=4, kv_heads=2).ok
    tiled = check_kv_head_mapping([0, 1, 0, 1, 0, 1], heads=6, kv_heads=2)
    assert not tiled.ok and "tiled" in tiled.message
    swapped = check_kv_head_mapping(np.arange(8) // 2, heads=8, kv_heads=2)  # divided by h_kv, not g
    assert not swapped.ok and "divided by h_kv=2" in swapped.message
    assert "expected 6 integers" in check_kv_head_mapping([0, 1], heads=6, kv_heads=2).message
    assert not check_kv_head_mapping([1, 1, 0, 0], heads=4, kv_heads=2).ok


def test_repeat_kv() -> None:
    kv = np.random.default_rng(0).normal(size=(2, 3, 4, 5))
    assert check_repeat_kv(np.repeat(kv, 2, axis=1), kv, 2).ok
    assert check_repeat_kv(torch.from_numpy(kv).repeat_interleave(2, dim=1), kv, 2).ok
    tiled = check_repeat_kv(np.tile(kv, (1, 2, 1, 1)), kv, 2)
    assert not tiled.ok and "tiling" in tiled.message
    assert "expected shape" in check_repeat_kv(kv, kv, 2).message
    assert "differ" in check_repeat_kv(np.repeat(kv, 2, axis=1) + 1, kv, 2).message
