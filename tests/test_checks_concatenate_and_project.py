"""Tests for `lessons_lib.checks.concatenate_and_project`: each checker on the right answer and on every wrong
answer it recognises (the verdict must name the mistake), plus bad reference arguments."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from lessons_lib import mha_numpy
from lessons_lib.checks import Verdict
from lessons_lib.checks.concatenate_and_project import check_combine, check_linear_weight, check_merge, check_mha_mask

B, h, T, d_h = 2, 3, 4, 2
D = h * d_h


@pytest.fixture
def heads_out() -> NDArray[np.float64]:
    """Per-head outputs ``(B, h, T, d_h)``."""
    return np.random.default_rng(1).normal(size=(B, h, T, d_h))


@pytest.fixture
def wo() -> NDArray[np.float64]:
    """An output projection ``(D, D)`` in NumPy's ``(in, out)`` layout (not symmetric)."""
    return mha_numpy.init_weights(D, seed=2)["wo"]


def assert_fails(verdict: Verdict, *words: str) -> None:
    assert not verdict.ok, verdict
    assert repr(verdict).startswith(f"[{verdict.question}] not yet: ")
    for word in words:
        assert word in verdict.message, (word, verdict.message)


# ---- merge ---------------------------------------------------------------------------------


def test_merge_correct_and_equal_to_library(heads_out: NDArray[np.float64]) -> None:
    merged = heads_out.transpose(0, 2, 1, 3).reshape(B, T, D)
    verdict = check_merge(merged, heads_out)
    assert verdict.ok, verdict
    assert repr(verdict).startswith("[merge] correct: ")
    assert check_merge(mha_numpy.merge_heads(heads_out), heads_out).ok


def test_merge_accepts_torch_float32(heads_out: NDArray[np.float64]) -> None:
    torch = pytest.importorskip("torch")
    from lessons_lib import mha_torch

    merged = mha_torch.merge_heads(torch.from_numpy(heads_out).float())
    assert check_merge(merged, heads_out).ok


def test_merge_direct_reshape(heads_out: NDArray[np.float64]) -> None:
    assert_fails(check_merge(heads_out.reshape(B, T, D), heads_out), "direct reshape", "transpos")


def test_merge_interleaved(heads_out: NDArray[np.float64]) -> None:
    wrong = heads_out.transpose(0, 2, 3, 1).reshape(B, T, D)
    assert_fails(check_merge(wrong, heads_out), "interleaved", "(B, T, d_h, h)")


def test_merge_averaged(heads_out: NDArray[np.float64]) -> None:
    assert_fails(check_merge(heads_out.mean(axis=1), heads_out), "averaged", "lost the head axis")


def test_merge_summed(heads_out: NDArray[np.float64]) -> None:
    assert_fails(check_merge(heads_out.sum(axis=1), heads_out), "summed", "lost the head axis")


def test_merge_transpose_without_reshape(heads_out: NDArray[np.float64]) -> None:
    assert_fails(check_merge(heads_out.transpose(0, 2, 1, 3), heads_out), "reshape", "missing")


def test_merge_other_shape_and_other_numbers(heads_out: NDArray[np.float64]) -> None:
    assert_fails(check_merge(np.zeros((B, D)), heads_out), "expected shape", str((B, T, D)))
    assert_fails(check_merge(np.zeros((B, T, D)), heads_out), "numbers")


def test_merge_no_answer_and_bad_dtype(heads_out: NDArray[np.float64]) -> None:
    assert_fails(check_merge(None, heads_out), "no answer yet")
    assert_fails(check_merge(np.zeros((B, T, D), dtype=int), heads_out), "numbers are not a merge")
    assert_fails(check_merge(np.full((B, T, D), "x"), heads_out), "array of numbers", "dtype <U1")
    assert_fails(check_merge([[1.0], [2.0, 3.0]], heads_out), "array of numbers", "list")


def test_merge_bad_reference() -> None:
    with pytest.raises(ValueError, match=r"heads_out must have 4 axes"):
        check_merge(np.zeros((B, T, D)), np.zeros((B, T, D)))
    with pytest.raises(TypeError, match=r"heads_out must hold floating-point"):
        check_merge(np.zeros((B, T, D)), np.zeros((B, h, T, d_h), dtype=int))


# ---- nn.Linear weight ----------------------------------------------------------------


def test_linear_weight_correct(wo: NDArray[np.float64]) -> None:
    verdict = check_linear_weight(wo.T, wo)
    assert verdict.ok, verdict
    assert "(out_features, in_features)" in verdict.message


def test_linear_weight_from_library_layer() -> None:
    torch = pytest.importorskip("torch")
    from lessons_lib import mha_torch

    numpy_layer = mha_numpy.MultiHead(D, h, seed=3)
    torch_layer = mha_torch.MultiHead(D, h, seed=3, dtype=torch.float32)
    assert check_linear_weight(torch_layer.wq.weight, numpy_layer.wq).ok
    assert_fails(check_linear_weight(torch.from_numpy(numpy_layer.wq), numpy_layer.wq), "not transposed")


def test_linear_weight_not_transposed(wo: NDArray[np.float64]) -> None:
    assert_fails(check_linear_weight(wo, wo), "not transposed", "(out_features, in_features)")


def test_linear_weight_not_transposed_rectangular() -> None:
    w = np.random.default_rng(0).normal(size=(D, 2 * D))  # (in, out)
    assert check_linear_weight(w.T, w).ok
    assert_fails(check_linear_weight(w, w), "not transposed")


