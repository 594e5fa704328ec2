"""Quick check of the lesson "Splitting into heads": one checker per exercise, each returning a `Verdict`
that names the known mistake a wrong answer equals; a "not yet" message never spells out the solution.

- `check_head_width`: ``d_h`` for ``D = 2048, h = 16``, an int; D times h, h over D, D or h itself,
  D divided by another head count (``2048 // 8``), a float such as ``2048 / 16`` (named by its type).
- `check_head_reads`: the input features and ``W_q`` columns of head 2 of a layer 12 features wide with
  3 heads (other sizes than the lesson's); the input cut into groups, interleaved columns, another
  head's block, all columns, indices counted from 1, an index past the end.
- `check_split` / `check_merge`: a learner's ``(B, T, D) <-> (B, h, T, d_h)`` function, run on
  labelled inputs of three sizes; a direct reshape, a missing transpose or reshape, the wrong axes,
  ``.T`` on a 4-D array, interleaved features, heads folded into the batch, heads averaged, summed or
  glued along the tokens (also as ``(B, h*T, d_h)`` after a transpose), the token and feature axes
  swapped or any other order of the four axes before the merge's reshape, ``D / heads`` (a float)
  as a size, ``np.split`` along an axis ``h`` does not divide, sizes hard-coded (right on the first
  size only), a call of the library or of its private helpers (refused before running, by the shared
  `forbidden_call`), a result of another kind or dtype than the input (`same_kind`).
- `check_view_merge`: the PyTorch merge that ends in ``.view`` of a ``.contiguous()`` copy;
  ``.view`` on the transposed tensor or on a plain ``.clone()`` of it (which keeps the transposed
  strides), a direct ``.view`` without the transpose, ``.reshape`` or ``.flatten`` anywhere (the copy would be theirs,
  and a ``.view`` after them does nothing), no copy made, no transpose, the same numerical mistakes
  as `check_merge`, ``.view`` not used.

Notation: ``B`` batch, ``T`` tokens, ``D`` model width, ``h`` heads, ``d_h = D / h``. Only NumPy is
imported: torch results go through the shared readers, torch inputs are made by ``like.new_tensor``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
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
    int_array_answer,
    number_answer,
    passed,
    same,
    same_kind,
    unanswered,
    uses_name,
)
from lessons_lib.validation import check_array, head_width

__all__ = [
    "HEAD_READS_QUESTION", "HEAD_WIDTH_QUESTION", "SPLIT_CASES", "check_head_reads", "check_head_width", "check_merge",
    "check_split", "check_view_merge", "describe_label", "known_wrong_merges", "known_wrong_splits", "labelled_input",
]

Labels = NDArray[np.float64]

# (B, T, D, h) for the split and merge checks. Within a case T, h and d_h differ, so a missing transpose
# or a swapped pair of axes changes the shape. Across the cases B, T, h and d_h = D / h all differ
# (d_h = 4, 5, 3), and none is the lesson's (B, T, D, h) = (2, 4, 8, 2): a function that hard-codes
# any size, or reads one from the notebook's variables, fails on a later case.
SPLIT_CASES: tuple[tuple[int, int, int, int], ...] = ((2, 3, 8, 2), (1, 5, 15, 3), (3, 2, 12, 4))

# Label layout: entry [b, t, f] holds 10000*b + 100*t + f, so every number says where it came from.
_BATCH_STEP = 10_000
_TOKEN_STEP = 100

HEAD_WIDTH_QUESTION = {"D": 2048, "h": 16}
HEAD_READS_QUESTION = {"D": 12, "h": 3, "head": 2}


def labelled_input(B: int, T: int, D: int) -> Labels:
    """A ``(B, T, D)`` float64 array whose entry ``[b, t, f]`` is ``10000*b + 100*t + f``.

    Needs ``T < 100`` and ``D < 100`` so that the three parts of a label do not overlap.
    """
    if not (0 < T < _TOKEN_STEP and 0 < D < _TOKEN_STEP and B > 0):
        raise ValueError(f"labelled_input needs B > 0 and 0 < T, D < 100, got B={B}, T={T}, D={D}")
    b = np.arange(B)[:, None, None] * _BATCH_STEP
    t = np.arange(T)[None, :, None] * _TOKEN_STEP
    f = np.arange(D)[None, None, :]
    labels: Labels = (b + t + f).astype(np.float64)
    return labels


def describe_label(value: float, B: int, T: int, D: int) -> str:
    """Read a label made by `labelled_input` back as "batch b, token t, feature f"."""
    if not np.isfinite(value):
        return f"{value!r}, which is not a number from the input"
    label = round(float(value))
    b, rest = divmod(label, _BATCH_STEP)
    t, f = divmod(rest, _TOKEN_STEP)
    if label != value or not (0 <= b < B and 0 <= t < T and 0 <= f < D):
        return f"{value!r}, which is not a number from the input"
    return f"batch {b}, token {t}, feature {f}"


def _split(x: NDArray[Any], heads: int) -> NDArray[Any]:
    B, T, D = x.shape
    return x.reshape(B, T, heads, D // heads).transpose(0, 2, 1, 3)  # (B, T, D) -> (B, h, T, d_h)


def known_wrong_splits(x: NDArray[Any], heads: int) -> dict[str, tuple[NDArray[Any], str]]:
    """The usual wrong ways to split ``x (B, T, D)`` into heads: name -> (result, explanation)."""
    check_array("x", x, "numpy", "(B, T, D)", floating=False)
    B, T, D = x.shape
    d_h = head_width(D, heads)
    return {
        "direct reshape": (
            x.reshape(B, heads, T, d_h),
            "you reshaped (B, T, D) straight into (B, h, T, d_h). The shape is right but the numbers are "
            "not: a reshape reads the array in row-major index order (last axis fastest), so head 0 "
            "receives whole tokens (all of token 0, then all of token 1, ...) chopped into rows of d_h, "
            "as the labelled example of the lesson showed. One reshape alone cannot put the head axis "
            "in front of the token axis",
        ),
        "missing transpose": (
            x.reshape(B, T, heads, d_h),
            "you returned (B, T, h, d_h): the reshape is right but the transpose is missing, so the head "
            "axis is still behind the token axis",
        ),
        "interleaved features": (
            x.reshape(B, T, d_h, heads).transpose(0, 3, 1, 2),
            "you cut the feature axis as (d_h, h) instead of (h, d_h), so head i got the interleaved "
            "features i, i + h, i + 2h, ... Head i owns the consecutive block of features i*d_h : (i+1)*d_h",
        ),
        "wrong axes (B, h, d_h, T)": (
            x.reshape(B, T, heads, d_h).transpose(0, 2, 3, 1),
            "you moved the axes to (B, h, d_h, T): the features ended up before the tokens. Only the "
            "token and head axes should swap places",
        ),
        "wrong axes (h, B, T, d_h)": (
            x.reshape(B, T, heads, d_h).transpose(2, 0, 1, 3),
            "you moved the head axis to the very front, (h, B, T, d_h). The batch axis must stay first",
        ),
        ".T on a 4-D array": (
            x.reshape(B, T, heads, d_h).T,
            "you used .T (or a transpose without axes), which reverses ALL the axes of a 4-D array: "
            "(B, T, h, d_h) became (d_h, h, T, B). Name the axes you want (np.transpose with an axis "
            "order, or np.swapaxes of two axes)",
        ),
        "tokens and features swapped first": (
            x.transpose(0, 2, 1).reshape(B, heads, T, d_h),
            "you swapped the token and feature axes of x, (B, T, D) -> (B, D, T), and then reshaped: the reshape "
            "then reads x feature by feature, so a row of a head holds one feature of several tokens. The "
            "axes may only be reordered once the feature axis has been cut into (h, d_h)",
        ),
        "heads folded into the batch": (
            x.reshape(B, T, heads, d_h).transpose(0, 2, 1, 3).reshape(B * heads, T, d_h),
            "you folded the heads into the batch axis, (B*h, T, d_h) (some libraries do this inside "
            "their layer). The question asks for a separate head axis: (B, h, T, d_h)",
        ),
    }


def known_wrong_merges(heads_out: NDArray[Any], view: bool = False) -> dict[str, tuple[NDArray[Any], str]]:
    """The usual wrong ways to merge ``heads_out (B, h, T, d_h)`` back: name -> (result, explanation).

    ``view``: word the one-step merge as PyTorch's direct ``.view`` (Your turn 5) instead of a reshape.
    """
    check_array("heads_out", heads_out, "numpy", "(B, h, T, d_h)", floating=False)
    B, h, T, d_h = heads_out.shape
    one_step = "a direct .view" if view else "one reshape"
    return {
        "direct .view" if view else "direct reshape": (
            heads_out.reshape(B, T, h * d_h),
            f"you went from (B, h, T, d_h) straight to (B, T, D) in {one_step}. The shape is right but the numbers "
            "are not: in row-major index order all of head 0 comes first, so token 0 received rows of head 0 only "
            "instead of one block of d_h features from every head. The token axis has to come before the head "
            f"axis before the {'.view' if view else 'reshape'}",
        ),
        "tokens and features swapped": (
            heads_out.transpose(0, 1, 3, 2).reshape(B, T, h * d_h),
            "you swapped the token and feature axes, (B, h, T, d_h) -> (B, h, d_h, T) (axes 2 and 3), instead of "
            "the head and token axes (1 and 2): the merge then reads each head feature by feature. The tokens "
            "must come before the heads: (B, T, h, d_h)",
        ),
        "interleaved features": (
            heads_out.transpose(0, 2, 3, 1).reshape(B, T, h * d_h),
            "you reshaped from (B, T, d_h, h), so the features of the heads alternate (head 0, head 1, ...) "
            "instead of sitting side by side in blocks of d_h; this does not undo the split",
        ),
        "missing reshape": (
            heads_out.transpose(0, 2, 1, 3),
            "you returned (B, T, h, d_h): the axes are in the right order, but the last two are not yet "
            "joined into one axis of width D",
        ),
        **{
            f"heads {verb}": (combined, f"you {verb} the heads into (B, T, d_h): that throws the head axis away (a "
                                        "different design, lesson 03). Merging keeps every head's d_h features")
            for verb, combined in (("averaged", heads_out.mean(axis=1)), ("summed", heads_out.sum(axis=1)))
        },
        ".T before the reshape": (
            heads_out.T.reshape(B, T, h * d_h),
            "you used .T, which reverses ALL the axes of a 4-D array ((B, h, T, d_h) became (d_h, T, h, B)), "
            "so the reshape mixed batches, tokens and features. Swap only the two axes that must trade "
            "places (np.transpose with an axis order, or np.swapaxes)",
        ),
        "heads glued along the tokens": (
            heads_out.reshape(B, h * T, d_h),
            "you put the heads one after another along the token axis, (B, h*T, d_h). The heads go side "
            "by side along the feature axis; the tokens stay T",
        ),
        "sequences glued instead of heads": (
            np.concatenate(list(heads_out), axis=-1),
            "concatenating the array heads_out itself walks its first axis, the batch: it put the B sequences "
            "side by side, (h, T, B*d_h), not the heads. Concatenation needs a list of the h head blocks",
        ),
    }


_MERGE_AXES = ("B", "h", "T", "d_h")


def _reordered_merge(heads_out: NDArray[Any], result: NDArray[Any], view: bool = False) -> str | None:
    """What a merge whose result is ``heads_out`` with its axes put in another order, then reshaped to
    ``(B, T, D)``, did (``None`` if no such order gives ``result``)."""
    B, h, T, d_h = heads_out.shape
    for order in itertools.permutations(range(4)):
        if order in ((0, 2, 1, 3), (0, 1, 2, 3)):
            continue  # the right merge; the direct reshape is named on its own
        if same(np.asarray(result), heads_out.transpose(order).reshape(B, T, h * d_h)):
            layout = ", ".join(_MERGE_AXES[i] for i in order)
            merged = "viewed the result as" if view else "reshaped to"
            return (f"you put the axes in the order ({layout}) and then {merged} (B, T, D): the shape is right "
                    "but the numbers are not. Only the head and token axes (1 and 2) trade places: (B, T, h, d_h)")
    return None


def _rows_stay_in_their_batch(result: NDArray[Any]) -> bool:
    """Whether every label of the 3-D ``result`` comes from the sequence (batch entry) it sits in."""
    batch = np.floor(np.asarray(result, dtype=np.float64) / _BATCH_STEP)
    return bool(np.all(batch == np.arange(result.shape[0])[:, None, None]))


def _first_difference(got: NDArray[Any], want: Labels, sizes: tuple[int, int, int]) -> str:
    """Where ``got`` first differs from ``want`` (same shape), in label terms."""
    index = next((i for i in np.ndindex(want.shape) if not same(got[i], want[i])), None)
    if index is None:  # unreachable when `same(got, want)` is False
        return "the numbers differ"
    axes = ("b", "head", "t", "j") if want.ndim == 4 else ("b", "t", "f")
    at = ", ".join(f"{a}={i}" for a, i in zip(axes, index, strict=True))
    return f"at [{at}] expected {describe_label(want[index], *sizes)} but found {describe_label(got[index], *sizes)}"


LESSON_D, LESSON_H = 8, 2  # the sizes lesson 02's kernel holds (its B=2, T=4, D=8, h=2, d_h=4)


def _hard_coded(verdict: Verdict, case: int) -> Verdict:
    """``verdict`` for a later case of `SPLIT_CASES`, told as a function right on the first size only."""
    if not verdict.answered:
        return verdict
    if case == 0:
        if "your function raised" not in verdict.message or _raised_advice(verdict.message):
            return verdict  # no exception, or one whose cause is already named
        return failed(verdict.question, f"{verdict.message}. If a size is copied from the notebook (its B=2, T=4, "
                                        "D=8, h=2, d_h=4), read it from the argument's shape instead: the checker "
                                        "uses sizes of its own")
    sizes = ", ".join(f"{name}={value}" for name, value in zip(("B", "T", "D", "h"), SPLIT_CASES[0], strict=True))
    B, T, D, heads = SPLIT_CASES[case]
    return failed(verdict.question, f"sizes hard-coded? Right for {sizes}, but not for B={B}, T={T}, D={D}, "
                                    f"h={heads} (d_h = {D // heads}): {verdict.message}. Read every size from the "
                                    "argument's shape (a split's d_h is D // heads): a d_h = 4, T or h copied from "
                                    "the notebook fits the notebook's sizes only")


def _raised_advice(message: str) -> str:
    """What an exception a learner's split or merge raised most likely means ("" when unsure)."""
    if "'float' object cannot be interpreted as an integer" in message:
        return (". A size computed with / is a float, even when it is whole (8 / 2 is 4.0), and a reshape "
                "needs whole numbers: compute d_h with //")
    if "equal division" in message:
        return (". np.split cut an axis into pieces of unequal length: which axis holds the features that "
                "the heads share out?")
    if "axes don't match array" in message:
        return (". NumPy's transpose takes the new order of ALL the axes (four numbers for a 4-D array); "
                "swapping two axes i and j is np.swapaxes(a, i, j) in NumPy (PyTorch's transpose takes two)")
    if "view() takes from 0 to 2 positional arguments" in message:
        return (". NumPy's .view reinterprets the bytes as another dtype, it does not change the shape: "
                "a NumPy array changes shape with .reshape")
    if "'numpy.ndarray' object has no attribute" in message:
        return (". That is a PyTorch method, and the function gets a NumPy array: NumPy reorders axes with "
                "np.transpose (an axis order) or np.swapaxes, and changes the shape with .reshape")
    if "transpose() takes 2 positional arguments" in message or "transpose() received an invalid" in message:
        return (". PyTorch's .transpose swaps exactly two axes (give two numbers); a full axis order is "
                ".permute in PyTorch")
    return ""


