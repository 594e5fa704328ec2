"""Quick check of the lesson "A real model's heads" (checkers in ``lessons_lib.checks.real_model_heads``).

Each checker judges the learner's function on inputs of its own, never the notebook's arrays: losses
of other shapes, random causal attention weights of two sizes, texts the plays do not hold, and two
small random models built like the Shakespeare model (other sizes, the second with fewer key/value
heads than query heads). A call of the library function an exercise asks for is refused with the
shared `forbidden_call`; every other wrong answer is compared with the usual mistakes and named.

Notation: ``B`` batch, ``h`` heads, ``h_kv`` key/value heads, ``T`` positions, ``D`` model width,
``d_h = D / h``, ``V`` the number of characters. NumPy only.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.block_numpy import layer_norm
from lessons_lib.checks import (
    Verdict,
    array_answer,
    failed,
    first_match,
    forbidden_call,
    function_answer,
    int_array_answer,
    passed,
    same,
    same_kind,
)
from lessons_lib.gqa_numpy import GroupedQueryAttention
from lessons_lib.kv_cache import KVCache
from lessons_lib.mha_numpy import causal_mask, softmax
from lessons_lib.shakespeare import GPTConfig, ShakespeareBlock, ShakespeareModel, Vocabulary, run

__all__ = [
    "check_bits_function",
    "check_decode_step_function",
    "check_last_break_function",
    "check_latent_factors_function",
    "check_previous_score_function",
]

Floats = NDArray[np.floating[Any]]
# The lesson's sizes: T_max = 256 (and 255, 257 around it), V = 83, D = 128, d_h = 32. Written into a
# function as whole numbers, they break the checker's other sizes.
LESSON_SIZES = (32, 83, 128, 255, 256, 257)


def _written_sizes(function: Any) -> list[int]:
    """The lesson's sizes (`LESSON_SIZES`) that ``function``'s code (nested code too) writes as literals."""
    return sorted(_int_literals(function) & set(LESSON_SIZES))


def _code_objects(function: Any) -> list[Any]:
    """``function``'s code object and every code object nested in it (inner functions, lambdas)."""
    found, pending = [], [getattr(function, "__code__", None)]
    while pending:
        code = pending.pop()
        if code is not None:
            found.append(code)
            pending += [c for c in code.co_consts if hasattr(c, "co_consts")]
    return found


def _int_literals(function: Any) -> set[int]:
    """Every int literal of ``function``'s code, nested code included."""
    return {c for code in _code_objects(function) for c in code.co_consts if type(c) is int}


def _quiet(question: str, function: Any, args: tuple[Any, ...], what: str) -> Any:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return function_answer(question, function, args, what)


# ----- Your turn 1: bits per character ----------------------------------------------------------
BITS_TRIALS: list[Any] = [1.5, np.array([[0.7, 2.0, 4.4], [1.1, 3.3, 0.05]])]


def check_bits_function(function: Any) -> Verdict:
    """Question "bits per character": ``function(nats) -> bits``, a loss in nats per character
    (a number or an array of them) turned into bits per character, ``nats / ln 2``.

    Tried on a float and on a ``(2, 3)`` array. Recognises: a product with ``ln 2``, a division by
    ``ln 10``, ``log2`` of the loss, ``2 ** loss`` and ``e ** loss`` (perplexities), half the loss,
    ``ln 2`` rounded to a few digits, the result rounded to 1-4 decimals, and an array answer that
    lost its shape or dtype.
    """
    question = "bits per character"
    for trial, nats in enumerate(BITS_TRIALS):
        result = _quiet(question, function, (nats.copy() if isinstance(nats, np.ndarray) else nats,),
                        "the body: return the loss in bits per character")
        if isinstance(result, Verdict):
            if trial == 0:
                return result
            return failed(question, f"right for one number, not for an array: {result.message}")
        got = array_answer(question, result, "the loss in bits")
        if isinstance(got, Verdict):
            return got
        right = np.asarray(nats) / math.log(2)
        if same(got, right):
            if trial == 1:
                kind = same_kind(question, result, nats)
                if kind is not None:
                    return kind
            continue
        n = np.asarray(nats, dtype=np.float64)
        mistake = first_match(got, [
            (n * math.log(2), "you multiplied by ln 2: one bit is ln 2 = 0.69 nats, so a loss in nats holds "
                              "1 / ln 2 = 1.44 times as many bits: divide by ln 2"),
            (n / math.log(10), "you divided by ln 10: that gives the loss in base-10 digits; bits are base 2, "
                               "divide by ln 2"),
            (lambda n=n: np.log2(n), "you took log2 of the loss: the loss is already a logarithm (-ln p); change its "
                                 "base by dividing by ln 2"),
            (lambda n=n: 2.0**n, "2 ** loss is not a loss in bits (and not the perplexity either, which is e ** loss): "
                                 "divide the loss by ln 2"),
            (lambda n=n: np.exp(n), "e ** loss is the perplexity (the number of equally likely characters it stands "
                                "for): the loss in bits is loss / ln 2"),
            (n / 2, "you halved the loss: bits = nats / ln 2 (ln 2 = 0.693, not 2)"),
            (n * math.log(10) / math.log(2), "you converted as if the loss were in base-10 digits: it is in nats "
                                             "(natural log), divide by ln 2 only"),
        ])
        if mistake is None:
            mistake = first_match(got, [(np.trunc(right), "the result was cut to a whole number (int or //): return "
                                                          "the loss in bits as a float, nats / ln 2")])
        if mistake is None:
            rounded = "the result was rounded: return it unrounded (round only when you print it)"
            mistake = first_match(got, [(np.round(right, digits), rounded) for digits in (1, 2, 3, 4)])
        if mistake is None and got.size == right.size and got.size and np.allclose(got.reshape(right.shape), right,
                                                                                    rtol=5e-3):
            mistake = ("close, but ln 2 was rounded: use math.log(2) (or np.log2(np.e)) rather than a number with a "
                       "few digits")
        if mistake is None and got.shape != right.shape:
            mistake = (f"one value in bits per loss: given an array of shape {right.shape} return one of the same "
                       f"shape, got {got.shape}")
        return failed(question, mistake or "not the loss in bits: one bit is ln 2 nats, so bits = nats / ln 2")
    return passed(question, "bits = nats / ln 2")


