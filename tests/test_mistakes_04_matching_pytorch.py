"""Typical mistakes in lesson 04 (Matching PyTorch) and the diagnosis each must get.

The Quick check's inputs are rebuilt as the notebook builds them: the cross-attention mask
``allowed = causal_mask(T=4, S=6)`` of section 3, the context lengths ``[5, 2]``, and for Your turn
4 a bias-free float64 ``nn.MultiheadAttention`` with ``D = 8``, ``h = 2`` and the query stream ``xt``
(any weights do: the checker reads them from the module). The wrong answers include the ones issue
19 lists: ``(~allowed) * -inf`` (NaN, since ``0 * -inf`` is NaN) and an anti-causal mask.
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

torch.manual_seed(0)
MHA = nn.MultiheadAttention(D, h, bias=False, batch_first=True, dtype=torch.float64)
XT = torch.from_numpy(np.random.default_rng(0).normal(size=(B, T, D)))


def mha_mask(answer: Any) -> Any:
    return lambda: checks.check_mha_mask(answer, ALLOWED)


def padding(answer: Any) -> Any:
    return lambda: checks.check_key_padding_mask(answer, LENGTHS, S, T)


def float_mask(answer: Any) -> Any:
    return lambda: checks.check_float_mask(answer, ALLOWED)


def causal(function: Any) -> Any:
    return lambda: checks.check_causal_mha(function, MHA, XT)


def blocked_future(t: int) -> torch.Tensor:
    """(t, t), True above the diagonal: the causal mask in nn.MultiheadAttention's convention."""
    return torch.ones(t, t, dtype=torch.bool).triu(1)


def right_call(m: Any, x: Any) -> Any:
    return m(x, x, x, attn_mask=blocked_future(x.shape[1]))[0]


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
    Mistake(
        "04 YT1 mha mask",
        "a causal mask built for T x T",
        mha_mask(blocked_future(T)),
        "expected shape (T, S)",
        named=False,
    ),
    # ----- Your turn 2: key_padding_mask from lengths ----------------------------------------------
    Mistake(
        "04 YT2 key padding",
        "True at the real tokens",
        padding(torch.arange(S)[None, :] < LENGTHS[:, None]),
        "inverted convention",
    ),
    Mistake(
        "04 YT2 key padding",
        "> instead of >= (off by one)",
        padding(torch.arange(S)[None, :] > LENGTHS[:, None]),
        "off by one",
    ),
    Mistake(
        "04 YT2 key padding",
        "the last real token marked too",
        padding(torch.arange(S)[None, :] >= LENGTHS[:, None] - 1),
        "off by one",
    ),
    Mistake(
        "04 YT2 key padding",
        "transposed, (S, B)",
        padding((torch.arange(S)[None, :] >= LENGTHS[:, None]).T),
        "transposed",
    ),
    Mistake(
        "04 YT2 key padding",
        "over the T queries",
        padding(torch.arange(T)[None, :] >= LENGTHS[:, None]),
        "the mask covers the keys",
    ),
    Mistake(
        "04 YT2 key padding",
        "0/1 integers",
        padding((torch.arange(S)[None, :] >= LENGTHS[:, None]).int()),
        "expected booleans",
    ),
    # ----- Your turn 3: the float mask ---------------------------------------------------------------
    Mistake(
        "04 YT3 float mask", "(~allowed) * -inf: NaN where allowed", float_mask((~ALLOWED) * INF), "0 * -inf is NaN"
    ),
    Mistake("04 YT3 float mask", "allowed * -inf: NaN and -inf swapped", float_mask(ALLOWED * INF), "0 * -inf is NaN"),
    Mistake("04 YT3 float mask", "0/1 numbers", float_mask(ALLOWED.double()), "block nothing"),
    Mistake(
        "04 YT3 float mask", "-inf where allowed", float_mask(torch.zeros(T, S).masked_fill(ALLOWED, INF)), "inverted"
    ),
    Mistake(
        "04 YT3 float mask",
        "+inf where blocked",
        float_mask(torch.zeros(T, S).masked_fill(~ALLOWED, float("inf"))),
        "sign is flipped",
    ),
    Mistake(
        "04 YT3 float mask",
        "a penalty of -10",
        float_mask(torch.zeros(T, S).masked_fill(~ALLOWED, -10.0)),
        "only lowers those scores",
    ),
    Mistake(
        "04 YT3 float mask",
        "anti-causal",
        float_mask(torch.zeros(T, S).masked_fill(COLS < ROWS + (S - T), INF)),
        "anti-causal",
    ),
    Mistake("04 YT3 float mask", "a boolean mask", float_mask(~ALLOWED), "this is a boolean mask"),
    # ----- Your turn 4: calling nn.MultiheadAttention causally ---------------------------------------
    Mistake("04 YT4 causal mha", "no mask", causal(lambda m, x: m(x, x, x)[0]), "no mask"),
    Mistake(
        "04 YT4 causal mha",
        "our mask, not inverted",
        causal(lambda m, x: m(x, x, x, attn_mask=mha_torch.causal_mask(x.shape[1]))[0]),
        "inverted convention",
    ),
    Mistake(
        "04 YT4 causal mha",
        "anti-causal: tril and triu swapped",
        causal(lambda m, x: m(x, x, x, attn_mask=blocked_future(x.shape[1]).T)[0]),
        "anti-causal",
    ),
    Mistake(
        "04 YT4 causal mha",
        "the diagonal blocked too",
        causal(lambda m, x: m(x, x, x, attn_mask=~blocked_future(x.shape[1]).T)[0]),
        "diagonal is blocked",
    ),
    Mistake(
        "04 YT4 causal mha", "is_causal=True alone", causal(lambda m, x: m(x, x, x, is_causal=True)[0]), "only a hint"
    ),
    Mistake(
        "04 YT4 causal mha",
        "the pair returned",
        causal(lambda m, x: m(x, x, x, attn_mask=blocked_future(x.shape[1]))),
        "returned a tuple",
    ),
    Mistake(
        "04 YT4 causal mha",
        "the weights returned",
        causal(lambda m, x: m(x, x, x, attn_mask=blocked_future(x.shape[1]), average_attn_weights=False)[1]),
        "looks like the attention weights",
    ),
    Mistake(
        "04 YT4 causal mha",
        "the lesson's T = 4 hard-coded",
        causal(lambda m, x: m(x, x, x, attn_mask=blocked_future(4))[0]),
        "take every size from x itself",
    ),
    Mistake(
        "04 YT4 causal mha",
        "a NumPy array returned",
        causal(lambda m, x: right_call(m, x).detach().numpy()),
        "must return a torch tensor",
    ),
    Mistake(
        "04 YT4 causal mha", "cast to float32", causal(lambda m, x: right_call(m, x).float()), "returned torch.float32"
    ),
]

