"""Lesson 08's pictures draw the numbers they are given: the tiling trace and the peak-memory chart."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.image import AxesImage
from matplotlib.patches import Rectangle

from lessons_lib.efficient import TiledTrace, tiled_attention_trace
from lessons_lib.mha_numpy import causal_mask
from lessons_lib.plotting.tiling import plot_peak_memory, plot_tiling


@pytest.fixture(autouse=True)
def close_figures() -> None:
    plt.close("all")


def causal_trace(row: int = 1) -> TiledTrace:
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((6, 4)), rng.standard_normal((9, 4)), rng.standard_normal((9, 3))
    return tiled_attention_trace(q, k, v, causal_mask(6, 9), block_size=3, query_block_size=2, row=row)


def test_tiling_grid_shows_the_visit_order() -> None:
    trace = causal_trace()
    fig = plot_tiling(trace)
    grid_ax, row_ax = fig.axes[:2]
    images = [a for a in grid_ax.get_children() if isinstance(a, AxesImage)]
    assert len(images) == 1
    shown = np.asarray(images[0].get_array(), dtype=float)
    assert np.array_equal(np.isnan(shown), trace.order == 0)  # skipped tiles take the "bad" colour
    assert np.array_equal(np.nan_to_num(shown), trace.order)
    texts = [t.get_text() for t in grid_ax.texts]
    expected = [str(step) if step else "skip" for step in trace.order.ravel()]
    assert texts == expected
    assert texts.count("skip") == int((trace.order == 0).sum()) == 1
    # a colour bar explains the colour, and the axes say what they show
    assert len(fig.axes) == 3 and "visited" in fig.axes[2].get_ylabel()
    assert "key block" in grid_ax.get_xlabel() and "query block" in grid_ax.get_ylabel()
    assert [t.get_text() for t in grid_ax.get_xticklabels()] == ["0-2", "3-5", "6-8"]
    assert [t.get_text() for t in grid_ax.get_yticklabels()] == ["0-1", "2-3", "4-5"]
    assert fig.get_suptitle() and grid_ax.get_title() and row_ax.get_title()
    # the traced row's query block is outlined
    outlines = [p for p in grid_ax.patches if isinstance(p, Rectangle)]
    assert len(outlines) == 1 and outlines[0].get_y() == pytest.approx(trace.row // 2 - 0.5)


def test_tiling_row_panel_draws_the_running_statistics() -> None:
    trace = causal_trace(row=1)
    fig = plot_tiling(trace)
    row_ax = fig.axes[1]
    max_line, sum_line = row_ax.get_lines()
    assert np.allclose(max_line.get_ydata(), trace.row_max)
    assert np.allclose(sum_line.get_ydata(), trace.row_sum)
    assert np.array_equal(max_line.get_xdata(), [1, 2, 3])
    legend = row_ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == ["running max m", "running sum l"]
    labels = {t.get_text() for t in row_ax.texts}
    assert {f"{m:.2f}" for m in trace.row_max} <= labels and {f"{s:.2f}" for s in trace.row_sum} <= labels
    assert "skipped" in row_ax.get_xlabel() and row_ax.get_ylabel()  # query 1 skips key block 3


def test_tiling_rejects_other_input() -> None:
    with pytest.raises(TypeError, match="TiledTrace"):
        plot_tiling(np.zeros((2, 2)))  # type: ignore[arg-type]


def test_peak_memory_chart_draws_the_measurements_with_readable_ticks() -> None:
    lengths, naive, tiled = [64, 128, 256, 512], [2**19, 2**21, 2**23, 2**25], [2**18, 2**19, 2**20, 2**21]
    fig = plot_peak_memory(lengths, naive, tiled, block_size=32)
    ax = fig.axes[0]
    naive_line, tiled_line = ax.get_lines()
    assert np.array_equal(naive_line.get_xdata(), lengths)
    assert np.allclose(naive_line.get_ydata(), np.array(naive) / 2**20)
    assert np.allclose(tiled_line.get_ydata(), np.array(tiled) / 2**20)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    # only the measured lengths are labelled: no minor-tick labels to collide with them
    assert [t.get_text() for t in ax.get_xticklabels()] == ["64", "128", "256", "512"]
    assert len(ax.xaxis.get_minorticklocs()) == 0 and len(ax.yaxis.get_minorticklocs()) == 0
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0.25", "0.5", "1", "2", "4", "8", "16", "32"]
    assert tiled_line.get_label() == "tiled, block = 32"
    assert ax.get_xlabel() and "MiB" in ax.get_ylabel() and ax.get_title()
    # drawn labels do not overlap
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels()]
    assert all(a.x1 < b.x0 for a, b in itertools.pairwise(boxes))


def test_peak_memory_chart_needs_one_value_per_length() -> None:
    with pytest.raises(ValueError, match="one entry per length"):
        plot_peak_memory([64, 128], [1, 2], [1], block_size=32)
    with pytest.raises(ValueError, match="one entry per length"):
        plot_peak_memory([], [], [], block_size=32)
