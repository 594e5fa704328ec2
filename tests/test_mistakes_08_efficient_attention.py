"""Lesson 08's typical mistakes, each with the diagnosis its checker must give (format in `mistake_table`).

The inputs are those of the notebook's check cells (the SDPA problem is rebuilt with the same seeds).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id

from lessons_lib import efficient, mha_numpy
from lessons_lib.checks import Verdict
from lessons_lib.checks import efficient_attention as ea

Floats = Any


def kept(answer: Any) -> Verdict:
    return ea.check_kept_entries(answer, B=2, h=8, T=5, S=12)


def tiles(answer: Any) -> Verdict:
    return ea.check_visited_tiles(answer, T=4096, S=4096, query_block=128, block=256)


KEPT, TILES = 2 * 8 * (8 + 9 + 10 + 11 + 12), 272

# ----- Your turn 6: the padded decoding problem of the notebook -----
q_new = torch.randn(2, 2, 2, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
k_all = torch.randn(2, 2, 7, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
v_all = torch.randn(2, 2, 7, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
n_pad = torch.tensor([0, 2])
CAUSAL = torch.from_numpy(mha_numpy.causal_mask(2, 7))  # (T, S)
REAL = torch.arange(7)[None, :] >= n_pad[:, None]  # (B, S)
ALLOWED = CAUSAL[None, None] & REAL[:, None, None, :]  # (B, 1, T, S)


def sdpa(answer: Any) -> Verdict:
    return ea.check_padded_decoding(answer, q_new, k_all, v_all, n_pad)


def with_mask(mask: Any, q: Any = q_new) -> Any:
    return F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)


NOT_ITSELF = ALLOWED & ~torch.from_numpy(np.eye(2, 7, k=5, dtype=bool))  # each query's own position blocked
RIGHT_PADDED = CAUSAL[None, None] & (torch.arange(7)[None, :] < 7 - n_pad[:, None])[:, None, None, :]
TOP_LEFT = torch.ones(2, 7, dtype=torch.bool).tril()


# ----- Your turn 1: the online update -----
def right_update(m: float, total: float, block: Floats) -> tuple[float, float]:
    m_new = max(m, block.max())
    return m_new, total * math.exp(m - m_new) + np.exp(block - m_new).sum()


def upside_down_update(m: float, total: float, block: Floats) -> tuple[float, float]:
    m_new = max(m, block.max())
    return m_new, total * np.exp(m_new - m) + np.exp(block - m_new).sum()  # exp(+inf) * 0 = NaN on the first block


def upside_down_guarded(m: float, total: float, block: Floats) -> tuple[float, float]:
    m_new = max(m, block.max())
    factor = 0.0 if m == -math.inf else math.exp(m_new - m)
    return m_new, total * factor + np.exp(block - m_new).sum()


def max_against_array(m: float, total: float, block: Floats) -> tuple[float, float]:
    m_new = max(m, block)  # a float against an array: ValueError from the array's truth value
    return m_new, total * math.exp(m - m_new) + np.exp(block - m_new).sum()


def factor_on_new_block(m: float, total: float, block: Floats) -> tuple[float, float]:
    m_new = max(m, block.max())
    return m_new, total + math.exp(m - m_new) * np.exp(block - m_new).sum()


def np_max_of_two(m: float, total: float, block: Floats) -> tuple[float, float]:
    m_new = np.max(m, block.max())  # the second argument is an axis: TypeError
    return m_new, total * math.exp(m - m_new) + np.exp(block - m_new).sum()


def calls_the_library(m: float, total: float, block: Floats) -> tuple[float, float]:
    step = efficient.online_softmax_trace(block, len(block))[-1]
    return max(m, step.running_max), total + step.running_sum


# ----- Your turn 2: tiled attention -----
def tiled(q: Floats, k: Floats, v: Floats, block_size: int, *, stop: Callable[[int, int], int] | None = None,
          upside_down: bool = False, guard: bool = True, rescale_output: bool = True, divide: bool = True,
          scale: bool = True, p_old_max: bool = False, width_of_v: bool = False, sum_all: bool = False) -> Floats:
    """A learner's loop with one mistake switched on."""
    m = np.full(q.shape[:-1], -np.inf)
    total = np.zeros(q.shape[:-1])
    acc = np.zeros((*q.shape[:-1], v.shape[-1]))
    S = k.shape[-2]
    for start in range(0, S if stop is None else stop(S, block_size), block_size):
        width = v.shape[-1] if width_of_v else q.shape[-1]
        s = q @ np.swapaxes(k[..., start : start + block_size, :], -1, -2) / (math.sqrt(width) if scale else 1)
        m_new = np.maximum(m, s.max(-1))
        if upside_down:
            factor = np.exp(m_new - m)
            if guard:
                factor = np.where(np.isneginf(m), 0.0, factor)
        else:
            factor = np.exp(m - m_new)
        p = np.exp(s - (m if p_old_max else m_new)[..., None])
        total = total * factor + (p.sum() if sum_all else p.sum(-1))
        acc = (acc * factor[..., None] if rescale_output else acc) + p @ v[..., start : start + block_size, :]
        m = m_new
    return acc / total[..., None] if divide else acc


