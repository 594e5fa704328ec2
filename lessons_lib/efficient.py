"""Online softmax and tiled attention in NumPy (lesson 08).

`mha_numpy.attention` materialises scores and weights of shape ``(..., T, S)``: ``B*h*T*S``
numbers each for a multi-head layer. Tiled attention visits the keys in blocks of ``block_size``
and keeps, per query row, only a running maximum ``m``, a running sum ``l`` of ``exp(score - m)``
and a running weighted sum of values. When a block raises the maximum from ``m`` to ``m_new``,
everything accumulated so far was computed with the old maximum and is rescaled by
``exp(m - m_new)``. The result equals ordinary attention (Milakov & Gimelshein 2018, "Online
normalizer calculation for softmax", arXiv:1805.02867; Dao et al. 2022, "FlashAttention",
arXiv:2205.14135).

Queries may also be processed in blocks (``query_block_size``), which bounds the temporary
``(..., query_block, block)`` tiles regardless of ``T``. A tile whose every (query, key) pair is
masked adds nothing and is skipped, as FlashAttention skips the tiles above a causal diagonal.
`tiled_attention_trace` runs the same loop for one head and records which tiles it visited, in
which order, and one query row's running max and running sum after each key block.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lessons_lib.validation import check_array, check_finite, check_int, check_qkv

__all__ = [
    "OnlineStep",
    "TiledTrace",
    "online_softmax",
    "online_softmax_trace",
    "tiled_attention",
    "tiled_attention_trace",
]

Array = NDArray[np.floating]
Mask = NDArray[np.bool_]
# called after each key block: (key block index, visited?, running max (..., t), running sum (..., t))
BlockRecorder = Callable[[int, bool, Array, Array], None]


def _check_block(name: str, value: int) -> int:
    """A positive number of positions per block (1: one at a time; >= S: a single block)."""
    try:
        return check_int(name, value)
    except ValueError:
        raise ValueError(
            f"{name} must be a positive number of positions per block, got {name}={value}; "
            f"use 1 for one position at a time, or a value >= S for a single block"
        ) from None


@dataclass(frozen=True)
class OnlineStep:
    """State after one block of an online softmax over one row of scores."""

    block: int
    block_max: float
    running_max: float
    rescale: float  # exp(old running max - new running max) applied to the old sum
    running_sum: float


def _update(
    running_max: Array, running_sum: Array, block_scores: Array
) -> tuple[Array, Array, Array, Array]:
    """One online-softmax step. Returns ``(new_max, new_sum, rescale, exp_scores)``.

    ``block_scores (..., n)`` may hold ``-inf`` (masked). A row whose maximum is still ``-inf`` has
    seen nothing yet; we shift it by 0 instead of ``-inf`` so no ``inf - inf = NaN`` appears.
    """
    new_max = np.maximum(running_max, block_scores.max(axis=-1))  # (...,)
    shift = np.where(np.isneginf(new_max), 0.0, new_max)  # (...,)
    rescale = np.exp(running_max - shift)  # exp(-inf) = 0 for the first block
    exp_scores = np.exp(block_scores - shift[..., None])  # (..., n); masked entries -> 0
    new_sum = rescale * running_sum + exp_scores.sum(axis=-1)
    return new_max, new_sum, rescale, exp_scores


def online_softmax(scores: Array, block_size: int) -> Array:
    """Softmax over the last axis of ``scores (..., S)``, reading it ``block_size`` entries at a time.

    The first pass streams over blocks keeping the running max and running sum; the second pass
    normalises. Equal to `mha_numpy.softmax`. ``-inf`` entries get weight 0; a row of only ``-inf``
    raises ``ValueError`` (its softmax would be 0/0).
    """
    check_array("scores", scores, "numpy", "(..., S)")
    block_size = _check_block("block_size", block_size)
    S = scores.shape[-1]
    if S == 0:
        raise ValueError(
            f"scores {tuple(scores.shape)} has no entries per row (S=0): a softmax over nothing is undefined"
        )
    check_finite("scores", scores, allow_minus_inf=True)
    running_max = np.full(scores.shape[:-1], -np.inf, dtype=scores.dtype)
    running_sum = np.zeros(scores.shape[:-1], dtype=scores.dtype)
    for start in range(0, S, block_size):
        running_max, running_sum, _, _ = _update(running_max, running_sum, scores[..., start : start + block_size])
    if np.any(running_sum == 0):
        raise ValueError("a row of scores is all -inf, so its softmax would be 0/0 = NaN")
    return np.exp(scores - running_max[..., None]) / running_sum[..., None]


def online_softmax_trace(row: Array, block_size: int) -> list[OnlineStep]:
    """The running max and running sum after each block, for one row ``(S,)`` of scores."""
    check_array("row", row, "numpy", "(S)")
    block_size = _check_block("block_size", block_size)
    if row.shape[0] == 0:
        raise ValueError("row has no scores (S=0): a softmax over nothing is undefined")
    check_finite("row", row, allow_minus_inf=True)
    running_max, running_sum = np.array(-np.inf), np.array(0.0)
    steps = []
    for index, start in enumerate(range(0, row.shape[0], block_size)):
        block = row[start : start + block_size]
        running_max, running_sum, rescale, _ = _update(running_max, running_sum, block)
        steps.append(OnlineStep(index, float(block.max()), float(running_max), float(rescale), float(running_sum)))
    return steps


def _stream_keys(
    q: Array,
    k: Array,
    v: Array,
    allowed: Mask | None,
    block_size: int,
    scale: float,
    record: BlockRecorder | None = None,
) -> Array:
    """Attention of the query rows in ``q (..., t, d)`` streaming over key blocks; ``(..., t, d_v)``."""
    batch_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    t, S = q.shape[-2], k.shape[-2]
    running_max = np.full((*batch_shape, t), -np.inf, dtype=q.dtype)
    running_sum = np.zeros((*batch_shape, t), dtype=q.dtype)
    acc = np.zeros((*batch_shape, t, v.shape[-1]), dtype=q.dtype)  # un-normalised output
    for index, start in enumerate(range(0, S, block_size)):
        stop = min(start + block_size, S)
        block_mask = None
        if allowed is not None:
            block_mask = allowed if allowed.shape[-1] == 1 else allowed[..., start:stop]
            if not block_mask.any():  # every pair in this tile is masked: it would add exp(-inf) = 0
                if record is not None:
                    record(index, False, running_max, running_sum)
                continue
        scores = q @ np.swapaxes(k[..., start:stop, :], -1, -2)  # (..., t, d) @ (..., d, n) -> (..., t, n)
        scores *= scale
        if block_mask is not None and not block_mask.all():
            scores = np.where(block_mask, scores, -np.inf)
        running_max, running_sum, rescale, p = _update(running_max, running_sum, scores)
        del scores
        acc *= rescale[..., None]  # earlier blocks were weighted with the old maximum
        acc += p @ v[..., start:stop, :]  # (..., t, n) @ (..., n, d_v) -> (..., t, d_v)
        del p
        if record is not None:
            record(index, True, running_max, running_sum)
    acc /= running_sum[..., None]
    return acc


def _query_blocks(
    q: Array,
    k: Array,
    v: Array,
    allowed: Mask | None,
    block_size: int,
    query_block_size: int | None,
    record: Callable[[int], BlockRecorder] | None = None,
) -> Array:
    """The outer loop over query blocks; ``record(query_block)`` gives that block's recorder."""
    batch_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    T = q.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    q_step = T if query_block_size is None else query_block_size
    if q_step >= T:  # one query block: no output buffer beside the accumulator
        return _stream_keys(q, k, v, allowed, block_size, scale, None if record is None else record(0))
    out = np.empty((*batch_shape, T, v.shape[-1]), dtype=np.result_type(q, k, v))
    for index, start in enumerate(range(0, T, q_step)):
        stop = min(start + q_step, T)
        rows_mask = None
        if allowed is not None:
            shared_rows = allowed.ndim < 2 or allowed.shape[-2] == 1  # one mask row for every query
            rows_mask = allowed if shared_rows else allowed[..., start:stop, :]
        out[..., start:stop, :] = _stream_keys(
            q[..., start:stop, :], k, v, rows_mask, block_size, scale, None if record is None else record(index)
        )
    return out


