"""Quick check of the lesson "Inspecting heads" (checkers in ``lessons_lib.checks.inspecting_heads``).

Each checker recognises the usual wrong answers and says what went wrong, without giving the right
answer away. `check_weight_entries` is shared with ``lessons_lib.checks.efficient_attention``, which
asks the same question.

Notation: ``B`` batch, ``h`` heads, ``T`` queries, ``S`` source positions, ``D`` model width,
``d_h = D / h``. NumPy only; torch tensors are accepted too.
"""

from __future__ import annotations

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
    passed,
    same,
    same_kind,
)
from lessons_lib.validation import check_int, head_width

__all__ = [
    "check_argmax_shares",
    "check_head_count",
    "check_head_parts",
    "check_score_multiplies",
    "check_weight_entries",
]


def _as_if_heads(n: int, per_head: int, h: int) -> str | None:
    """A message for ``n = k * per_head`` with ``k != h`` (some other head count), else ``None``."""
    if per_head <= 0 or n <= 0 or n % per_head != 0 or n // per_head == h:
        return None
    return f"that is {n // per_head} times the count for one head, as if there were {n // per_head} heads: check h"


def _heads_and_width(h: int | None, D: int | None, d_h: int | None) -> tuple[int, int | None]:
    """``(h, d_h)`` from ``h`` alone, ``h`` and ``D``, or ``D`` and ``d_h`` (so a check call need not show
    ``h = D // d_h``); ``d_h`` is ``None`` when neither ``D`` nor ``d_h`` is given."""
    if h is None:
        if D is None or d_h is None:
            raise ValueError("give h, or both D and d_h (then h = D / d_h)")
        D, d_h = check_int("D", D, symbol="D"), check_int("d_h", d_h)
        if D % d_h != 0:
            raise ValueError(f"d_h={d_h} must divide D={D} for this question to have an answer")
        return D // d_h, d_h
    h = check_int("h", h)
    if D is not None:
        width = head_width(D, h)
        if d_h is not None and check_int("d_h", d_h) != width:
            raise ValueError(f"d_h={d_h} is not D / h = {D} / {h} = {width}")
        return h, width
    return h, None if d_h is None else check_int("d_h", d_h)


