"""Lesson 10's typical mistakes: each wrong answer a learner is likely to hand in to a "Your turn" of
"A real model's heads", and the words its diagnosis must contain (format in `mistake_table`).

Every checker is tried on inputs of its own (random causal weights, short texts, two small random
models), so no row needs the shipped weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id
from numpy.typing import NDArray

from lessons_lib import block_numpy, cache_ladder, mha_numpy, shakespeare
from lessons_lib.checks import real_model_heads
from lessons_lib.checks.real_model_heads import (
    check_bits_function,
    check_decode_step_function,
    check_last_break_function,
    check_latent_factors_function,
    check_previous_score_function,
)
from lessons_lib.kv_cache import KVCache

Floats = NDArray[np.floating[Any]]


# ---- Your turn 1: the cached decoding step ---------------------------------------------------------
def _decoder(position: str = "t", append: bool = True, scale: str = "d_h", norm1: bool = True,
             attention_residual: bool = True, ffn_residual: bool = True, parallel: bool = False,
             final_norm: bool = True, output: str = "logits", repeat: str = "attend",
             query_softmax: bool = False, query: str = "z", norm2_twice: bool = False) -> Callable[..., Any]:
    """A cached decoding step written out by hand, right by default, with one mistake switched on."""

    def step(model: shakespeare.ShakespeareModel, token: int, cache: KVCache) -> Any:
        t = len(cache)
        if position == "none":  # the position embedding left out
            x = model.token_embedding[[[token]]].astype(np.float64)
        else:
            where = {"t": t, "0": 0, "t + 1": t + 1}[position]
            x = model.token_embedding[[[token]]] + model.position_embedding[where : where + 1]  # (1, 1, D)
        for i, block in enumerate(model.blocks):
            a = block.attention
            z = block_numpy.layer_norm(x, block.norm1_gain, block.norm1_bias) if norm1 else x
            new_k = mha_numpy.split_heads(z @ a.wk, a.kv_heads)
            new_v = mha_numpy.split_heads(z @ a.wv, a.kv_heads)
            if append:
                k, v = cache.append(i, new_k, new_v)
            else:
                k, v = new_k, new_v
            if repeat == "attend" and scale == "d_h" and not query_softmax:
                given = {"z": z, "projected": z @ a.wq, "x": x}[query]  # attend projects what it is given
                out, _ = a.attend(given, k, v)
            else:
                q = mha_numpy.split_heads(z @ a.wq, a.heads)  # (1, h, 1, d_h)
                if repeat == "tile":
                    k, v = np.tile(k, (1, a.group_size, 1, 1)), np.tile(v, (1, a.group_size, 1, 1))
                elif repeat != "none":
                    k, v = np.repeat(k, a.group_size, axis=1), np.repeat(v, a.group_size, axis=1)
                divide = {"d_h": math.sqrt(a.head_width), "none": 1.0, "D": math.sqrt(a.width), "32": math.sqrt(32),
                          "d_h plain": a.head_width}[scale]
                scores = q @ np.swapaxes(k, -1, -2) / divide  # (1, h, 1, S)
                w = mha_numpy.softmax(scores, axis=-2 if query_softmax else -1)
                out = mha_numpy.merge_heads(w @ v) @ a.wo
            before = x
            x = x + out if attention_residual else np.asarray(out, dtype=np.float64)
            fed: Any = before if parallel else x
            if norm2_twice:  # LayerNorm 2 here as well as inside block.ffn
                fed = block_numpy.layer_norm(fed, block.norm2_gain, block.norm2_bias)
            ffn = block.ffn(fed)
            x = x + ffn if ffn_residual else np.asarray(ffn, dtype=np.float64)
        final = block_numpy.layer_norm(x, model.norm_f_gain, model.norm_f_bias) if final_norm else x
        logits = final @ model.unembedding  # (1, 1, V)
        if output == "probabilities":
            return mha_numpy.softmax(logits[0, 0])
        return logits if output == "batched" else logits[0, 0]

    return step


def _library_step(model: Any, token: int, cache: KVCache) -> Any:
    return shakespeare.decode_step(model, token, cache)


def _whole_pass_step(model: Any, token: int, cache: KVCache) -> Any:
    ids = np.array([[token]])
    cache.append(0, np.zeros((1, model.config.kv_heads, 1, model.config.head_width)),
                 np.zeros((1, model.config.kv_heads, 1, model.config.head_width)))
    return shakespeare.run(model, ids)[0][0, -1]


def _masked_step(model: Any, token: int, cache: KVCache) -> Any:
    """The step with a top-left causal mask ``np.tril(ones((1, S)))``: the one query is taken for position 0."""
    t = len(cache)
    x = model.token_embedding[[[token]]] + model.position_embedding[t : t + 1]
    for i, block in enumerate(model.blocks):
        a = block.attention
        z = block_numpy.layer_norm(x, block.norm1_gain, block.norm1_bias)
        k, v = cache.append(i, mha_numpy.split_heads(z @ a.wk, a.kv_heads), mha_numpy.split_heads(z @ a.wv, a.kv_heads))
        out, _ = a.attend(z, k, v, allowed=np.tril(np.ones((1, k.shape[2]), dtype=bool)))
        x = x + out
        x = x + block.ffn(x)
    return (block_numpy.layer_norm(x, model.norm_f_gain, model.norm_f_bias) @ model.unembedding)[0, 0]


def _d_h_written_in(model: Any, token: int, cache: KVCache) -> Any:
    return _decoder(scale="32")(model, token, cache)


def _four_heads_step(model: shakespeare.ShakespeareModel, token: int, cache: KVCache) -> Any:
    """The lesson's h_kv = 4 written into the split of the new keys and values."""
    t = len(cache)
    x = model.token_embedding[[[token]]] + model.position_embedding[t : t + 1]
    for i, block in enumerate(model.blocks):
        a = block.attention
        z = block_numpy.layer_norm(x, block.norm1_gain, block.norm1_bias)
        k, v = cache.append(i, mha_numpy.split_heads(z @ a.wk, 4), mha_numpy.split_heads(z @ a.wv, 4))
        x = x + a.attend(z, k, v)[0]
        x = x + block.ffn(x)
    return (block_numpy.layer_norm(x, model.norm_f_gain, model.norm_f_bias) @ model.unembedding)[0, 0]


