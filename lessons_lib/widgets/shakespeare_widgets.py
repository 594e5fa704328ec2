"""Lesson 10 widget: type a piece of text, pick a layer and a head of the Shakespeare model, and see
where that head looks and which character the model expects next.

A thin `LessonWidget` subclass (see `lessons_lib.widgets.base` for the shared interface:
``.controls``, ``.data``, ``.ui``): the numbers come from `lessons_lib.shakespeare` (one forward pass
per text, kept, so a change of layer or head only reads another map), the map is drawn with
`lessons_lib.plotting.attention_maps`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.artist import Artist
from matplotlib.collections import LineCollection
from numpy.typing import NDArray

from lessons_lib import shakespeare
from lessons_lib.plotting import MIN_FONT_POINTS
from lessons_lib.plotting.attention_maps import WEIGHT_LABEL, add_colorbar, draw_map, label_step, tile_maps, tiled_shape
from lessons_lib.shakespeare import ShakespeareModel, Vocabulary
from lessons_lib.widgets.base import LessonWidget, _as_mesh, _set_cells, map_in_words

__all__ = ["ALL", "DEFAULT_TEXT", "SHOWN", "TOP", "TextExplorer", "next_character_view", "read_text", "visible"]

# Hamlet, Act III, Scene 1: a play the model never trained on. The last "To sl" follows "to sleep"
# twice, so a head that copies from an earlier match has something to find.
DEFAULT_TEXT = (
    "And by opposing end them?--To die,--to sleep,--\nNo more; and by a sleep to say we end\n"
    "The heartache, and the thousand natural shocks\nThat flesh is heir to,--'tis a consummation\n"
    "Devoutly to be wish'd. To die,--to sleep;--\nTo sl"
)
SHOWN = 48  # the map shows at most the last SHOWN characters (queries and keys)
TOP = 10  # the likeliest next characters drawn as bars
FONT_SIZE = MIN_FONT_POINTS  # every text of the picture, in points
MONO = "DejaVu Sans Mono"  # one width for every character: the axis reads as the text does
GLYPHS = {" ": "\u00b7", "\n": "\u23ce"}  # a space and a newline, made visible: "·" and "⏎"
# The least distance between two character labels, in points: across, a monospaced character's width
# (0.6 em) and a little; down, a 9 pt line. Where cells are closer, every 2nd (or 4th) one is labelled.
ACROSS_PITCH = 0.62 * FONT_SIZE
MONO_ADVANCE = 1233 / 2048  # the width of every DejaVu Sans Mono character, in em
DOWN_PITCH = 1.15 * FONT_SIZE
ALL = "all"  # the head control's value for every head of the layer at once
KEPT_RUNS = 8  # forward passes kept (the most recent texts' weights, up to 4 MB each)
KEPT_TEXT_LAYERS = 4  # drawings of the per-text layer kept (the most recent texts', 7 MB each)


def visible(text: str) -> str:
    """``text`` with its spaces and newlines shown as "·" and "⏎" (for labels and readouts)."""
    return "".join(GLYPHS.get(ch, ch) for ch in text)


def _describe(ch: str) -> str:
    """A character the model lacks, named so it can be found: ``'é' (U+00E9)``, ``tab (U+0009)``."""
    names = {"\t": "tab", "\r": "carriage return", "\u00a0": "no-break space"}
    shown = names.get(ch, repr(ch) if ch.isprintable() else "an invisible character")
    return f"{shown} (U+{ord(ch):04X})"


def read_text(text: str, vocabulary: Vocabulary, most: int) -> NDArray[np.int64]:
    """``text`` -> its ``(T,)`` character ids, ``1 <= T <= most``; ``ValueError`` naming what is wrong.

    Windows line ends (``"\\r\\n"``, as pasted from some editors) are read as newlines."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    text = text.replace("\r\n", "\n")
    if not text:
        raise ValueError("the text is empty: type at least one character")
    unknown = sorted(set(text) - set(vocabulary.chars))
    if unknown:
        listed = ", ".join(_describe(ch) for ch in unknown[:4])
        listed += f" and {len(unknown) - 4} more" if len(unknown) > 4 else ""
        others = "".join(ch for ch in vocabulary.chars if not ch.isalnum() and ch not in GLYPHS)
        raise ValueError(
            f"the model has no character {listed}: it knows {len(vocabulary)} characters, the letters, digits, "
            f"space, newline and {others}"
        )
    if len(text) > most:
        raise ValueError(f"the text has {len(text)} characters; the model reads at most T_max = {most}")
    return vocabulary.encode(text)


