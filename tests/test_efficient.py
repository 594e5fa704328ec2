"""Online softmax and tiled attention equal the naive versions; bad input is rejected."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray

from lessons_lib.efficient import online_softmax, online_softmax_trace, tiled_attention, tiled_attention_trace
from lessons_lib.mha_numpy import attention, causal_mask, softmax

Floats = NDArray[np.float64]
Mask = NDArray[np.bool_]


def test_online_softmax_equals_softmax() -> None:
    rng = np.random.default_rng(0)
    for _ in range(30):
        shape = (*tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(0, 3)))), int(rng.integers(1, 20)))
        scores = rng.standard_normal(shape) * 10
        for block in (1, 2, 3, shape[-1], shape[-1] + 5):
            assert np.abs(online_softmax(scores, block) - softmax(scores)).max() <= 1e-12


def test_online_softmax_handles_masked_entries_and_large_scores() -> None:
    scores = np.array([[-np.inf, -np.inf, 1.0, 800.0, -np.inf], [1000.0, 999.0, -np.inf, 0.0, 2.0]])
    assert np.allclose(online_softmax(scores, 2), softmax(scores))
    with pytest.raises(ValueError, match="all -inf"):
        online_softmax(np.full((2, 3), -np.inf), 2)


def test_trace_rescales_the_running_sum() -> None:
    row = np.array([1.0, 3.0, 0.0, 5.0, 2.0])
    steps = online_softmax_trace(row, 2)
    assert [s.running_max for s in steps] == [3.0, 5.0, 5.0]
    assert np.isclose(steps[-1].running_sum, np.exp(row - 5.0).sum())
    assert np.isclose(steps[1].rescale, np.exp(3.0 - 5.0))
    # forgetting the rescale gives a different (wrong) sum
    wrong = np.exp(row[:2] - 3).sum() + np.exp(row[2:4] - 5).sum() + np.exp(row[4:] - 5).sum()
    assert not np.isclose(wrong, steps[-1].running_sum)


def random_case(rng: np.random.Generator):  # type: ignore[no-untyped-def]
    lead = tuple(int(n) for n in rng.integers(1, 4, size=int(rng.integers(0, 3))))
    T, S = int(rng.integers(1, 12)), int(rng.integers(1, 15))
    d, d_v = int(rng.integers(1, 7)), int(rng.integers(1, 7))
    q = rng.standard_normal((*lead, T, d)) * 3
    k = rng.standard_normal((*lead, S, d)) * 3
    v = rng.standard_normal((*lead, S, d_v))
    return q, k, v, T, S


@pytest.mark.parametrize("mask_kind", ["none", "causal", "random"])
def test_tiled_equals_naive(mask_kind: str) -> None:
    rng = np.random.default_rng({"none": 1, "causal": 2, "random": 3}[mask_kind])
    for _ in range(40):
        q, k, v, T, S = random_case(rng)
        if mask_kind == "causal":
            if S < T:
                continue
            allowed = causal_mask(T, S)
        elif mask_kind == "random":
            allowed = rng.random((*q.shape[:-1], S)) < 0.4
            allowed[..., int(rng.integers(0, S))] = True  # every row keeps one position
        else:
            allowed = None
        expected, _ = attention(q, k, v, allowed)
        for block in sorted({1, 2, 3, max(1, S // 2), S, S + 3}):
            for q_block in (None, 1, 4):
                out = tiled_attention(q, k, v, allowed, block_size=block, query_block_size=q_block)
                assert out.shape == expected.shape
                assert np.abs(out - expected).max() <= 1e-12, (block, q_block, q.shape, k.shape)


def test_broadcast_masks_and_leading_axes() -> None:
    rng = np.random.default_rng(4)
    q, k, v = rng.standard_normal((2, 3, 5, 4)), rng.standard_normal((2, 3, 7, 4)), rng.standard_normal((2, 3, 7, 2))
    for allowed in (
        np.ones((1, 7), dtype=bool),
        rng.random((2, 1, 5, 7)) < 0.5,
        np.array([True, False, True, True, False, False, True]),
        np.ones((5, 1), dtype=bool),
    ):
        allowed = allowed.copy()
        allowed[..., 0] = True
        expected, _ = attention(q, k, v, allowed)
        for q_block in (None, 2):
            assert np.abs(tiled_attention(q, k, v, allowed, 3, q_block) - expected).max() <= 1e-12
    # keys shared across a broadcast leading axis
    k1, v1 = k[:1], v[:1]
    assert np.allclose(tiled_attention(q, k1, v1, block_size=2), attention(q, k1, v1)[0], atol=1e-12)


def test_tiled_uses_less_memory_than_naive() -> None:
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 2, 256, 16)) for _ in range(3))
    peaks = []
    runs: list[Callable[[], object]] = [lambda: attention(q, k, v)[0], lambda: tiled_attention(q, k, v, block_size=16)]
    for run in runs:
        tracemalloc.start()
        run()
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] * 4 < peaks[0]


def test_bad_inputs_rejected() -> None:
    q, k, v = np.ones((2, 3, 4)), np.ones((2, 5, 4)), np.ones((2, 5, 6))
    for bad in (0, -3):
        with pytest.raises(ValueError, match="block_size must be a positive number of positions per block"):
            tiled_attention(q, k, v, block_size=bad)
        with pytest.raises(ValueError, match="query_block_size must be a positive number"):
            tiled_attention(q, k, v, query_block_size=bad)
        with pytest.raises(ValueError, match="block_size must be a positive number of positions per block"):
            online_softmax(np.ones(3), bad)
    with pytest.raises(TypeError, match="block_size must be an int"):
        tiled_attention(q, k, v, block_size=2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="same feature width"):
        tiled_attention(q, np.ones((2, 5, 3)), v)
    with pytest.raises(ValueError, match="same source length"):
        tiled_attention(q, k, np.ones((2, 4, 6)))
    with pytest.raises(ValueError, match="do not broadcast"):
        tiled_attention(q, np.ones((3, 5, 4)), np.ones((3, 5, 6)))
    with pytest.raises(ValueError, match="no allowed position"):
        tiled_attention(q, k, v, np.zeros((3, 5), dtype=bool))
    with pytest.raises(TypeError, match="boolean mask"):
        tiled_attention(q, k, v, np.ones((3, 5)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="does not broadcast"):
        tiled_attention(q, k, v, np.ones((4, 5), dtype=bool))
    with pytest.raises(TypeError, match="floating-point"):
        tiled_attention(q.astype(int), k, v)
    with pytest.raises(ValueError, match="at least 2 axes"):
        tiled_attention(np.ones(4), k, v)


# --- the trace behind lesson 08's tiling picture ----------------------------------------------------


def test_trace_order_skips_fully_masked_tiles() -> None:
    rng = np.random.default_rng(6)
    q, k, v = rng.standard_normal((8, 4)), rng.standard_normal((8, 4)), rng.standard_normal((8, 3))
    trace = tiled_attention_trace(q, k, v, causal_mask(8, 8), block_size=2, query_block_size=2, row=5)
    # query blocks outside, key blocks inside; tiles above the causal diagonal are never visited
    assert trace.order.tolist() == [[1, 0, 0, 0], [2, 3, 0, 0], [4, 5, 6, 0], [7, 8, 9, 10]]
    assert (trace.key_length, trace.block_size, trace.query_block_size) == (8, 2, 2)
    assert np.abs(trace.output - attention(q, k, v, causal_mask(8, 8))[0]).max() <= 1e-12
    # no mask: every tile, in row-major order
    full = tiled_attention_trace(q, k, v, block_size=3, query_block_size=5)
    assert full.order.tolist() == [[1, 2, 3], [4, 5, 6]]


def test_trace_row_statistics_match_the_row() -> None:
    rng = np.random.default_rng(7)
    T, S, d = 6, 9, 5
    q, k, v = rng.standard_normal((T, d)) * 2, rng.standard_normal((S, d)) * 2, rng.standard_normal((S, 2))
    allowed = causal_mask(T, S)
    for row in range(T):
        trace = tiled_attention_trace(q, k, v, allowed, block_size=4, query_block_size=2, row=row)
        scores = np.where(allowed[row], q[row] @ k.T / np.sqrt(d), -np.inf)
        assert len(trace.row_max) == len(trace.row_sum) == 3  # one entry per key block, skipped or not
        for block, (m, total) in enumerate(zip(trace.row_max, trace.row_sum, strict=True)):
            seen = scores[: (block + 1) * 4]
            assert np.isclose(m, seen.max())
            assert np.isclose(total, np.exp(seen - seen.max()).sum())


def test_trace_of_a_row_that_starts_fully_masked() -> None:
    q, k, v = np.ones((2, 3)), np.ones((6, 3)), np.arange(12.0).reshape(6, 2)
    allowed = np.array([[False, False, False, True, True, True]] * 2)
    trace = tiled_attention_trace(q, k, v, allowed, block_size=3, row=1)
    assert trace.order.tolist() == [[0, 1]]
    assert trace.row_max[0] == -np.inf and trace.row_sum[0] == 0.0
    assert np.allclose(trace.output, attention(q, k, v, allowed)[0])


def test_trace_rejects_bad_input() -> None:
    q, k, v = np.ones((4, 3)), np.ones((5, 3)), np.ones((5, 2))
    with pytest.raises(ValueError, match=r"row must be in 0 \.\. 3, got row=4"):
        tiled_attention_trace(q, k, v, row=4)
    with pytest.raises(ValueError, match="exactly 2 axes"):
        tiled_attention_trace(np.ones((1, 4, 3)), k, v)
    with pytest.raises(ValueError, match="block_size must be a positive number"):
        tiled_attention_trace(q, k, v, block_size=0)
    with pytest.raises(ValueError, match="query_block_size must be a positive number"):
        tiled_attention_trace(q, k, v, query_block_size=0)
    with pytest.raises(TypeError, match="row must be an int"):
        tiled_attention_trace(q, k, v, row=1.0)  # type: ignore[arg-type]


# ----- the backward pass -----------------------------------------------------------------------------
def _autograd(q: Floats, k: Floats, v: Floats, grad: Floats, allowed: Mask | None) -> list[Floats]:
    """dq, dk, dv of PyTorch's autograd through scaled_dot_product_attention."""
    import torch
    import torch.nn.functional as F

    q_t, k_t, v_t = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
    mask = None if allowed is None else torch.from_numpy(allowed)
    out = F.scaled_dot_product_attention(q_t, k_t, v_t, attn_mask=mask)
    torch.autograd.backward(out, torch.from_numpy(grad))
    grads = [t.grad for t in (q_t, k_t, v_t)]
    return [g.numpy() for g in grads if g is not None]


