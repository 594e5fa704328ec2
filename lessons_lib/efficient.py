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

The backward pass comes twice: `attention_backward` from the stored weights ``P``, and
`tiled_attention_backward` from one number per query, the logsumexp that `tiled_attention_forward`
returns beside the output, rebuilding each tile of ``P`` when it needs it, as FlashAttention's
backward pass does (Dao 2023, "FlashAttention-2", arXiv:2307.08691). Both equal PyTorch's autograd.
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
    "attention_backward",
    "online_softmax",
    "online_softmax_trace",
    "tiled_attention",
    "tiled_attention_backward",
    "tiled_attention_forward",
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
    return _stream_keys_stats(q, k, v, allowed, block_size, scale, record)[0]


def _stream_keys_stats(
    q: Array,
    k: Array,
    v: Array,
    allowed: Mask | None,
    block_size: int,
    scale: float,
    record: BlockRecorder | None = None,
) -> tuple[Array, Array, Array]:
    """`_stream_keys`, also returning the final running max and running sum ``(..., t)``."""
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
    return acc, running_max, running_sum


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


# ----- The backward pass ---------------------------------------------------------------------------
#
# For one head, with scale c = 1/sqrt(d): scores Z = c Q K^T (T, S), weights P = softmax(Z) row by row,
# output O = P V. Given dO = dLoss/dO (T, d_v), the chain rule gives
#     dV = P^T dO                       (S, d_v)
#     dP = dO V^T                       (T, S)
#     dZ = P * (dP - D[:, None]),  D_i = sum_j P_ij dP_ij = dO_i . O_i      (the softmax's backward)
#     dQ = c dZ K,   dK = c dZ^T Q.
# `attention_backward` does this with the stored weights P. `tiled_attention_backward` keeps only O
# and one number per query, the logsumexp L_i = m_i + log(l_i) of the forward's running max and sum,
# and rebuilds each tile of P as exp(Z_tile - L) when it needs it, as FlashAttention's backward does.


def _check_backward_inputs(q: Array, k: Array, v: Array, grad_out: Array, allowed: Mask | None) -> None:
    """The checks shared by both backward passes: `check_qkv`, equal leading axes, ``grad_out``'s shape."""
    check_qkv(q, k, v, allowed, "numpy")
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        raise ValueError(
            f"the backward pass needs q, k and v with the same leading (batch/head) axes, got q {q.shape}, "
            f"k {k.shape} and v {v.shape}; a broadcast axis would need its gradient summed: np.broadcast_to them first"
        )
    check_array("grad_out", grad_out, "numpy", "(..., T, d_v)")
    expected = (*q.shape[:-1], v.shape[-1])
    if grad_out.shape != expected:
        raise ValueError(
            f"grad_out must have the shape of the output (..., T, d_v) = {expected}, got {grad_out.shape}; "
            "it is dLoss/dOutput, one number per output number"
        )
    check_finite("grad_out", grad_out)


def attention_backward(
    q: Array, k: Array, v: Array, weights: Array, out: Array, grad_out: Array
) -> tuple[Array, Array, Array]:
    """The gradients ``(dq, dk, dv)`` of scaled dot-product attention, from the stored weights.

    Args:
        q ``(..., T, d)``, k ``(..., S, d)``, v ``(..., S, d_v)``: the forward's inputs (same leading axes).
        weights ``(..., T, S)``: the forward's softmax weights ``P`` (masked pairs hold 0), as
            ``mha_numpy.attention`` returns them; out ``(..., T, d_v)``: the forward's output ``P v``.
        grad_out ``(..., T, d_v)``: ``dLoss/dout``.

    Returns:
        ``dq (..., T, d)``, ``dk (..., S, d)``, ``dv (..., S, d_v)``. A mask needs no argument here:
        a masked pair has weight 0, so its gradient is 0 too.
    """
    _check_backward_inputs(q, k, v, grad_out, None)
    scores_shape = (*q.shape[:-1], k.shape[-2])
    for name, array, shape in (("weights", weights, scores_shape), ("out", out, grad_out.shape)):
        check_array(name, array, "numpy", "(..., T, S)" if name == "weights" else "(..., T, d_v)")
        if array.shape != shape:
            raise ValueError(f"{name} must have shape {shape} (from q, k and v), got {array.shape}; pass the "
                             f"forward's own {name}")
    scale = 1.0 / math.sqrt(q.shape[-1])
    dv = np.swapaxes(weights, -1, -2) @ grad_out  # (..., S, T) @ (..., T, d_v) -> (..., S, d_v)
    dp = grad_out @ np.swapaxes(v, -1, -2)  # (..., T, d_v) @ (..., d_v, S) -> (..., T, S)
    row_dot = (grad_out * out).sum(axis=-1, keepdims=True)  # (..., T, 1): D_i = dO_i . O_i
    dz = weights * (dp - row_dot)  # (..., T, S): the softmax's backward
    dq = scale * (dz @ k)  # (..., T, S) @ (..., S, d) -> (..., T, d)
    dk = scale * (np.swapaxes(dz, -1, -2) @ q)  # (..., S, T) @ (..., T, d) -> (..., S, d)
    return dq, dk, dv