def check_weight_entries(
    answer: Any, *, B: int, T: int, S: int, h: int | None = None, D: int | None = None, d_h: int | None = None
) -> Verdict:
    """Question "weight entries": a materialised weight tensor ``(B, h, T, S)`` has ``B*h*T*S`` entries.

    Give ``h``, or ``D`` and ``d_h`` (then ``h = D / d_h``, and the check call does not show it).
    Recognises: heads left out, batch left out, ``T * T`` or ``S * S`` used for ``T * S``, another
    number of heads (e.g. ``d_h`` taken for ``h``), bytes (float32 or float64) given instead of
    entries, and, when the head width is known, the count multiplied by a width (without naming the
    multiplication count, the next question of lesson 05) and the layer's parameters (``4*D*D``).
    """
    question = "weight entries"
    B, T, S = (check_int(name, value) for name, value in (("B", B), ("T", T), ("S", S)))
    h, width = _heads_and_width(h, D, d_h)
    n = int_answer(question, answer, "one whole number: how many numbers the weight tensor holds")
    if isinstance(n, Verdict):
        return n
    right = B * h * T * S
    if n == right:
        return passed(question, f"B*h*T*S = {B}*{h}*{T}*{S} = {right} entries: one (T, S) map per head and sequence")
    counted_work = [] if width is None else [
        (right * width, "too large by a factor of the head width: the tensor holds one number per weight, one "
                        "weight per query, key, head and sequence; you multiplied by a width (or took the "
                        "width D for the head count h)"),
        (2 * right * width, "too large by twice the head width: the tensor holds one number per weight, one "
                            "weight per query, key, head and sequence; you multiplied by a width and by 2"),
    ]
    if D is not None:
        counted_work += [
            (4 * D * D, "that is 4*D*D, the parameters of the layer's four projections W_q, W_k, W_v, W_o; the "
                        "question asks for the attention weights (the softmax output), one per query, key, head "
                        "and sequence"),
            (4 * D * D + 4 * D, "that is the layer's parameters (four D x D projections and their biases); the "
                                "question asks for the attention weights (the softmax output)"),
            (D * D, "that is D*D, the parameters of one projection matrix; the question asks for the attention "
                    "weights (the softmax output), one per query, key, head and sequence"),
        ]
    mistake = first_match(n, [
        *counted_work,
        (B * T * S, "you left out the heads: B*T*S counts one map per sequence, but every head stores its "
                    "own (T, S) map"),
        (h * T * S, "you left out the batch: h*T*S counts the maps of one sequence; each of the B "
                    "sequences has its own maps"),
        (B * h * T * T, "you used T twice: the maps are (T, S), queries by source positions, and the "
                        "key axis has S positions, not T"),
        (B * h * S * S, "you used S twice: the maps are (T, S), and the query axis has T positions, not S"),
        (B * h * (T + S) ** 2, "you used T + S for both axes of a map; a map has T rows (queries) and S "
                               "columns (source positions)"),
        (B * h * (T + S), "you added T and S: a (T, S) map has T rows of S entries each, T * S entries"),
        (4 * right, "that is bytes in float32; the question asks for entries, not bytes"),
        (8 * right, "that is bytes in float64; the question asks for entries, not bytes"),
    ])
    mistake = mistake or _as_if_heads(n, B * T * S, h)
    return failed(question, mistake or f"{n} is not it: the weights have shape (B, h, T, S); "
                                       f"expected B * h * T * S with each size read off the setting")


def check_head_count(answer: Any, D: int, d_h: int) -> Verdict:
    """Question "head count": which ``h`` gives heads of width ``d_h`` for model width ``D``? (``D / d_h``)"""
    question = "head count"
    D, d_h = check_int("D", D, symbol="D"), check_int("d_h", d_h)
    if D % d_h != 0:
        raise ValueError(f"d_h={d_h} must divide D={D} for this question to have an answer")
    upside_down = ("upside down: that is d_h / D, the share of the width one head takes; the count of heads is "
                   "how many times d_h fits into D")
    if isinstance(answer, float) and 0 < answer < 1 and np.isclose(answer, d_h / D):
        return failed(question, upside_down)
    n = int_answer(question, answer, "one whole number: how many heads")
    if isinstance(n, Verdict):
        return n
    right = D // d_h
    if n == right:
        return passed(question, f"h = D / d_h = {D} / {d_h} = {right}")
    if n == 0:
        return failed(question, f"h must be a positive number of heads, got 0: if you computed d_h // D, the "
                                f"division is {upside_down}")
    if n < 0:
        return failed(question, f"h must be a positive number of heads, got {n}")
    if n == D * d_h:
        return failed(question, "you multiplied D by d_h: the heads share the D features, so more width per "
                                "head leaves room for fewer heads")
    if n > D:
        return failed(question, f"h={n} is more heads than the D={D} features they share between them")
    if D % n != 0:
        return failed(
            question,
            f"h={n} does not divide D={D}: the heads would not all have the same width (D % h = {D % n})",
        )
    if n == d_h:
        return failed(question, f"{n} is the head width d_h itself; the question asks how many heads of that "
                                f"width fit side by side in D")
    return failed(question, f"with h={n} each head would be d_h = {D // n} wide, not {d_h}")


