"""Lesson 10 pictures: heads of the Shakespeare model on a passage of real text, with its characters
on both axes, and the loss each head's and each layer's ablation adds.

The maps are lesson 05's (`attention_maps.draw_map` and its colour bar), two to a row, so a passage
of up to `MAX_CHARACTERS` characters keeps its labels legible. Spaces and newlines, invisible as
labels, are drawn as visible marks (`char_labels`).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from numpy.typing import NDArray

from lessons_lib.plotting.attention_maps import MAP_CMAP, WEIGHT_LABEL, add_colorbar, draw_map

__all__ = ["MAX_CHARACTERS", "char_labels", "plot_ablation", "plot_text_maps"]

MAX_CHARACTERS = 20  # at two maps to a row, more characters than this would make their 9-point labels overlap
SHOWN = {" ": "\u2423", "\n": "\u21b5"}  # a space as an open box, a newline as a return arrow
MAP_SIDE = 2.85  # inches per map: two maps and their labels fit the page column
MAP_GAP = 0.7  # inches between the maps of a row (the second map's query labels)


def char_labels(text: str) -> list[str]:
    """One label per character of ``text``: a space shown as an open box, a newline as a return arrow."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return [SHOWN.get(ch, ch) for ch in text]


def plot_text_maps(maps: NDArray[np.floating], text: str, titles: Sequence[str]) -> Figure:
    """Attention maps ``maps (n, T, T)`` (1 to 4 heads, self-attention over the ``T`` characters of
    ``text``), two to a row, each titled, with one colour bar."""
    if not isinstance(maps, np.ndarray) or maps.ndim != 3 or maps.shape[1] != maps.shape[2]:
        raise ValueError(f"maps must be (n, T, T) attention maps, got {getattr(maps, 'shape', type(maps).__name__)}")
    n, T, _ = maps.shape
    if not 1 <= n <= 4:
        raise ValueError(f"plot_text_maps draws 1 to 4 maps, got n={n}")
    labels = char_labels(text)
    if len(labels) != T or not 1 <= T <= MAX_CHARACTERS:
        raise ValueError(f"text must have one character per map row, T={T} (at most {MAX_CHARACTERS}), "
                         f"got {len(labels)} characters")
    if len(titles) != n:
        raise ValueError(f"titles must hold one title per map ({n}), got {len(titles)}")
    columns = min(n, 2)
    rows = -(-n // columns)
    left, right, top, bottom, row_gap = 0.6, 0.9, 0.35, 0.55, 0.75
    width = left + columns * MAP_SIDE + (columns - 1) * MAP_GAP + right
    height = top + rows * MAP_SIDE + (rows - 1) * row_gap + bottom
    fig = plt.figure(figsize=(width, height))
    images = []
    for k in range(n):
        row, column = divmod(k, columns)
        x0 = left + column * (MAP_SIDE + MAP_GAP)
        y0 = height - top - (row + 1) * MAP_SIDE - row * row_gap
        ax = fig.add_axes((x0 / width, y0 / height, MAP_SIDE / width, MAP_SIDE / height))
        images.append(draw_map(ax, maps[k], labels, labels, titles[k]))
        ax.tick_params(labelsize=9)
        if row < rows - 1:
            ax.set_xlabel("")
    add_colorbar(images[0], fig.axes[columns - 1], WEIGHT_LABEL, gap=0.12 / width, width=0.12 / width,
                 bottom=fig.axes[(rows - 1) * columns].get_position().y0)
    return fig


def plot_ablation(heads: NDArray[np.floating], layers: NDArray[np.floating]) -> Figure:
    """The validation loss added by zeroing each head, ``heads (layers, h)``, as a grid with its values
    written in, and by zeroing each layer's whole attention, ``layers (layers,)``, as bars."""
    heads, layers = np.asarray(heads, dtype=np.float64), np.asarray(layers, dtype=np.float64)
    if heads.ndim != 2 or layers.shape != heads.shape[:1]:
        raise ValueError(f"heads must be (layers, h) and layers (layers,), got {heads.shape} and {layers.shape}")
    L, h = heads.shape
    fig, (grid, bars) = plt.subplots(1, 2, figsize=(7.6, 0.5 + 0.55 * L + 0.9), width_ratios=[h, 3.2])
    fig.subplots_adjust(left=0.09, right=0.97, bottom=0.22, top=0.86, wspace=0.45)
    top = max(float(heads.max()), 1e-9)
    grid.imshow(heads, cmap=MAP_CMAP, vmin=0.0, vmax=top, aspect="auto", interpolation="nearest")
    for (i, j), value in np.ndenumerate(heads):
        grid.text(j, i, f"{value:+.3f}", ha="center", va="center", fontsize=9,
                  color="black" if value > 0.6 * top else "white")
    grid.set_xticks(range(h), [f"head {j}" for j in range(h)])
    grid.set_yticks(range(L), [f"layer {i}" for i in range(L)])
    grid.tick_params(length=0, labelsize=9)
    grid.set_title("one head zeroed: loss added (nats)", fontsize=9)
    bars.barh(range(L), layers, color="#0072B2")
    for i, value in enumerate(layers):
        bars.text(value, i, f" {value:+.3f}", va="center", fontsize=9)
    bars.set_yticks(range(L), [f"layer {i}" for i in range(L)])
    bars.invert_yaxis()
    bars.set_xlim(min(0.0, float(layers.min())), float(layers.max()) * 1.45 + 1e-9)
    bars.tick_params(labelsize=9)
    bars.set_xlabel("loss added (nats)", fontsize=9)
    bars.set_title("a layer's attention zeroed", fontsize=9)
    return fig
