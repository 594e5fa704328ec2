"""Lesson 05 widgets: explore the heads of the trained toy layer, re-slice its weights, split an input.

Thin `LessonWidget` subclasses (see `lessons_lib.widgets.base` for the shared interface:
``.controls``, ``.data``, ``.ui``): the numbers come from `lessons_lib.inspect_heads`, the drawing
from `lessons_lib.plotting.attention_maps`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.artist import Artist
from matplotlib.text import Text
from numpy.typing import NDArray

from lessons_lib.inspect_heads import (
    EVAL_SEED,
    ToyHeads,
    average_over_heads,
    column_blocks,
    embed,
    features_per_head,
    head_columns,
    head_maps,
    head_options,
    load_toy_heads,
    run_layer,
    split_layout,
    tokens_per_head,
)
from lessons_lib.plotting import MIN_FONT_POINTS
from lessons_lib.plotting.attention_maps import (
    WEIGHT_LABEL,
    add_colorbar,
    draw_columns,
    draw_cut_matrix,
    draw_map,
    draw_split_layout,
    draw_tiled_maps,
    head_ticks,
    label_tokens,
    tile_maps,
    tiled_shape,
)
from lessons_lib.toy_task import make_batch
from lessons_lib.widgets.base import LessonWidget, _as_mesh, _pin_axis_labels, _set_cells, map_in_words

__all__ = ["HeadExplorer", "HeadReslicer", "SplitExplorer"]

PROJECTIONS = ("wq", "wk", "wv")
TILES_PER_ROW = 4  # HeadReslicer: at most this many maps are drawn at once, in one row, each labelled
NAME_SIZE = MIN_FONT_POINTS  # HeadReslicer: the "head i" over each map, in points


def _pages(h: int) -> list[tuple[str, int]]:
    """HeadReslicer's "heads shown" options for ``h`` heads: groups of `TILES_PER_ROW`, by first head."""
    return [
        (f"heads {first}-{min(first + TILES_PER_ROW, h) - 1}" if h > 1 else "head 0", first)
        for first in range(0, h, TILES_PER_ROW)
    ]


