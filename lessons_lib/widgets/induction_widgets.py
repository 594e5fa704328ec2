"""Lesson 09 widget: type or pick a token sequence, pick a layer and a head, and see that head's
attention map, the model's next-token predictions, and what zeroing the head does to them.

A thin `LessonWidget` subclass (see `lessons_lib.widgets.base` for the shared interface:
``.controls``, ``.data``, ``.ui``): the numbers come from `lessons_lib.induction`, the drawing from
`lessons_lib.plotting.induction_maps` and `lessons_lib.plotting.attention_maps`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import ipywidgets as widgets
import matplotlib
import numpy as np
from matplotlib.artist import Artist
from matplotlib.collections import LineCollection

from lessons_lib.induction import (
    EVAL_SEED,
    InductionModel,
    induction_targets,
    load_induction_model,
    repeated_tokens,
    run,
)
from lessons_lib.mha_numpy import softmax
from lessons_lib.plotting import MIN_FONT_POINTS
from lessons_lib.plotting.attention_maps import WEIGHT_LABEL, add_colorbar, draw_map, label_step
from lessons_lib.plotting.induction_maps import draw_next_token_panel, token_labels
from lessons_lib.widgets.base import LessonWidget, _as_mesh, _pin_axis_labels, _set_cells, map_in_words

__all__ = ["InductionExplorer", "example_sequences", "next_token_view", "parse_tokens"]

TYPED = "typed"  # the `sequence` option meaning "whatever is in the tokens box"
FONT_SIZE = MIN_FONT_POINTS  # every text of the picture, in points
# The least distance between two token labels along a map's axis, in points: a 9 pt label's line (12.5 px at
# `DISPLAY_DPI` 100) and a little space. Where the map's cells are closer, only every 2nd (or 4th) is labelled.
LABEL_PITCH = 1.15 * FONT_SIZE


def parse_tokens(text: str, vocab: int, most: int) -> list[int]:
    """``"3 14 15"`` (spaces or commas) -> ``[3, 14, 15]``; ``ValueError`` saying what is wrong."""
    parts = text.replace(",", " ").split()

    def is_id(part: str) -> bool:  # ASCII digits only: superscripts and full-width digits pass str.isdigit
        return part.isascii() and part.isdigit()

    if not all(is_id(part) for part in parts):
        bad = next(part for part in parts if not is_id(part))
        raise ValueError(f"{bad[:12]!r} is not a token id: write whole numbers 0 .. {vocab - 1}, separated by spaces")
    ids = [int(part) for part in parts]
    if not 2 <= len(ids) <= most:
        raise ValueError(f"give 2 to {most} tokens (the model reads at most {most}), got {len(ids)}")
    if max(ids) >= vocab:
        raise ValueError(f"token ids go from 0 to {vocab - 1}, got {max(ids)}")
    return ids


def example_sequences(model: InductionModel, seed: int = EVAL_SEED) -> dict[str, tuple[str, list[int]]]:
    """The widget's ready-made sequences, by key: ``(label, token ids)``, each as long as the model reads."""
    c = model.config
    n = c.context
    shuffled = np.random.default_rng(seed).permutation(c.vocab).tolist()
    short = shuffled[:6]
    gap = shuffled[:7] + shuffled[10 : 10 + n - 14] + shuffled[:7]
    return {
        "repeat": (f"{c.half} tokens, then the same again", repeated_tokens(1, c.vocab, c.half, seed)[0, :n].tolist()),
        "random": (f"{n} different tokens: no repeat", shuffled[:n]),
        "short": ("6 tokens, again and again", (short * n)[:n]),
        "gap": ("7 tokens, others, the 7 again", gap),
    }


