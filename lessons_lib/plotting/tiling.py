"""Lesson 08 pictures: the tiles tiled attention visits, one row's running statistics, peak memory.

`plot_tiling` draws a `lessons_lib.efficient.TiledTrace` (recorded by
`efficient.tiled_attention_trace` from the lesson's own arrays); `plot_peak_memory` draws peak
memory measured by the lesson. Both create a figure and return it.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

from lessons_lib.efficient import TiledTrace

__all__ = ["plot_peak_memory", "plot_tiling"]

ORDER_CMAP = "viridis"
SKIPPED_COLOUR = "#d9d9d9"
ROW_COLOUR = "#d62728"
MIB = 2**20


def _span_labels(count: int, step: int, length: int) -> list[str]:
    """``"0-3"``, ``"4-7"``, ...: the positions each block covers (the last may be shorter)."""
    return [f"{start}-{min(start + step, length) - 1}" for start in range(0, count * step, step)]


def _label(ax: Axes, x: float, y: float, above: bool) -> None:
    """The value ``y`` written just above or just below its marker, starting at its right edge (clear of
    the steep line that comes in from the left)."""
    offset = (2, 6) if above else (2, -15)
    ax.annotate(f"{y:.2f}", (x, y), textcoords="offset points", xytext=offset, ha="left", fontsize=9)


def plot_tiling(trace: TiledTrace, title: str = "Tiled attention: which tiles are visited") -> Figure:
    """Left: the ``(query block, key block)`` grid, each visited tile numbered and coloured by the
    step at which it was visited, skipped (fully masked) tiles grey. Right: query ``trace.row``'s
    running max and running sum after each key block."""
    if not isinstance(trace, TiledTrace):
        raise TypeError(f"trace must be a TiledTrace from efficient.tiled_attention_trace, got {type(trace).__name__}")
    order = trace.order
    n_query_blocks, n_key_blocks = order.shape
    # 7.6 inches plus the saved margins: shown at its own size in the page column (plotting.PAGE_WIDTH)
    fig, (grid_ax, row_ax) = plt.subplots(1, 2, figsize=(7.6, 4.0), width_ratios=(1.1, 1), layout="constrained")

    visited = np.where(order == 0, np.nan, order.astype(float))  # NaN: drawn in the 'bad' colour
    cmap = plt.get_cmap(ORDER_CMAP).with_extremes(bad=SKIPPED_COLOUR)
    image = grid_ax.imshow(visited, cmap=cmap, vmin=1, vmax=max(1, int(order.max())), interpolation="nearest")
    for (i, j), step in np.ndenumerate(order):
        text, colour = (str(step), "white" if step < 0.6 * order.max() else "black") if step else ("skip", "#555555")
        grid_ax.text(j, i, text, ha="center", va="center", fontsize=10, color=colour)
    T = trace.output.shape[0]
    grid_ax.set_xticks(range(n_key_blocks), _span_labels(n_key_blocks, trace.block_size, trace.key_length))
    grid_ax.set_yticks(range(n_query_blocks), _span_labels(n_query_blocks, trace.query_block_size, T))
    grid_ax.tick_params(labelsize=9)
    grid_ax.set_xlabel("key block (key positions)")
    grid_ax.set_ylabel("query block (query positions)")
    grid_ax.set_title("visit order; grey = skipped (all masked)", fontsize=10)
    row_block = trace.row // trace.query_block_size
    grid_ax.add_patch(
        Rectangle((-0.5, row_block - 0.5), n_key_blocks, 1, fill=False, edgecolor=ROW_COLOUR, linewidth=2.5)
    )
    colorbar = fig.colorbar(image, ax=grid_ax, shrink=0.85)
    colorbar.set_label("step at which the tile is visited")
    colorbar.ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers

    steps = list(range(1, len(trace.row_max) + 1))
    row_max = np.array(trace.row_max, dtype=float)
    row_max[np.isneginf(row_max)] = np.nan  # nothing allowed seen yet: no maximum to draw
    row_ax.plot(steps, row_max, "o-", label="running max m")
    row_ax.plot(steps, trace.row_sum, "s-", label="running sum l")
    for x, m, total in zip(steps, row_max, trace.row_sum, strict=True):
        max_above = np.isnan(m) or m >= total  # each label on the side away from the other line
        if not np.isnan(m):
            _label(row_ax, x, m, above=max_above)
        _label(row_ax, x, total, above=not max_above)
    skipped = [j + 1 for j in range(n_key_blocks) if order[row_block, j] == 0]
    for skip in skipped:
        row_ax.axvspan(skip - 0.4, skip + 0.4, color=SKIPPED_COLOUR, zorder=0)
    row_ax.set_xticks(steps)
    row_ax.set_xlabel("key blocks read so far" + (" (grey: skipped)" if skipped else ""))
    row_ax.set_ylabel("value after the block")
    row_ax.margins(y=0.2)
    row_ax.legend(fontsize=9, loc="best")
    row_ax.set_title(f"query {trace.row} (its block outlined red at left)", fontsize=10)
    fig.suptitle(title)
    return fig


def plot_peak_memory(
    lengths: Sequence[int], naive_bytes: Sequence[int], tiled_bytes: Sequence[int], block_size: int
) -> Figure:
    """Peak memory (MiB) of naive and tiled attention against ``T = S``, both axes logarithmic.

    Ticks sit only at the measured lengths and at whole powers of two of MiB, so no minor-tick
    labels crowd each other.
    """
    if not len(lengths) == len(naive_bytes) == len(tiled_bytes) > 0:
        raise ValueError(
            f"lengths, naive_bytes and tiled_bytes need one entry per length, got "
            f"{len(lengths)}, {len(naive_bytes)}, {len(tiled_bytes)}"
        )
    fig, ax = plt.subplots(figsize=(5.5, 3.6), layout="constrained")
    naive_mib, tiled_mib = np.asarray(naive_bytes) / MIB, np.asarray(tiled_bytes) / MIB
    ax.plot(lengths, naive_mib, "o-", label="naive (materialised weights)")
    ax.plot(lengths, tiled_mib, "s-", label=f"tiled, block = {block_size}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(list(lengths)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(list(lengths), [str(t) for t in lengths])
    low, high = np.floor(np.log2(min(tiled_mib.min(), naive_mib.min()))), np.ceil(np.log2(naive_mib.max()))
    y_ticks = [2.0**e for e in range(int(low), int(high) + 1)]
    ax.set_yticks(y_ticks, [f"{y:g}" for y in y_ticks])
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("T = S (positions)")
    ax.set_ylabel("peak memory (MiB)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9)
    ax.set_title("Peak memory of one attention call (tracemalloc)")
    return fig
