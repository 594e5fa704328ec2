"""The pictures of the lesson widgets (05, 06, 09, 10), in every state a learner can reach: legible and whole.

A widget's picture is shown at its own size (``DISPLAY_DPI`` CSS pixels per inch, never scaled down in
JupyterLab's output area), so every text it draws must be at least `MIN_FONT_POINTS` as drawn, the
picture at most `WIDEST` pixels wide, and no text may run past the picture's edge or into another text.
The states cover every option of every dropdown, the ends of every slider, every ready-made sequence of
InductionExplorer and typed sequences as long as the model reads (TextExplorer: texts of 1 to T_max
characters, the widest characters, spaces and newlines). Texts are the ones actually drawn
when the widget renders its picture (tick labels outside an axis's range are not drawn).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from matplotlib.backend_bases import RendererBase
from matplotlib.text import Text

from lessons_lib.induction import InductionModel, load_induction_model
from lessons_lib.inspect_heads import ToyHeads, load_toy_heads
from lessons_lib.kv_cache import MODELS, kv_head_options
from lessons_lib.plotting import MIN_FONT_POINTS
from lessons_lib.shakespeare import ShakespeareModel, load_model
from lessons_lib.widgets.base import DISPLAY_DPI, LessonWidget
from lessons_lib.widgets.cache_widgets import MAX_BATCH, MAX_TOKENS, HeadSharing, KVCacheCalculator
from lessons_lib.widgets.head_widgets import HeadExplorer, HeadReslicer, SplitExplorer
from lessons_lib.widgets.induction_widgets import InductionExplorer
from lessons_lib.widgets.shakespeare_widgets import TextExplorer

WIDEST = 925  # CSS pixels: InductionExplorer's picture, the widest

State = dict[str, Any]  # control name -> value, set in this order


@pytest.fixture(scope="module")
def toy() -> ToyHeads:
    return load_toy_heads()


@pytest.fixture(scope="module")
def induction_model() -> InductionModel:
    return load_induction_model()


def _two_digit_tokens(count: int, vocab: int) -> str:
    """``count`` token ids, as many of them two digits wide as the vocabulary allows: the widest labels."""
    return " ".join(str(vocab - 1 - i % (vocab - 10)) for i in range(count))


def head_explorer_states(widget: LessonWidget) -> list[State]:
    last_head = widget.controls["head"].options[-1][1]
    last_sequence = widget.controls["sequence"].max
    return [{}, {"head": last_head, "sequence": last_sequence}, {"average": True}]


def reslicer_states(widget: LessonWidget) -> list[State]:
    states: list[State] = [{"heads": h} for h in widget.controls["heads"].options]
    return [*states, {"sequence": widget.controls["sequence"].max}]  # the last h (16) with the last sequence


def split_states(widget: LessonWidget) -> list[State]:
    return [{"split": split, "heads": h}
            for split, h in itertools.product(widget.controls["split"].options, widget.controls["heads"].options)]


def cache_states(widget: LessonWidget) -> list[State]:
    states: list[State] = []
    for name in MODELS:
        states += [{"model": name}, {"kv_heads": kv_head_options(MODELS[name].heads)[0]}]
    largest = {"tokens": MAX_TOKENS, "batch": MAX_BATCH}
    sizes = [{"bytes_per_element": size} for _, size in widget.controls["bytes_per_element"].options]
    return [*states, largest, *sizes]


def sharing_states(widget: LessonWidget) -> list[State]:
    states: list[State] = [{"heads": h, "kv_heads": h} for h in widget.controls["heads"].options]
    states += [{"heads": 16, "kv_heads": kv} for kv in kv_head_options(16)]
    return [*states, {"mapping": "tile"}]


def induction_states(widget: LessonWidget) -> list[State]:
    assert isinstance(widget, InductionExplorer)
    c = widget.model.config
    presets: list[State] = [{"sequence": key} for key in widget.examples]
    typed: list[State] = [{"tokens": _two_digit_tokens(n, c.vocab)} for n in (c.context, 2, 7, 17, 18)]
    last: State = {"layer": 0, "head": c.heads - 1}
    return [*presets, *typed, last]


@functools.cache
def shakespeare_model() -> ShakespeareModel:
    """Lesson 10's model, loaded once (only when TextExplorer's case runs)."""
    return load_model()


def text_states(widget: LessonWidget) -> list[State]:
    assert isinstance(widget, TextExplorer)
    c = widget.model.config
    texts = ["a", "W\n" * 24, "M" * (c.context // 2), "@" * c.context, " \n" * (c.context // 2), "Is this a dagger"]
    every = [{"head": "all"}, {"text": "a"}, {"text": texts[3]}]  # the heads side by side, short and long
    return [*({"text": text} for text in texts), {"layer": c.layers - 1, "head": c.heads - 1}, *every]


WIDGETS: dict[str, tuple[Callable[[ToyHeads, InductionModel], LessonWidget], Callable[[LessonWidget], list[State]]]] = {
    "HeadExplorer": (lambda toy, _: HeadExplorer(toy), head_explorer_states),
    "HeadReslicer": (lambda toy, _: HeadReslicer(toy), reslicer_states),
    "SplitExplorer": (lambda _toy, _: SplitExplorer(), split_states),
    "KVCacheCalculator": (lambda _toy, _: KVCacheCalculator(), cache_states),
    "HeadSharing": (lambda _toy, _: HeadSharing(), sharing_states),
    "InductionExplorer": (lambda _, model: InductionExplorer(model), induction_states),
    "TextExplorer": (lambda _toy, _: TextExplorer(shakespeare_model()), text_states),
}


def drawn_texts(widget: LessonWidget, monkeypatch: pytest.MonkeyPatch) -> list[Text]:
    """Draw the widget's whole picture as it shows it now and return every non-empty text drawn."""
    drawn: dict[int, Text] = {}
    draw = Text.draw

    def recording_draw(text: Text, renderer: RendererBase) -> None:
        if text.get_visible() and text.get_text().strip():
            drawn[id(text)] = text
        draw(text, renderer)

    with monkeypatch.context() as patch:
        patch.setattr(Text, "draw", recording_draw)
        widget._pictures.clear()  # no kept picture and no kept background: everything is drawn now
        widget._backgrounds.clear()
        widget.refresh()
    return list(drawn.values())