def tiled_with_dot_t(q: Floats, k: Floats, v: Floats, block_size: int) -> Floats:
    m, total = np.full(q.shape[:-1], -np.inf), np.zeros(q.shape[:-1])
    acc = np.zeros((*q.shape[:-1], v.shape[-1]))
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start : start + block_size, :].T / math.sqrt(q.shape[-1])  # .T reverses every axis
        m_new = np.maximum(m, s.max(-1))
        p = np.exp(s - m_new[..., None])
        total = total * np.exp(m - m_new) + p.sum(-1)
        acc = acc * np.exp(m - m_new)[..., None] + p @ v[..., start : start + block_size, :]
        m = m_new
    return acc / total[..., None]


def divided_each_step(q: Floats, k: Floats, v: Floats, block_size: int) -> Floats:
    m, total = np.full(q.shape[:-1], -np.inf), np.zeros(q.shape[:-1])
    out = np.zeros((*q.shape[:-1], v.shape[-1]))
    for start in range(0, k.shape[-2], block_size):
        s = q @ np.swapaxes(k[..., start : start + block_size, :], -1, -2) / math.sqrt(q.shape[-1])
        m_new = np.maximum(m, s.max(-1))
        p = np.exp(s - m_new[..., None])
        total = total * np.exp(m - m_new) + p.sum(-1)
        out = (out * np.exp(m - m_new)[..., None] + p @ v[..., start : start + block_size, :]) / total[..., None]
        m = m_new
    return out


def normalised_each_step(q: Floats, k: Floats, v: Floats, block_size: int) -> Floats:
    """FlashAttention-1's form: the output kept divided by the running sum, done right."""
    m, total = np.full(q.shape[:-1], -np.inf), np.zeros(q.shape[:-1])
    out = np.zeros((*q.shape[:-1], v.shape[-1]))
    for start in range(0, k.shape[-2], block_size):
        s = q @ np.swapaxes(k[..., start : start + block_size, :], -1, -2) / math.sqrt(q.shape[-1])
        m_new = np.maximum(m, s.max(-1))
        p = np.exp(s - m_new[..., None])
        kept = total * np.exp(m - m_new)
        total = kept + p.sum(-1)
        out = (kept[..., None] * out + p @ v[..., start : start + block_size, :]) / total[..., None]
        m = m_new
    return out


def query_blocks_drop_last(q: Floats, k: Floats, v: Floats, block_size: int) -> Floats:
    """Blocks the queries too, with a loop that leaves out a short last query block (rows stay zero)."""
    out = np.zeros((*q.shape[:-1], v.shape[-1]))
    T = q.shape[-2]
    for start in range(0, T - T % block_size, block_size):
        out[..., start : start + block_size, :] = tiled(q[..., start : start + block_size, :], k, v, block_size)
    return out


