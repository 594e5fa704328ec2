"""Quick check of the lesson "Latent attention" (MLA; checkers in ``lessons_lib.checks.latent_attention``):
cache size, absorption, the GQA equivalent.

Each checker compares the learner's answer with the right one and, when it is wrong, with the
mistakes people make most often (reading the config's ``num_key_value_heads`` as if MLA cached
per-head keys and values, forgetting the rotary key, counting the latent twice, ...).

Notation: ``h`` heads, ``d_h`` head width, ``d_c`` latent width (``kv_lora_rank``), ``d_rope``
rotary key width (``qk_rope_head_dim``), ``D`` model width.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.checks import (
    Verdict,
    array_answer,
    failed,
    first_match,
    int_answer,
    number_answer,
    passed,
    reference_array,
    same,
)

__all__ = ["check_absorbed_query_weight", "check_equivalent_kv_heads", "check_mla_cache_elements"]


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
    a = int_answer(question, answer, "layers * (d_c + d_rope)")
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
    return failed(question, mistake or f"expected layers x (d_c + d_rope) = {layers} x ({latent_width} + {rope_width})")


def check_absorbed_query_weight(answer: Any, w_q: Any, w_uk: Any) -> Verdict:
    """Question "absorbed query": the per-head matrices ``w_q[i] @ w_uk[i].T``, shape ``(h, D, d_c)``.

    Args:
        w_q: per-head query projections ``(h, D, d_nope)``.
        w_uk: per-head key up-projections ``(h, d_c, d_nope)``.

    Recognises: the result summed over heads, the transposed result ``(h, d_c, D)``, and the
    value of one head only.
    """
    question = "absorbed query"
    wq = reference_array("w_q", w_q, "(h, D, d_nope)", rank=3)
    wuk = reference_array("w_uk", w_uk, "(h, d_c, d_nope)", rank=3)
    a = array_answer(question, answer, "the (h, D, d_c) absorbed matrices")
    if isinstance(a, Verdict):
        return a
    right: NDArray[np.float64] = np.einsum("hdn,hcn->hdc", wq, wuk)
    if same(a, right):
        return passed(
            question,
            f"w_q[i] @ w_uk[i].T for every head: shape (h, D, d_c) = {right.shape}; queries now "
            f"meet the latent directly",
        )
    mistake = first_match(a, [
        (right.sum(axis=0),
         "you summed over the heads; every head keeps its own absorbed matrix, (h, D, d_c), "
         "because each head has its own W_uk"),
        (np.swapaxes(right, -1, -2),
         "your matrices are transposed, (h, d_c, D); the query side maps D features to d_c "
         "latent features: w_q[i] @ w_uk[i].T has shape (D, d_c)"),
        (right[0], "that is head 0 only; stack all heads: shape (h, D, d_c)"),
    ])
    return failed(
        question, mistake or f"expected w_q[i] @ w_uk[i].T for each head i, shape {right.shape}; got shape {a.shape}"
    )


def check_equivalent_kv_heads(answer: Any, *, latent_width: int, rope_width: int, head_dim: int) -> Verdict:
    """Question "GQA equivalent": ``(d_c + d_rope) / (2 * d_h)`` KV heads give the same cache.

    Recognises: the factor 2 forgotten (K and V), and the rotary key forgotten.
    """
    question = "GQA equivalent"
    a = number_answer(question, answer, "(d_c + d_rope) / (2 * d_h)")
    if isinstance(a, Verdict):
        return a
    right = (latent_width + rope_width) / (2 * head_dim)
    if same(a, right):
        return passed(
            question,
            f"({latent_width} + {rope_width}) / (2 x {head_dim}) = {right:g} KV heads: a GQA layer "
            f"caching a K and a V of width {head_dim} per KV head",
        )
    mistake = first_match(a, [
        ((latent_width + rope_width) / head_dim, "a GQA KV head caches a key AND a value: divide by 2 * d_h, not d_h"),
        (latent_width / (2 * head_dim),
         f"you left out the rotary key; MLA caches d_c + d_rope = {latent_width + rope_width}"),
    ])
    return failed(
        question,
        mistake or "expected (d_c + d_rope) / (2 * d_h): MLA's numbers per token and layer divided by what one "
        "GQA KV head stores",
    )