@pytest.mark.parametrize("causal", [False, True])
def test_both_backward_passes_equal_autograd(causal: bool) -> None:
    from lessons_lib.efficient import attention_backward, tiled_attention_backward, tiled_attention_forward

    rng = np.random.default_rng(11 + causal)
    for lead, T, S, d, d_v, block, q_block in (((2, 3), 7, 10, 4, 5, 3, 2), ((1,), 5, 5, 3, 2, 2, 4),
                                               ((), 9, 13, 6, 3, 4, 5), ((2,), 1, 6, 2, 2, 5, 1)):
        q, k = rng.standard_normal((*lead, T, d)) * 2, rng.standard_normal((*lead, S, d)) * 2
        v, grad = rng.standard_normal((*lead, S, d_v)), rng.standard_normal((*lead, T, d_v))
        allowed = causal_mask(T, S) if causal else None
        expected = _autograd(q, k, v, grad, allowed)
        out, weights = attention(q, k, v, allowed)
        stored = attention_backward(q, k, v, weights, out, grad)
        tiled_out, lse = tiled_attention_forward(q, k, v, allowed, block_size=block)
        assert np.abs(tiled_out - out).max() <= 1e-12
        recomputed = tiled_attention_backward(q, k, v, tiled_out, lse, grad, allowed, block_size=block,
                                              query_block_size=q_block)
        for ours, theirs, again in zip(stored, expected, recomputed, strict=True):
            assert ours.shape == theirs.shape == again.shape
            assert np.abs(ours - theirs).max() <= 1e-12
            assert np.abs(again - theirs).max() <= 1e-12


