"""Typical mistakes in lesson 04 (Matching PyTorch) and the diagnosis each must get.

The exercises' inputs are rebuilt as the notebook builds them: the cross-attention mask
``allowed = causal_mask(T=4, S=6)`` of section 3 (a torch tensor), the context lengths ``[5, 2]``,
and for Your turn 4 a bias-free float64 ``nn.MultiheadAttention`` with ``D = 8``, ``h = 2``, the
``S - T = 2`` cached tokens ``past`` and the ``T = 4`` new tokens ``new`` (any weights do: the
checker reads them from the module). The wrong answers include the ones issues 19 and 27 list:
``(~allowed) * -inf`` (NaN, since ``0 * -inf`` is NaN), an anti-causal mask, penalties judged by
their effect rather than their magnitude, a NumPy array where PyTorch wants a tensor, sizes and
layers taken from the notebook instead of the arguments.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id
from torch import nn

from lessons_lib import mha_torch
from lessons_lib.checks import matching_pytorch as checks

B, T, S, D, h = 2, 4, 6, 8, 2
ALLOWED = mha_torch.causal_mask(T, S)  # (T, S), True = may attend, bottom-right aligned
LENGTHS = torch.tensor([5, 2])
ROWS, COLS = torch.meshgrid(torch.arange(T), torch.arange(S), indexing="ij")
INF = float("-inf")
POSITIONS = torch.arange(S)[None, :]  # (1, S)
REAL = POSITIONS < LENGTHS[:, None]  # (B, S), True = a real token
MAY = ALLOWED[None, None] & REAL[:, None, None, :]  # (B, 1, T, S): the right combined pattern

torch.manual_seed(0)
MHA = nn.MultiheadAttention(D, h, bias=False, batch_first=True, dtype=torch.float64)
_EVERYTHING = torch.from_numpy(np.random.default_rng(0).normal(size=(B, S, D)))
PAST, NEW = _EVERYTHING[:, : S - T], _EVERYTHING[:, S - T :]


def mha_mask(answer: Any) -> Any:
    return lambda: checks.check_mha_mask(answer, ALLOWED)


def padding(function: Any) -> Any:
    """Your turn 2 asks for a function ``padding_mask(lengths, S) -> (B, S)``."""
    return lambda: checks.check_key_padding_function(function, LENGTHS, S, T)


def positions(s: int) -> torch.Tensor:
    return torch.arange(s)[None, :]  # (1, S)


def float_mask(answer: Any) -> Any:
    return lambda: checks.check_float_mask(answer, ALLOWED, LENGTHS)


def cached(function: Any) -> Any:
    return lambda: checks.check_cached_causal_mha(function, MHA, PAST, NEW)


def additive(may_attend: torch.Tensor, fill: float = INF, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.zeros(may_attend.shape, dtype=dtype).masked_fill(~may_attend, fill)


def future(t: int, s: int) -> torch.Tensor:
    """(t, s), True where a new token would see a later one: the bottom-right causal mask, blocked side."""
    return torch.ones(t, s, dtype=torch.bool).triu(diagonal=s - t + 1)


def keys(past: Any, new: Any) -> Any:
    return torch.cat([past, new], dim=1)


def right_call(m: Any, past: Any, new: Any) -> Any:
    everything = keys(past, new)
    return m(new, everything, everything, attn_mask=future(new.shape[1], everything.shape[1]))[0]


def call_with(mask_of: Any, **extra: Any) -> Any:
    """A learner's function: the keys are past and new together, the mask ``mask_of(T, S)``."""

    def function(m: Any, past: Any, new: Any) -> Any:
        everything = keys(past, new)
        return m(new, everything, everything, attn_mask=mask_of(new.shape[1], everything.shape[1]), **extra)[0]

    return function


