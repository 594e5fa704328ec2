"""Quick-check helpers: the one way every lesson's checker reads an answer and compares it.

The checkers live in ``lessons_lib.checks.<topic>`` (``one_head``, ``splitting_into_heads``,
``concatenate_and_project``, ``matching_pytorch``, ``inspecting_heads``, ``grouped_query_attention``,
``latent_attention``, ``efficient_attention``, ``heads_at_work``, ``real_model_heads``); each
returns a `Verdict` that explains a wrong answer. They share:

- answer readers that never raise: `array_answer`, `number_answer`, `int_answer`,
  `int_array_answer` and `mask_answer` return the learner's value, or a failed `Verdict` saying
  why it is not what the question asks for;
- readers for a checker's own problem inputs, which raise on a bad one (a bug in the calling code):
  `reference_array` and `reference_mask`;
- one comparison policy: `same` compares integers exactly and floats up to `RTOL` and `ATOL`;
  `first_match` names the first known mistake an answer equals; `rounded_match` accepts a number
  rounded as the lesson prints it and `precision_problem` says when rounding is the only problem;
- one refusal, worded the same in every lesson, for an exercise that calls the finished library
  function it asks the learner to write: `forbidden_call`;
- one check that a function exercise returns the kind of array it was given: `same_kind`.

A `Verdict` prints as lines of at most `VERDICT_WIDTH` characters, broken between words: JupyterLab
breaks an output line that is wider than the notebook anywhere, even inside a word.

Only NumPy is imported; torch tensors are accepted too and converted with `as_numpy`.
"""

from __future__ import annotations

import dis
import numbers
import re
import reprlib
import textwrap
import types
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ATOL",
    "RTOL",
    "SOLUTION_FIRST_LINE",
    "VERDICT_WIDTH",
    "Verdict",
    "array_answer",
    "as_numpy",
    "failed",
    "first_match",
    "forbidden_call",
    "function_answer",
    "int_answer",
    "int_array_answer",
    "is_blank",
    "mask_answer",
    "number_answer",
    "passed",
    "precision_problem",
    "reference_array",
    "reference_mask",
    "rounded_match",
    "same",
    "same_kind",
    "unanswered",
    "uses_name",
]

# The first line of every solution cell: it is what a collapsed solution shows, so it gives nothing away.
SOLUTION_FIRST_LINE = "# Solution (open it only after you have tried)"

Floats = NDArray[np.float64]

# float32 keeps about 7 significant digits; after a few products and a softmax a float32 answer
# (e.g. from torch) is off by ~1e-6 relative, well inside RTOL, and ATOL absorbs the rounding of
# entries near 0. Every mistake the checkers name differs by far more (a factor such as sqrt(d),
# a permutation, a missing term), so each stays distinguishable from the right answer.
RTOL = 1e-5
ATOL = 1e-6

# The longest line a printed verdict has: it fits JupyterLab's output area in a 1280 px window with
# the file browser open (tests/browser/test_exercises.py measures it), so no word is cut in two there.
VERDICT_WIDTH = 79
_SHORT_GROUP = re.compile(r"\([^()\n]{1,24}\)")
_KEEP = "\x1f"  # stands for a space that must not break a line


@dataclass(frozen=True)
class Verdict:
    """The outcome of one Quick-check question: printed in the notebook as its `line`, wrapped."""

    question: str
    ok: bool
    message: str
    answered: bool = True  # False: the exercise is still blank (None, or a body of ``...``)

    def __bool__(self) -> bool:
        return self.ok

    @property
    def line(self) -> str:
        """``[question] correct|not yet|not answered yet: message`` on one line (`repr` wraps it)."""
        mark = "correct" if self.ok else "not yet" if self.answered else "not answered yet"
        return f"[{self.question}] {mark}: {self.message}"

    def __repr__(self) -> str:
        """`line`, in lines of at most `VERDICT_WIDTH` characters.

        Lines break between words (a word longer than a line keeps its own line), never inside a short
        bracketed group such as a shape ``(B, h, T, d_h)``; continuation lines are indented, and a line
        break inside the message starts a new line.
        """
        return "\n".join(_wrap(part) for part in self.line.split("\n"))

    __str__ = __repr__