DECODE = "10 YT1 decode step"
DECODE_ROWS = [
    Mistake(DECODE, "four heads written in", lambda: check_decode_step_function(_four_heads_step),
            "your step has the lesson's sizes written in (4"),
    Mistake(DECODE, "calls shakespeare.decode_step", lambda: check_decode_step_function(_library_step),
            "your function calls the library's decode_step"),
    Mistake(DECODE, "runs the whole forward pass", lambda: check_decode_step_function(_whole_pass_step),
            "your function calls the library's run, which runs the model over the whole text again"),
    Mistake(DECODE, "position 0 for every token", lambda: check_decode_step_function(_decoder(position="0")),
            "every new character got position 0's embedding"),
    Mistake(DECODE, "position one too far", lambda: check_decode_step_function(_decoder(position="t + 1")),
            "your positions are one too far"),
    Mistake(DECODE, "nothing appended to the cache", lambda: check_decode_step_function(_decoder(append=False)),
            "append the new position's keys and values to it in every layer"),
    Mistake(DECODE, "a top-left (1, S) mask for the one query", lambda: check_decode_step_function(_masked_step),
            "the new position read only position 0"),
    Mistake(DECODE, "scores not scaled", lambda: check_decode_step_function(_decoder(scale="none")),
            "not divided by sqrt(d_h)"),
    Mistake(DECODE, "scores divided by sqrt(D)", lambda: check_decode_step_function(_decoder(scale="D")),
            "you divided the scores by sqrt(D)"),
    Mistake(DECODE, "scores divided by d_h", lambda: check_decode_step_function(_decoder(scale="d_h plain")),
            "divide by its square root"),
    Mistake(DECODE, "the lesson's d_h = 32 written in", lambda: check_decode_step_function(_d_h_written_in),
            "the lesson's d_h written in"),
    Mistake(DECODE, "queries projected before attend", lambda: check_decode_step_function(_decoder(query="projected")),
            "the queries were projected twice"),
    Mistake(DECODE, "no position embedding", lambda: check_decode_step_function(_decoder(position="none")),
            "the position embedding is missing"),
    Mistake(DECODE, "attends from the raw x", lambda: check_decode_step_function(_decoder(query="x")),
            "the queries came from the raw stream x"),
    Mistake(DECODE, "LayerNorm 2 before block.ffn", lambda: check_decode_step_function(_decoder(norm2_twice=True)),
            "LayerNorm 2 was applied twice"),
    Mistake(DECODE, "no LayerNorm 1", lambda: check_decode_step_function(_decoder(norm1=False)),
            "the attention read the raw stream"),
    Mistake(DECODE, "softmax over the query axis", lambda: check_decode_step_function(_decoder(query_softmax=True)),
            "your softmax ran over the query axis"),
    Mistake(DECODE, "key/value heads tiled", lambda: check_decode_step_function(_decoder(repeat="tile")),
            "the key/value heads were tiled"),
    Mistake(DECODE, "key/value heads not repeated", lambda: check_decode_step_function(_decoder(repeat="none")),
            "repeat them"),
    Mistake(DECODE, "attention output replaces the stream",
            lambda: check_decode_step_function(_decoder(attention_residual=False)),
            "the heads' output replaced the stream"),
    Mistake(DECODE, "feed-forward output replaces the stream",
            lambda: check_decode_step_function(_decoder(ffn_residual=False)),
            "the feed-forward's output replaced the stream"),
    Mistake(DECODE, "parallel feed-forward", lambda: check_decode_step_function(_decoder(parallel=True)),
            "the feed-forward read the stream from before the heads wrote to it"),
    Mistake(DECODE, "no final LayerNorm", lambda: check_decode_step_function(_decoder(final_norm=False)),
            "the final LayerNorm is missing"),
    Mistake(DECODE, "probabilities returned", lambda: check_decode_step_function(_decoder(output="probabilities")),
            "you returned probabilities"),
    Mistake(DECODE, "logits (1, 1, V) returned", lambda: check_decode_step_function(_decoder(output="batched")),
            "return the new position's logits as (V,)"),
]
DECODE_RIGHT = [
    RightAnswer(DECODE, "attend does the attention", lambda: check_decode_step_function(_decoder())),
    RightAnswer(DECODE, "attention written out, heads repeated",
                lambda: check_decode_step_function(_written_out)),
]