class HeadExplorer(LessonWidget):
    """Pick a head and a sequence: its attention map next to its columns of ``wq``, ``wk``, ``wv``.

    Controls: ``head`` (0 .. h-1), ``sequence`` (0 .. B-1), ``average`` (show the mean over heads
    instead of the chosen head's map). ``.data`` holds those three values and ``labels`` (the
    sequence's tokens), ``map (T, S)``, ``pattern`` (the map in words), ``title`` (the map's),
    ``columns`` (start, stop) and the head's column blocks ``wq, wk, wv (D, d_h)``. With ``average``
    on, no head computes the map, so ``columns`` and the blocks are ``None`` and the three column panels are left blank.
    """

    def __init__(self, model: ToyHeads | None = None, batch_size: int = 4, seed: int = EVAL_SEED) -> None:
        self.model = load_toy_heads() if model is None else model
        self.tokens, _ = make_batch(batch_size, self.model.config, seed=seed)
        _, self.weights = run_layer(self.model, self.tokens)  # (B, h, T, S)
        self.averaged = average_over_heads(self.weights)  # (B, T, S)
        heads = [(f"head {i}", i) for i in range(self.model.layer.heads)]
        controls = {
            "head": widgets.Dropdown(options=heads, value=0, description="head"),
            "sequence": widgets.IntSlider(value=0, min=0, max=batch_size - 1, description="sequence"),
            "average": widgets.Checkbox(value=False, description="average over heads"),
        }
        super().__init__(controls, size=(9.0, 2.8))
        # Drawn now: the axis labels stay where they are (every sequence's tokens are single letters).
        _pin_axis_labels(self._axes[0].xaxis, self._axes[0].yaxis)

    def _changed(self, name: str) -> None:
        # While the map is the average, no head is shown: the head control has nothing to change.
        self.controls["head"].disabled = bool(self.controls["average"].value)
        self.refresh()

    def _compute(self) -> dict[str, Any]:
        head, item = int(self.controls["head"].value), int(self.controls["sequence"].value)
        average = bool(self.controls["average"].value)
        layer = self.model.layer
        shown = "mean of all heads (no head's map)" if average else f"head {head}"
        columns = None if average else (head * layer.head_width, (head + 1) * layer.head_width)
        labels = self.model.labels(self.tokens[item])
        weights = self.averaged[item] if average else self.weights[item, head]
        who = "The mean of all heads" if average else f"Head {head}"
        pattern = map_in_words(weights, labels)
        return {
            "head": head,
            "sequence": item,
            "average": average,
            "labels": labels,
            "map": weights,
            "title": f"seq {item}: {shown}",
            "pattern": pattern,
            "readout": f"{who} on sequence {item} ({' '.join(labels)}): {pattern}.",
            "columns": columns,
            **{name: None if average else head_columns(getattr(layer, name), head, layer.heads)
               for name in PROJECTIONS},
        }

    def _alt_text(self) -> str:
        d = self.data
        if d["columns"] is None:
            beside = "three empty panels: no head computes the mean, so no columns are shown"
        else:
            start, stop = d["columns"]
            beside = f"head {d['head']}'s columns {start} to {stop - 1} of wq, wk and wv as colours"
        return (f"Attention map, {d['title']}: queries down the side, keys along the bottom, "
                f"{d['pattern']}. Beside it, {beside}.")

    def _build(self) -> list[Artist]:
        # An empty slot after the map leaves room for its colour bar and the bar's label.
        axes = self.figure.subplots(1, 5, gridspec_kw={"width_ratios": [2.0, 0.4, 1, 1, 1]})
        axes[1].remove()
        self._axes = [axes[0], *axes[2:]]
        # right=0.9 leaves the last colour bar room for its ticks and label inside the picture.
        self.figure.subplots_adjust(left=0.07, right=0.9, bottom=0.17, top=0.87, wspace=0.3)
        labels = self.data["labels"]
        self._map = _as_mesh(draw_map(self._axes[0], self.data["map"], labels, labels))  # a mesh draws faster
        self._labelled = self.data["sequence"]  # the sequence whose tokens label the map's axes
        layer = self.model.layer
        # One colour scale for all three matrices and every head, so heads and matrices compare.
        limit = max(float(np.abs(getattr(layer, name)).max()) for name in PROJECTIONS)
        self._columns = []
        self._blank = np.full((layer.width, layer.head_width), np.nan)  # a column panel while no head is shown
        for ax, name in zip(self._axes[1:], PROJECTIONS, strict=True):
            block = self._blank if self.data[name] is None else self.data[name]
            self._columns.append(_as_mesh(draw_columns(ax, block, name, 0, limit)))
            # As wide as the matrix, no wider; wv moves values, it does not shape the map.
            ax.set_xlabel(f"d_h={layer.head_width} columns" if name != "wv" else "values (not the map)", fontsize=9)
            ax.set_xticks([])
        # Colour bars are drawn once, into the cached background: they cost nothing per update.
        add_colorbar(self._map, self._axes[0], WEIGHT_LABEL)
        add_colorbar(self._columns[-1], self._axes[-1], "weight entry")
        # The tokens change with the sequence only: the map's axes (token labels) are drawn once per sequence,
        # on the parts that never change (`_layer`), so a sequence shown for the first time draws only them.
        self._labels_layer = [self._axes[0].xaxis, self._axes[0].yaxis]
        return [*self._labels_layer, self._map, *self._columns, *(ax.title for ax in self._axes)]

    def _background_key(self) -> Hashable:
        sequence: int = self.data["sequence"]
        return sequence

    def _layer(self) -> list[Artist]:
        return self._labels_layer

    def _draw(self) -> None:
        d = self.data
        _set_cells(self._map, d["map"])
        if d["sequence"] != self._labelled:
            label_tokens(self._axes[0], d["labels"], d["labels"])
            self._labelled = d["sequence"]
        self._axes[0].set_title(d["title"], fontsize=9)
        for ax, image, name in zip(self._axes[1:], self._columns, PROJECTIONS, strict=True):
            if d["columns"] is None:  # the average: no head computes it, so no columns to show
                _set_cells(image, self._blank)
                ax.set_title(f"{name}: no head", fontsize=9)
            else:
                start, stop = d["columns"]
                _set_cells(image, d[name])
                ax.set_title(f"{name}[:, {start}:{stop}]", fontsize=9)


