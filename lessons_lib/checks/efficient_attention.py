"""Quick check of the lesson "Efficient attention" (checkers in ``lessons_lib.checks.efficient_attention``):
the online-softmax update, tiled attention, one tile of the recomputing backward pass, the entries a
causal mask keeps and the tiles a causal pass visits, SDPA for a batch of caches of different lengths.

Each checker compares the learner's answer with the right one and, when it is wrong, with the
usual mistakes: leaving out the heads or the batch, forgetting
to rescale the running sum (or the running output) when the running maximum grows. The checkers
that take a function run it, and `check_tiled_attention` also measures the memory it holds.
`check_weight_entries` is the checker of ``lessons_lib.checks.inspecting_heads``, re-exported.

Notation: ``B`` batch, ``h`` heads, ``T`` queries, ``S`` source positions.
"""

from __future__ import annotations

import inspect
import math
import re
import tracemalloc
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.checks import (
    Verdict,
    array_answer,
    failed,
    first_match,
    forbidden_call,
    function_answer,
    int_answer,
    is_blank,
    number_answer,
    passed,
    reference_array,
    same,
    same_kind,
    unanswered,
    uses_name,
)
from lessons_lib.checks.inspecting_heads import check_weight_entries
from lessons_lib.mha_numpy import attention, causal_mask
from lessons_lib.validation import check_int

__all__ = [
    "check_kept_entries",
    "check_online_update",
    "check_padded_decoding",
    "check_tile_grads",
    "check_tiled_attention",
    "check_visited_tiles",
    "check_weight_entries",
    "kept_entries",
    "visited_tiles",
]

Floats = NDArray[np.float64]


def _attend(scores: Floats, v: Floats) -> Floats:
    """softmax over the last axis of ``scores (..., T, S)``, then ``@ v (..., S, d_v)``."""
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    out: Floats = (weights / weights.sum(axis=-1, keepdims=True)) @ v
    return out


# (row, block size): in the first row every block raises the maximum, in the second a later block's
# maximum is below the running one, so "the block's max only" shows.
UPDATE_ROWS = ((np.array([0.5, 2.0, -1.0, 3.5, 1.0, 0.0, 4.0, -2.0]), 3),
               (np.array([3.0, 1.0, -2.0, 0.5, 4.5, 2.0, 1.5]), 2))


def _update(m: float, total: float, block: Floats, /, *, running: bool = True, rescale: bool = True,
            shift: bool = True, swap: bool = False, upside_down: bool = False, stale: bool = False,
            rescale_new: bool = False, new_against: str = "new") -> tuple[float, float]:
    """One online-softmax step ``(m, l) -> (m_new, l_new)``, or a known mistake when a flag is off
    (``upside_down``: the factor ``exp(m_new - m)``, with the first block guarded so that it is not NaN;
    ``stale``: the old ``m`` returned in place of ``m_new``; ``rescale_new``: the factor put on the new
    block's sum instead of the old sum)."""
    m_new = max(m, float(block.max())) if running else float(block.max())
    factor = math.exp(m - m_new) if not upside_down else 0.0 if m == -math.inf else math.exp(m_new - m)
    against = {"new": m_new, "old": m, "block": float(block.max())}[new_against]  # what the new block is measured by
    new_part = float(np.exp(block - against if shift else block).sum())
    if rescale_new:
        total = total + factor * new_part
    else:
        total = total * (factor if rescale else 1.0) + new_part
    m_out = m if stale else m_new
    return (total, m_out) if swap else (m_out, total)


_RESCALE = ("you forgot to rescale l: the old sum was measured against m, so when the max grows to m_new it must "
            "shrink by exp(m - m_new) before the new block is added")
_SHIFT = "you summed exp(block) without subtracting the running max; l is kept relative to m_new"
_UPSIDE_DOWN = ("your rescale factor is upside down: exp(m_new - m) grows the old sum; it was measured against the "
                "smaller maximum m, so it must shrink by exp(m - m_new), which is at most 1 (section 3)")
_NAN_FIRST = ("l_new is NaN after the first block: there m = -inf, so a factor exp(m_new - m) is exp(+inf) = inf, and "
              "0 x inf = NaN. Is your rescale factor upside down? The old sum shrinks by exp(m - m_new), which is 0 "
              "before the first block and at most 1 after (section 3)")
_BLOCK_ONLY = ("m_new is the block's max only; the running max must also remember the earlier blocks, which were "
               "larger in one of the test rows")
UPDATE_MISTAKES: tuple[tuple[dict[str, Any], str], ...] = (
    ({"rescale": False}, _RESCALE),
    ({"shift": False}, _SHIFT),
    ({"shift": False, "rescale": False}, _SHIFT + "; and you forgot to rescale l when the max grows"),
    ({"running": False}, _BLOCK_ONLY),
    ({"running": False, "rescale": False}, _BLOCK_ONLY),
    ({"swap": True}, "you returned (l_new, m_new); return the pair in the order (m_new, l_new)"),
    ({"upside_down": True}, _UPSIDE_DOWN),
    ({"stale": True}, "you returned the old m, not m_new: the next step must start from the maximum of everything "
                      "read so far, so return the new running maximum"),
    ({"new_against": "old"}, "you measured the new block against the OLD maximum, exp(block - m): the new terms must "
                              "be measured against m_new, like the rescaled old sum, so sum(exp(block - m_new)). "
                              "Before the first block m = -inf, so exp(block - m) is inf"),
    ({"new_against": "block"}, "you measured the new block against its own maximum, exp(block - max(block)): "
                                "every term of l must be measured against the same number, the running maximum "
                                "m_new, so sum(exp(block - m_new))"),
    ({"rescale_new": True}, "you put the factor exp(m - m_new) on the new block's sum; it belongs on the OLD sum l, "
                            "which was measured against m. The new block is already measured against m_new"),
)