def next_token_view(model: InductionModel, ids: list[int], layer: int, head: int) -> dict[str, Any]:
    """Everything the widget shows for one sequence, with and without head ``(layer, head)``.

    ``map (n, n)`` that head's weights; ``predicted`` / ``predicted_ablated`` the most likely next
    token after each position; ``p_next`` / ``p_next_ablated`` ``(n - 1,)`` the probability given
    to the token that actually comes next; ``loss`` / ``loss_ablated`` their mean cross-entropy over
    the whole sequence; ``loss_seen`` / ``loss_seen_ablated`` the same over only the ``seen``
    positions whose own token occurred before (``nan`` if none; on a repeated sequence, the repeated
    half ``L .. 2L-2``, as the lesson's repeated-half loss);
    ``previous_weight`` the head's mean weight on ``t - 1``; ``induction_weight`` its mean weight on
    the token after the earlier copy of token ``t`` (`induction.induction_targets`) over the
    ``copies`` positions that have one, ``nan`` if none. An immediate repeat (``"7 7"``) is left out:
    the token after its earlier copy is the query itself, so a weight there says nothing about induction
    (``self_targets`` counts them).
    """
    tokens = np.array([ids], dtype=np.int64)
    n = tokens.shape[1]
    logits, weights = run(model, tokens)
    ablated, _ = run(model, tokens, ablate=[(layer, head)])
    probs, probs_ablated = softmax(logits[0]), softmax(ablated[0])  # (n, V)
    t, following = np.arange(n - 1), tokens[0, 1:]
    head_map = weights[layer][0, head]  # (n, n)
    targets = induction_targets(tokens[0])
    has_copy = np.flatnonzero((targets >= 0) & (targets != np.arange(n)))  # not the query itself
    p_next, p_next_ablated = probs[t, following], probs_ablated[t, following]
    seen = targets[:-1] >= 0  # (n - 1,): positions whose own token occurred before (a repeat's second copy)
    return {
        "map": head_map,
        "predicted": probs.argmax(axis=-1).tolist(),
        "predicted_ablated": probs_ablated.argmax(axis=-1).tolist(),
        "p_next": p_next,
        "p_next_ablated": p_next_ablated,
        "loss": float(-np.log(p_next).mean()),
        "loss_ablated": float(-np.log(p_next_ablated).mean()),
        "loss_seen": float(-np.log(p_next[seen]).mean()) if seen.any() else float("nan"),
        "loss_seen_ablated": float(-np.log(p_next_ablated[seen]).mean()) if seen.any() else float("nan"),
        "seen": int(seen.sum()),
        "previous_weight": float(head_map[np.arange(1, n), np.arange(n - 1)].mean()),
        "induction_weight": float(head_map[has_copy, targets[has_copy]].mean()) if has_copy.size else float("nan"),
        "copies": int(has_copy.size),
        "self_targets": int(np.sum((targets >= 0) & (targets == np.arange(n)))),
    }


