"""Quick check of the lesson "Efficient attention" (checkers in ``lessons_lib.checks.efficient_attention``):
the weight count, the online sum, tiling.

Each checker compares the learner's answer with the right one and, when it is wrong, with the
usual mistakes: leaving out the heads or the batch, counting bytes instead of entries, forgetting
to rescale the running sum (or the running output) when the running maximum grows.
`check_weight_entries` is the checker of ``lessons_lib.checks.inspecting_heads``, re-exported.

Notation: ``B`` batch, ``h`` heads, ``T`` queries, ``S`` source positions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.checks import (
    Verdict,
    array_answer,
    failed,
    first_match,
    number_answer,
    passed,
    reference_array,
    same,
)
from lessons_lib.checks.inspecting_heads import check_weight_entries
from lessons_lib.mha_numpy import attention
from lessons_lib.validation import check_int

__all__ = ["check_online_sum", "check_tiled_output", "check_weight_entries"]

Floats = NDArray[np.float64]


def _online_sum(row: Floats, block_size: int, rescale: bool) -> float:
    running_max, running_sum = -math.inf, 0.0
    for start in range(0, row.shape[0], block_size):
        block = row[start : start + block_size]
        new_max = max(running_max, float(block.max()))
        factor = math.exp(running_max - new_max) if rescale else 1.0
        running_sum = factor * running_sum + float(np.exp(block - new_max).sum())
        running_max = new_max
    return running_sum


def check_online_sum(answer: Any, row: Any, block_size: int) -> Verdict:
    """Question "online sum": the running sum after the last block, ``sum(exp(row - max(row)))``.

    Recognises: no rescale of the old sum when the maximum grows, no maximum subtracted at all,
    and the sum of the last block only.
    """
    question = "online sum"
    r = reference_array("row", row, "(S,)", rank=1)
    block_size = check_int("block_size", block_size)
    a = number_answer(question, answer, "the running sum l after the last block")
    if isinstance(a, Verdict):
        return a
    right = _online_sum(r, block_size, rescale=True)
    if same(a, right):
        return passed(
            question, f"l = {right:.4f} = sum(exp(row - {r.max():g})): the same as a one-pass softmax denominator"
        )
    last = r[(len(r) - 1) // block_size * block_size :]
    no_rescale = _online_sum(r, block_size, rescale=False)
    mistake = first_match(a, [
        (no_rescale,
         "you forgot to rescale: when a block raises the running max from m to m_new, multiply "
         "the old sum by exp(m - m_new) before adding the new block"),
        (np.exp(r).sum(), "you summed exp(score) without subtracting the running max; l is kept relative to it"),
        (np.exp(last - r.max()).sum(), "that is the last block only; the running sum carries every earlier block"),
    ])
    return failed(question, mistake or "expected sum(exp(row - max(row))), built block by block")


def _tiled_variant(
    q: Floats, k: Floats, v: Floats, block_size: int, rescale: bool, normalise: bool, scale: bool
) -> Floats:
    """Tiled attention with one step optionally left out (to recognise that mistake)."""
    lead = q.shape[:-1]
    running_max = np.full(lead, -np.inf)
    running_sum = np.zeros(lead)
    acc = np.zeros((*lead, v.shape[-1]))
    for start in range(0, k.shape[-2], block_size):
        s = q @ np.swapaxes(k[..., start : start + block_size, :], -1, -2)
        if scale:
            s = s / math.sqrt(q.shape[-1])
        new_max = np.maximum(running_max, s.max(axis=-1))
        factor = np.exp(running_max - new_max)
        p = np.exp(s - new_max[..., None])
        running_sum = factor * running_sum + p.sum(axis=-1)
        acc = (factor[..., None] * acc if rescale else acc) + p @ v[..., start : start + block_size, :]
        running_max = new_max
    return acc / running_sum[..., None] if normalise else acc


def check_tiled_output(answer: Any, q: Any, k: Any, v: Any, block_size: int) -> Verdict:
    """Question "tiled output": tiled attention must equal ordinary attention (no mask).

    Recognises: the running output not rescaled when the maximum grows, the final division by the
    running sum forgotten, and the ``1/sqrt(d)`` scale forgotten.
    """
    question = "tiled output"
    qf = reference_array("q", q, "(..., T, d)", min_rank=2)
    kf = reference_array("k", k, "(..., S, d)", min_rank=2)
    vf = reference_array("v", v, "(..., S, d_v)", min_rank=2)
    block_size = check_int("block_size", block_size)
    a = array_answer(question, answer, "your tiled output (..., T, d_v)")
    if isinstance(a, Verdict):
        return a
    right = attention(qf, kf, vf)[0]
    if same(a, right):
        return passed(question, f"equal to ordinary attention, shape {right.shape}, without a (T, S) weight matrix")

    def variant(rescale: bool, normalise: bool, scale: bool) -> Floats:
        return _tiled_variant(qf, kf, vf, block_size, rescale=rescale, normalise=normalise, scale=scale)

    mistake = first_match(a, [
        (lambda: variant(rescale=False, normalise=True, scale=True),
         "you did not rescale the running output: when the max grows from m to m_new, multiply "
         "the accumulated output (not only the sum) by exp(m - m_new)"),
        (lambda: variant(rescale=True, normalise=False, scale=True),
         "you forgot the final division: the accumulated output must be divided by the running sum l"),
        (lambda: variant(rescale=True, normalise=True, scale=False), "you forgot the 1/sqrt(d) scale on the scores"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    if a.shape != right.shape:
        return failed(question, f"expected shape (..., T, d_v) = {right.shape}, got {a.shape}")
    return failed(question, "expected the same numbers as attention(q, k, v)[0]")
