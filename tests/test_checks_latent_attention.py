"""Lesson 06 quick-check: right answers pass, each recognised wrong answer is named."""

from __future__ import annotations

import numpy as np
import pytest

from lessons_lib.checks.latent_attention import (
    check_absorbed_query_weight,
    check_equivalent_kv_heads,
    check_mla_cache_elements,
)

DS = dict(layers=60, latent_width=512, rope_width=64, kv_heads=128, head_dim=128)


def test_cache_right_answer() -> None:
    v = check_mla_cache_elements(60 * 576, **DS)
    assert v.ok
    assert "34560" in v.message
    assert repr(v).startswith("[MLA cache] correct")
    assert check_mla_cache_elements(np.int64(34560), **DS).ok


@pytest.mark.parametrize(
    "answer, phrase",
    [
        (2 * 60 * 128 * 128, "num_key_value_heads"),
        (60 * 512, "forgot the decoupled rotary key"),
        (2 * 60 * 576, "no factor 2"),
        (2 * 60 * 512, "counted the latent twice"),
        (60 * (512 + 128 * 64), "shared by all heads"),
        (576, "that is one layer"),
        (12345, "expected layers x (d_c + d_rope)"),
        (None, "no answer yet"),
        ("many", "expected one whole number"),
        (True, "boolean"),
    ],
)
def test_cache_wrong_answers(answer: object, phrase: str) -> None:
    v = check_mla_cache_elements(answer, **DS)
    assert not v.ok
    assert phrase in v.message
    assert repr(v).startswith("[MLA cache] not yet")


def test_absorbed_query_weight() -> None:
    rng = np.random.default_rng(0)
    w_q, w_uk = rng.standard_normal((3, 8, 4)), rng.standard_normal((3, 5, 4))
    right = np.stack([w_q[i] @ w_uk[i].T for i in range(3)])
    assert check_absorbed_query_weight(right, w_q, w_uk).ok
    assert check_absorbed_query_weight(right.astype(np.float32), w_q, w_uk).ok
    cases = [
        (right.sum(0), "summed over the heads"),
        (right.transpose(0, 2, 1), "transposed"),
        (right[0], "head 0 only"),
        (right + 1, "expected w_q[i] @ w_uk[i].T"),
        (None, "no answer yet"),
    ]
    for answer, phrase in cases:
        v = check_absorbed_query_weight(answer, w_q, w_uk)
        assert not v.ok and phrase in v.message


def test_equivalent_kv_heads() -> None:
    kw = dict(latent_width=512, rope_width=64, head_dim=128)
    assert check_equivalent_kv_heads(2.25, **kw).ok
    assert "2.25" in check_equivalent_kv_heads(576 / 256, **kw).message
    cases = [(4.5, "key AND a value"), (2.0, "left out the rotary key"), (8, "expected"), (None, "no answer")]
    for answer, phrase in cases:
        v = check_equivalent_kv_heads(answer, **kw)
        assert not v.ok and phrase in v.message