# ----- Your turn 2: the previous-character score --------------------------------------------------
PREVIOUS_TRIALS = [(3, 5, 9), (2, 3, 14)]  # (B, h, T): B != h, and never the lesson's (16, 4, 256)
PREVIOUS_NAMES = ("target_score", "word_targets", "head_scores")


def _causal_weights(rng: np.random.Generator, B: int, h: int, T: int) -> Floats:
    """Random causal attention weights ``(B, h, T, T)``: rows sum to 1, nothing above the diagonal."""
    scores = np.where(causal_mask(T), rng.normal(scale=2.0, size=(B, h, T, T)), -np.inf)
    weights: Floats = softmax(scores)
    return weights


def _offset_mean(weights: Floats, back: int, first: int) -> Floats:
    """Per head, the mean weight from each query ``t >= first`` to key ``t - back`` (NumPy's wrap for
    a negative key), over the batch and those queries: ``(h,)``."""
    T = weights.shape[-1]
    t = np.arange(first, T)
    picked: Floats = weights[:, :, t, t - back].mean(axis=(0, 2))
    return picked


def check_previous_score_function(function: Any) -> Verdict:
    """Question "previous-character score": ``function(weights) -> (h,)``, per head the mean weight
    from each query ``t = 1 .. T-1`` to key ``t - 1``, over the batch and those queries.

    Tried on random causal weights of two sizes (`PREVIOUS_TRIALS`). Recognises: a call of the
    library's scores, query 0 included (its key ``-1`` wraps to the last position), the weight on the
    character itself, the key after the query (or the axes swapped: all zeros), two characters back,
    the whole block below the diagonal averaged, a sum over the queries or over the batch, the
    largest weight, one score per query or per sequence (or per batch entry, averaged over the
    heads), one number for every head, and the lesson's sizes written into the function.
    """
    question = "previous-character score"
    borrowed = forbidden_call(question, function, *PREVIOUS_NAMES)
    if borrowed is not None:
        return borrowed
    rng = np.random.default_rng(10)
    for trial, (B, h, T) in enumerate(PREVIOUS_TRIALS):
        weights = _causal_weights(rng, B, h, T)
        result = _quiet(question, function, (weights.copy(),), "the body: return one score per head, (h,)")
        written = _written_sizes(function)
        if isinstance(result, Verdict):
            if result.answered and written:
                return failed(question, f"your function failed on other sizes ({result.message}): it has the "
                                        f"lesson's {', '.join(map(str, written))} written in; take T from "
                                        "weights.shape[-1]")
            return result if trial == 0 else failed(question, f"with other sizes: {result.message}")
        got = array_answer(question, result, "one score per head")
        if isinstance(got, Verdict):
            return got
        right = _offset_mean(weights, 1, 1)
        if same(got, right):
            continue
        t = np.arange(1, T)
        paired = weights[:, :, t, t - 1]  # (B, h, T - 1)
        mistake = first_match(got, [
            (_offset_mean(weights, 1, 0), "you included query 0, which has no previous character (its key t - 1 = "
                                          "-1 is the LAST position in NumPy, where causal weights are 0), or divided "
                                          "the T - 1 pairs' sum by T: average over the queries t = 1 .. T-1 only"),
            (_offset_mean(weights, 0, 0), "that is the weight on the character itself (s = t): the previous "
                                          "character is s = t - 1"),
            (_offset_mean(weights, 0, 1), "that is the weight on the character itself (s = t): the previous "
                                          "character is s = t - 1"),
            (np.zeros(h), "every score is 0: you read the key after the query (s = t + 1, or the query and key axes "
                          "swapped), where causal weights are 0; the previous character is weights[..., t, t - 1]"),
            (_offset_mean(weights, 2, 2), "that is two characters back (s = t - 2): the previous character is "
                                          "s = t - 1"),
            (weights[:, :, 1:, :-1].mean(axis=(0, 2, 3)),
             "you averaged the whole block weights[:, :, 1:, :-1], every key before each query: take only the pairs "
             "(t, t - 1), one key per query"),
            (paired.sum(axis=2).mean(axis=0), "you summed over the queries: take their mean"),
            (paired.mean(axis=2).sum(axis=0), "you summed over the batch: take the mean over the sequences too"),
            (paired.sum(axis=(0, 2)), "you summed: take the mean over the batch and the queries"),
            (paired.max(axis=(0, 2)), "you took the largest weight: take the mean over the batch and the queries"),
            (paired.mean(axis=0), "you returned one score per query: average over the queries too"),
            (paired.mean(axis=2), "you returned one score per sequence and head: average over the batch (axis 0) "
                                  "too"),
            (paired.mean(axis=(1, 2)), "you averaged over the heads (axis 1) and kept the batch: keep the heads, "
                                       "average over the batch (axis 0) and the queries"),
            (float(paired.mean()), "one number for every head: keep the heads' axis, one score per head"),
            (paired, "you returned every weight on the previous character: average over the batch and the queries"),
        ])
        if mistake is None and written:
            mistake = (f"your function has the lesson's {', '.join(map(str, written))} written in: take T from "
                       "weights.shape[-1]")
        if mistake is None and got.shape != right.shape:
            mistake = f"expected one score per head, shape {right.shape}; yours has shape {got.shape}"
        if trial == 1:
            return failed(question, f"right for the first sizes, not with others (B, h, T = {B}, {h}, {T}): "
                                    f"{mistake or 'read every size from weights, not from the notebook'}")
        return failed(question, mistake or "right shape, wrong numbers: average weights[b, head, t, t - 1] over the "
                                           "batch and the queries t = 1 .. T-1")
    return passed(question, "per head, the mean weight from t to t - 1 over the batch and t = 1 .. T-1")