def check_score_multiplies(
    answer: Any, B: int, T: int, S: int, D: int, h: int | None = None, *, d_h: int | None = None
) -> Verdict:
    """Question "score multiplies": multiplications to form every head's scores ``q @ k^T``?
    (``B*h*T*S*d_h = B*T*S*D``). Give ``h`` or ``d_h`` (then ``h = D / d_h``).

    Recognises: dot products ``D`` long, one head, the number of scores, the value mixing (or the
    additions) counted too, the ``1/sqrt(d_h)`` scaling counted, ``T`` or ``S`` twice, the batch left
    out, ``T + S`` for ``T * S``, and the weights' bytes.
    """
    question = "score multiplies"
    h, width = _heads_and_width(h, D, d_h)
    d_h = head_width(D, h) if width is None else width
    B, T, S = (check_int(name, value) for name, value in (("B", B), ("T", T), ("S", S)))
    n = int_answer(question, answer, "one whole number: how many multiplications all the scores take")
    if isinstance(n, Verdict):
        return n
    right = B * h * T * S * d_h
    if n == right:
        return passed(question, f"B*h*T*S*d_h = B*T*S*D = {right}: set by the total head width D, not by h")
    mistake = first_match(n, [
        (B * h * T * S * D, "each head's dot products are d_h long, not D long: a head only sees its own "
                            "d_h features"),
        (B * T * S * d_h, "that counts one head; all h heads compute their scores"),
        (B * h * T * S, "that is the number of scores (weight entries); each score is itself a dot product"),
        (2 * right, "twice the count: either you counted an addition for every multiplication (the question "
                    "counts multiplications only), or you added the value mixing (weights @ v), which costs as "
                    "much again (the question asks for the scores only)"),
        (B * h * T * S * (2 * d_h - 1), "that counts the additions too: a dot product of d_h numbers takes d_h "
                                        "multiplications and d_h - 1 additions; the question counts "
                                        "multiplications only"),
        (B * h * T * S * (d_h + 1), "you counted the 1/sqrt(d_h) scaling too (one more multiplication per "
                                    "score); the question leaves the scaling out: only the products inside "
                                    "q . k"),
        (B * h * T * S * (D + 1), "you counted the 1/sqrt(d_h) scaling too, and each head's dot products are "
                                  "d_h long, not D long"),
        (B * h * T * T * d_h, "you used T twice: every query meets S keys, not T"),
        (B * h * S * S * d_h, "you used S twice: there are T queries, not S"),
        (h * T * S * d_h, "you left out the batch: each of the B sequences has its own scores"),
        (B * h * (T + S) * d_h, "you added T and S: every one of the T queries meets every one of the S keys, "
                                "T * S scores per head"),
        (B * h * (T + S) ** 2 * d_h, "you used T + S for both query and key axes; there are T queries and S "
                                     "keys"),
        (4 * B * h * T * S, "that is the weight tensor's size in bytes (float32 entries); the question counts "
                            "multiplications: how many scores, and how many multiplications inside one"),
    ])
    return failed(question, mistake or f"{n} is not it: count the scores first, then the multiplications "
                                       f"inside one score")


# ----- every head's part of the output (Your turn 1) ---------------------------------------------
# The problems `head_parts` is run on, (B, h, T, d_h): no size is the lesson's (h = 4, d_h = 4, D = 16)
# and the second differs from the first in every size, so nothing can be hard-coded.
_PART_PROBLEMS = ((2, 3, 5, 2), (3, 5, 4, 3))
_LESSON_PART = (2, 4, 8, 4)  # the lesson's sizes: a function that only works there hard-codes them


def _part_problem(B: int, h: int, T: int, d_h: int, seed: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(B, h, T, d_h)), rng.normal(size=(h * d_h, h * d_h))


def _works_at_lesson_sizes(function: Any, check: Any) -> bool:
    """True when ``check(function)`` passes on a lesson-sized problem: the learner's sizes are the lesson's."""
    try:
        return bool(check(function).ok)
    except Exception:  # the learner's function may raise anything
        return False


