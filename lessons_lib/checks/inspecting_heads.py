"""Quick check of the lesson "Inspecting heads" (checkers in ``lessons_lib.checks.inspecting_heads``).

Each checker recognises the usual wrong answers and says what went wrong. `check_weight_entries`
is shared with ``lessons_lib.checks.efficient_attention``, which asks the same question.

Notation: ``B`` batch, ``h`` heads, ``T`` queries, ``S`` source positions, ``D`` model width,
``d_h = D / h``. NumPy only; torch tensors are accepted too.
"""

from __future__ import annotations

from typing import Any

from lessons_lib.checks import (
    Verdict,
    array_answer,
    failed,
    first_match,
    int_answer,
    passed,
    reference_array,
    same,
)
from lessons_lib.validation import check_int, head_width

__all__ = ["check_head_columns", "check_head_count", "check_score_multiplies", "check_weight_entries"]


def check_weight_entries(answer: Any, *, B: int, h: int, T: int, S: int) -> Verdict:
    """Question "weight entries": a materialised weight tensor ``(B, h, T, S)`` has ``B*h*T*S`` entries.

    Recognises: heads left out, batch left out, ``T * T`` or ``S * S`` used for ``T * S``, and
    bytes (float32 or float64) given instead of entries.
    """
    question = "weight entries"
    B, h, T, S = (check_int(name, value) for name, value in (("B", B), ("h", h), ("T", T), ("S", S)))
    n = int_answer(question, answer, "B * h * T * S")
    if isinstance(n, Verdict):
        return n
    right = B * h * T * S
    if n == right:
        return passed(question, f"B*h*T*S = {B}*{h}*{T}*{S} = {right} entries: one (T, S) map per head and sequence")
    mistake = first_match(n, [
        (B * T * S, "you left out the heads: B*T*S counts one map per sequence, but every head stores its "
                    "own (T, S) map, so multiply by h"),
        (h * T * S, "you left out the batch: h*T*S counts the maps of one sequence; each of the B "
                    "sequences has its own maps"),
        (B * h * T * T, f"you used T twice: the maps are (T, S), queries by source positions, and the "
                        f"key axis has S = {S} positions"),
        (B * h * S * S, f"you used S twice: the maps are (T, S), and the query axis has T = {T} positions"),
        (4 * right, "that is bytes in float32; the question asks for entries (divide by 4)"),
        (8 * right, "that is bytes in float64; the question asks for entries (divide by 8)"),
    ])
    return failed(question, mistake or f"{n} is not it: the weights have shape (B, h, T, S); "
                                       f"expected B * h * T * S, the product of the four sizes")


def check_head_count(answer: Any, D: int, d_h: int) -> Verdict:
    """Question "head count": which ``h`` gives heads of width ``d_h`` for model width ``D``? (``D / d_h``)"""
    question = "head count"
    D, d_h = check_int("D", D, symbol="D"), check_int("d_h", d_h)
    if D % d_h != 0:
        raise ValueError(f"d_h={d_h} must divide D={D} for this question to have an answer")
    n = int_answer(question, answer, "D // d_h")
    if isinstance(n, Verdict):
        return n
    right = D // d_h
    if n == right:
        return passed(question, f"h = D / d_h = {D} / {d_h} = {right}")
    if n <= 0:
        return failed(question, f"h must be a positive number of heads, got {n}")
    if D % n != 0:
        return failed(
            question,
            f"h={n} does not divide D={D}: the heads would not all have the same width (D % h = {D % n})",
        )
    if n == d_h:
        return failed(question, f"{n} is the head width d_h; the number of heads is h = D / d_h")
    return failed(question, f"with h={n} each head would be d_h = {D // n} wide, not {d_h}; use h = D / d_h")


def check_head_columns(answer: Any, wq: Any, head: int, heads: int) -> Verdict:
    """Question "head columns": which part of ``wq (D, D)`` (in, out) belongs to ``head``?
    (columns ``head*d_h:(head+1)*d_h``)"""
    question = "head columns"
    w = reference_array("wq", wq, "(D, D)", rank=2)
    d_h = head_width(w.shape[1], heads)
    head = check_int("head", head, low=0, high=heads - 1)
    got = array_answer(question, answer, "wq[:, head*d_h:(head+1)*d_h]")
    if isinstance(got, Verdict):
        return got
    start, stop = head * d_h, (head + 1) * d_h
    right = w[:, start:stop]
    if same(got, right):
        return passed(question, f"wq[:, {start}:{stop}]: all D input rows, the head's d_h columns")
    candidates = [
        (w[start:stop, :], "those are rows: rows index the input features, which every head reads; a head "
                           "owns columns (its outputs) of an (in, out) matrix"),
        (right.T, "right numbers, transposed: keep the (D, d_h) layout of an (in, out) matrix"),
        (w[:, head::heads], "every h-th column is how the direct reshape would read it; a head owns one "
                            "contiguous block of d_h columns"),
    ]
    candidates += [
        (w[:, other * d_h : (other + 1) * d_h],
         f"that is the block of head {other}; head {head} starts at column head*d_h = {start}")
        for other in (head - 1, head + 1)
        if 0 <= other < heads
    ]
    mistake = first_match(got, candidates)
    return failed(
        question,
        mistake or f"expected shape (D, d_h) = ({w.shape[0]}, {d_h}): wq[:, head*d_h:(head+1)*d_h]; got {got.shape}",
    )


def check_score_multiplies(answer: Any, B: int, T: int, S: int, D: int, h: int) -> Verdict:
    """Question "score multiplies": multiplications to form every head's scores ``q @ k^T``?
    (``B*h*T*S*d_h = B*T*S*D``)"""
    question = "score multiplies"
    d_h = head_width(D, h)
    B, T, S = (check_int(name, value) for name, value in (("B", B), ("T", T), ("S", S)))
    n = int_answer(question, answer, "B * h * T * S * d_h")
    if isinstance(n, Verdict):
        return n
    right = B * h * T * S * d_h
    if n == right:
        return passed(question, f"B*h*T*S*d_h = B*T*S*D = {right}: set by the total head width D, not by h")
    mistake = first_match(n, [
        (B * h * T * S * D, "each head's dot products are d_h long, not D long: use d_h = D / h"),
        (B * T * S * d_h, "that counts one head; all h heads compute their scores"),
        (B * h * T * S, "that is the number of scores (weight entries); each score is a d_h-long dot product"),
    ])
    return failed(question, mistake or f"{n} is not it: each of the B*h*T*S scores is a dot product of length d_h")