def _fill(text: str) -> str:
    return textwrap.fill(text, VERDICT_WIDTH, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)


def _wrap(part: str) -> str:
    """One line of a verdict in lines of at most `VERDICT_WIDTH` characters, broken between words.

    A short bracketed group, such as a shape "(B, h, T, d_h)", stays on one line: its spaces are swapped
    for a character textwrap does not break at, and back. When a group glued to other characters would
    make a line too long, the part is wrapped at every space instead.
    """
    kept = _fill(_SHORT_GROUP.sub(lambda group: group[0].replace(" ", _KEEP), part))
    if any(len(line) > VERDICT_WIDTH and _KEEP in line for line in kept.split("\n")):
        return _fill(part)
    return kept.replace(_KEEP, " ")


def passed(question: str, message: str) -> Verdict:
    return Verdict(question, True, message)


def failed(question: str, message: str) -> Verdict:
    return Verdict(question, False, message)


def unanswered(question: str, hint: str) -> Verdict:
    """The verdict for a blank exercise: says what to write, never what the answer is."""
    return Verdict(question, False, hint, answered=False)


def is_blank(function: Callable[..., Any]) -> bool:
    """True for a function whose body is only ``...`` or ``pass`` (maybe after a docstring)."""
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    steps = [i for i in dis.get_instructions(code) if i.opname not in ("RESUME", "NOP", "CACHE")]
    names = [step.opname for step in steps]
    returns_none = steps[0].argval is None  # `return 5` is an answer, not a blank
    return not code.co_names and names in (["RETURN_CONST"], ["LOAD_CONST", "RETURN_VALUE"]) and returns_none


