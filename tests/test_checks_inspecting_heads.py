"""Lesson 04 Quick-check functions: the right answer passes, each recognised wrong answer is named."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from lessons_lib.checks import Verdict
from lessons_lib.checks.inspecting_heads import (
    check_head_columns,
    check_head_count,
    check_score_multiplies,
    check_weight_entries,
)

B, h, T, S, D = 2, 4, 5, 7, 16


def test_weight_entries_right() -> None:
    verdict = check_weight_entries(B * h * T * S, B=B, h=h, T=T, S=S)
    assert isinstance(verdict, Verdict) and verdict.ok
    assert "B*h*T*S" in repr(verdict) and repr(verdict).startswith("[weight entries] correct")


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (B * T * S, "every head stores its own (T, S) map"),
        (h * T * S, "left out the batch"),
        (B * h * T * T, "used T twice"),
        (12345, "shape (B, h, T, S)"),
        (2.5, "one whole number"),
    ],
)
def test_weight_entries_wrong(answer: float, phrase: str) -> None:
    verdict = check_weight_entries(answer, B=B, h=h, T=T, S=S)
    assert not verdict.ok
    assert phrase in verdict.message
    assert repr(verdict).startswith("[weight entries] not yet")


def test_head_count_right() -> None:
    assert check_head_count(8, 512, 64).ok


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (7, "does not divide D=512"),
        (64, "is the head width d_h"),
        (16, "d_h = 32 wide, not 64"),
        (0, "positive number"),
    ],
)
def test_head_count_wrong(answer: int, phrase: str) -> None:
    verdict = check_head_count(answer, 512, 64)
    assert not verdict.ok
    assert phrase in verdict.message


def test_head_count_rejects_bad_question() -> None:
    with pytest.raises(ValueError, match="must divide D"):
        check_head_count(3, 16, 5)


@pytest.fixture()
def wq() -> NDArray[np.float64]:
    return np.random.default_rng(0).normal(size=(D, D))


def test_head_columns_right(wq: NDArray[np.float64]) -> None:
    assert check_head_columns(wq[:, 8:12], wq, head=2, heads=4).ok


def test_head_columns_accepts_torch(wq: NDArray[np.float64]) -> None:
    torch = pytest.importorskip("torch")
    assert check_head_columns(torch.from_numpy(wq[:, 8:12].copy()), torch.from_numpy(wq), head=2, heads=4).ok


@pytest.mark.parametrize(
    ("pick", "phrase"),
    [
        (lambda w: w[8:12, :], "those are rows"),
        (lambda w: w[:, 8:12].T, "transposed"),
        (lambda w: w[:, 2::4], "every h-th column"),
        (lambda w: w[:, 4:8], "block of head 1"),
        (lambda w: w[:, 12:16], "block of head 3"),
        (lambda w: w[:, :3], "expected shape (D, d_h)"),
    ],
)
def test_head_columns_wrong(wq: NDArray[np.float64], pick: object, phrase: str) -> None:
    verdict = check_head_columns(pick(wq), wq, head=2, heads=4)  # type: ignore[operator]
    assert not verdict.ok
    assert phrase in verdict.message


H = 2  # d_h = 8 differs from h, so each wrong count below is a different number


def test_score_multiplies_right() -> None:
    verdict = check_score_multiplies(B * T * S * D, B, T, S, D, H)
    assert verdict.ok and "not by h" in verdict.message


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        (B * H * T * S * D, "d_h long, not D long"),
        (B * T * S * (D // H), "counts one head"),
        (B * H * T * S, "number of scores"),
        (99, "dot product of length d_h"),
    ],
)
def test_score_multiplies_wrong(answer: int, phrase: str) -> None:
    verdict = check_score_multiplies(answer, B, T, S, D, H)
    assert not verdict.ok
    assert phrase in verdict.message
