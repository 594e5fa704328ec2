"""Lesson 02 picture: where each number goes when ``(B, T, D)`` is split into heads.

`split_layouts` applies the lesson's reshapes to any ``(T, D)`` array of one sequence (labels such
as ``10 * t + f``, or `feature_owners`, the head each feature belongs to); `plot_head_split` draws
``(B, T, D) -> (B, T, h, d_h) -> (B, h, T, d_h)`` with each head's features in its own colour, and
beside the last step the direct reshape ``(B, T, D) -> (B, h, T, d_h)`` that scrambles them, framed
as wrong. Two rows of two panels: the figure fits the page column with 9 pt text.
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
from lessons_lib.validation import head_width

__all__ = ["LAYOUTS", "feature_owners", "plot_head_split", "split_layouts"]

# tab10's first colours, one per head (as in `attention_maps`, which colours heads with tab10 too).
HEAD_COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"
)

# The four arrangements `split_layouts` returns, in the order the figure draws them.
LAYOUTS = ("tokens_features", "tokens_heads", "heads_first", "direct")

# Inches per cell (a column of the panels, a row of the grids): "37" or "307" fits a cell at FONT_SIZE.
CELL_WIDTH, CELL_HEIGHT = 0.34, 0.28
FONT_SIZE = MIN_FONT_POINTS  # cell labels, ticks, axis labels and legend
MAX_WIDTH = 7.8  # inches: shown at its own size in the page column (`lessons_lib.plotting.PAGE_WIDTH`)
TITLE_COLUMNS = 7  # cell widths a bottom panel's title "(B, h, T, d_h) = (1, 2, 4, 4)" needs
DECORATION = 3.0  # cell heights a row of panels needs for its titles, ticks and axis labels
LEGEND_COLUMNS = 3  # entries per line of the legend: four would be wider than MAX_WIDTH
WRONG_COLOUR = "#a50f15"  # the title and frame of the direct reshape's panel (no head's colour)


def _check_table(name: str, table: NDArray[np.generic]) -> None:
    if not isinstance(table, np.ndarray):
        raise TypeError(f"{name} must be a NumPy array (T, D) for one sequence, got {type(table).__name__}")
    if table.ndim != 2:
        raise ValueError(f"{name} must have 2 axes (T, D), one sequence; got shape {table.shape}")


def feature_owners(T: int, D: int, heads: int) -> NDArray[np.int64]:
    """``(T, D)``: entry ``(t, f)`` is the head that feature ``f`` belongs to in the correct split."""
    d_h = head_width(D, heads)
    return np.broadcast_to(np.arange(D) // d_h, (T, D)).copy()


def split_layouts(table: NDArray[np.generic], heads: int) -> dict[str, NDArray[np.generic]]:
    """Where the entries of ``table (T, D)`` (one sequence, ``B = 1``) land, four ways.

    - ``tokens_features`` ``(T, D)``: the table itself;
    - ``tokens_heads`` ``(T, h, d_h)``: the reshape, step 1 of the split;
    - ``heads_first`` ``(h, T, d_h)``: the transpose, step 2: the correct split;
    - ``direct`` ``(h, T, d_h)``: the one-step reshape, right shape, wrong numbers.
    """
    _check_table("table", table)
    T, D = table.shape
    d_h = head_width(D, heads)
    tokens_heads = table.reshape(T, heads, d_h)  # (T, D) -> (T, h, d_h)
    return {
        "tokens_features": table,
        "tokens_heads": tokens_heads,
        "heads_first": tokens_heads.transpose(1, 0, 2),  # (T, h, d_h) -> (h, T, d_h)
        "direct": table.reshape(heads, T, d_h),  # (T, D) -> (h, T, d_h) in one go: the pitfall
    }


def _with_gaps(blocks: NDArray[np.generic], axis: int) -> NDArray[np.float64]:
    """Blocks ``(n, rows, cols)`` placed one after another along ``axis`` (0: down, 1: across),
    with a NaN line (drawn blank) between neighbours."""
    _, rows, cols = blocks.shape
    gap = np.full((1, cols) if axis == 0 else (rows, 1), np.nan)
    pieces: list[NDArray[np.float64]] = []
    for i, block in enumerate(blocks.astype(np.float64)):
        pieces += [gap, block] if i else [block]
    return np.concatenate(pieces, axis=axis)


def _draw_panel(ax: Axes, owners: NDArray[np.float64], labels: NDArray[np.float64], heads: int, title: str) -> None:
    """One arrangement: colour = the owning head of each entry, text = its label; NaN = a gap."""
    # a list: Matplotlib 3.8 misreads a tuple of colours
    cmap = ListedColormap(list(HEAD_COLOURS[:heads])).with_extremes(bad="white")
    ax.imshow(owners, cmap=cmap, vmin=-0.5, vmax=heads - 0.5, aspect="auto",
              interpolation="nearest")
    for (r, c), label in np.ndenumerate(labels):
        if not np.isnan(label):
            ax.text(c, r, f"{int(label)}", ha="center", va="center", fontsize=FONT_SIZE)
    ax.set_title(title, fontsize=10)
    ax.tick_params(length=0, labelsize=FONT_SIZE)


def plot_head_split(
    labels: NDArray[np.integer], heads: int, title: str = "splitting into heads: colour = the head owning the feature"
) -> Figure:
    """Four panels for ``labels (T, D)``, one sequence, read row by row: on top the input and step 1
    (the reshape); below, step 2 (the transpose, the correct split) and beside it the wrong one.

    Each cell shows its label and is coloured by the head its *feature* belongs to in the correct
    split (`feature_owners`): after reshape + transpose every head is one colour; after the
    direct reshape the colours are mixed and the rows are no longer the tokens. Two rows keep the
    figure narrow enough for the page column (7.8 inches for the lesson's ``T = 4, D = 8, h = 2``).
    """
    _check_table("labels", labels)
    T, D = labels.shape
    d_h = head_width(D, heads)
    if heads > len(HEAD_COLOURS):
        raise ValueError(f"can colour at most {len(HEAD_COLOURS)} heads, got heads={heads}; draw a smaller example")
    where = split_layouts(labels, heads)
    owner = split_layouts(feature_owners(T, D, heads), heads)
    panels = [
        (owner["tokens_features"].astype(np.float64), where["tokens_features"].astype(np.float64),
         f"input\n(B, T, D) = (1, {T}, {D})"),
        (_with_gaps(owner["tokens_heads"].transpose(1, 0, 2), 1),
         _with_gaps(where["tokens_heads"].transpose(1, 0, 2), 1),
         f"1. reshape\n(B, T, h, d_h) = (1, {T}, {heads}, {d_h})"),
        (_with_gaps(owner["heads_first"], 0), _with_gaps(where["heads_first"], 0),
         f"2. transpose (correct)\n(B, h, T, d_h) = (1, {heads}, {T}, {d_h})"),
        (_with_gaps(owner["direct"], 0), _with_gaps(where["direct"], 0),
         f"direct reshape (wrong)\n(B, h, T, d_h) = (1, {heads}, {T}, {d_h})"),
    ]
    top_columns, stacked_rows = 2 * D + heads - 1, heads * (T + 1) - 1  # cells across the top row, down the bottom
    width = min(top_columns * CELL_WIDTH + 2.0, MAX_WIDTH)  # more columns: narrower cells, the same page width
    # each row's height: its cells, plus its titles, ticks and axis labels; then the suptitle and the legend
    row_heights = [(rows + DECORATION) * CELL_HEIGHT for rows in (T, stacked_rows)]
    fig = plt.figure(figsize=(width, sum(row_heights) + 1.5), layout="constrained")
    rows_grid = fig.add_gridspec(2, 1, height_ratios=row_heights)
    top_grid = rows_grid[0].subgridspec(1, 2, width_ratios=[D, D + heads - 1])
    # the bottom row's panels are d_h columns wide, far enough apart for their titles, centred under the top row
    gap = max(1, TITLE_COLUMNS - d_h)
    side = max(top_columns - 2 * d_h - gap, 1) / 2
    bottom_grid = rows_grid[1].subgridspec(1, 5, width_ratios=[side, d_h, gap, d_h, side])
    axes = [fig.add_subplot(top_grid[0]), fig.add_subplot(top_grid[1]),
            fig.add_subplot(bottom_grid[1]), fig.add_subplot(bottom_grid[3])]
    for ax, (colours, texts, panel_title) in zip(axes, panels, strict=True):
        _draw_panel(ax, colours, texts, heads, panel_title)
    axes[0].set_xticks(range(D))
    axes[0].set_yticks(range(T))
    axes[0].set_xlabel("feature f (D)", fontsize=FONT_SIZE)
    axes[0].set_ylabel("token t", fontsize=FONT_SIZE)
    columns = [c for c in range(D + heads - 1) if (c + 1) % (d_h + 1)]  # the columns that are not gaps
    axes[1].set_xticks(columns, [str(c % (d_h + 1)) for c in columns])
    axes[1].set_yticks(range(T))
    axes[1].set_xlabel("feature within head: " + " | ".join(f"head {i}" for i in range(heads)), fontsize=FONT_SIZE)
    axes[1].set_ylabel("token t", fontsize=FONT_SIZE)
    rows = [r for r in range(heads * (T + 1) - 1) if (r + 1) % (T + 1)]  # the rows that are not gaps
    for ax in axes[2:]:
        ax.set_xticks(range(d_h))
        ax.set_yticks(rows, [f"h{r // (T + 1)} r{r % (T + 1)}" for r in rows])
        ax.set_xlabel("feature within head (d_h)", fontsize=FONT_SIZE)
    axes[2].set_ylabel("head h, row (T axis)", fontsize=FONT_SIZE)
    axes[3].title.set_color(WRONG_COLOUR)
    for spine in axes[3].spines.values():
        spine.set(edgecolor=WRONG_COLOUR, linewidth=2.5)
    fig.suptitle(title, wrap=True)
    lines = -(-heads // LEGEND_COLUMNS)  # the legend's lines, as evenly filled as they can be
    fig.legend(handles=[Patch(color=HEAD_COLOURS[i], label=f"feature owned by head {i}") for i in range(heads)],
               loc="outside lower center", ncols=-(-heads // lines), frameon=False, fontsize=FONT_SIZE)
    return fig
