"""Quick check of the lesson "Concatenate and project": one checker per exercise.

Each compares the learner's answer with the right one and, when it is wrong, names the mistake
this lesson warns about that it equals; a "not yet" message never spells out the solution.

- `check_merge` / `check_merge_function`: ``(B, h, T, d_h) -> (B, T, D)``, as an array or as a
  function (tried on two more shapes, in which B, h, T and d_h all differ); direct reshape,
  interleaved features, heads averaged, summed, reversed, glued along the token axis,
  ``np.concatenate(heads_out, -1)`` (which walks the batch axis), the reshape missing, shapes
  hard-coded, a call of the library's ``merge_heads``.
  A call of the lesson's own ``merge`` (or of a private library merge) is refused too.
- `check_head_contribution`: head ``i``'s share of ``merge(heads_out) @ W_o`` as a function, tried for
  every ``i`` and on other sizes; columns of ``W_o`` instead of rows (also when the product raises),
  the rows of another head (one place off, every h-th row, always head 0's), the merged row's features
  read interleaved (``merged[..., i::h]``), ``W_o`` transposed or
  missing, the whole output or an equal share of it, another ``W_o`` than the one given (the lesson's
  ``wo`` on a second problem; any matrix other than the argument, such as ``numpy_layer.wo``: the
  function is run again with only ``wo`` changed), sizes hard-coded.
- `check_time_major_merge`: the heads folded into the batch axis, ``(B*h, T, d_h)`` (row ``b*h + i``),
  merged into the sequence-first ``(T, B, D)``: the fold read head-major, the batch-first result, a
  direct reshape, the transpose missing, sizes hard-coded; a call of a finished merge (as in Your turn 1)
  is refused.
- `check_linear_weight` / `check_linear_from_numpy`: a NumPy ``(in, out)`` matrix in ``nn.Linear``
  (the function tried on a second matrix); the copy without transposing, a bias, the copy outside
  ``torch.no_grad()``, a layer built from the notebook's matrix instead of the argument or with its
  sizes written in, a float32 layer (float64 is required); a call of ``mha_torch.linear`` is refused.
- `check_fixed_forward`: the repaired broken layer, tried on the lesson's problem and on two more of
  other sizes and weights; which bug remains (the direct-reshape split, also for only some of q, k
  and v, the unscaled scores, the interleaved split, the split to (B, T, h, d_h) never transposed, so that
  attention runs across the heads), the scale after the softmax or multiplied, q @ k with k unswapped,
  k or v projected with the wrong weight, ``W_o`` missing or transposed, ``.T`` on 4-D keys, a wrong
  scale, the softmax over the query axis, a direct-reshape merge, the notebook's head count, a
  function that ignores its arguments, a ``W_o`` other than the argument (the notebook's ``wo`` or
  ``numpy_layer.wo``: the function is run again with only ``wo`` changed); a call of the library's
  split, attention or layer is refused, in
  the words of a repair (the body's softmax and merge_heads may stay).

The mask exercise of ``nn.MultiheadAttention`` moved to `lessons_lib.checks.matching_pytorch` (lesson 04).

Answers may be NumPy arrays or torch tensors; this module imports NumPy only.
"""

from __future__ import annotations

from dataclasses import replace
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
    passed,
    reference_array,
    same,
    uses_name,
)

__all__ = [
    "check_fixed_forward",
    "check_head_contribution",
    "check_linear_from_numpy",
    "check_linear_weight",
    "check_merge",
    "check_merge_function",
    "check_time_major_merge",
]

Floats = NDArray[np.float64]

_CONCATENATE_ARRAY = (
    "concatenating the array heads_out itself walks its FIRST axis, the batch, not the heads: it put the B "
    "sequences side by side, shape (h, T, B * d_h). Concatenation needs a list of the h head blocks, each (B, T, d_h)"
)


def _merge(heads_out: Floats) -> Floats:
    """The right merge: ``(B, h, T, d_h) -> (B, T, h, d_h) -> (B, T, D)``."""
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(0, 2, 1, 3).reshape(B, T, h * d_h)


