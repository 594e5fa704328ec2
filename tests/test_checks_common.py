"""Tests for the shared Quick-check helpers in `lessons_lib.checks`: the answer readers never raise,
the tolerance policy, `first_match` and the reference readers; plus every lesson checker fed odd answers."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

import lessons_lib.checks.concatenate_and_project as cp
import lessons_lib.checks.efficient_attention as ea
import lessons_lib.checks.grouped_query_attention as gqa
import lessons_lib.checks.heads_at_work as hw
import lessons_lib.checks.inspecting_heads as ih
import lessons_lib.checks.latent_attention as la
import lessons_lib.checks.matching_pytorch as mp
import lessons_lib.checks.one_head as oh
import lessons_lib.checks.real_model_heads as rmh
import lessons_lib.checks.splitting_into_heads as sih
from lessons_lib import induction, mha_numpy
from lessons_lib.checks import (
    ATOL,
    RTOL,
    VERDICT_WIDTH,
    Verdict,
    array_answer,
    failed,
    first_match,
    function_answer,
    int_answer,
    int_array_answer,
    is_blank,
    mask_answer,
    number_answer,
    reference_array,
    reference_mask,
    same,
    unanswered,
)

Floats = NDArray[np.float64]


def odd_answers() -> list[Any]:
    """Inputs a learner might hand in by mistake (built afresh: one of them is a tensor with grad)."""
    return [None, "abc", {}, [1, [2]], object(), torch.ones(2, 3, requires_grad=True), np.int64(3), True, 2.5,
            math.nan]


READERS: list[Callable[[str, Any, str], Any]] = [array_answer, int_answer, number_answer, int_array_answer, mask_answer]


def assert_failed(result: object, *words: str) -> None:
    assert isinstance(result, Verdict) and not result.ok, result
    for word in words:
        assert word in " ".join(repr(result).split()), (word, repr(result))  # the verdict as one line


# ---- the readers never raise -----------------------------------------------------------------


@pytest.mark.parametrize("reader", READERS, ids=lambda reader: reader.__name__)
def test_readers_never_raise_on_odd_inputs(reader: Callable[[str, Any, str], Any]) -> None:
    for answer in odd_answers():
        result = reader("q", answer, "something")
        assert isinstance(result, (Verdict, np.ndarray, int, float)), (answer, result)


@pytest.mark.parametrize("reader", READERS, ids=lambda reader: reader.__name__)
def test_readers_ask_for_a_missing_answer(reader: Callable[[str, Any, str], Any]) -> None:
    assert_failed(reader("q", None, "q @ k.T"), "not answered yet: replace None with q @ k.T")


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=2),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(json_like)
def test_readers_never_raise_on_nested_values(answer: Any) -> None:
    for reader in READERS:
        reader("q", answer, "something")
    assert isinstance(same(answer, answer), bool)
    assert first_match(answer, [(answer, "itself")]) in (None, "itself")


def test_array_answer_values() -> None:
    grad = torch.ones(2, 3, requires_grad=True)
    converted = array_answer("q", grad, "x")
    assert isinstance(converted, np.ndarray) and converted.dtype == np.float64 and converted.shape == (2, 3)
    assert isinstance(array_answer("q", torch.ones(2, dtype=torch.bfloat16), "x"), np.ndarray)
    assert same(array_answer("q", [[1, 2], [3, 4]], "x"), [[1.0, 2.0], [3.0, 4.0]])
    assert array_answer("q", np.int64(3), "x") == 3.0
    assert_failed(array_answer("q", "abc", "x"), "expected an array of numbers", "str 'abc'")
    assert_failed(array_answer("q", {}, "x"), "dict")
    assert_failed(array_answer("q", [1, [2]], "x"), "list [1, [2]]")
    assert_failed(array_answer("q", object(), "x"), "object")
    assert_failed(array_answer("q", np.array(["1.5"]), "x"), "dtype <U3")  # text is not a number
    assert_failed(array_answer("q", [1.0, None], "x"), "list")
    assert_failed(array_answer("q", np.array([1j]), "x"), "complex128")


def test_int_answer_values() -> None:
    assert int_answer("q", np.int64(3), "x") == 3 and type(int_answer("q", np.int64(3), "x")) is int
    assert_failed(int_answer("q", 4.0, "x"), "4.0 is a float", "asks for an int", "use `//`")
    assert int_answer("q", np.array([7]), "x") == 7
    assert int_answer("q", torch.tensor(5, requires_grad=False), "x") == 5
    assert_failed(int_answer("q", torch.tensor(5.0, requires_grad=True), "x"), "5.0 is a float")
    assert int_answer("q", 2**70, "x") == 2**70  # a Python int too big for int64 stays exact
    assert_failed(int_answer("q", True, "x"), "expected one whole number (an int), got the boolean True")
    assert_failed(int_answer("q", np.bool_(False), "x"), "boolean")
    assert_failed(int_answer("q", 2.5, "x"), "expected one whole number (an int), got the float 2.5")
    assert_failed(int_answer("q", math.nan, "x"), "whole number", "nan")
    assert_failed(int_answer("q", math.inf, "x"), "whole number")
    assert_failed(int_answer("q", "12", "x"), "str '12'")
    assert_failed(int_answer("q", [1, 2], "x"), "list [1, 2]")
    assert_failed(int_answer("q", torch.ones(2, 3, requires_grad=True), "x"), "Tensor of dtype torch.float32")


def test_number_answer_values() -> None:
    assert number_answer("q", 2.5, "x") == 2.5
    assert number_answer("q", np.int64(3), "x") == 3.0
    assert number_answer("q", torch.tensor([2.0], requires_grad=True), "x") == 2.0
    nan = number_answer("q", math.nan, "x")
    assert isinstance(nan, float) and math.isnan(nan)
    assert_failed(number_answer("q", True, "x"), "expected one number, got the boolean True")
    assert_failed(number_answer("q", "abc", "x"), "expected one number, got str 'abc'")
    assert_failed(number_answer("q", {}, "x"), "dict")
    assert_failed(number_answer("q", [1, [2]], "x"), "list")


def test_int_array_and_mask_answers() -> None:
    assert same(int_array_answer("q", range(3), "x"), [0, 1, 2])
    assert same(int_array_answer("q", {2, 0, 1}, "x"), [0, 1, 2])
    assert_failed(int_array_answer("q", [0.0, 1.0], "x"), "expected x")
    assert_failed(int_array_answer("q", [[0, 1]], "x"), "expected x")
    mask = mask_answer("q", np.eye(2, dtype=bool), "x")
    assert isinstance(mask, np.ndarray) and mask.dtype == np.bool_
    assert_failed(mask_answer("q", np.full(2, "yes"), "x"), "expected a boolean mask, got dtype <U3")
    assert_failed(mask_answer("q", object(), "x"), "expected a boolean mask, got object")


# ---- the tolerance policy --------------------------------------------------------------------


def test_float32_rounding_passes_and_a_small_relative_error_fails() -> None:
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, 6, 16)), rng.normal(size=(2, 9, 16)), rng.normal(size=(2, 9, 8))
    right = mha_numpy.attention(q, k, v)[0]
    assert same(right.astype(np.float32), right)
    in_float32 = mha_numpy.attention(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32))[0]
    assert same(in_float32, right)  # a float32 computation, not just a rounded result
    scores = q @ np.swapaxes(k, -1, -2) * 10.0  # large values: relative rounding matters
    assert same(torch.from_numpy(scores).float(), scores)
    assert not same(right * (1 + 1e-3), right)
    assert not same(scores * (1 + 1e-3), scores)
    assert RTOL <= 1e-4 and ATOL <= 1e-5


def test_same_edge_cases() -> None:
    assert not same(math.nan, math.nan)
    assert not same(np.array([1.0, math.nan]), np.array([1.0, math.nan]))
    assert same(np.array([-math.inf, 0.0]), np.array([-math.inf, 0.0]))
    assert not same(np.zeros((2, 3)), np.zeros(3))  # no broadcasting
    assert not same(np.zeros((2, 3)), np.zeros((3, 2)))
    assert not same("abc", "abc") and not same({}, {}) and not same([1, [2]], [1, [2]])
    assert not same(786_430, 786_432)  # counts compare exactly, although within RTOL
    assert same(786_432.0000001, 786_432)
    assert same(np.array([True, False]), np.array([1, 0]))


# ---- first_match -----------------------------------------------------------------------------


def test_first_match_returns_the_first_equal_candidate_in_order() -> None:
    x = np.arange(4.0)
    assert first_match(x, [(x + 1, "plus one"), (x, "first"), (lambda: x.copy(), "second")]) == "first"
    assert first_match(x, [(lambda: x * 2, "double")]) is None
    assert first_match(x, []) is None


def test_first_match_stops_at_the_first_match() -> None:
    calls: list[str] = []

    def later() -> Floats:
        calls.append("later")
        return np.zeros(2)

    assert first_match(np.ones(2), [(np.ones(2), "ones"), (later, "zeros")]) == "ones"
    assert calls == []


def test_first_match_skips_a_candidate_that_raises_value_error() -> None:
    a = np.ones((2, 3))
    candidates: list[tuple[Any, str]] = [(lambda: a @ a, "shape mismatch"), (lambda: a, "same")]
    assert first_match(a, candidates) == "same"


def test_first_match_lets_other_errors_through() -> None:
    with pytest.raises(ZeroDivisionError):
        first_match(1.0, [(lambda: 1 / 0, "broken checker")])


def test_first_match_computes_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        candidates: list[tuple[Any, str]] = [
            (lambda: np.log(np.array([-1.0, 0.0])), "log"),
            (lambda: np.exp(np.array([1000.0])) - np.exp(np.array([1000.0])), "inf - inf"),
            (lambda: np.zeros(2) / np.zeros(2), "0/0"),
        ]
        assert first_match(np.array([3.0, 4.0]), candidates) is None


# ---- reference readers -----------------------------------------------------------------------


def test_reference_array_converts() -> None:
    out = reference_array("q", torch.ones(2, 3, dtype=torch.float32, requires_grad=True), "(T, d)", rank=2)
    assert out.dtype == np.float64 and out.shape == (2, 3)
    assert reference_array("x", [[1.5]], "(T, d)", min_rank=2).shape == (1, 1)


def test_reference_array_errors_name_the_layout() -> None:
    with pytest.raises(TypeError, match=r"q must hold floating-point numbers laid out as \(T, d\), got dtype int64"):
        reference_array("q", np.zeros((2, 2), dtype=np.int64), "(T, d)")
    with pytest.raises(TypeError, match=r"q must hold floating-point numbers laid out as \(T, d\)"):
        reference_array("q", [1.0, [2.0]], "(T, d)")
    with pytest.raises(TypeError, match=r"dtype <U3"):
        reference_array("q", "abc", "(T, d)")
    with pytest.raises(ValueError, match=r"heads_out must have 4 axes laid out as \(B, h, T, d_h\), got shape"):
        reference_array("heads_out", np.zeros((2, 3)), "(B, h, T, d_h)", rank=4)
    with pytest.raises(ValueError, match=r"k must have at least 2 axes laid out as \(\.\.\., S, d\)"):
        reference_array("k", np.zeros(3), "(..., S, d)", min_rank=2)


def test_reference_mask() -> None:
    assert reference_mask("allowed", torch.ones(2, 2, dtype=torch.bool), "(T, S)", rank=2).dtype == np.bool_
    with pytest.raises(TypeError, match=r"allowed must hold booleans .* laid out as \(T, S\), got dtype float64"):
        reference_mask("allowed", np.zeros((2, 2)), "(T, S)")
    with pytest.raises(ValueError, match=r"allowed must have 2 axes laid out as \(T, S\)"):
        reference_mask("allowed", np.ones(2, dtype=bool), "(T, S)", rank=2)


# ---- every lesson checker, fed odd answers ---------------------------------------------------

_rng = np.random.default_rng(3)
_q, _k, _v = _rng.normal(size=(3, 4)), _rng.normal(size=(5, 4)), _rng.normal(size=(5, 2))
_heads = _rng.normal(size=(2, 2, 3, 2))
_kv = _rng.normal(size=(1, 2, 3, 4))
_w_q, _w_uk = _rng.normal(size=(2, 4, 3)), _rng.normal(size=(2, 5, 3))
_mla = dict(layers=2, latent_width=8, rope_width=4, kv_heads=2, head_dim=4)
_induction_model = induction.InductionModel(
    induction.InductionConfig(vocab=5, half=2, width=4, heads=2, shortest=2),
    _rng.normal(size=(5, 4)),
    _rng.normal(size=(3, 4)),
    tuple(mha_numpy.MultiHead(4, 2, seed=i) for i in range(2)),
    _rng.normal(size=(4, 5)),
)
_repeats = induction.repeated_tokens(3, 5, 2, seed=0)


def _fresh(*shapes: tuple[int, ...]) -> list[NDArray[np.float64]]:
    """Arrays drawn when a checker runs, from a generator of their own: the same whatever ran before."""
    rng = np.random.default_rng(4)
    return [rng.normal(size=shape) for shape in shapes]


CHECKERS: dict[str, Callable[[Any], Verdict]] = {
    "scores": lambda a: oh.check_scores(a, _q, _k),
    "weights": lambda a: oh.check_weights(a, _q @ _k.T),
    "mask": lambda a: oh.check_causal_mask(a, 3, 5),
    "split": lambda a: sih.check_split(lambda x, heads: a),
    "head width": sih.check_head_width,
    "head reads": lambda a: sih.check_head_reads(a, a),
    "merge": lambda a: cp.check_merge(a, _heads),
    "nn.Linear weight": lambda a: cp.check_linear_weight(a, _q),
    "nn.MultiheadAttention mask": lambda a: mp.check_mha_mask(a, mha_numpy.causal_mask(3, 5)),
    "head contribution": lambda a: cp.check_head_contribution(lambda x, w, i: a, _heads, *_fresh((4, 4))),
    "sequence-first merge": lambda a: cp.check_time_major_merge(lambda f, n: a, _heads.reshape(4, 3, 2), 2),
    "weight entries": lambda a: ih.check_weight_entries(a, B=2, h=4, T=3, S=5),
    "head count": lambda a: ih.check_head_count(a, 16, 4),
    "score multiplies": lambda a: ih.check_score_multiplies(a, 2, 3, 5, 8, 2),
    "bytes per token": lambda a: gqa.check_bytes_per_token(a, 2, 4, 2, 8),
    "repeated K/V heads": lambda a: gqa.check_repeat_kv(a, _kv, 2),
    "rebuilt keys": lambda a: la.check_rebuilt_keys(lambda latent, w_uk: a, *_fresh((1, 3, 4), (2, 4, 3), (2, 4, 3))),
    "MLA cache": lambda a: la.check_mla_cache_elements(a, **_mla),
    "GQA equivalent": lambda a: la.check_equivalent_kv_heads(a, latent_width=8, rope_width=4, head_dim=4),
    "scores against the latent": lambda a: la.check_query_latent_scores(
        lambda q, latent, w_uk: a, *_fresh((1, 3, 4), (4, 2), (2, 4, 3), (2, 2, 3))),
    "MQA over the latent": lambda a: la.check_latent_as_mqa(
        lambda *args: a, *_fresh((1, 2, 3, 3), (1, 2, 3, 2), (1, 3, 2), (1, 3, 2), (2, 2, 3))),
    "block": lambda a: hw.check_block_function(lambda x, block: a),
    "RMSNorm": lambda a: hw.check_rms_norm_function(lambda z, gain, p, eps=1e-5: a),
    "repeated-half loss": lambda a: hw.check_repeat_loss_function(lambda logits, tokens: a),
    "double ablation": lambda a: hw.check_double_ablation(a, _induction_model, _repeats, [(1, 0), (1, 1)]),
    "bits per character": lambda a: rmh.check_bits_function(lambda nats: a),
    "previous-character score": lambda a: rmh.check_previous_score_function(lambda weights: a),
    "last break": lambda a: rmh.check_last_break_function(lambda text: a),
    "cached decoding step": lambda a: rmh.check_decode_step_function(lambda model, token, cache: a),
}
# None from a function: "returned None"
FUNCTION_CHECKS = ("split", "rebuilt keys", "block", "RMSNorm", "repeated-half loss", "head contribution",
                   "sequence-first merge", "scores against the latent", "MQA over the latent", "bits per character",
                   "previous-character score", "last break", "cached decoding step")


@pytest.mark.parametrize("label", sorted(CHECKERS))
def test_every_checker_survives_odd_answers(label: str) -> None:
    for answer in odd_answers():
        verdict = CHECKERS[label](answer)
        assert isinstance(verdict, Verdict) and verdict.question == label, (answer, verdict)
        if answer is None:
            missing = "returned None" if label in FUNCTION_CHECKS else "replace None with"
            assert not verdict.ok and missing in verdict.message, verdict


def test_labels_are_short_lowercase_noun_phrases() -> None:
    for label in CHECKERS:
        assert not label[:1].isdigit() and not label.startswith("Q"), label
        assert len(label) <= 30, label


def test_check_weight_entries_is_shared_and_keyword_only() -> None:
    assert ea.check_weight_entries is ih.check_weight_entries
    with pytest.raises(TypeError):
        ih.check_weight_entries(24, 1, 2, 3, 4)  # type: ignore[call-arg]
    assert ih.check_weight_entries(24, B=1, h=2, T=3, S=4).ok


# ---- blank exercises ---------------------------------------------------------------------------
def _dots(x: object) -> object: ...


def _documented_pass(x: object) -> object:
    """A docstring, then nothing."""


def _constant(x: object) -> object:
    return 5


def _forgot_return(x: object) -> None:
    x = [x]


def _raises(x: object) -> object:
    raise KeyError("head")


def test_is_blank_sees_only_empty_bodies() -> None:
    assert is_blank(_dots) and is_blank(_documented_pass)
    assert not is_blank(_constant) and not is_blank(_forgot_return) and not is_blank(_raises)
    assert not is_blank(len)  # a builtin has no code object: never "blank"


def test_function_answer_reports_blank_raised_and_missing_return() -> None:
    blank = function_answer("split", _dots, (1,), "the body of split")
    assert isinstance(blank, Verdict) and not blank.answered and repr(blank).startswith("[split] not answered yet:")
    assert isinstance(function_answer("split", None, (1,), "x"), Verdict)
    raised = function_answer("split", _raises, (1,), "x")
    assert isinstance(raised, Verdict) and raised.answered and "KeyError" in raised.message
    missing = function_answer("split", _forgot_return, (1,), "x")
    assert isinstance(missing, Verdict) and "return" in missing.message
    not_function = function_answer("split", 3, (1,), "x")
    assert isinstance(not_function, Verdict) and "expected a function" in not_function.message
    assert function_answer("split", _constant, (1,), "x") == 5


def test_unanswered_verdict_prints_its_own_mark() -> None:
    verdict = unanswered("mask", "replace None with a (T, S) boolean array")
    assert not verdict and not verdict.answered
    assert repr(verdict) == "[mask] not answered yet: replace None with a (T, S) boolean array"
    assert repr(failed("mask", "inverted")) == "[mask] not yet: inverted"


LONG_MESSAGE = (
    "direct reshape: on x of shape (B, T, D) = (2, 3, 8) with heads=2 you reshaped straight into "
    "(B, h, T, d_h), which gives one head the features of several tokens; reshape to (B, T, h, d_h), "
    "then swap axes 1 and 2. See torch.nn.functional.scaled_dot_product_attention_with_a_very_long_name"
)


def test_a_long_verdict_prints_in_short_lines_broken_between_words() -> None:
    """JupyterLab cuts an output line wider than the notebook anywhere, even mid-word: a verdict never
    gives it one. Its lines hold at most VERDICT_WIDTH characters and every word stays whole."""
    text = repr(failed("split", LONG_MESSAGE))
    lines = text.split("\n")
    assert len(lines) > 1 and lines[0].startswith("[split] not yet: direct reshape:")
    long_word = "torch.nn.functional.scaled_dot_product_attention_with_a_very_long_name"
    assert all(len(line) <= VERDICT_WIDTH for line in lines if long_word not in line), lines
    assert any(line.strip() == long_word for line in lines), "a word longer than a line keeps a line of its own"
    assert all(line.startswith("    ") for line in lines[1:]), "continuation lines are indented"
    assert text.split() == f"[split] not yet: {LONG_MESSAGE}".split(), "no word is lost, cut or hyphenated"
    assert "(B, T, h, d_h)" in text and "(B, h, T, d_h)," in text, "a shape stays on one line"


@given(st.lists(st.text(alphabet="ab -_()", min_size=1, max_size=30), min_size=1, max_size=30))
def test_every_verdict_keeps_its_words_in_short_lines(words: list[str]) -> None:
    message = " ".join(words)
    text = repr(failed("q", message))
    assert text.split() == f"[q] not yet: {message}".split()
    assert all(len(line) <= VERDICT_WIDTH or " " not in line.strip() for line in text.split("\n"))


@pytest.mark.parametrize("message", ["(a b c d e f g h i j k)" + "_" * 70, "_" * 70 + " (a b c d)____ x (e f)"])
def test_a_group_glued_to_a_long_word_does_not_make_a_long_line(message: str) -> None:
    """The two kinds of message that once made a line of 97 characters (found by the property above)."""
    text = repr(failed("q", message))
    assert text.split() == f"[q] not yet: {message}".split()
    assert all(len(line) <= VERDICT_WIDTH or " " not in line.strip() for line in text.split("\n")), text


def test_a_line_break_in_a_message_is_kept() -> None:
    assert repr(failed("q", "first line\nsecond line")) == "[q] not yet: first line\nsecond line"


# ---- the shared refusals: a library call, the wrong kind of array, rounding ------------------


def test_forbidden_call_finds_every_way_of_calling_the_library() -> None:
    from lessons_lib.checks import forbidden_call
    from lessons_lib.mha_numpy import split_heads as renamed

    def by_attribute(x: Any, h: int) -> Any:
        return mha_numpy.split_heads(x, h)

    def by_alias(x: Any, h: int) -> Any:
        return renamed(x, h)

    def in_a_lambda(x: Any, h: int) -> Any:
        return (lambda: mha_numpy.split_heads(x, h))()

    def own_work(x: Any, h: int) -> Any:
        return x.reshape(1, 2)

    wording = "your function calls the library's split_heads, which is the function this exercise asks you to write"
    for function in (by_attribute, by_alias, in_a_lambda, mha_numpy.split_heads):
        assert_failed(forbidden_call("q", function, "merge_heads", "split_heads"), wording)
    assert forbidden_call("q", own_work, "split_heads") is None
    repair = forbidden_call("q", by_attribute, "split_heads", why="which does a step you are asked to repair")
    assert_failed(repair, "your function calls the library's split_heads, which does a step you are asked to repair")

    def split_heads(x: Any, h: int) -> Any:  # the learner's own function may share the library's name
        return x

    assert forbidden_call("q", split_heads, "split_heads") is None


def test_same_kind_names_library_and_dtype() -> None:
    from lessons_lib.checks import same_kind

    assert same_kind("q", np.zeros(2), np.ones(3)) is None
    assert same_kind("q", torch.zeros(2), torch.ones(3)) is None
    assert_failed(same_kind("q", np.zeros(2), torch.zeros(2)), "given a torch tensor and must return a torch tensor",
                  "got NumPy array")
    assert_failed(same_kind("q", torch.zeros(2), np.zeros(2)), "given a NumPy array", "got torch tensor")
    assert_failed(same_kind("q", np.zeros(2, np.float32), np.zeros(2)), "given float64 numbers and returned float32")


def test_rounding_as_printed_is_accepted_and_named() -> None:
    from lessons_lib.checks import precision_problem, rounded_match

    assert rounded_match(4.10, 4.1034, 2) and rounded_match(4.1034, 4.1034, 2)
    assert not rounded_match(4.11, 4.1034, 2) and not rounded_match(math.nan, 4.1, 2)
    assert precision_problem("q", 4.10, 4.1034, 2) is None  # accepted: nothing to say
    assert_failed(precision_problem("q", 4.12, 4.1034, 2), "close, but 4.12", "rounding to 2 decimals")
    assert precision_problem("q", 3.0, 4.1034, 2) is None  # a real mistake, not rounding