def check_head_parts(function: Any) -> Verdict:
    """Question "head parts": ``function(head_out (B, h, T, d_h), wo (D, D)) -> (B, h, T, D)``: every head's
    share of the layer output at once, head ``i``'s output times its rows ``i*d_h:(i+1)*d_h`` of ``wo``
    (as `inspect_heads.head_parts`).

    Run on two problems of its own (no size is the lesson's). Recognises: the parts summed (the layer
    output), columns of ``wo`` instead of rows (or ``wo.T``), every h-th row, the outputs before ``wo``,
    a division by ``h``, the heads on the wrong axis, one head only, a torch tensor returned, the
    library's `inspect_heads.head_parts` called, and sizes taken from the lesson.
    """
    question = "head parts"
    forbidden = forbidden_call(question, function, "head_parts")
    if forbidden is not None:
        return forbidden
    verdict = failed(question, "no problem tried")
    for seed, (B, h, T, d_h) in enumerate(_PART_PROBLEMS, start=11):
        verdict = _parts_verdict(question, function, *_part_problem(B, h, T, d_h, seed))
        if not verdict.ok:
            if not verdict.answered:
                return verdict
            lesson_problem = _part_problem(*_LESSON_PART, 99)
            if _works_at_lesson_sizes(function, lambda f, p=lesson_problem: _parts_verdict(question, f, *p)):
                return failed(question, "right at the lesson's sizes (h = 4, d_h = 4, D = 16) but not at "
                                        f"h = {h}, d_h = {d_h}, D = {h * d_h}: a size is written into the "
                                        "function; take h and d_h from head_out.shape")
            if seed == 11:
                return verdict
            return failed(question, f"right on a first problem but not with h = {h}, d_h = {d_h}: "
                                    f"{verdict.message}; take every size from the arrays")
    return verdict


_RESHAPE_ONLY = ("right shape, but the heads were merged (or moved to axis 2) by a reshape alone: (B, h, T, d_h) "
                 "read as (B, T, h*d_h) puts pieces of several tokens and heads into one row; swap axes 1 and 2 "
                 "first (a transpose), then reshape, or avoid merging at all")


def _merged_by_reshape(head_out: NDArray[np.float64]) -> NDArray[np.float64]:
    """The wrong merge: ``(B, h, T, d_h)`` reshaped straight to ``(B, T, h*d_h)``, no transpose."""
    B, h, T, d_h = head_out.shape
    merged: NDArray[np.float64] = head_out.reshape(B, T, h * d_h)
    return merged