def _written_out(model: Any, token: int, cache: KVCache) -> Any:
    """The step with attention written out (np.repeat for the key/value heads) instead of ``attend``."""
    t = len(cache)
    x = model.token_embedding[[[token]]] + model.position_embedding[t : t + 1]
    for i, block in enumerate(model.blocks):
        a = block.attention
        z = block_numpy.layer_norm(x, block.norm1_gain, block.norm1_bias)
        k, v = cache.append(i, mha_numpy.split_heads(z @ a.wk, a.kv_heads), mha_numpy.split_heads(z @ a.wv, a.kv_heads))
        k, v = np.repeat(k, a.group_size, axis=1), np.repeat(v, a.group_size, axis=1)
        q = mha_numpy.split_heads(z @ a.wq, a.heads)
        w = mha_numpy.softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(a.head_width))
        x = x + mha_numpy.merge_heads(w @ v) @ a.wo
        x = x + block.ffn(x)
    return (block_numpy.layer_norm(x, model.norm_f_gain, model.norm_f_bias) @ model.unembedding)[0, 0]


# ---- Your turn 2: the previous-character score -----------------------------------------------------
def _pairs(w: Floats, back: int = 1, first: int = 1) -> Floats:
    t = np.arange(first, w.shape[-1])
    picked: Floats = w[:, :, t, t - back]
    return picked


def _right_previous(w: Floats) -> Floats:
    score: Floats = _pairs(w).mean(axis=(0, 2))
    return score


def _hard_coded_previous(w: Floats) -> Floats:
    t = np.arange(1, 256)
    return w[:, :, t, t - 1].mean(axis=(0, 2))  # type: ignore[no-any-return]


def _library_previous(w: Floats) -> Floats:
    targets = np.broadcast_to(np.arange(w.shape[-1]) - 1, w.shape[:1] + w.shape[-1:])
    return shakespeare.target_score(w, np.where(targets >= 0, targets, -1))