def tiled_attention(
    q: Array,
    k: Array,
    v: Array,
    allowed: Mask | None = None,
    block_size: int = 64,
    query_block_size: int | None = None,
) -> Array:
    """Scaled dot-product attention without materialising the ``(..., T, S)`` weights.

    Args:
        q: queries ``(..., T, d)``; k: keys ``(..., S, d)``; v: values ``(..., S, d_v)``.
        allowed: optional boolean mask broadcastable to ``(..., T, S)``; ``True`` = may attend.
        block_size: keys visited per step (any positive int; the last block may be shorter).
        query_block_size: queries processed together (``None``: all ``T`` at once).

    Returns:
        ``output (..., T, d_v)``, equal to ``mha_numpy.attention(q, k, v, allowed)[0]``.
        There are no weights to return: they never exist as one array.

    Raises:
        ValueError: bad shapes, a block size <= 0, or a query row with no allowed position.
    """
    check_qkv(q, k, v, allowed, "numpy")  # the same checks as mha_numpy.attention, mask included
    block_size = _check_block("block_size", block_size)
    if query_block_size is not None:
        query_block_size = _check_block("query_block_size", query_block_size)
    return _query_blocks(q, k, v, allowed, block_size, query_block_size)


@dataclass(frozen=True)
class TiledTrace:
    """What one run of tiled attention over one head did.

    ``order (query blocks, key blocks)``: the step at which each tile was visited, counting from 1
    (query blocks outside, key blocks inside); 0 marks a tile skipped because all of it is masked.
    ``row_max`` and ``row_sum``: query ``row``'s running max and running sum after each key block
    (one entry per key block; a skipped block leaves them as they were; ``-inf`` and 0 until the row
    has seen an allowed key). ``output (T, d_v)``: the result of that run.
    """

    order: NDArray[np.int_]
    row: int
    key_length: int  # S
    block_size: int
    query_block_size: int
    row_max: tuple[float, ...]
    row_sum: tuple[float, ...]
    output: Array


