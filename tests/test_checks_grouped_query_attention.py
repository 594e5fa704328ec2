"""Quick-check functions of lesson 06: a blank answer is "not answered yet", the right answer passes
(NumPy and torch), each known mistake gets its own message, and no "not yet" gives the answer away."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from lessons_lib import gqa_numpy, kv_cache
from lessons_lib.checks import Verdict
from lessons_lib.checks.grouped_query_attention import (
    check_bytes_per_token,
    check_cache_bytes,
    check_kv_head_function,
    check_pool_kv_columns,
    check_repeat_kv,
)

# Llama 3 8B: 32 layers, h = 32, h_kv = 8, d_h = 128, 2 bytes per element.
SIZES = {"layers": 32, "heads": 32, "kv_heads": 8, "head_dim": 128}
RIGHT = 2 * 32 * 8 * 128 * 2
# Llama 2 70B: 80 layers, h = 64, h_kv = 8, d_h = 8192 / 64 = 128; 16 sequences of 4096 tokens.
LLAMA2_70B = kv_cache.MODELS["Llama 2 70B"]
SERVED = {"tokens": 4096, "batch": 16}
RIGHT_70B = 2 * 80 * 8 * 128 * 4096 * 16 * 2


def not_yet(verdict: Verdict, right: Any) -> str:
    """The message of a "not yet" verdict, after checking that it does not contain ``right``."""
    assert not verdict.ok and verdict.answered, verdict
    assert str(verdict).startswith(f"[{verdict.question}] not yet: ")
    shown = str(right.tolist() if isinstance(right, np.ndarray) else right)
    assert not re.search(rf"(?<![\d.]){re.escape(shown)}(?![\d.])", verdict.message), verdict
    return verdict.message


def blank(verdict: Verdict) -> str:
    assert not verdict.ok and not verdict.answered, verdict
    assert str(verdict).startswith(f"[{verdict.question}] not answered yet: ")
    return verdict.message


# ----- bytes per token (the demonstration in the notebook) ------------------------------------
def test_bytes_right_answer() -> None:
    verdict = check_bytes_per_token(RIGHT, **SIZES)
    assert verdict.ok and "131072" in verdict.message
    assert check_bytes_per_token(np.int64(RIGHT), **SIZES).ok
    assert check_bytes_per_token(torch.tensor(RIGHT), **SIZES).ok
    floated = not_yet(check_bytes_per_token(float(RIGHT), **SIZES), RIGHT)  # issue 19: a count is an int
    assert "is a float, and the question asks for an int" in floated


def test_bytes_known_mistakes() -> None:
    assert "factor 2" in not_yet(check_bytes_per_token(RIGHT // 2, **SIZES), RIGHT)
    assert "h=32 query heads" in not_yet(check_bytes_per_token(RIGHT * 4, **SIZES), RIGHT)
    both = not_yet(check_bytes_per_token(RIGHT * 2, **SIZES), RIGHT)
    assert "instead of h_kv=8 and left out the factor 2" in both
    assert "32 layers" in not_yet(check_bytes_per_token(RIGHT // 32, **SIZES), RIGHT)
    assert "model width D = 4096" in not_yet(check_bytes_per_token(RIGHT * 32, **SIZES), RIGHT)
    in_float32 = not_yet(check_bytes_per_token(RIGHT // 2, **SIZES, bytes_per_element=4), 2 * RIGHT)
    assert "elements, not bytes" in in_float32 and "factor 2" not in in_float32
    assert "factor by factor" in not_yet(check_bytes_per_token(12345, **SIZES), RIGHT)
    assert "whole number" in not_yet(check_bytes_per_token("lots", **SIZES), RIGHT)
    assert "whole number" in not_yet(check_bytes_per_token(RIGHT + 0.5, **SIZES), RIGHT)


def test_bytes_mha_model_has_no_heads_mistake() -> None:
    verdict = check_bytes_per_token(2 * 32 * 32 * 128 * 2, layers=32, heads=32, kv_heads=32, head_dim=128)
    assert verdict.ok
    half = check_bytes_per_token(32 * 32 * 128 * 2, layers=32, heads=32, kv_heads=32, head_dim=128)
    assert "factor 2" in half.message and "query heads" not in half.message


# ----- a real model's cache --------------------------------------------------------------------
def test_cache_blank_and_right() -> None:
    assert "number of bytes" in blank(check_cache_bytes(None, LLAMA2_70B, **SERVED))
    verdict = check_cache_bytes(RIGHT_70B, LLAMA2_70B, **SERVED)
    assert verdict.ok and str(verdict).startswith("[Llama 2 70B cache] correct")
    assert check_cache_bytes(torch.tensor(RIGHT_70B), LLAMA2_70B, **SERVED).ok
    assert check_cache_bytes(np.int64(RIGHT_70B), LLAMA2_70B, **SERVED).ok
    assert kv_cache.cache_bytes(LLAMA2_70B, SERVED["tokens"], SERVED["batch"]) == RIGHT_70B  # same figure


@pytest.mark.parametrize(
    "wrong, phrase",
    [
        (RIGHT_70B * 8, "h=64 query heads"),
        (RIGHT_70B * 4, "instead of h_kv=8 and left out the factor 2"),
        (RIGHT_70B * 64, "model width D = 8192"),
        (RIGHT_70B // 80, "one layer's share"),
        (RIGHT_70B // 4096, "cache of one token; each sequence"),
        (RIGHT_70B // 16, "cache of one sequence"),
        (RIGHT_70B // (4096 * 16), "one token of one sequence"),
        (20, "size in GiB"),
        (20 * 1024, "size in MiB"),
        (21.47483648, "looks like the size in GB"),
        (1.25 * 16, "size in GiB"),
        (RIGHT_70B + 1, "factor by factor"),
        ("20 GiB", "whole number"),
    ],
)
def test_cache_known_mistakes(wrong: Any, phrase: str) -> None:
    assert phrase in not_yet(check_cache_bytes(wrong, LLAMA2_70B, **SERVED), RIGHT_70B)


def test_cache_halved_names_both_possible_slips() -> None:
    # With 2 bytes per element, counting elements and forgetting K or V give the same number.
    message = not_yet(check_cache_bytes(RIGHT_70B // 2, LLAMA2_70B, **SERVED), RIGHT_70B)
    assert "factor 2" in message and "elements, not bytes" in message
    elements = not_yet(check_cache_bytes(RIGHT_70B // 2, LLAMA2_70B, **SERVED, bytes_per_element=4), 2 * RIGHT_70B)
    assert "elements, not bytes" in elements and "factor 2" not in elements


def test_cache_diagnoses_are_ranked_and_not_repeated() -> None:
    # x8 for Llama 2 70B: h for h_kv (g = 8) comes before bits; the two names of "bits" are one message.
    message = not_yet(check_cache_bytes(RIGHT_70B * 8, LLAMA2_70B, **SERVED), RIGHT_70B)
    assert message.index("h=64 query heads") < message.index("size in bits")
    assert message.count("size in bits") == 1 and "that is bits" not in message  # one message for both names
    # An 8-bit cache: 16-bit elements is its own diagnosis, not a list of guesses.
    mistral = kv_cache.MODELS["Mistral 7B v0.1"]
    right = 2 * 32 * 8 * 128 * 4096 * 12
    two_bytes = not_yet(check_cache_bytes(right * 2, mistral, tokens=6000, batch=12, bytes_per_element=1), right)
    assert two_bytes.startswith(f"{right * 2} is not right: most likely you took 2 bytes per element (16-bit)")
    assert "; less likely, you used h=32" in two_bytes  # the rarer double slip comes second, marked as such
    four_times = not_yet(check_cache_bytes(right * 4, mistral, tokens=6000, batch=12, bytes_per_element=1), right)
    assert four_times.index("most likely you used h=32") < four_times.index("less likely, you took 4 bytes")
    assert "1 bytes" not in two_bytes


def test_cache_rejects_a_bad_preset() -> None:
    with pytest.raises(TypeError, match="ModelPreset"):
        check_cache_bytes(RIGHT_70B, "Llama 2 70B", **SERVED)  # type: ignore[arg-type]


# ----- group size ------------------------------------------------------------------------------
# ----- a sliding window: Mistral 7B v0.1 keeps at most 4096 tokens per sequence ---------------
MISTRAL = kv_cache.MODELS["Mistral 7B v0.1"]
RIGHT_WINDOW = 2 * 32 * 8 * 128 * 4096 * 3 * 2  # 3 sequences of 32768 tokens, only 4096 of each kept


def test_cache_with_a_window_right_and_forgotten() -> None:
    verdict = check_cache_bytes(RIGHT_WINDOW, MISTRAL, tokens=32768, batch=3)
    assert verdict.ok and "min(32768, window 4096) = 4096 tokens" in verdict.message
    message = not_yet(check_cache_bytes(RIGHT_WINDOW * 8, MISTRAL, tokens=32768, batch=3), RIGHT_WINDOW)
    assert "you counted all 32768 tokens" in message and "sliding window of 4096" in message
    assert "one token" in not_yet(check_cache_bytes(RIGHT_WINDOW // 4096, MISTRAL, tokens=32768, batch=3),
                                  RIGHT_WINDOW)
    w_minus_1 = not_yet(check_cache_bytes(RIGHT_WINDOW // 4096 * 4095, MISTRAL, tokens=32768, batch=3), RIGHT_WINDOW)
    assert "you kept 4095 tokens, the window minus one" in w_minus_1 and "includes the query's own token" in w_minus_1


def test_cache_shorter_than_the_window_counts_every_token() -> None:
    right = 2 * 32 * 8 * 128 * 1000 * 2
    assert check_cache_bytes(right, MISTRAL, tokens=1000).ok
    message = not_yet(check_cache_bytes(2 * 32 * 8 * 128 * 4096 * 2, MISTRAL, tokens=1000), right)
    assert "window" not in message  # below the window nothing is dropped: no window diagnosis


# ----- which K/V head each query head reads ---------------------------------------------------
def mapping_right(heads: int, kv_heads: int) -> Any:
    return np.arange(heads) // (heads // kv_heads)


def mapping_tiled(heads: int, kv_heads: int) -> Any:
    return np.arange(heads) % kv_heads


def mapping_by_h_kv(heads: int, kv_heads: int) -> Any:
    return np.arange(heads) // kv_heads


def mapping_blank(heads: int, kv_heads: int) -> Any:
    """Which K/V head each query head reads."""
    ...


def test_kv_head_function() -> None:
    assert "write the body" in blank(check_kv_head_function(mapping_blank))
    assert check_kv_head_function(mapping_right).ok
    assert check_kv_head_function(lambda h, h_kv: (np.arange(h) // (h // h_kv)).tolist()).ok
    assert check_kv_head_function(lambda h, h_kv: torch.arange(h) // (h // h_kv)).ok
    assert check_kv_head_function(lambda h, h_kv: np.repeat(np.arange(h_kv), h // h_kv)).ok
    right = mapping_right(12, 3)  # the first size tried: g=4, h_kv=3 and 2 all differ
    tiled = not_yet(check_kv_head_function(mapping_tiled), right)
    assert tiled.startswith("for h=12, h_kv=3: ") and "tiled order" in tiled
    assert "divided by h_kv=3" in not_yet(check_kv_head_function(mapping_by_h_kv), right)
    assert "from 1" in not_yet(check_kv_head_function(lambda h, h_kv: mapping_right(h, h_kv) + 1), right)
    floats = not_yet(check_kv_head_function(lambda h, h_kv: np.arange(h) / (h // h_kv) // 1), right)
    assert "these are floats (dtype float64)" in floats and "asks for integers" in floats
    floats = not_yet(check_kv_head_function(lambda h, h_kv: [float(i // (h // h_kv)) for i in range(h)]), right)
    assert "these are floats" in floats

    only_8_2 = not_yet(check_kv_head_function(lambda h, h_kv: [0, 0, 0, 0, 1, 1, 1, 1]), right)
    assert only_8_2.startswith("for h=12, h_kv=3: [0, 0, 0, 0, 1, 1, 1, 1] is the right answer for h=8, g=4")
    two = not_yet(check_kv_head_function(lambda h, h_kv: np.arange(h) // 2), right)  # "// 2" is not "// h_kv"
    assert "g=2 is written into your function" in two and "divided by h_kv" not in two
    by_h_kv_times = not_yet(check_kv_head_function(lambda h, h_kv: np.repeat(np.arange(h_kv), h_kv)), right)
    assert "you repeated each K/V head h_kv=3 times" in by_h_kv_times and "written into" not in by_h_kv_times
    g_written_in = not_yet(check_kv_head_function(lambda h, h_kv: np.arange(h) // 4), mapping_right(6, 3))
    assert "g=4 is written into your function" in g_written_in and "compute g from heads and kv_heads" in g_written_in
    raised = not_yet(check_kv_head_function(lambda h, h_kv: np.arange(h).reshape(5, -1)[0]), right)
    assert raised.startswith("for h=12, h_kv=3: ") and "take every size from the function's arguments" in raised
    assert "returned None" in not_yet(check_kv_head_function(lambda h, h_kv: print(end="")), right)
    assert "raised ZeroDivisionError" in not_yet(check_kv_head_function(lambda h, h_kv: h // 0), right)
    assert "integers" in not_yet(check_kv_head_function(lambda h, h_kv: np.arange(h) / 4), right)
    assert "expected a function" in not_yet(check_kv_head_function([0, 0, 1, 1]), right)


def test_kv_head_function_refuses_the_library() -> None:
    def by_repeat(h: int, h_kv: int) -> Any:
        return gqa_numpy.repeat_kv(np.arange(h_kv, dtype=float).reshape(1, h_kv, 1, 1), h // h_kv).ravel()

    for function in (lambda h, h_kv: gqa_numpy.kv_head_of_query(h, h_kv), by_repeat):
        message = not_yet(check_kv_head_function(function), mapping_right(8, 2))
        assert "your function calls the library's" in message and "asks you to write" in message


# ----- repeating K/V heads -------------------------------------------------------------------
KV = np.random.default_rng(0).normal(size=(2, 2, 4, 5))  # (B, h_kv, S, d_h), g = 3 below


def test_repeat_kv_blank_and_right() -> None:
    hint = blank(check_repeat_kv(None, KV, 3))
    assert "(B, h, S, d_h)" in hint and "repeat" not in hint
    assert check_repeat_kv(np.repeat(KV, 3, axis=1), KV, 3).ok
    assert check_repeat_kv(torch.from_numpy(KV).repeat_interleave(3, dim=1), KV, 3).ok
    assert check_repeat_kv(torch.from_numpy(KV).float().repeat_interleave(3, dim=1), KV, 3).ok


@pytest.mark.parametrize(
    "wrong, phrase",
    [
        (np.tile(KV, (1, 3, 1, 1)), "K/V heads tiled"),
        (torch.from_numpy(KV).repeat(1, 3, 1, 1), "K/V heads tiled"),
        (np.repeat(KV, 3, axis=2), "token axis S"),
        (np.repeat(KV, 3), "without an axis"),
        (np.repeat(KV, 2, axis=1), "h_kv=2 times"),
        (KV, "still the h_kv=2 K/V heads"),
        (np.repeat(KV, 3, axis=1) + 1, "numbers differ"),
        (np.ones((2, 5)), "expected shape"),
        ("keys", "array of numbers"),
    ],
)
def test_repeat_kv_known_mistakes(wrong: Any, phrase: str) -> None:
    assert phrase in not_yet(check_repeat_kv(wrong, KV, 3), "never shown")


# ----- mean-pooling a multi-head checkpoint -----------------------------------------------------
def pool_right(w: Any, heads: int, kv_heads: int) -> Any:
    D, g = w.shape[0], heads // kv_heads
    return w.reshape(D, kv_heads, g, -1).mean(axis=2).reshape(D, -1)


def pool_blank(w: Any, heads: int, kv_heads: int) -> Any:
    """Mean of each group's K/V columns."""
    ...


