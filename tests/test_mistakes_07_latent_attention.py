"""Lesson 07's typical mistakes, each with the diagnosis its checker must give (format in `mistake_table`).

The inputs are rebuilt exactly as the notebook builds them: section 1's hand-made layer (`latent`,
`w_q`, `w_uk`, `w_uv`) and section 4's `layer` have the same sizes, which is what makes "section 1's
weights used by mistake" a real mistake to name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id

from lessons_lib import mla
from lessons_lib.checks import Verdict
from lessons_lib.checks import latent_attention as la

# ----- the notebook's objects (sections 1 and 4) --------------------------------------------------
B, T, D, h = 1, 12, 16, 4
d_c, d_nope, d_v = 6, 4, 4
rng = np.random.default_rng(0)
x = rng.standard_normal((B, T, D))
w_dkv = rng.uniform(-1, 1, (D, d_c)) / math.sqrt(D)
w_uk = rng.uniform(-1, 1, (h, d_c, d_nope)) / math.sqrt(d_c)
w_uv = rng.uniform(-1, 1, (h, d_c, d_v)) / math.sqrt(d_c)
w_q = rng.uniform(-1, 1, (h, D, d_nope)) / math.sqrt(D)
latent = x @ w_dkv
layer = mla.LatentAttention(D, h, latent_width=d_c, rope_width=4, nope_width=d_nope, value_width=d_v, seed=1)
c = x @ layer.w_dkv

# DeepSeek-V2's constants, as in section 6
LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 60, 5120, 128, 128, 128
D_C, D_ROPE, D_NOPE, D_V = 512, 64, 128, 128
CONTEXT, BF16 = 128 * 1024, 2
CACHE = LAYERS * (D_C + D_ROPE)
COST = HEADS * 4096 * (D_C + D_ROPE)


def cache(answer: Any) -> Verdict:
    return la.check_mla_cache_elements(answer, layers=LAYERS, latent_width=D_C, rope_width=D_ROPE, kv_heads=KV_HEADS,
                                       head_dim=HEAD_DIM, nope_width=D_NOPE, value_width=D_V, context=CONTEXT,
                                       bytes_per_element=BF16)


def gqa(answer: Any) -> Verdict:
    return la.check_equivalent_kv_heads(answer, latent_width=D_C, rope_width=D_ROPE, head_dim=HEAD_DIM,
                                        kv_heads=KV_HEADS, layers=LAYERS)


def cost(answer: Any) -> Verdict:
    return la.check_absorbed_score_cost(answer, heads=HEADS, cached_tokens=4096, latent_width=D_C, nope_width=D_NOPE,
                                        rope_width=D_ROPE, layers=LAYERS, model_width=HIDDEN)


def keys(answer: Any) -> Verdict:
    return la.check_rebuilt_keys(answer, c, layer.w_uk, layer.w_uv, section_1_latent=latent, section_1_w_uk=w_uk)


def absorbed(answer: Any) -> Verdict:
    return la.check_absorbed_query_weight(answer, layer.w_q, layer.w_uk, layer.w_uv, section_1_w_q=w_q,
                                          section_1_w_uk=w_uk)


def scores(function: Any) -> Verdict:
    return la.check_latent_scores(function, x, layer.w_dkv, layer.w_q, layer.w_uk)


def rebuilt(lat: Any, up: Any) -> Any:
    return np.einsum("btc,hcn->bhtn", lat, up)


def absorb(query: Any, up: Any) -> Any:
    return np.einsum("hdn,hcn->hdc", query, up)


RIGHT_KEYS, RIGHT_ABSORBED = rebuilt(c, layer.w_uk), absorb(layer.w_q, layer.w_uk)


def right_scores(x: Any, latent: Any, w_q_absorbed: Any) -> Any:
    return np.einsum("btd,hdc->bhtc", x, w_q_absorbed) @ np.swapaxes(latent, -1, -2)[:, None]


def no_heads_axis(x: Any, latent: Any, w_q_absorbed: Any) -> Any:
    return np.einsum("btd,hdc->bhtc", x, w_q_absorbed) @ np.swapaxes(latent, -1, -2)  # (B, h, T, d_c) @ (B, d_c, S)


def reads_h(x: Any, latent: Any, w_q_absorbed: Any) -> Any:
    q_latent = np.einsum("btd,hdc->bhtc", x, w_q_absorbed).reshape(x.shape[0], h, x.shape[1], d_c)
    return q_latent @ np.swapaxes(latent, -1, -2)[:, None]


def rebuilds_keys_from_layer(x: Any, latent: Any, w_q_absorbed: Any) -> Any:
    k = np.einsum("bsc,hcn->bhsn", latent, layer.w_uk)  # the explicit route, with the notebook's layer
    return np.einsum("btd,hdn->bhtn", x, layer.w_q) @ np.swapaxes(k, -1, -2)


def changed(change: Callable[[Any], Any]) -> Callable[[Any, Any, Any], Any]:
    return lambda x, latent, w: change(right_scores(x, latent, w))


MISTAKES: list[Mistake] = [
    # ----- Your turn 1: MLA cache per token, all layers -----
    Mistake("07 YT1 MLA cache", "config's num_key_value_heads in the GQA formula",
            lambda: cache(2 * LAYERS * KV_HEADS * HEAD_DIM), "the MHA/GQA formula"),
    Mistake("07 YT1 MLA cache", "caching the rebuilt K and V",
            lambda: cache(LAYERS * KV_HEADS * (D_NOPE + D_ROPE + D_V)), "caching the rebuilt keys"),
    Mistake("07 YT1 MLA cache", "multiplied by 2 bytes of bf16", lambda: cache(CACHE * BF16),
            "If you multiplied by 2 bytes (bf16): the question counts numbers, not bytes"),
    Mistake("07 YT1 MLA cache", "latent counted once for K and once for V", lambda: cache(2 * CACHE),
            "If you counted the latent once for K and once for V"),
    Mistake("07 YT1 MLA cache", "rotary key forgotten", lambda: cache(LAYERS * D_C), "forgot the decoupled rotary key"),
    Mistake("07 YT1 MLA cache", "latent twice and rotary key forgotten", lambda: cache(2 * LAYERS * D_C),
            "counted the latent twice"),
    Mistake("07 YT1 MLA cache", "rotary key per head", lambda: cache(LAYERS * (D_C + HEADS * D_ROPE)), "once per head"),
    Mistake("07 YT1 MLA cache", "one layer only", lambda: cache(D_C + D_ROPE), "that is one layer"),
    Mistake("07 YT1 MLA cache", "the whole 128K context", lambda: cache(CONTEXT * CACHE), "whole context"),
    Mistake("07 YT1 MLA cache", "bytes of the whole context", lambda: cache(CONTEXT * CACHE * BF16),
            "bytes of the whole context"),
    Mistake("07 YT1 MLA cache", "a float from `/`", lambda: cache(CACHE * 1.0), "is a float"),
    # ----- Your turn 2: GQA equivalent -----
    Mistake("07 YT2 GQA equivalent", "K and V forgotten (factor 2)", lambda: gqa((D_C + D_ROPE) / HEAD_DIM),
            "key AND a value"),
    Mistake("07 YT2 GQA equivalent", "rotary key forgotten", lambda: gqa(D_C / (2 * HEAD_DIM)),
            "left out the rotary key"),
    Mistake("07 YT2 GQA equivalent", "ratio upside down", lambda: gqa(2 * HEAD_DIM / (D_C + D_ROPE)), "upside down"),
    Mistake("07 YT2 GQA equivalent", "config's num_key_value_heads", lambda: gqa(KV_HEADS), "num_key_value_heads"),
    Mistake("07 YT2 GQA equivalent", "counting all layers", lambda: gqa(CACHE / (2 * HEAD_DIM)), "all 60 layers"),
    Mistake("07 YT2 GQA equivalent", "rounded up to whole heads",
            lambda: gqa(math.ceil((D_C + D_ROPE) / (2 * HEAD_DIM))), "rounded to a whole number"),
    Mistake("07 YT2 GQA equivalent", "rounded too far", lambda: gqa(2.3), "more than rounding"),
    # ----- Your turn 3: absorbed score cost -----
    Mistake("07 YT3 absorbed score cost", "MACs including the absorbed query's cost (q_i W_uk^T)",
            lambda: cost(COST + HEADS * D_NOPE * D_C), "cost of forming the absorbed query"),
    Mistake("07 YT3 absorbed score cost", "MACs including the absorbed query's cost (from x)",
            lambda: cost(COST + HEADS * HIDDEN * D_C), "h x D x d_c"),
    Mistake("07 YT3 absorbed score cost", "counting all layers", lambda: cost(LAYERS * COST), "all 60 layers"),
    Mistake("07 YT3 absorbed score cost", "rotary part left out", lambda: cost(HEADS * 4096 * D_C),
            "left out the rotary part"),
    Mistake("07 YT3 absorbed score cost", "rotary dot product once for all heads",
            lambda: cost(HEADS * 4096 * D_C + 4096 * D_ROPE), "once per head"),
    Mistake("07 YT3 absorbed score cost", "one head", lambda: cost(4096 * (D_C + D_ROPE)), "that is one head"),
    Mistake("07 YT3 absorbed score cost", "the explicit width", lambda: cost(HEADS * 4096 * (D_NOPE + D_ROPE)),
            "explicit route"),
    Mistake("07 YT3 absorbed score cost", "FLOPs", lambda: cost(2 * COST), "FLOPs"),
    # ----- Your turn 4: rebuilt keys -----
    Mistake("07 YT4 rebuilt keys", "section 1's w_uk", lambda: keys(rebuilt(c, w_uk)), "section 1's `w_uk`"),
    Mistake("07 YT4 rebuilt keys", "section 1's latent", lambda: keys(rebuilt(latent, layer.w_uk)),
            "section 1's `latent`"),
    Mistake("07 YT4 rebuilt keys", "section 1's latent and w_uk", lambda: keys(rebuilt(latent, w_uk)),
            "those are section 1's keys k"),
    Mistake("07 YT4 rebuilt keys", "head 0's w_uk for every head",
            lambda: keys(np.broadcast_to((c @ layer.w_uk[0])[:, None], RIGHT_KEYS.shape)), "head 0's keys"),
    Mistake("07 YT4 rebuilt keys", "the value up-projection", lambda: keys(rebuilt(c, layer.w_uv)),
            "those are the values"),
    Mistake("07 YT4 rebuilt keys", "heads after tokens", lambda: keys(RIGHT_KEYS.transpose(0, 2, 1, 3)),
            "heads axis comes after the tokens"),
    Mistake("07 YT4 rebuilt keys", "each head's keys transposed", lambda: keys(np.swapaxes(RIGHT_KEYS, -1, -2)),
            "transposed"),
    Mistake("07 YT4 rebuilt keys", "some other array of the right shape", lambda: keys(RIGHT_KEYS * 2),
            "the shape (1, 4, 12, 4) is right but the numbers are not", named=False),
    # ----- Your turn 5: absorbed query -----
    Mistake("07 YT5 absorbed query", "section 1's w_q and w_uk (section 2's w_q_absorbed)",
            lambda: absorbed(absorb(w_q, w_uk)), "section 2's w_q_absorbed"),
    Mistake("07 YT5 absorbed query", "section 1's w_uk", lambda: absorbed(absorb(layer.w_q, w_uk)),
            "section 1's `w_uk`"),
    Mistake("07 YT5 absorbed query", "section 1's w_q", lambda: absorbed(absorb(w_q, layer.w_uk)), "section 1's `w_q`"),
    Mistake("07 YT5 absorbed query", "head 0's w_uk for every head",
            lambda: absorbed(np.einsum("hdn,cn->hdc", layer.w_q, layer.w_uk[0])), "head 0's key up-projection"),
    Mistake("07 YT5 absorbed query", "summed over heads", lambda: absorbed(RIGHT_ABSORBED.sum(0)),
            "summed over the heads"),
    Mistake("07 YT5 absorbed query", "transposed", lambda: absorbed(np.swapaxes(RIGHT_ABSORBED, -1, -2)), "transposed"),
    Mistake("07 YT5 absorbed query", "w_uv absorbed", lambda: absorbed(absorb(layer.w_q, layer.w_uv)),
            "you absorbed w_uv"),
    Mistake("07 YT5 absorbed query", "some other array of the right shape", lambda: absorbed(RIGHT_ABSORBED + 1),
            "the shape (4, 16, 6) is right but the numbers are not", named=False),
    # ----- Your turn 6: latent scores -----
    Mistake("07 YT6 latent scores", "broadcasting bug: the latent has no heads axis", lambda: scores(no_heads_axis),
            "latent[:, None]"),
    Mistake("07 YT6 latent scores", "reads the notebook's h and d_c", lambda: scores(reads_h),
            "reads the notebook's `h`, `d_c`"),
    Mistake("07 YT6 latent scores", "rebuilds keys with the notebook's layer", lambda: scores(rebuilds_keys_from_layer),
            "reads the notebook's `layer`"),
    Mistake("07 YT6 latent scores", "scaled by 1/sqrt(d_nope)", lambda: scores(changed(lambda s: s / 2.0)),
            "1/sqrt(d_nope)"),
    Mistake("07 YT6 latent scores", "scaled by 1/sqrt(d_c)", lambda: scores(changed(lambda s: s / math.sqrt(d_c))),
            "1/sqrt(d_c)"),
    Mistake("07 YT6 latent scores", "heads summed", lambda: scores(changed(lambda s: s.sum(1))),
            "summed over the heads"),
    Mistake("07 YT6 latent scores", "scores transposed", lambda: scores(changed(lambda s: np.swapaxes(s, -1, -2))),
            "transposed"),
    Mistake("07 YT6 latent scores", "returns a torch tensor for NumPy inputs",
            lambda: scores(changed(lambda s: torch.from_numpy(s))), "must return a NumPy array"),
    Mistake("07 YT6 latent scores", "returns float32", lambda: scores(changed(lambda s: s.astype(np.float32))),
            "returned float32"),
]

RIGHT: list[RightAnswer] = [
    RightAnswer("07 YT1 MLA cache", "an np.int64 count", lambda: cache(np.int64(CACHE))),
    RightAnswer("07 YT2 GQA equivalent", "2.25 as the lesson prints it", lambda: gqa(2.25)),
    RightAnswer("07 YT2 GQA equivalent", "the expression of the constants",
                lambda: gqa((D_C + D_ROPE) / (2 * HEAD_DIM))),
    RightAnswer("07 YT3 absorbed score cost", "a torch integer", lambda: cost(torch.tensor(COST))),
    RightAnswer("07 YT4 rebuilt keys", "a per-head loop, stacked", lambda: keys(
        np.stack([c @ layer.w_uk[i] for i in range(h)], axis=1))),
    RightAnswer("07 YT5 absorbed query", "a per-head loop, stacked", lambda: absorbed(
        np.stack([layer.w_q[i] @ layer.w_uk[i].T for i in range(h)]))),
    RightAnswer("07 YT6 latent scores", "an einsum in one go", lambda: scores(
        lambda x, latent, w: np.einsum("btd,hdc,bsc->bhts", x, w, latent))),
    RightAnswer("07 YT6 latent scores", "the absorbed route, by the lesson's solution", lambda: scores(right_scores)),
]


@pytest.mark.parametrize("row", MISTAKES, ids=row_id)
def test_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=row_id)
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