MISTAKES: list[Mistake] = [
    # ----- Your turn 1: the attn_mask of nn.MultiheadAttention -----------------------------------
    Mistake("04 YT1 mha mask", "allowed itself (SDPA's convention)", mha_mask(ALLOWED), "inverted convention"),
    Mistake("04 YT1 mha mask", "the mask transposed", mha_mask(~ALLOWED.T), "transposed"),
    Mistake("04 YT1 mha mask", "anti-causal: the past blocked", mha_mask(COLS < ROWS + (S - T)), "anti-causal"),
    Mistake(
        "04 YT1 mha mask",
        "SDPA's top-left triangle",
        mha_mask(~torch.ones(T, S, dtype=torch.bool).tril()),
        "top-left alignment",
    ),
    Mistake("04 YT1 mha mask", "0/1 numbers instead of booleans", mha_mask(ALLOWED.double()), "block nothing"),
    Mistake("04 YT1 mha mask", "(~allowed) * -inf: NaN where allowed", mha_mask((~ALLOWED) * INF), "0 * -inf is NaN"),
    Mistake(
        "04 YT1 mha mask",
        "inverted additive mask",
        mha_mask(torch.zeros(T, S).masked_fill(ALLOWED, INF)),
        "inverted additive mask",
    ),
    Mistake("04 YT1 mha mask", "a causal mask built for T x T", mha_mask(~mha_torch.causal_mask(T)), "square (T, T)"),
    Mistake(
        "04 YT1 mha mask",
        "generate_square_subsequent_mask(T)",
        mha_mask(nn.Transformer.generate_square_subsequent_mask(T)),
        "square (T, T)",
    ),
    Mistake("04 YT1 mha mask", "a NumPy array", mha_mask((~ALLOWED).numpy()), "NumPy array"),
    Mistake(
        "04 YT1 mha mask",
        "top-left, in the blocked form triu(ones(T, S), 1)",
        mha_mask(torch.ones(T, S, dtype=torch.bool).triu(diagonal=1)),
        "your mask blocks triu(ones(T, S), diagonal=1)",
    ),
    Mistake(
        "04 YT1 mha mask", "(~allowed)[None]: (1, T, S)", mha_mask((~ALLOWED)[None]), "extra leading axis of size 1"
    ),
    Mistake(
        "04 YT1 mha mask",
        "the (B * h, T, S) form",
        mha_mask((~ALLOWED).expand(B * h, T, S)),
        "also valid for nn.MultiheadAttention (every (T, S) slice is the right mask), but this question asks",
    ),
    Mistake("04 YT1 mha mask", "integers 0/1", mha_mask((~ALLOWED).int()), "dtype int32"),
    Mistake(
        "04 YT1 mha mask",
        "a right additive 0 / -inf mask: a float, not a boolean",
        mha_mask(additive(ALLOWED, dtype=torch.float32)),
        "asks for a boolean mask",
    ),
    Mistake(
        "04 YT1 mha mask",
        "a right additive mask with -1e4",
        mha_mask(additive(ALLOWED, -1e4)),
        "asks for a boolean mask",
    ),
    Mistake(
        "04 YT1 mha mask", "a penalty of -10 as a float mask", mha_mask(additive(ALLOWED, -10.0)), "penalty of -10"
    ),
    # ----- Your turn 2: key_padding_mask from lengths, a function of lengths and S --------------------
    Mistake(
        "04 YT2 key padding",
        "True at the real tokens",
        padding(lambda n, s: positions(s) < n[:, None]),
        "inverted convention",
    ),
    Mistake(
        "04 YT2 key padding",
        "> instead of >= (off by one)",
        padding(lambda n, s: positions(s) > n[:, None]),
        "off by one",
    ),
    Mistake(
        "04 YT2 key padding",
        "the last real token marked too",
        padding(lambda n, s: positions(s) >= n[:, None] - 1),
        "off by one",
    ),
    Mistake(
        "04 YT2 key padding", "transposed, (S, B)", padding(lambda n, s: (positions(s) >= n[:, None]).T), "transposed"
    ),
    Mistake(
        "04 YT2 key padding",
        "over the T queries",
        padding(lambda n, s: torch.arange(T)[None, :] >= n[:, None]),
        "the mask covers the keys",
    ),
    Mistake(
        "04 YT2 key padding",
        "0/1 integers",
        padding(lambda n, s: (positions(s) >= n[:, None]).int()),
        "expected booleans",
    ),
    Mistake(
        "04 YT2 key padding",
        "an additive mask instead of booleans",
        padding(lambda n, s: torch.zeros(len(n), s).masked_fill(positions(s) >= n[:, None], INF)),
        "expected booleans",
    ),
    Mistake(
        "04 YT2 key padding",
        "a NumPy array",
        padding(lambda n, s: np.arange(s)[None, :] >= n.numpy()[:, None]),
        "NumPy array",
    ),
    Mistake(
        "04 YT2 key padding",
        "section 6's hand-typed padding (lengths 6, 4)",
        padding(lambda n, s: torch.tensor([[False] * 6, [False] * 4 + [True] * 2])),
        "wrong lengths",
    ),
    Mistake(
        "04 YT2 key padding",
        "the lesson's mask typed by hand: one batch only",
        padding(lambda n, s: torch.tensor([[False] * 5 + [True], [False] * 2 + [True] * 4])),
        "so that it serves any batch",
    ),
    Mistake(
        "04 YT2 key padding",
        "the notebook's S instead of the argument",
        padding(lambda n, s: positions(S) >= n[:, None]),
        "compute the mask from the lengths and S the function is given",
    ),
    Mistake(
        "04 YT2 key padding",
        "the value instead of the function",
        padding(positions(S) >= LENGTHS[:, None]),
        "expected a function",
    ),
    Mistake("04 YT2 key padding", "no return", padding(lambda n, s: print(n)), "is a `return` missing"),
    # ----- Your turn 3: the combined float mask for SDPA -----------------------------------------------
    Mistake("04 YT3 float mask", "(~may) * -inf: NaN where allowed", float_mask((~MAY) * INF), "0 * -inf is NaN"),
    Mistake("04 YT3 float mask", "0/1 numbers", float_mask(MAY.double()), "0s and 1s"),
    Mistake("04 YT3 float mask", "-inf where allowed", float_mask(additive(~MAY)), "-inf where it is allowed"),
    Mistake(
        "04 YT3 float mask",
        "(1, B, T, S): batch and heads swapped",
        float_mask(additive(MAY).transpose(0, 1)),
        "batch and heads axes are swapped",
    ),
    Mistake(
        "04 YT3 float mask",
        "+inf where blocked",
        float_mask(torch.zeros(B, 1, T, S).masked_fill(~MAY, float("inf"))),
        "sign is flipped",
    ),
    Mistake("04 YT3 float mask", "a penalty of -10", float_mask(additive(MAY, -10.0)), "keeps some weight"),
    Mistake(
        "04 YT3 float mask",
        "a penalty of -100 in float32",
        float_mask(additive(MAY, -100.0, torch.float32)),
        "keeps some weight",
    ),
    Mistake(
        "04 YT3 float mask",
        "a penalty of -110 in float32",
        float_mask(additive(MAY, -110.0, torch.float32)),
        "blocks only while the scores are close",
    ),
    Mistake("04 YT3 float mask", "a boolean mask", float_mask(MAY), "this is a boolean mask"),
    Mistake(
        "04 YT3 float mask",
        "the causal part only",
        float_mask(additive(ALLOWED.expand(B, 1, T, S))),
        "only the causal part",
    ),
    Mistake("04 YT3 float mask", "the causal part only, (T, S)", float_mask(additive(ALLOWED)), "holds no padding"),
    Mistake(
        "04 YT3 float mask",
        "the padding part only",
        float_mask(additive(REAL[:, None, None, :])),
        "only the padding part",
    ),
    Mistake("04 YT3 float mask", "(B, T, S): no heads axis", float_mask(additive(MAY[:, 0])), "heads axis"),
    Mistake(
        "04 YT3 float mask",
        "padding inverted",
        float_mask(additive(ALLOWED & ~REAL[:, None, None, :])),
        "padding part is inverted",
    ),
    Mistake(
        "04 YT3 float mask",
        "causal part inverted",
        float_mask(additive(~ALLOWED & REAL[:, None, None, :])),
        "causal part is inverted",
    ),
    Mistake(
        "04 YT3 float mask",
        "padding off by one (>)",
        float_mask(additive(ALLOWED & (POSITIONS <= LENGTHS[:, None])[:, None, None, :])),
        "off by one",
    ),
    Mistake(
        "04 YT3 float mask",
        "top-left causal part",
        float_mask(additive(torch.ones(T, S, dtype=torch.bool).tril() & REAL[:, None, None, :])),
        "top-left alignment",
    ),
    Mistake(
        "04 YT3 float mask",
        "section 6's hand-typed padding (lengths 6, 4)",
        float_mask(
            additive(ALLOWED & torch.tensor([[False] * 6, [False] * 4 + [True] * 2])[:, None, None, :].logical_not())
        ),
        "wrong lengths",
    ),
    Mistake("04 YT3 float mask", "a NumPy array", float_mask(additive(MAY).numpy()), "NumPy array"),
    Mistake(
        "04 YT3 float mask",
        "[:, :, None]: (B, T, 1, S), heads axis misplaced",
        float_mask(additive(ALLOWED[None] & REAL[:, None, :])[:, :, None]),
        "the axis of size 1 is in the third place",
    ),
    Mistake(
        "04 YT3 float mask",
        "float16 (SDPA refuses it with float64 queries)",
        float_mask(additive(MAY, torch.finfo(torch.float16).min, torch.float16)),
        "the mask is float16: SDPA takes a float mask only in float32",
    ),
    Mistake(
        "04 YT3 float mask",
        "-inf in float16",
        float_mask(additive(MAY, INF, torch.float16)),
        "the mask is float16",
    ),
    Mistake(
        "04 YT3 float mask",
        "expanded over h = 2 heads",
        float_mask(additive(MAY.expand(B, h, T, S))),
        "second axis must have size 1",
    ),
    # ----- Your turn 4: T new tokens after S - T cached ones ----------------------------------------
    Mistake(
        "04 YT4 cached causal",
        "the past left out",
        cached(lambda m, p, x: m(x, x, x, attn_mask=future(x.shape[1], x.shape[1]))[0]),
        "past is missing",
    ),
    Mistake("04 YT4 cached causal", "no mask", cached(lambda m, p, x: m(x, keys(p, x), keys(p, x))[0]), "no mask"),
    Mistake(
        "04 YT4 cached causal",
        "top-left: tril(ones(T, S)) inverted",
        cached(call_with(lambda t, s: ~torch.ones(t, s, dtype=torch.bool).tril())),
        "top-left alignment",
    ),
    Mistake(
        "04 YT4 cached causal",
        "our causal_mask(T, S), not inverted",
        cached(call_with(mha_torch.causal_mask)),
        "inverted convention",
    ),
    Mistake(
        "04 YT4 cached causal",
        "anti-causal",
        cached(call_with(lambda t, s: torch.ones(t, s, dtype=torch.bool).tril(diagonal=s - t - 1))),
        "anti-causal",
    ),
    Mistake(
        "04 YT4 cached causal",
        "the diagonal blocked",
        cached(call_with(lambda t, s: torch.ones(t, s, dtype=torch.bool).triu(diagonal=s - t))),
        "diagonal is blocked",
    ),
    Mistake(
        "04 YT4 cached causal",
        "new before past",
        cached(lambda m, p, x: m(x, keys(x, p), keys(x, p), attn_mask=future(x.shape[1], p.shape[1] + x.shape[1]))[0]),
        "order is swapped",
    ),
    Mistake(
        "04 YT4 cached causal",
        "all S rows returned",
        cached(
            lambda m, p, x: m(keys(p, x), keys(p, x), keys(p, x), attn_mask=future(*(2 * [p.shape[1] + x.shape[1]])))[0]
        ),
        "all S positions",
    ),
    Mistake(
        "04 YT4 cached causal",
        "is_causal=True without a mask",
        cached(lambda m, p, x: m(x, keys(p, x), keys(p, x), is_causal=True)[0]),
        "only a hint",
    ),
    Mistake(
        "04 YT4 cached causal",
        "the right mask plus is_causal=True, need_weights=False (the hint replaces the mask)",
        cached(call_with(future, is_causal=True, need_weights=False)),
        "is_causal=True replaced your mask (your mask itself is right)",
    ),
    Mistake(
        "04 YT4 cached causal",
        "the right mask and is_causal=True on the softmax path (need_weights=True): right by luck",
        cached(call_with(future, is_causal=True)),
        "is_causal=True disagrees with your mask: the hint says top-left",
    ),
    Mistake(
        "04 YT4 cached causal",
        "mask.T: (S, T)",
        cached(call_with(lambda t, s: future(t, s).T)),
        "the mask is transposed, (S, T)",
    ),
    Mistake(
        "04 YT4 cached causal",
        "torch.cat(..., dim=0)",
        cached(lambda m, p, x: m(x, torch.cat([p, x], dim=0), torch.cat([p, x], dim=0))[0]),
        "torch.cat(..., dim=0) joins past and new along the batch axis",
    ),
    Mistake(
        "04 YT4 cached causal",
        "a square (T, T) mask",
        cached(call_with(lambda t, s: future(t, t))),
        "one row per new query",
    ),
    Mistake(
        "04 YT4 cached causal",
        "the lesson's T = 4, S = 6 hard-coded",
        cached(call_with(lambda t, s: future(4, 6))),
        "take every size from past and new",
    ),
    Mistake(
        "04 YT4 cached causal",
        "the pair returned",
        cached(lambda m, p, x: m(x, keys(p, x), keys(p, x), attn_mask=future(x.shape[1], p.shape[1] + x.shape[1]))),
        "returned a tuple",
    ),
    Mistake(
        "04 YT4 cached causal",
        "the weights returned",
        cached(
            lambda m, p, x: m(
                x,
                keys(p, x),
                keys(p, x),
                attn_mask=future(x.shape[1], p.shape[1] + x.shape[1]),
                average_attn_weights=False,
            )[1]
        ),
        "looks like the attention weights",
    ),
    Mistake(
        "04 YT4 cached causal",
        "the notebook's layer instead of the argument",
        cached(lambda m, p, x: right_call(MHA, p, x)),
        "does not use the layer it is given",
    ),
    Mistake(
        "04 YT4 cached causal",
        "a NumPy array returned",
        cached(lambda m, p, x: right_call(m, p, x).detach().numpy()),
        "must return a torch tensor",
    ),
    Mistake(
        "04 YT4 cached causal",
        "cast to float32",
        cached(lambda m, p, x: right_call(m, p, x).float()),
        "returned torch.float32",
    ),
]