PREVIOUS = "10 YT2 previous score"
PREVIOUS_ROWS = [
    Mistake(PREVIOUS, "calls shakespeare.target_score", lambda: check_previous_score_function(_library_previous),
            "your function calls the library's target_score"),
    Mistake(PREVIOUS, "query 0 included",
            lambda: check_previous_score_function(lambda w: _pairs(w, 1, 0).mean(axis=(0, 2))), "you included query 0"),
    Mistake(PREVIOUS, "trace divided by T", lambda: check_previous_score_function(
        lambda w: np.trace(w, offset=-1, axis1=2, axis2=3).mean(axis=0) / w.shape[-1]), "or divided"),
    Mistake(PREVIOUS, "the character itself", lambda: check_previous_score_function(
        lambda w: np.diagonal(w, axis1=2, axis2=3).mean(axis=(0, 2))), "the weight on the character itself"),
    Mistake(PREVIOUS, "the key after the query", lambda: check_previous_score_function(
        lambda w: np.diagonal(w, offset=1, axis1=2, axis2=3).mean(axis=(0, 2))), "every score is 0"),
    Mistake(PREVIOUS, "query and key axes swapped", lambda: check_previous_score_function(
        lambda w: np.swapaxes(w, 2, 3)[:, :, np.arange(1, w.shape[-1]), np.arange(w.shape[-1] - 1)].mean(axis=(0, 2))),
        "or the query and key axes swapped"),
    Mistake(PREVIOUS, "two characters back", lambda: check_previous_score_function(
        lambda w: _pairs(w, 2, 2).mean(axis=(0, 2))), "two characters back"),
    Mistake(PREVIOUS, "whole block below the diagonal", lambda: check_previous_score_function(
        lambda w: w[:, :, 1:, :-1].mean(axis=(0, 2, 3))), "you averaged the whole block"),
    Mistake(PREVIOUS, "sum over the queries", lambda: check_previous_score_function(
        lambda w: _pairs(w).sum(axis=2).mean(axis=0)), "you summed over the queries"),
    Mistake(PREVIOUS, "sum over the batch", lambda: check_previous_score_function(
        lambda w: _pairs(w).mean(axis=2).sum(axis=0)), "you summed over the batch"),
    Mistake(PREVIOUS, "largest weight", lambda: check_previous_score_function(lambda w: _pairs(w).max(axis=(0, 2))),
            "you took the largest weight"),
    Mistake(PREVIOUS, "one score per query", lambda: check_previous_score_function(lambda w: _pairs(w).mean(axis=0)),
            "one score per query"),
    Mistake(PREVIOUS, "one score per sequence", lambda: check_previous_score_function(lambda w: _pairs(w).mean(axis=2)),
            "one score per sequence and head"),
    Mistake(PREVIOUS, "averaged over the heads", lambda: check_previous_score_function(
        lambda w: _pairs(w).mean(axis=(1, 2))), "you averaged over the heads"),
    Mistake(PREVIOUS, "one number", lambda: check_previous_score_function(lambda w: float(_pairs(w).mean())),
            "one number for every head"),
    Mistake(PREVIOUS, "T = 256 written in", lambda: check_previous_score_function(_hard_coded_previous),
            "it has the lesson's 256 written in"),
]
PREVIOUS_RIGHT = [
    RightAnswer(PREVIOUS, "fancy indexing", lambda: check_previous_score_function(_right_previous)),
    RightAnswer(PREVIOUS, "np.diagonal offset -1", lambda: check_previous_score_function(
        lambda w: np.diagonal(w, offset=-1, axis1=2, axis2=3).mean(axis=(0, 2)))),
    RightAnswer(PREVIOUS, "a loop over queries", lambda: check_previous_score_function(
        lambda w: np.mean([w[:, :, t, t - 1].mean(axis=0) for t in range(1, w.shape[-1])], axis=0))),
]


# ---- Your turn 3: the last break ---------------------------------------------------------------------
def _breaks(text: str, chars: str = " \n", strict: bool = False, none: int = -1) -> list[int]:
    out, last = [], none
    for t, ch in enumerate(text):
        if strict:
            out.append(last)
        if ch in chars:
            last = t
        if not strict:
            out.append(last)
    return out


