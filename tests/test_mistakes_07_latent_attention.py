"""Lesson 07's typical mistakes, each with the diagnosis its checker must give (format in `mistake_table`).

The inputs are rebuilt exactly as the notebook builds them: section 1's hand-made layer (`latent`,
`w_q`, `w_uk`, `w_uv`) and section 4's `layer` have the same sizes, which is what makes "section 1's
weights used by mistake" a real mistake to name.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id

from lessons_lib import mla, rope
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
                                        kv_heads=KV_HEADS, layers=LAYERS, rule_head_dim=HIDDEN // HEADS)


def cost(answer: Any) -> Verdict:
    return la.check_absorbed_score_cost(answer, heads=HEADS, cached_tokens=4096, latent_width=D_C, nope_width=D_NOPE,
                                        rope_width=D_ROPE, layers=LAYERS, model_width=HIDDEN)


def as_function(answer: Any) -> Any:
    """A function ``rebuild_keys(latent, w_uk)``: ``answer`` itself, or one that returns the array ``answer``."""
    return answer if callable(answer) else (lambda _latent, _w_uk: answer)


def keys(answer: Any) -> Verdict:  # as Your turn 1 calls it (section 1's layer, before `layer` exists)
    return la.check_rebuilt_keys(as_function(answer), latent, w_uk, w_uv)


def old_keys(answer: Any) -> Verdict:  # with the lookalikes, as the checker can still be called
    return la.check_rebuilt_keys(as_function(answer), c, layer.w_uk, layer.w_uv, section_1_latent=latent,
                                 section_1_w_uk=w_uk)


def keys_by_library(latent: Any, w_uk: Any) -> Any:
    return mla.per_head_projection(latent, w_uk)  # the library's finished version of the exercise


def keys_lesson_sizes(latent: Any, w_uk: Any) -> Any:
    return np.einsum("btc,hcn->bhtn", latent, w_uk).reshape(1, 4, 12, 4)  # the lesson's sizes typed in


def keys_lesson_sizes_reshaped(latent: Any, w_uk: Any) -> Any:
    return np.stack([latent @ w_uk[i] for i in range(w_uk.shape[0])], axis=1).reshape(1, 4, 12, 4)  # right, reshaped


def keys_lesson_sizes_filled(latent: Any, w_uk: Any) -> Any:
    out = np.zeros((1, 4, 12, 4))  # the lesson's sizes typed in: ValueError (broadcast) for other sizes
    for i in range(w_uk.shape[0]):
        out[0, i] = latent[0] @ w_uk[i]
    return out


def keys_lesson_sizes_resized(latent: Any, w_uk: Any) -> Any:
    return np.resize(np.einsum("btc,hcn->bhtn", latent, w_uk), (1, 4, 12, 4))  # no error: the wrong shape


def keys_first_sequence(latent: Any, w_uk: Any) -> Any:
    return np.stack([latent[0] @ w_uk[i] for i in range(w_uk.shape[0])])[None]  # only sequence 0


def keys_reads_notebook_h(latent: Any, w_uk: Any) -> Any:
    return np.stack([latent @ w_uk[i] for i in range(h)], axis=1)  # the notebook's h, not w_uk's


def rebuilt(lat: Any, up: Any) -> Any:
    return np.einsum("btc,hcn->bhtn", lat, up)


RIGHT_KEYS = rebuilt(latent, w_uk)


# ----- Your turn 2: scores against the latent, run-time re-association ------------------------------
def query_scores(function: Any) -> Verdict:
    return la.check_query_latent_scores(function, x, w_dkv, w_q, w_uk)


def run_time(q: Any, latent: Any, w_uk: Any) -> Any:
    return np.einsum("bhtn,hcn->bhtc", q, w_uk) @ np.swapaxes(latent, -1, -2)[:, None]


def run_time_changed(change: Callable[[Any], Any]) -> Callable[[Any, Any, Any], Any]:
    return lambda q, latent, w: change(run_time(q, latent, w))


def builds_keys_einsum(q: Any, latent: Any, w_uk: Any) -> Any:
    return q @ np.swapaxes(np.einsum("bsc,hcn->bhsn", latent, w_uk), -1, -2)


def builds_keys_matmul(q: Any, latent: Any, w_uk: Any) -> Any:
    return np.einsum("bhtn,bhsn->bhts", q, latent[:, None] @ w_uk)


def w_uk_not_transposed(q: Any, latent: Any, w_uk: Any) -> Any:
    return (q @ w_uk) @ np.swapaxes(latent, -1, -2)[:, None]


def no_return(q: Any, latent: Any, w_uk: Any) -> None:
    q_latent = np.einsum("bhtn,hcn->bhtc", q, w_uk)
    q_latent @ np.swapaxes(latent, -1, -2)[:, None]


def latent_without_heads_axis(q: Any, latent: Any, w_uk: Any) -> Any:
    return np.einsum("bhtn,hcn->bhtc", q, w_uk) @ np.swapaxes(latent, -1, -2)


def reads_notebook_d_c(q: Any, latent: Any, w_uk: Any) -> Any:
    q_latent = np.einsum("bhtn,hcn->bhtc", q, w_uk).reshape(q.shape[0], h, q.shape[2], d_c)
    return q_latent @ np.swapaxes(latent, -1, -2)[:, None]


def hard_codes_sizes(q: Any, latent: Any, w_uk: Any) -> Any:
    q_latent = np.einsum("bhtn,hcn->bhtc", q, w_uk).reshape(1, 4, 12, 6)  # the lesson's sizes typed in
    return q_latent @ np.swapaxes(latent, -1, -2)[:, None]


def calls_library(q: Any, latent: Any, w_uk: Any) -> Any:
    return mla.latent_scores(q, latent, w_uk)  # the library's finished version of the exercise


def first_sequence_latent(q: Any, latent: Any, w_uk: Any) -> Any:
    return np.einsum("bhtn,hcn->bhtc", q, w_uk) @ np.swapaxes(latent[:1], -1, -2)[:, None]


# ----- Your turn 3: absorbed decoding as multi-query attention -------------------------------------
POSITIONS = np.arange(T)
Q_LAYER, Q_ROPE_LAYER = layer.queries(x, POSITIONS)
LATENT_LAYER, ROPE_KEY_LAYER = layer.compress(x, POSITIONS)


def mqa(function: Any) -> Verdict:
    return la.check_latent_as_mqa(function, Q_LAYER, Q_ROPE_LAYER, LATENT_LAYER, ROPE_KEY_LAYER, layer.w_uk)


def mqa_right(q: Any, q_rope: Any, latent: Any, rope_key: Any, w_uk: Any) -> tuple[Any, Any, Any]:
    queries = np.concatenate([np.einsum("bhtn,hcn->bhtc", q, w_uk), q_rope], axis=-1)
    return queries, np.concatenate([latent, rope_key], axis=-1)[:, None], latent[:, None]


def mqa_changed(change: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *args: change(mqa_right(*args), *args)


def rotary_first_both(q: Any, q_rope: Any, latent: Any, rope_key: Any, w_uk: Any) -> tuple[Any, Any, Any]:
    queries = np.concatenate([q_rope, np.einsum("bhtn,hcn->bhtc", q, w_uk)], axis=-1)
    return queries, np.concatenate([rope_key, latent], axis=-1)[:, None], latent[:, None]


def mqa_hard_coded_batch(q: Any, q_rope: Any, latent: Any, rope_key: Any, w_uk: Any) -> tuple[Any, Any, Any]:
    queries, key, value = mqa_right(q, q_rope, latent, rope_key, w_uk)
    return queries, key.reshape(1, 1, *key.shape[2:]) if key.shape[0] == 1 else key[:1], value


MISTAKES: list[Mistake] = [
    # ----- Your turn 4: MLA cache per token, all layers -----
    Mistake("07 YT4 MLA cache", "config's num_key_value_heads in the GQA formula",
            lambda: cache(2 * LAYERS * KV_HEADS * HEAD_DIM), "the MHA/GQA formula"),
    Mistake("07 YT4 MLA cache", "caching the rebuilt K and V",
            lambda: cache(LAYERS * KV_HEADS * (D_NOPE + D_ROPE + D_V)), "caching the rebuilt keys"),
    Mistake("07 YT4 MLA cache", "multiplied by 2 bytes of bf16", lambda: cache(CACHE * BF16),
            "If you multiplied by 2 bytes (bf16): the question counts numbers, not bytes"),
    Mistake("07 YT4 MLA cache", "latent counted once for K and once for V", lambda: cache(2 * CACHE),
            "If you counted the latent once for K and once for V"),
    Mistake("07 YT4 MLA cache", "rotary key forgotten", lambda: cache(LAYERS * D_C), "forgot the decoupled rotary key"),
    Mistake("07 YT4 MLA cache", "latent twice and rotary key forgotten", lambda: cache(2 * LAYERS * D_C),
            "counted the latent twice"),
    Mistake("07 YT4 MLA cache", "rotary key per head", lambda: cache(LAYERS * (D_C + HEADS * D_ROPE)), "once per head"),
    Mistake("07 YT4 MLA cache", "one layer only", lambda: cache(D_C + D_ROPE), "that is one layer"),
    Mistake("07 YT4 MLA cache", "the whole 128K context", lambda: cache(CONTEXT * CACHE), "whole context"),
    Mistake("07 YT4 MLA cache", "bytes of the whole context", lambda: cache(CONTEXT * CACHE * BF16),
            "bytes of the whole context"),
    Mistake("07 YT4 MLA cache", "a float that is not whole", lambda: cache(CACHE + 0.5), "got the float"),
    # ----- Your turn 5: GQA equivalent -----
    Mistake("07 YT5 GQA equivalent", "K and V forgotten (factor 2)", lambda: gqa((D_C + D_ROPE) / HEAD_DIM),
            "key AND a value"),
    Mistake("07 YT5 GQA equivalent", "rotary key forgotten", lambda: gqa(D_C / (2 * HEAD_DIM)),
            "left out the rotary key"),
    Mistake("07 YT5 GQA equivalent", "ratio upside down", lambda: gqa(2 * HEAD_DIM / (D_C + D_ROPE)), "upside down"),
    Mistake("07 YT5 GQA equivalent", "config's num_key_value_heads", lambda: gqa(KV_HEADS), "num_key_value_heads"),
    Mistake("07 YT5 GQA equivalent", "counting all layers", lambda: gqa(CACHE / (2 * HEAD_DIM)), "all 60 layers"),
    Mistake("07 YT5 GQA equivalent", "rounded up to whole heads",
            lambda: gqa(math.ceil((D_C + D_ROPE) / (2 * HEAD_DIM))), "rounded to a whole number"),
    Mistake("07 YT5 GQA equivalent", "rounded too far", lambda: gqa(2.3), "more than rounding"),
    # ----- Your turn 6: absorbed score cost -----
    Mistake("07 YT6 absorbed score cost", "MACs including the absorbed query's cost (q_i W_uk^T)",
            lambda: cost(COST + HEADS * D_NOPE * D_C), "cost of forming the absorbed query"),
    Mistake("07 YT6 absorbed score cost", "MACs including the absorbed query's cost (from x)",
            lambda: cost(COST + HEADS * HIDDEN * D_C), "h x D x d_c"),
    Mistake("07 YT6 absorbed score cost", "counting all layers", lambda: cost(LAYERS * COST), "all 60 layers"),
    Mistake("07 YT6 absorbed score cost", "rotary part left out", lambda: cost(HEADS * 4096 * D_C),
            "left out the rotary part"),
    Mistake("07 YT6 absorbed score cost", "rotary dot product once for all heads",
            lambda: cost(HEADS * 4096 * D_C + 4096 * D_ROPE), "once per head"),
    Mistake("07 YT6 absorbed score cost", "one head", lambda: cost(4096 * (D_C + D_ROPE)), "that is one head"),
    Mistake("07 YT6 absorbed score cost", "the explicit width", lambda: cost(HEADS * 4096 * (D_NOPE + D_ROPE)),
            "explicit route"),
    Mistake("07 YT6 absorbed score cost", "FLOPs", lambda: cost(2 * COST), "FLOPs"),
    # ----- Your turn 1: rebuilt keys (section 1's layer) -----
    Mistake("07 rebuilt keys (lookalikes)", "section 1's w_uk", lambda: old_keys(rebuilt(c, w_uk)),
            "another `w_uk`"),
    Mistake("07 rebuilt keys (lookalikes)", "section 1's latent and w_uk", lambda: old_keys(rebuilt(latent, w_uk)),
            "those are other keys"),
    Mistake("07 YT1 rebuilt keys", "head 0's w_uk for every head",
            lambda: keys(np.broadcast_to((latent @ w_uk[0])[:, None], RIGHT_KEYS.shape)), "head 0's keys"),
    Mistake("07 YT1 rebuilt keys", "the value up-projection", lambda: keys(rebuilt(latent, w_uv)),
            "those are the values"),
    Mistake("07 YT1 rebuilt keys", "heads concatenated", lambda: keys(
        RIGHT_KEYS.transpose(0, 2, 1, 3).reshape(B, T, h * d_nope)), "concatenated the heads"),
    Mistake("07 YT1 rebuilt keys", "one head only", lambda: keys(RIGHT_KEYS[:, 0]), "head 0 only"),
    Mistake("07 YT1 rebuilt keys", "heads summed", lambda: keys(RIGHT_KEYS.sum(1)), "summed over the heads"),
    Mistake("07 YT1 rebuilt keys", "a list of per-head arrays, not stacked",
            lambda: keys([latent @ w_uk[i] for i in range(h)]), "heads axis comes first"),
    Mistake("07 YT1 rebuilt keys", "heads after tokens", lambda: keys(RIGHT_KEYS.transpose(0, 2, 1, 3)),
            "heads axis comes after the tokens"),
    Mistake("07 YT1 rebuilt keys", "each head's keys transposed", lambda: keys(np.swapaxes(RIGHT_KEYS, -1, -2)),
            "transposed"),
    Mistake("07 YT1 rebuilt keys", "some other array of the right shape", lambda: keys(RIGHT_KEYS * 2),
            "right shape (1, 4, 12, 4), wrong numbers", named=False),

]

MISTAKES += [
    # ----- Your turn 2: scores against the latent (run time) -----
    Mistake("07 YT2 latent scores", "keys built with einsum (the explicit route)",
            lambda: query_scores(builds_keys_einsum), "builds the keys"),
    Mistake("07 YT2 latent scores", "keys built with a broadcast matmul", lambda: query_scores(builds_keys_matmul),
            "builds the keys"),
    Mistake("07 YT2 latent scores", "w_uk without its transpose", lambda: query_scores(w_uk_not_transposed),
            "q_i @ w_uk[i].T"),
    Mistake("07 YT2 latent scores", "the latent's missing heads axis", lambda: query_scores(latent_without_heads_axis),
            "latent[:, None]"),
    Mistake("07 YT2 latent scores", "reads the notebook's h and d_c", lambda: query_scores(reads_notebook_d_c),
            "reads the notebook's `h`, `d_c`"),
    Mistake("07 YT2 latent scores", "the lesson's sizes typed in", lambda: query_scores(hard_codes_sizes),
            "a size it does not read"),
    Mistake("07 YT2 latent scores", "scaled by 1/sqrt(d_nope)",
            lambda: query_scores(run_time_changed(lambda s: s / 2.0)), "1/sqrt(d_nope)"),
    Mistake("07 YT2 latent scores", "scaled by 1/sqrt(d_c)",
            lambda: query_scores(run_time_changed(lambda s: s / math.sqrt(d_c))), "1/sqrt(d_c)"),
    Mistake("07 YT2 latent scores", "heads summed", lambda: query_scores(run_time_changed(lambda s: s.sum(1))),
            "summed over the heads"),
    Mistake("07 YT2 latent scores", "scores transposed",
            lambda: query_scores(run_time_changed(lambda s: np.swapaxes(s, -1, -2))), "transposed"),
    Mistake("07 YT2 latent scores", "returns float32",
            lambda: query_scores(run_time_changed(lambda s: s.astype(np.float32))), "returned float32"),
    Mistake("07 YT2 latent scores", "forgot to return", lambda: query_scores(no_return), "is a `return` missing"),
    # ----- Your turn 3: MQA over the latent -----
    Mistake("07 YT3 MQA over the latent", "key and value repeated for every head",
            lambda: mqa(mqa_changed(lambda r, q, *_: (r[0], np.repeat(r[1], q.shape[1], 1),
                                                      np.repeat(r[2], q.shape[1], 1)))), "ONE key head"),
    Mistake("07 YT3 MQA over the latent", "no heads axis on key and value",
            lambda: mqa(mqa_changed(lambda r, *_: (r[0], r[1][:, 0], r[2][:, 0]))), "heads axis of size 1"),
    Mistake("07 YT3 MQA over the latent", "queries not taken into the latent space",
            lambda: mqa(mqa_changed(lambda r, q, q_rope, *_: (np.concatenate([q, q_rope], -1), r[1], r[2]))),
            "through w_uk[i].T"),
    Mistake("07 YT3 MQA over the latent", "rotary part left out",
            lambda: mqa(mqa_changed(lambda r, q, q_rope, latent, rope_key, w: (
                np.einsum("bhtn,hcn->bhtc", q, w), latent[:, None], latent[:, None]))), "decoupled rotary part"),
    Mistake("07 YT3 MQA over the latent", "the value is the key (rotary key mixed in)",
            lambda: mqa(mqa_changed(lambda r, *_: (r[0], r[1], r[1]))), "value is the latent alone"),
    Mistake("07 YT3 MQA over the latent", "orders differ between queries and key",
            lambda: mqa(mqa_changed(lambda r, q, q_rope, latent, rope_key, w: (
                r[0], np.concatenate([rope_key, latent], -1)[:, None], r[2]))), "different orders"),
    Mistake("07 YT3 MQA over the latent", "queries pre-scaled",
            lambda: mqa(mqa_changed(lambda r, q, q_rope, *_: (
                r[0] / math.sqrt(q.shape[-1] + q_rope.shape[-1]), r[1], r[2]))), "divided by sqrt(d_nope + d_rope)"),
    Mistake("07 YT3 MQA over the latent", "a batch axis that only works for B = 1",
            lambda: mqa(mqa_hard_coded_batch), "not for other sizes"),
    Mistake("07 YT3 MQA over the latent", "returns only queries and key",
            lambda: mqa(mqa_changed(lambda r, *_: r[:2])), "return three arrays"),
    Mistake("07 YT3 MQA over the latent", "value taken from the rotary key",
            lambda: mqa(mqa_changed(lambda r, q, q_rope, latent, rope_key, w: (r[0], r[1], rope_key[:, None]))),
            "the rotary key's width"),
    # ----- found by the blind trial (round 1) -----
    Mistake("07 YT1 rebuilt keys", "latent @ w_uk: batch axis lost to the heads axis", lambda: keys(latent @ w_uk),
            "no B axis"),
    Mistake("07 YT1 rebuilt keys", "heads and features swapped (same shape since h = d_nope)",
            lambda: keys(RIGHT_KEYS.transpose(0, 3, 2, 1)), "heads axis and your feature axis are swapped"),
    Mistake("07 YT1 rebuilt keys", "(B, T, h, d_nope) reshaped, not transposed",
            lambda: keys(RIGHT_KEYS.transpose(0, 2, 1, 3).reshape(RIGHT_KEYS.shape)), "reshaped (B, T, h, d_nope)"),
    Mistake("07 YT1 rebuilt keys", "all heads side by side, reshaped",
            lambda: keys((latent @ w_uk.transpose(1, 0, 2).reshape(d_c, h * d_nope)).reshape(RIGHT_KEYS.shape)),
            "tokens and heads get mixed"),
    Mistake("07 YT2 latent scores", "calls the library's mla.latent_scores", lambda: query_scores(calls_library),
            "calls the library's latent_scores"),
    Mistake("07 YT2 latent scores", "latent[:1]: every sequence against the first one's latent",
            lambda: query_scores(first_sequence_latent), "FIRST sequence's latents"),
    Mistake("07 YT3 MQA over the latent", "calls the library's layer.multi_query_inputs",
            lambda: mqa(lambda q, q_rope, latent, rope_key, w_uk: layer.multi_query_inputs(
                x, POSITIONS, mla.LatentCache(latent, rope_key))), "calls the library's multi_query_inputs"),
    Mistake("07 YT5 GQA equivalent", "floor division 576 // 256", lambda: gqa((D_C + D_ROPE) // (2 * HEAD_DIM)),
            "2 is an int where the ratio is not whole: floor division"),
    # ----- found by the blind trial (round 2) -----
    Mistake("07 YT1 rebuilt keys", "calls the library's mla.per_head_projection", lambda: keys(keys_by_library),
            "calls the library's per_head_projection"),
    Mistake("07 YT1 rebuilt keys", "mla.per_head_projection itself, or a partial of it",
            lambda: keys(functools.partial(mla.per_head_projection)), "calls the library's per_head_projection"),
    Mistake("07 YT1 rebuilt keys", "the lesson's sizes typed in", lambda: keys(keys_lesson_sizes),
            "a size of the lesson's (1, 4, 12 or 4) is written into it"),
    Mistake("07 YT1 rebuilt keys", "only the first sequence's latent", lambda: keys(keys_first_sequence),
            "right when the batch holds one sequence"),
    Mistake("07 YT1 rebuilt keys", "reads the notebook's h", lambda: keys(keys_reads_notebook_h),
            "reads the notebook's `h`"),
    # ----- found by the blind trial (round 3): sizes typed in, not a misplaced batch axis -----
    Mistake("07 YT1 rebuilt keys", "a right result reshaped to the lesson's (1, 4, 12, 4)",
            lambda: keys(keys_lesson_sizes_reshaped), "your function fails (B = 1, T = 5"),
    Mistake("07 YT1 rebuilt keys", "np.zeros((1, 4, 12, 4)) filled: ValueError for other sizes",
            lambda: keys(keys_lesson_sizes_filled), "raised ValueError"),
    Mistake("07 YT1 rebuilt keys", "np.resize to the lesson's (1, 4, 12, 4): the wrong shape for other sizes",
            lambda: keys(keys_lesson_sizes_resized), "gives the wrong shape"),
    Mistake("07 YT3 MQA over the latent", "w_uk[0] for every head's query",
            lambda: mqa(mqa_changed(lambda r, q, q_rope, latent, rope_key, w: (
                np.concatenate([np.einsum("bhtn,cn->bhtc", q, w[0]), q_rope], -1), r[1], r[2]))), "w_uk[0]"),
    Mistake("07 YT3 MQA over the latent", "the cached rotary key rotated again",
            lambda: mqa(mqa_changed(lambda r, q, q_rope, latent, rope_key, w: (
                r[0], np.concatenate([latent, rope.apply_rope(rope_key, np.arange(latent.shape[1]))], -1)[:, None],
                r[2]))), "comes from the cache already rotated"),
    Mistake("07 YT3 MQA over the latent", "both rotary parts rotated again",
            lambda: mqa(mqa_changed(lambda r, q, q_rope, latent, rope_key, w: (
                np.concatenate([np.einsum("bhtn,hcn->bhtc", q, w), rope.apply_rope(q_rope, np.arange(q.shape[2]))],
                               -1),
                np.concatenate([latent, rope.apply_rope(rope_key, np.arange(latent.shape[1]))], -1)[:, None],
                r[2]))), "you rotated rope_key again"),
    Mistake("07 YT3 MQA over the latent", "the rotary queries rotated again",
            lambda: mqa(mqa_changed(lambda r, q, q_rope, latent, rope_key, w: (
                np.concatenate([np.einsum("bhtn,hcn->bhtc", q, w), rope.apply_rope(q_rope, np.arange(q.shape[2]))],
                               -1), r[1], r[2]))), "you rotated q_rope again"),
    # ----- Your turn 5: the series' head width -----
    Mistake("07 YT5 GQA equivalent", "heads of width D / h = 40", lambda: gqa((D_C + D_ROPE) / (2 * 40)), "D / h = 40"),
]

RIGHT: list[RightAnswer] = [
    RightAnswer("07 YT4 MLA cache", "an np.int64 count", lambda: cache(np.int64(CACHE))),
    RightAnswer("07 YT4 MLA cache", "a whole float (the statement asks for one whole number)",
                lambda: cache(float(CACHE))),
    RightAnswer("07 YT6 absorbed score cost", "a whole float", lambda: cost(float(COST))),
    RightAnswer("07 YT5 GQA equivalent", "2.25 as the lesson prints it", lambda: gqa(2.25)),
    RightAnswer("07 YT5 GQA equivalent", "the expression of the constants",
                lambda: gqa((D_C + D_ROPE) / (2 * HEAD_DIM))),
    RightAnswer("07 YT6 absorbed score cost", "a torch integer", lambda: cost(torch.tensor(COST))),
    RightAnswer("07 YT1 rebuilt keys", "a per-head loop, stacked", lambda: keys(
        lambda lat, up: np.stack([lat @ up[i] for i in range(up.shape[0])], axis=1))),
    RightAnswer("07 YT1 rebuilt keys", "broadcast matmul", lambda: keys(lambda lat, up: lat[:, None] @ up)),
    RightAnswer("07 YT1 rebuilt keys", "einsum, as torch", lambda: keys(
        lambda lat, up: torch.einsum("btc,hcn->bhtn", torch.from_numpy(lat), torch.from_numpy(up)))),

]


RIGHT += [
    RightAnswer("07 YT2 latent scores", "the run-time route, by einsum", lambda: query_scores(run_time)),
    RightAnswer("07 YT2 latent scores", "one einsum over all three", lambda: query_scores(
        lambda q, latent, w: np.einsum("bhtn,hcn,bsc->bhts", q, w, latent))),
    RightAnswer("07 YT2 latent scores", "matmul with swapped axes", lambda: query_scores(
        lambda q, latent, w: (q @ np.swapaxes(w, -1, -2)) @ np.swapaxes(latent, -1, -2)[:, None])),
    RightAnswer("07 YT3 MQA over the latent", "latent first", lambda: mqa(mqa_right)),
    RightAnswer("07 YT3 MQA over the latent", "rotary part first in both", lambda: mqa(rotary_first_both)),
    RightAnswer("07 YT3 MQA over the latent", "as a list, with expand_dims", lambda: mqa(
        lambda q, q_rope, latent, rope_key, w: [np.concatenate([np.einsum("bhtn,hcn->bhtc", q, w), q_rope], -1),
                                                np.expand_dims(np.concatenate([latent, rope_key], -1), 1),
                                                np.expand_dims(latent, 1)])),
    RightAnswer("07 YT3 MQA over the latent", "torch tensors", lambda: mqa(
        lambda *args: tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in mqa_right(*args)))),
]


@pytest.mark.parametrize("row", MISTAKES, ids=row_id)
def test_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=row_id)
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
