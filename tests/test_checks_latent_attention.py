"""Lesson 07 quick-check: right answers pass, each recognised wrong answer is named, blank answers
are "not answered yet", odd inputs never raise, and no "not yet" message gives the answer away."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from lessons_lib.checks import Verdict
from lessons_lib.checks.latent_attention import (
    check_absorbed_score_cost,
    check_equivalent_kv_heads,
    check_latent_as_mqa,
    check_mla_cache_elements,
    check_query_latent_scores,
    check_rebuilt_keys,
)

DS = dict(layers=60, latent_width=512, rope_width=64, kv_heads=128, head_dim=128)
GQA = dict(latent_width=512, rope_width=64, head_dim=128, kv_heads=128)

rng = np.random.default_rng(0)
B, T, D, H, D_C, D_NOPE = 2, 5, 8, 3, 4, 6  # d_nope = d_v, so values fit where keys are asked for
X = rng.standard_normal((B, T, D))
W_DKV = rng.standard_normal((D, D_C))
W_Q = rng.standard_normal((H, D, D_NOPE))
W_UK = rng.standard_normal((H, D_C, D_NOPE))
W_UV = rng.standard_normal((H, D_C, D_NOPE))
LATENT = X @ W_DKV
KEYS = np.stack([LATENT @ W_UK[i] for i in range(H)], axis=1)  # (B, h, T, d_nope), by a per-head loop
SCORES = np.stack([(X @ W_Q[i]) @ KEYS[:, i].transpose(0, 2, 1) for i in range(H)], axis=1)  # (B, h, T, T)

ODD_INPUTS: list[Any] = ["many", True, [[1, 2], [3]], {"a": 1}, object(), float("nan"), np.zeros((0,)), 3 + 4j]


def assert_not_yet(verdict: Verdict, phrase: str, secret: str | None = None) -> None:
    assert not verdict.ok
    assert verdict.answered, repr(verdict)
    assert " not yet: " in repr(verdict)
    assert phrase in verdict.message, repr(verdict)
    if secret is not None:
        assert secret not in verdict.message, f"the message gives the answer away: {verdict!r}"


def assert_blank(verdict: Verdict, phrase: str) -> None:
    assert not verdict.ok and not verdict.answered
    assert " not answered yet: " in repr(verdict)
    assert phrase in verdict.message


# ----- MLA cache ----------------------------------------------------------------------------------
def test_cache_right_answer() -> None:
    v = check_mla_cache_elements(60 * 576, **DS)
    assert v.ok
    assert "34560" in v.message
    assert repr(v).startswith("[MLA cache] correct")
    assert check_mla_cache_elements(np.int64(34560), **DS).ok
    assert check_mla_cache_elements(34560.0, **DS).ok  # "one whole number": a whole float is one
    assert check_mla_cache_elements(np.float64(34560), **DS).ok
    assert "got the float 34560.5" in check_mla_cache_elements(34560.5, **DS).message
    assert check_mla_cache_elements(torch.tensor(34560), **DS).ok


@pytest.mark.parametrize(
    "answer, phrase",
    [
        (2 * 60 * 128 * 128, "num_key_value_heads"),
        (60 * 512, "forgot the decoupled rotary key"),
        (2 * 60 * 576, "no factor 2"),
        (2 * 60 * 512, "counted the latent twice"),
        (60 * (512 + 128 * 64), "shared by all heads"),
        (576, "that is one layer"),
        (12345, "not a count we recognise"),
        ("many", "expected one whole number"),
        (True, "boolean"),
        (2.5, "expected one whole number"),
    ],
)
def test_cache_wrong_answers(answer: object, phrase: str) -> None:
    v = check_mla_cache_elements(answer, **DS)
    assert_not_yet(v, phrase, secret="34560")
    assert "34,560" not in v.message
    assert repr(v).startswith("[MLA cache] not yet")


def test_cache_bytes_context_rebuilt_kv() -> None:
    extra = dict(nope_width=128, value_width=128, context=131072, bytes_per_element=2)
    assert check_mla_cache_elements(34560, **DS, **extra).ok
    cases = [(2 * 34560, "If you multiplied by 2 bytes"), (2 * 34560, "once for K and once for V"),
             (60 * 128 * 320, "rebuilt keys"), (131072 * 34560, "whole context"),
             (2 * 131072 * 34560, "bytes of the whole context")]
    for answer, phrase in cases:
        assert_not_yet(check_mla_cache_elements(answer, **DS, **extra), phrase, secret="34560")
    fp32 = check_mla_cache_elements(4 * 34560, **DS, **{**extra, "bytes_per_element": 4})
    assert_not_yet(fp32, "in bytes (4 per number")


def test_cache_blank() -> None:
    v = check_mla_cache_elements(None, **DS)
    assert_blank(v, "one whole number")
    assert "d_c" not in v.message and "34560" not in v.message


# ----- GQA equivalent -----------------------------------------------------------------------------
def test_equivalent_kv_heads_right() -> None:
    assert check_equivalent_kv_heads(2.25, **GQA).ok
    assert "2.25" in check_equivalent_kv_heads(576 / 256, **GQA).message
    assert check_equivalent_kv_heads(torch.tensor(2.25), **GQA).ok
    assert check_equivalent_kv_heads(2.25, latent_width=512, rope_width=64, head_dim=128).ok


@pytest.mark.parametrize(
    "answer, phrase",
    [
        (4.5, "key AND a value"),
        (2.0, "left out the rotary key; MLA"),
        (4, "left out the rotary key, and"),
        (256 / 576, "upside down"),
        (128, "num_key_value_heads"),
        (8, "not the count we expected"),
        (3, "rounded to a whole number"),
        (2.3, "more than rounding"),
        ("two", "expected one number"),
    ],
)
def test_equivalent_kv_heads_wrong(answer: object, phrase: str) -> None:
    assert_not_yet(check_equivalent_kv_heads(answer, **GQA), phrase, secret="2.25")


def test_equivalent_kv_heads_rounding_and_layers() -> None:
    assert check_equivalent_kv_heads(2.25, **GQA, layers=60).ok
    assert_not_yet(check_equivalent_kv_heads(60 * 576 / 256, **GQA, layers=60), "all 60 layers")
    assert_not_yet(check_equivalent_kv_heads(60 * 576 / 128, **GQA, layers=60), "all 60 layers")


def test_equivalent_kv_heads_blank() -> None:
    v = check_equivalent_kv_heads(None, **GQA)
    assert_blank(v, "one number")
    assert "2 *" not in v.message and "d_rope" not in v.message


# ----- rebuilt keys -------------------------------------------------------------------------------
def test_rebuilt_keys_right() -> None:
    v = check_rebuilt_keys(per_head_keys, LATENT, W_UK, W_UV)
    assert v.ok and "other sizes" in v.message
    assert check_rebuilt_keys(lambda latent, w_uk: latent[:, None] @ w_uk, LATENT, W_UK, W_UV).ok
    assert check_rebuilt_keys(lambda latent, w_uk: torch.einsum("btc,hcn->bhtn", torch.from_numpy(latent),
                                                                torch.from_numpy(w_uk)).float(),
                              torch.from_numpy(LATENT), W_UK, W_UV).ok


def per_head_keys(latent: Any, w_uk: Any) -> Any:
    return np.stack([latent @ w_uk[i] for i in range(w_uk.shape[0])], axis=1)


def test_rebuilt_keys_library_and_sizes_refused() -> None:
    from lessons_lib import mla

    assert_not_yet(check_rebuilt_keys(lambda latent, w_uk: mla.per_head_projection(latent, w_uk), LATENT, W_UK, W_UV),
                   "calls the library's per_head_projection")
    assert_not_yet(check_rebuilt_keys(lambda latent, w_uk: KEYS, LATENT, W_UK, W_UV), "not for other sizes")
    one = LATENT[:1]
    assert_not_yet(check_rebuilt_keys(lambda latent, w_uk: np.stack([latent[0] @ w_uk[i] for i in range(H)])[None],
                                      one, W_UK, W_UV), "reads the notebook's `H`")


def test_rebuilt_keys_sizes_typed_in_told_from_batch_axis() -> None:
    one = LATENT[:1]
    lesson = f"1, {H}, {T} or {D_NOPE}"
    typed_in = (  # the sizes of `one`'s keys written into the function: wrong with B = 1 too
        lambda latent, w_uk: np.einsum("btc,hcn->bhtn", latent, w_uk).reshape(1, 3, 5, 6),
        lambda latent, w_uk: np.resize(np.einsum("btc,hcn->bhtn", latent, w_uk), (1, 3, 5, 6)),
    )
    for function in typed_in:
        v = check_rebuilt_keys(function, one, W_UK, W_UV)
        assert_not_yet(v, f"a size of the lesson's ({lesson}) is written into it")
        assert "B = 1, T = 5, h = 2" in v.message and "latent.shape and w_uk.shape" in v.message
        assert "misplaced batch axis" not in v.message
    assert_not_yet(check_rebuilt_keys(typed_in[0], one, W_UK, W_UV), "your function fails")
    assert_not_yet(check_rebuilt_keys(typed_in[1], one, W_UK, W_UV), "gives the wrong shape")
    first_only = check_rebuilt_keys(lambda latent, w_uk: (latent[:1, None] @ w_uk), one, W_UK, W_UV)
    assert_not_yet(first_only, "with B = 1 a misplaced batch axis hides")  # right with B = 1: the batch axis
    assert "written into it" not in first_only.message


@pytest.mark.parametrize(
    "answer, phrase",
    [
        (np.stack([LATENT @ W_UV[i] for i in range(H)], axis=1), "those are the values"),
        (KEYS.transpose(0, 2, 1, 3), "heads axis comes after the tokens"),
        (KEYS.transpose(0, 1, 3, 2), "transposed"),
        (KEYS.transpose(0, 2, 1, 3).reshape(B, T, H * D_NOPE), "concatenated the heads"),
        (KEYS[:, 0], "head 0 only"),
        (KEYS.sum(axis=1), "summed over the heads"),
        (KEYS + 1, "right shape (2, 3, 5, 6), wrong numbers"),
        (KEYS[:, :2], "not every head's keys latent @ w_uk[i] (your shape (2, 2, 5, 6), expected (B, h, T, d_nope)"),
        (KEYS.transpose(0, 2, 1, 3).reshape(KEYS.shape), "reshaped (B, T, h, d_nope)"),
        (np.broadcast_to((LATENT @ W_UK[0])[:, None], KEYS.shape), "head 0's keys"),
    ],
)
def test_rebuilt_keys_wrong(answer: Any, phrase: str) -> None:
    v = check_rebuilt_keys(lambda latent, w_uk: answer, LATENT, W_UK, W_UV)
    assert_not_yet(v, phrase, secret="einsum")
    assert "latent[:, None]" not in v.message


def test_rebuilt_keys_lost_batch_axis() -> None:
    one = LATENT[:1]
    v = check_rebuilt_keys(lambda latent, w_uk: latent @ w_uk, one, W_UK, W_UV)  # (1, T, d_c) @ (h, ...) -> (h, T, ...)
    assert_not_yet(v, "no B axis")
    assert "latent c" not in v.message and "layer.w_uk" not in v.message


def test_rebuilt_keys_blank_and_odd_inputs() -> None:
    assert_blank(check_rebuilt_keys(None, LATENT, W_UK, W_UV), "(B, h, T, d_nope)")
    for odd in ODD_INPUTS:
        v = check_rebuilt_keys(odd, LATENT, W_UK, W_UV)
        assert not v.ok and v.answered


def test_reference_inputs_are_checked() -> None:
    with pytest.raises(ValueError, match="w_uk"):
        check_rebuilt_keys(per_head_keys, LATENT, W_UK[0], W_UV)
    with pytest.raises(TypeError, match="x"):
        check_query_latent_scores(lambda q, latent, w_uk: None, X.astype(int), W_DKV, W_Q, W_UK)


# ----- absorbed score cost ------------------------------------------------------------------------
COST = dict(heads=128, cached_tokens=4096, latent_width=512, nope_width=128, rope_width=64, layers=60)
RIGHT_COST = 128 * 4096 * 576


def test_score_cost_right() -> None:
    v = check_absorbed_score_cost(RIGHT_COST, **COST)
    assert v.ok and str(RIGHT_COST) in v.message
    assert check_absorbed_score_cost(np.int64(RIGHT_COST), **COST).ok
    assert check_absorbed_score_cost(torch.tensor(RIGHT_COST), **COST).ok


@pytest.mark.parametrize(
    "answer, phrase",
    [
        (128 * 4096 * 512, "left out the rotary part"),
        (128 * 4096 * 512 + 4096 * 64, "once per head"),
        (4096 * 576, "that is one head"),
        (128 * 576, "one cached token"),
        (128 * 4096 * 192, "explicit route"),
        (60 * RIGHT_COST, "all 60 layers"),
        (2 * RIGHT_COST, "FLOPs"),
        (12345, "not a count we recognise"),
        (RIGHT_COST + 128 * 128 * 512, "cost of forming the absorbed query"),
        ("lots", "expected one whole number"),
    ],
)
def test_score_cost_wrong(answer: object, phrase: str) -> None:
    assert_not_yet(check_absorbed_score_cost(answer, **COST), phrase, secret=str(RIGHT_COST))


def test_score_cost_absorbed_query_from_x() -> None:
    v = check_absorbed_score_cost(RIGHT_COST + 128 * 5120 * 512, **COST, model_width=5120)
    assert_not_yet(v, "h x D x d_c", secret=str(RIGHT_COST))


def test_score_cost_blank_and_odd_inputs() -> None:
    assert_blank(check_absorbed_score_cost(None, **COST), "one whole number")
    for odd in ODD_INPUTS:
        assert not check_absorbed_score_cost(odd, **COST).ok


def test_rebuilt_keys_section_1_lookalikes() -> None:
    other_latent, other_w_uk = LATENT + 0.5, W_UK[::-1].copy()
    lookalikes = dict(section_1_latent=other_latent, section_1_w_uk=other_w_uk)
    assert check_rebuilt_keys(per_head_keys, LATENT, W_UK, W_UV, **lookalikes).ok
    cases = [(other_latent, other_w_uk, "those are other keys"), (LATENT, other_w_uk, "another `w_uk`"),
             (other_latent, W_UK, "another `latent`")]
    for latent, w_uk, phrase in cases:
        answer = np.einsum("btc,hcn->bhtn", latent, w_uk)
        assert_not_yet(check_rebuilt_keys(lambda _l, _w, a=answer: a, LATENT, W_UK, W_UV, **lookalikes), phrase)


# ----- scores against the latent, re-associated at run time (Your turn 2) -------------------------
def test_query_latent_scores_right_and_keys_refused() -> None:
    def run_time(q: Any, latent: Any, w_uk: Any) -> Any:
        return np.einsum("bhtn,hcn->bhtc", q, w_uk) @ np.swapaxes(latent, -1, -2)[:, None]

    def explicit(q: Any, latent: Any, w_uk: Any) -> Any:  # right numbers through the keys
        keys = np.stack([latent @ w_uk[i] for i in range(w_uk.shape[0])], axis=1)
        return q @ np.swapaxes(keys, -1, -2)

    assert check_query_latent_scores(run_time, X, W_DKV, W_Q, W_UK).ok
    assert_not_yet(check_query_latent_scores(explicit, X, W_DKV, W_Q, W_UK), "builds the keys")


def test_query_latent_scores_blank_and_odd_functions() -> None:
    def blank(q: Any, latent: Any, w_uk: Any) -> Any:
        ...

    assert_blank(check_query_latent_scores(blank, X, W_DKV, W_Q, W_UK), "raw scores (B, h, T, S)")
    for odd in ODD_INPUTS:
        verdict = check_query_latent_scores(lambda q, latent, w, odd=odd: odd, X, W_DKV, W_Q, W_UK)
        assert not verdict.ok
    assert_not_yet(check_query_latent_scores(lambda q, latent, w: 1 / 0, X, W_DKV, W_Q, W_UK), "ZeroDivisionError")


def test_query_latent_scores_library_and_first_sequence_refused() -> None:
    from lessons_lib import mla

    assert_not_yet(check_query_latent_scores(lambda q, latent, w_uk: mla.latent_scores(q, latent, w_uk),
                                             X[:1], W_DKV, W_Q, W_UK), "calls the library's latent_scores")

    def first_only(q: Any, latent: Any, w_uk: Any) -> Any:
        return np.einsum("bhtn,hcn->bhtc", q, w_uk) @ np.swapaxes(latent[:1], -1, -2)[:, None]

    assert_not_yet(check_query_latent_scores(first_only, X[:1], W_DKV, W_Q, W_UK), "FIRST sequence's latents")


def test_equivalent_kv_heads_floor_division() -> None:
    assert_not_yet(check_equivalent_kv_heads((512 + 64) // 256, **GQA), "floor division")
    assert_not_yet(check_equivalent_kv_heads(512 / 256, **GQA), "left out the rotary key")


# ----- absorbed decoding as multi-query attention (Your turn 3) -----------------------------------
MQA_ARGS = (rng.standard_normal((B, H, T, D_NOPE)), rng.standard_normal((B, H, T, 2)), LATENT,
            rng.standard_normal((B, T, 2)), W_UK)


def test_latent_as_mqa_right_in_either_order() -> None:
    def latent_first(q: Any, q_rope: Any, latent: Any, rope_key: Any, w_uk: Any) -> Any:
        queries = np.concatenate([np.einsum("bhtn,hcn->bhtc", q, w_uk), q_rope], axis=-1)
        return queries, np.concatenate([latent, rope_key], axis=-1)[:, None], latent[:, None]

    def rotary_first(q: Any, q_rope: Any, latent: Any, rope_key: Any, w_uk: Any) -> Any:
        queries = np.concatenate([q_rope, np.einsum("bhtn,hcn->bhtc", q, w_uk)], axis=-1)
        return queries, np.concatenate([rope_key, latent], axis=-1)[:, None], latent[:, None]

    assert check_latent_as_mqa(latent_first, *MQA_ARGS).ok
    assert check_latent_as_mqa(rotary_first, *MQA_ARGS).ok


def test_latent_as_mqa_blank_and_odd_results() -> None:
    def blank(q: Any, q_rope: Any, latent: Any, rope_key: Any, w_uk: Any) -> Any:
        ...

    assert_blank(check_latent_as_mqa(blank, *MQA_ARGS), "(queries, key, value)")
    for odd in [*ODD_INPUTS, (1, 2, 3), (np.zeros(3),) * 3]:
        verdict = check_latent_as_mqa(lambda *args, odd=odd: odd, *MQA_ARGS)
        assert not verdict.ok and verdict.answered