def _parts_verdict(question: str, function: Any, head_out: NDArray[np.float64], wo: NDArray[np.float64]) -> Verdict:
    _, h, _, d_h = head_out.shape
    D = wo.shape[1]
    what = "the body: every head's output times its rows of wo, shape (B, h, T, D)"
    result = function_answer(question, function, (head_out.copy(), wo.copy()), what)
    if isinstance(result, Verdict):
        if result.answered and "raised" in result.message and any(
            word in result.message for word in ("matmul", "shapes", "broadcast", "operand")
        ):
            return failed(question, "a shape error: head i's output is (B, T, d_h), so the block of wo it "
                                    "multiplies must be (d_h, D), d_h of wo's rows (rows read the concatenated "
                                    "heads); " + result.message)
        return result
    got = array_answer(question, result, "an array of shape (B, h, T, D)")
    if isinstance(got, Verdict):
        return got

    def parts(rows: NDArray[np.float64]) -> NDArray[np.float64]:
        """``rows (h, d_h, D)`` -> ``(B, h, T, D)``."""
        product: NDArray[np.float64] = np.einsum("bhtd,hdo->bhto", head_out, rows)
        return product

    right = parts(wo.reshape(h, d_h, D))
    if same(got, right):
        kind = same_kind(question, result, head_out) if hasattr(result, "detach") else None
        if kind is not None:
            return kind
        return passed(question, "head i's output through wo's rows i*d_h:(i+1)*d_h, for every head: the parts "
                                "add up to the layer output")
    candidates: list[tuple[Any, str]] = [
        (lambda: right.sum(axis=1), "you summed the parts: that is the whole layer output, (B, T, D); keep one "
                                    "part per head, (B, h, T, D)"),
        (lambda: parts(wo.reshape(D, h, d_h).transpose(1, 2, 0)), "those come from wo's columns (or rows of "
                                                                   "wo.T); in the (in, out) layout head i owns d_h "
                                                                   "rows of wo, the rows its features are read by"),
        (lambda: parts(wo.reshape(d_h, h, D).transpose(1, 0, 2)), "those use every h-th row of wo; a head owns one "
                                                                   "contiguous block of d_h rows"),
        (lambda: right / h, "right direction, but divided by h: the layer adds the heads' parts, it does not "
                            "average them"),
        (lambda: right.transpose(0, 2, 1, 3), "right numbers, but (B, T, h, D): put the heads on axis 1"),
        (lambda: right[:, 0], "that is head 0's part only; return every head's, (B, h, T, D)"),
        (lambda: head_out, "those are the heads' outputs before W_o, (B, h, T, d_h); each goes through its rows "
                           "of wo"),
        (lambda: np.stack([_merged_by_reshape(np.where(np.arange(h)[:, None, None] == i, head_out, 0.0)) @ wo
                           for i in range(h)], axis=1), _RESHAPE_ONLY),
        (lambda: np.einsum("bthd,hdo->bhto", head_out.reshape(head_out.shape[0], -1, h, d_h),
                           wo.reshape(h, d_h, D)), _RESHAPE_ONLY),
    ]
    mistake = first_match(got, candidates)
    if mistake is None and got.shape == right.shape and same(got.sum(axis=1), right.sum(axis=1)):
        even = same(got, np.broadcast_to(right.sum(axis=1, keepdims=True) / h, right.shape))
        mistake = ("the parts sum to the output but are not per-head" + (
            ": every part is the whole output divided by h, the same for every head; head i's part comes from "
            "head i's output alone, times its own rows of wo" if even else
            ": head i's part must come from head i's output alone, times its own rows of wo"))
    if mistake is None and got.shape == right.shape:
        wrong = [i for i in range(h) if not same(got[:, i], right[:, i])]
        mistake = (f"right shape (B, h, T, D), but the parts of heads {wrong} are not right: head i's output "
                   f"times wo's rows i*d_h:(i+1)*d_h")
    return failed(question, mistake or f"expected shape (B, h, T, D) = {right.shape}, got {got.shape}")


# ----- roles from the argmax (Your turn 2) ---------------------------------------------------------
# The problems `argmax_shares` is run on, (B, h, T, seed): weights with one planted relationship per
# head (previous, next, marker, then none), sharp enough that every mistake below changes the numbers.
_SHARE_PROBLEMS = ((6, 4, 6, 21), (5, 5, 7, 22))
_LESSON_SHARES = (4, 4, 8, 23)