# ----- Your turn 3: the last space or newline ---------------------------------------------------------
BREAK_TEXTS = ["To be, or not\nto be: that is", "Ay me!\n\nO, woe  is\nme", "  a\nbc d"]
BREAKS = " \n"
BREAK_NAMES = ("last_break", "word_targets", "head_scores")


def _last_break(text: str, breaks: str = BREAKS, strict: bool = False, none: int = -1) -> NDArray[np.int64]:
    """For each position ``t`` the position of the last character of ``breaks`` at or before ``t``
    (before ``t`` when ``strict``), ``none`` when there is none."""
    out, last = [], none
    for t, ch in enumerate(text):
        if strict:
            out.append(last)
        if ch in breaks:
            last = t
        if not strict:
            out.append(last)
    return np.array(out, dtype=np.int64)


def _next_break(text: str) -> NDArray[np.int64]:
    """The first space or newline at or after each position (-1: none)."""
    return np.array([next((s for s in range(t, len(text)) if text[s] in BREAKS), -1) for t in range(len(text))])


def _as_array(value: Any) -> NDArray[Any] | None:
    """A list, tuple or array as an array; ``None`` for anything else or for ragged nesting."""
    if not isinstance(value, (list, tuple, np.ndarray)):
        return None
    try:
        return np.asarray(value)
    except (ValueError, TypeError):
        return None


def check_last_break_function(function: Any) -> Verdict:
    """Question "last break": ``function(text) -> (len(text),)`` integers, for each position ``t`` the
    position of the last space or newline at or before ``t``, ``-1`` before the first one.

    Tried on three short texts of its own (`BREAK_TEXTS`: double spaces, blank lines, a text that
    starts with spaces). Recognises: a call of the library's ``last_break``, a break at ``t`` itself
    left out, newlines (or spaces) not counted, 0 instead of -1 before the first break, the word's
    first character (the break + 1), the next break instead of the last, the distance back instead of
    the position, where the breaks are (booleans), one entry too few, and floats.
    """
    question = "last break"
    borrowed = forbidden_call(question, function, *BREAK_NAMES)
    if borrowed is not None:
        return borrowed
    for trial, text in enumerate(BREAK_TEXTS):
        result = _quiet(question, function, (text,), "the body: return one position per character of text")
        if isinstance(result, Verdict):
            return result if trial == 0 else failed(question, f"with the text {text!r}: {result.message}")
        right = _last_break(text)
        raw = _as_array(result)
        if raw is not None and raw.dtype == bool and raw.shape == right.shape:
            return failed(question, "you returned where the breaks are (True/False): return, for each position, the "
                                    "position of the last break at or before it")
        if raw is not None and raw.dtype.kind == "f":
            if same(raw, right):
                return failed(question, "right numbers, but as floats: positions are whole numbers (an int array, "
                                        "e.g. dtype=np.int64)")
        got = int_array_answer(question, result, "one position (an int) per character of text, -1 before the first "
                                                 "break")
        if isinstance(got, Verdict):
            return got
        if same(got, right):
            continue
        positions = np.arange(len(text))
        mistake = first_match(got, [
            (_last_break(text, strict=True), "a space or newline is its own last break: look at or before t "
                                             "(s <= t), not strictly before"),
            (_last_break(text, " "), "a newline ends a word too: count both ' ' and '\\n'"),
            (_last_break(text, "\n"), "a space ends a word too: count both ' ' and '\\n'"),
            (np.maximum(right, 0), "before the first break there is none: use -1 there, not 0 (0 is a position)"),
            (right + 1, "you returned the first character of the word (the break + 1): return the break's own "
                        "position"),
            (np.where(right >= 0, right + 1, -1), "you returned the first character of the word (the break + 1): "
                                                  "return the break's own position"),
            (_next_break(text), "you looked ahead, at the next break: the model reads only the past, so take the "
                                "last break at or before t"),
            (np.where(right >= 0, positions - right, -1), "you returned how far back the break is (t - s): return "
                                                          "its position s"),
            (positions - right, "you returned how far back the break is (t - s): return its position s"),
        ])
        if mistake is None and got.shape[0] == len(text) - 1:
            mistake = f"one position per character: {len(text)} for this text of {len(text)}, yours has {got.shape[0]}"
        if mistake is None and got.shape != right.shape:
            mistake = f"one position per character: {len(text)} for this text, yours has shape {got.shape}"
        return failed(question, f"with the text {text!r}: " + (mistake or "not the last space or newline at or before "
                                                                         "each position (-1 before the first)"))
    return passed(question, "for each position, the last ' ' or '\\n' at or before it, -1 before the first")


