"""Typical mistakes in lesson 02 (Splitting into heads) and the diagnosis each must get.

The exercises' inputs are rebuilt as the notebook builds them (the Quick check of lesson 02 needs
only the torch tensor ``out_t`` of section 7, whose dtype is float64); the wrong answers are those a
learner is likely to hand in, including the ones issue 19 lists (a ``d_h`` hard-coded to 4, a float
for the head width, a NumPy array returned for a tensor, a call of the library's function) and those
of issue 27 (a call of a private helper, ``.reshape`` followed by a ``.view`` that does nothing, ``.T``
on a 4-D array, sizes computed with ``/``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from mistake_table import Mistake, RightAnswer, assert_accepted, assert_diagnosed, row_id

from lessons_lib import mha_numpy
from lessons_lib.checks import splitting_into_heads as checks

OUT_T = torch.zeros(1, dtype=torch.float64)  # like section 7's out_t: the checker reads its dtype


def split_right(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.reshape(B, T, heads, D // heads).transpose(0, 2, 1, 3)


def merge_right(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(0, 2, 1, 3).reshape(B, T, h * d_h)


def view_right(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(1, 2).contiguous().view(B, T, h * d_h)


# ----- wrong splits ------------------------------------------------------------------------------
def split_direct(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.reshape(B, heads, T, D // heads)


def split_no_transpose(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.reshape(B, T, heads, D // heads)


def split_interleaved(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.reshape(B, T, D // heads, heads).transpose(0, 3, 1, 2)


def split_features_before_tokens(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.reshape(B, T, heads, D // heads).transpose(0, 2, 3, 1)


def split_heads_first(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.reshape(B, T, heads, D // heads).transpose(2, 0, 1, 3)


def split_d_h_4(x: Any, heads: int) -> Any:
    B, T, _D = x.shape
    return x.reshape(B, T, heads, 4).transpose(0, 2, 1, 3)  # the lesson's d_h


def split_h_2(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.reshape(B, T, 2, D // 2).transpose(0, 2, 1, 3)  # the lesson's h


def split_t_4(x: Any, heads: int) -> Any:
    B, _T, D = x.shape
    return x.reshape(B, 4, heads, D // heads).transpose(0, 2, 1, 3)  # the lesson's T


def split_library(x: Any, heads: int) -> Any:
    return mha_numpy.split_heads(x, heads)


def split_to_torch(x: Any, heads: int) -> Any:
    return torch.from_numpy(split_right(x, heads).copy())


def split_float32(x: Any, heads: int) -> Any:
    return split_right(x.astype(np.float32), heads)


# ----- wrong merges ------------------------------------------------------------------------------
def merge_direct(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.reshape(B, T, h * d_h)


def merge_interleaved(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(0, 2, 3, 1).reshape(B, T, h * d_h)


def merge_no_reshape(heads_out: Any) -> Any:
    return heads_out.transpose(0, 2, 1, 3)


def merge_average(heads_out: Any) -> Any:
    return heads_out.mean(axis=1)


def merge_concatenate_array(heads_out: Any) -> Any:
    return np.concatenate(heads_out, axis=-1)


def merge_d_h_4(heads_out: Any) -> Any:
    B, h, T, _d_h = heads_out.shape
    return heads_out.transpose(0, 2, 1, 3).reshape(B, T, h * 4)


def merge_d_8(heads_out: Any) -> Any:
    B, _h, T, _d_h = heads_out.shape
    return heads_out.transpose(0, 2, 1, 3).reshape(B, T, 8)  # the lesson's D


def merge_library(heads_out: Any) -> Any:
    return mha_numpy.merge_heads(heads_out)


# ----- wrong view merges -------------------------------------------------------------------------
def view_direct(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.view(B, T, h * d_h)


def view_of_transposed(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(1, 2).view(B, T, h * d_h)


def view_with_reshape(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(1, 2).reshape(B, T, h * d_h)


def view_to_numpy(heads_out: Any) -> Any:
    return view_right(heads_out).numpy()


def view_float32(heads_out: Any) -> Any:
    return view_right(heads_out).float()


def view_library(heads_out: Any) -> Any:
    from lessons_lib import mha_torch

    return mha_torch.merge_heads(heads_out)


def view_average(heads_out: Any) -> Any:
    return heads_out.mean(dim=1)


def split_T_4d(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.reshape(B, T, heads, D // heads).T  # .T reverses all four axes


def split_folded(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.reshape(B, T, heads, D // heads).transpose(0, 2, 1, 3).reshape(B * heads, T, D // heads)


def split_float_width(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.reshape(B, T, heads, D / heads).transpose(0, 2, 1, 3)  # D / heads is a float


def split_tokens_by_np_split(x: Any, heads: int) -> Any:
    return np.stack(np.split(x, heads, axis=1), axis=1)  # cuts the token axis


def split_list(x: Any, heads: int) -> Any:
    d_h = x.shape[-1] // heads
    return [x[..., i * d_h:(i + 1) * d_h] for i in range(heads)]


def split_private(x: Any, heads: int) -> Any:
    return mha_numpy._split_heads(x, heads)


def split_transpose_first(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.transpose(0, 2, 1).reshape(B, heads, T, D // heads)


def merge_T_4d(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.T.reshape(B, T, h * d_h)


def merge_summed(heads_out: Any) -> Any:
    return heads_out.sum(axis=1)


def merge_along_tokens(heads_out: Any) -> Any:
    return np.concatenate([heads_out[:, i] for i in range(heads_out.shape[1])], axis=1)


def merge_stacked_last(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return np.stack([heads_out[:, i] for i in range(h)], axis=-1).reshape(B, T, h * d_h)


def merge_private(heads_out: Any) -> Any:
    return mha_numpy._merge_heads(heads_out)


def merge_to_torch(heads_out: Any) -> Any:
    return torch.from_numpy(merge_right(heads_out))


def view_reshape_then_view(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(1, 2).reshape(B, T, h * d_h).view(B, T, h * d_h)


def view_flatten(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(1, 2).flatten(2).view(B, T, h * d_h)


def view_concatenated(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return torch.cat(heads_out.unbind(1), dim=-1).view(B, T, h * d_h)


def view_stacked_copy(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return torch.stack(heads_out.transpose(1, 2).unbind(1), dim=1).view(B, T, h * d_h)


def view_contiguous_too_early(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.contiguous().transpose(1, 2).view(B, T, h * d_h)


def view_permute(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.permute(0, 2, 1, 3).view(B, T, h * d_h)


def view_d_8(heads_out: Any) -> Any:
    B, _h, T, _d_h = heads_out.shape
    return heads_out.transpose(1, 2).contiguous().view(B, T, 8)  # the lesson's D


def split_two_axis_transpose(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.reshape(B, T, heads, D // heads).transpose(1, 2)  # PyTorch's form, on a NumPy array


def split_numpy_view(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads)  # NumPy's .view takes a dtype


def split_permute(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.reshape(B, T, heads, D // heads).permute(0, 2, 1, 3)  # no .permute in NumPy


def split_batch_token_swapped(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return x.reshape(B, T, heads, D // heads).swapaxes(0, 1)


def merge_two_axis_transpose(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(1, 2).reshape(B, T, h * d_h)


def merge_tokens_before_batch(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(2, 0, 1, 3).reshape(B, T, h * d_h)


def merge_head_0_only(heads_out: Any) -> Any:
    return heads_out[:, 0]


def view_numpy_style_transpose(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(0, 2, 1, 3).contiguous().view(B, T, h * d_h)


def merge_tokens_features_swapped(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(0, 1, 3, 2).reshape(B, T, h * d_h)


def merge_h_times_t_rows(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(0, 2, 1, 3).reshape(B, h * T, d_h)


def merge_batch_last(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return np.moveaxis(heads_out, 0, -1).reshape(B, T, h * d_h)


def view_plain_clone(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(1, 2).clone().view(B, T, h * d_h)  # clone keeps the transposed strides


def view_transpose_2_3(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(2, 3).contiguous().view(B, T, h * d_h)


def view_transpose_1_3(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(1, 3).contiguous().view(B, T, h * d_h)


MISTAKES: list[Mistake] = [
    # Your turn 1: the head width, an int
    Mistake("02 YT1 head width", "2048 / 16, a float", lambda: checks.check_head_width(2048 / 16), "is a float"),
    Mistake("02 YT1 head width", "np.float64(128.0)", lambda: checks.check_head_width(np.float64(128.0)), "is a float"),
    Mistake("02 YT1 head width", "D times h", lambda: checks.check_head_width(2048 * 16), "multiplied D by h"),
    Mistake("02 YT1 head width", "h over D", lambda: checks.check_head_width(16 / 2048), "divided h by D"),
    Mistake("02 YT1 head width", "D itself", lambda: checks.check_head_width(2048), "is D, the width of all heads"),
    Mistake("02 YT1 head width", "h itself", lambda: checks.check_head_width(16), "is h, the number of heads"),
    Mistake("02 YT1 head width", "D % h, the remainder", lambda: checks.check_head_width(2048 % 16), "the remainder"),
    Mistake("02 YT1 head width", "h // D, rounded down to 0", lambda: checks.check_head_width(16 // 2048),
            "h // D gives"),
    Mistake("02 YT1 head width", "the notebook's D // h (8 // 2)", lambda: checks.check_head_width(8 // 2),
            "the notebook's D and h"),
    Mistake("02 YT1 head width", "D - h", lambda: checks.check_head_width(2048 - 16), "subtracted h from D"),
    Mistake("02 YT1 head width", "the number as text", lambda: checks.check_head_width("128"), "got str '128'"),
    Mistake("02 YT1 head width", "a boolean", lambda: checks.check_head_width(True), "got the boolean"),
    Mistake("02 YT1 head width", "2048 // 8: divided by the wrong number (blind trial)",
            lambda: checks.check_head_width(2048 // 8),
            "divided by the wrong number. There are h = 16 heads here (not 8)"),
    Mistake("02 YT1 head width", "2048 // 32", lambda: checks.check_head_width(64), "divided by the wrong number"),
    Mistake("02 YT1 head width", "the lesson's h = 2", lambda: checks.check_head_width(2048 // 2),
            "divided by the wrong number"),
    Mistake("02 YT1 head width", "another number", lambda: checks.check_head_width(100), "equal share", named=False),
    # Your turn 2: split
    Mistake("02 YT2 split", "one reshape straight to (B, h, T, d_h)", lambda: checks.check_split(split_direct),
            "direct reshape"),
    Mistake("02 YT2 split", "the transpose missing", lambda: checks.check_split(split_no_transpose),
            "missing transpose"),
    Mistake("02 YT2 split", "features cut as (d_h, h)", lambda: checks.check_split(split_interleaved),
            "interleaved features"),
    Mistake("02 YT2 split", "features moved before the tokens",
            lambda: checks.check_split(split_features_before_tokens), "(B, h, d_h, T)"),
    Mistake("02 YT2 split", "the head axis moved before the batch", lambda: checks.check_split(split_heads_first),
            "(h, B, T, d_h)"),
    Mistake("02 YT2 split", ".T on the 4-D array", lambda: checks.check_split(split_T_4d), "reverses ALL the axes"),
    Mistake("02 YT2 split", "tokens and features swapped before the reshape",
            lambda: checks.check_split(split_transpose_first), "swapped the token and feature axes"),
    Mistake("02 YT2 split", "heads folded into the batch (B*h, T, d_h)", lambda: checks.check_split(split_folded),
            "folded the heads into the batch"),
    Mistake("02 YT2 split", "d_h = D / heads, a float", lambda: checks.check_split(split_float_width),
            "compute d_h with //"),
    Mistake("02 YT2 split", "np.split along the token axis", lambda: checks.check_split(split_tokens_by_np_split),
            "np.split cut an axis"),
    Mistake("02 YT2 split", "a list of h arrays returned", lambda: checks.check_split(split_list),
            "must return a NumPy array, got list"),
    Mistake("02 YT2 split", "transpose(1, 2) on a NumPy array (PyTorch's form)",
            lambda: checks.check_split(split_two_axis_transpose), "takes the new order of ALL the axes"),
    Mistake("02 YT2 split", "NumPy .view(shape)", lambda: checks.check_split(split_numpy_view),
            "NumPy's .view reinterprets"),
    Mistake("02 YT2 split", ".permute on a NumPy array", lambda: checks.check_split(split_permute),
            "That is a PyTorch method"),
    Mistake("02 YT2 split", "batch and token axes swapped", lambda: checks.check_split(split_batch_token_swapped),
            "the axes are in another order"),
    Mistake("02 YT2 split", "d_h hard-coded to 4 (issue 19)", lambda: checks.check_split(split_d_h_4),
            "sizes hard-coded"),
    Mistake("02 YT2 split", "h hard-coded to 2", lambda: checks.check_split(split_h_2), "sizes hard-coded"),
    Mistake("02 YT2 split", "T hard-coded to the lesson's 4", lambda: checks.check_split(split_t_4),
            "copied from the notebook"),
    Mistake("02 YT2 split", "a call of split_heads", lambda: checks.check_split(split_library),
            "calls the library's split_heads"),
    Mistake("02 YT2 split", "a call of the private mha_numpy._split_heads", lambda: checks.check_split(split_private),
            "calls the library's _split_heads"),
    Mistake("02 YT2 split", "a torch tensor returned for a NumPy array", lambda: checks.check_split(split_to_torch),
            "must return a NumPy array"),
    Mistake("02 YT2 split", "float32 returned for float64", lambda: checks.check_split(split_float32),
            "returned float32"),
    # Your turn 3: merge
    Mistake("02 YT3 merge", "one reshape straight to (B, T, D)", lambda: checks.check_merge(merge_direct),
            "direct reshape"),
    Mistake("02 YT3 merge", "head axis moved last", lambda: checks.check_merge(merge_interleaved),
            "interleaved features"),
    Mistake("02 YT3 merge", "heads stacked on a new last axis", lambda: checks.check_merge(merge_stacked_last),
            "interleaved features"),
    Mistake("02 YT3 merge", "the reshape missing", lambda: checks.check_merge(merge_no_reshape), "missing reshape"),
    Mistake("02 YT3 merge", ".T before the reshape", lambda: checks.check_merge(merge_T_4d), "reverses ALL the axes"),
    Mistake("02 YT3 merge", "heads averaged", lambda: checks.check_merge(merge_average), "you averaged the heads"),
    Mistake("02 YT3 merge", "heads summed", lambda: checks.check_merge(merge_summed), "you summed the heads"),
    Mistake("02 YT3 merge", "heads concatenated along the tokens", lambda: checks.check_merge(merge_along_tokens),
            "along the token axis"),
    Mistake("02 YT3 merge", "np.concatenate(heads_out, axis=-1)", lambda: checks.check_merge(merge_concatenate_array),
            "walks its first axis, the batch"),
    Mistake("02 YT3 merge", "transpose(1, 2) on a NumPy array (PyTorch's form)",
            lambda: checks.check_merge(merge_two_axis_transpose), "takes the new order of ALL the axes"),
    Mistake("02 YT3 merge", "tokens moved before the batch", lambda: checks.check_merge(merge_tokens_before_batch),
            "you put the axes in the order (T, B, h, d_h)"),
    Mistake("02 YT3 merge", "token and feature axes swapped (transpose(0, 1, 3, 2)) (blind trial)",
            lambda: checks.check_merge(merge_tokens_features_swapped), "swapped the token and feature axes"),
    Mistake("02 YT3 merge", "transpose then reshape to (B, h*T, d_h) (blind trial)",
            lambda: checks.check_merge(merge_h_times_t_rows), "(B, h*T, d_h): h*T rows of d_h features"),
    Mistake("02 YT3 merge", "head axis moved last, then reshaped (transpose(0, 2, 3, 1)) by moveaxis",
            lambda: checks.check_merge(merge_batch_last), "you put the axes in the order (h, T, d_h, B)"),
    Mistake("02 YT3 merge", "only head 0 kept", lambda: checks.check_merge(merge_head_0_only),
            "one head's width per token"),
    Mistake("02 YT3 merge", "d_h hard-coded to 4 (issue 19)", lambda: checks.check_merge(merge_d_h_4),
            "sizes hard-coded"),
    Mistake("02 YT3 merge", "D hard-coded to the lesson's 8", lambda: checks.check_merge(merge_d_8),
            "sizes hard-coded"),
    Mistake("02 YT3 merge", "a call of merge_heads", lambda: checks.check_merge(merge_library),
            "calls the library's merge_heads"),
    Mistake("02 YT3 merge", "a call of the private mha_numpy._merge_heads", lambda: checks.check_merge(merge_private),
            "calls the library's _merge_heads"),
    Mistake("02 YT3 merge", "a torch tensor returned for a NumPy array", lambda: checks.check_merge(merge_to_torch),
            "must return a NumPy array"),
    # Your turn 4: what head 2 of a 12-wide, 3-head layer reads
    Mistake("02 YT4 head reads", "head 2 reads only its own slice of the input",
            lambda: checks.check_head_reads(range(8, 12), range(8, 12)), "does not read only its own slice"),
    Mistake("02 YT4 head reads", "the first slice of the features",
            lambda: checks.check_head_reads(range(4), range(8, 12)), "a head does not read a slice of the input"),
    Mistake("02 YT4 head reads", "features counted from 1",
            lambda: checks.check_head_reads(range(1, 13), range(8, 12)), "counted from 1"),
    Mistake("02 YT4 head reads", "interleaved columns",
            lambda: checks.check_head_reads(range(12), range(2, 12, 3)), "interleaved columns"),
    Mistake("02 YT4 head reads", "head 1's columns (counting heads from 1)",
            lambda: checks.check_head_reads(range(12), range(4, 8)), "block of head 1"),
    Mistake("02 YT4 head reads", "the lesson's head 1 block, columns 4..7 of D = 8",
            lambda: checks.check_head_reads(range(8), range(4, 8)), "block of head 1"),
    Mistake("02 YT4 head reads", "columns counted from 1",
            lambda: checks.check_head_reads(range(12), range(9, 13)), "the right block, counted from 1"),
    Mistake("02 YT4 head reads", "a column past the end",
            lambda: checks.check_head_reads(range(12), range(8, 13)), "12 is past the end"),
    Mistake("02 YT4 head reads", "every column", lambda: checks.check_head_reads(range(12), range(12)),
            "all 12 columns together"),
    Mistake("02 YT4 head reads", "whole-number floats for indices",
            lambda: checks.check_head_reads(np.arange(12.0), range(8, 12)), "integer indices"),
    Mistake("02 YT4 head reads", "a few features",
            lambda: checks.check_head_reads([0, 4], range(8, 12)), "input_features: got", named=False),
    # Your turn 5: merge with .view
    Mistake("02 YT5 view merge", ".view without the transpose", lambda: checks.check_view_merge(view_direct, OUT_T),
            "in a direct .view. The shape is right but the numbers are not: in row-major index order"),
    Mistake("02 YT5 view merge", ".clone() in place of .contiguous() (blind trial)",
            lambda: checks.check_view_merge(view_plain_clone, OUT_T), ".clone() copies the numbers but keeps their "
            "memory layout too"),
    Mistake("02 YT5 view merge", "transpose(2, 3): T and d_h swapped instead of h and T (blind trial)",
            lambda: checks.check_view_merge(view_transpose_2_3, OUT_T), "swapped the token and feature axes"),
    Mistake("02 YT5 view merge", "transpose(1, 3) then a copy and .view",
            lambda: checks.check_view_merge(view_transpose_1_3, OUT_T), "you put the axes in the order (B, d_h, T, h)"),
    Mistake("02 YT5 view merge", ".view of the transposed tensor",
            lambda: checks.check_view_merge(view_of_transposed, OUT_T), ".view refused the transposed tensor"),
    Mistake("02 YT5 view merge", ".view of the permuted tensor",
            lambda: checks.check_view_merge(view_permute, OUT_T), ".view refused the transposed tensor"),
    Mistake("02 YT5 view merge", ".contiguous() before the transpose",
            lambda: checks.check_view_merge(view_contiguous_too_early, OUT_T), ".view refused the transposed tensor"),
    Mistake("02 YT5 view merge", "NumPy's transpose(0, 2, 1, 3) on a tensor",
            lambda: checks.check_view_merge(view_numpy_style_transpose, OUT_T), "a full axis order is .permute"),
    Mistake("02 YT5 view merge", ".reshape instead of .view", lambda: checks.check_view_merge(view_with_reshape, OUT_T),
            "your code calls .reshape"),
    Mistake("02 YT5 view merge", ".reshape then a .view that does nothing (review P14)",
            lambda: checks.check_view_merge(view_reshape_then_view, OUT_T), "your code calls .reshape"),
    Mistake("02 YT5 view merge", ".flatten then .view", lambda: checks.check_view_merge(view_flatten, OUT_T),
            "your code calls .flatten"),
    Mistake("02 YT5 view merge", "torch.cat of the heads, then .view",
            lambda: checks.check_view_merge(view_concatenated, OUT_T), "never swaps the token and head axes"),
    Mistake("02 YT5 view merge", "a copy by torch.stack instead of .contiguous()",
            lambda: checks.check_view_merge(view_stacked_copy, OUT_T), "no copy into the new order"),
    Mistake("02 YT5 view merge", "D hard-coded to the lesson's 8", lambda: checks.check_view_merge(view_d_8, OUT_T),
            "sizes hard-coded"),
    Mistake("02 YT5 view merge", "a NumPy array returned for a tensor (issue 19)",
            lambda: checks.check_view_merge(view_to_numpy, OUT_T), "must return a torch tensor, got NumPy array"),
    Mistake("02 YT5 view merge", "float32 returned for float64 (issue 19)",
            lambda: checks.check_view_merge(view_float32, OUT_T), "returned torch.float32"),
    Mistake("02 YT5 view merge", "a call of mha_torch.merge_heads",
            lambda: checks.check_view_merge(view_library, OUT_T), "calls the library's merge_heads"),
    Mistake("02 YT5 view merge", "heads averaged", lambda: checks.check_view_merge(view_average, OUT_T),
            "you averaged the heads"),
]


def split_by_np_split(x: Any, heads: int) -> Any:
    return np.stack(np.split(x, heads, axis=-1), axis=1)


def split_with_swapaxes(x: Any, heads: int) -> Any:
    B, T, _D = x.shape
    return x.reshape(B, T, heads, -1).swapaxes(1, 2)


def merge_by_concatenation(heads_out: Any) -> Any:
    return np.concatenate([heads_out[:, i] for i in range(heads_out.shape[1])], axis=-1)


def view_with_permute(heads_out: Any) -> Any:
    B, _h, T, _d_h = heads_out.shape
    return heads_out.permute(0, 2, 1, 3).contiguous().view(B, T, -1)


def split_with_moveaxis(x: Any, heads: int) -> Any:
    B, T, D = x.shape
    return np.moveaxis(x.reshape(B, T, heads, D // heads), 2, 1).copy()


def merge_with_moveaxis(heads_out: Any) -> Any:
    B, _h, T, _d_h = heads_out.shape
    return np.moveaxis(heads_out, 1, 2).reshape(B, T, -1)


def view_with_clone(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.transpose(1, 2).clone(memory_format=torch.contiguous_format).view(B, T, h * d_h)


def view_einsum(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return torch.einsum("bhtd->bthd", heads_out).contiguous().view(B, T, h * d_h)


def view_swapaxes(heads_out: Any) -> Any:
    B, h, T, d_h = heads_out.shape
    return heads_out.swapaxes(1, 2).contiguous().view(B, T, h * d_h)


def view_clone_contiguous_format(heads_out: Any) -> Any:
    B, _h, T, _d_h = heads_out.shape
    return heads_out.transpose(1, 2).clone(memory_format=torch.contiguous_format).view(B, T, -1)


RIGHT: list[RightAnswer] = [
    RightAnswer("02 YT1 head width", "2048 // 16", lambda: checks.check_head_width(2048 // 16)),
    RightAnswer("02 YT1 head width", "np.int64(128)", lambda: checks.check_head_width(np.int64(128))),
    RightAnswer("02 YT1 head width", "int(2048 / 16)", lambda: checks.check_head_width(int(2048 / 16))),
    RightAnswer("02 YT2 split", "reshape then transpose", lambda: checks.check_split(split_right)),
    RightAnswer("02 YT2 split", "np.split and np.stack", lambda: checks.check_split(split_by_np_split)),
    RightAnswer("02 YT2 split", "reshape with -1 then swapaxes", lambda: checks.check_split(split_with_swapaxes)),
    RightAnswer("02 YT2 split", "reshape then np.moveaxis, copied", lambda: checks.check_split(split_with_moveaxis)),
    RightAnswer("02 YT3 merge", "transpose then reshape", lambda: checks.check_merge(merge_right)),
    RightAnswer("02 YT3 merge", "np.concatenate of the head blocks",
                lambda: checks.check_merge(merge_by_concatenation)),
    RightAnswer("02 YT3 merge", "np.moveaxis then reshape(B, T, -1)", lambda: checks.check_merge(merge_with_moveaxis)),
    RightAnswer("02 YT4 head reads", "lists", lambda: checks.check_head_reads(list(range(12)), [8, 9, 10, 11])),
    RightAnswer("02 YT4 head reads", "ranges and an array",
                lambda: checks.check_head_reads(range(12), np.arange(8, 12))),
    RightAnswer("02 YT4 head reads", "a set and a tuple in another order",
                lambda: checks.check_head_reads(set(range(12)), (11, 10, 9, 8))),
    RightAnswer("02 YT5 view merge", "transpose, contiguous, view", lambda: checks.check_view_merge(view_right, OUT_T)),
    RightAnswer("02 YT5 view merge", "permute, contiguous, view(B, T, -1)",
                lambda: checks.check_view_merge(view_with_permute, OUT_T)),
    RightAnswer("02 YT5 view merge", "transpose, clone(memory_format=torch.contiguous_format), view",
                lambda: checks.check_view_merge(view_with_clone, OUT_T)),
    RightAnswer("02 YT5 view merge", "torch.einsum to swap the axes, contiguous, view",
                lambda: checks.check_view_merge(view_einsum, OUT_T)),
    RightAnswer("02 YT5 view merge", "clone(memory_format=torch.contiguous_format) after transpose, view(B, T, -1)",
                lambda: checks.check_view_merge(view_clone_contiguous_format, OUT_T)),
    RightAnswer("02 YT5 view merge", "swapaxes, contiguous, view",
                lambda: checks.check_view_merge(view_swapaxes, OUT_T)),
]


@pytest.mark.parametrize("row", MISTAKES, ids=row_id)
def test_typical_mistake_is_diagnosed(row: Mistake) -> None:
    assert_diagnosed(row)


@pytest.mark.parametrize("row", RIGHT, ids=row_id)
def test_right_answer_is_accepted(row: RightAnswer) -> None:
    assert_accepted(row)
