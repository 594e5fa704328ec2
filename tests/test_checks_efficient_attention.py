"""Lesson 07 quick-check: right answers pass, each recognised wrong answer is named."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from lessons_lib.checks.efficient_attention import check_online_sum, check_tiled_output, check_weight_entries
from lessons_lib.efficient import online_softmax_trace, tiled_attention

SIZES = dict(B=2, h=8, T=5, S=7)


def test_weight_entries_right() -> None:
    v = check_weight_entries(2 * 8 * 5 * 7, **SIZES)
    assert v.ok and "560" in v.message


@pytest.mark.parametrize(
    "answer, phrase",
    [
        (2 * 5 * 7, "left out the heads"),
        (8 * 5 * 7, "left out the batch"),
        (2 * 8 * 5 * 5, "used T twice"),
        (2 * 8 * 7 * 7, "used S twice"),
        (4 * 560, "float32"),
        (8 * 560, "float64"),
        (3, "expected B * h * T * S"),
        (None, "no answer yet"),
    ],
)
def test_weight_entries_wrong(answer: object, phrase: str) -> None:
    v = check_weight_entries(answer, **SIZES)
    assert not v.ok and phrase in v.message


ROW = np.array([1.0, 3.0, 0.0, 5.0, 2.0])


def test_online_sum_right() -> None:
    assert check_online_sum(online_softmax_trace(ROW, 2)[-1].running_sum, ROW, 2).ok
    assert check_online_sum(np.exp(ROW - 5).sum(), ROW, 2).ok


def test_online_sum_wrong() -> None:
    no_rescale = np.exp(ROW[:2] - 3).sum() + np.exp(ROW[2:4] - 5).sum() + np.exp(ROW[4:] - 5).sum()
    cases = [
        (no_rescale, "forgot to rescale"),
        (np.exp(ROW).sum(), "without subtracting"),
        (np.exp(ROW[4:] - 5).sum(), "last block only"),
        (42.0, "expected sum"),
        (None, "no answer yet"),
    ]
    for answer, phrase in cases:
        v = check_online_sum(answer, ROW, 2)
        assert not v.ok and phrase in v.message, (answer, v)


def test_tiled_output() -> None:
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 4, 3)) * 3, rng.standard_normal((2, 9, 3)) * 3, rng.standard_normal((2, 9, 2))
    assert check_tiled_output(tiled_attention(q, k, v, block_size=3), q, k, v, 3).ok

    def variant(rescale: bool, normalise: bool, scale: bool) -> NDArray[np.float64]:
        d = q.shape[-1]
        top = np.full(q.shape[:-1], -np.inf)
        total = np.zeros(q.shape[:-1])
        acc = np.zeros((*q.shape[:-1], v.shape[-1]))
        for s0 in range(0, 9, 3):
            s = q @ np.swapaxes(k[:, s0 : s0 + 3], -1, -2) / (np.sqrt(d) if scale else 1.0)
            new_top = np.maximum(top, s.max(-1))
            f = np.exp(top - new_top)
            p = np.exp(s - new_top[..., None])
            total = f * total + p.sum(-1)
            acc = (f[..., None] * acc if rescale else acc) + p @ v[:, s0 : s0 + 3]
            top = new_top
        out: NDArray[np.float64] = acc / total[..., None] if normalise else acc
        return out

    cases = [
        (variant(False, True, True), "did not rescale the running output"),
        (variant(True, False, True), "final division"),
        (variant(True, True, False), "1/sqrt(d)"),
        (np.zeros((2, 4, 2)), "same numbers"),
        (np.zeros((4, 2)), "expected shape"),
        (None, "no answer yet"),
    ]
    for answer, phrase in cases:
        verdict = check_tiled_output(answer, q, k, v, 3)
        assert not verdict.ok and phrase in verdict.message, verdict