def _trace(question: str, update: Any, what: str) -> Floats | Verdict:
    """Drive ``update`` over every row of `UPDATE_ROWS` from ``(-inf, 0)``: the ``(m, l)`` after each block."""
    steps = []
    for row, size in UPDATE_ROWS:
        m, total = -math.inf, 0.0
        for start in range(0, len(row), size):
            result = function_answer(question, update, (m, total, row[start : start + size].copy()), what)
            if isinstance(result, Verdict):
                return result
            if (isinstance(result, (tuple, list)) and len(result) == 2 and np.ndim(result[0]) > 0
                    and np.size(result[0]) > 1):
                return failed(question, "you returned a pair, but its m_new is an array of "
                              f"{np.size(result[0])} numbers, not one number: np.maximum(m, scores) compares m "
                              "with each score separately. m_new is ONE number, the largest of m and every "
                              "score of the block: max(m, scores.max())")
            try:
                m, total = (float(x) for x in result)
            except Exception:  # not a pair of numbers: say what came back instead
                return failed(question, f"expected the pair (m_new, l_new), got {type(result).__name__} {result!r:.60}")
            steps.append((m, total))
    return np.array(steps)


def check_online_update(update: Any) -> Verdict:
    """Question "online update": ``update(m, l, block) -> (m_new, l_new)`` for one row, run over two rows.

    Recognises: no rescale of ``l``, no maximum subtracted, the block's maximum taken as the running
    maximum, and the pair returned in the wrong order.
    """
    question = "online update"
    what = "update(m, l, block) returning the pair (m_new, l_new): the new running max and running sum"
    if update is not None and not is_blank(update):
        refused = forbidden_call(question, update, "online_softmax_trace", "online_softmax")
        if refused is not None:
            return refused
    with np.errstate(all="ignore"):
        trace = _trace(question, update, what)
    if isinstance(trace, Verdict):
        if "truth value of an array" in trace.message:
            return failed(question, trace.message + ". Does your code compare the number m with the whole block, as in "
                                    "max(m, block)? Take the block's largest score first: block.max()")
        if "cannot be interpreted as an integer" in trace.message and "np.max(" in _source(update).replace(" ", ""):
            return failed(question, trace.message + ". np.max(a, b) reads b as an AXIS; the larger of two numbers is "
                                    "max(a, b) or np.maximum(a, b)")
        return trace
    right = _trace(question, _update, what)
    assert not isinstance(right, Verdict)
    if np.isnan(trace[0, 1]) and same(trace[0, 0], right[0, 0]):
        return failed(question, _NAN_FIRST)
    if same(trace, right):
        return passed(question, f"m_new and l_new agree at all {len(trace)} steps over two rows, so l ends as "
                                "sum(exp(row - max(row)))")
    mistake = first_match(trace, [(partial(_trace, question, partial(_update, **flags), what), message)
                                  for flags, message in UPDATE_MISTAKES])
    if mistake is not None:
        return failed(question, mistake)
    if not same(trace[:, 0], right[:, 0]):
        return failed(question, "m_new is not the running maximum of every score read so far")
    return failed(question, "m_new is right but l_new is not the sum of exp(score - m_new) over every score so far")

def _tiled_variant(
    q: Floats, k: Floats, v: Floats, block_size: int, rescale: bool = True, normalise: bool = True,
    scale: bool = True, upside_down: bool = False, drop_last: bool = False, divide_each_step: bool = False,
    scale_width: str = "d",
) -> Floats:
    """Tiled attention with one step optionally left out or wrong (to recognise that mistake):
    ``upside_down`` rescales by ``exp(m_new - m)`` (guarded so that the first block is not NaN),
    ``drop_last`` leaves out a short last key block."""
    lead = q.shape[:-1]
    running_max = np.full(lead, -np.inf)
    running_sum = np.zeros(lead)
    acc = np.zeros((*lead, v.shape[-1]))
    S = k.shape[-2]
    for start in range(0, S - S % block_size if drop_last else S, block_size):
        s = q @ np.swapaxes(k[..., start : start + block_size, :], -1, -2)
        if scale:
            s = s / math.sqrt(q.shape[-1] if scale_width == "d" else v.shape[-1])
        new_max = np.maximum(running_max, s.max(axis=-1))
        if upside_down:
            factor = np.where(np.isneginf(running_max), 0.0, np.exp(new_max - np.where(np.isneginf(running_max), 0.0,
                                                                                        running_max)))
        else:
            factor = np.exp(running_max - new_max)
        p = np.exp(s - new_max[..., None])
        running_sum = factor * running_sum + p.sum(axis=-1)
        acc = (factor[..., None] * acc if rescale else acc) + p @ v[..., start : start + block_size, :]
        if divide_each_step:  # the output kept divided by the sum, without multiplying the old sum back
            acc = acc / running_sum[..., None]
        running_max = new_max
    return acc / running_sum[..., None] if normalise and not divide_each_step else acc


_TILED_UPSIDE_DOWN = ("your rescale factor is upside down: exp(m_new - m) grows the old sum and output; they were "
                      "measured against the smaller maximum m, so they must shrink by exp(m - m_new), at most 1 "
                      "(sections 3 and 4)")


_TILED_NAN = ("your output holds NaN or inf. Before the first block m = -inf, so anything computed against the OLD "
              "maximum there, exp(x - m), is exp(+inf) = inf. Two places can do it: the block's exponentials must "
              "be p = exp(scores - m_new), measured against the NEW maximum, not exp(scores - m); and the rescale "
              "factor is exp(m - m_new) (0 before the first block), not exp(m_new - m)")


