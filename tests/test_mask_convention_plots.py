"""`lessons_lib.plotting.mask_conventions`: the lesson 04 picture of one mask in three conventions.

Colour shows the meaning (the same in every panel), the text shows the stored value; the figure
has titles, axis labels (query position / key position) and a legend."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.image import AxesImage

from lessons_lib import mha_numpy
from lessons_lib.plotting import mask_conventions


@pytest.mark.parametrize("T, S", [(4, 4), (4, 6), (1, 3)])
def test_three_conventions(T: int, S: int) -> None:
    allowed = mha_numpy.causal_mask(T, S)
    arrays = mask_conventions.mask_conventions(allowed)
    assert list(arrays) == ["allowed", "mha_bool", "float"]
    assert np.array_equal(arrays["allowed"], allowed)
    assert np.array_equal(arrays["mha_bool"], ~allowed) and arrays["mha_bool"].dtype == np.bool_
    assert np.array_equal(arrays["float"][allowed], np.zeros(allowed.sum()))
    assert np.all(np.isneginf(arrays["float"][~allowed].astype(np.float64)))


def test_the_float_mask_added_to_scores_equals_the_boolean_mask() -> None:
    """What the picture claims: adding the float mask blocks exactly what the boolean mask blocks."""
    allowed = mha_numpy.causal_mask(4, 6)
    scores = np.random.default_rng(0).normal(size=(4, 6))
    added = mha_numpy.softmax(scores + mask_conventions.mask_conventions(allowed)["float"].astype(np.float64))
    assert np.allclose(added, mha_numpy.softmax(np.where(allowed, scores, -np.inf)))
    assert np.all(added[~allowed] == 0) and np.allclose(added.sum(-1), 1.0)


def test_plot_shows_the_arrays() -> None:
    T, S = 4, 6
    allowed = mha_numpy.causal_mask(T, S)
    fig = mask_conventions.plot_mask_conventions(allowed)
    try:
        assert len(fig.axes) == 3
        arrays = list(mask_conventions.mask_conventions(allowed).values())
        for ax, array, title in zip(fig.axes, arrays, mask_conventions.PANEL_TITLES, strict=True):
            (image,) = [a for a in ax.get_children() if isinstance(a, AxesImage)]
            assert np.array_equal(np.asarray(image.get_array()), allowed.astype(int))  # colour = meaning
            texts = [t.get_text() for t in ax.texts]
            if array.dtype == np.bool_:
                expected = ["T" if v else "F" for v in array.ravel()]
            else:
                expected = ["-inf" if v == -np.inf else "0" for v in array.ravel().tolist()]
            assert texts == expected
            assert ax.get_title() == title
            assert ax.get_xlabel() == "key position s"
        assert fig.axes[0].get_ylabel() == "query position t"
        (legend,) = fig.legends
        assert [t.get_text() for t in legend.get_texts()] == ["may attend", "blocked"]
        assert "T = 4" in fig.get_suptitle() and "S = 6" in fig.get_suptitle()
    finally:
        plt.close(fig)


def _luminance(colour: str) -> float:
    """Relative luminance (WCAG 2) of a colour matplotlib understands."""
    from matplotlib.colors import to_rgb

    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour)]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(first: str, second: str) -> float:
    high, low = sorted((_luminance(first), _luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_colours_differ_in_lightness_and_the_text_stays_readable() -> None:
    """Colour-vision-safe: the two meanings differ in lightness (>= 3:1, WCAG's bound for graphics),
    and each cell's text contrasts with its own background (>= 4.5:1)."""
    assert _contrast(mask_conventions.ALLOWED_COLOUR, mask_conventions.BLOCKED_COLOUR) >= 3.0
    allowed = mha_numpy.causal_mask(4, 6)
    fig = mask_conventions.plot_mask_conventions(allowed)
    try:
        for ax in fig.axes:
            for text, may_attend in zip(ax.texts, allowed.ravel(), strict=True):
                background = mask_conventions.ALLOWED_COLOUR if may_attend else mask_conventions.BLOCKED_COLOUR
                assert _contrast(str(text.get_color()), background) >= 4.5, (text.get_text(), background)
    finally:
        plt.close(fig)


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match=r"boolean NumPy array laid out as \(T, S\).*allowed.numpy\(\)"):
        mask_conventions.mask_conventions(np.zeros((4, 4)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"got list"):
        mask_conventions.plot_mask_conventions([[True]])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        mask_conventions.mask_conventions(np.ones(4, dtype=bool))


def test_module_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, lessons_lib.plotting.mask_conventions; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