# ----- Your turn 4: one step of cached decoding -------------------------------------------------------
DECODE_NAMES = ("decode_step", "decode_incrementally", "_attention")
WHOLE_PASS = ("run", "generate")
WHOLE_PASS_WHY = ("which runs the model over the whole text again: the exercise asks for one step that computes the "
                  "new position only and reads the rest from the cache")
# (V, T_max, D, h, h_kv, layers, F): none is the lesson's model; the second has h_kv < h (lesson 06)
DECODE_SIZES = [(9, 12, 12, 3, 3, 2, 20), (7, 10, 16, 4, 2, 3, 24)]
DECODE_STEPS = 6


def checker_model(sizes: tuple[int, int, int, int, int, int, int], seed: int = 0) -> ShakespeareModel:
    """A small random model built like the Shakespeare model, with LayerNorm gains and biases that
    are not 1 and 0, for the decoding checker (sizes ``(V, T_max, D, h, h_kv, layers, F)``)."""
    V, context, D, h, h_kv, layers, F = sizes
    rng = np.random.default_rng(seed)
    config = GPTConfig(vocab=V, context=context, width=D, heads=h, kv_heads=h_kv, layers=layers, hidden=F)
    kv = h_kv * (D // h)

    def normal(*shape: int, scale: float = 1.0) -> Floats:
        out: Floats = scale * rng.normal(size=shape)
        return out

    blocks = tuple(
        ShakespeareBlock(
            GroupedQueryAttention.from_weights(normal(D, D, scale=0.5), normal(D, kv, scale=0.5),
                                               normal(D, kv, scale=0.5), normal(D, D, scale=0.3), h, h_kv),
            1 + normal(D, scale=0.3), normal(D, scale=0.3), 1 + normal(D, scale=0.3), normal(D, scale=0.3),
            normal(D, F, scale=0.3), normal(F, scale=0.1), normal(F, D, scale=0.2), normal(D, scale=0.1),
        )
        for _ in range(layers)
    )
    vocabulary = Vocabulary("abcdefghijklmnopqrstuvwxyz"[:V])
    return ShakespeareModel(config, vocabulary, normal(V, D), normal(context, D, scale=0.5), blocks,
                            1 + normal(D, scale=0.3), normal(D, scale=0.3), normal(D, V, scale=0.5))


def _decode_variant(model: ShakespeareModel, ids: NDArray[np.int64], variant: str) -> Floats:
    """Every step's logits ``(n, V)`` of cached decoding of ``ids``, computed the right way or with
    one of the usual mistakes (``variant``)."""
    c = model.config
    d = c.width // c.heads
    g = c.heads // c.kv_heads
    keys: list[list[Floats]] = [[] for _ in model.blocks]
    values: list[list[Floats]] = [[] for _ in model.blocks]
    rows = []
    for t, token in enumerate(ids):
        position = {"position 0": 0, "position t + 1": t + 1}.get(variant, t)
        x = model.token_embedding[token] + model.position_embedding[position]  # (D,)
        if variant == "no position":
            x = model.token_embedding[token].astype(np.float64)
        for i, block in enumerate(model.blocks):
            a = block.attention
            z = x if variant == "no norm 1" else layer_norm(x, block.norm1_gain, block.norm1_bias)
            queried = {"raw query": x, "queries twice": z @ a.wq}.get(variant, z)  # what attend is given
            q = (queried @ a.wq).reshape(c.heads, d)  # (h, d_h)
            keys[i].append((z @ a.wk).reshape(c.kv_heads, d))
            values[i].append((z @ a.wv).reshape(c.kv_heads, d))
            seen = {"no cache": slice(-1, None), "first only": slice(0, 1)}.get(variant, slice(None))
            k = np.stack(keys[i][seen], axis=1)  # (h_kv, S, d_h): the positions the new one reads
            v = np.stack(values[i][seen], axis=1)
            if variant == "tiled":
                k, v = np.tile(k, (g, 1, 1)), np.tile(v, (g, 1, 1))  # head i reads kv head i % h_kv
            else:
                k, v = np.repeat(k, g, axis=0), np.repeat(v, g, axis=0)  # head i reads kv head i // g
            scale = {"no scale": 1.0, "scale sqrt(D)": math.sqrt(c.width), "scale d_h": d,
                     "lesson d_h": math.sqrt(32)}.get(variant, math.sqrt(d))
            scores = np.einsum("hd,hsd->hs", q, k) / scale  # (h, S)
            w = np.ones_like(scores) if variant == "softmax over the query" else softmax(scores)
            out = np.einsum("hs,hsd->hd", w, v).reshape(-1) @ a.wo  # (D,)
            before = x
            x = out if variant == "no attention residual" else x + out
            fed = before if variant == "parallel" else x
            if variant == "norm 2 twice":
                fed = layer_norm(fed, block.norm2_gain, block.norm2_bias)
            ffn = block.ffn(fed[None, None])[0, 0]
            x = ffn if variant == "no ffn residual" else x + ffn
        final = x if variant == "no final norm" else layer_norm(x, model.norm_f_gain, model.norm_f_bias)
        rows.append(final @ model.unembedding)
    return np.stack(rows)


DECODE_MISTAKES = {
    "position 0": "every new character got position 0's embedding: the new character sits at position len(cache), "
                  "read before you append anything",
    "position t + 1": "your positions are one too far: the new character sits at position len(cache), read before "
                      "anything is appended (after layer 0's append it is one more)",
    "no cache": "the new position attended only to itself: append its keys and values to the cache and attend to "
                "everything cache.append returns (the earlier positions too)",
    "first only": "the new position read only position 0: a top-left causal mask (np.tril of a (1, S) array) puts "
                  "the one query at position 0; the new position is the last one and may read every cached "
                  "position: pass no mask (or mha_numpy.causal_mask(1, S), which puts the query last)",
    "no scale": "the scores are not divided by sqrt(d_h) (lesson 01): q . k / sqrt(d_h)",
    "scale sqrt(D)": "you divided the scores by sqrt(D): a head's scores are divided by sqrt(d_h), d_h = D / h",
    "scale d_h": "you divided the scores by d_h: divide by its square root, sqrt(d_h)",
    "lesson d_h": "you divided by sqrt(32), the lesson's d_h written in: take d_h from the model "
                  "(attention.head_width, or D // h)",
    "queries twice": "the queries were projected twice: block.attention.attend(z, k, v) makes the queries from z "
                     "itself (z @ wq inside); pass it the normalised z, and project only the new key and value "
                     "(z @ wk, z @ wv) yourself",
    "no position": "the position embedding is missing: the new character's vector is token_embedding[token] + "
                   "position_embedding[t], with t = len(cache) read before anything is appended",
    "raw query": "the queries came from the raw stream x: attend from the normalised z = LayerNorm 1 of x "
                 "(block.attention.attend(z, k, v)), the same z the new key and value come from",
    "norm 2 twice": "LayerNorm 2 was applied twice: block.ffn(x) already starts with it (block.norm2_gain, "
                    "block.norm2_bias), so pass it the stream x itself: x = x + block.ffn(x)",
    "no norm 1": "the attention read the raw stream: it reads LayerNorm 1 of it (block.norm1_gain, "
                 "block.norm1_bias), as in lesson 09's pre-norm block",
    "softmax over the query": "every weight is 1: your softmax ran over the query axis, which has one position "
                              "here; it runs over the keys, the last axis",
    "tiled": "the key/value heads were tiled: query head i reads key/value head i // g, consecutive query heads "
             "share (np.repeat along the heads axis, lesson 06), not i % h_kv",
    "no attention residual": "the heads' output replaced the stream: add it, x = x + attention",
    "no ffn residual": "the feed-forward's output replaced the stream: add it, x = x + block.ffn(x)",
    "parallel": "the feed-forward read the stream from before the heads wrote to it: it reads the stream after "
                "the attention update",
    "no final norm": "the final LayerNorm is missing: logits = LN_f(x) @ unembedding, with model.norm_f_gain and "
                     "model.norm_f_bias",
}
NO_REPEAT = ("a shape error between h query heads and h_kv key/value heads: when h_kv < h each key/value head "
             "serves g = h / h_kv consecutive query heads; repeat them (np.repeat(k, g, axis=1), lesson 06) or let "
             "block.attention.attend do it")


def check_decode_step_function(function: Any) -> Verdict:
    """Question "cached decoding step": ``function(model, token, cache) -> logits (V,)``, one step of
    decoding with a `kv_cache.KVCache`: the new token sits at position ``len(cache)``; each block
    appends the new position's keys and values and attends from it to all of them.

    Tried on two small random models (`DECODE_SIZES`, the second with ``h_kv < h``), ``DECODE_STEPS``
    tokens each from an empty cache, every step's logits compared with `shakespeare.run` on the whole
    text so far. Recognises: a call of the library's decoding or forward pass, position 0 (or one
    too far, or none at all) for the new token, the queries projected twice (``attend`` makes them
    from ``z`` itself), queries from the raw stream, LayerNorm 2 applied before ``block.ffn`` (which
    applies it), nothing appended (the cache is empty afterwards), attention to the new
    position only, the scores not scaled (or by ``sqrt(D)``, ``d_h``, the lesson's ``sqrt(32)``), no
    LayerNorm 1, a top-left mask that lets it read position 0 only, a softmax over the
    query axis, tiled key/value heads, no repeat for ``h_kv < h`` (a
    shape error), a residual missing, the parallel feed-forward, no final LayerNorm, probabilities
    instead of logits, and logits of shape ``(1, 1, V)``.
    """
    question = "cached decoding step"
    borrowed = forbidden_call(question, function, *DECODE_NAMES)
    if borrowed is None:  # a Verdict is falsy when not ok: no `or` between the two
        borrowed = forbidden_call(question, function, *WHOLE_PASS, why=WHOLE_PASS_WHY)
    if borrowed is not None:
        return borrowed
    for trial, sizes in enumerate(DECODE_SIZES):
        model = checker_model(sizes, seed=trial)
        ids = np.random.default_rng(20 + trial).integers(0, sizes[0], size=DECODE_STEPS)
        verdict = _decode_once(question, function, model, ids)
        written = _written_sizes(function) + ([4] if 4 in _int_literals(function) else [])
        if verdict is not None and verdict.answered and written:
            return failed(question, f"your step has the lesson's sizes written in ({', '.join(map(str, written))}: "
                                    f"h = h_kv = 4, d_h = 32, D = 128, V = 83), so it fails on a model of other sizes "
                                    f"({verdict.message}); read them from the model, e.g. block.attention.kv_heads")
        if verdict is not None:
            if trial == 1 and verdict.answered:
                V, _, D, h, h_kv, layers, _ = sizes
                return failed(question, f"right for the first model, not for one with V={V}, D={D}, h={h}, "
                                        f"h_kv={h_kv}, {layers} layers: {verdict.message}")
            return verdict
    return passed(question, "every step's logits equal the whole forward pass over the text so far")


def _variant_route(model: ShakespeareModel, ids: NDArray[np.int64], variant: str) -> Callable[[], Floats]:
    """A zero-argument computation of `_decode_variant` (`first_match` runs it only when it gets there)."""
    return lambda: _decode_variant(model, ids, variant)


def _decode_once(question: str, function: Any, model: ShakespeareModel, ids: NDArray[np.int64]) -> Verdict | None:
    """``None`` when ``function`` decodes ``ids`` right on ``model``, else what went wrong."""
    cache = KVCache(model.config.layers)
    rows = []
    for t, token in enumerate(ids):
        before = len(cache)
        result = _quiet(question, function, (model, int(token), cache),
                        "the body: return the logits of the next character, shape (V,)")
        if isinstance(result, Verdict):
            if result.answered and ("broadcast" in result.message or "matmul" in result.message) \
                    and model.config.kv_heads < model.config.heads:
                return failed(question, NO_REPEAT)
            return result if t == 0 else failed(question, f"at step {t + 1} (the cache held {before} positions): "
                                                          f"{result.message}")
        if len(cache) != before + 1:
            return failed(question, f"the cache held {before} positions before the step and {len(cache)} after: "
                                    "append the new position's keys and values to it in every layer (cache.append)")
        got = array_answer(question, result, "the logits (V,)")
        if isinstance(got, Verdict):
            return got
        rows.append(got)
    V = model.config.vocab
    right = run(model, ids[None])[0][0]  # (n, V): the logits at every position of the whole text
    shapes = {row.shape for row in rows}
    if shapes != {(V,)}:
        if shapes <= {(1, 1, V), (1, V)} and same(np.stack([row.reshape(V) for row in rows]), right):
            return failed(question, f"right numbers, shape {rows[0].shape}: return the new position's logits as "
                                    f"(V,) = ({V},), e.g. logits[0, 0]")
        return failed(question, f"expected the logits (V,) = ({V},), got shape {rows[0].shape}")
    got = np.stack(rows)
    if same(got, right):
        return None
    candidates: list[tuple[Callable[[], Floats] | Floats, str]] = [
        (softmax(right), "you returned probabilities (a softmax): return the logits, before any softmax"),
    ]
    for name, message in DECODE_MISTAKES.items():
        candidates.append((_variant_route(model, ids, name), message))
    mistake = first_match(got, candidates)
    return failed(question, mistake or "the logits differ from a whole forward pass over the text so far: embed the "
                                       "token at position len(cache); in each block LayerNorm 1, queries, keys and "
                                       "values of the new position, cache.append, attention, residual, then "
                                       "x + block.ffn(x); last LN_f and the unembedding")


# ----- Your turn 4 (section 6): a latent cache from the trained K/V projections ------------------------------------
LATENT_TRIALS = [(11, 7, 3), (9, 4, 5)]  # (D, h_kv * d_h, d_c): never the lesson's (128, 128, 64)
LATENT_NAMES = ("latent_factors", "latent_arrays", "latent_kv")


def _truncated(stacked: Floats, rank: int, last: bool = False) -> Floats:
    """The rank-``rank`` truncated SVD of ``stacked`` (its smallest singular values when ``last``)."""
    u, s, vt = np.linalg.svd(stacked, full_matrices=False)
    keep = slice(len(s) - rank, len(s)) if last else slice(0, rank)
    cut: Floats = (u[:, keep] * s[keep]) @ vt[keep]
    return cut


def _latent_problem(D: int, kv: int, seed: int) -> tuple[Floats, Floats]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(D, kv)), rng.normal(size=(D, kv))


