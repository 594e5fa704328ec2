"""Lesson 08 quick-check: right answers pass, each recognised wrong answer is named, blanks get a hint.

Every checker is also fed odd answers (wrong types, shapes, functions that raise) and must return a
Verdict; no "not yet" message may contain the right answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

from lessons_lib import mha_numpy
from lessons_lib.checks import Verdict
from lessons_lib.checks.efficient_attention import (
    check_kept_entries,
    check_online_update,
    check_padded_decoding,
    check_tiled_attention,
    check_visited_tiles,
    check_weight_entries,
    kept_entries,
    visited_tiles,
)
from lessons_lib.efficient import tiled_attention

Floats = NDArray[np.float64]
SIZES = dict(B=2, h=8, T=5, S=7)
ODD = [None, "abc", {}, [1, [2]], object(), np.int64(3), True, 2.5, math.nan, np.zeros((2, 3))]


def assert_not_yet(verdict: Verdict, phrase: str, *hidden: str) -> None:
    assert not verdict.ok and verdict.answered and phrase in verdict.message, verdict
    for text in hidden:
        assert text not in verdict.message, (text, verdict)


def assert_blank(verdict: Verdict, phrase: str) -> None:
    assert not verdict.ok and not verdict.answered and phrase in verdict.message, verdict
    assert "not answered yet" in repr(verdict)


# ---- weight entries ------------------------------------------------------------------------------
def test_weight_entries_right() -> None:
    v = check_weight_entries(2 * 8 * 5 * 7, **SIZES)
    assert v.ok and "560" in v.message


@pytest.mark.parametrize(
    "answer, phrase",
    [
        (2 * 5 * 7, "left out the heads"),
        (8 * 5 * 7, "left out the batch"),
        (3, "expected B * h * T * S"),
        (None, "replace None with"),
    ],
)
def test_shared_weight_entries_wrong(answer: object, phrase: str) -> None:
    v = check_weight_entries(answer, **SIZES)
    assert not v.ok and phrase in v.message


# ---- kept entries, visited tiles, padded decoding (Your turns 4-6) -------------------------------
KEPT_SIZES = dict(B=2, h=8, T=5, S=12)
TILE_GRID = dict(T=4096, S=4096, query_block=128, block=256)


def test_kept_entries_counts_the_causal_mask() -> None:
    for T, S in ((1, 1), (3, 3), (5, 12), (4, 9)):
        assert kept_entries(2, 3, T, S) == 2 * 3 * int(mha_numpy.causal_mask(T, S).sum())
    with pytest.raises(ValueError, match="S >= T"):
        kept_entries(1, 1, 5, 3)
    v = check_kept_entries(800, **KEPT_SIZES)
    assert v.ok and "800 of the 960" in v.message
    assert check_kept_entries(np.int64(800), **KEPT_SIZES).ok
    assert_blank(check_kept_entries(None, **KEPT_SIZES), "whole number")
    assert check_kept_entries(800.0, **KEPT_SIZES).ok  # a whole float is accepted
    assert_not_yet(check_kept_entries(800.5, **KEPT_SIZES), "is a float")
    assert_not_yet(check_kept_entries(123, **KEPT_SIZES), "is not it", "800")


def test_visited_tiles_counts_the_tiles_with_an_allowed_pair() -> None:
    for T, S, qb, kb in ((6, 9, 2, 3), (8, 8, 3, 2), (7, 7, 7, 7), (5, 12, 2, 5)):
        allowed = mha_numpy.causal_mask(T, S)
        brute = sum(bool(allowed[i : i + qb, j : j + kb].any()) for i in range(0, T, qb) for j in range(0, S, kb))
        assert visited_tiles(T, S, qb, kb) == brute, (T, S, qb, kb)
    v = check_visited_tiles(272, **TILE_GRID)
    assert v.ok and "512" in v.message
    assert_blank(check_visited_tiles(None, **TILE_GRID), "whole number")
    assert_not_yet(check_visited_tiles(7, **TILE_GRID), "is not it", "272")
    # on a grid where the skipped and the fully allowed tiles differ, each gets its own message
    small = dict(T=5, S=12, query_block=2, block=5)  # 3 x 3 tiles, 8 computed, 1 skipped, 6 fully allowed
    assert_not_yet(check_visited_tiles(1, **small), "SKIPS")
    assert_not_yet(check_visited_tiles(6, **small), "every pair is allowed")


_pad_gen = torch.Generator().manual_seed(3)
Q_PAD = torch.randn(2, 3, 2, 4, dtype=torch.float64, generator=_pad_gen)
K_PAD = torch.randn(2, 3, 6, 4, dtype=torch.float64, generator=_pad_gen)
V_PAD = torch.randn(2, 3, 6, 5, dtype=torch.float64, generator=_pad_gen)
N_PAD = torch.tensor([1, 3])
PAD_MASK = (torch.from_numpy(mha_numpy.causal_mask(2, 6))[None, None]
            & (torch.arange(6)[None, :] >= N_PAD[:, None])[:, None, None, :])


def test_padded_decoding_right_wrong_and_bad_problems() -> None:
    right = F.scaled_dot_product_attention(Q_PAD, K_PAD, V_PAD, attn_mask=PAD_MASK)
    assert check_padded_decoding(right, Q_PAD, K_PAD, V_PAD, N_PAD).ok
    assert check_padded_decoding(right, Q_PAD, K_PAD, V_PAD, [1, 3]).ok
    causal_only = F.scaled_dot_product_attention(Q_PAD, K_PAD, V_PAD,
                                                 attn_mask=torch.from_numpy(mha_numpy.causal_mask(2, 6)))
    assert_not_yet(check_padded_decoding(causal_only, Q_PAD, K_PAD, V_PAD, N_PAD), "padding slots")
    assert_not_yet(check_padded_decoding(torch.zeros(2, 3, 2, 5, dtype=torch.float64), Q_PAD, K_PAD, V_PAD, N_PAD),
                   "right shape, wrong numbers")
    assert_not_yet(check_padded_decoding(torch.zeros(2, 5), Q_PAD, K_PAD, V_PAD, N_PAD), "expected shape")
    with pytest.raises(ValueError, match="one number of padding slots per sequence"):
        check_padded_decoding(None, Q_PAD, K_PAD, V_PAD, [1])
    with pytest.raises(ValueError, match="may not reach the T = 2 new tokens"):
        check_padded_decoding(None, Q_PAD, K_PAD, V_PAD, [1, 5])


# ---- online update -------------------------------------------------------------------------------
def right_update(m: float, total: float, block: Floats) -> tuple[float, float]:
    m_new = max(m, float(block.max()))
    return m_new, total * math.exp(m - m_new) + float(np.exp(block - m_new).sum())


def torch_update(m: float, total: float, block: Floats) -> tuple[torch.Tensor, torch.Tensor]:
    b = torch.from_numpy(block)
    m_new = torch.maximum(torch.tensor(m, dtype=torch.float64), b.max())
    return m_new, total * torch.exp(m - m_new) + torch.exp(b - m_new).sum()


def blank_update(m: float, total: float, block: Floats) -> Any:
    """One online-softmax step."""
    ...


def test_online_update_right_and_blank() -> None:
    assert check_online_update(right_update).ok
    assert check_online_update(torch_update).ok
    assert_blank(check_online_update(blank_update), "update(m, l, block)")
    assert_blank(check_online_update(None), "(m_new, l_new)")


def _block_max(m: float, total: float, b: Floats) -> tuple[float, float]:
    return float(b.max()), total * math.exp(m - b.max()) + float(np.exp(b - b.max()).sum())


WRONG_UPDATES: list[tuple[Callable[[float, float, Floats], Any], str]] = [
    (lambda m, s, b: (max(m, b.max()), s + np.exp(b - max(m, b.max())).sum()), "forgot to rescale l"),
    (lambda m, s, b: (max(m, b.max()), s * math.exp(m - max(m, b.max())) + np.exp(b).sum()), "without subtracting"),
    (lambda m, s, b: (max(m, b.max()), s + np.exp(b).sum()), "without subtracting the running max; l is kept relative "
                                                               "to m_new; and you forgot to rescale"),
    (_block_max, "block's max only"),
    (lambda m, s, b: (b.max(), s + np.exp(b - b.max()).sum()), "block's max only"),
    (lambda m, s, b: right_update(m, s, b)[::-1], "returned (l_new, m_new)"),
    (lambda m, s, b: (max(m, b.max()) + 1.0, right_update(m, s, b)[1]), "not the running maximum"),
    (lambda m, s, b: (max(m, b.max()), 2.0), "l_new is not the sum"),
    (lambda m, s, b: 1 / 0, "raised ZeroDivisionError"),
    (lambda m, s, b: print(m), "returned None"),
    (lambda m, s, b: "ab", "expected the pair"),
    (lambda m, s, b: (1.0, 2.0, 3.0), "expected the pair"),
    (lambda m, s, b: [b, b], "not one number"),
]


@pytest.mark.parametrize("update, phrase", WRONG_UPDATES)
def test_online_update_wrong(update: Callable[[float, float, Floats], Any], phrase: str) -> None:
    assert_not_yet(check_online_update(update), phrase, "l * exp(m - m_new) + sum")


# ---- tiled attention (a function, run and measured) ---------------------------------------------
def tiled_variant(
    q: Floats, k: Floats, v: Floats, block: int, rescale: bool = True, normalise: bool = True, scale: bool = True
) -> Floats:
    """An independent tiled loop with one step optionally left out."""
    top, total = np.full(q.shape[:-1], -np.inf), np.zeros(q.shape[:-1])
    acc = np.zeros((*q.shape[:-1], v.shape[-1]))
    for s0 in range(0, k.shape[-2], block):
        s = q @ np.swapaxes(k[..., s0 : s0 + block, :], -1, -2) / (np.sqrt(q.shape[-1]) if scale else 1.0)
        new_top = np.maximum(top, s.max(-1))
        f = np.exp(top - new_top)
        p = np.exp(s - new_top[..., None])
        total = f * total + p.sum(-1)
        acc = (f[..., None] * acc if rescale else acc) + p @ v[..., s0 : s0 + block, :]
        top = new_top
    out: Floats = acc / total[..., None] if normalise else acc
    return out


def loop_tiled(q: Floats, k: Floats, v: Floats, block_size: int) -> Floats:
    return tiled_variant(q, k, v, block_size)


def blank_tiled(q: Floats, k: Floats, v: Floats, block_size: int) -> Any:
    """q (..., T, d), k (..., S, d), v (..., S, d_v) -> (..., T, d_v)."""
    ...


def test_tiled_attention_right_and_blank() -> None:
    verdict = check_tiled_attention(loop_tiled)
    assert verdict.ok and "peak memory stayed below half" in verdict.message
    assert_blank(check_tiled_attention(blank_tiled), "tiled(q, k, v, block_size)")
    assert_blank(check_tiled_attention(None), "looping over blocks of keys")


def _torch_naive(q: Floats, k: Floats, v: Floats, block_size: int) -> Floats:
    qt, kt = torch.from_numpy(q), torch.from_numpy(k)
    weights = torch.softmax(qt @ kt.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
    out: Floats = (weights @ torch.from_numpy(v)).numpy()
    return out


def _torch_sdpa(q: Floats, k: Floats, v: Floats, block_size: int) -> Floats:
    out: Floats = F.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v)).numpy()
    return out


WRONG_TILED: list[tuple[Callable[[Floats, Floats, Floats, int], Any], str]] = [
    (lambda q, k, v, b: mha_numpy.attention(q, k, v)[0], "held"),  # the naive route: a full (T, S) matrix
    (lambda q, k, v, b: tiled_variant(q, k, v, k.shape[-2]), "held"),  # one block as wide as S
    (lambda q, k, v, b: tiled_attention(q, k, v, block_size=b), "calls the library's tiled_attention"),
    (_torch_sdpa, "calls scaled_dot_product_attention"),
    (_torch_naive, "calls from_numpy"),
    (lambda q, k, v, b: tiled_variant(q, k, v, b, rescale=False), "did not rescale the running output"),
    (lambda q, k, v, b: tiled_variant(q, k, v, b, normalise=False), "final division"),
    (lambda q, k, v, b: tiled_variant(q, k, v, b, scale=False), "1/sqrt(d)"),
    (lambda q, k, v, b: tiled_variant(q, k, v, b) if q.shape[-2] < 10 else np.zeros(3), "not a NumPy array equal"),
    (lambda q, k, v, b: tiled_variant(q, k, v, b) if q.shape[-2] < 10 else 1 / 0, "raised ZeroDivisionError"),
    (lambda q, k, v, b: np.zeros((4, 2)), "expected shape"),
    (lambda q, k, v, b: "abc", "must return a NumPy array, got str"),
    (lambda q, k, v, b: 1 / 0, "raised ZeroDivisionError"),
]


@pytest.mark.parametrize("tiled, phrase", WRONG_TILED)
def test_tiled_attention_wrong(tiled: Callable[[Floats, Floats, Floats, int], Any], phrase: str) -> None:
    assert_not_yet(check_tiled_attention(tiled), phrase)


# ---- every checker survives odd answers ----------------------------------------------------------
VALUE_CHECKERS: dict[str, Callable[[Any], Verdict]] = {
    "kept entries": lambda a: check_kept_entries(a, **KEPT_SIZES),
    "visited tiles": lambda a: check_visited_tiles(a, **TILE_GRID),
    "padded decoding": lambda a: check_padded_decoding(a, Q_PAD, K_PAD, V_PAD, N_PAD),
}
FUNCTION_CHECKERS: dict[str, Callable[[Any], Verdict]] = {
    "online update": check_online_update,
    "tiled attention": check_tiled_attention,
}


@pytest.mark.parametrize("label", sorted(VALUE_CHECKERS))
def test_value_checkers_survive_odd_answers(label: str) -> None:
    for answer in [*ODD, torch.ones(2, 3, requires_grad=True)]:
        verdict = VALUE_CHECKERS[label](answer)
        assert isinstance(verdict, Verdict) and verdict.question == label and not verdict.ok, (answer, verdict)


@pytest.mark.parametrize("label", sorted(FUNCTION_CHECKERS))
def test_function_checkers_survive_odd_answers(label: str) -> None:
    for answer in [*ODD, *(lambda *args, odd=odd: odd for odd in ODD if odd is not None)]:
        verdict = FUNCTION_CHECKERS[label](answer)
        assert isinstance(verdict, Verdict) and verdict.question == label and not verdict.ok, (answer, verdict)
