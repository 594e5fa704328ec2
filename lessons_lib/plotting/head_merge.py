"""Lesson 03 picture: concatenating the heads, and which rows of ``W_o`` read which head.

`merge_blocks` computes what the picture shows (plain NumPy); `plot_head_merge` draws it and
returns the figure. Colour carries a category here (the head an entry belongs to), so the figure
has a legend instead of a colour bar; the numbers themselves are written in the cells.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from numpy.typing import NDArray

from lessons_lib.plotting import MIN_FONT_POINTS

__all__ = ["HEAD_COLOURS", "merge_blocks", "plot_head_merge", "wo_row_heads"]

# One pale colour per head (pale, so that the numbers written on top stay legible).
HEAD_COLOURS = ("#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc", "#fc9272", "#c7e9c0", "#fdd0a2", "#d9d9d9")
FONT_SIZE = MIN_FONT_POINTS  # the numbers in the cells, the ticks and the axis labels
INTEGER_WIDTH, DECIMAL_WIDTH = 0.34, 0.48  # inches per column: room for "133", or for "-0.33", at FONT_SIZE


def _check_heads_out(heads_out: NDArray[np.generic]) -> tuple[int, int, int]:
    if not isinstance(heads_out, np.ndarray) or heads_out.ndim != 3:
        shape = getattr(heads_out, "shape", type(heads_out).__name__)
        raise ValueError(f"heads_out must be a NumPy array laid out as (h, T, d_h), got {shape}")
    h, T, d_h = heads_out.shape
    if not 1 <= h <= len(HEAD_COLOURS):
        raise ValueError(f"can draw 1 to {len(HEAD_COLOURS)} heads, got h={h}")
    return h, T, d_h


def merge_blocks(heads_out: NDArray[np.generic]) -> tuple[NDArray[np.generic], NDArray[np.int64]]:
    """One sequence's ``heads_out (h, T, d_h)`` -> ``merged (T, D)`` and ``head_ids (T, D)``.

    ``merged[t]`` is ``[head 0's d_h features | head 1's | ...]`` of token ``t``; ``head_ids[t, j]``
    is the head that feature ``j`` came from.
    """
    h, T, d_h = _check_heads_out(heads_out)
    merged = heads_out.transpose(1, 0, 2).reshape(T, h * d_h)  # (h, T, d_h) -> (T, h, d_h) -> (T, D)
    head_ids = np.broadcast_to(wo_row_heads(h, d_h), (T, h * d_h)).copy()  # (T, D)
    return merged, head_ids


def wo_row_heads(h: int, d_h: int) -> NDArray[np.int64]:
    """``(D,)``: the head whose features row ``i`` of ``W_o`` (``(in, out)`` layout) multiplies."""
    if h < 1 or d_h < 1:
        raise ValueError(f"h and d_h must be positive, got h={h}, d_h={d_h}")
    return np.repeat(np.arange(h), d_h)  # rows 0..d_h-1 read head 0, the next d_h rows head 1, ...


def _draw_grid(ax: Axes, head_ids: NDArray[np.int64], values: NDArray[np.generic], fmt: str, h: int) -> None:
    """``head_ids`` as colours, ``values`` written in the cells, a dark line between head blocks."""
    cmap = ListedColormap(list(HEAD_COLOURS[:h]))  # a list: Matplotlib 3.8 misreads a tuple
    ax.imshow(head_ids, cmap=cmap, vmin=-0.5, vmax=h - 0.5, aspect="auto", interpolation="nearest")
    rows, cols = values.shape
    for r in range(rows):
        for c in range(cols):
            ax.text(c, r, format(values[r, c], fmt), ha="center", va="center", fontsize=FONT_SIZE)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.tick_params(length=0, labelsize=FONT_SIZE)


def plot_head_merge(heads_out: NDArray[np.generic], wo: NDArray[np.floating]) -> Figure:
    """Left: ``heads_out (h, T, d_h)`` merged into ``(T, D)``, each head's block in its colour.
    Right: ``wo (D, D)`` in ``(in, out)`` layout, each block of ``d_h`` rows in the colour of the
    head it reads. Returns the figure.

    Integers (the lesson's labels) are written as they are, other numbers with two decimals. Each
    column gets a fixed width, so the numbers keep their 9 pt and never touch: up to ``D = 8`` (the
    lesson's) the figure fits the page column; a larger ``D`` makes it wider."""
    h, T, d_h = _check_heads_out(heads_out)
    D = h * d_h
    if not isinstance(wo, np.ndarray) or wo.shape != (D, D):
        raise ValueError(f"wo must be a NumPy array of shape (D, D) = {(D, D)}, got {getattr(wo, 'shape', wo)}")
    merged, head_ids = merge_blocks(heads_out)
    integers = np.issubdtype(merged.dtype, np.integer)
    cell_widths = (INTEGER_WIDTH if integers else DECIMAL_WIDTH, DECIMAL_WIDTH)  # left, right (W_o: decimals)
    # integer labels and D = 8 (the lesson's): 7.8 inches, shown at its own size in the page column (`PAGE_WIDTH`)
    width = D * sum(cell_widths) + 1.2  # the cells, plus the axis labels and the gap between the panels
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(width, 4.6), width_ratios=[D * cell_widths[0], D * cell_widths[1]], layout="constrained"
    )
    if integers:
        _draw_grid(left, head_ids, merged, "d", h)
    else:
        _draw_grid(left, head_ids, np.round(merged.astype(np.float64), 2), ".2f", h)
    for j in range(1, h):
        left.axvline(j * d_h - 0.5, color="black", linewidth=2)
    left.set_title(f"merged heads (T, D) = ({T}, {D})\n[head 0 | head 1{' | ...' if h > 2 else ''}]", fontsize=10)
    left.set_xlabel("feature of the merged row (0 .. D-1)", fontsize=FONT_SIZE)
    left.set_ylabel("token t", fontsize=FONT_SIZE)

    rows = np.broadcast_to(wo_row_heads(h, d_h)[:, None], (D, D))  # (D, D): row i coloured by its head
    _draw_grid(right, rows, np.round(wo, 2), ".2f", h)
    for j in range(1, h):
        right.axhline(j * d_h - 0.5, color="black", linewidth=2)
    right.set_title(f"W_o (D, D), (in, out)\nrows in blocks of d_h = {d_h}", fontsize=10)
    right.set_xlabel("output feature", fontsize=FONT_SIZE)
    right.set_ylabel("input feature (row of W_o)", fontsize=FONT_SIZE)

    handles = [Patch(facecolor=HEAD_COLOURS[i], edgecolor="black", label=f"head {i}") for i in range(h)]
    fig.legend(handles=handles, loc="outside lower center", ncols=h, fontsize=FONT_SIZE)
    fig.suptitle("Concatenate, then project: the features of head i meet row block i of W_o", fontsize=11)
    return fig
