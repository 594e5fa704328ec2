"""Quick check of the lesson "Grouped-query attention" and the KV cache (checkers in
``lessons_lib.checks.grouped_query_attention``).

Each checker compares an answer with the right one and, when it is wrong, looks for the mistake
that produces exactly that answer: forgetting the factor 2 for K and V, counting ``h`` heads
instead of ``h_kv``, counting every token where a sliding window keeps only the last ``W`` (or
``W - 1`` tokens, forgetting that the window includes the query itself), tiling
K/V heads instead of repeating each one ``g`` times in a row, swapping
``g`` (query heads per K/V head) and ``h_kv`` (number of K/V heads), or pooling the wrong columns
when a multi-head checkpoint becomes a GQA one. A "not yet" names the mistake, never the answer.

Every count is an int: a float (even ``4.0``, or an array of whole floats) is refused with a message
naming its type, in every question alike. The function exercises refuse a call to the library
function they ask the learner to write (`forbidden_call`) and are tried on several sizes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lessons_lib.checks import (
    Verdict,
    array_answer,
    as_numpy,
    failed,
    first_match,
    forbidden_call,
    function_answer,
    int_answer,
    int_array_answer,
    number_answer,
    passed,
    reference_array,
    same,
    same_kind,
)
from lessons_lib.kv_cache import ModelPreset, cached_tokens, kv_cache_bytes
from lessons_lib.validation import check_int, group_size

__all__ = [
    "check_bytes_per_token",
    "check_cache_bytes",
    "check_kv_head_function",
    "check_pool_kv_columns",
    "check_repeat_kv",
]


# ----- the size of the KV cache --------------------------------------------------------------
def _cache_verdict(
    question: str, answer: Any, layers: int, heads: int, kv_heads: int, head_dim: int,
    tokens: int = 1, batch: int = 1, bytes_per_element: int = 2, window: int | None = None,
) -> Verdict:
    """Judge a cache size in bytes; every factor of the formula has a mistake of its own.

    With a sliding ``window`` the cache holds ``min(tokens, window)`` tokens per sequence.
    """
    group_size(heads, kv_heads)
    kept = cached_tokens(tokens, window)
    right = kv_cache_bytes(layers, kv_heads, head_dim, kept, batch, bytes_per_element)
    value = int_answer(question, answer, "the number of bytes (a whole number)")
    if isinstance(value, Verdict):
        number = number_answer(question, answer, "the number of bytes")
        if value.answered and not isinstance(number, Verdict):  # a fraction: maybe a unit slip
            unit = first_match(number, [(right / 2**30, "GiB"), (right / 10**9, "GB"), (right / 2**20, "MiB")])
            if unit:
                return failed(question, f"{number} looks like the size in {unit}; give it in bytes, a whole number")
        return value
    if value == right:
        sizes = f"{kept} tokens x batch {batch} x " if kept * batch > 1 else ""
        if kept < tokens:
            sizes = f"min({tokens}, window {window}) = " + sizes
        return passed(
            question,
            f"2 (K and V) x {layers} layers x h_kv={kv_heads} x d_h={head_dim} x {sizes}"
            f"{bytes_per_element} bytes = {right} bytes",
        )
    all_heads = right * heads // kv_heads
    byte_word = "byte" if bytes_per_element == 1 else "bytes"
    bits = bytes_per_element * 8
    # Ranked: the mistakes a learner makes most often first; a value several of them explain gets the
    # likeliest first, and two names for the same slip (bits per element, the size in bits) are one.
    mistakes: list[tuple[Any, str]] = []
    if kept < tokens:  # the window is shorter than the sequence: forgetting it counts every token
        mistakes += [
            (right * tokens // kept,
             f"you counted all {tokens} tokens; with a sliding window of {window} tokens each "
             f"layer keeps only the most recent {window} in its rolling cache"),
            (right * (kept - 1) // kept,
             f"you kept {kept - 1} tokens, the window minus one: the window of W = {window} "
             f"positions t - W + 1 .. t includes the query's own token, so the rolling buffer "
             f"holds W = {window} tokens (section 7)"),
            (right * (kept + 1) // kept,
             f"you kept W + 1 = {kept + 1} tokens (positions t - W .. t, as the Mistral paper words "
             f"its window); the rolling buffer has W = {window} slots: token t overwrites token "
             f"t - W, so it holds W tokens"),
        ]
    if kv_heads != heads:  # "h instead of h_kv" is a mistake only when the two differ
        mistakes.append((all_heads, f"you used h={heads} query heads (or the full width D = h x d_h); the cache "
                                    f"holds h_kv={kv_heads} K/V heads of d_h={head_dim} features each"))
    mistakes += [
        (right // 2, "you counted only keys or only values: both are cached, hence the factor 2"),
        (right * 8, f"that is the size in bits ({bits} bits per element); a byte is 8 bits and the answer "
                    f"is in bytes ({bytes_per_element} {byte_word} per element)"),
        *[(right * size // bytes_per_element, message) for size, message in (
            (2, f"you took 2 bytes per element (16-bit); the cache here is {bits}-bit, "
                f"{bytes_per_element} {byte_word} per element"),
            (4, f"you took 4 bytes per element (float32); the cache here is {bits}-bit, "
                f"{bytes_per_element} {byte_word} per element"),
        ) if size != bytes_per_element],
        (right // bytes_per_element if bytes_per_element > 1 else None,  # also "1 byte per element": one slip
         f"you counted elements, not bytes (as if each took 1 byte): each element takes {bytes_per_element} bytes"),
        (right * heads, f"you used the model width D = {heads * head_dim} where each K/V head has d_h={head_dim}"),
        (right // layers, f"that is one layer's share; every one of the {layers} layers keeps its own cache"),
        (right / 2**30, "that is the size in GiB; give it in bytes"),
        (right / 2**20, "that is the size in MiB; give it in bytes"),
    ]
    if kept > 1:
        mistakes.append((right // kept, f"that is the cache of one token; each sequence holds {kept} tokens"))
    if batch > 1:
        mistakes.append((right // batch, f"that is the cache of one sequence; the batch holds {batch} of them"))
    if kept > 1 and batch > 1:
        mistakes.append((right // (kept * batch), "that is the cache of one token of one sequence"))
    if kv_heads != heads:  # two slips at once come last
        mistakes.append((all_heads // 2, f"you used h={heads} instead of h_kv={kv_heads} and left out the factor "
                                         "2 for K and V"))
    found = list(dict.fromkeys(message for wrong, message in mistakes if wrong is not None and same(value, wrong)))
    if found:
        if len(found) == 1:
            return failed(question, f"{value} is not right: {found[0]}")
        # The list is ranked: lead with the likeliest cause and mark the others as less likely.
        return failed(question, f"{value} is not right: most likely {found[0]}; less likely, "
                                + "; or ".join(found[1:]))
    return failed(question, f"{value} is not right; go through the formula of section 1 factor by factor")


def check_bytes_per_token(
    answer: Any, layers: int, heads: int, kv_heads: int, head_dim: int, bytes_per_element: int = 2
) -> Verdict:
    """Question "bytes per token": how many bytes does one token add to the KV cache (all layers)?"""
    return _cache_verdict("bytes per token", answer, layers, heads, kv_heads, head_dim,
                          bytes_per_element=bytes_per_element)


def check_cache_bytes(
    answer: Any, preset: ModelPreset, tokens: int, batch: int = 1, bytes_per_element: int = 2
) -> Verdict:
    """Question "<model> cache": bytes of ``preset``'s KV cache for ``batch`` sequences of ``tokens`` tokens.

    A preset with a ``sliding_window`` keeps at most that many tokens per sequence.
    """
    if not isinstance(preset, ModelPreset):
        raise TypeError(f"preset must be a kv_cache.ModelPreset, got {type(preset).__name__}")
    return _cache_verdict(f"{preset.name} cache", answer, preset.layers, preset.heads, preset.kv_heads,
                          preset.head_dim, check_int("tokens", tokens), check_int("batch", batch), bytes_per_element,
                          preset.sliding_window)


# ----- which K/V head each query head reads ---------------------------------------------------
def _mapping_verdict(question: str, answer: Any, heads: int, kv_heads: int) -> Verdict:
    g = group_size(heads, kv_heads)
    floats = None if answer is None else _whole_floats(answer)
    if floats is not None:
        return failed(question, f"these are floats (dtype {floats}), and the question asks for integers (K/V head "
                                f"numbers): `/` always gives floats in Python; use `//` or .astype(int)")
    shape = _integer_shape(answer)
    if shape is not None and len(shape) != 1:
        return failed(question, f"integers, but of shape {shape}: the answer has one axis, {heads} entries "
                                f"(shape ({heads},)), one K/V head number per query head")
    given = int_array_answer(question, answer, f"a list of {heads} integers, one per query head")
    if isinstance(given, Verdict):
        return given
    right = np.arange(heads) // g
    if kv_heads != g and same(given, np.repeat(np.arange(kv_heads), kv_heads)):
        return failed(question, f"you repeated each K/V head h_kv={kv_heads} times; each K/V head serves g = h / h_kv "
                                f"query heads, so its number has to appear g={g} times")
    if kv_heads != 1 and same(given, np.repeat(np.arange(kv_heads), heads)):
        return failed(question, f"you repeated each K/V head h={heads} times, giving h x h_kv entries; each K/V head "
                                "serves only the g = h / h_kv query heads of its group")
    if given.shape != right.shape:
        per_kv = " one entry per K/V head;" if given.shape == (kv_heads,) and kv_heads != heads else ""
        return failed(question, f"expected {heads} integers (one per query head), got shape {given.shape}:{per_kv} "
                                f"query head i needs the number of the K/V head it reads")
    if same(given, right):
        return passed(question, f"query head i reads K/V head i // g with g={g}: {right.tolist()}")
    mistake = first_match(given, [
        (np.arange(heads) % kv_heads,
         f"that is the tiled order i % h_kv: neighbouring query heads land on different K/V heads. "
         f"GQA gives each K/V head a run of g={g} consecutive query heads"),
        (np.arange(heads) // kv_heads,
         f"you divided by h_kv={kv_heads}; the run of query heads that share a K/V head has length g"),
        (right + 1, "you numbered the K/V heads from 1; they are numbered from 0"),
        (right[::-1] if kv_heads not in (1, heads) else None,
         "the order is reversed: query head 0 reads K/V head 0, the last query head the last K/V head"),
        (np.arange(heads) // heads if kv_heads != 1 else None,
         f"every query head gets K/V head 0: you divided by h={heads}; divide by the group size g"),
    ])
    return failed(question, mistake or f"{given.tolist()} is not right: heads 0 .. g-1 share K/V head 0, and so on")


def _integer_shape(answer: Any) -> tuple[int, ...] | None:
    """The shape of ``answer`` when it is an array (or nested list) of integers, else ``None``."""
    try:
        array = as_numpy(answer)
    except Exception:  # not an array at all: int_array_answer says so
        return None
    return tuple(array.shape) if array.dtype.kind in "iu" else None


def _whole_floats(answer: Any) -> str | None:
    """The dtype name when ``answer`` is an array or list of floats that are all whole numbers, else ``None``."""
    try:
        array = as_numpy(answer)
    except Exception:  # not an array at all: int_array_answer says so
        return None
    if array.dtype.kind != "f" or array.size == 0 or not np.all(np.isfinite(array)):
        return None
    return str(array.dtype) if bool(np.all(array == np.round(array))) else None


def check_kv_head_function(function: Any) -> Verdict:
    """Question "K/V head of each query head": ``function(heads, kv_heads)`` returns ``h`` integers.

    Tried on GQA sizes first (where the tiled order and ``i // h_kv`` differ from the right one),
    then on MHA (``h_kv = h``) and MQA (``h_kv = 1``).
    """
    question = "K/V head of each query head"
    what = "the body of the function: return h integers, one per query head"
    refused = forbidden_call(question, function, "kv_head_of_query", "repeat_kv")
    if refused is not None:
        return refused
    # First a size where g, h_kv and 2 all differ, so that "// h_kv", "// 2" and "repeated h_kv times"
    # each give an answer of their own; the lesson's own h=8, h_kv=2 comes later.
    for heads, kv_heads in ((12, 3), (8, 2), (6, 3), (12, 4), (4, 4), (4, 1)):
        result = function_answer(question, function, (heads, kv_heads), what)
        if isinstance(result, Verdict):
            if not result.answered or not result.message.startswith("your function raised"):
                if (heads, kv_heads) == (12, 3):  # not a function, or None returned: nothing about sizes
                    return result
            elif (heads, kv_heads) == (12, 3):
                return failed(question, f"for h=12, h_kv=3: {result.message}{SIZES_ADVICE}")
            return failed(question, f"right for h=12, h_kv=3 but for h={heads}, h_kv={kv_heads}: {result.message}"
                                    f"{SIZES_ADVICE}")
        verdict = _mapping_verdict(question, result, heads, kv_heads)
        if not verdict:
            generic = "is not right: heads 0" in verdict.message or (
                verdict.message.startswith("expected") and "one entry per K/V head" not in verdict.message)
            hard_coded = _hard_coded_mapping(result, heads, kv_heads) if generic else None
            return failed(question, f"for h={heads}, h_kv={kv_heads}: {hard_coded or verdict.message}")
    return passed(question, "query head i reads K/V head i // g for every size tried, MHA (g=1) and MQA included")


SIZES_ADVICE = (". A size written into the function, or read from the notebook's variables (h, h_kv, g, d_h ...), "
                "works for one size only: take every size from the function's arguments")


def _hard_coded_mapping(result: Any, heads: int, kv_heads: int) -> str | None:
    """A diagnosis when ``result`` is the right mapping for some other, fixed size (a size written in)."""
    try:
        given = as_numpy(result)
    except Exception:  # not an array: the ordinary verdict says so
        return None
    if given.ndim != 1 or given.dtype.kind not in "iu":
        return None
    for g in range(1, 17):
        for n in range(1, 17):
            if (n, g) != (heads, heads // kv_heads) and len(given) == n and same(given, np.arange(n) // g):
                fixed = [f"g={g}"] if n == heads else [f"h={n}", f"g={g}"]
                return (f"{given.tolist()} is the right answer for {', '.join(fixed)}, not for this size: it looks "
                        f"like {' and '.join(fixed)} is written into your function (or taken from the notebook); "
                        "compute g from heads and kv_heads")
    return None


def check_repeat_kv(answer: Any, kv: Any, group_size: int) -> Verdict:
    """Question "repeated K/V heads": expand ``kv (B, h_kv, S, d_h)`` to ``(B, h, S, d_h)`` for the query heads."""
    question = "repeated K/V heads"
    kv_array = reference_array("kv", kv, "(B, h_kv, S, d_h)", rank=4)
    g = check_int("group_size", group_size, symbol="g")
    given = array_answer(question, answer, "an array of shape (B, h, S, d_h), one K/V head per query head")
    if isinstance(given, Verdict):
        return given
    right = np.repeat(kv_array, g, axis=1)
    if same(given, right):
        return passed(question, f"each K/V head appears g={g} times in a row: shape {right.shape}")
    kv_heads = kv_array.shape[1]
    mistake = first_match(given, [
        (np.tile(kv_array, (1, g, 1, 1)),
         "same shape, wrong order: your head axis holds the K/V heads tiled, 0, 1, .., 0, 1, .., so query "
         f"head 1 meets K/V head 1; query heads 0 .. {g - 1} (the first g = {g}) all belong to K/V head 0, "
         "the next g to K/V head 1, and so on"),
        (np.repeat(kv_array, g, axis=2), "you repeated along the token axis S (axis 2); the heads are axis 1"),
        (np.repeat(kv_array, g), "np.repeat without an axis flattens the array; name the head axis"),
        (np.repeat(kv_array, g, axis=0), "you repeated along the batch axis B (axis 0); the heads are axis 1"),
        (np.swapaxes(right, -1, -2),
         "the heads are right but the last two axes are swapped, (B, h, d_h, S): keep (B, h, S, d_h)"),
        (np.repeat(kv_array, kv_heads, axis=1) if kv_heads != g else None,
         f"you repeated each head h_kv={kv_heads} times; each K/V head serves g={g} query heads"),
        (kv_array, f"these are still the h_kv={kv_heads} K/V heads; the query side needs one per query head"),
        *[(np.repeat(kv_array, g, axis=axis).reshape(right.shape), f"right shape, wrong numbers: you repeated "
           f"along the {name} and reshaped to (B, h, S, d_h); the reshape cuts the repeated {unit} into new "
           f"heads, so each new head holds copies of single {unit} instead of a whole K/V head")
          for axis, name, unit in ((3, "feature axis d_h (the last axis; np.repeat without an axis does the same "
                                       "to the flattened array)", "numbers"),
                                   (2, "token axis S (axis 2)", "token rows"))],
    ])
    if mistake:
        return failed(question, mistake)
    if given.shape != right.shape:
        return failed(question, f"expected shape (B, h, S, d_h) = {right.shape}, got {given.shape}")
    return failed(question, "the numbers differ from repeating each K/V head g times along the head axis")


# ----- from a multi-head checkpoint to GQA ----------------------------------------------------
def _pool_mistakes(w: Any, D: int, heads: int, kv_heads: int, d_h: int) -> list[tuple[Any, str]]:
    g = heads // kv_heads
    per_head = w.reshape(D, kv_heads, g, d_h)  # (D, h*d_h) -> (D, h_kv, g, d_h)
    return [
        (per_head[:, :, 0].reshape(D, -1),
         "you kept the first head of each group; the conversion averages all g heads of a group"),
        (w[:, : kv_heads * d_h], "you kept the columns of the first h_kv heads (how GroupedQueryAttention "
                                 "initialises itself); the conversion averages each group's heads"),
        (per_head.sum(axis=2).reshape(D, -1), "you added up the heads of a group; take their mean"),
        (w.reshape(D, g, kv_heads, d_h).mean(axis=1).reshape(D, -1),
         "you pooled heads j, j + h_kv, j + 2 h_kv, .. (tiled groups); a group is g consecutive heads"),
        (w.reshape(D, kv_heads * d_h, g).mean(axis=2),
         "you averaged g neighbouring columns, cutting through heads; pool whole heads of d_h columns"),
        (w.reshape(D, heads, d_h).mean(axis=1), "you averaged all h heads into one; each of the h_kv groups "
                                                "gets its own mean"),
        (per_head.mean(axis=2), "right numbers, but shape (D, h_kv, d_h): put the heads side by side again"),
        (per_head.mean(axis=1).reshape(D, -1),
         "you averaged over axis 1, the h_kv axis: that mixes heads of different groups (head j with heads "
         "j + g, j + 2g, ..). After reshape(D, h_kv, g, d_h) the g heads of a group lie on axis 2"),
        (per_head.mean(axis=1), "you averaged over axis 1, the h_kv axis: that mixes heads of different groups. "
                                "After reshape(D, h_kv, g, d_h) the g heads of a group lie on axis 2"),
        (per_head.mean(axis=3).reshape(D, -1) if d_h > 1 else None,
         "you averaged the d_h features inside each head; average whole heads, over the g heads of a group"),
        (per_head.mean(axis=0), "you averaged over axis 0, the D rows of the matrix; average over the g heads of "
                                "a group"),
        (np.repeat(per_head.mean(axis=2), g, axis=1).reshape(D, -1),
         "you expanded the pooled heads back to h heads; the GQA layer stores only the h_kv pooled ones"),
    ]


def check_pool_kv_columns(function: Any) -> Verdict:
    """Question "mean-pooled K/V columns": ``function(w, heads, kv_heads)`` turns a multi-head
    ``w (D, h * d_h)`` into ``(D, h_kv * d_h)``: K/V head ``j`` is the mean of heads ``j*g .. j*g + g - 1``.

    Tried on a GQA size where every known mistake gives different numbers, then sizes that differ in
    every one of ``D``, ``h``, ``h_kv``, ``g`` and ``d_h`` (MQA and MHA among them), one in float32: the
    result must be a NumPy array of the input's dtype.
    """
    question = "mean-pooled K/V columns"
    what = "the body of the function: return the pooled (D, h_kv * d_h) array"
    refused = forbidden_call(question, function, "pool_kv_columns", "from_multihead")
    if refused is not None:
        return refused
    rng = np.random.default_rng(5)
    for D, heads, kv_heads, d_h, dtype in (
        (5, 6, 2, 2, np.float64), (3, 8, 4, 3, np.float64), (7, 4, 1, 2, np.float32), (4, 4, 4, 5, np.float64)
    ):
        w = rng.normal(size=(D, heads * d_h)).astype(dtype)
        given_w = w.copy()
        result = function_answer(question, function, (given_w, heads, kv_heads), what)
        case = f"for D={D}, h={heads}, h_kv={kv_heads}, d_h={d_h}"
        if isinstance(result, Verdict):
            if not result.answered:
                return result
            if D == 5:  # wrong on the first size already
                if not result.message.startswith("your function raised"):
                    return result
                return failed(question, f"{case}: {result.message}; take D and d_h from w.shape and the head "
                                        "counts from the arguments, not from the notebook's variables or one example")
            return failed(question, f"right for the first size but {case}: {result.message}; take D and d_h from "
                                    "w.shape and the head counts from the arguments, not from one example")
        given = array_answer(question, result, "an array")
        if isinstance(given, Verdict):
            return given
        w64 = w.astype(np.float64)
        right = w64.reshape(D, kv_heads, heads // kv_heads, d_h).mean(axis=2).reshape(D, -1)
        if same(given, right):
            kind = same_kind(question, result, given_w)
            if kind is not None:
                return failed(question, f"{case} ({w.dtype} input): {kind.message}")
            continue
        mistake = first_match(given, _pool_mistakes(w64, D, heads, kv_heads, d_h))
        if mistake is None and given.shape != right.shape:
            mistake = f"expected shape (D, h_kv * d_h) = {right.shape}, got {given.shape}"
        return failed(question, f"{case}: {mistake or 'the numbers differ from the mean of each group of g heads'}")
    return passed(question, "each K/V head is the mean of its g consecutive heads, for GQA, MQA and MHA sizes")