def query_blocks(q: Floats, k: Floats, v: Floats, block_size: int) -> Floats:
    parts = [tiled(q[..., s : s + block_size, :], k, v, block_size) for s in range(0, q.shape[-2], block_size)]
    return np.concatenate(parts, axis=-2)


def check(function: Any) -> Verdict:
    return ea.check_tiled_attention(function)


# ----- Your turn 3: one tile of the recomputing backward -----
def tile_grads(q: Floats, k: Floats, v: Floats, do: Floats, lse: Floats, row_dot: Floats, *, d_from_tile: bool = False,
               local_softmax: bool = False, subtract_lse: bool = True, d_term: bool = True, times_p: bool = True,
               flip: bool = False, scale_scores: bool = True, scale_grads: bool = True, order: str = "qkv",
               fixed_d: int | None = None, scale_dq: bool = True, scale_dv: bool = False, lse_axis: bool = True) -> Any:
    """A learner's tile with one mistake switched on."""
    c = 1.0 / math.sqrt(fixed_d or q.shape[-1])
    z = q @ np.swapaxes(k, -1, -2) * (c if scale_scores else 1.0)
    if local_softmax:
        p = np.exp(z - z.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
    else:
        p = np.exp(z - (lse[..., None] if lse_axis else lse)) if subtract_lse else np.exp(z)
    dv = np.swapaxes(p, -1, -2) @ do * (c if scale_dv else 1.0)
    dp = do @ np.swapaxes(v, -1, -2)
    D = (p * dp).sum(-1) if d_from_tile else row_dot
    inner = (D[..., None] - dp if flip else dp - D[..., None]) if d_term else dp
    dz = p * inner if times_p else inner
    g = c if scale_grads else 1.0
    dq, dk = g * (dz @ k) * (1.0 if scale_dq else 1 / c), g * (np.swapaxes(dz, -1, -2) @ q)
    return {"qkv": (dq, dk, dv), "kqv": (dk, dq, dv)}[order]


def tile_with_dot_t(q: Floats, k: Floats, v: Floats, do: Floats, lse: Floats, row_dot: Floats) -> Any:
    c = 1.0 / math.sqrt(q.shape[-1])
    p = np.exp(c * (q @ k.T) - lse[..., None])  # .T on a 4-D array: every axis reversed
    dz = p * (do @ v.T - row_dot[..., None])
    return c * (dz @ k), c * (dz.T @ q), p.T @ do


def tile_without_return(q: Floats, k: Floats, v: Floats, do: Floats, lse: Floats, row_dot: Floats) -> Any:
    grads = tile_grads(q, k, v, do, lse, row_dot)  # computed, never returned
    del grads


def tile_inverted_scale(q: Floats, k: Floats, v: Floats, do: Floats, lse: Floats, row_dot: Floats) -> Any:
    c = math.sqrt(q.shape[-1])  # upside down: the scale is 1 / sqrt(d)
    p = np.exp(c * (q @ np.swapaxes(k, -1, -2)) - lse[..., None])
    dz = p * (do @ np.swapaxes(v, -1, -2) - row_dot[..., None])
    return c * (dz @ k), c * (np.swapaxes(dz, -1, -2) @ q), np.swapaxes(p, -1, -2) @ do


def elementwise_max(m: float, total: float, scores_block: Floats) -> tuple[Any, Any]:
    m_new = np.maximum(m, scores_block)  # one maximum per score, not one number
    return m_new, total * np.exp(m - m_new) + np.exp(scores_block - m_new).sum()


def tile_check(**flags: Any) -> Verdict:
    return ea.check_tile_grads(lambda *args: tile_grads(*args, **flags))


def tile_calls_library(q: Floats, k: Floats, v: Floats, do: Floats, lse: Floats, row_dot: Floats) -> Any:
    return efficient.tiled_attention_backward(q, k, v, do, lse, do)


MISTAKES: list[Mistake] = [
    # ----- Your turn 4: entries a causal mask keeps, after a cache -----
    Mistake("08 YT4 kept entries", "every entry, masked ones too", lambda: kept(2 * 8 * 5 * 12),
            "masked ones included"),
    Mistake("08 YT4 kept entries", "the masked entries", lambda: kept(2 * 8 * 5 * 12 - KEPT), "the mask BLOCKS"),
    Mistake("08 YT4 kept entries", "top-left mask, the cache forgotten", lambda: kept(2 * 8 * 15), "aligned top-left"),
    Mistake("08 YT4 kept entries", "a query not seeing itself", lambda: kept(2 * 8 * (7 + 8 + 9 + 10 + 11)),
            "one too few per query"),
    Mistake("08 YT4 kept entries", "one position too many", lambda: kept(2 * 8 * (9 + 10 + 11 + 12 + 13)),
            "one too many per query"),
    Mistake("08 YT4 kept entries", "one (T, S) mask", lambda: kept(KEPT // 16), "one (T, S) mask"),
    Mistake("08 YT4 kept entries", "one sequence", lambda: kept(8 * 50), "that is one sequence"),
    Mistake("08 YT4 kept entries", "one head", lambda: kept(2 * 50), "that is one head"),
    Mistake("08 YT4 kept entries", "all S positions as queries", lambda: kept(2 * 8 * 78),
            "all S positions as queries"),
    Mistake("08 YT4 kept entries", "half of the entries", lambda: kept(2 * 8 * 5 * 12 // 2), "half of the entries"),
    Mistake("08 YT4 kept entries", "800.5, not a whole number", lambda: kept(800.5), "is a float"),
    # ----- Your turn 5: tiles a causal loop computes -----
    Mistake("08 YT5 visited tiles", "every tile", lambda: tiles(32 * 16), "that is every tile"),
    Mistake("08 YT5 visited tiles", "the skipped tiles (= the fully allowed ones here)", lambda: tiles(512 - TILES),
            "partly masked ones the diagonal crosses"),
    Mistake("08 YT5 visited tiles", "exactly half", lambda: tiles(256), "half of the tiles"),
    Mistake("08 YT5 visited tiles", "triangle of 32 x 32 square tiles", lambda: tiles(32 * 33 // 2),
            "triangle of a grid of square tiles, 32 x 32"),
    Mistake("08 YT5 visited tiles", "triangle of 16 x 16 square tiles", lambda: tiles(16 * 17 // 2),
            "triangle of a grid of square tiles, 16 x 16"),
    Mistake("08 YT5 visited tiles", "a float that is not whole", lambda: tiles(272.5), "is a float"),
    Mistake("08 YT5 visited tiles", "multiplied by the 16 key blocks", lambda: tiles(TILES * 16), "whole multiple"),
    # ----- Your turn 6: SDPA with padding and the decoding mask -----
    Mistake("08 YT6 padded decoding", "causal only, padding ignored", lambda: sdpa(with_mask(CAUSAL)),
            "lets the queries see the padding"),
    Mistake("08 YT6 padded decoding", "padding only, not causal", lambda: sdpa(with_mask(REAL[:, None, None, :])),
            "not causal"),
    Mistake("08 YT6 padded decoding", "no mask", lambda: sdpa(F.scaled_dot_product_attention(q_new, k_all, v_all)),
            "without any mask"),
    Mistake("08 YT6 padded decoding", "is_causal=True", lambda: sdpa(F.scaled_dot_product_attention(
        q_new, k_all, v_all, is_causal=True)), "is_causal=True"),
    Mistake("08 YT6 padded decoding", "a top-left tril combined with the padding",
            lambda: sdpa(with_mask(TOP_LEFT & REAL[:, None, None, :])), "aligned top-left"),
    Mistake("08 YT6 padded decoding", "padding taken at the end", lambda: sdpa(with_mask(RIGHT_PADDED)),
            "padding is on the wrong side"),
    Mistake("08 YT6 padded decoding", "a (B, T, S) mask: batch lined up with the heads",
            lambda: sdpa(with_mask(CAUSAL & REAL[:, None, :])), "shape (B, 1, T, S)"),
    Mistake("08 YT6 padded decoding", "mask inverted", lambda: sdpa(with_mask(~ALLOWED)), "mask is inverted"),
    Mistake("08 YT6 padded decoding", "a query cannot see itself", lambda: sdpa(with_mask(NOT_ITSELF)),
            "cannot see itself"),
    Mistake("08 YT6 padded decoding", "0/1 float mask", lambda: sdpa(with_mask(ALLOWED.double())),
            "float mask is ADDED"),
    Mistake("08 YT6 padded decoding", "a NumPy array (the manual route) instead of SDPA's tensor",
            lambda: sdpa(mha_numpy.attention(q_new.numpy(), k_all.numpy(), v_all.numpy(), ALLOWED.numpy())[0]),
            "expected the torch tensor"),
    # ----- Your turn 1: online update -----
    Mistake("08 YT1 online update", "element-wise np.maximum(m, scores_block)", lambda: ea.check_online_update(
        elementwise_max), "not one number"),
    Mistake("08 YT3 tile grads", "scale upside down (times sqrt(d))", lambda: ea.check_tile_grads(tile_inverted_scale),
            "upside down"),
    Mistake("08 YT1 online update", "no rescale", lambda: ea.check_online_update(
        lambda m, total, b: (max(m, b.max()), total + np.exp(b - max(m, b.max())).sum())), "forgot to rescale l"),
    Mistake("08 YT1 online update", "rescale factor upside down (NaN on the first block)",
            lambda: ea.check_online_update(upside_down_update), "Is your rescale factor upside down?"),
    Mistake("08 YT1 online update", "rescale factor upside down (first block guarded)",
            lambda: ea.check_online_update(upside_down_guarded), "your rescale factor is upside down"),
    Mistake("08 YT1 online update", "no maximum subtracted", lambda: ea.check_online_update(
        lambda m, total, b: (max(m, b.max()), total * math.exp(m - max(m, b.max())) + np.exp(b).sum())),
        "without subtracting"),
    Mistake("08 YT1 online update", "the block's max as the running max", lambda: ea.check_online_update(
        lambda m, total, b: (b.max(), total * math.exp(m - b.max()) + np.exp(b - b.max()).sum())), "block's max only"),
    Mistake("08 YT1 online update", "pair in the wrong order", lambda: ea.check_online_update(
        lambda m, total, b: right_update(m, total, b)[::-1]), "returned (l_new, m_new)"),
    Mistake("08 YT1 online update", "max(m, block): the number against the whole array",
            lambda: ea.check_online_update(max_against_array), "Take the block's largest score first"),
    Mistake("08 YT1 online update", "np.max(m, block.max()): the second argument is an axis",
            lambda: ea.check_online_update(np_max_of_two), "reads b as an AXIS"),
    Mistake("08 YT1 online update", "the old m returned", lambda: ea.check_online_update(
        lambda m, total, b: (m, right_update(m, total, b)[1])), "you returned the old m"),
    Mistake("08 YT1 online update", "the new block measured against the old m", lambda: ea.check_online_update(
        lambda m, total, b: (max(m, b.max()), total * math.exp(m - max(m, b.max())) + np.exp(b - m).sum())),
        "against the OLD maximum"),
    Mistake("08 YT1 online update", "the new block measured against its own max", lambda: ea.check_online_update(
        lambda m, total, b: (max(m, b.max()), total * math.exp(m - max(m, b.max())) + np.exp(b - b.max()).sum())),
        "against its own maximum"),
    Mistake("08 YT1 online update", "the factor on the new block's sum",
            lambda: ea.check_online_update(factor_on_new_block), "it belongs on the OLD sum l"),
    Mistake("08 YT1 online update", "calls the library's online_softmax_trace",
            lambda: ea.check_online_update(calls_the_library), "calls the library's online_softmax_trace"),
    # ----- Your turn 2: tiled attention -----
    Mistake("08 YT2 tiled attention", "loop drops a short last block of keys",
            lambda: check(lambda q, k, v, b: tiled(q, k, v, b, stop=lambda S, b: S - S % b)),
            "drops the short last block of keys"),
    Mistake("08 YT2 tiled attention", "range(S // block) blocks: the short last one dropped",
            lambda: check(lambda q, k, v, b: tiled(q, k, v, b, stop=lambda S, b: S // b * b)),
            "drops the short last block of keys"),
    Mistake("08 YT2 tiled attention", "query blocks: the short last one dropped", lambda: check(query_blocks_drop_last),
            "short last block of queries"),
    Mistake("08 YT2 tiled attention", "rescale factor upside down (guarded)",
            lambda: check(lambda q, k, v, b: tiled(q, k, v, b, upside_down=True)), "rescale factor is upside down"),
    Mistake("08 YT2 tiled attention", "rescale factor upside down (NaN)",
            lambda: check(lambda q, k, v, b: tiled(q, k, v, b, upside_down=True, guard=False)),
            "not exp(m_new - m)"),
    Mistake("08 YT2 tiled attention", "p = exp(s - m) with the old max (NaN)",
            lambda: check(lambda q, k, v, b: tiled(q, k, v, b, p_old_max=True)), "p = exp(scores - m_new)"),
    Mistake("08 YT2 tiled attention", "scores scaled by sqrt(d_v)",
            lambda: check(lambda q, k, v, b: tiled(q, k, v, b, width_of_v=True)), "1/sqrt(d_v)"),
    Mistake("08 YT2 tiled attention", "l summed over every axis of the tile",
            lambda: check(lambda q, k, v, b: tiled(q, k, v, b, sum_all=True)), "the running sum l you divide by"),
    Mistake("08 YT2 tiled attention", "running output not rescaled",
            lambda: check(lambda q, k, v, b: tiled(q, k, v, b, rescale_output=False)),
            "did not rescale the running output"),
    Mistake("08 YT2 tiled attention", ".T on arrays with leading axes", lambda: check(tiled_with_dot_t),
            ".T reverses EVERY axis"),
    Mistake("08 YT2 tiled attention", "divided by the running sum in every step, old sum not multiplied back",
            lambda: check(divided_each_step), "divide the running output by the running sum in every step"),
    Mistake("08 YT2 tiled attention", "no final division",
            lambda: check(lambda q, k, v, b: tiled(q, k, v, b, divide=False)), "final division"),
    Mistake("08 YT2 tiled attention", "no 1/sqrt(d)", lambda: check(lambda q, k, v, b: tiled(q, k, v, b, scale=False)),
            "1/sqrt(d)"),
    Mistake("08 YT2 tiled attention", "calls the library's tiled_attention",
            lambda: check(lambda q, k, v, b: efficient.tiled_attention(q, k, v, block_size=b)),
            "calls the library's tiled_attention"),
    Mistake("08 YT2 tiled attention", "the naive route, a full (T, S) matrix",
            lambda: check(lambda q, k, v, b: mha_numpy.attention(q, k, v)[0]), "held"),
    Mistake("08 YT2 tiled attention", "returns float32", lambda: check(
        lambda q, k, v, b: tiled(q, k, v, b).astype(np.float32)), "returned float32"),
    # ----- Your turn 3: one tile of the recomputing backward -----
    Mistake("08 YT3 tile grads", "D summed over the tile only", lambda: tile_check(d_from_tile=True),
            "over this tile's keys only"),
    Mistake("08 YT3 tile grads", "a softmax over the tile's keys", lambda: tile_check(local_softmax=True),
            "softmax over this tile's keys only"),
    Mistake("08 YT3 tile grads", "exp(score) without the logsumexp", lambda: tile_check(subtract_lse=False),
            "without the logsumexp"),
    Mistake("08 YT3 tile grads", "D left out of dz", lambda: tile_check(d_term=False), "you left D out"),
    Mistake("08 YT3 tile grads", "dz not multiplied by the weights", lambda: tile_check(times_p=False),
            "multiplied by the weights"),
    Mistake("08 YT3 tile grads", "the sign of dz flipped", lambda: tile_check(flip=True), "sign of dz is flipped"),
    Mistake("08 YT3 tile grads", "scores not scaled", lambda: tile_check(scale_scores=False),
            "scale on the scores"),
    Mistake("08 YT3 tile grads", "dq and dk without the scale", lambda: tile_check(scale_grads=False),
            "miss the factor 1/sqrt(d)"),
    Mistake("08 YT3 tile grads", "dq without the scale c", lambda: tile_check(scale_dq=False),
            "dq misses the factor c = 1/sqrt(d)"),
    Mistake("08 YT3 tile grads", "dv with an extra scale c", lambda: tile_check(scale_dv=True),
            "dv has a factor c = 1/sqrt(d) it should not have"),
    Mistake("08 YT3 tile grads", "lse_i without [..., None]", lambda: tile_check(lse_axis=False), "lse_i[..., None]"),
    Mistake("08 YT3 tile grads", "returned (dk, dq, dv)", lambda: tile_check(order="kqv"), "wrong order"),
    Mistake("08 YT3 tile grads", "the notebook's d = 5 hard-coded in the scale", lambda: tile_check(fixed_d=5),
            "your scale uses d = 5"),
    Mistake("08 YT3 tile grads", ".T on 4-D arrays", lambda: ea.check_tile_grads(tile_with_dot_t),
            ".T reverses EVERY axis"),
    Mistake("08 YT3 tile grads", "calls the library's tiled_attention_backward",
            lambda: ea.check_tile_grads(tile_calls_library), "calls the library's tiled_attention_backward"),
    Mistake("08 YT3 tile grads", "no return", lambda: ea.check_tile_grads(tile_without_return), "returned None"),
]

RIGHT: list[RightAnswer] = [
    RightAnswer("08 YT3 tile grads", "the lesson's tile", lambda: tile_check()),
    RightAnswer("08 YT3 tile grads", "a tuple of arrays in a list", lambda: ea.check_tile_grads(
        lambda *args: list(tile_grads(*args)))),
    RightAnswer("08 YT4 kept entries", "the count as an int", lambda: kept(KEPT)),
    RightAnswer("08 YT4 kept entries", "an np.int64", lambda: kept(np.int64(KEPT))),
    RightAnswer("08 YT5 visited tiles", "the count as an int", lambda: tiles(TILES)),
    RightAnswer("08 YT5 visited tiles", "a whole float, 272.0", lambda: tiles(float(TILES))),
    RightAnswer("08 YT4 kept entries", "a whole float, 800.0", lambda: kept(800.0)),
    RightAnswer("08 YT4 kept entries", "the mask built and summed (accepted, the statement says so)",
                lambda: kept(int(mha_numpy.causal_mask(5, 12).sum()) * 2 * 8)),
    RightAnswer("08 YT6 padded decoding", "the lesson's (B, 1, T, S) boolean mask", lambda: sdpa(with_mask(ALLOWED))),
    RightAnswer("08 YT6 padded decoding", "a (B, h, T, S) mask, expanded over the heads",
                lambda: sdpa(with_mask(ALLOWED.expand(2, 2, 2, 7)))),
    RightAnswer("08 YT6 padded decoding", "an additive float mask of 0 and -inf", lambda: sdpa(with_mask(
        torch.zeros(2, 1, 2, 7, dtype=torch.float64).masked_fill(~ALLOWED, float("-inf"))))),
    RightAnswer("08 YT1 online update", "the lesson's update", lambda: ea.check_online_update(right_update)),
    RightAnswer("08 YT2 tiled attention", "a loop over keys", lambda: check(tiled)),
    RightAnswer("08 YT2 tiled attention", "query blocks too, the short last one kept", lambda: check(query_blocks)),
    RightAnswer("08 YT2 tiled attention", "the output kept normalised in every step (FlashAttention-1's form)",
                lambda: check(normalised_each_step)),
]


@pytest.mark.parametrize("row", MISTAKES, ids=row_id)
def test_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=row_id)
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
