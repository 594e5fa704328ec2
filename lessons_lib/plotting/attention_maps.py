"""Lesson 05 pictures: per-head attention heatmaps, a grid of heads, the head average for contrast,
and the measured accuracies of one wide head against several narrow ones.

Every heatmap has a colour bar: `add_colorbar` puts one beside given axes (the widgets call it once,
when they lay out their figure, so it costs nothing per update).

``draw_*`` functions draw onto given axes and return the artists (the widgets of
`lessons_lib.widgets.head_widgets` draw once with them and then only update the artists' data);
``plot_*`` functions create a figure and return it. The numbers come from `lessons_lib.inspect_heads`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colorbar import Colorbar
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from numpy.typing import NDArray

from lessons_lib.plotting import MAX_FIGURE_INCHES
from lessons_lib.plotting.palette import head_colourmap

__all__ = [
    "add_colorbar",
    "draw_columns",
    "draw_cut_matrix",
    "draw_map",
    "draw_split_layout",
    "draw_tiled_maps",
    "head_ticks",
    "label_step",
    "label_tokens",
    "plot_average_contrast",
    "plot_head_count_comparison",
    "plot_head_grid",
    "plot_head_map",
    "plot_split_layouts",
    "tile_maps",
    "tiled_shape",
]

MAP_CMAP = "viridis"
COLUMN_CMAP = "RdBu_r"
HEAD_CMAP = head_colourmap(10)  # head ids 0 .. 9, colour-vision-aware (see plotting.palette)
WEIGHT_LABEL = "attention weight"


def _check_axes(name: str, array: NDArray[np.generic], layout: str) -> None:
    """``ValueError`` unless ``array`` has one axis per name in ``layout``, e.g. ``"(T, S)"``."""
    rank = layout.count(",") + 1
    if array.ndim != rank:
        raise ValueError(f"{name} must have {rank} axes, laid out as {layout}; got shape {array.shape}")


def _check_labels(name: str, labels: Sequence[str], size: int) -> None:
    if len(labels) != size:
        raise ValueError(f"{name} must have one label per position ({size}), got {len(labels)}")


def add_colorbar(
    image: ScalarMappable,
    ax: Axes,
    label: str,
    gap: float = 0.01,
    width: float = 0.012,
    bottom: float | None = None,
    **kwargs: Any,
) -> Colorbar:
    """A colour bar for ``image`` (an image or a mesh: anything with a colour map) in a thin new axes just
    right of ``ax`` (figure fractions).

    Placed by hand rather than by stealing space from ``ax``, so the figure's fixed layout stays
    as it was. It runs from the top of ``ax`` down to its bottom, or down to ``bottom`` (a figure
    fraction) to stand beside several rows of maps; ``kwargs`` go to ``Figure.colorbar`` (e.g. ``ticks``).
    """
    fig = ax.get_figure()
    assert isinstance(fig, Figure)
    ax.apply_aspect()  # an equal-aspect image may fill less than its axes' slot: follow the image
    box = ax.get_position()
    y0 = box.y0 if bottom is None else bottom
    cax = fig.add_axes((box.x1 + gap, y0, width, box.y1 - y0))
    bar = fig.colorbar(image, cax=cax, **kwargs)
    bar.set_label(label, fontsize=9)
    bar.ax.tick_params(labelsize=9)
    return bar


def label_step(spacing: float, room: float, steps: Sequence[int]) -> int:
    """The first of ``steps`` at which labels on ticks ``spacing`` apart stand at least ``room`` apart
    (the last of ``steps`` when none does): label every ``step``-th tick, so no two labels touch."""
    return next((step for step in steps if step * spacing >= room), steps[-1])


def draw_map(
    ax: Axes,
    weights: NDArray[np.floating],
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    title: str = "",
) -> AxesImage:
    """One attention map ``weights (T, S)``: rows are queries, columns the positions they read."""
    _check_axes("weights", weights, "(T, S)")
    _check_labels("query_labels", query_labels, weights.shape[0])
    _check_labels("key_labels", key_labels, weights.shape[1])
    image = ax.imshow(weights, cmap=MAP_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest")
    label_tokens(ax, query_labels, key_labels)
    ax.tick_params(length=0, labelsize=9)
    ax.set_xlabel("source (key)", fontsize=9)
    ax.set_ylabel("query", fontsize=9)
    ax.set_title(title, fontsize=9)
    return image


def label_tokens(ax: Axes, query_labels: Sequence[str], key_labels: Sequence[str]) -> None:
    """Token labels on a map's axes: keys along the bottom, queries down the side."""
    ax.set_xticks(range(len(key_labels)), key_labels)
    ax.set_yticks(range(len(query_labels)), query_labels)


