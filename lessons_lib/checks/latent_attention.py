"""Quick check of the lesson "Latent attention" (MLA; checkers in ``lessons_lib.checks.latent_attention``):
keys rebuilt from the latent, absorption, scores against the latent, cache size, the GQA equivalent,
the cost of absorbed scores.

Each checker compares the learner's answer with the right one and, when it is wrong, with the
mistakes people make most often (the value up-projection where the key one belongs, the heads summed
or transposed, the config's ``num_key_value_heads`` read as if MLA cached per-head keys and values,
the rotary key forgotten, the latent counted twice, ...). A "not yet" message names the mistake,
never the right answer.

Notation: ``h`` heads, ``d_nope`` position-free query/key width, ``d_h`` head width of a GQA
comparison, ``d_c`` latent width (``kv_lora_rank``), ``d_rope`` rotary key width
(``qk_rope_head_dim``), ``D`` model width.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.checks import (
    Verdict,
    array_answer,
    failed,
    first_match,
    function_answer,
    int_answer,
    number_answer,
    passed,
    reference_array,
    same,
)
from lessons_lib.validation import check_int

__all__ = [
    "check_absorbed_query_weight",
    "check_absorbed_score_cost",
    "check_equivalent_kv_heads",
    "check_latent_scores",
    "check_mla_cache_elements",
    "check_rebuilt_keys",
]

Floats = NDArray[np.float64]


def check_rebuilt_keys(answer: Any, latent: Any, w_uk: Any, w_uv: Any) -> Verdict:
    """Question "rebuilt keys": every head's keys ``latent @ w_uk[i]``, shape ``(B, h, T, d_nope)``.

    Args:
        latent: the cached latents ``(B, T, d_c)``.
        w_uk: per-head key up-projections ``(h, d_c, d_nope)``.
        w_uv: per-head value up-projections ``(h, d_c, d_v)``, to recognise values handed in as keys.

    Recognises: the value up-projection used, heads after tokens ``(B, T, h, d_nope)``, each head's
    keys transposed ``(B, h, d_nope, T)``, heads concatenated ``(B, T, h * d_nope)``, one head only,
    and the heads summed.
    """
    question = "rebuilt keys"
    c = reference_array("latent", latent, "(B, T, d_c)", rank=3)
    wuk = reference_array("w_uk", w_uk, "(h, d_c, d_nope)", rank=3)
    wuv = reference_array("w_uv", w_uv, "(h, d_c, d_v)", rank=3)
    a = array_answer(question, answer, "an array of shape (B, h, T, d_nope): every head's keys")
    if isinstance(a, Verdict):
        return a
    right: Floats = np.einsum("btc,hcn->bhtn", c, wuk)  # (B, T, d_c) x (h, d_c, d_nope) -> (B, h, T, d_nope)
    if same(a, right):
        return passed(question, f"latent @ w_uk[i] for every head i: shape (B, h, T, d_nope) = {right.shape}")
    B, h, T, d_nope = right.shape
    mistake = first_match(a, [
        (lambda: np.einsum("btc,hcv->bhtv", c, wuv),
         "those are the values: you used w_uv, the value up-projection; keys come from w_uk"),
        (right.transpose(0, 2, 1, 3),
         "your heads axis comes after the tokens, (B, T, h, d_nope); put it before them, (B, h, T, d_nope), "
         "as every lesson lays out per-head arrays"),
        (np.swapaxes(right, -1, -2),
         "each head's keys are transposed, (B, h, d_nope, T); keep one row per token: (B, h, T, d_nope)"),
        (right.transpose(0, 2, 1, 3).reshape(B, T, h * d_nope),
         "you concatenated the heads into (B, T, h * d_nope); keep the heads as their own axis"),
        (right[:, 0], "that is head 0 only; every head has its own w_uk[i], stack them all"),
        (right.sum(axis=1), "you summed over the heads; every head keeps its own keys"),
    ])
    return failed(
        question,
        mistake or f"not the keys rebuilt from the latent with each head's key up-projection (your shape "
        f"{a.shape}, expected {right.shape})",
    )


def check_absorbed_query_weight(answer: Any, w_q: Any, w_uk: Any, w_uv: Any = None) -> Verdict:
    """Question "absorbed query": the per-head matrices ``w_q[i] @ w_uk[i].T``, shape ``(h, D, d_c)``.

    Args:
        w_q: per-head query projections ``(h, D, d_nope)``.
        w_uk: per-head key up-projections ``(h, d_c, d_nope)``.
        w_uv: optional per-head value up-projections ``(h, d_c, d_v)``; given, the checker also
            recognises the value up-projection absorbed in place of the key one.

    Recognises: the result summed over heads, the transposed result ``(h, d_c, D)``, the value of
    one head only, and (with ``w_uv``) the wrong up-projection.
    """
    question = "absorbed query"
    wq = reference_array("w_q", w_q, "(h, D, d_nope)", rank=3)
    wuk = reference_array("w_uk", w_uk, "(h, d_c, d_nope)", rank=3)
    wuv = None if w_uv is None else reference_array("w_uv", w_uv, "(h, d_c, d_v)", rank=3)
    if wq.shape[0] != wuk.shape[0] or wq.shape[2] != wuk.shape[2]:
        raise ValueError(
            f"w_q (h, D, d_nope) and w_uk (h, d_c, d_nope) must agree on h and d_nope, got {wq.shape} and {wuk.shape}"
        )
    a = array_answer(question, answer, "an array of shape (h, D, d_c): one absorbed query matrix per head")
    if isinstance(a, Verdict):
        return a
    right: Floats = np.einsum("hdn,hcn->hdc", wq, wuk)
    if same(a, right):
        return passed(
            question,
            f"w_q[i] @ w_uk[i].T for every head: shape (h, D, d_c) = {right.shape}; queries now "
            f"meet the latent directly",
        )
    mistakes: list[tuple[Any, str]] = [
        (right.sum(axis=0),
         "you summed over the heads; every head keeps its own absorbed matrix, (h, D, d_c), "
         "because each head has its own W_uk"),
        (np.swapaxes(right, -1, -2),
         "your matrices are transposed, (h, d_c, D); the query side maps a token's D features to "
         "d_c latent features, so each head's matrix is (D, d_c)"),
        (right[0], "that is head 0 only; stack all heads: shape (h, D, d_c)"),
    ]
    if wuv is not None:
        mistakes.append((lambda: np.einsum("hdn,hcn->hdc", wq, wuv),
                         "you absorbed w_uv, the value up-projection; the scores need the keys' w_uk"))
    mistake = first_match(a, mistakes)
    return failed(
        question,
        mistake or f"not the query projection with each head's key up-projection folded in (your shape "
        f"{a.shape}, expected {right.shape})",
    )


def _scores_problem(x: Floats, w_dkv: Floats, w_q: Floats, w_uk: Floats) -> tuple[tuple[Floats, ...], Floats]:
    """The arguments ``(x, latent, w_q_absorbed)`` of a latent-scores function and the explicit scores."""
    latent = x @ w_dkv  # (B, S, D) @ (D, d_c) -> (B, S, d_c)
    q = np.einsum("btd,hdn->bhtn", x, w_q)  # (B, h, T, d_nope)
    k = np.einsum("bsc,hcn->bhsn", latent, w_uk)  # (B, h, S, d_nope), rebuilt only to compare
    explicit: Floats = q @ np.swapaxes(k, -1, -2)  # (B, h, T, S)
    return (x.copy(), latent, np.einsum("hdn,hcn->hdc", w_q, w_uk)), explicit


def check_latent_scores(function: Any, x: Any, w_dkv: Any, w_q: Any, w_uk: Any) -> Verdict:
    """Question "latent scores": ``function(x, latent, w_q_absorbed)`` returns the raw (unscaled)
    scores ``(B, h, T, S)`` of every head against the latent, without the key up-projection.

    The function is called on ``x (B, T, D)`` with the latent ``x @ w_dkv`` and the absorbed
    matrices built from ``w_q (h, D, d_nope)`` and ``w_uk (h, d_c, d_nope)``, and compared with the
    explicit scores ``q_i @ k_i.T``. It never sees ``w_uk``, so it must use the absorbed route; it is
    then run on a second layer of other sizes, which catches answers tied to the lesson's globals.

    Recognises: the heads summed, one head only, each head's scores transposed, and a scale of
    ``1/sqrt(d_nope)`` or ``1/sqrt(d_c)`` (the question asks for raw scores).
    """
    question = "latent scores"
    xs = reference_array("x", x, "(B, T, D)", rank=3)
    wdkv = reference_array("w_dkv", w_dkv, "(D, d_c)", rank=2)
    wq = reference_array("w_q", w_q, "(h, D, d_nope)", rank=3)
    wuk = reference_array("w_uk", w_uk, "(h, d_c, d_nope)", rank=3)
    args, right = _scores_problem(xs, wdkv, wq, wuk)
    what = "the body of your function: it returns the raw scores (B, h, T, S) of every head against the latent"
    result = function_answer(question, function, args, what)
    if isinstance(result, Verdict):
        return result
    a = array_answer(question, result, what)
    if isinstance(a, Verdict):
        return a
    if not same(a, right):
        d_c, d_nope = wuk.shape[1], wuk.shape[2]
        mistake = first_match(a, [
            (right.sum(axis=1), "you summed over the heads; every head has its own scores, (B, h, T, S)"),
            (right[:, 0], "that is head 0 only; keep every head: (B, h, T, S)"),
            (np.swapaxes(right, -1, -2),
             "each head's scores are transposed, (B, h, S, T); rows are queries, columns are latents"),
            (right / math.sqrt(d_nope),
             "you scaled by 1/sqrt(d_nope): right for attention, but here we want the raw scores to compare "
             "them with the explicit q @ k.T; leave the scale out"),
            (right / math.sqrt(d_c),
             "you scaled by 1/sqrt(d_c), which would be wrong even in attention: the scale stays "
             "1/sqrt(d_nope), the width of the keys we never build. Here leave the scale out"),
        ])
        return failed(
            question,
            mistake or f"these are not the explicit scores q_i . k_i of each head (your shape {a.shape}, "
            f"expected {right.shape})",
        )
    rng = np.random.default_rng(6)  # a second layer of other sizes: B=2, T=S=3, D=5, h=3, d_c=2, d_nope=7
    other_args, other_right = _scores_problem(
        rng.standard_normal((2, 3, 5)), rng.standard_normal((5, 2)), rng.standard_normal((3, 5, 7)),
        rng.standard_normal((3, 2, 7)),
    )
    other = function_answer(question, function, other_args, what)
    if isinstance(other, Verdict) or not same(array_answer(question, other, what), other_right):
        why = f" ({other.message})" if isinstance(other, Verdict) else ""
        return failed(
            question,
            f"right for this layer, but not for another layer of other sizes{why}: use only the arguments "
            "x, latent and w_q_absorbed, not the notebook's variables (layer, h, d_c, ...)",
        )
    return passed(
        question,
        f"queries projected to the d_c = {wuk.shape[1]} latent features meet the latent directly; the "
        f"scores {right.shape} equal the explicit q_i @ k_i.T of every head, and no key was built",
    )


def check_mla_cache_elements(
    answer: Any, *, layers: int, latent_width: int, rope_width: int, kv_heads: int, head_dim: int
) -> Verdict:
    """Question "MLA cache": numbers MLA caches per token over all layers, ``layers * (d_c + d_rope)``.

    ``kv_heads`` and ``head_dim`` are what the model's config file says (``num_key_value_heads``,
    the per-head width); they let us recognise the GQA formula applied to an MLA model.

    Recognises: ``2 * layers * kv_heads * head_dim`` (the config's ``num_key_value_heads`` read as
    a K/V cache), the rotary key forgotten, the latent counted twice (once for K, once for V), the
    rotary key counted per head, and one layer instead of all.
    """
    question = "MLA cache"
    layers, latent_width, rope_width, kv_heads, head_dim = (
        check_int(name, value) for name, value in (("layers", layers), ("latent_width", latent_width),
                                                   ("rope_width", rope_width), ("kv_heads", kv_heads),
                                                   ("head_dim", head_dim))
    )
    a = int_answer(question, answer, "one whole number: the numbers cached per token, summed over all layers")
    if isinstance(a, Verdict):
        return a
    right = layers * (latent_width + rope_width)
    if a == right:
        return passed(
            question,
            f"{layers} layers x ({latent_width} latent + {rope_width} rotary key) = {right} numbers per token",
        )
    mistake = first_match(a, [
        (2 * layers * kv_heads * head_dim,
         f"that is 2 x layers x num_key_value_heads x head_dim, the MHA/GQA formula. In an MLA model "
         f"the config's num_key_value_heads ({kv_heads}) only says how many heads the rebuilt keys "
         f"have; the cache holds the latent (d_c = {latent_width}) and the shared rotary key "
         f"(d_rope = {rope_width}) per layer"),
        (layers * latent_width,
         f"you forgot the decoupled rotary key: each token also caches k^R of width d_rope = "
         f"{rope_width}, so add it to d_c = {latent_width}"),
        (2 * layers * (latent_width + rope_width),
         "you counted the cache twice, as if K and V had separate latents; one latent rebuilds both "
         "keys and values, so there is no factor 2"),
        (2 * layers * latent_width,
         "you counted the latent twice (K and V) and forgot the rotary key; one latent serves both, "
         f"plus d_rope = {rope_width} for the rotary key"),
        (layers * (latent_width + kv_heads * rope_width),
         f"you stored the rotary key once per head; it is shared by all heads, so count d_rope = "
         f"{rope_width} once per layer"),
        (latent_width + rope_width,
         f"that is one layer; every one of the {layers} layers keeps its own latent and rotary key"),
    ])
    return failed(
        question,
        mistake or f"not a count we recognise: what does one layer keep for each token (see section 5), "
        f"and how many of the {layers} layers keep it?",
    )


def check_equivalent_kv_heads(
    answer: Any, *, latent_width: int, rope_width: int, head_dim: int, kv_heads: int | None = None
) -> Verdict:
    """Question "GQA equivalent": ``(d_c + d_rope) / (2 * d_h)`` KV heads give the same cache.

    ``kv_heads`` (optional) is the config's ``num_key_value_heads``, to recognise it handed in.

    Recognises: the factor 2 forgotten (K and V), the rotary key forgotten, both forgotten, the
    ratio upside down, and the config's ``num_key_value_heads``.
    """
    question = "GQA equivalent"
    what = "one number (it need not be whole): the KV heads of width d_h a GQA cache would need"
    latent_width, rope_width = check_int("latent_width", latent_width), check_int("rope_width", rope_width)
    head_dim = check_int("head_dim", head_dim)
    kv_heads = None if kv_heads is None else check_int("kv_heads", kv_heads)
    a = number_answer(question, answer, what)
    if isinstance(a, Verdict):
        return a
    mla = latent_width + rope_width
    right = mla / (2 * head_dim)
    if same(a, right):
        return passed(
            question,
            f"({latent_width} + {rope_width}) / (2 x {head_dim}) = {right:g} KV heads: a GQA layer "
            f"caching a K and a V of width {head_dim} per KV head",
        )
    mistakes: list[tuple[Any, str]] = [
        (mla / head_dim, "a GQA KV head caches a key AND a value: it holds twice d_h numbers per token"),
        (latent_width / (2 * head_dim), f"you left out the rotary key; MLA caches d_c + d_rope = {mla} per layer"),
        (latent_width / head_dim, "you left out the rotary key, and a GQA KV head holds a key AND a value"),
        (2 * head_dim / mla, "your ratio is upside down: divide what MLA caches by what one KV head caches"),
    ]
    if kv_heads is not None:
        mistakes.append((kv_heads, f"that is the config's num_key_value_heads ({kv_heads}): how many heads "
                                   "the rebuilt keys have, not the size of what MLA caches"))
    mistake = first_match(a, mistakes)
    return failed(
        question,
        mistake or "not the count we expected: divide MLA's numbers per token and layer by what one GQA "
        "KV head stores per token and layer",
    )


def check_absorbed_score_cost(
    answer: Any, *, heads: int, cached_tokens: int, latent_width: int, nope_width: int, rope_width: int,
    layers: int,
) -> Verdict:
    """Question "absorbed score cost": multiply-adds for the absorbed scores of ONE new query against
    ``cached_tokens`` positions, in one layer, all heads: ``h * S * (d_c + d_rope)``.

    ``nope_width`` (``d_nope``) and ``layers`` are only there to recognise mistakes.

    Recognises: the rotary part left out, the rotary dot product counted once instead of per head,
    one head only, one cached token only, the explicit width ``d_nope + d_rope``, all layers, and
    multiplies and adds counted separately (FLOPs).
    """
    question = "absorbed score cost"
    sizes = {"heads": heads, "cached_tokens": cached_tokens, "latent_width": latent_width, "nope_width": nope_width,
             "rope_width": rope_width, "layers": layers}
    heads, cached_tokens, latent_width, nope_width, rope_width, layers = (check_int(n, v) for n, v in sizes.items())
    a = int_answer(question, answer, "one whole number: multiply-adds of one layer's absorbed scores for one query")
    if isinstance(a, Verdict):
        return a
    h, S, d_c, d_nope, d_rope = heads, cached_tokens, latent_width, nope_width, rope_width
    right = h * S * (d_c + d_rope)
    if a == right:
        return passed(
            question,
            f"h x S x (d_c + d_rope) = {h} x {S} x ({d_c} + {d_rope}) = {right}: every head compares its "
            f"absorbed query with each cached latent and its rotary query with each rotary key",
        )
    mistake = first_match(a, [
        (h * S * d_c, f"you left out the rotary part: each head's score also has q^R_i . k^R, over "
                      f"d_rope = {d_rope} more features"),
        (h * S * d_c + S * d_rope,
         "the rotary key is shared, but each head has its own rotary query q^R_i, so the rotary dot "
         "product is computed once per head"),
        (S * (d_c + d_rope), f"that is one head; all {h} heads compute their own scores"),
        (h * (d_c + d_rope), f"that is one cached token; the query is scored against all S = {S} of them"),
        (h * S * (d_nope + d_rope),
         f"that is the explicit route, over d_nope + d_rope features; absorbed queries have d_c = {d_c} "
         "features where the rebuilt keys had d_nope"),
        (layers * right, f"that is all {layers} layers; the question asks for one layer"),
        (2 * right, "you counted a multiply and an add separately (FLOPs); count each multiply-add once"),
    ])
    return failed(
        question,
        mistake or "not a count we recognise: how many features does one absorbed score compare, "
        "and how many scores does one query need in one layer?",
    )