def _run(model: ShakespeareModel, ids: NDArray[np.int64]) -> tuple[NDArray[np.float64], list[NDArray[Any]]]:
    """One forward pass: the next-character probabilities ``(V,)`` after the last character, and each
    layer's weights ``(h, T, T)``."""
    logits, weights = shakespeare.run(model, ids[None])
    last = logits[0, -1].astype(np.float64)
    p = np.exp(last - last.max())
    return p / p.sum(), [w[0] for w in weights]


def next_character_view(
    probabilities: NDArray[np.floating[Any]], weights: NDArray[Any], text: str, shown: int = SHOWN, top: int = TOP
) -> dict[str, Any]:
    """What the widget shows for one head, from the model's next-character ``probabilities (V,)`` (in
    vocabulary order), that head's ``weights (T, T)`` on ``text`` (``T`` characters) and its vocabulary.

    ``start`` the first position on the map (the map shows positions ``start .. T-1``, at most
    ``shown`` of them); ``map`` those queries' weights on those keys; ``hidden_weight`` the weight the
    last character puts on the ``start`` characters before the map; ``strongest`` the position the
    last character weighs most and ``strongest_weight`` that weight.
    """
    T = len(text)
    if weights.shape != (T, T):
        raise ValueError(f"weights must be one head's (T, T) = {(T, T)} for the text, got {weights.shape}")
    start = max(T - shown, 0)
    last = weights[-1]
    order = np.argsort(-probabilities, kind="stable")[:top]
    return {
        "start": start,
        "map": np.asarray(weights[start:, start:], dtype=np.float64),
        "labels": [visible(ch) for ch in text[start:]],
        "hidden_weight": float(last[:start].sum()),
        "strongest": int(last.argmax()),
        "strongest_weight": float(last.max()),
        "top_ids": order.tolist(),
        "top_probabilities": probabilities[order],
    }