RIGHT: list[RightAnswer] = [
    RightAnswer("04 YT1 mha mask", "~allowed", mha_mask(~ALLOWED)),
    RightAnswer("04 YT1 mha mask", "a NumPy boolean array", mha_mask(~ALLOWED.numpy())),
    RightAnswer("04 YT1 mha mask", "an additive 0 / -inf mask", mha_mask(torch.zeros(T, S).masked_fill(~ALLOWED, INF))),
    RightAnswer("04 YT2 key padding", "from lengths", padding(torch.arange(S)[None, :] >= LENGTHS[:, None])),
    RightAnswer(
        "04 YT2 key padding", "typed by hand", padding(torch.tensor([[0, 0, 0, 0, 0, 1], [0, 0, 1, 1, 1, 1]]).bool())
    ),
    RightAnswer("04 YT3 float mask", "masked_fill with -inf", float_mask(torch.zeros(T, S).masked_fill(~ALLOWED, INF))),
    RightAnswer("04 YT3 float mask", "torch.where with -inf in float32", float_mask(torch.where(ALLOWED, 0.0, INF))),
    RightAnswer("04 YT3 float mask", "-1e9 (with the caveat)", float_mask(torch.where(ALLOWED, 0.0, -1e9))),
    RightAnswer("04 YT4 causal mha", "the inverted causal mask", causal(right_call)),
    RightAnswer(
        "04 YT4 causal mha",
        "the mask plus the is_causal hint",
        causal(lambda m, x: m(x, x, x, attn_mask=blocked_future(x.shape[1]), is_causal=True)[0]),
    ),
    RightAnswer(
        "04 YT4 causal mha",
        "a float mask",
        causal(
            lambda m, x: m(
                x,
                x,
                x,
                attn_mask=torch.zeros(x.shape[1], x.shape[1], dtype=x.dtype).masked_fill(
                    blocked_future(x.shape[1]), INF
                ),
            )[0]
        ),
    ),
]


@pytest.mark.parametrize("row", MISTAKES, ids=[row_id(row) for row in MISTAKES])
def test_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=[row_id(row) for row in RIGHT])
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
