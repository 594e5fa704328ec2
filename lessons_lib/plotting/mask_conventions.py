"""Lesson 04 picture: one mask written in the three conventions the lesson meets.

`mask_conventions` computes the three arrays (plain NumPy, no torch); `plot_mask_conventions`
draws them side by side and returns the figure. Colour shows what a cell *means* (may attend or
blocked), the same in every panel; the text in a cell shows the value that convention *stores*.
Colour carries a category, so the figure has a legend rather than a colour bar. The two colours
differ in lightness, not only in hue (pale green against dark grey, with white text on the dark
cells), so they stay apart for a reader with red-green colour blindness and in greyscale print.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from numpy.typing import NDArray

from lessons_lib.plotting import MAX_FIGURE_INCHES

__all__ = [
    "ALLOWED_COLOUR",
    "BLOCKED_COLOUR",
    "BLOCKED_TEXT_COLOUR",
    "PANEL_TITLES",
    "mask_conventions",
    "plot_mask_conventions",
]

ALLOWED_COLOUR = "#a1d99b"  # pale green: may attend
BLOCKED_COLOUR = "#636363"  # dark grey: blocked (a luminance contrast of 3.7:1 with the green)
BLOCKED_TEXT_COLOUR = "white"  # readable on the dark grey; the pale green cells keep black text
PANEL_TITLES = (
    "ours: allowed\nTrue = may attend",
    "nn.MultiheadAttention bool attn_mask\nTrue = blocked",
    "float (additive) mask\n0 = keep, -inf = blocked",
)


def mask_conventions(allowed: NDArray[np.bool_]) -> dict[str, NDArray[np.generic]]:
    """``allowed (T, S)`` (True = may attend) in three conventions.

    Returns ``{"allowed": allowed, "mha_bool": ~allowed (True = blocked),
    "float": 0.0 where allowed, -inf where blocked}``, each ``(T, S)``.
    """
    if not isinstance(allowed, np.ndarray) or allowed.dtype != np.bool_ or allowed.ndim != 2:
        is_array = isinstance(allowed, np.ndarray)
        what = f"dtype {allowed.dtype}, shape {allowed.shape}" if is_array else type(allowed).__name__
        raise ValueError(f"allowed must be a boolean NumPy array laid out as (T, S), got {what}; "
                         f"make sure you pass allowed.numpy() for a torch tensor")
    return {"allowed": allowed, "mha_bool": ~allowed, "float": np.where(allowed, 0.0, -np.inf)}


def _cell_text(value: object) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "T" if value else "F"
    number = float(value)  # type: ignore[arg-type]  # the float panel holds 0.0 and -inf
    return "-inf" if number == -np.inf else format(number, "g")


def plot_mask_conventions(allowed: NDArray[np.bool_]) -> Figure:
    """Three panels for one ``allowed (T, S)`` mask: ours, ``nn.MultiheadAttention``'s boolean, float."""
    arrays = mask_conventions(allowed)
    T, S = allowed.shape
    cmap = ListedColormap([BLOCKED_COLOUR, ALLOWED_COLOUR])  # 0 = blocked, 1 = may attend
    # About 0.38 in per key column in each of the three panels: within the page column up to
    # S = 6 with every label at 9 pt; a wider mask gets narrower cells.
    size = (min(MAX_FIGURE_INCHES, 0.9 + 1.15 * S), 1.6 + 0.4 * T)
    fig, axes = plt.subplots(1, 3, figsize=size, layout="constrained", sharey=True)
    for ax, array, title in zip(axes, arrays.values(), PANEL_TITLES, strict=True):
        ax.imshow(allowed.astype(int), cmap=cmap, vmin=0, vmax=1, interpolation="nearest")  # colour = meaning
        for t in range(T):
            for s in range(S):
                colour = "black" if allowed[t, s] else BLOCKED_TEXT_COLOUR
                ax.text(s, t, _cell_text(array[t, s]), ha="center", va="center", fontsize=9, color=colour)
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(S))
        ax.set_yticks(range(T))
        ax.tick_params(length=0, labelsize=9)
        ax.set_xlabel("key position s", fontsize=9)
    axes[0].set_ylabel("query position t", fontsize=9)
    handles = [Patch(facecolor=ALLOWED_COLOUR, edgecolor="black", label="may attend"),
               Patch(facecolor=BLOCKED_COLOUR, edgecolor="black", label="blocked")]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=9)
    fig.suptitle(f"One mask, three conventions (T = {T} queries, S = {S} keys)", fontsize=11)
    return fig