def _share_problem(B: int, h: int, T: int, seed: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    rng = np.random.default_rng(seed)
    marker = rng.integers(0, T, size=B)
    logits = 1.5 * rng.normal(size=(B, h, T, T))
    t = np.arange(T)
    hit = rng.random(size=(B, T)) < 0.7  # the planted relationship wins about 70 % of the queries
    for i in range(h):
        kind = i % 4
        for b in range(B):
            for q in range(T):
                target = (q - 1, q + 1, int(marker[b]), -1)[kind]
                if hit[b, q] and 0 <= target < T:
                    logits[b, i, q, target] += 4.0
    del t
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    normalised: NDArray[np.float64] = weights / weights.sum(axis=-1, keepdims=True)
    return normalised, marker.astype(np.int64)


def _shares(weights: NDArray[np.float64], marker: NDArray[np.int64], axis: int = -1,
            previous_all: bool = False, next_all: bool = False, swap: bool = False) -> NDArray[np.float64]:
    """The reference and its mistaken variants (``axis`` of the argmax, queries counted, rows swapped)."""
    B, _, T, _ = weights.shape
    best = weights.argmax(axis=axis)  # (B, h, T)
    t = np.arange(T)
    prev = (best[:, :, 1:] == t[1:] - 1).sum(axis=(0, 2)) / (B * (T if previous_all else T - 1))
    following = (best[:, :, :-1] == t[:-1] + 1).sum(axis=(0, 2)) / (B * (T if next_all else T - 1))
    marked = (best == marker[:, None, None]).mean(axis=(0, 2))
    rows = [following, prev] if swap else [prev, following]
    return np.stack([*rows, marked])


def check_argmax_shares(function: Any) -> Verdict:
    """Question "argmax shares": ``function(weights (B, h, T, T), marker (B,)) -> (3, h)``: per head, the
    share of queries whose strongest position is ``t - 1`` (over ``t >= 1``), ``t + 1`` (over
    ``t <= T - 2``) and the marked position (over all ``t``), as `inspect_heads.argmax_shares`.

    Run on two problems of its own (no size is the lesson's). Recognises: mean weights instead of
    argmax shares, the argmax over the query axis, previous and next swapped, query 0 (or T-1) counted,
    counts instead of shares, the result transposed, heads averaged first, the marker compared on the
    wrong axis, the library's function called, and sizes taken from the lesson.
    """
    question = "argmax shares"
    forbidden = forbidden_call(question, function, "argmax_shares")
    if forbidden is None:
        why = "which measures mean weights: this question counts argmaxes"
        forbidden = forbidden_call(question, function, "head_behaviour", why=why)
    if forbidden is not None:
        return forbidden
    verdict = failed(question, "no problem tried")
    for number, (B, h, T, seed) in enumerate(_SHARE_PROBLEMS):
        weights, marker = _share_problem(B, h, T, seed)
        verdict = _shares_verdict(question, function, weights, marker)
        if not verdict.ok:
            if not verdict.answered:
                return verdict
            lesson_maps = _share_problem(*_LESSON_SHARES)
            if _works_at_lesson_sizes(function, lambda f, p=lesson_maps: _shares_verdict(question, f, *p)):
                return failed(question, f"right at the lesson's sizes (h = 4, T = 8) but not at h = {h}, "
                                        f"T = {T}: a size is written into the function; take n, h and T from "
                                        "weights.shape")
            if number == 0:
                return verdict
            return failed(question, f"right on a first problem but not on weights of shape {weights.shape}: "
                                    f"{verdict.message}; take every size from weights itself")
    return verdict


def _shares_verdict(question: str, function: Any, weights: NDArray[np.float64], marker: NDArray[np.int64]) -> Verdict:
    B, h, T, _ = weights.shape
    what = "the body: a (3, h) array of shares (rows previous, next, marker)"
    result = function_answer(question, function, (weights.copy(), marker.copy()), what)
    if isinstance(result, Verdict):
        if result.answered and "could not be broadcast" in result.message:
            return failed(question, _broadcast_mistake(result.message, B))
        return result
    if isinstance(result, dict):
        return failed(question, "a dict, as head_behaviour returns; this question asks for one (3, h) array, "
                                "rows previous, next, marker (np.stack the three)")
    got = array_answer(question, result, "a (3, h) array")
    if isinstance(got, Verdict):
        return got
    right = _shares(weights, marker)
    if same(got, right):
        kind = same_kind(question, result, weights) if hasattr(result, "detach") else None
        if kind is not None:
            return kind
        return passed(question, "the argmax of every row, then per head the share of queries on t - 1, t + 1 "
                                "and the marker: a head's favourite place, whatever its weight there")
    t = np.arange(T - 1)
    mean_weights = np.stack([
        weights[:, :, t + 1, t].mean(axis=(0, 2)),
        weights[:, :, t, t + 1].mean(axis=(0, 2)),
        weights[np.arange(B), :, :, marker].mean(axis=(0, 2)),
    ])
    candidates: list[tuple[Any, str]] = [
        (mean_weights, "those are mean weights (what head_behaviour measures); the question counts how often "
                       "each relationship holds a row's largest weight (an argmax), whatever its size"),
        (lambda: _shares(weights, marker, axis=-2), "you took the argmax over axis -2 (the queries): a "
                                                    "query's weights run along its row, the last axis"),
        (lambda: _shares(weights, marker, swap=True), "previous and next are swapped: query t's previous "
                                                      "position is t - 1, a column to the left of the diagonal"),
        (lambda: _shares(weights, marker, previous_all=True), "you divided the previous-token count by all T "
                                                              "queries; query 0 has no previous position, so "
                                                              "count over t >= 1 only"),
        (lambda: _shares(weights, marker, next_all=True), "you divided the next-token count by all T queries; "
                                                          "the last query has no next position, so count over "
                                                          "t <= T - 2 only"),
        (lambda: _shares(weights, marker, previous_all=True, next_all=True),
         "you divided by all T queries for previous and next; query 0 has no previous and query T-1 no next "
         "position: count each over the queries that have one"),
        (lambda: np.stack([(weights.argmax(axis=-1)[:, :, 1:] == np.arange(1, T) + 1).mean(axis=(0, 2)),
                           (weights.argmax(axis=-1)[:, :, :-1] == np.arange(T - 1) - 1).mean(axis=(0, 2)),
                           right[2]]),
         "previous and next are swapped: row 0 compares query t with t + 1 and row 1 with t - 1; query t's "
         "previous position is t - 1 (left of the diagonal), its next t + 1"),
        (lambda: right * np.array([[B * (T - 1)], [B * (T - 1)], [B * T]]), "those are counts; divide each by "
                                                                            "the number of queries it was "
                                                                            "counted over"),
        (lambda: right.T, "right numbers, transposed: return (3, h), one row per relationship"),
        (lambda: _shares(weights.mean(axis=1, keepdims=True), marker)[:, 0],
         "you averaged over the heads first: that is the blurred map of section 2; measure each head"),
    ]
    mistake = first_match(got, candidates)
    if mistake is None and got.shape == right.shape:
        mistake = _scaled(got, right) or _wrong_rows(got, right, weights, marker)
    return failed(question, mistake or f"expected shape (3, h) = (3, {h}), got {got.shape}")


_ROWS = ("previous", "next", "marker")


def _broadcast_mistake(message: str, n: int) -> str:
    """A broadcasting error, named: ``marker[:, None]`` (shape ``(n, 1)``) is the usual one."""
    if f"({n},1)" in message.replace(" ", ""):
        return ("a broadcasting error: marker[:, None] has shape (n, 1), and NumPy lines shapes up from the right, "
                "so it meets the peaks (n, h, T) on their last two axes (h and T), not on the sequences: marker "
                "needs one length-1 axis for the heads and one for the queries; " + message)
    return ("a broadcasting error: NumPy lines shapes up from the right; check the shape of each side of every "
            "comparison (the peaks are (n, h, T), marker is (n,)); " + message)


def _row_variants(weights: NDArray[np.float64], marker: NDArray[np.int64]) -> list[tuple[int, Any, str]]:
    """Wrong versions of one row of the answer: ``(row, values (h,), what went wrong)``."""
    n, _, T, _ = weights.shape
    best = weights.argmax(axis=-1)  # (n, h, T)
    t = np.arange(T)
    later = t[1:]
    ones = np.arange(n)
    on_marker = weights[ones, :, :, marker]  # (n, h, T): each query's weight on its sequence's marked position
    not_marked = t[None, :] != marker[:, None]  # (n, T)
    threshold = ("counts rows whose weight there is above 0.5: a threshold, not the argmax; a row's largest "
                 "weight can be below 0.5 and still be the largest, and the question asks where each row peaks")
    return [
        (0, (weights[:, :, later, later - 1] > 0.5).mean(axis=(0, 2)), threshold),
        (1, (weights[:, :, later - 1, later] > 0.5).mean(axis=(0, 2)), threshold),
        (2, (on_marker > 0.5).mean(axis=(0, 2)), threshold),
        (0, (best[:, :, 1:] == later + 1).mean(axis=(0, 2)),
         "previous and next are swapped: it compares query t with t + 1; query t's previous position is t - 1"),
        (1, (best[:, :, :-1] == later - 2).mean(axis=(0, 2)),
         "previous and next are swapped: it compares query t with t - 1; query t's next position is t + 1"),
        (0, (best == np.roll(t, 1)).mean(axis=(0, 2)),
         "compares query 0 with position T - 1: np.roll wraps around, so the first query gets the last position "
         "as its neighbour; count only the queries t >= 1, which have a previous position"),
        (1, (best == np.roll(t, -1)).mean(axis=(0, 2)),
         "compares the last query with position 0: np.roll wraps around, so query T - 1 gets the first position "
         "as its neighbour; count only the queries t <= T - 2, which have a next position"),
        (2, np.array([(best[:, i][not_marked] == np.broadcast_to(marker[:, None], (n, T))[not_marked]).mean()
                      for i in range(best.shape[1])]),
         "leaves out the queries at the marked position itself; the question counts all queries, the marked "
         "one included (it too can peak on the marked position)"),
        (2, (best == t).mean(axis=(0, 2)),
         "compares each row's peak with its own query position (the diagonal); compare it with the sequence's "
         "marked position, marker[b], the same for every query of sequence b"),
        (2, (best == marker[0]).mean(axis=(0, 2)),
         "uses sequence 0's marked position for every sequence; each sequence has its own, marker[b]"),
        (0, weights[:, :, later, later - 1].mean(axis=(0, 2)), "holds mean weights; count argmaxes"),
        (1, weights[:, :, later - 1, later].mean(axis=(0, 2)), "holds mean weights; count argmaxes"),
        (2, on_marker.mean(axis=(0, 2)), "holds mean weights; count argmaxes"),
    ]


def _scaled(got: NDArray[Any], right: NDArray[np.float64]) -> str | None:
    """A message when every share is the right one times one factor (a wrong divisor), else ``None``."""
    with np.errstate(all="ignore"):
        ratios = np.asarray(got, dtype=np.float64)[right != 0] / right[right != 0]
    if ratios.size == 0 or not np.all(np.isfinite(ratios)) or not np.allclose(ratios, ratios[0]):
        return None
    factor = float(ratios[0])
    if np.isclose(factor, 1.0) or not same(got, factor * right):
        return None
    return (f"right pattern, but every share is {factor:.3g} times the right one: the counts are divided by the "
            "wrong number; divide each by the number of queries it was counted over, taken from weights.shape "
            "(a hard-coded n or T does this)")


def _wrong_rows(got: NDArray[Any], right: NDArray[np.float64], weights: NDArray[np.float64],
                marker: NDArray[np.int64]) -> str:
    """Every wrong row of a right-shaped answer, with the mistake where it is a known one."""
    found: dict[str, list[int]] = {}
    for row in range(3):
        if same(got[row], right[row]):
            continue
        why = next((text for r, values, text in _row_variants(weights, marker) if r == row and same(got[row], values)),
                   None)
        if why is None and row < 2 and same(got[row], right[1 - row]):
            why = ("previous and next are swapped: it holds the other neighbour's shares; query t's previous "
                   "position is t - 1, its next t + 1")
        found.setdefault(why or "not right", []).append(row)
    parts = []
    for why, rows in found.items():
        names = ", ".join(f"{r} ({_ROWS[r]})" for r in rows)
        parts.append(f"row{'s' if len(rows) > 1 else ''} {names}: {why}")
    wrong = sum(len(rows) for rows in found.values())
    rest = "" if wrong == 3 else f"; the other row{'s are' if wrong == 1 else ' is'} right"
    return "right shape (3, h), but " + "; ".join(parts) + rest
