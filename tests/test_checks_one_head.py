"""Lesson 01 Quick check: every checker accepts the right answer and names each mistake it knows."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from lessons_lib.checks import Verdict
from lessons_lib.checks.one_head import check_causal_mask, check_output, check_scores, check_weights
from lessons_lib.mha_numpy import attention, causal_mask, softmax

Floats = NDArray[np.float64]
T, S, d, d_v = 3, 5, 4, 2


@pytest.fixture
def qkv() -> tuple[Floats, Floats, Floats]:
    rng = np.random.default_rng(1)
    return rng.normal(size=(T, d)), rng.normal(size=(S, d)), rng.normal(size=(S, d_v))


def assert_not_yet(verdict: Verdict, *words: str) -> None:
    """The verdict is negative and its message names the mistake (every word appears)."""
    assert isinstance(verdict, Verdict)
    assert not verdict.ok, verdict
    assert repr(verdict).startswith(f"[{verdict.question}] not yet: ")
    for word in words:
        assert word in verdict.message, (word, verdict.message)


# ---- scores ---------------------------------------------------------------------------------


def test_scores_correct(qkv: tuple[Floats, Floats, Floats]) -> None:
    q, k, _ = qkv
    verdict = check_scores(q @ k.T / math.sqrt(d), q, k)
    assert verdict.ok and repr(verdict).startswith("[scores] correct: ")


def test_scores_correct_float32_and_lists(qkv: tuple[Floats, Floats, Floats]) -> None:
    q, k, _ = qkv
    right = q @ k.T / math.sqrt(d)
    assert check_scores(right.astype(np.float32), q, k).ok
    assert check_scores(right.tolist(), q, k).ok


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (lambda q, k: q @ k.T, ["forgot the scale", "sqrt(d)"]),
        (lambda q, k: q @ k.T / d, ["1/d instead of 1/sqrt(d)"]),
        (lambda q, k: q @ k.T * math.sqrt(d), ["multiplied by sqrt(d)"]),
        (lambda q, k: k @ q.T / math.sqrt(d), ["k @ q.T", "(T, S)"]),
        (lambda q, k: k @ q.T, ["k @ q.T", "forgot the scale"]),
        (lambda q, k: q @ k.T / math.sqrt(S), ["sqrt(S)", "feature width"]),
        (lambda q, k: q @ k.T / math.sqrt(T), ["sqrt(T)", "feature width"]),
        (lambda q, k: q @ k.T / math.sqrt(d) + 1.0, ["expected q @ k.T / sqrt(d)"]),
    ],
)
def test_scores_recognises(
    qkv: tuple[Floats, Floats, Floats], wrong: Callable[[Floats, Floats], Any], words: list[str]
) -> None:
    q, k, _ = qkv
    assert_not_yet(check_scores(wrong(q, k), q, k), *words)


def test_scores_none_and_text(qkv: tuple[Floats, Floats, Floats]) -> None:
    q, k, _ = qkv
    assert_not_yet(check_scores(None, q, k), "no answer yet")
    assert_not_yet(check_scores("scores", q, k), "array of numbers")


def test_scores_rejects_bad_problem_inputs(qkv: tuple[Floats, Floats, Floats]) -> None:
    q, k, _ = qkv
    with pytest.raises(TypeError, match="q must hold floating-point"):
        check_scores(q, q.astype(int), k)
    with pytest.raises(ValueError, match="k must have at least 2 axes"):
        check_scores(q, q, k[0])


# ---- weights --------------------------------------------------------------------------------


@pytest.fixture
def scores(qkv: tuple[Floats, Floats, Floats]) -> Floats:
    q, k, _ = qkv
    return q @ k.T / math.sqrt(d)


def test_weights_correct(scores: Floats) -> None:
    verdict = check_weights(softmax(scores, axis=-1), scores)
    assert verdict.ok and "axis=-1" in verdict.message
    exps = np.exp(scores)
    assert check_weights(exps / exps.sum(axis=1, keepdims=True), scores).ok


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (lambda s: softmax(s, axis=0), ["query axis", "axis=-1"]),
        (lambda s: np.exp(s) / np.exp(s).sum(), ["whole matrix"]),
        (lambda s: s / s.sum(axis=-1, keepdims=True), ["without exponentiating"]),
        (lambda s: np.exp(s), ["did not divide"]),
        (lambda s: s, ["scores themselves"]),
        (lambda s: softmax(s, axis=-1) * 2.0, ["do not sum to 1"]),
        (lambda s: softmax(s, axis=-1)[:, ::-1], ["expected softmax(scores, axis=-1)"]),
    ],
)
def test_weights_recognises(scores: Floats, wrong: Callable[[Floats], Any], words: list[str]) -> None:
    assert_not_yet(check_weights(wrong(scores), scores), *words)


# ---- causal mask ----------------------------------------------------------------------------


def test_mask_correct() -> None:
    verdict = check_causal_mask(np.tril(np.ones((4, 4), dtype=bool)), 4)
    assert verdict.ok and "itself included" in verdict.message
    assert check_causal_mask(causal_mask(2, 5), 2, 5).ok


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (~np.tril(np.ones((4, 4), dtype=bool)), ["inverted convention", "True = may attend"]),
        (np.triu(np.ones((4, 4), dtype=bool), k=1), ["inverted convention"]),
        (np.where(np.tril(np.ones((4, 4))) > 0, 0.0, -np.inf), ["additive mask", "mask == 0"]),
        (np.tril(np.ones((4, 4), dtype=int)), ["right pattern", "dtype=bool"]),
        (np.triu(np.ones((4, 4)), k=1), ["inverted convention with numbers"]),
        (np.triu(np.ones((4, 4), dtype=bool)), ["transposed", "np.tril"]),
        (np.tril(np.ones((4, 4), dtype=bool), k=-1), ["excluded the diagonal"]),
        (np.ones((4, 4), dtype=bool), ["nothing is masked"]),
        (np.ones((4, 5), dtype=bool), ["expected shape (T, S) = (4, 4)"]),
        (np.eye(4, dtype=bool), ["expected np.tril"]),
    ],
)
def test_mask_recognises(wrong: NDArray[np.generic], words: list[str]) -> None:
    assert_not_yet(check_causal_mask(wrong, 4), *words)


def test_mask_rectangular_mistakes() -> None:
    right = causal_mask(2, 5)
    assert_not_yet(check_causal_mask(~right, 2, 5), "inverted convention")
    assert_not_yet(check_causal_mask(np.tril(np.ones((2, 5), dtype=bool)), 2, 5), "expected np.tril")
    assert_not_yet(check_causal_mask(None, 2, 5), "no answer yet")


# ---- output ---------------------------------------------------------------------------------


def _naive(q: Floats, k: Floats, v: Floats, allowed: NDArray[np.bool_] | None, scale: float,
           axis: int = -1) -> Floats:
    scores = q @ k.T / scale
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    return softmax(scores, axis=axis) @ v


def test_output_correct(qkv: tuple[Floats, Floats, Floats]) -> None:
    q, k, v = qkv
    allowed = causal_mask(T, S)
    verdict = check_output(attention(q, k, v, allowed)[0], q, k, v, allowed)
    assert verdict.ok and f"({T}, {d_v})" in verdict.message
    assert check_output(attention(q, k, v)[0], q, k, v).ok


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (lambda q, k, v, m: attention(q, k, v, m)[1], ["attention weights", "weights @ v"]),
        (lambda q, k, v, m: _naive(q, k, v, m, 1.0), ["forgot the scale"]),
        (lambda q, k, v, m: _naive(q, k, v, m, d), ["1/d instead of 1/sqrt(d)"]),
        (lambda q, k, v, m: _naive(q, k, v, None, math.sqrt(d)), ["mask was not applied"]),
        (lambda q, k, v, m: _naive(q, k, v, m, math.sqrt(d), axis=0), ["query axis"]),
        (lambda q, k, v, m: v[:T], ["expected softmax(q @ k.T / sqrt(d), axis=-1) @ v"]),
    ],
)
def test_output_recognises(
    qkv: tuple[Floats, Floats, Floats], wrong: Callable[..., Any], words: list[str]
) -> None:
    q, k, v = qkv
    allowed = causal_mask(T, S)
    assert_not_yet(check_output(wrong(q, k, v, allowed), q, k, v, allowed), *words)


def test_output_nan_from_inverted_causal_mask(qkv: tuple[Floats, Floats, Floats]) -> None:
    q, k, v = qkv
    allowed = causal_mask(T, S)
    with np.errstate(invalid="ignore"):
        nan_answer = _naive(q, k, v, ~allowed, math.sqrt(d))
    assert np.isnan(nan_answer).any()
    assert_not_yet(check_output(nan_answer, q, k, v, allowed), "NaN", "inverted")


def test_output_inverted_padding_mask(qkv: tuple[Floats, Floats, Floats]) -> None:
    q, k, v = qkv
    allowed = np.array([True, True, False, True, False])  # a padding mask, broadcast over queries
    wrong = _naive(q, k, v, ~allowed, math.sqrt(d))
    assert_not_yet(check_output(wrong, q, k, v, allowed), "inverted mask")


def test_output_transposed_weights() -> None:
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(4, d)), rng.normal(size=(4, d)), rng.normal(size=(4, d_v))
    weights = attention(q, k, v)[1]
    assert_not_yet(check_output(weights.T @ v, q, k, v), "weights.T @ v")


def test_output_accepts_torch_tensor(qkv: tuple[Floats, Floats, Floats]) -> None:
    torch = pytest.importorskip("torch")
    q, k, v = qkv
    out = torch.from_numpy(attention(q, k, v)[0]).float()
    assert check_output(out, q, k, v).ok


def test_mask_other_dtypes() -> None:
    assert_not_yet(check_causal_mask(np.eye(4, dtype=int), 4), "expected a boolean mask, got dtype int")
    assert_not_yet(check_causal_mask(np.full((4, 4), "yes"), 4), "expected a boolean mask, got dtype <U3")


def test_every_checker_handles_a_missing_answer(qkv: tuple[Floats, Floats, Floats]) -> None:
    q, k, v = qkv
    assert_not_yet(check_scores(None, q, k), "no answer yet")
    assert_not_yet(check_weights(None, q @ k.T), "no answer yet")
    assert_not_yet(check_causal_mask(None, 4), "no answer yet")
    assert_not_yet(check_output(None, q, k, v), "no answer yet", "weights @ v")