RIGHT: list[RightAnswer] = [
    RightAnswer("04 YT1 mha mask", "~allowed", mha_mask(~ALLOWED)),
    RightAnswer("04 YT1 mha mask", "logical_not", mha_mask(torch.logical_not(ALLOWED))),
    RightAnswer("04 YT1 mha mask", "allowed == False", mha_mask(ALLOWED == 0)),
    RightAnswer("04 YT2 key padding", "from lengths", padding(lambda n, s: positions(s) >= n[:, None])),
    RightAnswer("04 YT2 key padding", "~(positions < lengths)", padding(lambda n, s: ~(positions(s) < n[:, None]))),
    RightAnswer(
        "04 YT2 key padding",
        "a loop over the sequences",
        padding(lambda n, s: torch.stack([torch.arange(s) >= int(k) for k in n])),
    ),
    RightAnswer("04 YT3 float mask", "masked_fill with -inf", float_mask(additive(MAY))),
    RightAnswer("04 YT3 float mask", "torch.where in float32", float_mask(torch.where(MAY, 0.0, INF))),
    RightAnswer("04 YT3 float mask", "-1e9", float_mask(torch.where(MAY, 0.0, -1e9))),
    RightAnswer("04 YT3 float mask", "-1e4, BERT's penalty", float_mask(additive(MAY, -1e4, torch.float32))),
    RightAnswer("04 YT3 float mask", "finfo(float32).min", float_mask(additive(MAY, torch.finfo(torch.float32).min))),
    RightAnswer(
        "04 YT3 float mask",
        "a float (T, S) mask plus a (B, 1, 1, S) one",
        float_mask(additive(ALLOWED) + additive(REAL[:, None, None, :])),
    ),
    RightAnswer("04 YT4 cached causal", "the inverted bottom-right mask", cached(right_call)),
    RightAnswer(
        "04 YT4 cached causal", "~causal_mask(T, S)", cached(call_with(lambda t, s: ~mha_torch.causal_mask(t, s)))
    ),
    RightAnswer(
        "04 YT4 cached causal",
        "the whole sequence, then its last T rows",
        cached(
            lambda m, p, x: m(keys(p, x), keys(p, x), keys(p, x), attn_mask=future(*(2 * [p.shape[1] + x.shape[1]])))[
                0
            ][:, -x.shape[1] :]
        ),
    ),
    RightAnswer(
        "04 YT4 cached causal",
        "a float mask",
        cached(call_with(lambda t, s: additive(~future(t, s)))),
    ),
    RightAnswer(
        "04 YT4 cached causal",
        "need_weights=False",
        cached(call_with(lambda t, s: future(t, s), need_weights=False)),
    ),
]


