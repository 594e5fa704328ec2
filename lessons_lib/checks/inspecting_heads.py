"""Quick check for lesson 04 (inspecting heads). NumPy only; torch tensors are accepted too.

Each checker recognises the usual wrong answers and says what went wrong.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lessons_lib.checks import Verdict, as_numpy, failed, passed
from lessons_lib.validation import check_layer_sizes

__all__ = ["check_weight_entries", "check_head_count", "check_head_columns", "check_score_multiplies"]


def _as_int(question: str, answer: Any) -> int | Verdict:
    value = as_numpy(answer)
    if value.ndim != 0 or not np.issubdtype(value.dtype, np.number) or value != np.round(value):
        return failed(question, f"answer with one whole number, got {answer!r}")
    return int(value)


def check_weight_entries(answer: Any, B: int, h: int, T: int, S: int) -> Verdict:
    """How many numbers does a materialised attention-weight tensor hold? (``B*h*T*S``)"""
    q = "weight entries"
    n = _as_int(q, answer)
    if isinstance(n, Verdict):
        return n
    right = B * h * T * S
    if n == right:
        return passed(q, f"B*h*T*S = {B}*{h}*{T}*{S} = {right}: one (T, S) map per head and sequence")
    wrong = {
        B * T * S: "B*T*S counts one map per sequence; every head stores its own map, so multiply by h",
        h * T * S: "h*T*S forgets the batch: each of the B sequences has its own maps",
        B * h * T * T: "B*h*T*T squares the query length; the maps are (T, S): queries by source positions",
    }
    if n in wrong:
        return failed(q, wrong[n])
    return failed(q, f"{n} is not it: the weights have shape (B, h, T, S); multiply the four sizes")


def check_head_count(answer: Any, D: int, d_h: int) -> Verdict:
    """Which ``h`` gives heads of width ``d_h`` for model width ``D``? (``D / d_h``)"""
    q = "head count"
    check_layer_sizes(D, 1)
    if D % d_h != 0:
        raise ValueError(f"d_h={d_h} must divide D={D} for this question to have an answer")
    n = _as_int(q, answer)
    if isinstance(n, Verdict):
        return n
    right = D // d_h
    if n == right:
        return passed(q, f"h = D / d_h = {D} / {d_h} = {right}")
    if n <= 0:
        return failed(q, f"h must be a positive number of heads, got {n}")
    if D % n != 0:
        return failed(
            q, f"h={n} does not divide D={D}: the heads would not all have the same width (D % h = {D % n})"
        )
    if n == d_h and d_h != right:
        return failed(q, f"{n} is the head width d_h; the number of heads is h = D / d_h")
    return failed(q, f"with h={n} each head would be d_h = {D // n} wide, not {d_h}; use h = D / d_h")


def check_head_columns(answer: Any, wq: Any, head: int, heads: int) -> Verdict:
    """Which part of ``wq (D, D)`` (in, out) belongs to ``head``? (columns ``head*d_h:(head+1)*d_h``)"""
    q = "head columns"
    w = as_numpy(wq)
    D = w.shape[1]
    check_layer_sizes(D, heads)
    d_h = D // heads
    got = as_numpy(answer)
    right = w[:, head * d_h : (head + 1) * d_h]
    if got.shape == right.shape and np.allclose(got, right):
        return passed(q, f"wq[:, {head * d_h}:{(head + 1) * d_h}]: all D input rows, the head's d_h columns")
    candidates = {
        "rows": (w[head * d_h : (head + 1) * d_h, :], "those are rows: rows index the input features, "
                 "which every head reads; a head owns columns (its outputs) of an (in, out) matrix"),
        "transposed": (right.T, "right numbers, transposed: keep the (D, d_h) layout of an (in, out) matrix"),
        "strided": (w[:, head::heads], "every h-th column is how the direct reshape would read it; a "
                    "head owns one contiguous block of d_h columns"),
    }
    for other in (head - 1, head + 1):
        if 0 <= other < heads:
            candidates[f"head {other}"] = (
                w[:, other * d_h : (other + 1) * d_h],
                f"that is the block of head {other}; head {head} starts at column head*d_h = {head * d_h}",
            )
    for block, message in candidates.values():
        if got.shape == block.shape and np.allclose(got, block):
            return failed(q, message)
    return failed(q, f"expected shape (D, d_h) = ({w.shape[0]}, {d_h}): wq[:, head*d_h:(head+1)*d_h]; got {got.shape}")


def check_score_multiplies(answer: Any, B: int, T: int, S: int, D: int, h: int) -> Verdict:
    """Multiplications to form every head's scores ``q @ k^T``? (``B*h*T*S*d_h = B*T*S*D``)"""
    q = "score multiplies"
    check_layer_sizes(D, h)
    n = _as_int(q, answer)
    if isinstance(n, Verdict):
        return n
    d_h = D // h
    right = B * h * T * S * d_h
    if n == right:
        return passed(q, f"B*h*T*S*d_h = B*T*S*D = {right}: set by the total head width D, not by h")
    wrong = {
        B * h * T * S * D: "each head's dot products are d_h long, not D long: use d_h = D / h",
        B * T * S * d_h: "that counts one head; all h heads compute their scores",
        B * h * T * S: "that is the number of scores (weight entries); each score is a d_h-long dot product",
    }
    if n in wrong:
        return failed(q, wrong[n])
    return failed(q, f"{n} is not it: each of the B*h*T*S scores is a dot product of length d_h")