def _vectorised(text: str) -> NDArray[np.int64]:
    is_break = np.array([ch in " \n" for ch in text])
    found: NDArray[np.int64] = np.maximum.accumulate(np.where(is_break, np.arange(len(text)), -1))
    return found


def _library_break(text: str) -> Any:
    vocabulary = shakespeare.Vocabulary.from_text(text)
    return shakespeare.last_break(vocabulary.encode(text)[None], vocabulary)[0]


def _next(text: str) -> list[int]:
    return [next((s for s in range(t, len(text)) if text[s] in " \n"), -1) for t in range(len(text))]


BREAK = "10 YT3 last break"
BREAK_ROWS = [
    Mistake(BREAK, "calls shakespeare.last_break", lambda: check_last_break_function(_library_break),
            "your function calls the library's last_break"),
    Mistake(BREAK, "strictly before t", lambda: check_last_break_function(lambda s: _breaks(s, strict=True)),
            "a space or newline is its own last break"),
    Mistake(BREAK, "spaces only", lambda: check_last_break_function(lambda s: _breaks(s, " ")),
            "a newline ends a word too"),
    Mistake(BREAK, "newlines only", lambda: check_last_break_function(lambda s: _breaks(s, "\n")),
            "a space ends a word too"),
    Mistake(BREAK, "0 before the first break", lambda: check_last_break_function(lambda s: _breaks(s, none=0)),
            "use -1 there, not 0"),
    Mistake(BREAK, "word start (break + 1)", lambda: check_last_break_function(
        lambda s: [b + 1 if b >= 0 else -1 for b in _breaks(s)]), "you returned the first character of the word"),
    Mistake(BREAK, "the next break", lambda: check_last_break_function(_next), "you looked ahead"),
    Mistake(BREAK, "distance back", lambda: check_last_break_function(
        lambda s: [t - b if b >= 0 else -1 for t, b in enumerate(_breaks(s))]), "you returned how far back"),
    Mistake(BREAK, "where the breaks are", lambda: check_last_break_function(
        lambda s: np.array([ch in " \n" for ch in s])), "you returned where the breaks are"),
    Mistake(BREAK, "floats", lambda: check_last_break_function(lambda s: np.array(_breaks(s), dtype=float)),
            "right numbers, but as floats"),
    Mistake(BREAK, "one entry short", lambda: check_last_break_function(lambda s: _breaks(s)[1:]),
            "one position per character"),
]
BREAK_RIGHT = [
    RightAnswer(BREAK, "a loop, a list", lambda: check_last_break_function(_breaks)),
    RightAnswer(BREAK, "np.maximum.accumulate", lambda: check_last_break_function(_vectorised)),
    RightAnswer(BREAK, "rfind per position", lambda: check_last_break_function(
        lambda s: np.array([max(s.rfind(" ", 0, t + 1), s.rfind("\n", 0, t + 1)) for t in range(len(s))]))),
]