def _judge_tiled(question: str, a: Floats, q: Floats, k: Floats, v: Floats, block_size: int) -> Verdict:
    right = attention(q, k, v)[0]
    if same(a, right):
        return passed(question, f"equal to ordinary attention, shape {right.shape}")
    T, S = q.shape[-2], k.shape[-2]
    whole_queries = T - T % block_size
    mistake = first_match(a, [
        (lambda: _tiled_variant(q, k, v, block_size, rescale=False),
         "you did not rescale the running output: when the max grows from m to m_new, multiply "
         "the accumulated output (not only the sum) by exp(m - m_new)"),
        (lambda: _tiled_variant(q, k, v, block_size, normalise=False),
         "you forgot the final division: the accumulated output must be divided by the running sum l"),
        (lambda: _tiled_variant(q, k, v, block_size, scale=False), "you forgot the 1/sqrt(d) scale on the scores"),
        (lambda: _tiled_variant(q, k, v, block_size, scale_width="v") if q.shape[-1] != v.shape[-1] else None,
         "you scaled the scores by 1/sqrt(d_v), the width of the values; the scale is 1/sqrt(d), the width of "
         "q and k, whose dot products the scores are: q.shape[-1]"),
        (lambda: _tiled_variant(q, k, v, block_size, upside_down=True), _TILED_UPSIDE_DOWN),
        (lambda: _tiled_variant(q, k, v, block_size, divide_each_step=True),
         "you divide the running output by the running sum in every step, but the old output was already divided by "
         "the OLD sum: multiply it back by that sum (and the rescale) before adding the new block, or, simpler, keep "
         "the output un-divided and divide once after the loop"),
        (lambda: _tiled_variant(q, k, v, block_size, drop_last=True) if S % block_size else None,
         f"your loop drops the short last block of keys: with S = {S} and blocks of {block_size} the last block "
         f"holds {S % block_size} key(s). Loop with range(0, S, block_size): a slice that runs past the end simply "
         "gives a shorter block"),
        (lambda: right[..., :whole_queries, :] if T % block_size else None,
         f"your loop drops the short last block of queries: with T = {T} and blocks of {block_size} the last "
         f"{T % block_size} quer(ies) are missing; every query needs its output row"),
        (lambda: np.concatenate([right[..., :whole_queries, :], np.zeros_like(right[..., whole_queries:, :])], -2)
         if T % block_size else None,
         f"the last {T % block_size} output row(s) are zero: your loop drops the short last block of queries "
         f"(T = {T}, blocks of {block_size})"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    if a.shape != right.shape:
        return failed(question, f"expected shape (..., T, d_v) = {right.shape}, got {a.shape}")
    if not np.isfinite(a).all():
        return failed(question, _TILED_NAN)
    with np.errstate(all="ignore"):
        ratio = a / right  # (..., T, d_v): constant along each row when only the divisor l is wrong
    one_factor_per_row = np.isfinite(ratio).all() and np.abs(ratio).min() > 1e-6
    if one_factor_per_row and np.allclose(ratio, ratio[..., :1], rtol=1e-6, atol=1e-9):
        return failed(question, "each output row is the right row times a wrong number: the running output is right, "
                                "the running sum l you divide by is not. l holds one number per query: p summed over "
                                "the keys of the block, p.sum(axis=-1), rescaled like the output")
    return failed(question, "right shape, wrong numbers: not the same as attention(q, k, v)[0]. Check one step at a "
                            "time against section 3: the scores of the block, m_new, the factor exp(m - m_new), "
                            "p = exp(scores - m_new), then l and the output")


def _peak_bytes(run: Callable[[], Any]) -> tuple[int, Any]:
    """The most memory NumPy held at once while ``run()`` ran (tracemalloc), and what it returned."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        result = run()
        return tracemalloc.get_traced_memory()[1] - before, result
    finally:
        if not was_tracing:
            tracemalloc.stop()


# The small problems (q, k, v shapes and block size) the function must get right before its memory is
# measured: every size differs between the two, no T or S is a multiple of its block (a short last
# block of keys, and of queries for a loop that blocks them too), and the leading axes differ.
TILED_PROBLEMS = (((2, 7, 3), (2, 10, 3), (2, 10, 2), 3), ((3, 2, 5, 4), (3, 2, 11, 4), (3, 2, 11, 6), 4))


def check_tiled_attention(tiled: Any) -> Verdict:
    """Question "tiled attention": ``tiled(q, k, v, block_size) -> (..., T, d_v)``, run and measured.

    The function must not call the library's ``tiled_attention``; on `TILED_PROBLEMS` its numbers must
    equal ordinary attention (with the mistakes of `_judge_tiled` named, a short last block dropped
    among them) and come back as a float64 NumPy array; it must not hand the work to torch
    (whose memory tracemalloc does not see), and on T = 128, S = 2048 its peak memory must stay
    below half of one float64 ``(T, S)`` matrix.
    """
    question = "tiled attention"
    what = "tiled(q, k, v, block_size) returning the output (..., T, d_v), looping over blocks of keys"
    if tiled is not None and not (callable(tiled) and is_blank(tiled)):
        refused = forbidden_call(question, tiled, "tiled_attention")
        if refused is not None:
            return refused
    rng = np.random.default_rng(7)
    for q_shape, k_shape, v_shape, block in TILED_PROBLEMS:
        q, k, v = rng.normal(size=q_shape) * 3, rng.normal(size=k_shape) * 3, rng.normal(size=v_shape)
        with np.errstate(all="ignore"):
            returned = function_answer(question, tiled, (q.copy(), k.copy(), v.copy(), block), what)
        if isinstance(returned, Verdict):
            if "raised" in returned.message and _uses_dot_t(tiled):
                return failed(question, returned.message + "; .T reverses EVERY axis of an array with leading axes: "
                                                           "use np.swapaxes(x, -1, -2)")
            if "raised" in returned.message and "broadcast" in returned.message:
                return failed(question, returned.message + ". m and l hold one number per query, shape (..., T): "
                              "reduce a (..., T, block) tile over its LAST axis (axis=-1), and give a (..., T) array "
                              "a last axis of length 1, m_new[..., None], before it meets a tile or the output")
            return returned
        kind = same_kind(question, returned, q)
        if kind is not None:
            return kind
        a = array_answer(question, returned, what)
        verdict = a if isinstance(a, Verdict) else _judge_tiled(question, a, q, k, v, block)
        if not verdict.ok:
            return verdict
    shortcut = next((name for name in ("scaled_dot_product_attention", "from_numpy", "as_tensor")
                     if uses_name(tiled, name, home=None)), None)
    if shortcut is not None:
        return failed(question, f"the numbers are right, but your function calls {shortcut}: write the loop yourself, "
                                "in NumPy")
    T, S = 128, 2048
    q, k, v = rng.normal(size=(T, 8)), rng.normal(size=(S, 8)), rng.normal(size=(S, 8))
    right, full = attention(q, k, v)[0], T * S * 8
    try:
        peak, big = _peak_bytes(lambda: tiled(q, k, v, 64))
    except Exception as error:  # the learner's code may raise anything: report it
        return failed(question, f"on T = {T}, S = {S} your function raised {type(error).__name__}: {error}")
    if not isinstance(big, np.ndarray) or not same(big, right):
        return failed(question, f"right on the small test, but not a NumPy array equal to attention on T = {T}, "
                                f"S = {S} with blocks of 64")
    if peak >= full // 2:  # any (T, S) float64 array alone is `full` bytes
        return failed(question, f"the numbers are right, but on T = {T}, S = {S} your function held {peak:,} bytes at "
                                f"once, {peak / full:.1f} times one (T, S) float64 matrix ({full:,} bytes): keep only "
                                "one block of scores at a time")
    return passed(question, f"equal to ordinary attention (also with a short last block), and on T = {T}, S = {S} "
                            f"with blocks of 64 its peak memory "
                            f"stayed below half of one (T, S) float64 matrix ({full:,} bytes)")


# ----- the tile of the backward pass ---------------------------------------------------------------
def _tile_variant(q: Floats, k: Floats, v: Floats, do: Floats, lse: Floats, row_dot: Floats, *,
                  weights: str = "lse", d_term: str = "row", shape: str = "right", scale_scores: bool = True,
                  scale_grads: bool = True, d: int | None = None, scale_dq: bool = True, scale_dk: bool = True,
                  scale_dv: bool = False, inverted: bool = False) -> tuple[Floats, Floats, Floats]:
    """One tile's shares ``(dq, dk, dv)``, or a known mistake: ``weights`` "lse" (right), "exp" (no
    logsumexp subtracted), "softmax" (a softmax over the tile's keys only); ``d_term`` "row" (right),
    "tile" (D summed over this tile's keys only), "none" (dz = p * dp), "no_p" (dz = dp - D), "sign";
    ``d``: the width the scale is taken from (a width hard-coded from elsewhere), ``None``: q's own."""
    scale = 1.0 / math.sqrt(d or q.shape[-1])
    if inverted:
        scale = math.sqrt(d or q.shape[-1])
    kt = np.swapaxes(k, -1, -2)
    z = (q @ kt) * (scale if scale_scores else 1.0)  # (..., t, n)
    if weights == "lse":
        p = np.exp(z - lse[..., None])
    elif weights == "exp":
        p = np.exp(z)
    else:
        p = np.exp(z - z.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
    dp = do @ np.swapaxes(v, -1, -2)  # (..., t, n)
    D = {"tile": (p * dp).sum(axis=-1), "row": row_dot}.get(d_term, row_dot)[..., None]
    dz = {"none": p * dp, "no_p": dp - D, "sign": p * (D - dp)}.get(d_term, p * (dp - D))
    g = scale if scale_grads else 1.0
    dq, dk = g * (dz @ k), g * (np.swapaxes(dz, -1, -2) @ q)
    dv = np.swapaxes(p, -1, -2) @ do
    dq, dk = dq * (1.0 if scale_dq else 1 / scale), dk * (1.0 if scale_dk else 1 / scale)
    return dq, dk, dv * (scale if scale_dv else 1.0)


# (leading axes, t queries, n keys, d, d_v) of the tiles the checker hands over: the first is the
# notebook's own problem (Your turn 3's sizes), the others differ in every size, and t != n everywhere.
TILE_PROBLEMS = (((2, 3), 3, 4, 5, 2), ((2,), 4, 3, 6, 5), ((), 2, 5, 3, 4))
TILE_SEEDS = (30, 31, 32)


def tile_problem(index: int) -> dict[str, Floats]:
    """The inputs of one tile, from a full problem of ``T = 2t + 1`` queries and ``S = 3n`` keys: the tile
    of query block 0 and key block 1, with the whole problem's ``logsumexp`` and ``D`` (``row_dot``)."""
    lead, t, n, d, d_v = TILE_PROBLEMS[index]
    rng = np.random.default_rng(TILE_SEEDS[index])
    T, S = 2 * t + 1, 3 * n
    q, k = rng.normal(size=(*lead, T, d)) * 1.5, rng.normal(size=(*lead, S, d)) * 1.5
    v, do = rng.normal(size=(*lead, S, d_v)), rng.normal(size=(*lead, T, d_v))
    z = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
    top = z.max(axis=-1, keepdims=True)
    lse = (top + np.log(np.exp(z - top).sum(axis=-1, keepdims=True)))[..., 0]
    out = np.exp(z - lse[..., None]) @ v
    return {"q_i": q[..., :t, :], "k_j": k[..., n : 2 * n, :], "v_j": v[..., n : 2 * n, :],
            "do_i": do[..., :t, :], "lse_i": lse[..., :t], "row_dot_i": (do * out).sum(axis=-1)[..., :t]}


_TILE_MISTAKES: tuple[tuple[dict[str, Any], str], ...] = (
    ({"d_term": "tile"}, "you summed D = rowsum(p * dp) over this tile's keys only; a row's D sums over ALL its keys, "
                         "which no tile holds. That is why the backward uses row_dot_i = rowsum(dO * O), computed once "
                         "from the output (section 7's derivation)"),
    ({"weights": "softmax"}, "your weights are a softmax over this tile's keys only; each row must be normalised over "
                             "all S keys: exp(score - lse_i) does that, because lse_i came from the whole row"),
    ({"weights": "exp"}, "your weights are exp(score) without the logsumexp subtracted: p = exp(score - lse_i)"),
    ({"d_term": "none"}, "you left D out: dz = p * (dp - row_dot_i); the softmax's backward subtracts each row's D"),
    ({"d_term": "no_p"}, "dz must be multiplied by the weights: dz = p * (dp - row_dot_i)"),
    ({"d_term": "sign"}, "the sign of dz is flipped: dz = p * (dp - row_dot_i), not p * (row_dot_i - dp)"),
    ({"scale_scores": False}, "you forgot the 1/sqrt(d) scale on the scores before exp: the forward's lse_i was "
                              "computed from scaled scores"),
    ({"inverted": True}, "your scale is upside down: you multiplied by sqrt(d) where the scores, dq and dk take "
                         "c = 1/sqrt(d) (divide by math.sqrt(d), or multiply by 1 / math.sqrt(d))"),
    ({"scale_dq": False}, "dk and dv are right, but dq misses the factor c = 1/sqrt(d): the scores are c q k^T, so "
                          "dq_i = c (dz @ k_j), like dk_j = c (dz^T @ q_i)"),
    ({"scale_dk": False}, "dq and dv are right, but dk misses the factor c = 1/sqrt(d): the scores are c q k^T, so "
                          "dk_j = c (dz^T @ q_i), like dq_i = c (dz @ k_j)"),
    ({"scale_dv": True}, "dq and dk are right, but dv has a factor c = 1/sqrt(d) it should not have: O = P V holds "
                         "no scale, so dv_j = p^T @ do_i; the scale only enters through the scores, in dq and dk"),
    ({"scale_grads": False}, "dq and dk miss the factor 1/sqrt(d): the scores are scale * q k^T, so the chain rule "
                             "brings the scale into both"),
)


def _judge_tile(question: str, result: Any, problem: dict[str, Floats]) -> Verdict | None:
    """``None`` when ``result`` is this tile's right ``(dq, dk, dv)`` shares; a failed `Verdict` naming the mistake."""
    args = tuple(problem.values())
    right = _tile_variant(*args)
    names = ("dq_i", "dk_j", "dv_j")
    try:
        parts = [np.asarray(part) for part in result]
    except Exception:  # not a sequence of arrays: say what came back
        return failed(question, f"expected the triple (dq_i, dk_j, dv_j), got {type(result).__name__}")
    if len(parts) != 3:
        return failed(question, f"expected the triple (dq_i, dk_j, dv_j), got {len(parts)} value(s)")
    if all(same(a, b) for a, b in zip(parts, right, strict=True)):
        return None
    for order in ((1, 0, 2), (0, 2, 1), (2, 1, 0), (1, 2, 0), (2, 0, 1)):
        if all(same(parts[i], right[j]) for i, j in enumerate(order)):
            return failed(question, "right numbers, wrong order: return (dq_i, dk_j, dv_j), the shares of the "
                                    "query block, then the key block, then the value block")
    for flags, message in _TILE_MISTAKES:
        with np.errstate(all="ignore"):
            wrong = _tile_variant(*args, **flags)
        if all(same(a, b) for a, b in zip(parts, wrong, strict=True)):
            return failed(question, message)
        if flags.get("d_term") and same(parts[2], right[2]) and same(parts[0], wrong[0]):
            return failed(question, "dv_j is right; " + message)
    lead = problem["q_i"].shape[:-2]
    for name, part, good in zip(names, parts, right, strict=True):
        if part.shape != good.shape:
            hint = ""
            if lead and part.shape == good.shape[::-1][: part.ndim]:
                hint = "; .T reverses EVERY axis of an array with leading axes: use np.swapaxes(x, -1, -2)"
            return failed(question, f"{name} has shape {part.shape}, expected {good.shape}{hint}")
    wrong_parts = [name for name, part, good in zip(names, parts, right, strict=True) if not same(part, good)]
    return failed(question, f"right shapes, wrong numbers in {', '.join(wrong_parts)}: compare each with the "
                            "derivation of section 7 (dv from p and dO; dz from p, dp and D; dq and dk from dz)")


def check_tile_grads(tile_grads: Any) -> Verdict:
    """Question "tile grads": ``tile_grads(q_i, k_j, v_j, do_i, lse_i, row_dot_i) -> (dq_i, dk_j, dv_j)``,
    one tile's shares of the gradients, with the weights recomputed from the logsumexp.

    Run on three tiles of different sizes (the first is the notebook's). Recognises: D summed over the
    tile only, a softmax over the tile only, no logsumexp, D left out, the weights left out of dz, the
    sign of dz, the scale left out of the scores or of dq and dk, ``.T`` on arrays with leading axes, the
    three results in another order, a scale hard-coded from the notebook's ``d``, and the library's
    backward functions called.
    """
    question = "tile grads"
    what = "tile_grads(q_i, k_j, v_j, do_i, lse_i, row_dot_i) returning (dq_i, dk_j, dv_j)"
    if tile_grads is not None and not (callable(tile_grads) and is_blank(tile_grads)):
        refused = forbidden_call(question, tile_grads, "tiled_attention_backward", "attention_backward")
        if refused is not None:
            return refused
    for index in range(len(TILE_PROBLEMS)):
        problem = tile_problem(index)
        with np.errstate(all="ignore"):
            result = function_answer(question, tile_grads, tuple(a.copy() for a in problem.values()), what)
        if isinstance(result, Verdict):
            if "raised" in result.message and _uses_dot_t(tile_grads):
                return failed(question, result.message + "; .T reverses EVERY axis of an array with leading axes: "
                                                         "use np.swapaxes(x, -1, -2)")
            if "raised" in result.message and "broadcast" in result.message:
                return failed(question, result.message + ". lse_i and row_dot_i hold one number per query, shape "
                              "(..., t); against a (..., t, n) tile they need a last axis of length 1, "
                              "lse_i[..., None], so that each query's number meets its own row (without it NumPy "
                              "lines the t numbers up with the n keys)")
            return result
        verdict = _judge_tile(question, result, problem)
        if verdict is None:
            continue
        if index > 0:
            first_d = TILE_PROBLEMS[0][3]
            d = problem["q_i"].shape[-1]
            parts = [np.asarray(part) for part in result]
            hard = _tile_variant(*problem.values(), d=first_d)
            if len(parts) == 3 and all(same(a, b) for a, b in zip(parts, hard, strict=True)):
                return failed(question, f"right on the notebook's tile, wrong on a tile with d = {d}: your scale "
                                        f"uses d = {first_d} from the notebook; take it from q_i.shape[-1]")
            return failed(question, f"right on the notebook's tile, but not on a tile of other sizes ({d=}): "
                          + verdict.message)
        return verdict
    return passed(question, "the shares of dq, dk and dv are right on three tiles of different sizes: summed over "
                            "the tiles, they give the whole gradient without a (T, S) array")


def _uses_dot_t(function: Any) -> bool:
    """Whether the learner's code writes ``x.T`` (which reverses every axis of an array with leading axes)."""
    return re.search(r"\.T\b", _source(function)) is not None


def _source(function: Any) -> str:
    """The source of the learner's function, or "" when Python cannot find it."""
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


# ----- counting what a causal mask keeps (Your turns 4 and 5) --------------------------------------
def _whole_count(question: str, answer: Any, what: str) -> int | Verdict:
    """The learner's count as an int; a float gets a message that names the type, whatever produced it."""
    value = number_answer(question, answer, what)
    if isinstance(value, Verdict):
        return value
    if ((isinstance(answer, (float, np.floating)) or (hasattr(answer, "dtype") and answer.dtype.kind == "f"))
            and value.is_integer()):
        return int(value)  # a whole number written as a float (800.0, or from `/` that divides exactly) is accepted
    if isinstance(answer, (float, np.floating)) or (hasattr(answer, "dtype") and answer.dtype.kind in "fc"):
        return failed(question, f"{value:g} is a float; the question asks for a count, a whole number: write it as an "
                                "int (a float can come from a literal like 560.0, from `/`, or from math functions; "
                                "int(...) or `//` gives an int)")
    n = int_answer(question, answer, what)
    return n


def kept_entries(B: int, h: int, T: int, S: int) -> int:
    """How many entries of a ``(B, h, T, S)`` weights tensor a bottom-right causal mask allows
    (``mha_numpy.causal_mask(T, S)``: query ``t`` sees ``S - T + t + 1`` positions)."""
    B, h, T, S = (check_int(name, value) for name, value in (("B", B), ("h", h), ("T", T), ("S", S)))
    if S < T:
        raise ValueError(f"a causal mask needs S >= T (the T queries are the last T of the S positions), "
                         f"got {T=}, {S=}")
    return B * h * sum(S - T + t + 1 for t in range(T))


def check_kept_entries(answer: Any, *, B: int, h: int, T: int, S: int) -> Verdict:
    """Question "kept entries": how many of the ``B*h*T*S`` weights a causal mask lets through when the
    ``T`` queries are the last ``T`` of ``S`` positions (``S - T`` cached tokens before them).

    Recognises: every entry counted, the masked entries counted, the mask aligned top-left (the cache
    forgotten), a query not seeing itself, one position too many, one head or one sequence only, all
    ``S`` positions taken as queries, half of the entries, a float.
    """
    question = "kept entries"
    right = kept_entries(B, h, T, S)
    what = "one whole number: how many weights the causal mask lets through"
    if answer is None:
        return unanswered(question, "replace None with " + what)
    n = _whole_count(question, answer, what)
    if isinstance(n, Verdict):
        return n
    if n == right:
        return passed(question, f"{right} of the {B * h * T * S} entries: query t sees the {S - T} cached positions "
                                f"and t + 1 new ones, in every head of every sequence")
    full, per_map = B * h * T * S, right // (B * h)
    mistake = first_match(n, [
        (full, "that counts every entry of the (B, h, T, S) tensor, masked ones included; count only the ones the "
               "causal mask lets through"),
        (full - right, "that counts the entries the mask BLOCKS; the question asks for the ones it lets through"),
        (B * h * T * (T + 1) // 2, f"that is a mask aligned top-left, as if there were no cache (query t sees t + 1 "
                                   f"positions); here the T queries are the last T of the S positions, so query t "
                                   f"also sees the {S - T} cached ones"),
        (B * h * sum(S - T + t for t in range(T)), "one too few per query: causal means every position up to AND "
                                                   "including the query's own"),
        (B * h * sum(S - T + t + 2 for t in range(T)), "one too many per query: query t sees positions 0 .. S - T + t, "
                                                       "that is S - T + t + 1 of them"),
        (per_map, "that is one (T, S) mask; the weights tensor holds one per head and per sequence"),
        (h * per_map, "that is one sequence; the batch holds B of them"),
        (B * per_map, "that is one head; every one of the h heads has its own weights"),
        (B * h * S * (S + 1) // 2, "that counts all S positions as queries; only the T new ones are queries here"),
        (full // 2, "half of the entries is the rough count for long sequences; count exactly: query t sees "
                    "S - T + t + 1 positions"),
    ])
    return failed(question, mistake or f"{n} is not it: count, for each of the T queries, how many of the S positions "
                                       "it may see, then multiply by the heads and the sequences")


def visited_tiles(T: int, S: int, query_block: int, block: int) -> int:
    """How many ``(query block, key block)`` tiles of a bottom-right causal ``(T, S)`` mask hold at least one
    allowed pair (the tiles a loop that skips fully masked tiles computes)."""
    T, S, query_block, block = (check_int(name, value) for name, value in
                                (("T", T), ("S", S), ("query_block", query_block), ("block", block)))
    if S < T:
        raise ValueError(f"a causal mask needs S >= T (the T queries are the last T of the S positions), "
                         f"got {T=}, {S=}")
    count = 0
    for start in range(0, T, query_block):
        last_query = min(start + query_block, T) - 1
        count += (S - T + last_query) // block + 1  # key blocks that start at or before the last key it sees
    return count


def check_visited_tiles(answer: Any, *, T: int, S: int, query_block: int, block: int) -> Verdict:
    """Question "visited tiles": how many tiles a causal tiled loop computes (it skips the tiles whose every
    pair is masked), with query blocks of ``query_block`` and key blocks of ``block``.

    Recognises: every tile, half of them, the skipped tiles, only the fully allowed tiles, the triangle
    count of square tiles (with either block size), a float.
    """
    question = "visited tiles"
    right = visited_tiles(T, S, query_block, block)
    what = "one whole number: how many tiles the causal loop computes"
    if answer is None:
        return unanswered(question, "replace None with " + what)
    n = _whole_count(question, answer, what)
    if isinstance(n, Verdict):
        return n
    rows, cols = -(-T // query_block), -(-S // block)
    if n == right:
        return passed(question, f"{right} of the {rows} x {cols} = {rows * cols} tiles: the ones on the diagonal are "
                                "partly masked and still computed, the ones above it are skipped")
    allowed = causal_mask(T, S)
    full_tiles = sum(bool(allowed[i : i + query_block, j : j + block].all())
                     for i in range(0, T, query_block) for j in range(0, S, block))
    skipped = rows * cols - right
    skipped_message = "that counts the tiles the loop SKIPS; the question asks for the ones it computes"
    full_message = ("you counted only the tiles where every pair is allowed; a tile on the diagonal is partly "
                    "masked, but it holds allowed pairs, so the loop must compute it")
    if full_tiles == skipped:  # a square grid split by its diagonal: both mistakes give the same number
        skipped_message = full_message = (f"{n} is both the number of tiles the loop skips and the number whose every "
                                          "pair is allowed; the loop computes the fully allowed tiles AND the partly "
                                          "masked ones the diagonal crosses")
    mistake = first_match(n, [
        (rows * cols, "that is every tile; the loop skips a tile whose every pair is masked, and the causal mask "
                      "masks every pair of the tiles above the diagonal"),
        (skipped, skipped_message),
        (full_tiles, full_message),
        (rows * cols // 2, "half of the tiles is the rough count; the tiles the diagonal crosses are computed too, "
                           "so it is more than half: count per query block"),
        (rows * (rows + 1) // 2, f"that is the triangle of a grid of square tiles, {rows} x {rows}; here a tile "
                                 f"is {query_block} queries by {block} keys, so a row of tiles has {cols} key "
                                 "blocks: count per query block"),
        (cols * (cols + 1) // 2, f"that is the triangle of a grid of square tiles, {cols} x {cols}; here a query "
                                 f"block holds {query_block} queries, not {block}, so there are {rows} rows of "
                                 "tiles: count per query block"),
    ])
    if mistake is None and n > right and n % right == 0:
        mistake = ("that is a whole multiple of the right count: did you multiply by a number of heads, sequences or "
                   "blocks? The question asks for the tiles of ONE head of ONE sequence, counted per query block")
    return failed(question, mistake or f"{n} is not it: for each query block, find the last key its last query may "
                                       "see; every key block that starts at or before that key is computed")


# ----- SDPA for a batch of caches of different lengths (Your turn 6) --------------------------------
def _padded_mask(B: int, T: int, S: int, pad: list[int], *, causal: str = "bottom", padding: str = "left",
                 own: bool = True) -> NDArray[np.bool_]:
    """The ``(B, 1, T, S)`` mask: causal (``"bottom"`` right, ``"top"`` left, ``"none"``) and real positions
    (``"left"`` padding at the start, ``"right"`` at the end, ``"none"`` padding ignored)."""
    if causal == "bottom":
        order = causal_mask(T, S) if own else causal_mask(T, S) & ~np.eye(T, S, k=S - T, dtype=bool)
    elif causal == "top":
        order = np.tril(np.ones((T, S), dtype=bool))
    else:
        order = np.ones((T, S), dtype=bool)
    positions = np.arange(S)
    pads = np.asarray(pad)[:, None]
    real = {"left": positions >= pads, "right": positions < S - pads}.get(padding, np.ones((B, S), dtype=bool))
    return np.asarray(order[None, None] & real[:, None, None, :])


def check_padded_decoding(answer: Any, q: Any, k: Any, v: Any, pad: Any) -> Verdict:
    """Question "padded decoding": ``scaled_dot_product_attention`` for a batch of sequences whose caches
    hold different numbers of tokens. Every sequence's ``S`` slots end with its ``T`` new tokens; sequence
    ``b`` starts with ``pad[b]`` padding slots (left padding) that no query may see. Each new query sees the
    real positions up to its own.

    Recognises: the padding ignored (causal only), the causal mask left out (padding only), no mask,
    ``is_causal=True`` (top-left), the padding on the wrong side, a ``(B, T, S)`` mask that lines the
    batch up with the heads, the mask inverted, a 0/1 float mask, a query that cannot see itself, a NumPy
    array instead of SDPA's tensor.
    """
    question = "padded decoding"
    qf = reference_array("q", q, "(B, h, T, d)", rank=4)
    kf = reference_array("k", k, "(B, h, S, d)", rank=4)
    vf = reference_array("v", v, "(B, h, S, d_v)", rank=4)
    pads = [check_int("pad", p, low=0) for p in np.asarray(pad).reshape(-1)]
    B, T, S = qf.shape[0], qf.shape[2], kf.shape[2]
    if len(pads) != B:
        raise ValueError(f"pad must hold one number of padding slots per sequence, B = {B} of them, got {len(pads)}")
    if max(pads) > S - T:
        raise ValueError(f"pad may not reach the T = {T} new tokens: each must be at most S - T = {S - T}, got {pads}")
    a = array_answer(question, answer, "the output tensor of F.scaled_dot_product_attention, shape (B, h, T, d_v)")
    if isinstance(a, Verdict):
        return a
    scores = qf @ np.swapaxes(kf, -1, -2) / math.sqrt(qf.shape[-1])  # (B, h, T, S)

    def attend(mask: Any) -> Floats:
        with np.errstate(all="ignore"):
            return np.nan_to_num(_attend(np.where(mask, scores, -np.inf), vf))

    right_mask = _padded_mask(B, T, S, pads)
    right = attend(right_mask)
    if same(a, right):
        if hasattr(q, "detach") and not hasattr(answer, "detach"):
            return failed(question, f"expected the torch tensor F.scaled_dot_product_attention returns, got "
                                    f"{type(answer).__name__}: call SDPA and keep its output as it is")
        return passed(question, f"shape {right.shape}: each new query sees the real positions up to its own, and no "
                                "padding slot, in every head")
    mistake = first_match(a, [
        (lambda: attend(_padded_mask(B, T, S, pads, padding="none")),
         "your mask is causal but lets the queries see the padding slots at the start of the shorter cache: combine "
         "it (with &) with a per-sequence mask of the real positions"),
        (lambda: attend(_padded_mask(B, T, S, pads, causal="none")),
         "your mask hides the padding but is not causal: the first new token may not see the second; combine the "
         "padding mask (with &) with the causal one"),
        (lambda: attend(np.ones((1, 1, T, S), dtype=bool)),
         "that is attention without any mask: pass one as attn_mask"),
        (lambda: attend(_padded_mask(B, T, S, pads, causal="top", padding="none")),
         "that is is_causal=True (or a top-left tril): query t sees positions 0..t only, and the padding is not "
         "masked either; here the new queries are the last T of the S slots"),
        (lambda: attend(_padded_mask(B, T, S, pads, causal="top")),
         "your causal part is aligned top-left (query t sees positions 0..t); the new queries are the last T of the S "
         "slots, so query t sees slots up to S - T + t"),
        (lambda: attend(_padded_mask(B, T, S, pads, padding="right")),
         "your padding is on the wrong side: the shorter cache is padded at the START (left), slots 0 .. pad - 1, "
         "so that every sequence's new tokens are its last T slots"),
        (lambda: attend(right_mask[:, 0][None]),
         "your mask has shape (B, T, S): SDPA lines its axes up from the right with (B, h, T, S), so the batch axis "
         "sat where the heads are. Give it a head axis of length 1: shape (B, 1, T, S)"),
        (lambda: attend(~right_mask), "the mask is inverted: for SDPA True means take part"),
        (lambda: attend(_padded_mask(B, T, S, pads, own=False)),
         "in your mask a query cannot see itself: causal means every slot up to AND including the query's own"),
        (lambda: _attend(scores + right_mask, vf), "a float mask is ADDED to the scores (0 or 1 here), it blocks "
                                                   "nothing; give SDPA a boolean mask, True = take part"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    if a.shape != right.shape:
        return failed(question, f"expected shape (B, h, T, d_v) = {right.shape}, got {a.shape}")
    if np.isnan(a).any():
        return failed(question, "some rows are NaN: those queries could attend to nothing; which slots does your "
                                "mask allow?")
    return failed(question, "right shape, wrong numbers: compare, for each sequence and each new query, the slots your "
                            "mask allows with the real slots up to the query's own")