def pool_torch(w: Any, heads: int, kv_heads: int) -> Any:
    t = torch.from_numpy(w)
    return t.reshape(t.shape[0], kv_heads, heads // kv_heads, -1).mean(dim=2).flatten(1)


def pool_in_place(w: Any, heads: int, kv_heads: int) -> Any:
    w *= 2  # a learner who edits the input must not change the checker's reference
    return pool_right(w, heads, kv_heads) / 2


def test_pool_blank_and_right() -> None:
    assert "(D, h_kv * d_h)" in blank(check_pool_kv_columns(pool_blank))
    assert check_pool_kv_columns(pool_right).ok
    assert check_pool_kv_columns(pool_in_place).ok
    torch_out = not_yet(check_pool_kv_columns(pool_torch), "never shown")
    assert "must return a NumPy array, got torch tensor" in torch_out


def test_pool_refuses_the_library_and_a_changed_dtype() -> None:
    library = not_yet(check_pool_kv_columns(lambda w, h, k: gqa_numpy.pool_kv_columns(w, h, k)), "never shown")
    assert "your function calls the library's pool_kv_columns" in library

    def as_float64(w: Any, heads: int, kv_heads: int) -> Any:
        return pool_right(w, heads, kv_heads).astype(np.float64)

    message = not_yet(check_pool_kv_columns(as_float64), "never shown")
    assert message.startswith("for D=7, h=4, h_kv=1, d_h=2 (float32 input)") and "returned float64" in message

    def fixed_d(w: Any, heads: int, kv_heads: int) -> Any:
        return w.reshape(5, kv_heads, heads // kv_heads, -1).mean(axis=2).reshape(5, -1)

    fixed = not_yet(check_pool_kv_columns(fixed_d), "never shown")
    assert "raised ValueError" in fixed and "right for the first size but for D=3" in fixed


def per_head(w: Any, heads: int, kv_heads: int) -> Any:
    return w.reshape(w.shape[0], kv_heads, heads // kv_heads, -1)  # (D, h_kv, g, d_h)


POOL_MISTAKES: list[tuple[Callable[[Any, int, int], Any], str]] = [
    (lambda w, h, k: per_head(w, h, k)[:, :, 0].reshape(w.shape[0], -1), "first head of each group"),
    (lambda w, h, k: w[:, : k * (w.shape[1] // h)], "columns of the first h_kv heads"),
    (lambda w, h, k: per_head(w, h, k).sum(axis=2).reshape(w.shape[0], -1), "added up"),
    (lambda w, h, k: w.reshape(w.shape[0], h // k, k, -1).mean(axis=1).reshape(w.shape[0], -1), "tiled groups"),
    (lambda w, h, k: w.reshape(w.shape[0], -1, h // k).mean(axis=2), "neighbouring columns"),
    (lambda w, h, k: w.reshape(w.shape[0], h, -1).mean(axis=1), "all h heads into one"),
    (lambda w, h, k: per_head(w, h, k).mean(axis=2), "shape (D, h_kv, d_h)"),
    (lambda w, h, k: np.repeat(per_head(w, h, k).mean(axis=2), h // k, axis=1).reshape(w.shape[0], -1),
     "expanded the pooled heads back"),
    (lambda w, h, k: w.mean(axis=0), "expected shape (D, h_kv * d_h) = (5, 4)"),
    (lambda w, h, k: pool_right(w, h, k) + 1, "differ from the mean"),
    (lambda w, h, k: str(w.shape), "array of numbers"),
    (lambda w, h, k: print(end=""), "returned None"),
    (lambda w, h, k: w.reshape(3, 7), "raised ValueError"),
]


@pytest.mark.parametrize("function, phrase", POOL_MISTAKES, ids=[p for _, p in POOL_MISTAKES])
def test_pool_known_mistakes(function: Callable[[Any, int, int], Any], phrase: str) -> None:
    assert phrase in not_yet(check_pool_kv_columns(function), "never shown")


def test_pool_each_mistake_has_its_own_message() -> None:
    messages = [check_pool_kv_columns(function).message for function, _ in POOL_MISTAKES[:8]]
    assert len(set(messages)) == len(messages)


def test_pool_mistake_in_a_later_size_is_reported_with_that_size() -> None:
    def mqa_forgotten(w: Any, heads: int, kv_heads: int) -> Any:
        return pool_right(w, heads, kv_heads) if kv_heads > 1 else w[:, :2]

    assert not_yet(check_pool_kv_columns(mqa_forgotten), "never shown").startswith("for D=7, h=4, h_kv=1, d_h=2")


# ----- no learner input makes a checker raise ---------------------------------------------------
class Awkward:
    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no array here")


ODD = [None, "4", 4.5, float("nan"), True, [1, [2, 3]], {"a": 1}, Awkward(), np.array(["x"]), 3 + 1j, [], print]

CHECKERS: list[Callable[[Any], Verdict]] = [
    lambda a: check_bytes_per_token(a, **SIZES),
    lambda a: check_cache_bytes(a, LLAMA2_70B, **SERVED),
    lambda a: check_repeat_kv(a, KV, 3),
    check_kv_head_function,
    check_pool_kv_columns,
]


@pytest.mark.parametrize("answer", ODD, ids=[type(a).__name__ for a in ODD])
@pytest.mark.parametrize("checker", range(len(CHECKERS)))
def test_odd_answers_never_raise(checker: int, answer: Any) -> None:
    verdict = CHECKERS[checker](answer)
    assert isinstance(verdict, Verdict) and not verdict.ok


@pytest.mark.parametrize("checker", [check_kv_head_function, check_pool_kv_columns])
@pytest.mark.parametrize("returned", ODD[1:], ids=[type(a).__name__ for a in ODD[1:]])
def test_odd_returns_never_raise(checker: Callable[[Any], Verdict], returned: Any) -> None:
    def odd(*args: Any) -> Any:
        return args and returned  # not a constant: a body of only `return <constant>` counts as blank

    assert not checker(odd).ok


def test_a_function_returning_a_constant_reads_as_blank() -> None:
    # The shared `is_blank` cannot tell `return None` from `...`; both are "not answered yet".
    assert not check_kv_head_function(lambda h, h_kv: None).answered