# ---- Your turn 5: bits per character ---------------------------------------------------------------
BITS = "10 YT5 bits"
BITS_ROWS = [
    Mistake(BITS, "times ln 2", lambda: check_bits_function(lambda n: n * math.log(2)), "you multiplied by ln 2"),
    Mistake(BITS, "divided by ln 10", lambda: check_bits_function(lambda n: n / math.log(10)),
            "you divided by ln 10"),
    Mistake(BITS, "log2 of the loss", lambda: check_bits_function(lambda n: np.log2(n)),
            "you took log2 of the loss"),
    Mistake(BITS, "2 ** loss", lambda: check_bits_function(lambda n: 2**n), "2 ** loss is not a loss in bits"),
    Mistake(BITS, "e ** loss", lambda: check_bits_function(lambda n: np.exp(n)), "is the perplexity"),
    Mistake(BITS, "halved", lambda: check_bits_function(lambda n: n / 2), "you halved the loss"),
    Mistake(BITS, "ln 2 rounded", lambda: check_bits_function(lambda n: n / 0.69), "ln 2 was rounded"),
    Mistake(BITS, "result cut to an int", lambda: check_bits_function(lambda n: np.trunc(n / math.log(2))),
            "the result was cut to a whole number"),
    Mistake(BITS, "ln 2 rounded to 0.693", lambda: check_bits_function(lambda n: n / 0.693), "ln 2 was rounded"),
    Mistake(BITS, "result rounded to 2 decimals", lambda: check_bits_function(lambda n: round(n / math.log(2), 2)),
            "the result was rounded: return it unrounded"),
    Mistake(BITS, "result rounded to 3 decimals", lambda: check_bits_function(lambda n: np.round(n / math.log(2), 3)),
            "the result was rounded: return it unrounded"),
    Mistake(BITS, "as if base 10", lambda: check_bits_function(lambda n: n * math.log2(10)),
            "as if the loss were in base-10 digits"),
    Mistake(BITS, "one number for an array", lambda: check_bits_function(lambda n: float(np.mean(n)) / math.log(2)),
            "return one of the same shape"),
    Mistake(BITS, "float32 for a float64 array", lambda: check_bits_function(
        lambda n: (np.asarray(n) / math.log(2)).astype(np.float32) if isinstance(n, np.ndarray) else n / math.log(2)),
        "keep the input's dtype"),
]
BITS_RIGHT = [
    RightAnswer(BITS, "nats / ln 2", lambda: check_bits_function(lambda n: n / math.log(2))),
    RightAnswer(BITS, "nats * log2(e)", lambda: check_bits_function(lambda n: n * math.log2(math.e))),
    RightAnswer(BITS, "nats / np.log(2)", lambda: check_bits_function(lambda n: n / np.log(2))),
]


# ---- Your turn 4: a latent cache by truncated SVD --------------------------------------------------
def _factors(split: str = "left", which: str = "largest", stack: int = 1, transpose: bool = False,
             separate: bool = False, every: bool = False, numpy_order: bool = True) -> Callable[..., Any]:
    """The latent factors written out by hand, right by default, with one mistake switched on."""

    def factors(wk: Floats, wv: Floats, d_c: int) -> Any:
        kv = wk.shape[1]
        if separate:  # one SVD for the keys, another for the values
            u, s, vt = np.linalg.svd(wk, full_matrices=False)
            _, s2, vt2 = np.linalg.svd(wv, full_matrices=False)
            return u[:, :d_c] * s[:d_c], vt[:d_c], vt2[:d_c] * s2[:d_c, None]
        u, s, vt = np.linalg.svd(np.concatenate([wk, wv], axis=stack), full_matrices=False)
        keep = slice(0, len(s)) if every else (slice(len(s) - d_c, len(s)) if which == "smallest" else slice(0, d_c))
        left = {"left": u[:, keep] * s[keep], "root": u[:, keep] * np.sqrt(s[keep]), "none": u[:, keep],
                "twice": u[:, keep] * s[keep]}[split]
        right = {"left": vt[keep], "root": np.sqrt(s[keep])[:, None] * vt[keep], "none": vt[keep],
                 "twice": s[keep, None] * vt[keep]}[split]
        if stack == 0:
            return left, right, right
        w_uk, w_uv = right[:, :kv], right[:, kv:]
        if transpose:
            return left.T, w_uk.T, w_uv.T
        return left, w_uk, w_uv

    return factors


def _library_factors(wk: Floats, wv: Floats, d_c: int) -> Any:
    return cache_ladder.latent_factors(wk, wv, d_c)


def _lesson_rank(wk: Floats, wv: Floats, d_c: int) -> Any:
    u, s, vt = np.linalg.svd(np.concatenate([wk, wv], axis=1), full_matrices=False)
    return u[:, :64] * s[:64], vt[:64, : wk.shape[1]], vt[:64, wk.shape[1] :]  # the lesson's d_c written in


def _eigen_factors(wk: Floats, wv: Floats, d_c: int) -> Any:
    """Another right way: the top eigenvectors of the Gram matrix [W_k | W_v] [W_k | W_v]^T."""
    stacked = np.concatenate([wk, wv], axis=1)
    values, vectors = np.linalg.eigh(stacked @ stacked.T)
    top = vectors[:, np.argsort(values)[::-1][:d_c]]  # (D, d_c), orthonormal
    up = top.T @ stacked  # (d_c, 2 kv)
    return top, up[:, : wk.shape[1]], up[:, wk.shape[1] :]