def test_logsumexp_rebuilds_the_weights() -> None:
    from lessons_lib.efficient import tiled_attention_forward

    rng = np.random.default_rng(5)
    q, k, v = rng.standard_normal((2, 6, 3)), rng.standard_normal((2, 8, 3)), rng.standard_normal((2, 8, 2))
    _, lse = tiled_attention_forward(q, k, v, causal_mask(6, 8), block_size=3)
    _, weights = attention(q, k, v, causal_mask(6, 8))
    scores = np.where(causal_mask(6, 8), q @ np.swapaxes(k, -1, -2) / np.sqrt(3), -np.inf)
    assert np.allclose(np.exp(scores - lse[..., None]), weights, atol=1e-14)


def test_recomputing_backward_keeps_no_score_matrix() -> None:
    """At T = S = 512 the recomputing backward holds far less than one (T, S) float64 array at once."""
    from lessons_lib.efficient import tiled_attention_backward, tiled_attention_forward

    rng = np.random.default_rng(3)
    q, k, v, grad = (rng.standard_normal((512, 8)) for _ in range(4))
    out, lse = tiled_attention_forward(q, k, v, block_size=32)
    tracemalloc.start()
    tiled_attention_backward(q, k, v, out, lse, grad, block_size=32, query_block_size=32)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 512 * 512 * 8 / 4


def test_backward_bad_inputs() -> None:
    from lessons_lib.efficient import attention_backward, tiled_attention_backward, tiled_attention_forward

    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 2))
    grad = rng.standard_normal((2, 4, 2))
    out, weights = attention(q, k, v)
    _, lse = tiled_attention_forward(q, k, v)
    with pytest.raises(ValueError, match="grad_out must have the shape of the output"):
        attention_backward(q, k, v, weights, out, grad[..., :1])
    with pytest.raises(ValueError, match="weights must have shape"):
        attention_backward(q, k, v, weights[..., :4], out, grad)
    with pytest.raises(ValueError, match="same leading"):
        attention_backward(q[:1], k, v, weights, out, grad)
    with pytest.raises(ValueError, match="logsumexp must hold one number per query"):
        tiled_attention_backward(q, k, v, out, lse[..., :3], grad)
    with pytest.raises(ValueError, match="block_size must be a positive"):
        tiled_attention_backward(q, k, v, out, lse, grad, block_size=0)
    with pytest.raises(TypeError, match="grad_out must be an array"):
        tiled_attention_backward(q, k, v, out, lse, list(grad))  # type: ignore[arg-type]
