"""`lessons_lib.plotting.head_merge`: the lesson 03 picture of concatenation and W_o's row blocks.

The figure must show what the lesson says it shows: the merged ``(T, D)`` row with each head's
block in its own colour, and ``W_o``'s rows coloured by the head they read, numbers written in the
cells, with titles, axis labels and a legend."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.image import AxesImage
from numpy.typing import NDArray

from lessons_lib import mha_numpy
from lessons_lib.plotting import head_merge


def labels(h: int, T: int, d_h: int) -> NDArray[np.int64]:
    """Entry (head i, token t, feature j) = 100 i + 10 t + j, as in the lesson."""
    head, token, feature = np.arange(h)[:, None, None], np.arange(T)[None, :, None], np.arange(d_h)[None, None, :]
    result: NDArray[np.int64] = 100 * head + 10 * token + feature
    return result


@pytest.mark.parametrize("h, T, d_h", [(2, 4, 4), (3, 2, 2), (1, 3, 5)])
def test_merge_blocks_matches_the_library_merge(h: int, T: int, d_h: int) -> None:
    heads_out = labels(h, T, d_h)
    merged, head_ids = head_merge.merge_blocks(heads_out)
    assert np.array_equal(merged, mha_numpy.merge_heads(heads_out[None].astype(np.float64)).astype(np.int64)[0])
    assert head_ids.shape == (T, h * d_h)
    assert np.array_equal(head_ids, merged // 100)  # the label's hundreds digit is its head


def test_wo_row_heads() -> None:
    assert head_merge.wo_row_heads(2, 4).tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert head_merge.wo_row_heads(3, 1).tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="must be positive"):
        head_merge.wo_row_heads(0, 4)


def test_plot_shows_the_arrays_it_was_given() -> None:
    h, T, d_h = 2, 4, 4
    D = h * d_h
    heads_out = labels(h, T, d_h)
    wo = mha_numpy.init_weights(D, seed=1)["wo"]
    fig = head_merge.plot_head_merge(heads_out, wo)
    try:
        left, right = fig.axes
        (left_image,) = [a for a in left.get_children() if isinstance(a, AxesImage)]
        (right_image,) = [a for a in right.get_children() if isinstance(a, AxesImage)]
        assert np.array_equal(np.asarray(left_image.get_array()), head_merge.merge_blocks(heads_out)[1])
        assert np.array_equal(np.asarray(right_image.get_array()), np.repeat(np.arange(h), d_h)[:, None] * np.ones(D))
        left_texts = [t.get_text() for t in left.texts]
        merged = mha_numpy.merge_heads(heads_out[None].astype(np.float64)).astype(np.int64)[0]  # (T, D)
        assert left_texts == [str(v) for v in merged.ravel()]
        right_texts = [t.get_text() for t in right.texts]
        assert right_texts == [f"{v:.2f}" for v in np.round(wo, 2).ravel()]
        for ax in (left, right):
            assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
        assert "token" in left.get_ylabel() and "row of W_o" in right.get_ylabel()
        (legend,) = fig.legends
        assert [t.get_text() for t in legend.get_texts()] == ["head 0", "head 1"]
        assert fig.get_suptitle()
        assert min(float(t.get_fontsize()) for t in left.texts + right.texts) >= 6  # legible
    finally:
        plt.close(fig)


def test_plot_writes_other_numbers_with_two_decimals_left_of_w_o() -> None:
    heads_out = np.random.default_rng(0).normal(size=(2, 3, 2))
    fig = head_merge.plot_head_merge(heads_out, np.eye(4))
    try:
        left, right = fig.axes
        merged = mha_numpy.merge_heads(heads_out[None])[0]  # (T, D)
        assert [t.get_text() for t in left.texts] == [f"{v:.2f}" for v in np.round(merged, 2).ravel()]
        fig.canvas.draw()  # constrained layout places the panels
        assert left.get_position().x1 < right.get_position().x0  # the merged rows left of W_o
    finally:
        plt.close(fig)


def test_plot_bad_inputs() -> None:
    with pytest.raises(ValueError, match=r"heads_out must be a NumPy array laid out as \(h, T, d_h\)"):
        head_merge.plot_head_merge(labels(2, 4, 4)[None], np.zeros((8, 8)))
    with pytest.raises(ValueError, match=r"wo must be a NumPy array of shape \(D, D\) = \(8, 8\)"):
        head_merge.plot_head_merge(labels(2, 4, 4), np.zeros((8, 4)))
    with pytest.raises(ValueError, match="can draw 1 to 8 heads"):
        head_merge.merge_blocks(np.zeros((9, 2, 1)))


def test_module_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, lessons_lib.plotting.head_merge; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