LATENT = "10 YT4 latent factors"
LATENT_ROWS = [
    Mistake(LATENT, "calls cache_ladder.latent_factors", lambda: check_latent_factors_function(_library_factors),
            "your function calls the library's latent_factors"),
    Mistake(LATENT, "smallest singular values", lambda: check_latent_factors_function(_factors(which="smallest")),
            "you kept the SMALLEST singular values"),
    Mistake(LATENT, "singular values left out", lambda: check_latent_factors_function(_factors(split="none")),
            "the singular values are missing"),
    Mistake(LATENT, "singular values twice", lambda: check_latent_factors_function(_factors(split="twice")),
            "counted twice"),
    Mistake(LATENT, "two SVDs, keys and values apart", lambda: check_latent_factors_function(_factors(separate=True)),
            "an SVD of its own"),
    Mistake(LATENT, "wk stacked on wv (axis 0)", lambda: check_latent_factors_function(_factors(stack=0)),
            "you stacked wk on top of wv"),
    Mistake(LATENT, "every factor transposed", lambda: check_latent_factors_function(_factors(transpose=True)),
            "every factor is transposed"),
    Mistake(LATENT, "every singular value kept", lambda: check_latent_factors_function(_factors(every=True)),
            "every singular value"),
    Mistake(LATENT, "the lesson's d_c written in", lambda: check_latent_factors_function(_lesson_rank),
            "64 written in"),
    Mistake(LATENT, "returns the product only", lambda: check_latent_factors_function(
        lambda wk, wv, d_c: (lambda f: np.concatenate([f[0] @ f[1], f[0] @ f[2]], axis=1))(_factors()(wk, wv, d_c))),
        "expected three arrays"),
]


def _svd_pieces(wk: Floats, wv: Floats) -> tuple[Floats, Floats, Floats, int]:
    u, s, vt = np.linalg.svd(np.concatenate([wk, wv], axis=1), full_matrices=False)
    return u, s, vt, wk.shape[1]


def _swapped(wk: Floats, wv: Floats, d_c: int) -> Any:
    u, s, vt, n = _svd_pieces(wk, wv)
    return u[:, :d_c] * s[:d_c], vt[:d_c, n:], vt[:d_c, :n]


def _sqrt_one_side(wk: Floats, wv: Floats, d_c: int) -> Any:
    u, s, vt, n = _svd_pieces(wk, wv)
    return u[:, :d_c] * np.sqrt(s[:d_c]), vt[:d_c, :n], vt[:d_c, n:]


def _summed(wk: Floats, wv: Floats, d_c: int) -> Any:
    u, s, vt = np.linalg.svd(wk + wv, full_matrices=False)
    return u[:, :d_c] * s[:d_c], vt[:d_c], vt[:d_c]


def _columns(wk: Floats, wv: Floats, d_c: int) -> Any:
    u, s, _, n = _svd_pieces(wk, wv)
    vt = np.linalg.svd(np.concatenate([wk, wv], axis=1))[2]  # full_matrices: (2n, 2n)
    up = vt[:, :d_c].T
    return u[:, :d_c] * s[:d_c], up[:, :n], up[:, n:]


def _split_at_64(wk: Floats, wv: Floats, d_c: int) -> Any:
    u, s, vt, _ = _svd_pieces(wk, wv)
    return u[:, :d_c] * s[:d_c], vt[:d_c, :64], vt[:d_c, 64:]


def _in_place(wk: Floats, wv: Floats, d_c: int) -> Any:
    wv /= np.linalg.norm(wv)
    return _factors()(wk, wv, d_c)


def _tensors(wk: Floats, wv: Floats, d_c: int) -> Any:
    import torch

    u, s, vt = torch.linalg.svd(torch.from_numpy(np.concatenate([wk, wv], axis=1)), full_matrices=False)
    n = wk.shape[1]
    return u[:, :d_c] * s[:d_c], vt[:d_c, :n], vt[:d_c, n:]


def _hidden_library(wk: Floats, wv: Floats, d_c: int) -> Any:
    from lessons_lib import cache_ladder

    return getattr(cache_ladder, "latent_" + "factors")(wk, wv, d_c)  # the name never written whole