def tiled_attention_trace(
    q: Array,
    k: Array,
    v: Array,
    allowed: Mask | None = None,
    block_size: int = 64,
    query_block_size: int | None = None,
    row: int = 0,
) -> TiledTrace:
    """Run `tiled_attention` on one head and record what it did (see `TiledTrace`).

    Args:
        q: queries ``(T, d)``; k: keys ``(S, d)``; v: values ``(S, d_v)``: one head, no batch axes.
        allowed: optional boolean mask broadcastable to ``(T, S)``; ``True`` = may attend.
        block_size, query_block_size: as in `tiled_attention` (``None``: all ``T`` queries at once).
        row: the query whose running max and running sum are recorded, ``0 <= row < T``.
    """
    for name, array, layout in (("q", q, "(T, d)"), ("k", k, "(S, d)"), ("v", v, "(S, d_v)")):
        check_array(name, array, "numpy", layout)
    check_qkv(q, k, v, allowed, "numpy")
    block_size = _check_block("block_size", block_size)
    T, S = q.shape[0], k.shape[0]
    q_step = T if query_block_size is None else min(_check_block("query_block_size", query_block_size), T)
    row = check_int("row", row, low=0, high=T - 1)
    order = np.zeros((-(-T // q_step), -(-S // block_size)), dtype=np.int_)
    row_max: list[float] = []
    row_sum: list[float] = []
    steps = 0

    def recorder(query_block: int) -> BlockRecorder:
        def record(key_block: int, visited: bool, running_max: Array, running_sum: Array) -> None:
            nonlocal steps
            if visited:
                steps += 1
                order[query_block, key_block] = steps
            if query_block == row // q_step:
                row_max.append(float(running_max[row % q_step]))
                row_sum.append(float(running_sum[row % q_step]))

        return record

    output = _query_blocks(q, k, v, allowed, block_size, q_step, recorder)
    return TiledTrace(order, row, S, block_size, q_step, tuple(row_max), tuple(row_sum), output)
