"""Typical mistakes in lesson 06 (Grouped-query attention) and the diagnosis each must get.

The Quick check's inputs are those of the notebook: the presets of Mistral 7B v0.1 and Llama 2 70B
(their official configs), the keys ``(1, 2, 5, 3)`` of Your turn 3 with ``g = 3``, and the checkers' own
sizes for the two function exercises. The wrong answers include the ones issue 19 lists: a call of
``kv_head_of_query`` or ``pool_kv_columns`` (which the exercises ask the learner to write), ``4.0``
where an int is asked (refused by type, like whole floats in Your turn 2), and a sliding window
counted as ``W - 1`` tokens.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id

from lessons_lib import gqa_numpy, kv_cache
from lessons_lib.checks import grouped_query_attention as checks

MISTRAL = kv_cache.MODELS["Mistral 7B v0.1"]
LLAMA_70B = kv_cache.MODELS["Llama 2 70B"]
KEYS = np.random.default_rng(4).normal(size=(1, 2, 5, 3))  # (B, h_kv, S, d_h), as in the notebook
G = 3
LLAMA_RIGHT = 2 * 80 * 8 * 128 * 4096 * 16 * 2
MISTRAL_RIGHT = 2 * 32 * 8 * 128 * 4096 * 8 * 2


def group(answer: Any) -> Any:
    return lambda: checks.check_group_size(answer, MISTRAL.heads, MISTRAL.kv_heads)


def mapping(function: Any) -> Any:
    return lambda: checks.check_kv_head_function(function)


def repeated(answer: Any) -> Any:
    return lambda: checks.check_repeat_kv(answer, KEYS, group_size=G)


def llama(answer: Any) -> Any:
    return lambda: checks.check_cache_bytes(answer, LLAMA_70B, tokens=4096, batch=16)


def pool(function: Any) -> Any:
    return lambda: checks.check_pool_kv_columns(function)


def mistral(answer: Any) -> Any:
    return lambda: checks.check_cache_bytes(answer, MISTRAL, tokens=16384, batch=8)


def pool_right(w: Any, heads: int, kv_heads: int) -> Any:
    D, width = w.shape
    return w.reshape(D, kv_heads, heads // kv_heads, width // heads).mean(axis=2).reshape(D, -1)


def pool_d_hard_coded(w: Any, heads: int, kv_heads: int) -> Any:
    return w.reshape(5, kv_heads, heads // kv_heads, -1).mean(axis=2).reshape(5, -1)  # D = 5 of the first size


MISTAKES: list[Mistake] = [
    # ----- Your turn 1: the group size g ---------------------------------------------------------
    Mistake(
        "06 YT1 group size", "32 / 8 = 4.0, a float", group(32 / 8), "4.0 is a float, and the question asks for an int"
    ),
    Mistake("06 YT1 group size", "h_kv (the number of K/V heads)", group(8), "is h_kv, the number of K/V heads"),
    Mistake("06 YT1 group size", "h (all query heads)", group(32), "the number of all query heads"),
    Mistake("06 YT1 group size", "h_kv // h", group(8 // 32), "a fraction of a head"),
    Mistake("06 YT1 group size", "0.25 (h_kv / h)", group(8 / 32), "is h_kv / h, a fraction of a head"),
    # ----- Your turn 2: which K/V head each query head reads -------------------------------------------
    Mistake(
        "06 YT2 K/V head function",
        "calls kv_head_of_query",
        mapping(lambda h, h_kv: gqa_numpy.kv_head_of_query(h, h_kv)),
        "calls the library's kv_head_of_query",
    ),
    Mistake(
        "06 YT2 K/V head function",
        "the tiled order i % h_kv",
        mapping(lambda h, h_kv: np.arange(h) % h_kv),
        "tiled order",
    ),
    Mistake("06 YT2 K/V head function", "i // h_kv", mapping(lambda h, h_kv: np.arange(h) // h_kv), "divided by h_kv"),
    Mistake(
        "06 YT2 K/V head function",
        "numbered from 1",
        mapping(lambda h, h_kv: np.arange(h) // (h // h_kv) + 1),
        "numbered the K/V heads from 1",
    ),
    Mistake(
        "06 YT2 K/V head function",
        "whole floats from np.floor(i / g)",
        mapping(lambda h, h_kv: np.floor(np.arange(h) / (h // h_kv))),
        "these are floats (dtype float64)",
    ),
    Mistake(
        "06 YT2 K/V head function",
        "the lesson's h = 8, h_kv = 2 hard-coded",
        mapping(lambda h, h_kv: [0, 0, 0, 0, 1, 1, 1, 1]),
        "for h=6, h_kv=3: expected 6 integers",
    ),
    # ----- Your turn 3: K/V heads repeated for the query heads -----------------------------------------
    Mistake("06 YT3 repeat K/V", "np.tile", repeated(np.tile(KEYS, (1, G, 1, 1))), "tiling gives heads 0, 1"),
    Mistake("06 YT3 repeat K/V", "repeated along the tokens", repeated(np.repeat(KEYS, G, axis=2)), "token axis S"),
    Mistake("06 YT3 repeat K/V", "np.repeat without an axis", repeated(np.repeat(KEYS, G)), "without an axis flattens"),
    Mistake(
        "06 YT3 repeat K/V",
        "repeated h_kv times",
        repeated(np.repeat(KEYS, 2, axis=1)),
        "repeated each head h_kv=2 times",
    ),
    Mistake("06 YT3 repeat K/V", "the keys unchanged", repeated(KEYS), "still the h_kv=2 K/V heads"),
    # ----- Your turn 4: Llama 2 70B's cache --------------------------------------------------------------
    Mistake("06 YT4 Llama 2 70B cache", "h = 64 query heads", llama(LLAMA_RIGHT * 8), "you used h=64 query heads"),
    Mistake("06 YT4 Llama 2 70B cache", "no factor 2 for K and V", llama(LLAMA_RIGHT // 2), "factor 2"),
    Mistake("06 YT4 Llama 2 70B cache", "one layer", llama(LLAMA_RIGHT // 80), "one layer's share"),
    Mistake(
        "06 YT4 Llama 2 70B cache", "elements, not bytes", llama(LLAMA_RIGHT // 2), "you counted elements, not bytes"
    ),
    Mistake("06 YT4 Llama 2 70B cache", "one conversation", llama(LLAMA_RIGHT // 16), "the cache of one sequence"),
    Mistake("06 YT4 Llama 2 70B cache", "in GiB", llama(LLAMA_RIGHT / 2**30), "in GiB"),
    Mistake("06 YT4 Llama 2 70B cache", "a whole float from /", llama(float(LLAMA_RIGHT)), "is a float"),
    Mistake(
        "06 YT4 Llama 2 70B cache",
        "d_h = hidden_size / h_kv = 1024",
        llama(2 * 80 * 8 * 1024 * 4096 * 16 * 2),
        "(or the full width D = h x d_h)",
    ),
    # ----- Your turn 5: mean-pooled K/V columns ------------------------------------------------------------
    Mistake(
        "06 YT5 mean pooling",
        "calls pool_kv_columns",
        pool(lambda w, h, k: gqa_numpy.pool_kv_columns(w, h, k)),
        "calls the library's pool_kv_columns",
    ),
    Mistake(
        "06 YT5 mean pooling",
        "first head of each group",
        pool(lambda w, h, k: w.reshape(w.shape[0], k, h // k, -1)[:, :, 0].reshape(w.shape[0], -1)),
        "kept the first head of each group",
    ),
    Mistake(
        "06 YT5 mean pooling",
        "sum instead of mean",
        pool(lambda w, h, k: w.reshape(w.shape[0], k, h // k, -1).sum(axis=2).reshape(w.shape[0], -1)),
        "added up the heads",
    ),
    Mistake(
        "06 YT5 mean pooling",
        "tiled groups",
        pool(lambda w, h, k: w.reshape(w.shape[0], h // k, k, -1).mean(axis=1).reshape(w.shape[0], -1)),
        "tiled groups",
    ),
    Mistake(
        "06 YT5 mean pooling",
        "pooled heads not side by side",
        pool(lambda w, h, k: w.reshape(w.shape[0], k, h // k, -1).mean(axis=2)),
        "put the heads side by side",
    ),
    Mistake("06 YT5 mean pooling", "D hard-coded", pool(pool_d_hard_coded), "take D and d_h from w.shape"),
    Mistake(
        "06 YT5 mean pooling",
        "a torch tensor returned",
        pool(lambda w, h, k: torch.from_numpy(pool_right(w, h, k))),
        "must return a NumPy array",
    ),
    Mistake(
        "06 YT5 mean pooling",
        "cast to float64",
        pool(lambda w, h, k: pool_right(w, h, k).astype(np.float64)),
        "returned float64",
    ),
    # ----- Your turn 6: Mistral's windowed cache -----------------------------------------------------------
    Mistake("06 YT6 Mistral cache", "every token counted", mistral(MISTRAL_RIGHT * 4), "you counted all 16384 tokens"),
    Mistake(
        "06 YT6 Mistral cache", "window counted as W - 1", mistral(MISTRAL_RIGHT // 4096 * 4095), "the window minus one"
    ),
    Mistake("06 YT6 Mistral cache", "h = 32 instead of h_kv", mistral(MISTRAL_RIGHT * 4), "you used h=32 query heads"),
    Mistake("06 YT6 Mistral cache", "one conversation", mistral(MISTRAL_RIGHT // 8), "the cache of one sequence"),
    Mistake("06 YT6 Mistral cache", "no factor 2", mistral(MISTRAL_RIGHT // 2), "factor 2"),
]

RIGHT: list[RightAnswer] = [
    RightAnswer("06 YT1 group size", "32 // 8", group(32 // 8)),
    RightAnswer("06 YT1 group size", "int(32 / 8)", group(int(32 / 8))),
    RightAnswer("06 YT2 K/V head function", "np.arange(h) // g", mapping(lambda h, h_kv: np.arange(h) // (h // h_kv))),
    RightAnswer(
        "06 YT2 K/V head function",
        "np.repeat(np.arange(h_kv), g)",
        mapping(lambda h, h_kv: np.repeat(np.arange(h_kv), h // h_kv)),
    ),
    RightAnswer(
        "06 YT2 K/V head function", "a plain list", mapping(lambda h, h_kv: [i // (h // h_kv) for i in range(h)])
    ),
    RightAnswer("06 YT3 repeat K/V", "np.repeat on axis 1", repeated(np.repeat(KEYS, G, axis=1))),
    RightAnswer(
        "06 YT3 repeat K/V", "torch repeat_interleave", repeated(torch.from_numpy(KEYS).repeat_interleave(G, dim=1))
    ),
    RightAnswer("06 YT4 Llama 2 70B cache", "the formula", llama(LLAMA_RIGHT)),
    RightAnswer("06 YT4 Llama 2 70B cache", "a NumPy integer", llama(np.int64(LLAMA_RIGHT))),
    RightAnswer("06 YT5 mean pooling", "reshape and mean", pool(pool_right)),
    RightAnswer(
        "06 YT5 mean pooling",
        "a loop over groups",
        pool(
            lambda w, h, k: np.concatenate(
                [
                    np.mean(
                        [
                            w[:, (j * (h // k) + i) * (w.shape[1] // h) : (j * (h // k) + i + 1) * (w.shape[1] // h)]
                            for i in range(h // k)
                        ],
                        axis=0,
                    ).astype(w.dtype)
                    for j in range(k)
                ],
                axis=1,
            )
        ),
    ),
    RightAnswer("06 YT6 Mistral cache", "min(T, W) tokens", mistral(MISTRAL_RIGHT)),
]


@pytest.mark.parametrize("row", MISTAKES, ids=[row_id(row) for row in MISTAKES])
def test_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=[row_id(row) for row in RIGHT])
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