def _merge_verdict(question: str, merged: Any, heads: Floats) -> Verdict:
    answer = array_answer(question, merged, "your merged array, shape (B, T, D)")
    if isinstance(answer, Verdict):
        return answer
    B, h, T, d_h = heads.shape
    expected = _merge(heads)
    if same(answer, expected):
        return passed(question, f"(B, T, D) = {expected.shape}: each row holds head 0's {d_h} features, then head 1's")
    lost = f"shape {answer.shape} = (B, T, d_h) has lost the head axis, so nobody can tell which head said what"
    mistake = first_match(answer, [
        (lambda: heads.mean(axis=1), f"you averaged the heads: {lost}. Merging keeps all D = {h * d_h} features"),
        (lambda: heads.sum(axis=1), f"you summed the heads: {lost}. Merging keeps all D = {h * d_h} features"),
        (lambda: heads.transpose(0, 2, 1, 3),
         f"the heads sit side by side in (B, T, h, d_h) = {answer.shape}, but they are not yet "
         f"glued into one row of D features: the reshape to (B, T, D) is missing"),
        (lambda: heads.reshape(B, T, h * d_h),
         "direct reshape: you reshaped (B, h, T, d_h) straight to (B, T, D) (maybe through (B, T, h, d_h)) "
         "without moving any axis first, and that is not the merge. Run your function on labels and compare "
         "token 0's row with the one the statement asks for"),
        (lambda: heads.transpose(0, 2, 3, 1).reshape(B, T, h * d_h),
         "the features are interleaved: you moved the head axis last, (B, T, d_h, h), before the "
         "reshape, so the features of different heads alternate instead of staying in blocks"),
        (lambda: _merge(heads[:, ::-1]), "the heads are in reverse order: head 0's features must come first"),
        (lambda: heads.reshape(B, h * T, d_h),
         f"you glued the heads along the token axis, shape (B, h*T, d_h) = {answer.shape}: "
         f"the blocks belong side by side in each token's row of features"),
        (lambda: np.concatenate(list(heads), axis=-1), _CONCATENATE_ARRAY),
        (lambda: heads.T.reshape(B, T, h * d_h),
         "`.T` on a 4-D array reverses ALL four axes, (B, h, T, d_h) -> (d_h, T, h, B), so the reshape then mixes "
         "sequences, tokens and features: name the two axes to swap"),
        (lambda: np.swapaxes(heads, -1, -2).reshape(B, T, h * d_h),
         "you swapped the last two axes, T and d_h, not the head axis and the token axis (axes 1 and 2)"),
        (lambda: heads.transpose(1, 0, 2, 3),
         f"you returned the h head blocks one after another, shape (h, B, T, d_h) = {answer.shape}: they must be "
         "glued side by side into one row of D features per token"),
        (lambda: heads.swapaxes(0, 1).reshape(B, T, h * d_h),
         "you swapped the batch axis and the head axis (0 and 1), not the head axis and the token axis (1 and 2): "
         "a row must gather the heads of one token"),
        (lambda: heads.transpose(2, 0, 1, 3).reshape(T, B, h * d_h),
         f"token first, (T, B, D) = {answer.shape}: the heads are glued right, but the batch axis must stay first, "
         "(B, T, D)"),
        (lambda: np.concatenate([heads[:, i] for i in range(h)], axis=0),
         f"you glued the heads' (B, T, d_h) blocks along axis 0, one under the other, shape {answer.shape}: "
         "side by side means along the last axis, the features"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    if answer.shape == (B, h, T * d_h) and h != T:
        return failed(question, f"shape (B, h, T*d_h) = {answer.shape}: the reshape's sizes come from the wrong axes "
                                "(after a transpose the axes have moved): read B, h, T, d_h from heads_out.shape "
                                "first, then ask for (B, T, h*d_h)")
    if answer.shape != expected.shape:
        return failed(question, f"expected shape (B, T, D) = {expected.shape}, got {answer.shape}")
    return failed(question, "right shape (B, T, D), wrong numbers: not a merge of heads_out into rows of h * d_h")


def _refused_merge(question: str, function: Any) -> Verdict | None:
    """A failed `Verdict` when ``function`` hands the merge to a finished one: the library's
    ``merge_heads`` (NumPy or torch), its private twin, the figure's ``merge_blocks``, this module's
    ``_merge``, or the lesson's own ``merge`` (defined in the notebook after Your turn 1).
    Your turns 1 and 5 both ask for a merge, so both refuse them."""
    refused = forbidden_call(question, function, "merge_heads", "_merge_heads", "merge_blocks", "_merge")
    if refused is not None:
        return refused
    if uses_name(function, "merge", home=None):
        return failed(question, "your function calls the lesson's merge, which does the merge this exercise asks "
                                "you to write: build it from NumPy operations yourself")
    return None


def check_merge(merged: Any, heads_out: Any) -> Verdict:
    """Question "merge": ``heads_out (B, h, T, d_h)`` merged back to ``(B, T, D)``."""
    heads = reference_array("heads_out", heads_out, "(B, h, T, d_h)", rank=4)
    return _merge_verdict("merge", merged, heads)


# Extra (B, h, T, d_h) shapes for the function exercises: B, h, T and d_h differ from the lesson's
# (2, 2, 4, 4) and from each other's, so a size copied from the notebook fails on one of them.
MERGE_SHAPES: tuple[tuple[int, int, int, int], ...] = ((1, 3, 5, 2), (3, 4, 2, 3))


def check_merge_function(merge: Any, heads_out: Any) -> Verdict:
    """Question "merge by hand": ``merge(heads_out)`` on ``heads_out (B, h, T, d_h)``, then on the
    shapes `MERGE_SHAPES`; a call of the library's ``merge_heads`` is refused before running."""
    question = "merge by hand"
    heads = reference_array("heads_out", heads_out, "(B, h, T, d_h)", rank=4)
    if merge is not None:
        refused = _refused_merge(question, merge)
        if refused is not None:
            return refused
    rng = np.random.default_rng(0)
    problems = [heads, *(rng.normal(size=shape) for shape in MERGE_SHAPES)]
    first: Verdict | None = None
    for problem in problems:
        result = function_answer(question, merge, (problem.copy(),), "the body: return the merged (B, T, D) array")
        if isinstance(result, Verdict) and "axes don't match array" in result.message:
            result = failed(question, f"{result.message}: NumPy's transpose takes the new order of ALL the axes, "
                                      "four here (torch's transpose(1, 2) swaps two; NumPy's swapaxes does that)")
        verdict = result if isinstance(result, Verdict) else _merge_verdict(question, result, problem)
        if first is None:
            first = verdict
            if not verdict:
                return verdict
        elif not verdict:
            return failed(
                question,
                f"sizes hard-coded? Right for heads_out of shape {heads.shape}, but not for {problem.shape} "
                f"({verdict.message}). Read B, h, T, d_h from the argument's shape, not from the notebook's variables",
            )
    assert first is not None
    return first


def _contribution(heads: Floats, w: Floats, i: int) -> Floats:
    """Head ``i``'s share of ``merge(heads) @ w``: its features meet row block ``i`` of ``w``."""
    d_h = heads.shape[-1]
    result: Floats = heads[:, i] @ w[i * d_h : (i + 1) * d_h]
    return result


def _contribution_mistake(answer: Floats, heads: Floats, w: Floats, i: int) -> str | None:
    """The known mistake ``answer`` equals for head ``i`` of one problem, or ``None``."""
    B, h, T, d_h = heads.shape
    D = h * d_h
    rows = f"rows {i * d_h}..{(i + 1) * d_h - 1}"
    output = _merge(heads) @ w
    candidates: list[tuple[Any, str]] = [
        (lambda: heads[:, i] @ w[:, i * d_h : (i + 1) * d_h],
         f"you took a block of d_h COLUMNS of W_o, so the result has only d_h = {d_h} output features: in x @ W_o "
         "the input features meet the ROWS of W_o, and every head's features reach all D output features"),
        (lambda: heads[:, i] @ w.T[i * d_h : (i + 1) * d_h],
         "W_o is transposed: NumPy weights are (in, out) and multiply from the right, so feature j of the merged "
         "row meets row j of W_o, not column j"),
        (output, "this is the whole output, every head's contribution added up; keep only head i's terms"),
        (lambda: output / h,
         f"this is 1/h = 1/{h} of the whole output, an equal share: head i's contribution depends on what head i "
         "said, not on an average"),
        (lambda: heads[:, i],
         f"this is head i's own output, (B, T, d_h): W_o is missing (its {rows} turn it into D output features)"),
        (lambda: _merge(heads)[..., i * d_h : (i + 1) * d_h],
         "this is head i's block of the merged row, (B, T, d_h): W_o is missing"),
        (lambda: _merge(heads)[..., i::h] @ w[i::h],
         f"you took every h-th feature of the merged row and every h-th row of W_o ({i}, {i + h}, ...): that "
         "reads the heads interleaved. Head i owns one contiguous block of the merged row, its d_h features "
         f"{i * d_h}..{(i + 1) * d_h - 1} (i*d_h to (i+1)*d_h - 1), and they meet the same block of W_o, {rows}"),
        (lambda: _merge(heads)[..., i::h] @ w[i * d_h : (i + 1) * d_h],
         f"you took every h-th feature of the merged row ({i}, {i + h}, ...): the heads are not interleaved there. "
         f"Head i owns one contiguous block of the merged row, features {i * d_h}..{(i + 1) * d_h - 1} "
         "(i*d_h to (i+1)*d_h - 1), the features heads_out[:, i] holds"),
        (lambda: heads[:, i] @ w[i::h],
         f"you took every h-th row of W_o (rows {i}, {i + h}, ...): head i's features are one contiguous block "
         f"of the merged row, so they meet {rows}, a contiguous block of W_o"),
        (lambda: np.where(np.arange(h)[:, None, None] == i, heads, 0.0).reshape(B, T, D) @ w,
         "you zeroed the other heads, then merged by a direct reshape (B, h, T, d_h) -> (B, T, D), which mixes "
         "tokens: the merge must bring the heads of each token together first (section 1)"),
        (lambda: heads[:, i] @ w[i * d_h : (i + 1) * d_h, i * d_h : (i + 1) * d_h],
         f"you kept only the diagonal block of W_o, {rows} and the same columns, so only d_h output features: "
         "head i's rows reach all D output features"),
        (lambda: output[..., i * d_h : (i + 1) * d_h],
         "you sliced the OUTPUT features of the whole output: head i's contribution reaches all D output "
         "features; what belongs to head i is its block of input features, the rows of W_o"),
        (lambda: _contribution(heads, w, i) / h,
         f"this is 1/h = 1/{h} of head i's contribution: the contributions are added, not averaged, so nothing is "
         "divided by h"),
        (lambda: heads[i] @ w[i * d_h : (i + 1) * d_h],
         "heads_out[i] picks sequence i (axis 0 is the batch B); head i is heads_out[:, i]"),
        (lambda: heads[:, i] @ w.reshape(h, d_h, D).mean(axis=0),
         "you averaged W_o's h blocks of rows: that is the single reader averaging would use; in the layer head i "
         "is read by its own block only"),
    ]
    if h > 1:
        nxt = (i + 1) % h
        candidates.append((lambda: _contribution(heads, w, nxt),
                           f"this is head {nxt}'s contribution, not head {i}'s: heads are counted from 0 here (the "
                           "paper counts from 1)"))
        if i != 0:
            candidates.append((lambda: heads[:, i] @ w[:d_h],
                               f"for i = {i} you used W_o's first d_h rows, which belong to head 0: head i's "
                               f"features meet {rows}"))
            candidates.append((lambda: _contribution(heads, w, 0),
                               f"for i = {i} you returned head 0's contribution: use the argument i"))
    return first_match(answer, candidates)


_IGNORES_WO = ("your function ignores the W_o it is given: it uses another matrix (one from the notebook, such as "
               "numpy_layer.wo?); use the wo argument")


def _ignores_wo(function: Any, args: tuple[Any, ...], place: int, answer: Floats) -> bool:
    """Whether the learner's ``function(*args)`` (which returned ``answer``) never reads its W_o,
    ``args[place]``, but does read its input, ``args[0]``: run once more with only W_o replaced by a new
    matrix, it returns the same ``answer``; run with only the input replaced, another one."""
    rng = np.random.default_rng(12)

    def rerun(n: int) -> Any:
        given = np.asarray(args[n], dtype=float)
        new = rng.uniform(-1.0, 1.0, size=given.shape)
        copies = tuple(new if k == n else np.copy(a) if isinstance(a, np.ndarray) else a for k, a in enumerate(args))
        try:
            return _float_answer(function(*copies))
        except Exception:  # the learner's code may raise anything: then it is not this mistake
            return None

    if not same(rerun(place), answer):
        return False
    other_input = rerun(0)
    return other_input is not None and not same(other_input, answer)


class _IndexLog(np.ndarray):  # type: ignore[type-arg]
    """An array that notes every index it is read with (only the array itself, not its views)."""

    log: list[Any]

    def __getitem__(self, key: Any) -> Any:
        if getattr(self, "log", None) is not None:
            self.log.append(key)
        return np.asarray(self)[key]

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if getattr(self, "log", None) is not None and func.__name__ in ("split", "array_split", "hsplit"):
            axis = 1 if func.__name__ == "hsplit" else kwargs.get("axis", args[2] if len(args) > 2 else 0)
            self.log.append(("split", axis))
        return super().__array_function__(func, types, args, kwargs)

    def __array_finalize__(self, obj: Any) -> None:
        self.log = None  # type: ignore[assignment]  # views and results log nothing


def _slices_columns(contribution: Any, heads: Floats, w: Floats, i: int) -> bool:
    """Whether ``contribution(heads, w, i)`` reads ``w`` as ``w[:, a:b]``, a block of columns (run once
    more on a ``w`` that logs its indices; whatever the run raises is ignored)."""
    logged = w.copy().view(_IndexLog)
    logged.log = []
    try:
        contribution(heads.copy(), logged, i)
    except Exception:  # the learner's code raised before: expected
        pass
    for key in logged.log:
        if isinstance(key, tuple) and key[:1] == ("split",) and key[1] in (1, -1):
            return True  # np.split(wo, h, axis=1), np.hsplit(wo, h)
        if (isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], slice)
                and (key[0] is Ellipsis or key[0] == slice(None))):
            return True
    return False


# Extra (B, h, T, d_h) problems for `check_head_contribution`: first one of the given sizes with new
# numbers and a new W_o (which tells a function that uses the notebook's wo from one that hard-codes
# a size), then the shapes `MERGE_SHAPES`, which the lesson does not hold.
def check_head_contribution(contribution: Any, heads_out: Any, wo: Any) -> Verdict:
    """Question "head contribution": ``contribution(heads_out, wo, i)``, head ``i``'s share of
    ``merge(heads_out) @ wo`` for ``heads_out (B, h, T, d_h)`` and ``wo (D, D)`` (in, out); tried for every
    ``i``, then on a second problem of the same sizes and on the shapes `MERGE_SHAPES`."""
    question = "head contribution"
    heads = reference_array("heads_out", heads_out, "(B, h, T, d_h)", rank=4)
    w = reference_array("wo", wo, "(D, D)", rank=2)
    D = heads.shape[1] * heads.shape[3]  # h * d_h
    if w.shape != (D, D):
        raise ValueError(f"wo must be (D, D) = {(D, D)} for heads_out of shape {heads.shape}, got {w.shape}")
    rng = np.random.default_rng(9)
    problems = [(heads, w)]
    for shape in (heads.shape, *MERGE_SHAPES):
        D = shape[1] * shape[3]
        problems.append((rng.normal(size=shape), rng.uniform(-1.0, 1.0, size=(D, D))))
    what = "the body: return head i's contribution, shape (B, T, D)"
    for trial, (problem, matrix) in enumerate(problems):
        where = f"heads_out of shape {problem.shape} with a W_o of its own"
        for i in range(problem.shape[1]):
            result = function_answer(question, contribution, (problem.copy(), matrix.copy(), i), what)
            if isinstance(result, Verdict) and trial == 0 and result.answered and "raised" in result.message:
                if _slices_columns(contribution, problem, matrix, i):
                    return failed(question, f"for i = {i}: you sliced a block of COLUMNS of wo, wo[:, ...]: columns, "
                                            "not rows. In the product of the merged row with W_o, feature j of the "
                                            "merged row meets ROW j of W_o, so head i's d_h features meet d_h rows "
                                            "of wo, each with all D columns (that is why the product failed: head "
                                            f"i's features are (B, T, d_h) = {problem[:, i].shape}, and a column "
                                            f"block has D = {matrix.shape[0]} rows)")
                return failed(question, f"for i = {i}: {result.message} (heads_out[:, i] is (B, T, d_h) = "
                                        f"{problem[:, i].shape} and wo is (D, D) = {matrix.shape}; heads are counted "
                                        "from 0, and head i's d_h features meet d_h rows of wo)")
            if isinstance(result, Verdict) and (trial == 0 or not result.answered):
                return result
            answer = result if isinstance(result, Verdict) else array_answer(question, result, "head i's contribution")
            if isinstance(answer, Verdict):
                if trial == 0:
                    return answer
                return failed(question, f"sizes hard-coded? Right for the lesson's heads_out {heads.shape}, but on "
                                        f"{where}: {answer.message}. Read B, h, T, d_h from the arguments")
            expected = _contribution(problem, matrix, i)
            if same(answer, expected):
                continue
            if trial > 0 and problem.shape == heads.shape and same(answer, _contribution(problem, w, i)):
                return failed(question, "your W_o is not the wo given: on a second problem with a W_o of its own, "
                                        "your function used the lesson's wo. Use the argument wo")
            mistake = _contribution_mistake(answer, problem, matrix, i)
            if mistake is None and _ignores_wo(contribution, (problem, matrix, i), 1, answer):
                return failed(question, _IGNORES_WO)
            if trial == 0:
                if mistake is not None:
                    return failed(question, mistake)
                if answer.shape != expected.shape:
                    return failed(question, f"for i = {i}: expected shape (B, T, D) = {expected.shape}, "
                                            f"got {answer.shape}")
                return failed(question, f"for i = {i}: right shape (B, T, D), wrong numbers: not the part of "
                                        "the layer output that comes from head i's features")
            detail = mistake or (f"for i = {i} expected shape {expected.shape}, got {answer.shape}"
                                 if answer.shape != expected.shape else f"for i = {i} right shape, wrong numbers")
            return failed(question, f"sizes hard-coded? Right for the lesson's heads_out {heads.shape}, but not on "
                                    f"{where}: {detail}. Read B, h, T, d_h from the arguments")
    return passed(question, "head i's d_h features meet its own block of d_h rows of W_o; the h contributions "
                            "add up to merge(heads_out) @ wo")


def _time_major(folded: Floats, heads: int) -> Floats:
    """``(B*h, T, d_h)`` with row ``b*h + i`` = head ``i`` of sequence ``b`` -> ``(T, B, D)``."""
    BH, T, d_h = folded.shape
    return folded.transpose(1, 0, 2).reshape(T, BH // heads, heads * d_h)


def _time_major_verdict(question: str, answer: Any, folded: Floats, heads: int) -> Verdict | None:
    """``None`` when ``answer`` is the right merge, else a failed `Verdict` naming the mistake."""
    array = array_answer(question, answer, "the merged array, shape (T, B, D)")
    if isinstance(array, Verdict):
        return array
    BH, T, d_h = folded.shape
    B, h, D = BH // heads, heads, heads * d_h
    expected = _time_major(folded, heads)
    if same(array, expected):
        return None
    by_sequence = folded.reshape(B, h, T, d_h)
    head_major = folded.reshape(h, B, T, d_h).transpose(1, 0, 2, 3)  # the fold read as row i*B + b
    mistake = first_match(array, [
        (lambda: _merge(by_sequence),
         f"batch first, (B, T, D) = {(B, T, D)}: the tokens are right, but the layout asked for is sequence-first, "
         f"(T, B, D) = {(T, B, D)}, as nn.MultiheadAttention returns it by default"),
        (lambda: _merge(head_major).transpose(1, 0, 2),
         "you read the folded axis as head-major (row i*B + b): here row b*h + i is head i of sequence b, so "
         "the h heads of one sequence are neighbours"),
        (lambda: _merge(by_sequence).reshape(T, B, D),
         "you reshaped the batch-first (B, T, D) result to (T, B, D): a reshape keeps the row-major order, so it "
         "relabels the numbers instead of swapping the axes B and T"),
        (lambda: _merge(head_major),
         "you read the folded axis as head-major (row i*B + b), and the result is batch first: row b*h + i is "
         "head i of sequence b, and the layout asked for is (T, B, D)"),
        (lambda: folded.reshape(T, B, D),
         "direct reshape without moving the token axis first: (B*h, T, d_h) straight to (T, B, D) gives the right "
         "shape, but each row then holds several tokens of one head"),
        (lambda: folded.transpose(1, 0, 2),
         f"the token axis is first, (T, B*h, d_h) = {(T, BH, d_h)}, but the heads are not yet glued into rows of "
         "D features: a reshape is missing"),
        (lambda: by_sequence.transpose(2, 0, 3, 1).reshape(T, B, D),
         "the features are interleaved: the head axis ended up after the feature axis before the reshape, so "
         "the heads' features alternate instead of staying in blocks of d_h"),
        (lambda: _merge(by_sequence[:, ::-1]).transpose(1, 0, 2), "the heads are in reverse order"),
        (lambda: _merge(folded.reshape(h, B, T, d_h)).transpose(1, 0, 2),
         "you unfolded the folded axis as (h, B): its rows are b*h + i, so it unfolds as (B, h), sequence first"),
    ])
    if mistake is not None:
        return failed(question, mistake)
    if array.shape == (T, B * D) and B > 1:
        return failed(question, f"shape (T, B*D) = {array.shape}: the sequences are glued together too; keep B as an "
                                "axis of its own, (T, B, D)")
    if array.shape == (T, D, B) and D != B:
        return failed(question, f"shape (T, D, B) = {array.shape}: the last two axes are swapped; the features come "
                                "last, (T, B, D)")
    if array.shape != expected.shape:
        return failed(question, f"expected shape (T, B, D) = {expected.shape}, got {array.shape}")
    return failed(question, "right shape (T, B, D), wrong numbers: not the heads of each token of each sequence "
                            "side by side")


# Extra (B, h, T, d_h) sizes for `check_time_major_merge`: none equal to another, and none the lesson's.
TIME_MAJOR_SHAPES: tuple[tuple[int, int, int, int], ...] = ((3, 2, 5, 1), (1, 4, 3, 2))


def check_time_major_merge(merge: Any, folded: Any, heads: Any) -> Verdict:
    """Question "sequence-first merge": ``merge(folded, heads)`` turns ``folded (B*h, T, d_h)``, whose row
    ``b*h + i`` is head ``i`` of sequence ``b``, into ``(T, B, D)``; tried on the given problem, then on the
    sizes `TIME_MAJOR_SHAPES` (``folded`` made from random ``(B, h, T, d_h)`` arrays)."""
    question = "sequence-first merge"
    given = reference_array("folded", folded, "(B*h, T, d_h)", rank=3)
    if not isinstance(heads, (int, np.integer)) or heads < 1 or given.shape[0] % heads:
        raise ValueError(f"heads must be a positive int dividing folded.shape[0] = {given.shape[0]}, got {heads!r}")
    if merge is not None:
        refused = _refused_merge(question, merge)
        if refused is not None:
            return refused
    rng = np.random.default_rng(11)
    problems = [(given, int(heads))]
    problems += [(rng.normal(size=(b * n, t, w)), n) for b, n, t, w in TIME_MAJOR_SHAPES]
    what = "the body: return the merged array, shape (T, B, D)"
    for trial, (problem, n) in enumerate(problems):
        result = function_answer(question, merge, (problem.copy(), n), what)
        verdict = result if isinstance(result, Verdict) else _time_major_verdict(question, result, problem, n)
        if verdict is None:
            continue
        if trial == 0 or not verdict.answered:
            return verdict
        B, T, d_h = problem.shape[0] // n, problem.shape[1], problem.shape[2]
        return failed(question, f"sizes hard-coded? Right for the lesson's folded {given.shape} with heads="
                                f"{int(heads)}, but not for B={B}, h={n}, T={T}, d_h={d_h} ({verdict.message}). "
                                "Read T and d_h from folded's shape and B = folded.shape[0] // heads")
    BH, T, d_h = given.shape
    return passed(question, f"(T, B, D) = {(T, BH // int(heads), int(heads) * d_h)}: token first, then sequence, "
                            "each row head 0's features, then head 1's")


def check_linear_weight(weight: Any, w_in_out: Any) -> Verdict:
    """Question "nn.Linear weight": what goes into ``nn.Linear.weight`` for the NumPy ``(in, out)`` matrix."""
    question = "nn.Linear weight"
    w = reference_array("w_in_out", w_in_out, "(in_features, out_features)", rank=2)
    answer = array_answer(question, weight, "the tensor for weight, shape (out_features, in_features)")
    if isinstance(answer, Verdict):
        return answer
    expected = w.T
    if same(answer, expected):
        return passed(
            question,
            f"transposed: nn.Linear stores (out_features, in_features) = {expected.shape} and "
            f"computes x @ weight.T, which is x @ w",
        )
    if same(answer, w):
        return failed(
            question,
            "not transposed: you copied the NumPy (in, out) matrix as it is, but nn.Linear stores "
            "(out_features, in_features) and computes x @ weight.T",
        )
    if answer.shape == expected.shape and same(answer, w.reshape(expected.shape)):
        return failed(
            question,
            f"reshaped, not transposed: a reshape to {expected.shape} keeps the numbers in their row-major order, "
            "so row r of the weight is not column r of w_in_out; nn.Linear needs weight.T equal to w_in_out",
        )
    if answer.shape == expected.shape and same(answer, -expected):
        return failed(question, "right shape, but every number has the wrong sign")
    if answer.shape != expected.shape:
        return failed(question, f"expected shape (out_features, in_features) = {expected.shape}, got {answer.shape}")
    return failed(question, "right shape, wrong numbers: not those of w_in_out in nn.Linear's layout")


def check_linear_from_numpy(linear_from_numpy: Any, w_in_out: Any) -> Verdict:
    """Question "nn.Linear from NumPy": ``linear_from_numpy(w_in_out)``, a bias-free layer computing ``x @ w``;
    tried on ``w_in_out`` and on a second matrix of another shape, so the argument must be used."""
    question = "nn.Linear from NumPy"
    w = reference_array("w_in_out", w_in_out, "(in_features, out_features)", rank=2)
    if linear_from_numpy is not None:
        refused = forbidden_call(question, linear_from_numpy, "linear")
        if refused is not None:
            return refused
    other = np.random.default_rng(5).uniform(-1.0, 1.0, size=(w.shape[1] + 1, w.shape[0] + 2))
    first: Verdict | None = None
    for matrix in (w, other):
        verdict = _linear_verdict(question, linear_from_numpy, matrix)
        if first is None:
            first = verdict
            if not verdict:
                return verdict
        elif not verdict and verdict.message.startswith("your function raised"):
            kind = verdict.message.removeprefix("your function raised ").split(":")[0]
            (n_in, n_out), (m_in, m_out) = w.shape, matrix.shape
            return failed(question, f"sizes hard-coded? Right for w_in_out of shape {w.shape}, but on a "
                                    f"{matrix.shape} matrix your function raised {kind}: a layer that fits w_wide, "
                                    f"nn.Linear({n_in}, {n_out}), holds a {(n_out, n_in)} weight, and this matrix "
                                    f"needs nn.Linear({m_in}, {m_out}). Read in_features and out_features from the "
                                    "argument's shape")
        elif not verdict:
            return failed(question, f"right for w_in_out of shape {w.shape}, but not for a {matrix.shape} matrix "
                                    f"({verdict.message}): build the layer from the argument w_in_out, its shape "
                                    "and its numbers, not from the notebook's w_wide")
    assert first is not None
    return first


def _linear_verdict(question: str, linear_from_numpy: Any, w: Floats) -> Verdict:
    layer = function_answer(
        question, linear_from_numpy, (np.array(w),), "the body: return a bias-free nn.Linear computing x @ w_in_out"
    )
    if isinstance(layer, Verdict) and layer.answered and layer.message.startswith("your function raised"):
        if "cannot assign" in layer.message and "Parameter" in layer.message:
            return failed(question, f"{layer.message}: a layer's weight must stay an nn.Parameter; write the numbers "
                                    "into the existing weight in place, or wrap the new tensor in nn.Parameter")
        if "leaf Variable" in layer.message and "in-place" in layer.message:
            return failed(question, f"{layer.message}: autograd refuses to overwrite a trainable weight in place; "
                                    "do the copy inside `with torch.no_grad():`")
        shapes = f"nn.Linear's weight is (out_features, in_features), w_in_out is (in, out) = {w.shape}"
        if "size mismatch" in layer.message or ("must match" in layer.message and "size" in layer.message):
            kind = layer.message.removeprefix("your function raised ").split(":")[0]
            return failed(question, f"your function raised {kind}: the numbers, copied in the shape they have, do "
                                    f"not fit the layer's weight. {shapes}, and nn.Linear({w.shape[0]}, {w.shape[1]}) "
                                    f"holds a {w.shape[::-1]} weight")
        return failed(question, f"{layer.message} ({shapes})")
    if isinstance(layer, Verdict):
        return layer
    try:
        weight, bias = layer.weight, getattr(layer, "bias", None)
    except Exception:  # not a layer (no .weight), or one whose attributes misbehave
        return failed(question, f"expected an nn.Linear layer, got {type(layer).__name__}")
    if bias is not None:
        return failed(question, "the layer has a bias, so it computes x @ w + bias: the lesson's layers have none")
    verdict = replace(check_linear_weight(weight, w), question=question)
    if not verdict:
        return verdict
    dtype = str(getattr(weight, "dtype", "torch.float64"))
    if hasattr(weight, "detach") and dtype != "torch.float64":
        if dtype == "torch.float32":
            return failed(question, "right numbers in the right layout, but nn.Linear's default dtype is float32: "
                                    "pass dtype=torch.float64 to nn.Linear, so that the layer keeps every digit of the "
                                    "NumPy numbers and takes the lesson's float64 inputs (a float32 layer raises on x)")
        return failed(question, f"right numbers in the right layout, but the layer's weight is {dtype}: build it with "
                                "dtype=torch.float64, the dtype of the NumPy numbers and of the lesson's inputs")
    sizes = (getattr(layer, "in_features", None), getattr(layer, "out_features", None))
    if all(isinstance(n, int) for n in sizes) and sizes != w.shape:
        return failed(question, f"the weight is right, but the layer says in_features, out_features = {sizes}, and "
                                f"w_in_out is {w.shape}: build nn.Linear with the sizes of the argument, not a "
                                "layer of other sizes whose weight you replaced")
    return verdict


def _layer(x: Floats, w: list[Floats], heads: int, direct_split: bool | str = False, scale: float | None = None,
           direct_merge: bool = False, axis: int = -1, after: float = 1.0, project: bool = True,
           keys_swapped: bool = True, interleaved: str = "") -> Floats:
    """Self-attention ``x (B, T, D) -> (B, T, D)`` with weights ``[wq, wk, wv, wo]``, right or with known bugs.

    ``direct_split``: True for the direct-reshape split of q, k and v, or the letters of those split so
    (``"v"``: only v). ``interleaved``: the letters of those split as ``(B, T, d_h, h)``, so that head
    ``i`` gets every h-th feature."""
    B, T, D = x.shape
    d_h = D // heads
    direct = "qkv" if direct_split is True else direct_split or ""

    def split(y: Floats, name: str) -> Floats:  # (B, T, D) -> (B, h, T, d_h)
        if name in direct:
            return y.reshape(B, heads, T, d_h)
        if name in interleaved:  # head i gets features i, i + h, i + 2h, ...
            return y.reshape(B, T, d_h, heads).transpose(0, 3, 1, 2)
        return y.reshape(B, T, heads, d_h).transpose(0, 2, 1, 3)

    q, k, v = split(x @ w[0], "q"), split(x @ w[1], "k"), split(x @ w[2], "v")
    keys = k.transpose(0, 1, 3, 2) if keys_swapped else k  # (B, h, d_h, T)
    scores = q @ keys * (1.0 / np.sqrt(d_h) if scale is None else scale)  # (B, h, T, T)
    exps = np.exp(scores - scores.max(axis=axis, keepdims=True))
    heads_out = exps / exps.sum(axis=axis, keepdims=True) * after @ v  # (B, h, T, d_h)
    merged = heads_out.reshape(B, T, D) if direct_merge else _merge(heads_out)
    result: Floats = merged @ w[3] if project else merged
    return result


# Extra (B, T, D, heads) problems for the fixed layer: sizes the lesson does not use (its x is
# (2, 4, 8) with 2 heads), each with its own input and weights, so that a function must compute
# from its arguments. Before them comes one problem of the given sizes with a new input and new
# weights, which tells a function that ignores its weights (the notebook's layer) from one that
# hard-codes a size.
FIXED_FORWARD_SIZES: tuple[tuple[int, int, int, int], ...] = ((1, 5, 12, 3), (3, 3, 8, 4))


def _across_heads(x: Floats, w: list[Floats], heads: int, scale: float | None = None, merge: str = "reshape") -> Floats:
    """The split reshaped to ``(B, T, h, d_h)`` and never transposed: attention runs over the h heads of
    each token, ``(B, T, h, h)`` scores. ``merge``: ``"reshape"`` back to ``(B, T, D)``, or ``"transpose"``
    (axes 1 and 2 swapped first, as ``merge_heads`` does; it fits ``(B, T, D)`` only when ``T == h``, or
    with the sizes written in by hand)."""
    B, T, D = x.shape
    q, k, v = ((x @ m).reshape(B, T, heads, D // heads) for m in w[:3])
    scores = q @ k.swapaxes(-1, -2) * (1.0 / np.sqrt(D // heads) if scale is None else scale)  # (B, T, h, h)
    exps = np.exp(scores - scores.max(axis=-1, keepdims=True))
    out = exps / exps.sum(axis=-1, keepdims=True) @ v  # (B, T, h, d_h)
    merged = out.reshape(B, T, D) if merge == "reshape" else out.swapaxes(1, 2).reshape(B, T, D)
    result: Floats = merged @ w[3]
    return result


_ACROSS_HEADS = ("the split reshapes to (B, T, h, d_h) but never moves the head axis in front of the tokens, so "
                 "the scores q @ k^T are (B, T, h, h): attention runs across the h heads of each token, not across "
                 "the T tokens; after the reshape, transpose to (B, h, T, d_h)")


def _across_heads_probe(forward: Any, xs: Floats, w: list[Floats], h: int) -> str | None:
    """When the learner's forward raised: whether it is the split without the transpose followed by the
    body's ``merge_heads`` (which raises unless ``T == h``), tried on an input with ``T == h``."""
    B, T, D = xs.shape
    if T == h:
        return None
    probe = np.random.default_rng(11).normal(size=(B, h, D))
    try:
        result = forward(probe.copy(), *(m.copy() for m in w), h)
    except Exception:  # the learner's code may raise anything: then it is not this mistake
        return None
    for scale in (None, 1.0):
        if same(_float_answer(result), _across_heads(probe, w, h, scale, merge="transpose")):
            unscaled = "" if scale is None else "; and the scores go into the softmax unscaled (lesson 01)"
            return (f"{_ACROSS_HEADS}. That is why merge_heads, which expects (B, h, T, d_h), got the tokens where the "
                    f"heads belong and the product with W_o raised{unscaled}")
    return None


def _float_answer(result: Any) -> Any:
    answer = array_answer("", result, "")
    return None if isinstance(answer, Verdict) else answer


def _fixed_forward_problems(x: Floats, w: list[Floats], heads: int) -> list[tuple[Floats, list[Floats], int]]:
    rng = np.random.default_rng(8)
    problems = [(x, w, heads)]
    for B, T, D, h in ((*x.shape, heads), *FIXED_FORWARD_SIZES):
        bound = 1.0 / np.sqrt(D)
        weights = [rng.uniform(-bound, bound, size=(D, D)) for _ in range(4)]
        problems.append((rng.normal(size=(B, T, D)), weights, h))
    return problems


def _forward_mistake(answer: Floats, xs: Floats, w: list[Floats], h: int) -> str | None:
    """The known mistake ``answer`` equals for one problem, or ``None``."""
    D = xs.shape[-1]
    d_h = D // h
    split_bug = "the split reshapes (B, T, D) straight to (B, h, T, d_h), so each head gets rows of several tokens"
    scale_bug = "the scores go into the softmax unscaled (lesson 01)"
    return first_match(answer, [
        (lambda: _layer(xs, w, h, direct_split=True, scale=1.0), f"both bugs remain: {split_bug}, and {scale_bug}"),
        (lambda: _layer(xs, w, h, scale=1.0), f"the split is fixed; one bug remains: {scale_bug}"),
        (lambda: _layer(xs, w, h, direct_split=True), f"the scale is fixed; one bug remains: {split_bug}"),
        *[(lambda scale=scale: _layer(xs, w, h, scale=scale, interleaved="qkv"),
           f"the features are interleaved: reshaping to (B, T, d_h, h) before moving the head axis gives head i "
           f"the features i, i + h, i + 2h, ... instead of its block of d_h neighbours, features i*d_h to "
           f"(i+1)*d_h - 1; reshape to (B, T, h, d_h), then transpose{'' if scale is None else '; and ' + scale_bug}")
          for scale in (None, 1.0)],
        *[(lambda letters=letters, scale=scale: _layer(xs, w, h, direct_split=letters, scale=scale),
           _split_of(letters) + ("" if scale is None else f"; and {scale_bug}"))
          for letters in ("v", "q", "k", "qk", "qv", "kv") for scale in (None, 1.0)],
        *[(lambda scale=scale, merge=merge: _across_heads(xs, w, h, scale, merge),
           _ACROSS_HEADS + ("" if scale is None else f"; and {scale_bug}"))
          for scale in (None, 1.0) for merge in ("reshape", "transpose")],
        (lambda: _layer(xs, w, h, scale=1.0 / d_h), f"the scores are divided by d_h = {d_h}: too much (lesson 01)"),
        (lambda: _layer(xs, w, h, scale=1.0 / np.sqrt(D)),
         f"the scores are divided by sqrt(D) = sqrt({D}): each head's dot products have d_h = {d_h} terms, not D"),
        (lambda: _layer(xs, w, h, axis=-2),
         "the split and the scale are right, but the softmax runs over axis -2, the query axis, so each key's "
         "column sums to 1; each query's weights must sum to 1 over the keys: axis=-1 (lesson 01)"),
        (lambda: _layer(xs, w, h, scale=1.0, after=1.0 / np.sqrt(d_h)),
         "the split is fixed, but you applied the scale to the weights, after the softmax: it belongs on the "
         "scores, before the softmax (lesson 01); the weights must still sum to 1"),
        (lambda: _layer(xs, w, h, scale=np.sqrt(d_h)),
         "the split is fixed, but the scores are multiplied by the scale factor instead of divided by it (lesson 01)"),
        (lambda: _layer(xs, w, h, project=False),
         "the split and the scale are right, but W_o is missing: the merged heads still need the output projection"),
        (lambda: _layer(xs, w, h, keys_swapped=False),
         "the scores multiply q by k itself, not by k with its last two axes swapped: it runs only because T = d_h "
         "here, and each score is not a query-key dot product"),
        (lambda: _layer(xs, [w[0], w[0], w[2], w[3]], h), "k is projected with wq: the keys need wk"),
        (lambda: _layer(xs, [w[0], w[1], w[1], w[3]], h), "v is projected with wk: the values need wv"),
        (lambda: _layer(xs, [w[0], w[1], w[0], w[3]], h), "v is projected with wq: the values need wv"),
        (lambda: _layer(xs, [w[0], w[1], w[2], w[3].T], h),
         "W_o is transposed: NumPy weights are (in, out) and multiply from the right"),
        (lambda: _layer(xs, w, h, direct_merge=True),
         "the split and the scale are right, but the merge is now a direct reshape (B, h, T, d_h) -> (B, T, D)"),
    ])


def _split_of(letters: str) -> str:
    """What a partly fixed split looks like: ``"v"`` -> v still split by a direct reshape."""
    still = " and ".join(letters)
    fixed = " and ".join(name for name in "qkv" if name not in letters)
    verb = "is" if len(letters) == 1 else "are"
    return (f"{fixed} {'is' if len(fixed) == 1 else 'are'} split right, but {still} {verb} still split by a direct "
            f"reshape (B, T, D) -> (B, h, T, d_h), which gives each head rows of several tokens: fix every split")


# What Your turn 4 refuses: the library's helpers that do the repair (the split and the scaled
# attention), their private twins, and the finished layer. The body's softmax and merge_heads stay.
FIXED_FORWARD_REFUSED = ("split_heads", "_split_heads", "attention", "_attention", "MultiHead")
_FIXED_FORWARD_WHY = ("which does for you steps this exercise asks you to repair: mend the body of "
                      "one_function_forward itself, with NumPy operations (its mha_numpy.softmax and merge_heads "
                      "may stay)")


def check_fixed_forward(forward: Any, x: Any, wq: Any, wk: Any, wv: Any, wo: Any, heads: Any) -> Verdict:
    """Question "fixed layer": ``forward(x, wq, wk, wv, wo, heads)`` for ``x (B, T, D)``, weights (D, D).

    Tried on the given problem, then on `FIXED_FORWARD_SIZES` with inputs and weights of their own; a
    call of the library's layer (``MultiHead``, NumPy or torch) is refused before running.
    """
    question = "fixed layer"
    xs = reference_array("x", x, "(B, T, D)", rank=3)
    w = [reference_array(name, m, "(D, D)", rank=2) for name, m in (("wq", wq), ("wk", wk), ("wv", wv), ("wo", wo))]
    D = xs.shape[-1]
    if any(m.shape != (D, D) for m in w) or not isinstance(heads, (int, np.integer)) or heads < 1 or D % heads:
        raise ValueError(f"the weights must be (D, D) = {(D, D)} and heads must divide D = {D}")
    if forward is not None:
        refused = forbidden_call(question, forward, *FIXED_FORWARD_REFUSED, why=_FIXED_FORWARD_WHY)
        if refused is not None:
            return refused
    first_answer: Floats | None = None
    for trial, (px, pw, ph) in enumerate(_fixed_forward_problems(xs, w, int(heads))):
        verdict = _forward_verdict(question, forward, px, pw, ph)
        where = f"x of shape {px.shape} with heads={ph} and weights of its own"
        if isinstance(verdict, Verdict):
            if trial == 0 or not verdict.answered:
                return verdict
            return failed(question, f"sizes hard-coded? Right for the lesson's x {xs.shape} with heads={int(heads)}, "
                                    f"but on {where}: {verdict.message}. Read every size from the arguments")
        if trial == 0:
            if not same(verdict, _layer(px, pw, ph)):
                if verdict.shape != px.shape:
                    return failed(question, f"expected shape (B, T, D) = {px.shape}, got {verdict.shape}")
                if _ignores_wo(forward, (px, *pw, ph), 4, verdict):
                    return failed(question, _IGNORES_WO)
                return failed(question, "right shape (B, T, D), wrong numbers: not the layer's output")
            first_answer = verdict
            continue
        if same(verdict, _layer(px, pw, ph)):
            continue
        pB, pT, pD = px.shape
        if first_answer is not None and same(verdict, first_answer):
            return failed(question, f"your function returns the same output whatever it is given (tried on {where}): "
                                    "it must compute from its arguments x, wq, wk, wv, wo and heads, not from the "
                                    "notebook's x, numpy_layer or layer_weights")
        if px.shape[-1] == D and same(verdict, _layer(px, w, ph)):
            return failed(question, f"on {where} your function computed with the weights of the lesson's problem, "
                                    "not with the weights it was given (the notebook's numpy_layer or "
                                    "layer_weights?): use the arguments wq, wk, wv and wo")
        if _ignores_wo(forward, (px, *pw, ph), 4, verdict):
            return failed(question, _IGNORES_WO)
        other_heads = [n for n in range(1, pD + 1) if pD % n == 0 and n != ph]
        wrong_heads = next((n for n in other_heads if same(verdict, _layer(px, pw, n))), None)
        if wrong_heads is not None:
            return failed(question, f"on {where} your layer used {wrong_heads} heads: read the head count from the "
                                    "argument `heads` (and d_h = D // heads), not from the notebook's h")
        mistake = _forward_mistake(verdict, px, pw, ph)
        detail = mistake or (f"expected shape (B, T, D) = {(pB, pT, pD)}, got {verdict.shape}"
                             if verdict.shape != (pB, pT, pD) else "right shape, wrong numbers")
        return failed(question, f"sizes hard-coded? Right for the lesson's x {xs.shape} with heads={int(heads)}, "
                                f"but not on {where}: {detail}. Read every size from the arguments")
    return passed(question, "both bugs fixed: the split transposes to (B, h, T, d_h) and the scores are scaled")


def _forward_verdict(question: str, forward: Any, xs: Floats, w: list[Floats], h: int) -> Floats | Verdict:
    """The learner's output for one problem, or a failed `Verdict` when there is none to compare or it
    equals a known mistake; an output that is wrong in another way is returned for the caller to diagnose."""
    args = (xs.copy(), *(m.copy() for m in w), h)
    result = function_answer(question, forward, args, "the body: return the layer output, shape (B, T, D)")
    if isinstance(result, Verdict) and result.answered and "raised" in result.message and "matmul" in result.message:
        across = _across_heads_probe(forward, xs, w, h)
        if across is not None:
            return failed(question, f"{result.message.split(':')[0]}: {across}")
        return failed(question, f"{result.message} (is there a `.T` on a 4-D array? It reverses all four axes; "
                                "the scores need only the last two axes of k swapped)")
    if isinstance(result, Verdict):
        return result
    if isinstance(result, tuple):
        return failed(question, f"your function returned a tuple of {len(result)}; return the output (B, T, D) only")
    answer = array_answer(question, result, "the layer output")
    if isinstance(answer, Verdict):
        return answer
    if same(answer, _layer(xs, w, h)):
        return answer
    mistake = _forward_mistake(answer, xs, w, h)
    if mistake is not None:
        return failed(question, mistake)
    return answer