def _run_cases(question: str, fn: Any, what: str, split: bool, convert: Callable[[Labels], Any] = np.copy,
               view: bool = False) -> Verdict:
    """Run the learner's split (``split``) or merge ``fn`` on each of `SPLIT_CASES`; the first mistake,
    or a passed `Verdict` with an empty message. ``view``: the merge is the PyTorch one ending in ``.view``."""
    for case, (B, T, D, heads) in enumerate(SPLIT_CASES):
        verdict = _run_case(question, fn, what, split, convert, (B, T, D, heads), view)
        if not verdict.ok:
            return _hard_coded(verdict, case)
    return passed(question, "")


def _run_case(question: str, fn: Any, what: str, split: bool, convert: Callable[[Labels], Any],
              sizes: tuple[int, int, int, int], view: bool = False) -> Verdict:
    """The verdict on ``fn`` for one case ``(B, T, D, heads)``; passed with an empty message if right."""
    B, T, D, heads = sizes
    x = labelled_input(B, T, D)
    heads_out = np.ascontiguousarray(_split(x, heads))
    args: tuple[Any, ...]
    if split:
        where = f"on x of shape (B, T, D) = {x.shape} with heads={heads}"
        args, want, layout, wrong = (convert(x), heads), heads_out, "(B, h, T, d_h)", known_wrong_splits(x, heads)
    else:
        where = f"on heads_out of shape (B, h, T, d_h) = {heads_out.shape}"
        args, want, layout, wrong = (convert(heads_out),), x, "(B, T, D)", known_wrong_merges(heads_out, view)
    returned = function_answer(question, fn, args, what)
    if isinstance(returned, Verdict):
        if not returned.answered:
            return returned
        return failed(question, f"{where} {returned.message}{_raised_advice(returned.message)}")
    result = array_answer(question, returned, f"the {layout} array")
    if isinstance(result, Verdict):
        return failed(question, f"{where} {result.message}")
    other_kind = same_kind(question, returned, args[0])
    if other_kind is not None:
        return failed(question, f"{where}: {other_kind.message}")
    if same(result, want):
        return passed(question, "")
    mistake = first_match(result, [(value, f"{name}: {where}, {why}") for name, (value, why) in wrong.items()])
    if mistake is not None:
        return failed(question, mistake)
    if not split and result.shape == want.shape:
        reordered = _reordered_merge(heads_out, result, view)
        if reordered is not None:
            return failed(question, f"axes in another order: {where}, {reordered}")
    if result.shape != want.shape:
        if not split and tuple(result.shape) == (B, heads * T, D // heads) and _rows_stay_in_their_batch(result):
            return failed(question, f"heads along the tokens: {where} you returned {tuple(result.shape)} = "
                                    "(B, h*T, d_h): h*T rows of d_h features per sequence, so the heads went one "
                                    "after another along the token axis. The merge keeps T tokens and puts the "
                                    f"heads side by side along the feature axis: (B, T, D) = {want.shape}")
        if not split and tuple(result.shape) == (B, T, D // heads):
            return failed(question, f"{where} you returned {tuple(result.shape)} = (B, T, d_h): one head's width "
                                    "per token. The merge keeps all h heads' features side by side, "
                                    f"(B, T, D) = {want.shape}")
        if sorted(result.shape) == sorted(want.shape) and same(np.sort(result, axis=None), np.sort(want, axis=None)):
            return failed(question, f"{where} the numbers are all there but the axes are in another order: you "
                                    f"returned shape {tuple(result.shape)}, and {layout} = {want.shape} is wanted. "
                                    "Check which axis each step moves")
        return failed(question, f"{where} expected shape {layout} = {want.shape} but got {tuple(result.shape)}")
    first = _first_difference(result, want, (B, T, D))
    if not same(np.sort(result, axis=None), np.sort(want, axis=None)):
        return failed(question, f"{where} the result holds different numbers from the input; a split or merge "
                                f"only moves numbers, it must not change them ({first})")
    return failed(question, f"{where} the shape is right but the numbers are not: {first}")


def check_split(fn: Any) -> Verdict:
    """Run ``fn(x (B, T, D), heads) -> (B, h, T, d_h)`` on labelled inputs and explain any mistake.

    ``fn`` receives a NumPy float64 array and must return one (a tensor, or another dtype, is refused).
    """
    what = "split(x, heads): x has shape (B, T, D); return the (B, h, T, d_h) array"
    if fn is not None:
        refused = forbidden_call("split", fn, "split_heads", "_split_heads", "_split")
        if refused is not None:
            return refused
    verdict = _run_cases("split", fn, what, True)
    if not verdict.ok:
        return verdict
    return passed("split", "each head holds its own d_h consecutive features of every token, in (B, h, T, d_h)")


def check_merge(fn: Any) -> Verdict:
    """Run ``fn(heads_out (B, h, T, d_h)) -> (B, T, D)`` on labelled inputs and explain any mistake."""
    what = "merge(heads_out): heads_out has shape (B, h, T, d_h); return the (B, T, D) array"
    if fn is not None:
        refused = forbidden_call("merge", fn, "merge_heads", "_merge_heads")
        if refused is not None:
            return refused
    verdict = _run_cases("merge", fn, what, False)
    if not verdict.ok:
        return verdict
    return passed("merge", "every token regains its D features, head 0's block, then head 1's, ...: merge undoes split")


# The calls of the view-merge exercise: a copy in the new order, then `.view`. `.reshape` and `.flatten`
# copy by themselves when they must, so a `.view` after them re-describes an already merged tensor.
_COPIES_FOR_VIEW = ("contiguous", "clone")
_MERGES_THAT_COPY = ("reshape", "flatten")
_AXIS_SWAPS = ("transpose", "permute", "swapaxes", "swapdims", "movedim", "einsum")


def _view_merge_route(question: str, fn: Any) -> Verdict | None:
    """Refuse, before running, a view merge whose route the question rules out; ``None`` if fine."""
    for name in _MERGES_THAT_COPY:
        if uses_name(fn, name, home=None):
            return failed(question, f"your code calls .{name}, which copies the data itself when it must: a .view "
                                    f"after it has nothing left to do, and the question is about making .view work. "
                                    f"Leave out .{name}: find the call that copies the transposed tensor into the "
                                    "order .view needs")
    return None


def check_view_merge(fn: Any, like: Any) -> Verdict:
    """Run the torch merge ``fn(heads_out (B, h, T, d_h)) -> (B, T, D)``, which must swap the token and
    head axes and end in ``.view`` of a contiguous copy (no ``.reshape``, no ``.flatten``).

    The inputs are contiguous tensors made by ``like.new_tensor`` (``like``: any torch tensor; it
    sets dtype and device), so this module needs no torch import.
    """
    question = "view merge"
    if not callable(getattr(like, "new_tensor", None)):
        raise TypeError(f"like must be a torch tensor (it makes the test inputs), got {type(like).__name__}")
    what = "merge_with_view(heads_out): heads_out is a (B, h, T, d_h) tensor; return the (B, T, D) tensor"
    if fn is not None:
        refused = forbidden_call(question, fn, "merge_heads", "_merge_heads")
        if refused is None:
            refused = _view_merge_route(question, fn)
        if refused is not None:
            return refused
    verdict = _run_cases(question, fn, what, False, like.new_tensor, view=True)
    if "view size is not compatible" in verdict.message and fn is not None and uses_name(fn, "clone", home=None) \
            and not uses_name(fn, "contiguous", home=None):
        return failed(question, ".view refused the cloned tensor: .clone() copies the numbers but keeps their memory "
                                "layout too (its default memory_format=torch.preserve_format gives the copy the "
                                "transposed strides), so the copy is no more contiguous than the transposed tensor. "
                                ".contiguous() (or .clone(memory_format=torch.contiguous_format)) copies into "
                                "row-major order, which .view needs")
    if "view size is not compatible" in verdict.message:
        return failed(question, ".view refused the transposed tensor: after .transpose its memory is no longer in "
                                "(B, T, h, d_h) order (it is not contiguous), so no strides describe (B, T, D). "
                                "One call between the transpose and the .view must copy it into that order")
    if not verdict.ok:
        return verdict
    if not uses_name(fn, "view", home=None):
        return failed(question, "the numbers are right, but the question asks for .view and your code never calls it")
    if not any(uses_name(fn, name, home=None) for name in _AXIS_SWAPS):
        return failed(question, "the numbers are right, but your code never swaps the token and head axes "
                                "(.transpose, .permute, ...): it builds the merged tensor another way (torch.cat, "
                                "torch.stack, a loop, ...), so its .view has nothing to do. The question is about "
                                ".view after .transpose")
    if not any(uses_name(fn, name, home=None) for name in _COPIES_FOR_VIEW):
        return failed(question, "the numbers are right, but no copy into the new order is made before the .view "
                                "(the tensor .view works on came contiguous from another operation). The question "
                                "asks for .transpose, then the call that copies, then .view")
    return passed(question, "a contiguous copy of the transposed tensor can be viewed as (B, T, D)")


def check_head_width(d_h: Any) -> Verdict:
    """Question: a layer has ``D = 2048`` and ``h = 16``; how wide is one head (``d_h``, an int)?

    A known mistake is named whatever the number's type; the right number as a float (``2048 / 16``)
    is refused by `int_answer` with a message that names the type.
    """
    question = "head width"
    D, h = HEAD_WIDTH_QUESTION["D"], HEAD_WIDTH_QUESTION["h"]
    what = "one whole number: how many features one head works with"
    value = number_answer(question, d_h, what)
    if isinstance(value, Verdict):
        return value
    mistake = first_match(value, [
        (D * h, "you multiplied D by h; the heads share the D features between them"),
        (h / D, "you divided h by D, which gives a fraction of one feature; the heads share the D features"),
        (D, f"{D} is D, the width of all heads together; one head gets an equal share of it"),
        (h, f"{h} is h, the number of heads, not the width of one head"),
        (D % h, f"got {D % h}: that is what h // D gives (h divided by D rounds down to 0) and what D % h, the "
                "remainder, gives (it says that h divides D); one head's width is the D features shared by h heads"),
        (D - h, "you subtracted h from D; the heads share the D features between them equally"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    count = int_answer(question, d_h, what)
    if isinstance(count, Verdict):
        return count
    if count == D // h:
        return passed(question, f"d_h = D / h = {D} / {h} = {D // h}")
    if count == LESSON_D // LESSON_H:
        return failed(question, f"got {count} = {LESSON_D} // {LESSON_H}: those are the notebook's D and h, the "
                                f"sizes of this lesson's small layer. The question's layer has D = {D} features "
                                f"and h = {h} heads")
    if 1 < count < D and D % count == 0:
        return failed(question, f"got {count} = {D} / {D // count}: you divided by the wrong number. There are "
                                f"h = {h} heads here (not {D // count}), and each gets an equal share of the "
                                f"D = {D} features")
    return failed(question, f"got {d_h!r}; each of the h = {h} heads gets an equal share of the D = {D} features")


def _indices(question: str, name: str, answer: Any) -> list[int] | str:
    """Sorted unique indices from ``answer``, or what is wrong with it (prefixed by ``name``)."""
    values = int_array_answer(question, answer, "a list of integer indices, e.g. list(range(...))")
    if isinstance(values, Verdict):
        return f"{name}: {values.message}"
    return sorted({int(v) for v in values})


def check_head_reads(input_features: Iterable[int] | None, weight_columns: Iterable[int] | None) -> Verdict:
    """Question: a layer 12 features wide with 3 heads (`HEAD_READS_QUESTION`): which input features
    does head 2 read, and which columns of its ``W_q (12, 12)`` (laid out ``(in, out)``) belong to head 2?
    """
    question = "head reads"
    D, h, head = HEAD_READS_QUESTION["D"], HEAD_READS_QUESTION["h"], HEAD_READS_QUESTION["head"]
    d_h = D // h
    own_block = list(range(head * d_h, (head + 1) * d_h))
    if input_features is None and weight_columns is None:
        return unanswered(question, "replace None with a list of integer indices in both answers, e.g. list(range(2))")
    problems: list[str] = []

    past_end = f"indices count from 0, so they run 0..{D - 1}: {D} is past the end"
    inputs = _indices(question, "input_features", input_features)
    if isinstance(inputs, str):
        problems.append(inputs)
    elif inputs == own_block:
        problems.append(f"input_features: head {head} does not read only its own slice of d_h={d_h} input features: "
                        "the heads share out the projection's output columns, not the input. Head "
                        f"{head}'s queries are x @ W_q[:, its columns]: which features of x does that product use?")
    elif len(inputs) == d_h and inputs == list(range(inputs[0], inputs[0] + d_h)):
        problems.append(f"input_features: {inputs} is a slice of d_h={d_h} input features, but a head does not read "
                        "a slice of the input: the heads share out the projection's output columns, not the input")
    elif inputs == list(range(1, D + 1)):
        problems.append(f"input_features: all {D} features, but counted from 1; {past_end}")
    elif inputs != list(range(D)):
        problems.append(f"input_features: got {inputs}; a head's projection is x @ W_q[:, its columns]: look at "
                        "which rows of W_q that product uses (one row per input feature)")

    columns = _indices(question, "weight_columns", weight_columns)
    if isinstance(columns, str):
        problems.append(columns)
    elif columns != own_block:
        if columns == list(range(head, D, h)):
            detail = f"these are the interleaved columns {head}, {head}+h, ...; heads own consecutive blocks of d_h"
        elif columns == list(range(D)):
            detail = f"all {D} columns together belong to all heads; head {head} owns d_h={d_h} of them"
        elif len(columns) == d_h and columns[0] % d_h == 0 and columns == list(range(columns[0], columns[0] + d_h)):
            detail = f"that is the block of head {columns[0] // d_h}, not of head {head} (heads count from 0)"
        elif columns == [c + 1 for c in own_block]:
            detail = f"the right block, counted from 1; {past_end}"
        elif columns and columns[-1] >= D:
            detail = past_end
        else:
            detail = f"a head owns d_h={d_h} consecutive columns, and head i's block comes after those of heads 0..i-1"
        problems.append(f"weight_columns: got {columns}; {detail}")

    if problems:
        return failed(question, " | ".join(problems))
    return passed(question, f"head {head} reads all {D} input features through its own columns {head * d_h}.."
                            f"{(head + 1) * d_h - 1} of W_q")
