"""Lesson 02's figure: the split into heads, and the direct reshape, drawn from label arrays."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from collections.abc import Iterator

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure
from numpy.typing import NDArray

from lessons_lib import mha_numpy
from lessons_lib.plotting import head_split


@pytest.fixture(autouse=True)
def close_figures() -> Iterator[None]:
    yield
    plt.close("all")


def labels_for(T: int, D: int) -> NDArray[np.int64]:
    return 100 * np.arange(T)[:, None] + np.arange(D)[None, :]  # (T, D): 100 * token + feature


@pytest.mark.parametrize(("T", "D", "heads"), [(4, 8, 2), (3, 12, 4), (5, 6, 1), (2, 6, 6)])
def test_layouts_are_the_library_split_and_the_direct_reshape(T: int, D: int, heads: int) -> None:
    labels = labels_for(T, D)
    layouts = head_split.split_layouts(labels, heads)
    assert tuple(layouts) == head_split.LAYOUTS
    assert np.array_equal(layouts["heads_first"], mha_numpy.split_heads(labels[None].astype(np.float64), heads)[0])
    assert np.array_equal(layouts["direct"], labels.reshape(1, heads, T, D // heads)[0])
    assert np.array_equal(layouts["tokens_heads"].reshape(T, D), labels)
    # the correct split keeps every token on its own row: row t of every head is token t
    assert (layouts["heads_first"] // 100 == np.arange(T)[None, :, None]).all()


def test_feature_owners_give_each_block_of_d_h_features_to_one_head() -> None:
    owners = head_split.feature_owners(3, 8, 4)
    assert owners.shape == (3, 8)
    assert owners[0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert (owners == owners[0]).all()
    heads_first = head_split.split_layouts(owners, 4)["heads_first"]
    assert all((heads_first[i] == i).all() for i in range(4)), "after the correct split every head is one colour"


def test_direct_reshape_mixes_the_heads_features_in_the_lessons_case() -> None:
    direct = head_split.split_layouts(head_split.feature_owners(4, 8, 2), 2)["direct"]
    assert direct[0].tolist() == [[0] * 4, [1] * 4, [0] * 4, [1] * 4]


def image_data(fig: Figure) -> list[NDArray[np.float64]]:
    """Each panel's colour data (the owning head of each cell), NaN in the gaps."""
    return [np.asarray(ax.get_images()[0].get_array(), dtype=np.float64) for ax in fig.axes]


def drop_gaps(data: NDArray[np.float64], axis: int) -> NDArray[np.float64]:
    """The panel's cells without its all-NaN gap lines (rows for axis 0, columns for axis 1)."""
    keep = ~np.isnan(data).all(axis=1 - axis)
    return data[keep] if axis == 0 else data[:, keep]


@pytest.mark.parametrize(("T", "D", "heads"), [(4, 8, 2), (3, 8, 4)])
def test_figure_colours_every_cell_by_its_owning_head_and_labels_it(T: int, D: int, heads: int) -> None:
    labels = labels_for(T, D)
    d_h = D // heads
    fig = head_split.plot_head_split(labels, heads, title="my split")
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 4
    owners = head_split.split_layouts(head_split.feature_owners(T, D, heads), heads)
    input_data, split4, heads_first, direct = image_data(fig)
    assert np.array_equal(input_data, owners["tokens_features"])
    assert np.array_equal(drop_gaps(split4, 1), owners["tokens_features"])
    assert np.array_equal(drop_gaps(heads_first, 0), owners["heads_first"].reshape(heads * T, d_h))
    assert np.array_equal(drop_gaps(direct, 0), owners["direct"].reshape(heads * T, d_h))
    # the texts are the labels of each layout; in the direct panel, row 1 is head 0's second row
    layouts = head_split.split_layouts(labels, heads)
    for ax, key in zip(fig.axes, head_split.LAYOUTS, strict=True):
        assert sorted(int(t.get_text()) for t in ax.texts) == sorted(layouts[key].ravel().tolist())
    direct_texts = fig.axes[3].texts
    row_1 = sorted((t.get_position()[0], int(t.get_text())) for t in direct_texts if round(t.get_position()[1]) == 1)
    assert [label for _, label in row_1] == layouts["direct"][0, 1].tolist()
    # titles carry the shapes, read from the arrays
    titles = [ax.get_title() for ax in fig.axes]
    assert f"(B, T, D) = (1, {T}, {D})" in titles[0]
    assert f"(B, T, h, d_h) = (1, {T}, {heads}, {d_h})" in titles[1]
    assert f"(B, h, T, d_h) = (1, {heads}, {T}, {d_h})" in titles[2]
    assert "wrong" in titles[3] and "correct" in titles[2]
    assert all(ax.get_xlabel() for ax in fig.axes)
    assert fig.axes[0].get_ylabel() and fig.axes[2].get_ylabel()
    assert fig.get_suptitle() == "my split"
    legend_texts = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert legend_texts == [f"feature owned by head {i}" for i in range(heads)]


def test_figure_reads_row_by_row_and_marks_the_wrong_panel() -> None:
    """Two rows: the input and step 1 on top; step 2 and, beside it, the direct reshape, framed as wrong."""
    fig = head_split.plot_head_split(labels_for(4, 8), 2)
    fig.canvas.draw()  # constrained layout places the panels
    boxes = [ax.get_position() for ax in fig.axes]
    assert boxes[0].x1 < boxes[1].x0 and boxes[2].x1 < boxes[3].x0  # left to right within a row
    assert min(boxes[0].y0, boxes[1].y0) > max(boxes[2].y1, boxes[3].y1)  # the steps' row above the results
    wrong, right = fig.axes[3], fig.axes[2]
    assert wrong.title.get_color() != right.title.get_color()
    assert all(spine.get_edgecolor() == wrong.spines["left"].get_edgecolor() for spine in wrong.spines.values())
    assert wrong.spines["left"].get_edgecolor() != right.spines["left"].get_edgecolor()


def test_figure_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"width D=8 is not divisible by heads h=3"):
        head_split.plot_head_split(labels_for(4, 8), 3)
    with pytest.raises(ValueError, match=r"at most 10 heads, got heads=12"):
        head_split.plot_head_split(labels_for(2, 12), 12)
    with pytest.raises(ValueError, match=r"labels must have 2 axes \(T, D\)"):
        head_split.plot_head_split(labels_for(4, 8)[None], 2)
    with pytest.raises(TypeError, match=r"table must be a NumPy array"):
        head_split.split_layouts([[1, 2], [3, 4]], 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"heads \(h\) must be positive"):
        head_split.split_layouts(labels_for(2, 4), 0)
