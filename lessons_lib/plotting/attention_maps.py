"""Lesson 04 pictures: per-head attention heatmaps, a grid of heads, the head average for contrast.

``draw_*`` functions draw onto given axes and return the artists (the widgets of
`lessons_lib.widgets.head_widgets` draw once with them and then only update the artists' data);
``plot_*`` functions create a figure and return it. The numbers come from `lessons_lib.inspect_heads`.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from numpy.typing import NDArray

from lessons_lib.validation import check_rank

__all__ = [
    "draw_map",
    "draw_columns",
    "draw_cut_matrix",
    "draw_split_layout",
    "draw_tiled_maps",
    "label_tokens",
    "tile_maps",
    "plot_head_map",
    "plot_head_grid",
    "plot_average_contrast",
    "plot_split_layouts",
]

MAP_CMAP = "viridis"
COLUMN_CMAP = "RdBu_r"
HEAD_CMAP = "tab10"


def _check_labels(name: str, labels: Sequence[str], size: int) -> None:
    if len(labels) != size:
        raise ValueError(f"{name} must have one label per position ({size}), got {len(labels)}")


def draw_map(
    ax: Axes,
    weights: NDArray[np.floating],
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    title: str = "",
) -> AxesImage:
    """One attention map ``weights (T, S)``: rows are queries, columns the positions they read."""
    check_rank("weights", weights.shape, 2, "(T, S)", exact=True)
    _check_labels("query_labels", query_labels, weights.shape[0])
    _check_labels("key_labels", key_labels, weights.shape[1])
    image = ax.imshow(weights, cmap=MAP_CMAP, vmin=0.0, vmax=1.0)
    label_tokens(ax, query_labels, key_labels)
    ax.tick_params(length=0, labelsize=8)
    ax.set_xlabel("source (key)", fontsize=8)
    ax.set_ylabel("query", fontsize=8)
    ax.set_title(title, fontsize=9)
    return image


def label_tokens(ax: Axes, query_labels: Sequence[str], key_labels: Sequence[str]) -> None:
    """Token labels on a map's axes: keys along the bottom, queries down the side."""
    ax.set_xticks(range(len(key_labels)), key_labels)
    ax.set_yticks(range(len(query_labels)), query_labels)


def draw_columns(ax: Axes, block: NDArray[np.floating], title: str, first_column: int = 0, limit: float | None = None) -> AxesImage:
    """A head's column block ``(D, d_h)`` of a projection: every input feature (rows) feeds it."""
    check_rank("block", block.shape, 2, "(D, d_h)", exact=True)
    limit = float(np.abs(block).max()) if limit is None else limit
    image = ax.imshow(block, cmap=COLUMN_CMAP, vmin=-limit, vmax=limit, aspect="auto")
    ax.set_title(title, fontsize=9)
    ax.set_xticks(range(block.shape[1]), [str(first_column + j) for j in range(block.shape[1])])
    D = block.shape[0]
    ax.set_yticks([0, D - 1], ["0", str(D - 1)])  # few labels: every row is an input feature
    ax.tick_params(length=0, labelsize=7)
    ax.set_xlabel("column", fontsize=8)
    ax.set_ylabel("input feature", fontsize=8, labelpad=-4)
    return image


def draw_cut_matrix(ax: Axes, w: NDArray[np.floating]) -> list[Line2D]:
    """A projection ``w (D_in, D)`` and, hidden, a line at each column boundary ``1 .. D-1``.

    Cutting ``w`` into ``h`` heads = showing the lines at multiples of ``d_h = D / h`` (set their
    visibility); the matrix itself never changes.
    """
    check_rank("w", w.shape, 2, "(D_in, D)", exact=True)
    limit = float(np.abs(w).max())
    ax.imshow(w, cmap=COLUMN_CMAP, vmin=-limit, vmax=limit)
    ax.set_xlabel("column (output feature)", fontsize=8)
    ax.set_ylabel("input feature", fontsize=8)
    ax.tick_params(labelsize=7)
    return [ax.axvline(col - 0.5, color="black", linewidth=1.5, visible=False) for col in range(1, w.shape[1])]


