"""Quick check for lesson 07 (efficient attention): the weight count, the online sum, tiling.

Each checker compares the learner's answer with the right one and, when it is wrong, with the
usual mistakes: leaving out the heads or the batch, counting bytes instead of entries, forgetting
to rescale the running sum (or the running output) when the running maximum grows.

Notation: ``B`` batch, ``h`` heads, ``T`` queries, ``S`` source positions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.checks import Verdict, as_numpy, failed, number_answer, passed
from lessons_lib.mha_numpy import attention

__all__ = ["check_weight_entries", "check_online_sum", "check_tiled_output"]

Floats = NDArray[np.float64]


def check_weight_entries(answer: Any, *, B: int, h: int, T: int, S: int) -> Verdict:
    """Question "weight entries": a materialised weight tensor has ``B * h * T * S`` entries.

    Recognises: heads left out, batch left out, ``T * T`` or ``S * S`` used for ``T * S``, and
    bytes (float32 or float64) given instead of entries.
    """
    question = "weight entries"
    a = number_answer(question, answer, "B * h * T * S")
    if isinstance(a, Verdict):
        return a
    right = B * h * T * S
    if a == right:
        return passed(question, f"B*h*T*S = {B}*{h}*{T}*{S} = {right} entries, one per (batch, head, query, key)")
    mistakes = [
        (B * T * S, "you left out the heads: every head has its own (T, S) map"),
        (h * T * S, "you left out the batch: every sequence in the batch has its own maps"),
        (B * h * T * T, f"you used T twice; the key axis has S = {S} positions"),
        (B * h * S * S, f"you used S twice; the query axis has T = {T} positions"),
        (4 * right, "that is bytes in float32; the question asks for entries (divide by 4)"),
        (8 * right, "that is bytes in float64; the question asks for entries (divide by 8)"),
    ]
    for value, message in mistakes:
        if value != right and a == value:
            return failed(question, message)
    return failed(question, "expected B * h * T * S: one weight per batch row, head, query and key")


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
    r = np.asarray(as_numpy(row), dtype=np.float64)
    a = number_answer(question, answer, "the running sum l after the last block")
    if isinstance(a, Verdict):
        return a
    right = _online_sum(r, block_size, rescale=True)
    if math.isclose(a, right, rel_tol=1e-6):
        return passed(question, f"l = {right:.4f} = sum(exp(row - {r.max():g})): the same as a one-pass softmax denominator")
    no_rescale = _online_sum(r, block_size, rescale=False)
    if not math.isclose(no_rescale, right, rel_tol=1e-6) and math.isclose(a, no_rescale, rel_tol=1e-6):
        return failed(
            question,
            "you forgot to rescale: when a block raises the running max from m to m_new, multiply "
            "the old sum by exp(m - m_new) before adding the new block",
        )
    if math.isclose(a, float(np.exp(r).sum()), rel_tol=1e-6):
        return failed(question, "you summed exp(score) without subtracting the running max; l is kept relative to it")
    last = r[(len(r) - 1) // block_size * block_size :]
    if math.isclose(a, float(np.exp(last - r.max()).sum()), rel_tol=1e-6):
        return failed(question, "that is the last block only; the running sum carries every earlier block")
    return failed(question, "expected sum(exp(row - max(row))), built block by block")


def _tiled_variant(q: Floats, k: Floats, v: Floats, block_size: int, rescale: bool, normalise: bool, scale: bool) -> Floats:
    """Tiled attention with one step optionally left out (to recognise that mistake)."""
    d = q.shape[-1]
    lead = q.shape[:-1]
    running_max = np.full(lead, -np.inf)
    running_sum = np.zeros(lead)
    acc = np.zeros(lead + (v.shape[-1],))
    for start in range(0, k.shape[-2], block_size):
        s = q @ np.swapaxes(k[..., start : start + block_size, :], -1, -2)
        if scale:
            s = s / math.sqrt(d)
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
    qf, kf, vf = (np.asarray(as_numpy(x), dtype=np.float64) for x in (q, k, v))
    if answer is None:
        return failed(question, "no answer yet: replace None with your tiled output (..., T, d_v)")
    try:
        a = np.asarray(as_numpy(answer), dtype=np.float64)
    except (TypeError, ValueError):
        return failed(question, f"expected an array, got {type(answer).__name__}")
    right = np.asarray(attention(qf, kf, vf)[0], dtype=np.float64)

    def same(x: Floats) -> bool:
        return a.shape == x.shape and bool(np.allclose(a, x, rtol=1e-5, atol=1e-8))

    if same(right):
        return passed(question, f"equal to ordinary attention, shape {right.shape}, without a (T, S) weight matrix")
    variants = [
        (dict(rescale=False, normalise=True, scale=True),
         "you did not rescale the running output: when the max grows from m to m_new, multiply "
         "the accumulated output (not only the sum) by exp(m - m_new)"),
        (dict(rescale=True, normalise=False, scale=True),
         "you forgot the final division: the accumulated output must be divided by the running sum l"),
        (dict(rescale=True, normalise=True, scale=False),
         "you forgot the 1/sqrt(d) scale on the scores"),
    ]
    for options, message in variants:
        if same(_tiled_variant(qf, kf, vf, block_size, **options)):
            return failed(question, message)
    if a.shape != right.shape:
        return failed(question, f"expected shape (..., T, d_v) = {right.shape}, got {a.shape}")
    return failed(question, "expected the same numbers as attention(q, k, v)[0]")