def tiled_attention_forward(
    q: Array, k: Array, v: Array, allowed: Mask | None = None, block_size: int = 64
) -> tuple[Array, Array]:
    """`tiled_attention` that also returns what its backward pass keeps: ``(out, logsumexp)``.

    ``logsumexp (..., T)`` is ``m + log(l)`` from each query's final running max ``m`` and running
    sum ``l``: ``log(sum_j exp(score_j))`` over the allowed keys, so that a weight is
    ``exp(score - logsumexp)``. One number per query instead of a row of ``S`` weights.
    """
    check_qkv(q, k, v, allowed, "numpy")
    block_size = _check_block("block_size", block_size)
    out, running_max, running_sum = _stream_keys_stats(q, k, v, allowed, block_size, 1.0 / math.sqrt(q.shape[-1]))
    if np.any(running_sum == 0):
        raise ValueError("a query row has no allowed key (its mask row is all False): its output would be 0/0")
    return out, running_max + np.log(running_sum)


def tiled_attention_backward(
    q: Array,
    k: Array,
    v: Array,
    out: Array,
    logsumexp: Array,
    grad_out: Array,
    allowed: Mask | None = None,
    block_size: int = 64,
    query_block_size: int = 64,
) -> tuple[Array, Array, Array]:
    """The gradients ``(dq, dk, dv)`` of attention, recomputing the weights tile by tile.

    Keeps no ``(T, S)`` array: the outer loop takes a block of keys and values and holds its
    ``dk``, ``dv`` accumulators; the inner loop takes a block of queries, rebuilds that tile of
    weights as ``exp(scale * q k^T - logsumexp)``, adds the tile's share to ``dv``, ``dk`` and to the
    rows of ``dq`` (the loop order of FlashAttention-2's backward, Dao 2023, Algorithm 2).

    Args:
        q ``(..., T, d)``, k ``(..., S, d)``, v ``(..., S, d_v)``: the forward's inputs (same leading axes).
        out ``(..., T, d_v)`` and logsumexp ``(..., T)``: what `tiled_attention_forward` returned.
        grad_out ``(..., T, d_v)``: ``dLoss/dout``.
        allowed: the forward's boolean mask, broadcastable to ``(..., T, S)``, ``True`` = may attend.
        block_size, query_block_size: keys and queries per tile (any positive int).

    Returns:
        ``dq (..., T, d)``, ``dk (..., S, d)``, ``dv (..., S, d_v)``, equal to `attention_backward`.
    """
    _check_backward_inputs(q, k, v, grad_out, allowed)
    check_array("out", out, "numpy", "(..., T, d_v)")
    if out.shape != grad_out.shape:
        raise ValueError(f"out must have the shape of grad_out {grad_out.shape}, got {out.shape}; pass the forward's "
                         "output")
    check_array("logsumexp", logsumexp, "numpy", "(..., T)")
    if logsumexp.shape != q.shape[:-1]:
        raise ValueError(f"logsumexp must hold one number per query, shape {q.shape[:-1]}, got {logsumexp.shape}; "
                         "pass the second result of tiled_attention_forward")
    block_size = _check_block("block_size", block_size)
    query_block_size = _check_block("query_block_size", query_block_size)
    T, S = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    row_dot = (grad_out * out).sum(axis=-1)  # (..., T): D_i = dO_i . O_i, replaces rowsum(P * dP)
    mask = None if allowed is None else np.broadcast_to(allowed, (*allowed.shape[:-2], T, S))
    dq = np.zeros(q.shape, dtype=q.dtype)
    dk = np.zeros(k.shape, dtype=q.dtype)
    dv = np.zeros(v.shape, dtype=q.dtype)
    for k_start in range(0, S, block_size):
        ks = slice(k_start, k_start + block_size)
        k_j, v_j = k[..., ks, :], v[..., ks, :]  # (..., n, d), (..., n, d_v)
        dk_j, dv_j = np.zeros(k_j.shape, dtype=q.dtype), np.zeros(v_j.shape, dtype=q.dtype)
        for q_start in range(0, T, query_block_size):
            qs = slice(q_start, q_start + query_block_size)
            tile_mask = None if mask is None else mask[..., qs, ks]
            if tile_mask is not None and not tile_mask.any():  # every pair masked: its weights are all 0
                continue
            z = scale * (q[..., qs, :] @ np.swapaxes(k_j, -1, -2))  # (..., t, n) scores of this tile
            p = np.exp(z - logsumexp[..., qs, None])  # (..., t, n) the tile's weights, recomputed
            if tile_mask is not None:
                p = np.where(tile_mask, p, 0.0)
            do_i = grad_out[..., qs, :]  # (..., t, d_v)
            dv_j += np.swapaxes(p, -1, -2) @ do_i  # (..., n, t) @ (..., t, d_v)
            dz = p * (do_i @ np.swapaxes(v_j, -1, -2) - row_dot[..., qs, None])  # (..., t, n)
            dq[..., qs, :] += scale * (dz @ k_j)  # (..., t, n) @ (..., n, d)
            dk_j += scale * (np.swapaxes(dz, -1, -2) @ q[..., qs, :])  # (..., n, t) @ (..., t, d)
        dk[..., ks, :] = dk_j
        dv[..., ks, :] = dv_j
    return dq, dk, dv