def function_answer(question: str, function: Any, args: tuple[Any, ...], what: str) -> Any:
    """Run the learner's ``function(*args)``; its result, or a `Verdict` if there is none to judge.

    Never raises: a blank body is "not answered yet" (``what`` says what to write), an exception
    or a missing ``return`` is a "not yet" that names it. Warnings the function raises on the
    checker's own problems (an empty mean, an overflow) are not shown: they would name sizes the
    learner never wrote under the check cell; the verdict says what went wrong instead.
    """
    if function is None or (callable(function) and is_blank(function)):
        return unanswered(question, f"write {what}")
    if not callable(function):
        return failed(question, f"expected a function, got {_describe(function)}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = function(*args)
    except Exception as error:  # the learner's code may raise anything: report it
        return failed(question, f"your function raised {type(error).__name__}: {error}")
    if result is None:
        return failed(question, "your function returned None: is a `return` missing?")
    return result


def as_numpy(value: Any) -> NDArray[Any]:
    """A NumPy copy of an array, a torch tensor (detached, on the CPU) or a nested list."""
    if hasattr(value, "detach"):
        tensor = value.detach().cpu()
        try:
            return np.asarray(tensor.numpy())
        except TypeError:  # a dtype NumPy lacks, such as bfloat16
            return np.asarray(tensor.float().numpy())
    return np.asarray(value)


# ----- reading the learner's answer: never raises --------------------------------------------
def _describe(value: Any) -> str:
    """What the learner handed in, for a message: ``"str 'abc'"``, ``"ndarray of dtype <U3"``."""
    try:
        if isinstance(value, np.ndarray) or hasattr(value, "detach"):
            return f"{type(value).__name__} of dtype {value.dtype}"
    except Exception:  # an object whose attributes misbehave: its type is all we can say
        return type(value).__name__
    return f"{type(value).__name__} {reprlib.repr(value)}"


def _to_array(value: Any) -> NDArray[Any] | None:
    """``value`` as a NumPy array with its own dtype, or ``None`` if it cannot be one."""
    try:
        return as_numpy(sorted(value) if isinstance(value, (set, frozenset)) else value)
    except Exception:  # ragged lists, odd objects, tensors that refuse: all mean "not an array"
        return None


def _real_array(value: Any) -> NDArray[Any] | None:
    """``value`` as an array of real numbers (bool, int, float, or objects that are all numbers)."""
    array = _to_array(value)
    if array is None or array.dtype.kind not in "biufO":
        return None
    if array.dtype.kind == "O" and not all(isinstance(x, numbers.Real) for x in array.flat):
        return None
    return array


def _float_array(value: Any) -> Floats | None:
    """``value`` as float64 if it holds real numbers, else ``None``."""
    array = _real_array(value)
    try:
        return None if array is None else array.astype(np.float64)
    except Exception:  # a number type that refuses float()
        return None


def _missing(question: str, what: str) -> Verdict:
    return unanswered(question, f"replace None with {what}")


def array_answer(question: str, answer: Any, what: str) -> Floats | Verdict:
    """The learner's ``answer`` as a float64 array, or a `Verdict` saying why it is not one.

    ``what`` completes "replace None with ..." for an unanswered question.
    """
    if answer is None:
        return _missing(question, what)
    array = _float_array(answer)
    if array is None:
        return failed(question, f"expected an array of numbers, got {_describe(answer)}")
    return array


def _one_value(question: str, answer: Any, what: str, wanted: str) -> int | float | Verdict:
    """The single real number in ``answer`` (a Python int when it is an integer), or a `Verdict`."""
    if answer is None:
        return _missing(question, what)
    array = _to_array(answer)
    if array is None or array.size != 1 or array.dtype.kind not in "biufO":
        return failed(question, f"expected {wanted}, got {_describe(answer)}")
    value = array.reshape(()).item()
    if isinstance(value, (bool, np.bool_)):
        return failed(question, f"expected {wanted}, got the boolean {value}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return failed(question, f"expected {wanted}, got {_describe(answer)}")


def number_answer(question: str, answer: Any, what: str) -> float | Verdict:
    """The learner's ``answer`` as one float, or a `Verdict` saying why it is not one number."""
    value = _one_value(question, answer, what, "one number")
    return value if isinstance(value, Verdict) else float(value)


def int_answer(question: str, answer: Any, what: str) -> int | Verdict:
    """The learner's ``answer`` as one ``int`` (Python or NumPy integer), or a `Verdict`.

    A float is refused even when it is whole (``4.0``), with a message that names the type: the
    question asks for a count, and ``/`` in Python always gives a float.
    """
    value = _one_value(question, answer, what, "one whole number (an int)")
    if isinstance(value, (int, Verdict)):
        return value
    if value.is_integer():
        return failed(question, f"{value!r} is a float, and the question asks for an int (a count): `/` always "
                                "gives a float in Python; use `//` or int(...)")
    return failed(question, f"expected one whole number (an int), got the float {value!r}")


def int_array_answer(question: str, answer: Any, what: str) -> NDArray[np.int64] | Verdict:
    """The learner's ``answer`` as a 1-D array of integers (a list, range, set or integer array).

    Floats, even whole ones, are refused: the question asks for indices.
    """
    if answer is None:
        return _missing(question, what)
    array = _to_array(answer)
    if array is None or array.ndim != 1 or array.dtype.kind not in "iu":
        return failed(question, f"expected {what}, got {_describe(answer)}")
    return array.astype(np.int64)


def mask_answer(question: str, answer: Any, what: str) -> NDArray[Any] | Verdict:
    """The learner's mask as an array with its own dtype (bool, int or float), or a `Verdict`.

    The dtype is kept so that the checker can name the mistake (an additive mask, 0/1 numbers).
    """
    if answer is None:
        return _missing(question, what)
    array = _to_array(answer)
    if array is None or array.dtype.kind == "O":
        return failed(question, f"expected a boolean mask, got {_describe(answer)}")
    if array.dtype.kind not in "biuf":
        return failed(question, f"expected a boolean mask, got dtype {array.dtype}")
    return array


def same_kind(question: str, result: Any, given: Any) -> Verdict | None:
    """``None`` when a function exercise returned the same kind of array it was given (a NumPy
    array for a NumPy array, a torch tensor for a tensor, with the same floating dtype), else a
    failed `Verdict` that names what came back and what was expected."""
    def kind(value: Any) -> str:
        return "torch tensor" if hasattr(value, "detach") else "NumPy array" if isinstance(value, np.ndarray) else ""

    want, got = kind(given), kind(result)
    if want and got != want:
        got_text = got or type(result).__name__
        return failed(question, f"the function was given a {want} and must return a {want}, got {got_text}: "
                                "stay in the input's library (no conversion)")
    given_dtype, result_dtype = getattr(given, "dtype", None), getattr(result, "dtype", None)
    if given_dtype is not None and result_dtype is not None and str(result_dtype) != str(given_dtype):
        return failed(question, f"the function was given {given_dtype} numbers and returned {result_dtype}: "
                                "keep the input's dtype (no cast, no new array of another dtype)")
    return None


def _is_from(value: Any, name: str, home: str | None) -> bool:
    """``value`` is called ``name`` and (unless ``home`` is None) comes from a module under ``home``."""
    module = str(getattr(value, "__module__", ""))
    return getattr(value, "__name__", None) == name and (home is None or module.startswith(home))


def uses_name(function: Any, name: str, home: str | None = "lessons_lib") -> bool:
    """Whether ``function`` is the library's ``name`` itself or its code (nested functions and
    lambdas too) refers to it: as an attribute (``mha_numpy.name``), a global, or an imported alias.
    A function of the learner's own that happens to share the name does not count, unless ``home``
    is None: then any global or attribute called ``name`` counts (a notebook's own finished
    function, or torch's)."""
    if _is_from(function, name, home):
        return True
    code = getattr(function, "__code__", None)
    stack = [code] if isinstance(code, types.CodeType) else []
    namespace = dict(getattr(function, "__globals__", {}))
    cells = getattr(function, "__closure__", None) or ()
    for variable, cell in zip(getattr(code, "co_freevars", ()), cells, strict=False):
        try:
            namespace[variable] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    while stack:
        code = stack.pop()
        for step in dis.get_instructions(code):
            if step.opname in ("LOAD_ATTR", "LOAD_METHOD") and step.argval == name:
                return True  # module.name(...)
            if step.opname not in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF"):
                continue
            if _is_from(namespace.get(step.argval), name, home) or (home is None and step.argval == name):
                return True  # name(...) or an alias imported from the library
        stack += [const for const in code.co_consts if isinstance(const, types.CodeType)]
    return False


_WRITE_IT_YOURSELF = ("which is the function this exercise asks you to write: build it from NumPy / torch operations "
                      "yourself")


def forbidden_call(question: str, function: Any, *names: str, why: str | None = None) -> Verdict | None:
    """A failed `Verdict` when the learner's ``function`` calls one of the finished library
    functions ``names`` that the exercise asks them to write; ``None`` otherwise.

    The wording is the same in every lesson; checkers call it before running the function. ``why``
    (optional) replaces what follows "your function calls the library's <name>, ", for an exercise
    that does not ask for the function itself (e.g. one that asks to repair code).
    """
    for name in names:
        if uses_name(function, name):
            return failed(question, f"your function calls the library's {name}, {why or _WRITE_IT_YOURSELF}")
    return None


def rounded_match(value: float, expected: float, decimals: int) -> bool:
    """True when ``value`` equals ``expected`` rounded to ``decimals`` places (as the lesson prints it),
    or equals it within the usual tolerance."""
    if same(value, expected):
        return True
    return bool(np.isfinite(value)) and abs(value - expected) <= 0.5 * 10.0**-decimals + 1e-12 * max(1.0, abs(expected))


def precision_problem(question: str, value: float, expected: float, decimals: int) -> Verdict | None:
    """A failed `Verdict` when ``value`` is off from ``expected`` only by rounding (within 1% or 10
    units of the last printed place), saying so; ``None`` when the difference is a real mistake."""
    difference = abs(value - expected)
    if not np.isfinite(value) or rounded_match(value, expected, decimals):
        return None
    if difference <= max(0.01 * abs(expected), 10 * 10.0**-decimals):
        return failed(question, f"close, but {value!r} differs from the answer by {difference:.2g}, more than rounding "
                                f"to {decimals} decimals explains: keep more digits (use the computed variable, "
                                "not a number you copied)")
    return None


# ----- comparing ------------------------------------------------------------------------------
def same(answer: Any, expected: Any) -> bool:
    """Same shape and the same numbers; never raises.

    Integers and booleans on both sides (counts, indices) must be equal exactly; otherwise the
    numbers must agree up to `RTOL` and `ATOL`. NaN never matches; infinities match themselves.
    """
    a, b = _real_array(answer), _real_array(expected)
    if a is None or b is None or a.shape != b.shape:
        return False
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        return bool(np.array_equal(a, b))
    a, b = _float_array(a), _float_array(b)
    if a is None or b is None:
        return False
    with np.errstate(all="ignore"):
        return bool(np.allclose(a, b, rtol=RTOL, atol=ATOL))


def first_match(answer: Any, candidates: Iterable[tuple[Any, str]]) -> str | None:
    """The message of the first candidate ``answer`` equals under `same`, or ``None``.

    A candidate is ``(value or zero-argument callable, message)``. A computation that raises
    ``ValueError`` (shapes that do not fit, e.g. ``weights.T @ v`` when ``T != S``) is skipped:
    nobody can have handed it in.
    """
    for value, message in candidates:
        try:
            with np.errstate(all="ignore"):
                computed = value() if callable(value) else value
        except ValueError:
            continue
        if same(answer, computed):
            return message
    return None


# ----- reading the checker's own inputs: raises on a bad one ---------------------------------
def _reference(name: str, value: Any, layout: str, kind: str, rank: int | None, min_rank: int | None) -> NDArray[Any]:
    wanted = "floating-point numbers" if kind == "f" else "booleans (a mask, True = may attend)"
    try:
        array = as_numpy(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must hold {wanted} laid out as {layout}, got {_describe(value)}") from error
    if array.dtype.kind != kind:
        raise TypeError(f"{name} must hold {wanted} laid out as {layout}, got dtype {array.dtype}")
    shape = tuple(array.shape)
    if rank is not None and array.ndim != rank:
        raise ValueError(f"{name} must have {rank} axes laid out as {layout}, got shape {shape}")
    if min_rank is not None and array.ndim < min_rank:
        raise ValueError(f"{name} must have at least {min_rank} axes laid out as {layout}, got shape {shape}")
    return array


def reference_array(
    name: str, value: Any, layout: str, rank: int | None = None, min_rank: int | None = None
) -> Floats:
    """A checker's problem input (not the answer) as float64.

    ``TypeError`` unless floating point; ``ValueError`` unless it has exactly ``rank`` (or at least
    ``min_rank``) axes. ``layout`` names the axes in messages, e.g. ``"(B, h, T, d_h)"``.
    """
    return _reference(name, value, layout, "f", rank, min_rank).astype(np.float64)


def reference_mask(name: str, value: Any, layout: str, rank: int | None = None) -> NDArray[np.bool_]:
    """A checker's boolean mask input (True = may attend); errors as in `reference_array`."""
    return _reference(name, value, layout, "b", rank, None).astype(np.bool_)


def _explain_missing_names() -> None:
    from lessons_lib import missing_names

    missing_names.install()


_explain_missing_names()  # inside Jupyter: a check cell whose answer is not defined says what to do