def test_linear_weight_wrong_shape_and_numbers(wo: NDArray[np.float64]) -> None:
    assert_fails(check_linear_weight(np.zeros((D, D + 1)), wo), "expected shape")
    assert_fails(check_linear_weight(wo.T + 1.0, wo), "not w.T")


def test_linear_weight_bad_reference() -> None:
    with pytest.raises(ValueError, match=r"w_in_out must have 2 axes"):
        check_linear_weight(np.zeros((D, D)), np.zeros(D))


# ---- nn.MultiheadAttention mask ----------------------------------------------------


def test_mha_mask_correct() -> None:
    allowed = mha_numpy.causal_mask(T)
    verdict = check_mha_mask(~allowed, allowed)
    assert verdict.ok, verdict
    assert "blocked" in verdict.message


def test_mha_mask_accepts_torch() -> None:
    pytest.importorskip("torch")
    from lessons_lib import mha_torch

    allowed = mha_torch.causal_mask(T, T + 2)
    assert check_mha_mask(~allowed, allowed).ok
    assert_fails(check_mha_mask(allowed, allowed), "inverted convention")


def test_mha_mask_inverted() -> None:
    allowed = mha_numpy.causal_mask(T)
    assert_fails(check_mha_mask(allowed, allowed), "inverted convention", "True as blocked", "~allowed")


def test_mha_mask_transposed() -> None:
    allowed = mha_numpy.causal_mask(T)
    assert_fails(check_mha_mask((~allowed).T, allowed), "transposed")
    rectangular = mha_numpy.causal_mask(T, T + 2)
    assert_fails(check_mha_mask((~rectangular).T, rectangular), "transposed")


def test_mha_mask_additive() -> None:
    allowed = mha_numpy.causal_mask(T)
    additive = np.where(allowed, 0.0, -np.inf)
    assert check_mha_mask(additive, allowed).ok
    assert_fails(check_mha_mask(np.where(allowed, -np.inf, 0.0), allowed), "inverted additive")
    assert_fails(check_mha_mask(allowed.astype(float), allowed), "-inf where blocked")


def test_mha_mask_wrong_shape_pattern_and_dtype() -> None:
    allowed = mha_numpy.causal_mask(T)
    assert_fails(check_mha_mask(np.ones((T, T + 1), dtype=bool), allowed), "expected shape")
    assert_fails(check_mha_mask(np.zeros((T, T), dtype=bool), allowed), "pattern")
    assert_fails(check_mha_mask((~allowed).astype(int), allowed), "dtype")
    assert_fails(check_mha_mask(None, allowed), "no answer yet")


def test_mha_mask_bad_reference() -> None:
    with pytest.raises(TypeError, match=r"allowed must hold booleans .* laid out as \(T, S\)"):
        check_mha_mask(np.zeros((T, T), dtype=bool), np.zeros((T, T)))


# ---- layer output -------------------------------------------------------------------


def test_combine_correct(heads_out: NDArray[np.float64], wo: NDArray[np.float64]) -> None:
    output = mha_numpy.merge_heads(heads_out) @ wo
    verdict = check_combine(output, heads_out, wo)
    assert verdict.ok, verdict
    assert "row block i" in verdict.message


def test_combine_averaged(heads_out: NDArray[np.float64], wo: NDArray[np.float64]) -> None:
    assert_fails(check_combine(heads_out.mean(axis=1), heads_out, wo), "averaged", "concatenating")
    assert_fails(check_combine(heads_out.sum(axis=1), heads_out, wo), "averaged (or summed)")


def test_combine_average_of_contributions(heads_out: NDArray[np.float64], wo: NDArray[np.float64]) -> None:
    blocks = [heads_out[:, i] @ wo[i * d_h : (i + 1) * d_h] for i in range(h)]
    assert_fails(check_combine(np.mean(blocks, axis=0), heads_out, wo), "1/h", "averaged")


def test_combine_forgot_wo(heads_out: NDArray[np.float64], wo: NDArray[np.float64]) -> None:
    assert_fails(check_combine(mha_numpy.merge_heads(heads_out), heads_out, wo), "forgot", "W_o")


def test_combine_wo_transposed(heads_out: NDArray[np.float64], wo: NDArray[np.float64]) -> None:
    wrong = mha_numpy.merge_heads(heads_out) @ wo.T
    assert_fails(check_combine(wrong, heads_out, wo), "W_o is transposed")


def test_combine_wrong_merge(heads_out: NDArray[np.float64], wo: NDArray[np.float64]) -> None:
    wrong = heads_out.reshape(B, T, D) @ wo
    assert_fails(check_combine(wrong, heads_out, wo), "direct reshape")


def test_combine_wrong_shape_and_numbers(heads_out: NDArray[np.float64], wo: NDArray[np.float64]) -> None:
    assert_fails(check_combine(np.zeros((B, D)), heads_out, wo), "expected shape")
    assert_fails(check_combine(np.zeros((B, T, D)), heads_out, wo), "numbers differ")


def test_combine_bad_reference(heads_out: NDArray[np.float64]) -> None:
    with pytest.raises(ValueError, match=r"wo must be \(D, D\)"):
        check_combine(np.zeros((B, T, D)), heads_out, np.zeros((D + 1, D + 1)))
    with pytest.raises(ValueError, match=r"wo must have 2 axes"):
        check_combine(np.zeros((B, T, D)), heads_out, np.zeros(D))


def test_lesson03_checks_do_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, lessons_lib.checks.concatenate_and_project; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