class HeadReslicer(LessonWidget):
    """Keep ``D`` fixed, choose ``h`` (a divisor of ``D``): the same ``wq, wk`` cut into h heads.

    Controls: ``heads`` (the valid h for D), ``shown`` (the first of the at most `TILES_PER_ROW` heads
    whose maps are drawn, so every drawn map keeps its token labels and its name), ``sequence``
    (0 .. B-1). ``.data`` holds those three values and ``d_h``, ``boundaries`` (each head's column
    range), ``wq_blocks, wk_blocks (h, D, d_h)``, ``maps (h, T, T)`` (every head, drawn or not) for
    the chosen sequence, ``visible`` (the heads drawn), its token ``labels`` and the maps' ``title``.
    Only the trained ``h`` gives the trained maps; any other cut is the same numbers read as
    different heads. A new ``h`` shows its first heads again.
    """

    def __init__(self, model: ToyHeads | None = None, batch_size: int = 4, seed: int = EVAL_SEED) -> None:
        self.model = load_toy_heads() if model is None else model
        self.tokens, _ = make_batch(batch_size, self.model.config, seed=seed)
        self.x = embed(self.model, self.tokens)  # (B, T, D)
        layer = self.model.layer
        controls = {
            "heads": widgets.Dropdown(options=head_options(layer.width), value=layer.heads, description="h"),
            "shown": widgets.Dropdown(options=_pages(layer.heads), value=0, description="heads shown"),
            "sequence": widgets.IntSlider(value=0, min=0, max=batch_size - 1, description="sequence"),
        }
        controls["shown"].disabled = len(_pages(layer.heads)) == 1  # all heads fit: nothing to choose
        super().__init__(controls, size=(9.0, 2.8))
        _pin_axis_labels(self._maps_ax.xaxis, self._maps_ax.yaxis)  # the maps' axes have none to place per update
        # Wide enough for the longest group any h offers ("heads 12-15"), not only the first h's.
        longest = max(len(name) for h in head_options(layer.width) for name, _ in _pages(h))
        controls["shown"].layout.width = f"{0.6 * (longest + len('heads shown')) + 4:.1f}em"

    def _changed(self, name: str) -> None:
        if name == "heads":  # a new cut: its own pages, from its first heads
            pages = _pages(int(self.controls["heads"].value))
            self._replace_options("shown", pages, 0)
            self.controls["shown"].disabled = len(pages) == 1  # all heads fit: nothing to choose
        self.refresh()

    def _compute(self) -> dict[str, Any]:
        h, item = int(self.controls["heads"].value), int(self.controls["sequence"].value)
        first = int(self.controls["shown"].value)
        layer = self.model.layer
        d_h = layer.width // h
        labels = self.model.labels(self.tokens[item])
        visible = list(range(first, min(first + TILES_PER_ROW, h)))
        if h == 1:
            heads = "the one head's map"
        elif len(visible) == h:
            heads = f"maps of heads 0-{h - 1}"
        else:
            heads = f"maps of heads {visible[0]}-{visible[-1]} of 0-{h - 1}"
        maps = head_maps(self.x[item : item + 1], layer.wq, layer.wk, h)[0]  # (1, h, T, T) -> (h, T, T)
        each = "; ".join(f"head {i}: {map_in_words(maps[i], labels)}" for i in visible)
        return {
            "heads": h,
            "shown": first,
            "sequence": item,
            "d_h": d_h,
            "boundaries": [(i * d_h, (i + 1) * d_h) for i in range(h)],
            "wq_blocks": column_blocks(layer.wq, h),
            "wk_blocks": column_blocks(layer.wk, h),
            "maps": maps,
            "visible": visible,
            "labels": labels,
            "title": f"sequence {item} ({' '.join(labels)}): {heads}",
            "readout": f"h = {h} heads of d_h = {d_h} columns, sequence {item}. {each[0].upper()}{each[1:]}.",
        }

    def _alt_text(self) -> str:
        d = self.data
        return (f"Left: wq, with lines cutting its columns into h = {d['heads']} blocks of d_h = {d['d_h']}. "
                f"Right: {d['title']}. {d['readout']}")

    def _build(self) -> list[Artist]:
        self._wq_ax, self._maps_ax = self.figure.subplots(1, 2, gridspec_kw={"width_ratios": [1, 3.3]})
        self.figure.subplots_adjust(left=0.06, right=0.9, bottom=0.17, top=0.84, wspace=0.45)
        self._edges = draw_cut_matrix(self._wq_ax, self.model.layer.wq)
        self._maps_ax.set_anchor("E")  # the maps hug their colour bar, however few they are
        visible = self.data["maps"][self.data["visible"]]
        tiles = draw_tiled_maps(self._maps_ax, visible, slots=len(visible), per_row=TILES_PER_ROW)
        _, T, S = self.data["maps"].shape
        self._tiles = _as_mesh(tiles, tiled_shape(T, S, 1, TILES_PER_ROW))  # room for the widest row of maps
        add_colorbar(self._wq_ax.images[0], self._wq_ax, "wq entry")  # drawn once, in the cached background
        add_colorbar(self._tiles, self._maps_ax, WEIGHT_LABEL)
        self._names: list[Text] = []
        self._shown: tuple[int, int] | None = None
        self._maps_ax.axis("on")
        for spine in self._maps_ax.spines.values():
            spine.set_visible(False)
        self._maps_ax.tick_params(length=0, labelsize=9)
        # The maps' axes (ticks and token labels) and the head names (`_lay_out_maps` adds them) are drawn on
        # every update, and the rest of the maps' axes is blank: one background serves every h, group of heads
        # and sequence, so no state draws the whole figure (a first visit draws what a revisit draws).
        axes = [self._maps_ax.xaxis, self._maps_ax.yaxis]
        self._fixed = [self._tiles, *self._edges, *axes, self._wq_ax.title, self._maps_ax.title]
        return list(self._fixed)

    def _tiled(self) -> NDArray[np.float64]:
        """The drawn maps of ``.data`` side by side, one row (see `tile_maps`)."""
        visible = self.data["maps"][self.data["visible"]]
        return tile_maps(visible, slots=len(visible), per_row=TILES_PER_ROW)

    def _lay_out_maps(self) -> None:
        """Axes and head names for the drawn maps, in one row."""
        d = self.data
        S, visible = d["maps"].shape[2], d["visible"]
        tiled = self._tiled()
        rows, cols = tiled.shape
        ax = self._maps_ax
        ax.set_xlim(-0.5, cols - 0.5)  # the tiles' mesh has room for more: the limits show these
        ax.set_ylim(rows - 0.5, -0.5)
        for name in self._names:
            name.remove()
        self._names = [
            ax.text(slot * (S + 1) + (S - 1) / 2, -0.7, f"head {i}", ha="center", va="bottom", fontsize=NAME_SIZE)
            for slot, i in enumerate(visible)
        ] if d["heads"] > 1 else []
        for name in self._names:
            name.set_animated(True)  # left out of the background, drawn on every update
        self._dynamic = [*self._fixed, *self._names]
        ax.apply_aspect()  # place the axes for the new grid now: an update draws the maps without a full draw
        self._shown = (d["heads"], d["shown"])

    def _draw(self) -> None:
        d = self.data
        if (d["heads"], d["shown"]) != self._shown:
            self._lay_out_maps()
        (T, S), count = d["maps"].shape[1:], len(d["visible"])
        self._maps_ax.set_xticks([c * (S + 1) + s for c in range(count) for s in range(S)], list(d["labels"]) * count)
        self._maps_ax.set_yticks(range(T), d["labels"])
        for col, line in enumerate(self._edges, start=1):
            line.set_visible(col % d["d_h"] == 0)  # a line between neighbouring heads
        self._wq_ax.set_title(f"wq cut into h={d['heads']} blocks of d_h={d['d_h']}", fontsize=9)
        _set_cells(self._tiles, self._tiled())
        self._maps_ax.set_title(d["title"], fontsize=9, pad=18)