class TextExplorer(LessonWidget):
    """Type a text, pick a layer and a head: that head's attention over the text's last characters,
    and the model's next-character prediction after the last one.

    Controls: ``text`` (a text box: any of the model's characters, newlines included, at most
    ``T_max``; the picture follows when the box loses focus), ``layer`` and ``head`` (a head's number,
    or ``"all"``: the layer's heads side by side, smaller, without the characters along their sides).
    ``.data`` holds those values and ``error`` (why the box could not be read, else ``None``: the
    picture keeps the last good text), ``characters`` (the text shown), ``ids``, every key of
    `next_character_view` (with ``"all"``, ``map`` is ``(h, n, n)`` and ``hidden_weight``,
    ``strongest``, ``strongest_weight`` hold one entry per head), ``probabilities (V,)``,
    ``top_characters`` (visible glyphs), ``likeliest`` and ``likeliest_probability``, the map's
    ``title`` and the ``readout``.
    """

    def __init__(
        self, model: ShakespeareModel | None = None, text: str | None = None, layer: int = 0, head: int | str = 0
    ) -> None:
        self.model = shakespeare.load_model() if model is None else model
        if not isinstance(self.model, ShakespeareModel):
            got = type(self.model).__name__
            raise TypeError(f"model must be a ShakespeareModel from shakespeare.load_model(), got {got}")
        c = self.model.config

        def whole(value: Any, count: int) -> bool:
            return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and 0 <= int(value) < count

        if not whole(layer, c.layers) or not (head == ALL or whole(head, c.heads)):
            raise ValueError(f"layer must be in 0 .. {c.layers - 1} and head in 0 .. {c.heads - 1} or {ALL!r}, "
                             f"got {layer!r}, {head!r}")
        text = DEFAULT_TEXT if text is None else text
        self._ids = read_text(text, self.model.vocabulary, c.context)  # a bad starting text is refused here
        self._characters = text.replace("\r\n", "\n")
        self._runs: OrderedDict[str, tuple[NDArray[np.float64], list[NDArray[Any]]]] = OrderedDict()
        controls = {
            "text": widgets.Textarea(
                value=text, continuous_update=False, rows=4, description=f"text (at most {c.context} characters)",
                layout=widgets.Layout(width="58em", max_width="100%"),
            ),
            "layer": widgets.Dropdown(options=[(f"layer {i}", i) for i in range(c.layers)], value=int(layer),
                                      description="layer"),
            "head": widgets.Dropdown(options=[*((f"head {j}", j) for j in range(c.heads)), ("all heads", ALL)],
                                     value=head if head == ALL else int(head), description="head"),
        }
        super().__init__(controls, size=(9.25, 4.8), rows=[["text"], ["layer", "head"]])

    # ----- numbers -------------------------------------------------------------------------------
    def _forward(self, characters: str) -> tuple[NDArray[np.float64], list[NDArray[Any]]]:
        """The forward pass on ``characters``, run once per text and kept for the `KEPT_RUNS` latest."""
        kept = self._runs.pop(characters, None)
        if kept is None:
            kept = _run(self.model, self._ids)
        self._runs[characters] = kept
        while len(self._runs) > KEPT_RUNS:
            self._runs.popitem(last=False)
        return kept

    def _compute(self) -> dict[str, Any]:
        c = self.model.config
        values = {name: control.value for name, control in self.controls.items()}
        error = None
        try:
            self._ids = read_text(values["text"], self.model.vocabulary, c.context)
            self._characters = values["text"].replace("\r\n", "\n")
        except (TypeError, ValueError) as problem:
            error = f"Could not read the text: {problem}. Still showing the last text the model could read."
        characters, layer, head = self._characters, int(values["layer"]), values["head"]
        probabilities, weights = self._forward(characters)
        heads = list(range(c.heads)) if head == ALL else [int(head)]
        views = [next_character_view(probabilities, weights[layer][j], characters) for j in heads]
        view = views[0]
        if head == ALL:  # one entry per head
            view = {**view, "map": np.stack([v["map"] for v in views])}
            view |= {key: np.array([v[key] for v in views]) for key in ("hidden_weight", "strongest_weight")}
            view["strongest"] = [v["strongest"] for v in views]
        chars = self.model.vocabulary.chars
        top = [visible(chars[i]) for i in view["top_ids"]]
        T, start = len(characters), view["start"]

        def target(v: dict[str, Any]) -> str:  # where the last character's largest weight goes
            back = T - 1 - v["strongest"]
            where = "itself" if back == 0 else f"{back} character{'s' if back > 1 else ''} back"
            return f"on '{visible(characters[v['strongest']])}' ({where})"

        if head == ALL:
            weight = "its largest weight " + "; ".join(
                f"in head {j}, {v['strongest_weight']:.2f}, {target(v)}" for j, v in zip(heads, views, strict=True))
            before = ", ".join(f"{v['hidden_weight']:.2f}" for v in views) + f" (heads 0-{c.heads - 1})"
        else:
            weight = f"its largest weight, {view['strongest_weight']:.2f}, {target(view)}"
            before = f"{view['hidden_weight']:.2f}"
        hidden = (f" The map shows the last {T - start} of {T} characters; the last one puts {before} of its "
                  f"weight on the {start} before them." if start else "")
        then = ", ".join(f"'{g}' {p:.2f}" for g, p in zip(top[1:4], view["top_probabilities"][1:4], strict=False))
        named = "every head" if head == ALL else f"head {head}"
        readout = (
            f"After '{'…' if T > 20 else ''}{visible(characters[-20:])}' the likeliest next character is '{top[0]}' "
            f"(p = {view['top_probabilities'][0]:.2f}; then {then}). Layer {layer}, {named}: the last character "
            f"puts {weight}.{hidden}"
        )
        return {
            **values, "error": error, "characters": characters, "ids": self._ids.tolist(), **view,
            "probabilities": probabilities, "top_characters": top, "likeliest": chars[view["top_ids"][0]],
            "likeliest_probability": float(view["top_probabilities"][0]),
            "title": f"layer {layer}, {'all heads' if head == ALL else f'head {head}'}", "readout": readout,
        }

    def _alt_text(self) -> str:
        d = self.data
        shown = "".join(d["labels"])
        if d["map"].ndim == 3:  # every head
            maps = "; ".join(f"head {j}: {map_in_words(m, d['labels'])}" for j, m in enumerate(d["map"]))
            what = f"the maps of layer {d['layer']}'s {len(d['map'])} heads side by side: {maps}"
        else:
            what = f"layer {d['layer']}, head {d['head']}'s attention map, queries down the side: " + map_in_words(
                d["map"], d["labels"])
        top = zip(d["top_characters"][:5], d["top_probabilities"][:5], strict=False)
        bars = ", ".join(f"'{g}' {p:.2f}" for g, p in top)
        return (f"Over the last {len(d['labels'])} characters ({shown}), {what}. Beside it, the five likeliest next "
                f"characters as bars: {bars}.")

    # ----- picture -------------------------------------------------------------------------------
    # Speed: the picture is drawn in three layers, each kept. What never changes (frames, the colour bar,
    # the probability axis) is drawn once; on it, what a text changes (its characters beside the map, the
    # tick marks, the prediction's bars) is drawn once per text and kept (`_layer`, by `_background_key`:
    # see `LessonWidget._render`); on that, a change of layer or head draws only the map and its title.
    # Characters are plain text artists, not axis tick labels, which Matplotlib lays out at length.
    def _build(self) -> list[Artist]:
        fig = self.figure
        map_ax = fig.add_axes((0.075, 0.12, 0.43, 0.8))
        bars_ax = fig.add_axes((0.68, 0.12, 0.29, 0.8))
        self._map_ax, self._bars_ax = map_ax, bars_ax
        labels = self.data["labels"]
        first = self.data["map"] if self.data["head"] != ALL else self.data["map"][0]  # _draw shows the real one
        grid = self._grid()  # room for every head's map side by side, each of `SHOWN` characters
        room = tiled_shape(SHOWN, SHOWN, *grid)
        self._map = _as_mesh(draw_map(map_ax, first, labels, labels, self.data["title"]), room)
        # Over a long text a head's weights are small: the map's colours follow their square roots (fixed,
        # 0 to 1), which keeps weights of 0.05 visible without hiding which weights are large. The map's mesh
        # holds sqrt(weights); the colour bar is labelled in weights. Each cell is one flat colour.
        _set_cells(self._map, np.sqrt(first))
        map_ax.set_xticks([], [])
        map_ax.set_yticks([], [])
        weights = [0, 0.05, 0.2, 0.5, 1]
        bar = add_colorbar(self._map, map_ax, f"{WEIGHT_LABEL} (square-root scale)",
                           gap=0.008, width=0.012,
                           ticks=np.sqrt(weights).tolist())
        bar.set_ticklabels([f"{w:g}" for w in weights])
        map_ax.apply_aspect()
        self._map_side = map_ax.get_position().height * fig.get_figheight() * 72  # the square map's side, in points
        text: dict[str, Any] = {"fontsize": FONT_SIZE, "fontfamily": MONO}
        below, left = map_ax.get_xaxis_transform(), map_ax.get_yaxis_transform()  # (data, axes), (axes, data)
        # One text per possible position, just outside the map (keys below it, queries left of it), and
        # a short tick mark at every position.
        self._keys = [map_ax.text(i, -0.014, "", transform=below, ha="center", va="top", **text) for i in range(SHOWN)]
        self._queries = [map_ax.text(-0.014, i, "", transform=left, ha="right", va="center", **text)
                         for i in range(SHOWN)]
        # A full map's keys as one text, its characters exactly one cell wide: drawn many times faster than
        # SHOWN texts of one character each (what a new text's time mostly was).
        self._row_size = self._map_side / SHOWN / MONO_ADVANCE  # points
        self._key_row = map_ax.text(0.5, -0.014, "", transform=map_ax.transAxes, ha="center", va="top",
                                    fontsize=self._row_size, fontfamily=MONO)
        self._ticks = [LineCollection([], transform=transform, colors="black", linewidths=0.6, clip_on=False)
                       for transform in (below, left)]
        for ticks in self._ticks:
            map_ax.add_collection(ticks, autolim=False)
            ticks.set_clip_on(False)  # outside the map, where the axes would clip it
        map_ax.xaxis.labelpad = 16  # below the characters
        map_ax.yaxis.labelpad = 12
        bars_ax.set_xlim(0, 1)
        bars_ax.set_ylim(TOP - 0.5, -0.5)  # the likeliest on top
        bars_ax.set_yticks([])
        bars_ax.set_xlabel("probability", fontsize=FONT_SIZE)
        bars_ax.tick_params(axis="x", labelsize=FONT_SIZE)
        for spine in ("top", "right"):
            bars_ax.spines[spine].set_visible(False)
        rows = range(TOP)
        self._bars = list(bars_ax.barh(rows, [0.0] * TOP, height=0.7, color="#3b6ea8"))
        self._values = [bars_ax.text(0.02, k, "", va="center", fontsize=FONT_SIZE) for k in rows]
        self._choices = [bars_ax.text(-0.03, k, "", transform=bars_ax.get_yaxis_transform(), ha="right",
                                      va="center", fontsize=FONT_SIZE + 1, fontfamily=MONO) for k in rows]
        bars_ax.set_title(" ", fontsize=FONT_SIZE, fontfamily=MONO)
        # With every head: each map named in its top right corner (above the diagonal: weights there are 0).
        self._names = [map_ax.text(0, 0, "", ha="right", va="top", color="white", fontsize=FONT_SIZE)
                       for _ in range(self.model.config.heads)]
        self._shape: tuple[int, ...] = (0, 0)
        self._per_text: list[Artist] = [self._key_row, *self._keys, *self._queries, *self._ticks, *self._bars,
                                        *self._values, *self._choices, bars_ax.title]
        self._per_head: list[Artist] = [self._map, map_ax.title, *self._names]  # the names lie on the maps
        return [*self._per_head, *self._per_text]

    _kept_layers = KEPT_TEXT_LAYERS  # the per-text layers kept (see `LessonWidget._render`)

    def _layer(self) -> list[Artist]:
        return self._per_text

    def _picture_key(self) -> Hashable:
        return (self.data["characters"], self.data["layer"], self.data["head"])  # a bad entry keeps the old text

    def _background_key(self) -> Hashable:
        # the characters and tick marks (none with every head) and the prediction are kept per text
        return (self.data["characters"], self.data["head"] == ALL)

    def _grid(self) -> tuple[int, int]:
        """With every head: the maps' grid, ``(rows, columns)``, as square as it can be."""
        h = self.model.config.heads
        columns = int(np.ceil(np.sqrt(h)))
        return -(-h // columns), columns

    def _label_step(self, positions: int, pitch: float) -> int:
        """Label every position of the map, or every 2nd or 4th where cells are closer than ``pitch``."""
        return label_step(self._map_side / positions, pitch, (1, 2, 4, 8))

    def _draw(self) -> None:
        d = self.data
        n = len(d["labels"])
        if d["head"] == ALL:  # the maps in a grid, a blank (NaN) row and column between them
            rows, columns = self._grid()
            picture = tile_maps(np.sqrt(d["map"]), rows * columns, columns)
        else:
            picture = np.sqrt(d["map"])  # see _build: the colours follow the square root
        if picture.shape != self._shape:  # the axes' lengths place the image, the tick marks and the characters
            height, width = picture.shape
            self._map_ax.set_xlim(-0.5, width - 0.5)
            self._map_ax.set_ylim(height - 0.5, -0.5)
            self._shape = picture.shape
        if self._background_key() not in self._backgrounds:
            self._draw_text_layer()
        _set_cells(self._map, picture)
        start = d["start"]
        span = f": characters {start}-{start + n - 1} of {start + n}" if start else ""
        self._map_ax.set_title(d["title"] + span, fontsize=FONT_SIZE)
        columns = self._grid()[1]
        roomy = self._map_side / columns >= 5 * FONT_SIZE  # a map wide enough for its name
        for j, name in enumerate(self._names):  # each map's name in its top right corner
            r, col = divmod(j, columns)
            name.set_position((col * (n + 1) + n - 0.7, r * (n + 1) - 0.3))
            name.set_text(f"head {j}" if d["head"] == ALL and roomy else "")

    def _draw_text_layer(self) -> None:
        """The artists that change with the text only: characters, tick marks and the prediction."""
        d = self.data
        labels = d["labels"]
        n = len(labels)
        every = d["head"] == ALL
        tick = 0.01  # axes fraction
        self._ticks[0].set_segments([] if every else [[(i, 0.0), (i, -tick)] for i in range(n)])
        self._ticks[1].set_segments([] if every else [[(0.0, i), (-tick, i)] for i in range(n)])
        in_a_row = not every and n == SHOWN and self._row_size >= FONT_SIZE
        self._key_row.set_text("".join(labels) if in_a_row else "")
        for texts, pitch in ((self._keys, ACROSS_PITCH), (self._queries, DOWN_PITCH)):
            step = self._label_step(n, pitch)
            alone = not every and not (in_a_row and texts is self._keys)
            for i, label in enumerate(texts):  # the last character always labelled, every step-th before it
                label.set_text(labels[i] if alone and i < n and (n - 1 - i) % step == 0 else "")
        for k, (bar, value, choice) in enumerate(zip(self._bars, self._values, self._choices, strict=True)):
            p = float(d["top_probabilities"][k])
            bar.set_width(p)
            value.set_x(p + 0.02)
            value.set_text(f"{p:.2f}")
            choice.set_text(d["top_characters"][k])
        self._bars_ax.set_title(f"next character after '{visible(d['characters'][-12:])}'", fontsize=FONT_SIZE,
                                fontfamily=MONO)