def tile_maps(maps: NDArray[np.floating], slots: int, per_row: int = 8) -> NDArray[np.float64]:
    """Place ``maps (h, T, S)`` in a fixed grid of ``slots`` cells, NaN (blank) between and after.

    The grid has one size whatever ``h`` is, so a picture of it only needs new image data.
    """
    check_rank("maps", maps.shape, 3, "(h, T, S)", exact=True)
    h, T, S = maps.shape
    if h > slots:
        raise ValueError(f"cannot place h={h} maps in {slots} slots; make sure slots >= h")
    cols = min(slots, per_row)
    rows = -(-slots // cols)
    tiled = np.full((rows * (T + 1) - 1, cols * (S + 1) - 1), np.nan)
    for i in range(h):
        r, c = divmod(i, cols)
        tiled[r * (T + 1) : r * (T + 1) + T, c * (S + 1) : c * (S + 1) + S] = maps[i]
    return tiled


def draw_tiled_maps(ax: Axes, maps: NDArray[np.floating], slots: int) -> AxesImage:
    """``maps (h, T, S)`` side by side in a grid of ``slots`` cells (see `tile_maps`), no axes.

    Update the picture with ``image.set_data(tile_maps(new_maps, slots))``.
    """
    image = ax.imshow(tile_maps(maps, slots), cmap=MAP_CMAP, vmin=0.0, vmax=1.0, aspect="equal")
    ax.axis("off")
    return image


def draw_split_layout(ax: Axes, layout: NDArray[np.integer], heads: int, title: str) -> AxesImage:
    """``layout (T, D)`` head ids from `inspect_heads.split_layout`, one colour per head."""
    check_rank("layout", layout.shape, 2, "(T, D)", exact=True)
    image = ax.imshow(layout, cmap=HEAD_CMAP, vmin=-0.5, vmax=9.5, aspect="auto")
    T, D = layout.shape
    ax.set_xticks(range(D))
    ax.set_yticks(range(T))
    ax.tick_params(length=0, labelsize=7)
    ax.set_xlabel("input feature", fontsize=8)
    ax.set_ylabel("token position t", fontsize=8)
    ax.set_title(title, fontsize=9)
    return image


def _label_first_only(axes: Sequence[Axes]) -> None:
    """Axis titles and query labels on the first panel only: the panels share their rows, and
    every label is text to draw."""
    for ax in axes[1:]:
        ax.set_xlabel("")
        ax.set_ylabel("")
        ax.tick_params(labelleft=False)


def plot_head_map(
    weights: NDArray[np.floating], query_labels: Sequence[str], key_labels: Sequence[str], title: str = ""
) -> Figure:
    """One head's map ``(T, S)`` with token labels."""
    fig, ax = plt.subplots(figsize=(3.2, 3.0))
    fig.subplots_adjust(left=0.15, right=0.95, bottom=0.15, top=0.9)
    image = draw_map(ax, weights, query_labels, key_labels, title)
    fig.colorbar(image, ax=ax, shrink=0.8)
    return fig


def plot_head_grid(
    weights: NDArray[np.floating], labels: Sequence[str], titles: Sequence[str] | None = None
) -> Figure:
    """Every head of one sequence side by side: ``weights (h, T, T)`` (self-attention)."""
    check_rank("weights", weights.shape, 3, "(h, T, S)", exact=True)
    h = weights.shape[0]
    titles = [f"head {i}" for i in range(h)] if titles is None else list(titles)
    if len(titles) != h:
        raise ValueError(f"titles must have one entry per head ({h}), got {len(titles)}")
    # A fixed layout: constrained layout would cost more time than drawing the maps themselves.
    fig, axes = plt.subplots(1, h, figsize=(2.4 * h, 2.6), squeeze=False)
    fig.subplots_adjust(left=0.6 / (2.4 * h), right=0.99, bottom=0.18, top=0.9, wspace=0.08)
    for ax, head_weights, title in zip(axes[0], weights, titles):
        draw_map(ax, head_weights, labels, labels, title)
    _label_first_only(axes[0])
    return fig


def plot_average_contrast(
    weights: NDArray[np.floating], labels: Sequence[str], titles: Sequence[str] | None = None
) -> Figure:
    """The heads of one sequence ``(h, T, T)`` and, last, their average, which no head computes."""
    check_rank("weights", weights.shape, 3, "(h, T, S)", exact=True)
    h = weights.shape[0]
    titles = [f"head {i}" for i in range(h)] if titles is None else list(titles)
    fig, axes = plt.subplots(1, h + 1, figsize=(2.3 * (h + 1), 2.6))
    fig.subplots_adjust(left=0.6 / (2.3 * (h + 1)), right=0.99, bottom=0.18, top=0.9, wspace=0.08)
    for ax, head_weights, title in zip(axes, weights, titles):
        draw_map(ax, head_weights, labels, labels, title)
    draw_map(axes[-1], weights.mean(axis=0), labels, labels, "average of heads")
    _label_first_only(axes)
    for spine in axes[-1].spines.values():
        spine.set_edgecolor("red")
        spine.set_linewidth(2)
    return fig


def plot_split_layouts(correct: NDArray[np.integer], wrong: NDArray[np.integer], heads: int) -> Figure:
    """Which head each ``(t, feature)`` entry lands in, correct split vs the wrong direct reshape."""
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 2.6), layout="constrained")
    draw_split_layout(axes[0], correct, heads, "reshape then transpose (correct)")
    draw_split_layout(axes[1], wrong, heads, "direct reshape (wrong)")
    return fig