def problems(widget: LessonWidget, texts: list[Text]) -> Iterator[str]:
    """Text under `MIN_FONT_POINTS`, a picture wider than `WIDEST`, text cut off or running into other text."""
    width = widget.figure.get_figwidth() * DISPLAY_DPI
    if width > WIDEST or int(widget.image.layout.width.removesuffix("px")) > WIDEST:
        yield f"{width:.0f} px wide"
    too_small = sorted({f"{t.get_text()[:30]!r} {t.get_fontsize():g} pt" for t in texts
                        if float(t.get_fontsize()) < MIN_FONT_POINTS - 1e-6})
    if too_small:
        yield "too small: " + ", ".join(too_small)
    renderer = widget.figure.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = [(t.get_text()[:30], t.get_window_extent(renderer)) for t in texts]
    picture = widget.figure.bbox
    tolerance = widget.figure.dpi / DISPLAY_DPI  # one CSS pixel
    for name, box in boxes:
        if (box.x0 < picture.x0 - tolerance or box.x1 > picture.x1 + tolerance
                or box.y0 < picture.y0 - tolerance or box.y1 > picture.y1 + tolerance):
            yield f"{name!r} runs past the picture's edge"
    for (first, a), (second, b) in itertools.combinations(boxes, 2):
        across = min(a.x1, b.x1) - max(a.x0, b.x0)
        down = min(a.y1, b.y1) - max(a.y0, b.y0)
        if across > tolerance and down > tolerance:
            yield f"{first!r} overlaps {second!r}"


@pytest.mark.parametrize("name", list(WIDGETS))
def test_every_state_is_legible_and_fits(
    name: str, toy: ToyHeads, induction_model: InductionModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    make, states = WIDGETS[name]
    widget = make(toy, induction_model)
    found = []
    for state in [{}, *states(widget)]:
        for control, value in state.items():
            widget.controls[control].value = value
        assert all(widget.data[control] == value for control, value in state.items()), state
        texts = drawn_texts(widget, monkeypatch)
        assert texts, f"{name} {state}: no text drawn"
        found += [f"{widget!r}: {problem}" for problem in problems(widget, texts)]
    assert not found, "\n".join(found)


def test_long_sequences_label_every_other_position_and_tick_them_all(induction_model: InductionModel) -> None:
    """Up to 17 tokens every position of the map has its token; a longer sequence has every second labelled
    at 9 pt (its cells are closer than a label's height) and a tick at every position."""
    explorer = InductionExplorer(induction_model)
    for tokens in ("1 2 3 1", _two_digit_tokens(17, 32)):
        explorer.controls["tokens"].value = tokens
        labels = explorer.data["labels"]
        for axis in (explorer._map_ax.xaxis, explorer._map_ax.yaxis):
            assert [t.get_text() for t in axis.get_ticklabels()] == labels
    explorer._pictures.clear()  # draw it all now: the kept picture and background of the first sequence
    explorer._backgrounds.clear()  # would be shown again and leave the figure's ticks as they were
    explorer.controls["sequence"].value = "repeat"
    labels = explorer.data["labels"]
    assert len(labels) == induction_model.config.context and explorer._label_step(len(labels)) == 2
    for axis in (explorer._map_ax.xaxis, explorer._map_ax.yaxis):
        assert [t.get_text() for t in axis.get_ticklabels()] == labels[::2]
        assert list(axis.get_ticklocs()) == list(range(0, len(labels), 2))
        ticked = {*axis.get_ticklocs(), *axis.get_ticklocs(minor=True)}
        assert ticked == set(range(len(labels))), "a position without a tick"


def test_reslicer_names_eight_maps_between_their_rows(toy: ToyHeads) -> None:
    """h = 8: the maps drawn (four at a time, issue 28) are each named at 9 pt right above it, never over a map."""
    reslicer = HeadReslicer(toy)
    reslicer.controls["heads"].value = 8
    reslicer.controls["shown"].value = 4
    reslicer.figure.canvas.draw()
    names = reslicer._names
    assert [name.get_text() for name in names] == [f"head {i}" for i in range(4, 8)]
    assert {name.get_fontsize() for name in names} == {MIN_FONT_POINTS}
    tiled = np.asarray(reslicer._tiles.get_array(), dtype=float)
    renderer = reslicer.figure.canvas.get_renderer()  # type: ignore[attr-defined]
    to_cells = reslicer._maps_ax.transData.inverted()
    for name in names:
        (left, bottom), (right, top) = to_cells.transform(name.get_window_extent(renderer).get_points())
        rows = slice(max(round(top), 0), round(bottom) + 1)  # cell rows run downwards
        columns = slice(max(round(left), 0), round(right) + 1)
        assert np.isnan(tiled[rows, columns]).all(), f"{name.get_text()!r} lies over a map"
        below = tiled[round(bottom) + 1 :, round((left + right) / 2)]
        assert not np.isnan(below[0]), f"{name.get_text()!r} is not right above its map"