def _runs(values: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``: compact text for a sorted list of indices."""
    parts: list[str] = []
    start = previous = values[0]
    for value in [*values[1:], None]:
        if value is not None and value == previous + 1:
            previous = value
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if value is not None:
            start = previous = value
    return ", ".join(parts)


class SplitExplorer(LessonWidget):
    """Correct split (reshape then transpose) vs the wrong direct reshape, on a ``(T, D)`` input.

    Controls: ``split`` ("correct" / "wrong"), ``heads`` (the valid h for D, above 1). ``.data``
    holds those two values and ``d_h``, ``layout (T, D)`` head ids, per head the input ``features``
    and token positions (``tokens``) it receives, the ``legend`` text and the ``title``.
    """

    def __init__(self, length: int = 4, width: int = 8, heads: int = 2) -> None:
        self.length, self.width = length, width
        options = [n for n in head_options(width) if n > 1]
        if heads not in options:
            raise ValueError(f"heads must be one of the divisors of width={width} above 1: {options}, got {heads}")
        controls = {
            "split": widgets.ToggleButtons(options=["correct", "wrong"], value="correct", description="split"),
            "heads": widgets.Dropdown(options=options, value=heads, description="h"),
        }
        super().__init__(controls, size=(7.6, 2.6))

    def _compute(self) -> dict[str, Any]:
        mode, h = str(self.controls["split"].value), int(self.controls["heads"].value)
        layout = split_layout(self.length, self.width, h, mode)
        features, tokens = features_per_head(layout, h), tokens_per_head(layout, h)
        how = "reshape then transpose" if mode == "correct" else "direct reshape (wrong)"
        lines = [f"head {i}: {'token' if len(t) == 1 else 'tokens'} {_runs(t)}, features {_runs(f)}"
                 for i, (f, t) in enumerate(zip(features, tokens, strict=True))]  # one per head
        return {
            "split": mode,
            "heads": h,
            "d_h": self.width // h,
            "layout": layout,
            "features": features,
            "tokens": tokens,
            "legend": "\n".join(lines),
            "title": f"{how}, h={h}: colour = head",
            "readout": f"{how[0].upper()}{how[1:]}, h = {h}: " + "; ".join(lines) + ".",
        }

    def _alt_text(self) -> str:
        d = self.data
        return (f"The {self.length} x {self.width} input, each entry coloured by the head it goes to. "
                f"{d['readout']}")

    def _build(self) -> list[Artist]:
        self._ax = self.figure.add_axes((0.08, 0.18, 0.46, 0.7))
        self._image = _as_mesh(draw_split_layout(self._ax, self.data["layout"], self.data["heads"], ""))
        most = max(self.controls["heads"].options)  # one static bar for every h offered: head ids 0 .. most-1
        add_colorbar(self._image, self._ax, "head", **head_ticks(most))
        # The longest line ("head 0: tokens 0-3, features 0-3", 33 characters) ends inside the picture.
        self._legend = self.figure.text(0.63, 0.85, "", va="top", fontsize=9, family="monospace")
        return [self._image, self._legend, self._ax.title]

    def _draw(self) -> None:
        _set_cells(self._image, self.data["layout"])
        self._legend.set_text(self.data["legend"])
        self._ax.set_title(self.data["title"], fontsize=9)