def draw_columns(
    ax: Axes, block: NDArray[np.floating], title: str, first_column: int = 0, limit: float | None = None
) -> AxesImage:
    """A head's column block ``(D, d_h)`` of a projection: every input feature (rows) feeds it."""
    _check_axes("block", block, "(D, d_h)")
    limit = float(np.abs(block).max()) if limit is None else limit
    image = ax.imshow(block, cmap=COLUMN_CMAP, vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest")
    ax.set_title(title, fontsize=9)
    ax.set_xticks(range(block.shape[1]), [str(first_column + j) for j in range(block.shape[1])])
    D = block.shape[0]
    ax.set_yticks([0, D - 1], ["0", str(D - 1)])  # few labels: every row is an input feature
    ax.tick_params(length=0, labelsize=9)
    ax.set_xlabel("column", fontsize=9)
    ax.set_ylabel("input feature", fontsize=9, labelpad=-4)
    return image


def draw_cut_matrix(ax: Axes, w: NDArray[np.floating]) -> list[Line2D]:
    """A projection ``w (D_in, D)`` and, hidden, a line at each column boundary ``1 .. D-1``.

    Cutting ``w`` into ``h`` heads = showing the lines at multiples of ``d_h = D / h`` (set their
    visibility); the matrix itself never changes.
    """
    _check_axes("w", w, "(D_in, D)")
    limit = float(np.abs(w).max())
    ax.imshow(w, cmap=COLUMN_CMAP, vmin=-limit, vmax=limit, interpolation="nearest")
    ax.set_xlabel("column (output feature)", fontsize=9)
    ax.set_ylabel("input feature", fontsize=9)
    ax.tick_params(labelsize=9)
    return [ax.axvline(col - 0.5, color="black", linewidth=1.5, visible=False) for col in range(1, w.shape[1])]


def tiled_shape(T: int, S: int, rows: int, cols: int) -> tuple[int, int]:
    """The shape of ``rows`` x ``cols`` tiles of (T, S) maps, one empty row and column between tiles."""
    return rows * (T + 1) - 1, cols * (S + 1) - 1


def tile_maps(maps: NDArray[np.floating], slots: int, per_row: int = 8) -> NDArray[np.float64]:
    """Place ``maps (h, T, S)`` in a fixed grid of ``slots`` cells, NaN (blank) between and after.

    The grid has one size whatever ``h`` is, so a picture of it only needs new image data.
    """
    _check_axes("maps", maps, "(h, T, S)")
    h, T, S = maps.shape
    if h > slots:
        raise ValueError(f"cannot place h={h} maps in {slots} slots; make sure slots >= h")
    cols = min(slots, per_row)
    rows = -(-slots // cols)
    tiled = np.full(tiled_shape(T, S, rows, cols), np.nan)
    for i in range(h):
        r, c = divmod(i, cols)
        tiled[r * (T + 1) : r * (T + 1) + T, c * (S + 1) : c * (S + 1) + S] = maps[i]
    return tiled


def draw_tiled_maps(ax: Axes, maps: NDArray[np.floating], slots: int, per_row: int = 8) -> AxesImage:
    """``maps (h, T, S)`` side by side in a grid of ``slots`` cells (see `tile_maps`), no axes.

    Update the picture with ``image.set_data(tile_maps(new_maps, slots, per_row))`` (the widgets draw it as a
    mesh instead: `widgets.base._as_mesh`).
    """
    tiled = tile_maps(maps, slots, per_row)
    image = ax.imshow(tiled, cmap=MAP_CMAP, vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest")
    ax.axis("off")
    return image


def draw_split_layout(ax: Axes, layout: NDArray[np.integer], heads: int, title: str) -> AxesImage:
    """``layout (T, D)`` head ids from `inspect_heads.split_layout`, one colour per head."""
    _check_axes("layout", layout, "(T, D)")
    image = ax.imshow(layout, cmap=HEAD_CMAP, vmin=-0.5, vmax=9.5, aspect="auto", interpolation="nearest")
    T, D = layout.shape
    ax.set_xticks(range(D))
    ax.set_yticks(range(T))
    ax.tick_params(length=0, labelsize=9)
    ax.set_xlabel("input feature", fontsize=9)
    ax.set_ylabel("token position t", fontsize=9)
    ax.set_title(title, fontsize=9)
    return image


def _head_titles(titles: Sequence[str] | None, h: int) -> list[str]:
    """``titles`` as a list of ``h`` entries, ``head 0 .. head h-1`` when not given."""
    titles = [f"head {i}" for i in range(h)] if titles is None else list(titles)
    if len(titles) != h:
        raise ValueError(f"titles must have one entry per head ({h}), got {len(titles)}")
    return titles


def _label_row_starts(axes: Sequence[Axes], columns: int) -> None:
    """Axis titles and query labels on the first map of each row only: the maps share their rows,
    and every label is text to draw."""
    for k, ax in enumerate(axes):
        if k % columns:
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
    bar = fig.colorbar(image, ax=ax, shrink=0.8)
    bar.set_label(WEIGHT_LABEL, fontsize=9)
    return fig


# The grid of maps of `plot_head_grid` and `plot_average_contrast`, in inches. A figure at most
# GRID_WIDTH wide is shown at its own size in a lesson page (`PAGE_WIDTH`, 7.9 in), so its 9 pt text
# stays 9 pt; maps that do not fit in one row at their smallest size wrap into more rows.
GRID_WIDTH = MAX_FIGURE_INCHES
GRID_LEFT = 0.45  # the first map's query labels and axis title
GRID_RIGHT = 0.8  # the colour bar, its ticks and its label
GRID_TOP = 0.3  # a map's title
GRID_BOTTOM = 0.45  # key labels and axis title under a row
GRID_GAP = 0.12  # between two maps of a row (only the first shows its query labels)
GRID_ROW_GAP = 0.75  # between rows: the key labels and axis title of one row, the titles of the next
AVERAGE_GAP = 0.3  # before the average of `plot_average_contrast`, when it shares a row with the heads
LARGEST_MAP = 1.6  # a map's side, unless its token labels need more
SMALLEST_MAP = 1.1


def _average_gap(maps: int, columns: int, average: bool) -> float:
    """`AVERAGE_GAP` if the last of ``maps`` maps is an average that shares its row with heads, else 0."""
    shares_row = columns > 1 and maps % columns != 1
    return AVERAGE_GAP if average and shares_row else 0.0


def _grid_shape(maps: int, positions: int, labels: Sequence[str], average: bool) -> tuple[int, float]:
    """(maps per row, side of a map in inches) for ``maps`` maps of ``positions`` tokens in `GRID_WIDTH`.

    A map is at least `SMALLEST_MAP` wide and wide enough for its token labels at 9 pt (about 0.6 em
    a character, 4 pt between neighbours); the rows are as even as they can be.
    """
    longest = max((len(label) for label in labels), default=1)
    cell = (0.6 * 9 * max(longest, 1) + 4) / 72
    smallest = max(SMALLEST_MAP, positions * cell)
    room = GRID_WIDTH - GRID_LEFT - GRID_RIGHT

    def side(columns: int) -> float:
        return (room - (columns - 1) * GRID_GAP - _average_gap(maps, columns, average)) / columns

    fit = max([columns for columns in range(1, maps + 1) if side(columns) >= smallest], default=1)
    rows = -(-maps // fit)
    columns = -(-maps // rows)
    return columns, min(max(LARGEST_MAP, smallest), side(columns))


def _grid_of_maps(
    weights: NDArray[np.floating], labels: Sequence[str], titles: Sequence[str] | None, average: bool
) -> tuple[Figure, list[Axes], int]:
    """A figure of the maps ``weights (h, T, T)`` in rows (and, with ``average``, one more map at the end,
    left empty for the caller), with one colour bar for them all (every map uses the same scale, 0 to 1).

    Returns the figure, its map axes in reading order and the number of maps per row.
    """
    _check_axes("weights", weights, "(h, T, S)")
    h = weights.shape[0]
    titles = _head_titles(titles, h)
    maps = h + 1 if average else h
    columns, side = _grid_shape(maps, weights.shape[-1], labels, average)
    rows = -(-maps // columns)
    last_gap = _average_gap(maps, columns, average)
    width = GRID_LEFT + columns * side + (columns - 1) * GRID_GAP + last_gap + GRID_RIGHT
    height = GRID_TOP + rows * side + (rows - 1) * GRID_ROW_GAP + GRID_BOTTOM
    # A fixed layout, placed in inches: constrained layout would cost more time than drawing the maps.
    fig = plt.figure(figsize=(width, height))
    axes = []
    for k in range(maps):
        row, column = divmod(k, columns)
        left = GRID_LEFT + column * (side + GRID_GAP) + (last_gap if k == maps - 1 else 0.0)
        top = GRID_TOP + row * (side + GRID_ROW_GAP)
        axes.append(fig.add_axes((left / width, 1 - (top + side) / height, side / width, side / height)))
    images = [
        draw_map(ax, head_weights, labels, labels, title)
        for ax, head_weights, title in zip(axes[:h], weights, titles, strict=True)
    ]
    bottom = axes[(rows - 1) * columns].get_position().y0  # the bar spans every row
    add_colorbar(images[0], axes[columns - 1], WEIGHT_LABEL, gap=0.12 / width, width=0.12 / width, bottom=bottom)
    return fig, axes, columns


def plot_head_grid(weights: NDArray[np.floating], labels: Sequence[str], titles: Sequence[str] | None = None) -> Figure:
    """Every head of one sequence, in reading order: ``weights (h, T, T)`` (self-attention).

    The maps fill rows as wide as a lesson page (four maps of eight tokens make one row), with one
    colour bar beside them.
    """
    fig, axes, columns = _grid_of_maps(weights, labels, titles, average=False)
    _label_row_starts(axes, columns)
    return fig


def plot_average_contrast(
    weights: NDArray[np.floating], labels: Sequence[str], titles: Sequence[str] | None = None
) -> Figure:
    """The heads of one sequence ``(h, T, T)`` and, last, their average, which no head computes.

    Laid out as `plot_head_grid` (five maps of eight tokens make one row); the average, in a red frame,
    stands a little apart from the heads when it shares their row.
    """
    fig, axes, columns = _grid_of_maps(weights, labels, titles, average=True)
    draw_map(axes[-1], weights.mean(axis=0), labels, labels, "average of heads")
    _label_row_starts(axes, columns)
    for spine in axes[-1].spines.values():
        spine.set_edgecolor("red")
        spine.set_linewidth(2)
    return fig


def plot_split_layouts(correct: NDArray[np.integer], wrong: NDArray[np.integer], heads: int) -> Figure:
    """Which head each ``(t, feature)`` entry lands in, correct split vs the wrong direct reshape."""
    fig, axes = plt.subplots(1, 2, figsize=(7.6, 2.6), layout="constrained")
    image = draw_split_layout(axes[0], correct, heads, "reshape then transpose (correct)")
    draw_split_layout(axes[1], wrong, heads, "direct reshape (wrong)")
    bar = fig.colorbar(image, ax=list(axes), **head_ticks(heads))
    bar.set_label("head", fontsize=9)
    return fig


def head_ticks(heads: int) -> dict[str, Any]:
    """Colour-bar arguments for a `draw_split_layout` image: only the colours of heads ``0 .. h-1``."""
    return {"boundaries": np.arange(heads + 1) - 0.5, "ticks": range(heads)}


def plot_head_count_comparison(
    accuracy: NDArray[np.floating],
    head_counts: Sequence[int],
    width: int,
    targets: Sequence[str],
    chance: float | None = None,
) -> Figure:
    """Held-out accuracy per target for each head count: bars = mean over seeds, dots = each seed.

    ``accuracy (len(head_counts), seeds, len(targets))``, as in `inspect_heads.HeadCountComparison`;
    ``width`` is ``D`` (each model's heads have width ``D / h``); ``chance`` draws a dashed line.
    """
    _check_axes("accuracy", accuracy, "(head counts, seeds, targets)")
    if accuracy.shape[0] != len(head_counts) or accuracy.shape[2] != len(targets):
        raise ValueError(
            f"accuracy must have shape (len(head_counts), seeds, len(targets)) = "
            f"({len(head_counts)}, seeds, {len(targets)}), got {accuracy.shape}"
        )
    configs, seeds, _ = accuracy.shape
    fig, ax = plt.subplots(figsize=(7.5, 3.0), layout="constrained")
    bar_width = 0.8 / configs
    spots = np.arange(len(targets))
    for i, heads in enumerate(head_counts):
        x = spots + (i - (configs - 1) / 2) * bar_width
        name = f"{heads} head{'s' if heads > 1 else ''} of width {width // heads}"
        ax.bar(x, accuracy[i].mean(axis=0), bar_width * 0.9, color=f"C{i}", label=f"{name} (mean)")
        ax.plot(
            np.repeat(x, seeds),
            accuracy[i].T.ravel(),
            "o",
            color="black",
            markersize=3,
            linestyle="none",
            label="one seed" if i == 0 else None,
        )
    if chance is not None:
        ax.axhline(chance, color="grey", linestyle="--", linewidth=1, label=f"chance ({chance:.2f})")
    ax.set_xticks(spots, [f"{name} token" for name in targets])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("symbol the model must name at each position", fontsize=9)
    ax.set_ylabel("held-out accuracy", fontsize=9)
    ax.set_title(f"Same total width D = {width}, same data and steps: {seeds} seeds", fontsize=10)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