LATENT_ROWS += [
    Mistake(LATENT, "keys and values swapped", lambda: check_latent_factors_function(_swapped),
            "the keys and the values are swapped"),
    Mistake(LATENT, "sqrt(S) in one factor only", lambda: check_latent_factors_function(_sqrt_one_side),
            "only the square roots"),
    Mistake(LATENT, "SVD of wk + wv", lambda: check_latent_factors_function(_summed), "the SVD of wk + wv"),
    Mistake(LATENT, "columns of V^T", lambda: check_latent_factors_function(_columns), "COLUMNS of V^T"),
    Mistake(LATENT, "split written in at 64", lambda: check_latent_factors_function(_split_at_64),
            "split the rows you kept at wk.shape[1]"),
    Mistake(LATENT, "d_c + 1 kept", lambda: check_latent_factors_function(
        lambda wk, wv, d_c: _factors()(wk, wv, d_c + 1)), "you kept d_c + 1"),
    Mistake(LATENT, "input changed in place", lambda: check_latent_factors_function(_in_place),
            "changed wk or wv in place"),
    Mistake(LATENT, "torch tensors returned", lambda: check_latent_factors_function(_tensors),
            "return NumPy arrays"),
    Mistake(LATENT, "float16 returned", lambda: check_latent_factors_function(
        lambda wk, wv, d_c: tuple(a.astype(np.float16) for a in _factors()(wk, wv, d_c))), "dtype float16"),
    Mistake(LATENT, "library imported inside", lambda: check_latent_factors_function(_hidden_library),
            "uses the library's cache_ladder"),
    Mistake(LATENT, "the checker's private helper", lambda: check_latent_factors_function(
        lambda wk, wv, d_c: _factors()(*np.split(real_model_heads._truncated(np.concatenate([wk, wv], axis=1), d_c),
                                               2, axis=1), d_c)), "uses the library's _truncated"),
    Mistake(LATENT, "up-projections transposed", lambda: check_latent_factors_function(
        lambda wk, wv, d_c: (lambda f: (f[0], f[1].T, f[2].T))(_factors()(wk, wv, d_c))),
        "w_uk and w_uv are transposed"),
    Mistake(LATENT, "factors in the wrong order", lambda: check_latent_factors_function(
        lambda wk, wv, d_c: (lambda f: (f[1], f[2], f[0]))(_factors()(wk, wv, d_c))), "in the wrong order"),
    Mistake(LATENT, "d_c cut to one projection's width", lambda: check_latent_factors_function(
        lambda wk, wv, d_c: _factors()(wk, wv, min(d_c, wk.shape[1]))), "the latent may be wider"),
    Mistake(LATENT, "rebuilt projections returned", lambda: check_latent_factors_function(
        lambda wk, wv, d_c: (lambda f: (f[0], f[0] @ f[1], f[0] @ f[2]))(_factors()(wk, wv, d_c))),
        "those are the rebuilt projections"),
]
LATENT_RIGHT = [
    RightAnswer(LATENT, "U_c S_c and V_c^T", lambda: check_latent_factors_function(_factors())),
    RightAnswer(LATENT, "square roots on both sides", lambda: check_latent_factors_function(_factors(split="root"))),
    RightAnswer(LATENT, "eigenvectors of the Gram matrix", lambda: check_latent_factors_function(_eigen_factors)),
    RightAnswer(LATENT, "U_c and U_c^T projections", lambda: check_latent_factors_function(
        lambda wk, wv, d_c: (lambda u: (u, u.T @ wk, u.T @ wv))(_svd_pieces(wk, wv)[0][:, :d_c]))),
    RightAnswer(LATENT, "a list, float32", lambda: check_latent_factors_function(
        lambda wk, wv, d_c: [a.astype(np.float32) for a in _factors()(wk, wv, d_c)])),
]

MISTAKES = DECODE_ROWS + PREVIOUS_ROWS + BREAK_ROWS + BITS_ROWS + LATENT_ROWS
RIGHT_ANSWERS = DECODE_RIGHT + PREVIOUS_RIGHT + BREAK_RIGHT + BITS_RIGHT + LATENT_RIGHT


@pytest.mark.parametrize("row", MISTAKES, ids=row_id)
def test_typical_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT_ANSWERS, ids=row_id)
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