def _count(number: int, noun: str) -> str:
    """``1 position``, ``3 positions``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


class InductionExplorer(LessonWidget):
    """Pick a ready-made sequence or type one, then a layer and a head.

    Controls: ``sequence`` (a key of `example_sequences`, or ``"typed"``), ``tokens`` (a text box of
    token ids; editing it switches ``sequence`` to ``"typed"``, picking a sequence fills it in),
    ``layer`` and ``head``. ``.data`` holds those values and ``ids`` (the tokens shown), ``error``
    (why the box could not be read, else ``None``: the previous tokens stay), ``labels``, every key
    of `next_token_view`, the picture's ``title`` and the ``readout``.
    """

    def __init__(self, model: InductionModel | None = None, layer: int | None = None, head: int = 0) -> None:
        self.model = load_induction_model() if model is None else model
        c = self.model.config
        layer = c.layers - 1 if layer is None else layer
        if layer not in range(c.layers) or head not in range(c.heads):
            raise ValueError(
                f"layer must be in 0 .. {c.layers - 1} and head in 0 .. {c.heads - 1}, got {layer}, {head}"
            )
        self.examples = example_sequences(self.model)
        self._ids = self.examples["repeat"][1]
        self._shown_sequence = "repeat"  # what the dropdown said when the shown tokens were read
        options = [(label, key) for key, (label, _) in self.examples.items()] + [("typed below", TYPED)]
        controls = {
            "sequence": widgets.Dropdown(options=options, value="repeat", description="sequence"),
            "tokens": widgets.Text(
                value=" ".join(map(str, self._ids)), continuous_update=False, description=f"tokens (0-{c.vocab - 1})",
                layout=widgets.Layout(width="58em", max_width="100%"),  # a whole 23-token sequence in view
            ),
            "layer": widgets.Dropdown(options=[(f"layer {i}", i) for i in range(c.layers)], value=layer,
                                      description="layer"),
            "head": widgets.Dropdown(options=[(f"head {j}", j) for j in range(c.heads)], value=head,
                                     description="head"),
        }
        super().__init__(controls, size=(9.25, 3.5), rows=[["sequence", "layer", "head"], ["tokens"]])
        # Drawn: the axis labels stay beside the widest token labels (two digits) from now on.
        _pin_axis_labels(self._map_ax.xaxis, self._map_ax.yaxis, self._panel_ax.xaxis)

    def _changed(self, name: str) -> None:
        if name == "sequence" and self.controls["sequence"].value != TYPED:
            self._set_quietly("tokens", " ".join(map(str, self.examples[self.controls["sequence"].value][1])))
        if name == "tokens":
            self._set_quietly("sequence", TYPED)
        self.refresh()
        if self.data["error"] is not None:  # box and dropdown show what the chart shows; the error quotes the entry
            self._set_quietly("tokens", " ".join(map(str, self.data["ids"])))
            self._set_quietly("sequence", self._shown_sequence)
            self.data["tokens"] = self.controls["tokens"].value
            self.data["sequence"] = self._shown_sequence
        else:
            self._shown_sequence = self.controls["sequence"].value

    def _set_quietly(self, name: str, value: Any) -> None:
        self._holding = True
        try:
            self.controls[name].value = value
        finally:
            self._holding = False

    def _compute(self) -> dict[str, Any]:
        c = self.model.config
        values = {name: control.value for name, control in self.controls.items()}
        error = None
        try:
            self._ids = parse_tokens(values["tokens"], c.vocab, c.context)
        except ValueError as problem:
            entry = values["tokens"] if len(values["tokens"]) <= 40 else values["tokens"][:37] + "..."
            error = f"Could not read {entry!r}: {problem}. Still showing the previous tokens."
        ids, layer, head = self._ids, int(values["layer"]), int(values["head"])
        view = next_token_view(self.model, ids, layer, head)
        shown = " ".join(map(str, view["predicted"]))
        has = "has" if view["copies"] == 1 else "have"
        copies = (f"on the token after the earlier copy {view['induction_weight']:.2f} "
                  f"({_count(view['copies'], 'position')} {has} one)" if view["copies"]
                  else "no token repeats after a gap, so there is no earlier copy to follow")
        if view["self_targets"]:
            copies += (f"; {_count(view['self_targets'], 'immediate repeat')} left out (the token after its earlier "
                       "copy is the query itself)")
        seen = (f"; on the {_count(view['seen'], 'position')} whose token appeared before (a repeat): "
                f"{view['loss_seen']:.2f} with every head, {view['loss_seen_ablated']:.2f} with this head zeroed"
                if view["seen"] else "")
        readout = (
            f"Layer {layer}, head {head} on this sequence: mean weight on the previous token "
            f"{view['previous_weight']:.2f}, {copies}. Predicted next tokens (the last one follows the sequence): "
            f"{shown}. Mean loss over the whole sequence, {_count(len(ids) - 1, 'known next token')}: "
            f"{view['loss']:.2f} with every head, {view['loss_ablated']:.2f} with this head zeroed{seen} "
            f"(ln {c.vocab} = {np.log(c.vocab):.2f} is a uniform guess)."
        )
        return {
            **values, "ids": ids, "error": error, "labels": token_labels(ids), **view,
            "title": f"layer {layer}, head {head}", "readout": readout,
        }

    def _build(self) -> list[Artist]:
        map_ax, panel_ax = self.figure.subplots(1, 2, gridspec_kw={"width_ratios": [1.0, 1.6]})
        self.figure.subplots_adjust(left=0.06, right=0.98, bottom=0.2, top=0.9, wspace=0.35)
        self._map_ax, self._panel_ax = map_ax, panel_ax
        labels = self.data["labels"]
        context = self.model.config.context
        self._map = _as_mesh(draw_map(map_ax, self.data["map"], labels, labels, self.data["title"]), (context, context))
        map_ax.tick_params(labelsize=FONT_SIZE)
        map_ax.tick_params(axis="x", labelrotation=90)  # token ids side by side would run together
        map_ax.tick_params(length=2)  # the labels' distance from the map (its marks are drawn below, 2 pt)
        add_colorbar(self._map, map_ax, WEIGHT_LABEL, gap=0.005, width=0.008)
        # The map is square and as tall as its slot: its side in points, whatever the sequence's length.
        self._map_side = map_ax.get_position().height * self.figure.get_figheight() * 72
        self._whole, self._ablated = draw_next_token_panel(panel_ax, len(labels))
        panel_height = panel_ax.get_position().height * self.figure.get_figheight() * 72  # points
        self._pair_reach = matplotlib.rcParams["xtick.major.size"] / panel_height  # the panel's marks, axes fraction
        panel_ax.set_title("p(each position's next token), 'a>b': token a, then b",
                           fontsize=FONT_SIZE)
        # The panel's vertical grid lines as one collection (a grid line per tick takes ten times as long to
        # draw), from the bottom up to p = 1: the band above, with the legend, stays clear of them.
        panel_ax.grid(False, axis="x")
        self._grid = LineCollection([], colors=matplotlib.rcParams["grid.color"], alpha=0.3,
                                    linewidths=matplotlib.rcParams["grid.linewidth"])
        panel_ax.add_collection(self._grid, autolim=False)
        # The tick marks too, one collection per axis (set in `_label_positions` and `_draw`), drawn where the
        # axes' own marks were: those are off (their labels stay in place: a label keeps its distance whether
        # its mark shows or not).
        map_ax.tick_params(which="both", bottom=False, left=False)
        panel_ax.tick_params(axis="x", bottom=False)
        self._marks = {
            "keys": LineCollection([], transform=map_ax.get_xaxis_transform()),
            "queries": LineCollection([], transform=map_ax.get_yaxis_transform()),
            "pairs": LineCollection([], transform=panel_ax.get_xaxis_transform()),
        }
        for ax, marks in ((map_ax, self._marks["keys"]), (map_ax, self._marks["queries"]),
                          (panel_ax, self._marks["pairs"])):
            marks.set(colors="black", capstyle="butt", clip_on=False)
            ax.add_collection(marks, autolim=False)
        self._labelled: list[int] = []  # the tokens the axes are labelled with
        # The token labels (the map's axes, the panel's "a>b" axis and its grid lines; then, as in a full
        # draw, the frames over them) change with the tokens only: drawn once per sequence, on the parts
        # that never change (`_layer`). The map, the lines and the title: on every update.
        self._labels_layer = [self._marks["keys"], self._marks["queries"], map_ax.xaxis, map_ax.yaxis,
                              *map_ax.spines.values(), self._grid, self._marks["pairs"], panel_ax.xaxis,
                              *panel_ax.spines.values()]
        return [*self._labels_layer, self._map, self._whole, self._ablated, map_ax.title]

    def _alt_text(self) -> str:
        d = self.data
        return (f"Left: the attention map of layer {d['layer']}, head {d['head']} on the {len(d['ids'])} tokens "
                f"{' '.join(map(str, d['ids']))}, queries down the side: {map_in_words(d['map'], d['labels'])}. "
                "Right: the probability the model gives each position's true next token, with every head "
                "and with this head zeroed.")

    def _picture_key(self) -> Hashable:
        return (tuple(self.data["ids"]), self.data["layer"], self.data["head"])  # a bad entry keeps the old ids

    def _background_key(self) -> Hashable:
        return tuple(self.data["ids"])  # the token labels are drawn once per sequence (`_layer`)

    def _layer(self) -> list[Artist]:
        return self._labels_layer

    def _label_step(self, positions: int) -> int:
        """Label every position of the map, or every 2nd or 4th when its cells are closer than `LABEL_PITCH`."""
        return label_step(self._map_side / positions, LABEL_PITCH, (1, 2, 4, 8))

    def _label_positions(self, labels: list[str]) -> None:
        """Token labels on the map's axes (keys along the bottom, queries down the side), thinned by
        `_label_step`; a minor tick and a mark at every position."""
        step = self._label_step(len(labels))
        shown = range(0, len(labels), step)
        for axis in (self._map_ax.xaxis, self._map_ax.yaxis):
            axis.set_ticks(shown, [labels[i] for i in shown])
            axis.set_ticks(range(len(labels)) if step > 1 else [], minor=True)  # every position (unmarked)
        # Their marks: every position's, 2 pt outside the map, a labelled one as wide as a major tick.
        reach = 2 / self._map_side  # axes fraction (the map is square)
        widths = [matplotlib.rcParams["xtick.major.width" if i % step == 0 else "xtick.minor.width"]
                  for i in range(len(labels))]
        self._marks["keys"].set(segments=[[(i, 0.0), (i, -reach)] for i in range(len(labels))], linewidths=widths)
        self._marks["queries"].set(segments=[[(0.0, i), (-reach, i)] for i in range(len(labels))], linewidths=widths)

    def _draw(self) -> None:
        d = self.data
        n = len(d["ids"])
        if d["ids"] != self._labelled:
            if n != len(self._labelled):  # the axes' lengths place the image and the lines
                self._map_ax.set_xlim(-0.5, n - 0.5)
                self._map_ax.set_ylim(n - 0.5, -0.5)
                self._panel_ax.set_xlim(-0.5, n - 1.5)
                self._grid.set_segments([[(t, -0.02), (t, 1.0)] for t in range(n - 1)])  # -0.02: the panel's bottom
                self._marks["pairs"].set(segments=[[(t, 0.0), (t, -self._pair_reach)] for t in range(n - 1)],
                                         linewidths=matplotlib.rcParams["xtick.major.width"])
            self._label_positions(d["labels"])
            self._labelled = list(d["ids"])
            pairs = [f"{a}>{b}" for a, b in zip(d["ids"], d["ids"][1:], strict=False)]
            self._panel_ax.set_xticks(range(n - 1), pairs, rotation=90)
        _set_cells(self._map, d["map"])
        self._map_ax.set_title(d["title"], fontsize=9)
        positions = np.arange(n - 1)
        self._whole.set_data(positions, d["p_next"])
        self._ablated.set_data(positions, d["p_next_ablated"])
