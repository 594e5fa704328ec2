"""Quick check of the lesson "Latent attention" (MLA; checkers in ``lessons_lib.checks.latent_attention``):
keys rebuilt from the latent, scores against the latent, absorbed decoding as multi-query attention,
cache size, the GQA equivalent, the cost of absorbed scores.

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

import dis
import functools
import math
import types
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lessons_lib.checks import (
    Verdict,
    array_answer,
    failed,
    first_match,
    forbidden_call,
    function_answer,
    int_answer,
    number_answer,
    passed,
    precision_problem,
    reference_array,
    rounded_match,
    same,
    same_kind,
)
from lessons_lib.rope import apply_rope
from lessons_lib.validation import check_int

__all__ = [
    "check_absorbed_score_cost",
    "check_equivalent_kv_heads",
    "check_latent_as_mqa",
    "check_mla_cache_elements",
    "check_query_latent_scores",
    "check_rebuilt_keys",
]

Floats = NDArray[np.float64]


def _same_shape_hint(a: Floats, right: Floats, what: str) -> str:
    """The generic "not yet" text: shapes only when they differ (two equal shapes explain nothing)."""
    if a.shape != right.shape:
        return f"not {what} (your shape {a.shape}, expected {right.shape})"
    return f"the shape {a.shape} is right but the numbers are not {what}"


def check_rebuilt_keys(
    function: Any, latent: Any, w_uk: Any, w_uv: Any, *, section_1_latent: Any = None, section_1_w_uk: Any = None
) -> Verdict:
    """Question "rebuilt keys": ``function(latent, w_uk)`` returns every head's keys ``latent @ w_uk[i]``,
    shape ``(B, h, T, d_nope)``.

    Judged on the lesson's arrays, then on two problems of other sizes (a batch of 2, ``h != d_nope``).

    Args:
        function: the learner's function of ``(latent, w_uk)``.
        latent: the cached latents ``(B, T, d_c)``.
        w_uk: per-head key up-projections ``(h, d_c, d_nope)``.
        w_uv: per-head value up-projections ``(h, d_c, d_v)``, to recognise values handed in as keys.
        section_1_latent, section_1_w_uk: optional lookalikes the notebook also holds (with the same
            shapes), to recognise them read from the notebook by mistake.

    Recognises: the library's ``per_head_projection`` called, ``latent @ w_uk`` (the latent's batch
    axis lined up with the heads axis, B lost), the value up-projection used, the lookalikes used,
    head 0's up-projection for every head, a reshape where a transpose belongs, heads and features
    swapped, heads after tokens ``(B, T, h, d_nope)``, heads first ``(h, B, T, d_nope)`` (a list of
    per-head arrays), each head's keys transposed ``(B, h, d_nope, T)``, heads concatenated
    ``(B, T, h * d_nope)``, one head only, the heads summed, and sizes or notebook variables the
    function does not read from its arguments: a function wrong only for B > 1 has a misplaced batch
    axis; one also wrong for B = 1 with other T, h or d_nope has a size of the lesson's written into it.
    """
    question = "rebuilt keys"
    c = reference_array("latent", latent, "(B, T, d_c)", rank=3)
    wuk = reference_array("w_uk", w_uk, "(h, d_c, d_nope)", rank=3)
    wuv = reference_array("w_uv", w_uv, "(h, d_c, d_v)", rank=3)
    c1 = None if section_1_latent is None else reference_array("section_1_latent", section_1_latent, "(B, T, d_c)",
                                                               rank=3)
    wuk1 = None if section_1_w_uk is None else reference_array("section_1_w_uk", section_1_w_uk, "(h, d_c, d_nope)",
                                                               rank=3)
    what = "the body of your function: it returns every head's keys, (B, h, T, d_nope)"
    refused = forbidden_call(question, function.func if isinstance(function, functools.partial) else function,
                             "per_head_projection")
    if refused is not None:
        return refused
    result = function_answer(question, function, (c.copy(), wuk.copy()), what)
    if isinstance(result, Verdict):
        return result
    a = array_answer(question, result, "an array of shape (B, h, T, d_nope): every head's keys")
    if isinstance(a, Verdict):
        return a
    right = _keys(c, wuk)
    if not same(a, right):
        return failed(question, _keys_mistake(a, right, c, wuk, wuv, c1, wuk1))
    failures: list[tuple[dict[str, int], str, bool]] = []  # (sizes, why, raised) for every problem it fails
    for number, sizes in enumerate(_KEY_SIZES):
        rng = np.random.default_rng(36 + number)
        B, T, h, d_c, d_nope = (sizes[k] for k in ("B", "T", "h", "d_c", "d_nope"))
        other_c, other_wuk = rng.standard_normal((B, T, d_c)), rng.standard_normal((h, d_c, d_nope))
        other = function_answer(question, function, (other_c.copy(), other_wuk.copy()), what)
        other_right = _keys(other_c, other_wuk)
        if not isinstance(other, Verdict):
            other = array_answer(question, other, "an array")
        if not isinstance(other, Verdict) and same(other, other_right):
            continue
        if isinstance(other, Verdict):
            why = other.message.split("] ", 1)[-1]
        elif other.shape != other_right.shape:
            why = f"your shape {other.shape}, expected {other_right.shape}"
        else:
            why = _keys_mistake(other, other_right, other_c, other_wuk, other_wuk, None, None)
        failures.append((sizes, why, isinstance(other, Verdict)))
    if failures:
        return failed(question, _keys_other_sizes(function, failures, right.shape))
    return passed(question, f"latent @ w_uk[i] for every head i: shape (B, h, T, d_nope) = {right.shape} (also on two "
                            "problems of other sizes)")


_KEY_SIZES = (dict(B=2, T=3, h=3, d_c=5, d_nope=2), dict(B=1, T=5, h=2, d_c=3, d_nope=6))


def _keys_other_sizes(function: Any, failures: list[tuple[dict[str, int], str, bool]],
                      lesson_shape: tuple[int, ...]) -> str:
    """Why a function right on the lesson's arrays fails the `_KEY_SIZES` problems in ``failures``
    (each ``(sizes, why, raised)``, ``raised`` when the function raised or returned no array there).

    A batch axis put in the wrong place hides only while B = 1: a function that also fails a problem
    with B = 1 (other T, h or d_nope) has a size written into it instead.
    """
    def shown(sizes: dict[str, int]) -> str:
        return ", ".join(f"{key} = {value}" for key, value in sizes.items())

    sizes, why, raised = failures[0]
    globals_read = _notebook_data(function)
    if globals_read:
        names = ", ".join(f"`{name}`" for name in globals_read)
        return (f"right for the lesson's arrays, but not for other sizes ({shown(sizes)}; {why}): your function "
                f"reads the notebook's {names}; use only its arguments latent and w_uk, and read every size from "
                "their shapes")
    single = [failure for failure in failures if failure[0]["B"] == 1]
    if not single:
        return (f"right when the batch holds one sequence, but not for B = {sizes['B']} ({shown(sizes)}; {why}): "
                "with B = 1 a misplaced batch axis hides; give the latent an axis of size 1 where w_uk has its "
                "heads, latent[:, None], or name every axis in np.einsum")
    sizes, why, raised = single[0]
    lesson = ", ".join(str(size) for size in lesson_shape[:-1]) + f" or {lesson_shape[-1]}"
    outcome = "fails" if raised else "gives the wrong answer"
    if not raised and why.startswith("your shape"):
        outcome = "gives the wrong shape"
    return (f"right at the lesson's sizes, but with other sizes your function {outcome} ({shown(sizes)}; {why}), "
            f"even with one sequence in the batch: a size of the lesson's ({lesson}) is written into it; take B, "
            "T, h and d_nope from latent.shape and w_uk.shape, e.g. B, T, d_c = latent.shape")


def _keys(lat: Floats, up: Floats) -> Floats:
    out: Floats = np.einsum("btc,hcn->bhtn", lat, up)  # (B, T, d_c) x (h, d_c, d_nope) -> (B, h, T, d_nope)
    return out


def _keys_mistake(a: Floats, right: Floats, c: Floats, wuk: Floats, wuv: Floats, c1: Floats | None,
                  wuk1: Floats | None) -> str:
    """What is wrong with the keys ``a`` (right: ``right``), named when we recognise it."""
    B, h, T, d_nope = right.shape
    candidates: list[tuple[Any, str]] = []
    if wuv is not wuk:
        candidates.append((lambda: _keys(c, wuv),
                           "those are the values: you used w_uv, the value up-projection; keys come from w_uk"))
    candidates.append((lambda: np.broadcast_to(c[:, None] @ wuk[0], right.shape),
                       "every head got head 0's keys: you used w_uk[0] for all heads; head i has its own w_uk[i]"))
    elsewhere = ("a lookalike the notebook also holds, with the same sizes but other weights; use the arguments your "
                 "function is given")
    if c1 is not None and wuk1 is not None:
        candidates.append((lambda: _keys(c1, wuk1), f"those are other keys: the `latent` and `w_uk` you used are "
                                                    f"{elsewhere}"))
    if wuk1 is not None:
        candidates.append((lambda: _keys(c, wuk1), f"you used another `w_uk`, {elsewhere}"))
    if c1 is not None:
        candidates.append((lambda: _keys(c1, wuk), f"you used another `latent`, {elsewhere}"))
    candidates += [
        (lambda: np.asarray(c @ wuk),
         "latent @ w_uk lines the latent's batch axis up with w_uk's heads axis: with B = 1 NumPy broadcasts it, "
         "so the heads take the batch axis's place and the result has no B axis, (h, T, d_nope); keep both "
         "axes: give the latent an axis of size 1 where w_uk has its heads, or name every axis in np.einsum"),
        (right.transpose(0, 2, 1, 3).reshape(right.shape),
         "you reshaped (B, T, h, d_nope) into (B, h, T, d_nope): a reshape keeps the order of the numbers, so "
         "tokens and heads get mixed; move the heads axis with a transpose (or np.swapaxes / np.moveaxis)"),
        (lambda: (c @ wuk.transpose(1, 0, 2).reshape(wuk.shape[1], h * d_nope)).reshape(right.shape),
         "you multiplied by all heads' w_uk side by side, (B, T, h * d_nope), then reshaped to (B, h, T, d_nope): "
         "a reshape keeps the order of the numbers, so tokens and heads get mixed; split the heads off first, "
         "(B, T, h, d_nope), then move the heads axis before the tokens with a transpose"),
        (right.transpose(0, 3, 2, 1) if d_nope == h else None,
         "your heads axis and your feature axis are swapped, (B, d_nope, T, h): with h = d_nope the shape looks "
         "right; keep the heads at axis 1 and each key's features last"),
        (right.transpose(0, 2, 1, 3),
         "your heads axis comes after the tokens, (B, T, h, d_nope); put it before them, (B, h, T, d_nope), "
         "as every lesson lays out per-head arrays"),
        (np.swapaxes(right, -1, -2),
         "each head's keys are transposed, (B, h, d_nope, T); keep one row per token: (B, h, T, d_nope)"),
        (right.transpose(0, 2, 1, 3).reshape(B, T, h * d_nope),
         "you concatenated the heads into (B, T, h * d_nope); keep the heads as their own axis"),
        (right[:, 0], "that is head 0 only; every head has its own w_uk[i], stack them all"),
        (right.sum(axis=1), "you summed over the heads; every head keeps its own keys"),
        (right.transpose(1, 0, 2, 3),
         "your heads axis comes first, (h, B, T, d_nope), as a plain list of per-head arrays or np.stack(..., "
         "axis=0) gives; stack the heads at axis 1: (B, h, T, d_nope)"),
    ]
    mistake = first_match(a, candidates)
    if mistake is not None:
        return mistake
    if a.shape != right.shape:
        return (f"not every head's keys latent @ w_uk[i] (your shape {a.shape}, expected (B, h, T, d_nope) = "
                f"{right.shape})")
    return (f"right shape {a.shape}, wrong numbers: not every head's keys latent @ w_uk[i]; look at which axes your "
            "product sums over, and whether a reshape mixed tokens and heads")


def _scores_problem(
    x: Floats, w_dkv: Floats, w_q: Floats, w_uk: Floats, context: Floats | None = None
) -> tuple[tuple[Floats, ...], Floats]:
    """The arguments ``(x, latent, w_q_absorbed)`` of a latent-scores problem and the explicit scores.

    The latent is built from ``context (B, S, D)`` (``x`` itself when ``None``: self-attention, S = T).
    """
    latent = (x if context is None else context) @ w_dkv  # (B, S, D) @ (D, d_c) -> (B, S, d_c)
    q = np.einsum("btd,hdn->bhtn", x, w_q)  # (B, h, T, d_nope)
    k = np.einsum("bsc,hcn->bhsn", latent, w_uk)  # (B, h, S, d_nope), rebuilt only to compare
    explicit: Floats = q @ np.swapaxes(k, -1, -2)  # (B, h, T, S)
    return (x.copy(), latent, np.einsum("hdn,hcn->hdc", w_q, w_uk)), explicit


def _notebook_data(function: Any) -> list[str]:
    """The global names ``function`` (or a function nested in it) reads whose values are data (arrays,
    numbers, layers): not modules, classes or functions. An exercise function should use only its arguments."""
    code = getattr(function, "__code__", None)
    namespace = getattr(function, "__globals__", {})
    stack = [code] if isinstance(code, types.CodeType) else []
    tools = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, np.ufunc)
    found: list[str] = []
    while stack:
        code = stack.pop()
        for step in dis.get_instructions(code):
            name = step.argval
            if step.opname in ("LOAD_GLOBAL", "LOAD_NAME") and name in namespace and name not in found:
                if not isinstance(namespace[name], tools) and not hasattr(namespace[name], "__wrapped__"):
                    found.append(name)
        stack += [const for const in code.co_consts if isinstance(const, types.CodeType)]
    return found


def _run_scores(question: str, function: Any, args: tuple[Floats, ...], what: str) -> Floats | Verdict:
    result = function_answer(question, function, args, what)
    if isinstance(result, Verdict):
        return result
    kind = same_kind(question, result, args[0])
    return kind if kind is not None else array_answer(question, result, what)


_BATCH_AXIS = ("the latent (B, S, d_c) has no heads axis, so (B, h, T, d_c) @ (B, d_c, S) lines its batch axis up "
               "with the heads axis (with B = 1 NumPy broadcasts it and the bug hides); give the latent a heads axis "
               "of size 1, latent[:, None], before the product")


def _whole_float_as_int(answer: Any) -> Any:
    """A whole float (``34560.0``, from ``/`` or a float constant) as the int it equals: these questions
    ask for "one whole number", and a whole float is one. Anything else is returned unchanged."""
    if isinstance(answer, (float, np.floating)) and math.isfinite(answer) and float(answer).is_integer():
        return int(answer)
    return answer


def check_mla_cache_elements(
    answer: Any, *, layers: int, latent_width: int, rope_width: int, kv_heads: int, head_dim: int,
    nope_width: int | None = None, value_width: int | None = None, context: int | None = None,
    bytes_per_element: int | None = None,
) -> Verdict:
    """Question "MLA cache": numbers MLA caches per token over all layers, ``layers * (d_c + d_rope)``.

    ``kv_heads`` and ``head_dim`` are what the model's config file says (``num_key_value_heads``,
    the per-head width); they let us recognise the GQA formula applied to an MLA model. The optional
    ``nope_width`` and ``value_width`` (``d_nope``, ``d_v``) recognise the rebuilt keys and values
    cached instead of the latent; ``context`` (tokens) and ``bytes_per_element`` the answer given for
    the whole context or in bytes.

    Recognises: ``2 * layers * kv_heads * head_dim`` (the config's ``num_key_value_heads`` read as
    a K/V cache), the rebuilt K and V cached, the rotary key forgotten, a factor 2 (the latent counted
    once for K and once for V, or bytes of bf16: both named when they coincide), the rotary key
    counted per head, one layer instead of all, bytes, and the whole context instead of one token.
    """
    question = "MLA cache"
    layers, latent_width, rope_width, kv_heads, head_dim = (
        check_int(name, value) for name, value in (("layers", layers), ("latent_width", latent_width),
                                                   ("rope_width", rope_width), ("kv_heads", kv_heads),
                                                   ("head_dim", head_dim))
    )
    nope_width, value_width, context, bytes_per_element = (
        None if value is None else check_int(name, value)
        for name, value in (("nope_width", nope_width), ("value_width", value_width), ("context", context),
                            ("bytes_per_element", bytes_per_element))
    )
    a = int_answer(question, _whole_float_as_int(answer),
                   "one whole number: the numbers cached per token, summed over all layers")
    if isinstance(a, Verdict):
        return a
    right = layers * (latent_width + rope_width)
    if a == right:
        return passed(
            question,
            f"{layers} layers x ({latent_width} latent + {rope_width} rotary key) = {right} numbers per token",
        )
    twice_kv = ("you counted the cache twice, as if K and V had separate latents; one latent rebuilds both "
                "keys and values, so there is no factor 2")
    candidates: list[tuple[Any, str]] = [
        (2 * layers * kv_heads * head_dim,
         f"that is 2 x layers x num_key_value_heads x head_dim, the MHA/GQA formula. In an MLA model "
         f"the config's num_key_value_heads ({kv_heads}) only says how many heads the rebuilt keys "
         f"have; the cache holds the latent (d_c = {latent_width}) and the shared rotary key "
         f"(d_rope = {rope_width}) per layer"),
    ]
    if nope_width is not None and value_width is not None:
        candidates.append((layers * kv_heads * (nope_width + rope_width + value_width),
                           f"that is what caching the rebuilt keys (d_nope + d_rope = {nope_width + rope_width} "
                           f"per head) and values (d_v = {value_width} per head) of all {kv_heads} heads would take; "
                           "MLA caches the latent they are rebuilt from, plus the shared rotary key"))
    if bytes_per_element is not None:
        in_bytes = f"that is in bytes ({bytes_per_element} per number in bf16); the question counts numbers"
        if bytes_per_element == 2:  # a factor 2 can be bytes or K and V counted apart: name both
            candidates.append((2 * right, f"that is twice the count. If you multiplied by {bytes_per_element} bytes "
                                          "(bf16): the question counts numbers, not bytes. If you counted the latent "
                                          "once for K and once for V: one latent rebuilds both, so there is no "
                                          "factor 2"))
        else:
            candidates.append((bytes_per_element * right, in_bytes))
    candidates += [
        (layers * latent_width,
         f"you forgot the decoupled rotary key: each token also caches k^R of width d_rope = "
         f"{rope_width}, so add it to d_c = {latent_width}"),
        (2 * layers * (latent_width + rope_width), twice_kv),
        (2 * layers * latent_width,
         "you counted the latent twice (K and V) and forgot the rotary key; one latent serves both, "
         f"plus d_rope = {rope_width} for the rotary key"),
        (layers * (latent_width + kv_heads * rope_width),
         f"you stored the rotary key once per head; it is shared by all heads, so count d_rope = "
         f"{rope_width} once per layer"),
        (latent_width + rope_width,
         f"that is one layer; every one of the {layers} layers keeps its own latent and rotary key"),
    ]
    if context is not None:
        candidates.append((context * right, f"that is for the whole context of {context:,} tokens; the question "
                                            "asks for one token"))
        if bytes_per_element is not None:
            candidates.append((context * right * bytes_per_element,
                               f"that is the bytes of the whole context of {context:,} tokens; the question asks "
                               "for the numbers cached for one token"))
    mistake = first_match(a, candidates)
    return failed(
        question,
        mistake or f"not a count we recognise: what does one layer keep for each token (see section 5), "
        f"and how many of the {layers} layers keep it?",
    )


def check_equivalent_kv_heads(
    answer: Any, *, latent_width: int, rope_width: int, head_dim: int, kv_heads: int | None = None,
    layers: int | None = None, rule_head_dim: int | None = None,
) -> Verdict:
    """Question "GQA equivalent": ``(d_c + d_rope) / (2 * d_h)`` KV heads give the same cache.

    ``kv_heads`` (optional) is the config's ``num_key_value_heads``, to recognise it handed in;
    ``layers`` (optional) recognises MLA's cache over all layers divided by one layer's KV head;
    ``rule_head_dim`` (optional, ``D // h``) recognises heads of the series' width ``D / h`` in place of
    the model's real head width ``head_dim``.
    The lesson prints the answer with 2 decimals; an answer rounded to them is accepted.

    Recognises: floor division (a whole number from ``//``), the factor 2 forgotten (K and V), the
    rotary key forgotten, both forgotten, the
    ratio upside down, the config's ``num_key_value_heads``, all layers against one, a whole number
    of heads, and an answer off by rounding only.
    """
    question = "GQA equivalent"
    what = "one number (it need not be whole): the KV heads of width d_h a GQA cache would need"
    latent_width, rope_width = check_int("latent_width", latent_width), check_int("rope_width", rope_width)
    head_dim = check_int("head_dim", head_dim)
    kv_heads = None if kv_heads is None else check_int("kv_heads", kv_heads)
    layers = None if layers is None else check_int("layers", layers)
    rule_head_dim = None if rule_head_dim is None else check_int("rule_head_dim", rule_head_dim)
    a = number_answer(question, answer, what)
    if isinstance(a, Verdict):
        return a
    mla = latent_width + rope_width
    right = mla / (2 * head_dim)
    if rounded_match(a, right, 2):
        return passed(
            question,
            f"({latent_width} + {rope_width}) / (2 x {head_dim}) = {right:g} KV heads: a GQA layer "
            f"caching a K and a V of width {head_dim} per KV head",
        )
    if isinstance(answer, (int, np.integer)) and not isinstance(answer, bool) and a == mla // (2 * head_dim) != right:
        return failed(question, f"{int(answer)} is an int where the ratio is not whole: floor division `//` drops the "
                                "fraction (as do int() and round()); divide with `/`, the question asks for the exact "
                                "ratio, which need not be whole")
    mistakes: list[tuple[Any, str]] = [
        (mla / head_dim, "a GQA KV head caches a key AND a value: it holds twice d_h numbers per token"),
        (latent_width / (2 * head_dim), f"you left out the rotary key; MLA caches d_c + d_rope = {mla} per layer"),
        (latent_width / head_dim, "you left out the rotary key, and a GQA KV head holds a key AND a value"),
        (2 * head_dim / mla, "your ratio is upside down: divide what MLA caches by what one KV head caches"),
    ]
    if kv_heads is not None:
        mistakes.append((kv_heads, f"that is the config's num_key_value_heads ({kv_heads}): how many heads "
                                   "the rebuilt keys have, not the size of what MLA caches"))
    if layers is not None:
        all_layers = (f"you divided MLA's cache over all {layers} layers by what one KV head keeps in one layer; "
                      "compare one layer with one layer")
        mistakes += [(layers * right, all_layers), (layers * mla / head_dim, all_layers + ", and a GQA KV head "
                                                                             "holds a key AND a value")]
    if rule_head_dim is not None and rule_head_dim != head_dim:
        narrow = (f"you gave the KV heads the width D / h = {rule_head_dim}, the series' rule; DeepSeek-V2's heads "
                  f"are {head_dim} wide (section 6), and the question asks for KV heads of width HEAD_DIM")
        mistakes += [(mla / (2 * rule_head_dim), narrow),
                     (mla / rule_head_dim, narrow + ", and a GQA KV head caches a key AND a value")]
    mistake = first_match(a, mistakes)
    if mistake is None and a in (math.floor(right), math.ceil(right)) and right != int(right):
        mistake = ("you rounded to a whole number of heads; the question asks for the exact ratio, which need not "
                   "be whole")
    precision = precision_problem(question, a, right, 2)
    if mistake is None and precision is not None:
        return precision
    return failed(
        question,
        mistake or "not the count we expected: divide MLA's numbers per token and layer by what one GQA "
        "KV head stores per token and layer",
    )


def check_absorbed_score_cost(
    answer: Any, *, heads: int, cached_tokens: int, latent_width: int, nope_width: int, rope_width: int,
    layers: int, model_width: int | None = None,
) -> Verdict:
    """Question "absorbed score cost": multiply-adds for the absorbed scores of ONE new query against
    ``cached_tokens`` positions, in one layer, all heads: ``h * S * (d_c + d_rope)``. The one-off cost
    of forming the absorbed query is not part of it (the question says so).

    ``nope_width`` (``d_nope``), ``layers`` and the optional ``model_width`` (``D``) are only there to
    recognise mistakes.

    Recognises: the rotary part left out, the rotary dot product counted once instead of per head,
    one head only, one cached token only, the explicit width ``d_nope + d_rope``, all layers,
    multiplies and adds counted separately (FLOPs), and the cost of forming the absorbed query added
    (``h d_nope d_c`` from ``q_i``, or ``h D d_c`` from ``x`` with ``model_width``).
    """
    question = "absorbed score cost"
    sizes = {"heads": heads, "cached_tokens": cached_tokens, "latent_width": latent_width, "nope_width": nope_width,
             "rope_width": rope_width, "layers": layers}
    heads, cached_tokens, latent_width, nope_width, rope_width, layers = (check_int(n, v) for n, v in sizes.items())
    model_width = None if model_width is None else check_int("model_width", model_width)
    a = int_answer(question, _whole_float_as_int(answer),
                   "one whole number: multiply-adds of one layer's absorbed scores for one query")
    if isinstance(a, Verdict):
        return a
    h, S, d_c, d_nope, d_rope = heads, cached_tokens, latent_width, nope_width, rope_width
    right = h * S * (d_c + d_rope)
    if a == right:
        return passed(
            question,
            f"{right} multiply-adds: every head compares its absorbed query with each cached latent and its "
            "rotary query with each rotary key",
        )
    query_cost = ("you added the cost of forming the absorbed query ({what}, paid once per query, not per cached "
                  "token); the question counts only the score dot products against the S cached tokens")
    candidates: list[tuple[Any, str]] = [
        (h * S * d_c, f"you left out the rotary part: each head's score also has q^R_i . k^R, over "
                      f"d_rope = {d_rope} more features"),
        (h * S * d_c + S * d_rope,
         "the rotary key is shared, but each head has its own rotary query q^R_i, so the rotary dot "
         "product is computed once per head"),
        (S * (d_c + d_rope), f"that is one head; all {h} heads compute their own scores"),
        (h * (d_c + d_rope), f"that is one cached token; the query is scored against all S = {S} of them"),
        (h * S * (d_nope + d_rope),
         "that counts the scores against rebuilt keys (the explicit route); an absorbed query does not meet a "
         "key, it meets the cached latent: how wide is that?"),
        (layers * right, f"that is all {layers} layers; the question asks for one layer"),
        (2 * right, "you counted a multiply and an add separately (FLOPs); count each multiply-add once"),
        (right + h * d_nope * d_c, query_cost.format(what="q_i W_uk[i]^T, h x d_nope x d_c")),
    ]
    if model_width is not None:
        candidates.append((right + h * model_width * d_c, query_cost.format(what="x (W_q W_uk^T)[i], h x D x d_c")))
    mistake = first_match(a, candidates)
    return failed(
        question,
        mistake or "not a count we recognise: how many features does one absorbed score compare, "
        "and how many scores does one query need in one layer?",
    )


# ----- scores against the latent, the key up-projection applied to the query at run time -----------
class _Tracked(np.ndarray):  # type: ignore[type-arg]
    """An array that records the shape of every array computed from it (its ``log``), so that a
    checker can see whether the learner's code built an array shaped like the keys."""

    log: list[tuple[int, ...]]

    def __array_finalize__(self, obj: Any) -> None:
        self.log = getattr(obj, "log", [])

    def _wrap(self, result: Any) -> Any:
        if isinstance(result, np.ndarray):
            self.log.append(tuple(result.shape))
            tracked = result.view(_Tracked)
            tracked.log = self.log
            return tracked
        return result

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        plain = tuple(np.asarray(v) if isinstance(v, _Tracked) else v for v in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(np.asarray(v) if isinstance(v, _Tracked) else v for v in kwargs["out"])
        return self._wrap(getattr(ufunc, method)(*plain, **kwargs))

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        def plain(value: Any) -> Any:
            if isinstance(value, _Tracked):
                return value.view(np.ndarray)
            if isinstance(value, (list, tuple)):
                return type(value)(plain(v) for v in value)
            return value
        return self._wrap(func(*plain(args), **plain(kwargs)))


def _query_problem(x: Floats, w_dkv: Floats, w_q: Floats, w_uk: Floats, context: Floats | None = None
                   ) -> tuple[tuple[Floats, ...], Floats]:
    """The arguments ``(q, latent, w_uk)`` of a run-time latent-scores function and the explicit scores."""
    (_, latent, _), explicit = _scores_problem(x, w_dkv, w_q, w_uk, context)
    q = np.einsum("btd,hdn->bhtn", x, w_q)  # (B, h, T, d_nope)
    return (q, latent, w_uk.copy()), explicit


_QUERY_SIZES = (dict(B=1, T=3, S=5, D=5, h=3, d_c=2, d_nope=7), dict(B=2, T=4, S=7, D=9, h=5, d_c=3, d_nope=2))


def _built_keys(function: Any, args: tuple[Floats, ...]) -> bool:
    """Whether ``function(q, latent, w_uk)`` computes an array shaped like the keys ``(..., S, d_nope)``
    from ``w_uk`` (which it is handed as a `_Tracked` array)."""
    q, latent, w_uk = args
    tracked = w_uk.copy().view(_Tracked)
    tracked.log = []
    try:
        with np.errstate(all="ignore"):
            function(q.copy(), latent.copy(), tracked)
    except Exception:  # the learner's code may raise anything; other checks report it
        return False
    S, d_nope = latent.shape[1], w_uk.shape[2]
    return any(len(shape) >= 2 and shape[-2:] in ((S, d_nope), (d_nope, S)) for shape in tracked.log)


def check_query_latent_scores(function: Any, x: Any, w_dkv: Any, w_q: Any, w_uk: Any) -> Verdict:
    """Question "scores against the latent": ``function(q, latent, w_uk)`` returns the raw scores
    ``(B, h, T, S)`` of every head, ``(q_i @ w_uk[i].T) @ latent.T``, WITHOUT building any key.

    Called with ``q = x @ w_q[i]`` per head ``(B, h, T, d_nope)``, ``latent = x @ w_dkv (B, S, d_c)``
    and ``w_uk (h, d_c, d_nope)``, compared with the explicit scores ``q_i @ k_i.T``, then run on two
    problems of other sizes (``T != S``, a batch of 2). ``w_uk`` is handed in as an array that records
    what is computed from it, which shows keys ``latent @ w_uk[i]`` built (the explicit route).

    Recognises: the library's ``latent_scores`` called, keys built (right numbers, wrong route), every
    sequence scored against the first sequence's latent, the heads summed, one head only, each head's
    scores transposed, a scale of ``1/sqrt(d_nope)`` or ``1/sqrt(d_c)``, ``w_uk`` used without its
    transpose, the notebook's variables read inside the function, and the latent's missing heads axis.
    """
    question = "scores against the latent"
    refused = forbidden_call(question, function, "latent_scores")
    if refused is not None:
        return refused
    xs = reference_array("x", x, "(B, T, D)", rank=3)
    wdkv = reference_array("w_dkv", w_dkv, "(D, d_c)", rank=2)
    wq = reference_array("w_q", w_q, "(h, D, d_nope)", rank=3)
    wuk = reference_array("w_uk", w_uk, "(h, d_c, d_nope)", rank=3)
    args, right = _query_problem(xs, wdkv, wq, wuk)
    what = "the body of your function: it returns the raw scores (B, h, T, S) of every head against the latent"
    a = _run_scores(question, function, args, what)
    d_c, d_nope = wuk.shape[1], wuk.shape[2]
    if isinstance(a, Verdict) and a.answered and "your function raised" in a.message:
        if "matmul" in a.message or "einsum" in a.message or "operands could not" in a.message:
            return failed(question, f"{a.message}. Check the product with w_uk: each head's w_uk[i] is (d_c, d_nope) "
                                    f"= ({d_c}, {d_nope}), so a query of width d_nope meets it transposed, "
                                    "q_i @ w_uk[i].T, which gives d_c latent features")
        batch = _query_other_sizes(question, function, what, a.message, xs.shape[0])
        return a if batch is None else batch
    if isinstance(a, Verdict):
        return a
    if not same(a, right):
        mistake = first_match(a, [
            (right.sum(axis=1), "you summed over the heads; every head has its own scores, (B, h, T, S)"),
            (right[:, 0], "that is head 0 only; keep every head: (B, h, T, S)"),
            (np.swapaxes(right, -1, -2),
             "each head's scores are transposed, (B, h, S, T); rows are queries, columns are latents"),
            (right / math.sqrt(d_nope), "you scaled by 1/sqrt(d_nope): right for attention, but the question asks "
                                        "for the raw scores; leave the scale out"),
            (right / math.sqrt(d_c), "you scaled by 1/sqrt(d_c), which would be wrong even in attention (the scale "
                                     "stays 1/sqrt(d_nope)); here leave the scale out"),
        ])
        if mistake is None:
            generic = _same_shape_hint(a, right, "the explicit scores q_i . k_i of each head")
            other = _query_other_sizes(question, function, what, generic, xs.shape[0])
            mistake = generic if other is None else other.message
        return failed(question, mistake)
    if _built_keys(function, args):
        return failed(question, "right numbers, but your function builds the keys latent @ w_uk[i] (an array "
                                "(..., S, d_nope)): that is the explicit route, S up-projections per head. Apply "
                                "w_uk[i].T to the query instead, once per query, and let it meet the latent itself")
    verdict = _query_other_sizes(question, function, what, "", None)
    if verdict is not None:
        return verdict
    return passed(question, f"q_i @ w_uk[i].T has d_c = {d_c} features and meets the latent directly; the scores "
                            f"{right.shape} equal the explicit q_i @ k_i.T of every head, and no key was built (also "
                            "on two problems of other sizes)")


def _query_other_sizes(question: str, function: Any, what: str, lesson_failure: str,
                       lesson_batch: int | None) -> Verdict | None:
    """Runs ``function`` on the `_QUERY_SIZES` problems; a failed `Verdict` naming why it fails there, or ``None``.

    With ``lesson_batch`` (the function already failed on the lesson's arrays, ``lesson_failure`` says
    how), only the batch-axis diagnoses are looked for: right with B = 1, wrong with a batch of more.
    """
    for number, sizes in enumerate(_QUERY_SIZES):
        rng = np.random.default_rng(16 + number)
        B, T, S, D, h, d_c, d_nope = (sizes[k] for k in ("B", "T", "S", "D", "h", "d_c", "d_nope"))
        other_args, other_right = _query_problem(rng.standard_normal((B, T, D)), rng.standard_normal((D, d_c)),
                                                 rng.standard_normal((h, D, d_nope)),
                                                 rng.standard_normal((h, d_c, d_nope)),
                                                 rng.standard_normal((B, S, D)))
        other = _run_scores(question, function, other_args, what)
        ok = not isinstance(other, Verdict) and same(other, other_right)
        if lesson_batch is not None:
            if sizes["B"] == 1 and ok and lesson_batch > 1:
                return failed(question, f"right when the batch holds one sequence, but not for the B = {lesson_batch} "
                                        f"here ({lesson_failure}): {_BATCH_AXIS}")
            return None
        if ok:
            continue
        shown = ", ".join(f"{key} = {value}" for key, value in sizes.items())
        why = other.message if isinstance(other, Verdict) else (
            f"your shape {other.shape}, expected {other_right.shape}" if other.shape != other_right.shape
            else "other numbers")
        globals_read = _notebook_data(function)
        if globals_read:
            names = ", ".join(f"`{name}`" for name in globals_read)
            return failed(question, f"right for the lesson's layer, but not for other sizes ({shown}; {why}): your "
                                    f"function reads the notebook's {names}; use only its arguments q, latent and "
                                    "w_uk, and read every size from their shapes")
        q_other, latent_other, w_uk_other = other_args
        first_only = np.einsum("bhtn,hcn,sc->bhts", q_other, w_uk_other, latent_other[0])
        if sizes["B"] > 1 and not isinstance(other, Verdict) and same(other, first_only):
            return failed(question, f"right when the batch holds one sequence, but not for B = {sizes['B']} ({shown}): "
                                    "every sequence was scored against the FIRST sequence's latents (latent[:1] or "
                                    "latent[0] keeps only that one); each sequence b meets its own latent[b]: keep "
                                    "the latent's batch axis whole and add an axis of size 1 for the heads")
        if sizes["B"] > 1:
            return failed(question, f"right when the batch holds one sequence, but not for B = {sizes['B']} ({shown}; "
                                    f"{why}): {_BATCH_AXIS}")
        return failed(question, f"right for the lesson's layer, but not for other sizes ({shown}; {why}): does your "
                                "function use a size it does not read from its arguments' shapes?")
    return None


# ----- absorbed decoding as multi-query attention over the latent ---------------------------------
def _mqa_problem(rng: np.random.Generator, B: int, T: int, S: int, h: int, d_c: int, d_nope: int, d_rope: int
                 ) -> tuple[tuple[Floats, ...], tuple[Floats, Floats, Floats]]:
    """Random ``(q, q_rope, latent, rope_key, w_uk)`` and the right ``(queries, key, value)``."""
    args = (rng.standard_normal((B, h, T, d_nope)), rng.standard_normal((B, h, T, d_rope)),
            rng.standard_normal((B, S, d_c)), rng.standard_normal((B, S, d_rope)),
            rng.standard_normal((h, d_c, d_nope)))
    return args, _right_mqa(*args)


def _right_mqa(q: Floats, q_rope: Floats, latent: Floats, rope_key: Floats, w_uk: Floats
               ) -> tuple[Floats, Floats, Floats]:
    q_latent = np.einsum("bhtn,hcn->bhtc", q, w_uk)  # (B, h, T, d_c)
    queries = np.concatenate([q_latent, q_rope], axis=-1)  # (B, h, T, d_c + d_rope)
    key = np.concatenate([latent, rope_key], axis=-1)[:, None]  # (B, 1, S, d_c + d_rope)
    return queries, key, latent[:, None]


_MQA_SIZES = (dict(B=1, T=3, S=5, h=3, d_c=5, d_nope=2, d_rope=4), dict(B=2, T=2, S=6, h=4, d_c=3, d_nope=5, d_rope=2))


def _judge_mqa(result: Any, args: tuple[Floats, ...], right: tuple[Floats, Floats, Floats]) -> str | None:
    """``None`` when ``result`` is a right ``(queries, key, value)``, else what is wrong with it."""
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        return (f"your function returned {type(result).__name__}"
                + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "")
                + "; return three arrays: queries, key, value")
    parts = [array_answer("mqa", part, "an array") for part in result]
    for name, part in zip(("queries", "key", "value"), parts, strict=True):
        if isinstance(part, Verdict):
            return f"{name}: {part.message.split('] ', 1)[-1]}"
    queries, key, value = (np.asarray(part) for part in parts)
    q, latent, rope_key = args[0], args[2], args[3]
    right_q, right_k, right_v = right
    (B, h, T, _), (S, d_c), d_rope = q.shape, latent.shape[1:], rope_key.shape[-1]
    wide = d_c + d_rope
    if key.shape == (B, S, wide) or value.shape == (B, S, d_c):
        return ("the key and the value need a heads axis of size 1, (B, 1, S, width): one K/V head that every "
                "query head shares (NumPy and PyTorch then broadcast it over the h query heads)")
    if key.shape == (B, h, S, wide) or value.shape == (B, h, S, d_c):
        return (f"you repeated the key or the value for each of the {h} heads, (B, h, S, width); multi-query "
                "attention keeps ONE key head and ONE value head for all query heads: (B, 1, S, width)")
    if queries.shape == (B, h, T, q.shape[-1] + d_rope):
        return ("your queries are q_i itself, d_nope wide; the key here is the latent, so each head's query must "
                "first go through w_uk[i].T into the latent's d_c features (as in Your turn 2)")
    if queries.shape == (B, h, T, d_c) or key.shape == (B, 1, S, d_c):
        return (f"you left out the decoupled rotary part: the queries are [q_i w_uk[i]^T ; q^R_i] and the key "
                f"[latent ; rope_key], both d_c + d_rope = {wide} wide")
    if d_rope != d_c and value.shape == (B, 1, S, d_rope):
        return (f"your value is {d_rope} wide, the rotary key's width: the value is the latent, (B, 1, S, d_c = "
                f"{d_c}); the rotary key only shapes the scores")
    if value.shape == (B, 1, S, wide):
        return (f"the value is the latent alone, (B, 1, S, d_c = {d_c}): the rotary key only shapes the scores, "
                "it is never mixed into the output")
    if (queries.shape, key.shape, value.shape) != (right_q.shape, right_k.shape, right_v.shape):
        return (f"shapes: queries {queries.shape}, key {key.shape}, value {value.shape}; expected queries "
                f"{right_q.shape}, key {right_k.shape}, value {right_v.shape}")
    scores, right_scores = queries @ np.swapaxes(key, -1, -2), right_q @ np.swapaxes(right_k, -1, -2)
    if not same(scores, right_scores):
        flipped = np.concatenate([right_q[..., d_c:], right_q[..., :d_c]], axis=-1)
        if same(queries, flipped) or same(key, np.concatenate([right_k[..., d_c:], right_k[..., :d_c]], axis=-1)):
            return ("the queries and the key are concatenated in different orders, so the latent part of a query "
                    "meets the rotary part of the key; put the same part first in both")
        for factor, name in ((math.sqrt(q.shape[-1] + d_rope), "sqrt(d_nope + d_rope)"), (math.sqrt(wide),
                                                                                           "sqrt(d_c + d_rope)")):
            if same(scores * factor, right_scores):
                return (f"your queries (or key) are divided by {name}; return them unscaled and give the scale to "
                        "the attention call")
        named = _mqa_score_mistake(scores, args, right)
        if named is not None:
            return named
        return "right shapes, but queries @ key.T are not the scores q_i . k_i + q^R_i . k^R of every head"
    if not same(value, right_v):
        return "right shapes and right scores, but the value is not the latent itself, latent[:, None]"
    return None


def _mqa_score_mistake(scores: Floats, args: tuple[Floats, ...], right: tuple[Floats, Floats, Floats]) -> str | None:
    """Names a wrong ``queries @ key.T`` when it is head 0's ``w_uk`` for every head, or a rotary part
    rotated a second time (``q_rope`` and ``rope_key`` arrive already rotated)."""
    q, q_rope, latent, rope_key, w_uk = args
    right_q, right_k, _ = right
    T, S, d_c = q.shape[2], latent.shape[1], latent.shape[2]

    def scores_of(queries: Floats, key: Floats) -> Floats:
        out: Floats = queries @ np.swapaxes(key, -1, -2)
        return out

    head_0 = np.concatenate([np.einsum("bhtn,cn->bhtc", q, w_uk[0]), q_rope], axis=-1)
    if same(scores, scores_of(head_0, right_k)):
        return ("every head's query went through w_uk[0]: head i has its own key up-projection, so its query "
                "meets the latent through w_uk[i].T (an einsum over the heads axis, or w_uk with its last two axes "
                "swapped)")
    key_again = np.concatenate([latent, apply_rope(rope_key, np.arange(S))], axis=-1)[:, None]
    queries_again = [np.concatenate([right_q[..., :d_c], apply_rope(q_rope, positions)], axis=-1)
                     for positions in (np.arange(T), np.arange(S - T, S))]
    if any(same(scores, scores_of(right_q, key_again)) or same(scores, scores_of(again, key_again))
           for again in queries_again):
        return ("you rotated rope_key again: it comes from the cache already rotated (each token's rotary key is "
                "rotated once, at its own position, when it is cached); use rope_key as it is")
    if any(same(scores, scores_of(again, right_k)) for again in queries_again):
        return ("you rotated q_rope again: the rotary queries arrive already rotated at their positions; use q_rope "
                "as it is")
    return None


def check_latent_as_mqa(function: Any, q: Any, q_rope: Any, latent: Any, rope_key: Any, w_uk: Any) -> Verdict:
    """Question "MQA over the latent": ``function(q, q_rope, latent, rope_key, w_uk)`` returns the inputs
    of multi-query attention that equal the absorbed layer: ``queries (B, h, T, d_c + d_rope) =
    [q_i @ w_uk[i].T ; q^R_i]``, ``key (B, 1, S, d_c + d_rope) = [latent ; rope_key]`` and ``value
    (B, 1, S, d_c) = latent``.

    Judged on the lesson's arrays (``q (B, h, T, d_nope)``, ``q_rope (B, h, T, d_rope)``, ``latent
    (B, S, d_c)``, ``rope_key (B, S, d_rope)``, ``w_uk (h, d_c, d_nope)``), then on two problems of
    other sizes (``T != S``, a batch of 2). The queries and the key may put the rotary part first,
    as long as both do: the scores ``queries @ key.T`` are what is compared.

    Recognises: the library's ``multi_query_inputs`` called, no heads axis on the key or value, the
    key or value repeated per head, queries not
    taken into the latent's space, the rotary part left out, the rotary key in the value,
    concatenation orders that differ between queries and key, pre-scaled queries, and sizes or
    notebook variables the function does not read from its arguments.
    """
    question = "MQA over the latent"
    args = tuple(reference_array(name, value, layout, rank=rank) for name, value, layout, rank in (
        ("q", q, "(B, h, T, d_nope)", 4), ("q_rope", q_rope, "(B, h, T, d_rope)", 4),
        ("latent", latent, "(B, S, d_c)", 3), ("rope_key", rope_key, "(B, S, d_rope)", 3),
        ("w_uk", w_uk, "(h, d_c, d_nope)", 3)))
    what = "the body of your function: it returns (queries, key, value) for multi-query attention"
    refused = forbidden_call(question, function, "multi_query_inputs")
    if refused is not None:
        return refused
    result = function_answer(question, function, tuple(a.copy() for a in args), what)
    if isinstance(result, Verdict):
        return result
    problem = _judge_mqa(result, args, _right_mqa(*args))
    if problem is not None:
        return failed(question, problem)
    for number, sizes in enumerate(_MQA_SIZES):
        other_args, other_right = _mqa_problem(np.random.default_rng(26 + number), **sizes)
        other = function_answer(question, function, other_args, what)
        why = other.message.split("] ", 1)[-1] if isinstance(other, Verdict) else _judge_mqa(other, other_args,
                                                                                                other_right)
        if why is None:
            continue
        shown = ", ".join(f"{key} = {value}" for key, value in sizes.items())
        globals_read = _notebook_data(function)
        reads = (f"your function reads the notebook's {', '.join(f'`{n}`' for n in globals_read)}; use only its "
                 "arguments and read every size from their shapes" if globals_read else
                 "does your function use a size it does not read from its arguments' shapes?")
        if not globals_read and sizes["B"] > 1:
            reads = "check the batch axis: with B = 1 a misplaced batch axis hides"
        return failed(question, f"right for the lesson's arrays, but not for other sizes ({shown}; {why}): {reads}")
    h = args[0].shape[1]
    return passed(question, f"{h} query heads of width d_c + d_rope = {args[2].shape[-1] + args[3].shape[-1]} share "
                            "one key [latent ; rope_key] and one value (the latent): multi-query attention over the "
                            "latent (also on two problems of other sizes)")
