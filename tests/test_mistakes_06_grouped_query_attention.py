"""Typical mistakes in lesson 06 (Grouped-query attention) and the diagnosis each must get.

The exercises' inputs are those of the notebook: the checkers' own sizes for the two function
exercises (Your turns 1 and 3), the keys ``(1, 2, 5, 3)`` of Your turn 2 with ``g = 3``, Llama 3.1
405B's config (4 conversations of 32768 tokens, 16-bit) for Your turn 4 and the preset of Mistral 7B
v0.1 with an 8-bit cache (12 conversations of 6000 tokens) for Your turn 5. The wrong answers include
the ones issues 19 and 28 and the blind trials list: a call of ``kv_head_of_query`` or
``pool_kv_columns`` (which the exercises ask the learner to write), whole floats where ints are asked,
sizes written into a function (``g = 4``, ``// 2``, the notebook's ``d_h``), each K/V head repeated
``h_kv`` times, a mean over the wrong axis, 4-byte elements, bits for bytes, and a sliding window
counted as ``W - 1`` or ``W + 1`` tokens.
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
LLAMA_405B = kv_cache.ModelPreset(  # as the notebook's check cell builds it
    "Llama 3.1 405B", layers=126, hidden_size=16384, heads=128, kv_heads=8,
    source="https://huggingface.co/meta-llama/Llama-3.1-405B/blob/main/config.json",
)
KEYS = np.random.default_rng(4).normal(size=(1, 2, 5, 3))  # (B, h_kv, S, d_h), as in the notebook
G = 3
LLAMA_RIGHT = 2 * 126 * 8 * 128 * 32768 * 4 * 2
MISTRAL_RIGHT = 2 * 32 * 8 * 128 * 4096 * 12 * 1  # min(6000, W = 4096) tokens kept, 1 byte per element
NOTEBOOK_D_H = 4  # d_h in the kernel when Your turn 3 runs (section 4's D = 16, h = 4)


def mapping(function: Any) -> Any:
    return lambda: checks.check_kv_head_function(function)


def repeated(answer: Any) -> Any:
    return lambda: checks.check_repeat_kv(answer, KEYS, group_size=G)


def llama(answer: Any) -> Any:
    return lambda: checks.check_cache_bytes(answer, LLAMA_405B, tokens=32768, batch=4)


def pool(function: Any) -> Any:
    return lambda: checks.check_pool_kv_columns(function)


def mistral(answer: Any) -> Any:
    return lambda: checks.check_cache_bytes(answer, MISTRAL, tokens=6000, batch=12, bytes_per_element=1)


def pool_right(w: Any, heads: int, kv_heads: int) -> Any:
    D, width = w.shape
    return w.reshape(D, kv_heads, heads // kv_heads, width // heads).mean(axis=2).reshape(D, -1)


def pool_d_hard_coded(w: Any, heads: int, kv_heads: int) -> Any:
    return w.reshape(5, kv_heads, heads // kv_heads, -1).mean(axis=2).reshape(5, -1)  # D = 5 of the first size


def pool_notebook_d_h(w: Any, heads: int, kv_heads: int) -> Any:
    D = w.shape[0]
    return w.reshape(D, kv_heads, heads // kv_heads, NOTEBOOK_D_H).mean(axis=2).reshape(D, -1)


def pool_loop_over_heads(w: Any, heads: int, kv_heads: int) -> Any:
    """Averages heads j, j + h_kv, ... (the tiled groups), written as a loop."""
    d_h, g = w.shape[1] // heads, heads // kv_heads
    blocks = [np.mean([w[:, (j + i * kv_heads) * d_h : (j + i * kv_heads + 1) * d_h] for i in range(g)], axis=0)
              for j in range(kv_heads)]
    return np.concatenate(blocks, axis=1).astype(w.dtype)


MISTAKES: list[Mistake] = [
    # ----- Your turn 1: which K/V head each query head reads -------------------------------------------
    Mistake(
        "06 YT1 K/V head function",
        "calls kv_head_of_query",
        mapping(lambda h, h_kv: gqa_numpy.kv_head_of_query(h, h_kv)),
        "calls the library's kv_head_of_query",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "the tiled order i % h_kv",
        mapping(lambda h, h_kv: np.arange(h) % h_kv),
        "tiled order",
    ),
    Mistake("06 YT1 K/V head function", "i // h_kv", mapping(lambda h, h_kv: np.arange(h) // h_kv), "divided by h_kv"),
    Mistake(
        "06 YT1 K/V head function",
        "numbered from 1",
        mapping(lambda h, h_kv: np.arange(h) // (h // h_kv) + 1),
        "numbered the K/V heads from 1",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "whole floats from np.floor(i / g)",
        mapping(lambda h, h_kv: np.floor(np.arange(h) / (h // h_kv))),
        "these are floats (dtype float64)",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "whole floats from i / g with a list",
        mapping(lambda h, h_kv: [float(i // (h // h_kv)) for i in range(h)]),
        "these are floats",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "the lesson's h = 8, h_kv = 2 hard-coded",
        mapping(lambda h, h_kv: [0, 0, 0, 0, 1, 1, 1, 1]),
        "it looks like h=8 and g=4 is written into your function",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "g = 4 hard-coded",
        mapping(lambda h, h_kv: np.arange(h) // 4),
        "g=4 is written into your function",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "one entry per K/V head",
        mapping(lambda h, h_kv: np.arange(h_kv)),
        "one entry per K/V head",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "reversed order",
        mapping(lambda h, h_kv: (np.arange(h) // (h // h_kv))[::-1]),
        "the order is reversed",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "divided by h",
        mapping(lambda h, h_kv: np.arange(h) // h),
        "you divided by h=12",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "each K/V head repeated h_kv times (blind trial)",
        mapping(lambda h, h_kv: np.repeat(np.arange(h_kv), h_kv)),
        "you repeated each K/V head h_kv=3 times",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "each K/V head repeated h times",
        mapping(lambda h, h_kv: np.repeat(np.arange(h_kv), h)),
        "you repeated each K/V head h=12 times",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "// 2 hard-coded (blind trial)",
        mapping(lambda h, h_kv: np.arange(h) // 2),
        "g=2 is written into your function",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "the notebook's g (1) read from a global",
        mapping(lambda h, h_kv: np.arange(h) // 1),
        "g=1 is written into your function",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "a column of shape (h, 1) (blind trial 2)",
        mapping(lambda h, h_kv: (np.arange(h) // (h // h_kv))[:, None]),
        "integers, but of shape (12, 1)",
    ),
    Mistake(
        "06 YT1 K/V head function",
        "a nested list, one per row",
        mapping(lambda h, h_kv: [[i // (h // h_kv)] for i in range(h)]),
        "integers, but of shape (12, 1)",
    ),
    # ----- Your turn 2: K/V heads repeated for the query heads -----------------------------------------
    Mistake("06 YT2 repeat K/V", "np.tile", repeated(np.tile(KEYS, (1, G, 1, 1))), "K/V heads tiled, 0, 1, .., 0, 1"),
    Mistake(
        "06 YT2 repeat K/V",
        "np.concatenate of copies (a tile)",
        repeated(np.concatenate([KEYS] * G, axis=1)),
        "K/V heads tiled, 0, 1, .., 0, 1",
    ),
    Mistake(
        "06 YT2 repeat K/V",
        "torch .repeat (a tile)",
        repeated(torch.from_numpy(KEYS).repeat(1, G, 1, 1)),
        "K/V heads tiled, 0, 1, .., 0, 1",
    ),
    Mistake("06 YT2 repeat K/V", "repeated along the tokens", repeated(np.repeat(KEYS, G, axis=2)), "token axis S"),
    Mistake("06 YT2 repeat K/V", "repeated along the batch", repeated(np.repeat(KEYS, G, axis=0)), "batch axis B"),
    Mistake("06 YT2 repeat K/V", "np.repeat without an axis", repeated(np.repeat(KEYS, G)), "without an axis flattens"),
    Mistake(
        "06 YT2 repeat K/V",
        "repeated h_kv times",
        repeated(np.repeat(KEYS, 2, axis=1)),
        "repeated each head h_kv=2 times",
    ),
    Mistake(
        "06 YT2 repeat K/V",
        "repeated on the last axis, then reshaped (blind trial 2)",
        repeated(np.repeat(KEYS, G, axis=-1).reshape(1, 2 * G, 5, 3)),
        "you repeated along the feature axis d_h",
    ),
    Mistake(
        "06 YT2 repeat K/V",
        "repeated without an axis, then reshaped",
        repeated(np.repeat(KEYS, G).reshape(1, 2 * G, 5, 3)),
        "np.repeat without an axis does the same",
    ),
    Mistake(
        "06 YT2 repeat K/V",
        "repeated along the tokens, then reshaped",
        repeated(np.repeat(KEYS, G, axis=2).reshape(1, 2 * G, 5, 3)),
        "you repeated along the token axis S (axis 2) and reshaped",
    ),
    Mistake("06 YT2 repeat K/V", "the keys unchanged", repeated(KEYS), "still the h_kv=2 K/V heads"),
    Mistake(
        "06 YT2 repeat K/V",
        ".T-style swap of the last two axes",
        repeated(np.repeat(KEYS, G, axis=1).swapaxes(-1, -2)),
        "the last two axes are swapped",
    ),
    # ----- Your turn 3: mean-pooled K/V columns ------------------------------------------------------------
    Mistake(
        "06 YT3 mean pooling",
        "calls pool_kv_columns",
        pool(lambda w, h, k: gqa_numpy.pool_kv_columns(w, h, k)),
        "calls the library's pool_kv_columns",
    ),
    Mistake(
        "06 YT3 mean pooling",
        "first head of each group",
        pool(lambda w, h, k: w.reshape(w.shape[0], k, h // k, -1)[:, :, 0].reshape(w.shape[0], -1)),
        "kept the first head of each group",
    ),
    Mistake(
        "06 YT3 mean pooling",
        "sum instead of mean",
        pool(lambda w, h, k: w.reshape(w.shape[0], k, h // k, -1).sum(axis=2).reshape(w.shape[0], -1)),
        "added up the heads",
    ),
    Mistake(
        "06 YT3 mean pooling",
        "tiled groups",
        pool(lambda w, h, k: w.reshape(w.shape[0], h // k, k, -1).mean(axis=1).reshape(w.shape[0], -1)),
        "tiled groups",
    ),
    Mistake("06 YT3 mean pooling", "tiled groups, as a loop", pool(pool_loop_over_heads), "tiled groups"),
    Mistake(
        "06 YT3 mean pooling",
        "pooled heads not side by side",
        pool(lambda w, h, k: w.reshape(w.shape[0], k, h // k, -1).mean(axis=2)),
        "put the heads side by side",
    ),
    Mistake(
        "06 YT3 mean pooling",
        "the first h_kv heads kept",
        pool(lambda w, h, k: w[:, : k * (w.shape[1] // h)].copy()),
        "kept the columns of the first h_kv heads",
    ),
    Mistake(
        "06 YT3 mean pooling",
        "mean of all heads",
        pool(lambda w, h, k: w.reshape(w.shape[0], h, -1).mean(axis=1)),
        "averaged all h heads into one",
    ),
    Mistake(
        "06 YT3 mean pooling",
        ".mean(axis=1) after the reshape (blind trial)",
        pool(lambda w, h, k: w.reshape(w.shape[0], k, h // k, -1).mean(axis=1).reshape(w.shape[0], -1)),
        "you averaged over axis 1, the h_kv axis",
    ),
    Mistake(
        "06 YT3 mean pooling",
        ".mean(axis=1), not put side by side",
        pool(lambda w, h, k: w.reshape(w.shape[0], k, h // k, -1).mean(axis=1)),
        "you averaged over axis 1, the h_kv axis",
    ),
    Mistake(
        "06 YT3 mean pooling",
        "mean over the features of each head",
        pool(lambda w, h, k: w.reshape(w.shape[0], k, h // k, -1).mean(axis=3).reshape(w.shape[0], -1)),
        "averaged the d_h features inside each head",
    ),
    Mistake("06 YT3 mean pooling", "D hard-coded", pool(pool_d_hard_coded), "take D and d_h from w.shape"),
    Mistake("06 YT3 mean pooling", "the notebook's d_h", pool(pool_notebook_d_h), "not from the notebook's variables"),
    Mistake(
        "06 YT3 mean pooling",
        "a torch tensor returned",
        pool(lambda w, h, k: torch.from_numpy(pool_right(w, h, k))),
        "must return a NumPy array",
    ),
    Mistake(
        "06 YT3 mean pooling",
        "cast to float64",
        pool(lambda w, h, k: pool_right(w, h, k).astype(np.float64)),
        "returned float64",
    ),
    # ----- Your turn 4: Llama 3.1 405B's cache -----------------------------------------------------------
    Mistake(
        "06 YT4 Llama 3.1 405B cache", "h = 128 query heads", llama(LLAMA_RIGHT * 16), "you used h=128 query heads"
    ),
    Mistake("06 YT4 Llama 3.1 405B cache", "no factor 2 for K and V", llama(LLAMA_RIGHT // 2), "factor 2"),
    Mistake("06 YT4 Llama 3.1 405B cache", "one layer", llama(LLAMA_RIGHT // 126), "one layer's share"),
    Mistake(
        "06 YT4 Llama 3.1 405B cache", "elements, not bytes", llama(LLAMA_RIGHT // 2), "you counted elements, not bytes"
    ),
    Mistake("06 YT4 Llama 3.1 405B cache", "one conversation", llama(LLAMA_RIGHT // 4), "the cache of one sequence"),
    Mistake("06 YT4 Llama 3.1 405B cache", "in GiB", llama(LLAMA_RIGHT / 2**30), "in GiB"),
    Mistake("06 YT4 Llama 3.1 405B cache", "a whole float from /", llama(float(LLAMA_RIGHT)), "is a float"),
    Mistake(
        "06 YT4 Llama 3.1 405B cache",
        "d_h = hidden_size / h_kv = 2048",
        llama(2 * 126 * 8 * 2048 * 32768 * 4 * 2),
        "(or the full width D = h x d_h)",
    ),
    Mistake(
        "06 YT4 Llama 3.1 405B cache", "float32, 4 bytes", llama(LLAMA_RIGHT * 2), "4 bytes per element (float32)"
    ),
    Mistake("06 YT4 Llama 3.1 405B cache", "16 bits for 2 bytes", llama(LLAMA_RIGHT * 8), "that is the size in bits"),
    Mistake(
        "06 YT4 Llama 3.1 405B cache", "one token of one sequence", llama(LLAMA_RIGHT // (32768 * 4)), "one token"
    ),
    Mistake(
        "06 YT4 Llama 3.1 405B cache", "the model width D as d_h", llama(LLAMA_RIGHT * 128), "model width D = 16384"
    ),
    # ----- Your turn 5: Mistral's windowed 8-bit cache -----------------------------------------------------
    Mistake(
        "06 YT5 Mistral cache", "every token counted", mistral(MISTRAL_RIGHT // 4096 * 6000), "you counted all 6000"
    ),
    Mistake(
        "06 YT5 Mistral cache", "window counted as W - 1", mistral(MISTRAL_RIGHT // 4096 * 4095), "the window minus one"
    ),
    Mistake(
        "06 YT5 Mistral cache", "window counted as W + 1", mistral(MISTRAL_RIGHT // 4096 * 4097), "W + 1 = 4097 tokens"
    ),
    Mistake(
        "06 YT5 Mistral cache", "h = 32 instead of h_kv", mistral(MISTRAL_RIGHT * 4), "most likely you used h=32 query"
    ),
    Mistake("06 YT5 Mistral cache", "one conversation", mistral(MISTRAL_RIGHT // 12), "the cache of one sequence"),
    Mistake("06 YT5 Mistral cache", "no factor 2", mistral(MISTRAL_RIGHT // 2), "factor 2"),
    Mistake(
        "06 YT5 Mistral cache",
        "2 bytes per element, as in 16-bit",
        mistral(MISTRAL_RIGHT * 2),
        "most likely you took 2 bytes",
    ),
    Mistake(
        "06 YT5 Mistral cache", "float32, 4 bytes", mistral(MISTRAL_RIGHT * 4), "less likely, you took 4 bytes per"
    ),
    Mistake("06 YT5 Mistral cache", "8 bits for 1 byte", mistral(MISTRAL_RIGHT * 8), "that is the size in bits"),
    Mistake("06 YT5 Mistral cache", "in GiB", mistral(MISTRAL_RIGHT / 2**30), "in GiB"),
]

RIGHT: list[RightAnswer] = [
    RightAnswer("06 YT1 K/V head function", "np.arange(h) // g", mapping(lambda h, h_kv: np.arange(h) // (h // h_kv))),
    RightAnswer(
        "06 YT1 K/V head function",
        "np.repeat(np.arange(h_kv), g)",
        mapping(lambda h, h_kv: np.repeat(np.arange(h_kv), h // h_kv)),
    ),
    RightAnswer(
        "06 YT1 K/V head function", "a plain list", mapping(lambda h, h_kv: [i // (h // h_kv) for i in range(h)])
    ),
    RightAnswer(
        "06 YT1 K/V head function", "a torch tensor", mapping(lambda h, h_kv: torch.arange(h) // (h // h_kv))
    ),
    RightAnswer("06 YT2 repeat K/V", "np.repeat on axis 1", repeated(np.repeat(KEYS, G, axis=1))),
    RightAnswer("06 YT2 repeat K/V", "ndarray.repeat", repeated(KEYS.repeat(G, axis=1))),
    RightAnswer(
        "06 YT2 repeat K/V", "stack then reshape", repeated(np.stack([KEYS] * G, axis=2).reshape(1, 2 * G, 5, 3))
    ),
    RightAnswer(
        "06 YT2 repeat K/V", "torch repeat_interleave", repeated(torch.from_numpy(KEYS).repeat_interleave(G, dim=1))
    ),
    RightAnswer("06 YT3 mean pooling", "reshape and mean", pool(pool_right)),
    RightAnswer(
        "06 YT3 mean pooling",
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
    RightAnswer("06 YT4 Llama 3.1 405B cache", "the formula", llama(LLAMA_RIGHT)),
    RightAnswer("06 YT4 Llama 3.1 405B cache", "a NumPy integer", llama(np.int64(LLAMA_RIGHT))),
    RightAnswer(
        "06 YT4 Llama 3.1 405B cache", "kv_cache.cache_bytes", llama(kv_cache.cache_bytes(LLAMA_405B, 32768, 4))
    ),
    RightAnswer("06 YT5 Mistral cache", "min(T, W) tokens", mistral(MISTRAL_RIGHT)),
    RightAnswer(
        "06 YT5 Mistral cache",
        "kv_cache.cache_bytes (the statement does not forbid it)",
        mistral(kv_cache.cache_bytes(MISTRAL, 6000, 12, bytes_per_element=1)),
    ),
]


@pytest.mark.parametrize("row", MISTAKES, ids=[row_id(row) for row in MISTAKES])
def test_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=[row_id(row) for row in RIGHT])
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
