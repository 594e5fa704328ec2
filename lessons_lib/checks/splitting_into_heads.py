"""Quick check of the lesson "Splitting into heads" (checkers in ``lessons_lib.checks.splitting_into_heads``).

Each checker returns a `Verdict`. A wrong answer is compared with the mistakes learners usually
make (a direct reshape into ``(B, h, T, d_h)``, a missing transpose, the wrong axes, an
interleaved split, cutting the input into groups) and the verdict names the one it recognises.

Notation: ``B`` batch, ``T`` tokens, ``D`` model width, ``h`` heads, ``d_h = D / h``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.checks import (
    Verdict,
    array_answer,
    failed,
    first_match,
    int_array_answer,
    number_answer,
    passed,
    same,
)

__all__ = [
    "HEAD_READS_QUESTION",
    "HEAD_WIDTH_QUESTION",
    "check_head_reads",
    "check_head_width",
    "check_split",
    "describe_label",
    "known_wrong_splits",
    "labelled_input",
]

SplitFn = Callable[[NDArray[np.float64], int], Any]

# (B, T, D, h) for the split check. T, h and d_h all differ, so a missing transpose or a swapped
# pair of axes changes the shape; two cases catch a function that hard-codes its sizes.
SPLIT_CASES: tuple[tuple[int, int, int, int], ...] = ((2, 3, 8, 2), (1, 5, 12, 3))

# Label layout: entry [b, t, f] holds 10000*b + 100*t + f, so every number says where it came from.
_BATCH_STEP = 10_000
_TOKEN_STEP = 100

HEAD_WIDTH_QUESTION = {"D": 2048, "h": 16}
HEAD_READS_QUESTION = {"D": 8, "h": 2, "head": 1}


def labelled_input(B: int, T: int, D: int) -> NDArray[np.float64]:
    """A ``(B, T, D)`` float64 array whose entry ``[b, t, f]`` is ``10000*b + 100*t + f``.

    Needs ``T < 100`` and ``D < 100`` so that the three parts of a label do not overlap.
    """
    if not (0 < T < _TOKEN_STEP and 0 < D < _TOKEN_STEP and B > 0):
        raise ValueError(f"labelled_input needs B > 0 and 0 < T, D < 100, got B={B}, T={T}, D={D}")
    b = np.arange(B)[:, None, None] * _BATCH_STEP
    t = np.arange(T)[None, :, None] * _TOKEN_STEP
    f = np.arange(D)[None, None, :]
    labels: NDArray[np.float64] = (b + t + f).astype(np.float64)
    return labels


def describe_label(value: float, B: int, T: int, D: int) -> str:
    """Read a label made by `labelled_input` back as "batch b, token t, feature f"."""
    if not np.isfinite(value):
        return f"{value!r}, which is not a number from the input"
    label = round(float(value))
    b, rest = divmod(label, _BATCH_STEP)
    t, f = divmod(rest, _TOKEN_STEP)
    if label != value or not (0 <= b < B and 0 <= t < T and 0 <= f < D):
        return f"{value!r}, which is not a number from the input"
    return f"batch {b}, token {t}, feature {f}"


def known_wrong_splits(x: NDArray[Any], heads: int) -> dict[str, tuple[NDArray[Any], str]]:
    """The usual wrong ways to split ``x (B, T, D)`` into heads: name -> (result, explanation)."""
    B, T, D = x.shape
    d_h = D // heads
    right_way = "reshape to (B, T, h, d_h), then swap axes 1 and 2: x.reshape(B, T, h, d_h).transpose(0, 2, 1, 3)"
    return {
        "direct reshape": (
            x.reshape(B, heads, T, d_h),
            "you reshaped (B, T, D) straight into (B, h, T, d_h). The shape is right but the numbers are "
            "not: the reshape reads the array in memory order, so head 0 receives whole tokens (all of "
            f"token 0, then all of token 1, ...) chopped into rows of d_h. Instead, {right_way}",
        ),
        "missing transpose": (
            x.reshape(B, T, heads, d_h),
            "you returned (B, T, h, d_h): the reshape is right but the transpose is missing, so the "
            "head axis is still behind the token axis. Move it forward with .transpose(0, 2, 1, 3) "
            "to get (B, h, T, d_h)",
        ),
        "interleaved features": (
            x.reshape(B, T, d_h, heads).transpose(0, 3, 1, 2),
            "you split the feature axis as (d_h, h) instead of (h, d_h), so head i got the interleaved "
            "features i, i + h, i + 2h, ... Head i owns the consecutive block of features "
            f"i*d_h : (i+1)*d_h. {right_way[0].upper()}{right_way[1:]}",
        ),
        "wrong axes (B, h, d_h, T)": (
            x.reshape(B, T, heads, d_h).transpose(0, 2, 3, 1),
            "you moved the axes to (B, h, d_h, T): the features ended up before the tokens. Use "
            ".transpose(0, 2, 1, 3), which only swaps the token and head axes, to get (B, h, T, d_h)",
        ),
        "wrong axes (h, B, T, d_h)": (
            x.reshape(B, T, heads, d_h).transpose(2, 0, 1, 3),
            "you moved the head axis to the very front, (h, B, T, d_h). The batch axis must stay "
            "first: use .transpose(0, 2, 1, 3) to get (B, h, T, d_h)",
        ),
    }


def _first_difference(got: NDArray[Any], want: NDArray[Any], B: int, T: int, D: int) -> str:
    """Describe the first entry where ``got`` and ``want`` (both ``(B, h, T, d_h)``) differ."""
    index = next((i for i in np.ndindex(want.shape) if not same(got[i], want[i])), None)
    if index is None:  # unreachable when `same(got, want)` is False
        return "the numbers differ"
    b, head, t, j = index
    return (
        f"at [b={b}, head={head}, t={t}, j={j}] expected {describe_label(want[index], B, T, D)} but "
        f"found {describe_label(got[index], B, T, D)}"
    )


def check_split(fn: SplitFn) -> Verdict:
    """Run ``fn(x (B, T, D), heads) -> (B, h, T, d_h)`` on labelled inputs and explain any mistake.

    ``fn`` receives a NumPy float64 array; it may return a NumPy array or a torch tensor.
    """
    question = "split"
    for B, T, D, heads in SPLIT_CASES:
        d_h = D // heads
        x = labelled_input(B, T, D)
        where = f"on x of shape (B, T, D) = {(B, T, D)} with heads={heads}"
        try:
            returned = fn(x.copy(), heads)
        except Exception as error:  # the learner's code may raise anything; report it
            return failed(question, f"{where} your function raised {type(error).__name__}: {error}")
        if returned is None:
            return failed(question, f"{where} your function returned None; return the (B, h, T, d_h) array")
        result = array_answer(question, returned, "the (B, h, T, d_h) array")
        if isinstance(result, Verdict):
            return failed(question, f"{where} {result.message}")
        want = x.reshape(B, T, heads, d_h).transpose(0, 2, 1, 3)
        if same(result, want):
            continue
        wrong = known_wrong_splits(x, heads)
        mistake = first_match(result, [(value, f"{name}: {where}, {why}") for name, (value, why) in wrong.items()])
        if mistake is not None:
            return failed(question, mistake)
        if result.shape != want.shape:
            return failed(
                question,
                f"{where} expected shape (B, h, T, d_h) = {want.shape} but got {tuple(result.shape)}",
            )
        if not same(np.sort(result, axis=None), np.sort(x, axis=None)):
            return failed(
                question,
                f"{where} the result holds different numbers from the input; a split only moves the "
                f"numbers of x into new places, it must not change them ({_first_difference(result, want, B, T, D)})",
            )
        return failed(
            question,
            f"{where} the shape is right but the numbers are not: {_first_difference(result, want, B, T, D)}",
        )
    return passed(question, "each head holds its own d_h consecutive features of every token, in (B, h, T, d_h)")


def check_head_width(d_h: Any) -> Verdict:
    """Question: a layer has ``D = 2048`` and ``h = 16``; how wide is one head (``d_h``)?"""
    question = "head width"
    D, h = HEAD_WIDTH_QUESTION["D"], HEAD_WIDTH_QUESTION["h"]
    value = number_answer(question, d_h, "D // h, one number")
    if isinstance(value, Verdict):
        return value
    if value == D // h:
        return passed(question, f"d_h = D / h = {D} / {h} = {D // h}")
    mistake = first_match(value, [
        (D * h, "you multiplied D by h; the heads share the D features, so divide: d_h = D / h"),
        (h / D, "you divided h by D; it is the other way round: d_h = D / h"),
        (D, f"{D} is D, the width of all heads together; one head gets D / h of it"),
        (h, f"{h} is h, the number of heads, not the width of one head (d_h = D / h)"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    return failed(question, f"got {d_h!r}; each of the h = {h} heads gets an equal share of the D = {D} features")


def _indices(question: str, name: str, answer: Any) -> list[int] | str:
    """Sorted unique indices from ``answer``, or what is wrong with it (prefixed by ``name``)."""
    values = int_array_answer(question, answer, "a list of integer indices, e.g. list(range(...))")
    if isinstance(values, Verdict):
        return f"{name}: {values.message}"
    return sorted({int(v) for v in values})


def check_head_reads(input_features: Iterable[int], weight_columns: Iterable[int]) -> Verdict:
    """Question: with ``D = 8`` and ``h = 2``, which input features does head 1 read, and which
    columns of ``W_q (D, D)`` (laid out ``(in, out)``) belong to head 1?
    """
    question = "head reads"
    D, h, head = HEAD_READS_QUESTION["D"], HEAD_READS_QUESTION["h"], HEAD_READS_QUESTION["head"]
    d_h = D // h
    own_block = list(range(head * d_h, (head + 1) * d_h))
    problems: list[str] = []

    inputs = _indices(question, "input_features", input_features)
    if isinstance(inputs, str):
        problems.append(inputs)
    elif inputs != list(range(D)):
        if inputs == own_block:
            problems.append(
                f"input_features: head {head} does not read only features {own_block[0]}..{own_block[-1]} of "
                f"the input. It multiplies the whole D={D}-wide input by its own columns of W_q; we split the "
                "projection's output into heads, we do not cut the input into groups"
            )
        else:
            problems.append(
                f"input_features: got {inputs}; a head's projection is x @ W_q[:, its columns], and "
                "that product uses every row of W_q, that is every input feature"
            )

    columns = _indices(question, "weight_columns", weight_columns)
    if isinstance(columns, str):
        problems.append(columns)
    elif columns != own_block:
        interleaved = list(range(head, D, h))
        if columns == interleaved:
            detail = (
                f"these are the interleaved columns {head}, {head}+h, ...; heads own consecutive "
                f"blocks of d_h={d_h} columns"
            )
        elif columns == list(range(D)):
            detail = f"all {D} columns together belong to all heads; head {head} owns d_h={d_h} of them"
        elif len(columns) == d_h and columns[0] % d_h == 0 and columns == list(range(columns[0], columns[0] + d_h)):
            detail = f"that is the block of head {columns[0] // d_h}; head i owns columns i*d_h : (i+1)*d_h"
        else:
            detail = f"head i owns the d_h={d_h} consecutive columns i*d_h : (i+1)*d_h"
        problems.append(f"weight_columns: got {columns}; {detail}")

    if problems:
        return failed(question, " | ".join(problems))
    return passed(
        question,
        f"head {head} reads all {D} input features through its own columns {own_block[0]}..{own_block[-1]} of W_q",
    )