def _latent_mistake(wk: Floats, wv: Floats, d_c: int, w_dkv: Floats, w_uk: Floats, w_uv: Floats) -> str | None:
    """The usual mistake whose products ``w_dkv @ [w_uk | w_uv]`` the learner's equal, if any."""
    stacked = np.concatenate([wk, wv], axis=1)
    product = np.concatenate([w_dkv @ w_uk, w_dkv @ w_uv], axis=1)
    u, s, vt = np.linalg.svd(stacked, full_matrices=False)
    separate = ("you cut wk with an SVD of its own: that gives the keys a latent of their own, and the values "
                "would need a second one, 2 d_c numbers a token must cache. Put them side by side, [W_k | W_v], "
                "and cut once")
    kv = wk.shape[1]
    best = _truncated(stacked, d_c)
    summed = _truncated(wk + wv, d_c)
    stacked_rows = _truncated(np.concatenate([wk, wv], axis=0), d_c)[: wk.shape[0]]  # the top half, (D, kv)
    mistake = first_match(product, [
        (np.concatenate([best[:, kv:], best[:, :kv]], axis=1),
         "the keys and the values are swapped: [wk | wv] puts the keys' columns first, so w_uk is the first "
         "wk.shape[1] columns of the rows you kept (concatenate and split in the same order)"),
        ((u[:, :d_c] * np.sqrt(s[:d_c])) @ vt[:d_c],
         "only the square roots of the singular values are in the product: with sqrt(S_c) in one factor, put "
         "the other sqrt(S_c) in the other factor (or all of S_c in one)"),
        (np.concatenate([summed, summed], axis=1),
         "you took the SVD of wk + wv: adding mixes the keys and the values into one matrix. Put them side by "
         "side, np.concatenate([wk, wv], axis=1), so that each keeps its own columns"),
        (np.concatenate([stacked_rows, stacked_rows], axis=1),
         "you stacked wk on top of wv (axis 0): a token's key and value features sit side by side, "
         "[W_k | W_v] along axis 1, so that one latent of d_c numbers serves both"),
        ((u[:, :d_c] * s[:d_c]) @ np.linalg.svd(stacked)[2][:, :d_c].T,
         "you took COLUMNS of V^T: the right singular vectors are its rows, so keep vt[:d_c]"),
        (_truncated(stacked, d_c, last=True),
         "you kept the SMALLEST singular values: np.linalg.svd sorts them largest first, so the first d_c "
         "columns of U (and rows of V^T) are the ones to keep"),
        (u[:, :d_c] @ vt[:d_c],
         "the singular values are missing: U_c @ V_c^T has the right directions but not their lengths; put "
         "S_c into one factor (or its square root into each)"),
        ((u[:, :d_c] * s[:d_c] ** 2) @ vt[:d_c],
         "the singular values are counted twice (U_c S_c and S_c V_c^T): put S_c into one factor only, or "
         "its square root into each"),
    ])
    if mistake is None and same(w_dkv @ w_uk, _truncated(wk, d_c)):
        mistake = separate
    return mistake