@pytest.mark.parametrize("row", MISTAKES, ids=[row_id(row) for row in MISTAKES])
def test_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=[row_id(row) for row in RIGHT])
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)


def test_right_answers_are_described_as_given() -> None:
    """A right answer's message describes what the learner did, on the lesson's sizes (second blind trial)."""
    lesson = padding(lambda n, s: positions(s) >= n[:, None])()
    assert lesson.ok and "(B, S) = (2, 6)" in lesson.message, lesson.message
    sliced = next(row for row in RIGHT if row.answer == "the whole sequence, then its last T rows").verdict()
    assert sliced.ok and "causal self-attention over all S = 6 tokens, then its last T rows" in sliced.message
    plain = cached(right_call)()
    assert plain.ok and "bottom-right (T, S) mask" in plain.message, plain.message


@pytest.mark.parametrize("penalty, dtype", [(-1e9, torch.float64), (-1e9, torch.float32), (-1e4, torch.float32)])
def test_a_finite_penalty_is_not_told_what_a_fully_blocked_row_becomes(penalty: float, dtype: torch.dtype) -> None:
    """The Predict after Your turn 3 asks what -1e9 does to a row blocked everywhere: the check must not say."""
    verdict = float_mask(additive(MAY, penalty, dtype))()
    assert verdict.ok and "blocks these keys" in verdict.message, verdict.message
    for answer in ("blocked everywhere", "mean", "no mask", "unmasked", "float16", "apart", "NaN"):
        assert answer not in verdict.message, verdict.message