def _mentions(function: Any, names: tuple[str, ...]) -> bool:
    """Whether ``function``'s code (nested code too) names any of ``names``: a global, an attribute, or
    a module imported inside it."""
    return any(set(code.co_names + code.co_varnames) & set(names) for code in _code_objects(function))


def check_latent_factors_function(function: Any) -> Verdict:
    """Question "latent factors": ``function(wk, wv, d_c) -> (w_dkv (D, d_c), w_uk (d_c, kv), w_uv (d_c,
    kv))`` whose products ``w_dkv @ w_uk`` and ``w_dkv @ w_uv`` are the best rank-``d_c`` approximation
    of ``[wk | wv]`` (any split of the singular values between the factors is right).

    Tried on random projections of two sizes of its own (`LATENT_TRIALS`, the second with ``d_c`` larger
    than ``kv``). Recognises: a use of the library's conversion (`cache_ladder`), inputs changed in place,
    tensors or half-precision arrays, the smallest singular values instead of the largest, the singular
    values left out, counted twice or only their square root, a separate SVD for the keys (two latents,
    twice the cache), keys and values swapped, the SVD of ``wk + wv``, ``wk`` and ``wv`` stacked on top
    of each other (axis 0), columns of ``V^T`` instead of rows, a factor transposed, every singular value
    kept, a split of ``V^T`` at the wrong column, and the lesson's sizes written in.
    """
    question = "latent factors"
    borrowed = forbidden_call(question, function, *LATENT_NAMES)
    helpers = [name for name in ("cache_ladder", "shakespeare_torch", "_truncated", "_latent_mistake")
               if _mentions(function, (name,))]
    if borrowed is None and helpers:
        borrowed = failed(question, f"your function uses the library's {helpers[0]}, which holds the conversion "
                                    "this exercise asks you to write: build it from NumPy operations yourself")
    if borrowed is not None:
        return borrowed
    written = sorted(_int_literals(function) & {64, 128, 256})
    for trial, (D, kv, d_c) in enumerate(LATENT_TRIALS):
        wk, wv = _latent_problem(D, kv, seed=trial)
        given = (wk.copy(), wv.copy())
        result = _quiet(question, function, (*given, d_c), "the body: return w_dkv, w_uk, w_uv")
        if isinstance(result, Verdict):
            return result if trial == 0 else failed(question, f"with D, kv, d_c = {D}, {kv}, {d_c}: {result.message}")
        if not (np.array_equal(given[0], wk) and np.array_equal(given[1], wv)):
            return failed(question, "your function changed wk or wv in place (an in-place *=, /= or slice "
                                    "assignment): the model's weights must come out as they went in")
        sizes = f"(D = {D}, h_kv * d_h = {kv}, d_c = {d_c})"
        if not isinstance(result, (tuple, list)) or len(result) != 3:
            return failed(question, f"expected three arrays, (w_dkv, w_uk, w_uv), got {type(result).__name__}"
                                    + (f" of {len(result)}" if isinstance(result, (tuple, list)) else ""))
        factors = []
        for name, value in zip(("w_dkv", "w_uk", "w_uv"), result, strict=True):
            if not isinstance(value, np.ndarray):
                return failed(question, f"{name} is a {type(value).__module__}.{type(value).__name__}: return NumPy "
                                        "arrays, as the weights came (the cells below use them with NumPy)")
            if value.dtype not in (np.float32, np.float64):
                return failed(question, f"{name} has dtype {value.dtype}: keep float64 (or float32), the "
                                        "precision the SVD and the weights need")
            array = array_answer(question, value, f"{name}, an array")
            if isinstance(array, Verdict):
                return failed(question, f"{name}: {array.message}")
            factors.append(array)
        w_dkv, w_uk, w_uv = factors
        stacked = np.concatenate([wk, wv], axis=1)  # (D, 2 kv)
        shapes = (w_dkv.shape, w_uk.shape, w_uv.shape)
        if shapes == ((2 * D, d_c), (d_c, kv), (d_c, kv)) or w_dkv.shape[0] == 2 * D:
            return failed(question, f"w_dkv has {w_dkv.shape[0]} rows, 2 D: you stacked wk on top of wv (axis 0). "
                                    "A token's key and value features sit side by side, [W_k | W_v] along axis 1, "
                                    "so that one latent of d_c numbers serves both")
        if shapes == ((d_c, D), (kv, d_c), (kv, d_c)):
            return failed(question, f"every factor is transposed {sizes}: in x @ W (NumPy's (in, out) layout) "
                                    "w_dkv is (D, d_c), taking D features to d_c, and w_uk, w_uv are (d_c, kv)")
        if w_dkv.shape[0] == D and w_dkv.ndim == 2 and w_dkv.shape[1] == min(D, 2 * kv) != d_c:
            if written:
                return failed(question, f"your function has {', '.join(map(str, written))} written in, so with "
                                        f"other sizes {sizes} it keeps every singular value: take d_c from the "
                                        "argument")
            return failed(question, f"w_dkv keeps {w_dkv.shape[1]} numbers per token, every singular value: "
                                    f"keep only the d_c = {d_c} largest")
        if w_uk.shape == w_uv.shape == (D, kv):
            return failed(question, f"w_uk and w_uv are (D, kv) = {(D, kv)}: those are the rebuilt projections "
                                    "(w_dkv @ w_uk), not the up-projections, which take the d_c latent numbers to "
                                    "kv features: (d_c, kv)")
        columns = "you took COLUMNS of V^T: the right singular vectors are its rows, so keep vt[:d_c]"
        split = w_uk.ndim == w_uv.ndim == 2 and w_uk.shape[0] == w_uv.shape[0] == w_dkv.shape[-1]
        if split and w_uk.shape[1] + w_uv.shape[1] == min(D, 2 * kv) != 2 * kv:
            return failed(question, f"w_uk and w_uv have {w_uk.shape[1]} + {w_uv.shape[1]} columns, as many as V^T "
                                    f"has rows, not 2 kv = {2 * kv}: {columns}")
        if d_c > kv and shapes == ((D, kv), (kv, kv), (kv, kv)):
            return failed(question, f"you kept h_kv * d_h = {kv} singular values, not d_c = {d_c}: the latent may be "
                                    f"wider than one projection, since [wk | wv] has 2 kv = {2 * kv} columns {sizes}")
        if shapes == ((D, d_c + 1), (d_c + 1, kv), (d_c + 1, kv)):
            return failed(question, f"you kept d_c + 1 = {d_c + 1} singular values: a slice [:d_c] stops before "
                                    "index d_c and keeps exactly d_c")
        if split and w_uk.shape[1] != kv and w_uk.shape[1] + w_uv.shape[1] == 2 * kv:
            return failed(question, f"w_uk has {w_uk.shape[1]} columns and w_uv {w_uv.shape[1]}: split the rows you "
                                    f"kept at wk.shape[1] = {kv} {sizes}, the keys' columns first"
                                    + (f" (your function has {', '.join(map(str, written))} written in)"
                                       if written else ""))
        expected = ((D, d_c), (d_c, kv), (d_c, kv))
        if shapes == ((D, d_c), (kv, d_c), (kv, d_c)):
            return failed(question, f"w_uk and w_uv are transposed, (kv, d_c) = {(kv, d_c)} each {sizes}: the "
                                    "up-projections take the d_c latent numbers to kv features, (d_c, kv); they "
                                    "are the first d_c ROWS of V^T, split at the keys' last column")
        if shapes != expected and sorted(shapes) == sorted(expected):
            return failed(question, f"the three factors come back in the wrong order ({shapes[0]}, {shapes[1]}, "
                                    f"{shapes[2]}) {sizes}: return w_dkv (D, d_c) first, then w_uk, then w_uv")
        if shapes != expected:
            if trial == 1 and written:
                return failed(question, f"right for the first sizes, not with others {sizes}: your function has "
                                        f"{', '.join(map(str, written))} written in; read the sizes from wk and d_c")
            return failed(question, f"expected shapes w_dkv (D, d_c) = {(D, d_c)}, w_uk and w_uv (d_c, kv) = "
                                    f"{(d_c, kv)} {sizes}; yours are {shapes[0]}, {shapes[1]}, {shapes[2]}")
        product = np.concatenate([w_dkv @ w_uk, w_dkv @ w_uv], axis=1)
        if same(product, _truncated(stacked, d_c)):
            continue
        mistake = _latent_mistake(wk, wv, d_c, w_dkv, w_uk, w_uv)
        if mistake is None and trial == 1 and written:
            mistake = f"your function has {', '.join(map(str, written))} written in; read the sizes from wk and d_c"
        if trial == 1:
            return failed(question, f"right for the first sizes, not with others {sizes}: "
                                    f"{mistake or 'the products must be the rank-d_c truncated SVD of [wk | wv]'}")
        return failed(question, mistake or "right shapes, but w_dkv @ [w_uk | w_uv] is not the best rank-d_c "
                                           "approximation of [wk | wv]: take the SVD of the two side by side and "
                                           "keep the d_c largest singular values")
    return passed(question, "w_dkv @ [w_uk | w_uv] is the rank-d_c truncated SVD of [wk | wv]: one latent for both")
