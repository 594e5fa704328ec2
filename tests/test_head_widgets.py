"""Lesson 05 widgets, driven without a browser (set a control's value, check ``.data``), and the one
interface every lesson widget shares (`lessons_lib.widgets.base.LessonWidget`), checked on all six."""

from __future__ import annotations

import io
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colorbar import Colorbar
from PIL import Image as PILImage

from lessons_lib.inspect_heads import ToyHeads, load_toy_heads, run_layer, split_layout
from lessons_lib.plotting.attention_maps import tile_maps
from lessons_lib.widgets.base import PIXEL_DENSITY, LessonWidget
from lessons_lib.widgets.cache_widgets import HeadSharing, KVCacheCalculator
from lessons_lib.widgets.head_widgets import HeadExplorer, HeadReslicer, SplitExplorer, _runs
from lessons_lib.widgets.induction_widgets import InductionExplorer


@pytest.fixture(scope="module")
def model() -> ToyHeads:
    return load_toy_heads()


# ----- the shared interface, on every widget of lessons 05, 06 and 09 -------------------------
MAKERS: dict[str, Callable[[ToyHeads], LessonWidget]] = {
    "HeadExplorer": HeadExplorer,
    "HeadReslicer": HeadReslicer,
    "SplitExplorer": lambda _model: SplitExplorer(),
    "KVCacheCalculator": lambda _model: KVCacheCalculator(),
    "HeadSharing": lambda _model: HeadSharing(),
    "InductionExplorer": lambda _model: InductionExplorer(),
}


@pytest.fixture(params=list(MAKERS))
def widget(request: pytest.FixtureRequest, model: ToyHeads) -> LessonWidget:
    return MAKERS[request.param](model)


def test_every_widget_has_controls_data_and_ui(widget: LessonWidget) -> None:
    assert isinstance(widget, LessonWidget)
    assert widget.controls and all(isinstance(c, widgets.ValueWidget) for c in widget.controls.values())
    assert isinstance(widget.ui, widgets.Box)
    for name, control in widget.controls.items():
        assert widget.data[name] == control.value  # each control's value is in .data under its name
        assert control.style.description_width == "initial"  # descriptions never cut off


def test_every_widget_displays_its_box_with_a_clean_text_form(widget: LessonWidget) -> None:
    bundle = widget._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == widget.ui.model_id
    text = bundle["text/plain"]
    assert text == repr(widget)
    assert text.startswith(f"{type(widget).__name__}(") and "children=" not in text
    note = bundle["text/html"]
    assert "live widget" in note and "launch it on Binder" in note and type(widget).__name__ in note
    first = next(iter(widget.controls))
    assert f"{first}={widget.controls[first].value!r}" in text


def test_every_picture_has_twice_the_pixels_of_its_displayed_size(widget: LessonWidget) -> None:
    layout = widget.image.layout
    shown = (int(layout.width.removesuffix("px")), int(layout.height.removesuffix("px")))
    picture = PILImage.open(io.BytesIO(widget.image.value))
    assert picture.format == "PNG"
    assert picture.size[0] >= PIXEL_DENSITY * shown[0] and picture.size[1] >= PIXEL_DENSITY * shown[1]
    assert PIXEL_DENSITY >= 2


def test_every_control_changes_data_and_picture_without_printing(
    widget: LessonWidget, capsys: pytest.CaptureFixture[str]
) -> None:
    open_before = set(plt.get_fignums())  # another test on this worker may have left a pyplot figure open
    for name, control in widget.controls.items():
        options = [option[1] if isinstance(option, tuple) else option for option in getattr(control, "options", ())]
        if options:
            new = options[(options.index(control.value) + 1) % len(options)]  # the next option
        elif isinstance(control, widgets.Checkbox):
            new = not control.value
        elif isinstance(control, widgets.Text):  # a list of token ids: the same ids, reversed
            new = " ".join(reversed(control.value.split()))
        else:
            new = control.value + 1
        picture = bytes(widget.image.value)
        control.value = new
        assert widget.data[name] == new, name
        assert bytes(widget.image.value) != picture, name
    assert capsys.readouterr() == ("", "")
    assert set(plt.get_fignums()) == open_before  # drawn without pyplot: no new figure left open


def test_toggle_buttons_fit_their_longest_label() -> None:
    buttons = HeadSharing().controls["mapping"]
    longest = max(len(label) for label, _ in buttons.options)
    assert float(buttons.style.button_width.removesuffix("em")) >= 0.5 * longest + 1


# ----- lesson 05 --------------------------------------------------------------------------------
def test_head_explorer_follows_its_controls(model: ToyHeads) -> None:
    explorer = HeadExplorer(model)
    _, weights = run_layer(model, explorer.tokens)
    assert repr(explorer) == "HeadExplorer(head=0, sequence=0, average=False)"
    assert np.allclose(explorer.data["map"], weights[0, 0])

    explorer.controls["head"].value = 2
    d = explorer.data
    assert d["head"] == 2 and d["columns"] == (8, 12)
    for name in ("wq", "wk", "wv"):
        assert np.array_equal(d[name], getattr(model.layer, name)[:, 8:12])
    assert np.allclose(d["map"], weights[0, 2])
    assert d["title"] == "seq 0: head 2"

    explorer.controls["sequence"].value = 3
    assert explorer.data["labels"] == model.labels(explorer.tokens[3])
    assert np.allclose(explorer.data["map"], weights[3, 2])

    explorer.controls["average"].value = True
    assert np.allclose(explorer.data["map"], weights[3].mean(axis=0))
    # The average is no head's map: no head's columns beside it (issue 28), blank panels that say so.
    assert explorer.data["head"] == 2 and explorer.data["columns"] is None
    assert all(explorer.data[name] is None for name in ("wq", "wk", "wv"))
    assert explorer.controls["head"].disabled  # no head is shown: the head control has nothing to change
    assert [ax.get_title() for ax in explorer._axes[1:]] == ["wq: no head", "wk: no head", "wv: no head"]
    # A blank panel: every entry NaN (matplotlib masks them), none drawn.
    assert all(np.isnan(np.asarray(image.get_array(), dtype=float)).all() for image in explorer._columns)
    explorer._pictures.clear()  # draw it now: a kept picture would leave the figure as it was
    explorer.controls["average"].value = False
    assert explorer.data["columns"] == (8, 12) and explorer._axes[1].get_title() == "wq[:, 8:12]"
    assert not explorer.controls["head"].disabled
    assert np.allclose(explorer.data["map"], weights[3, 2])
    assert repr(explorer) == "HeadExplorer(head=2, sequence=3, average=False)"


def test_head_explorer_redraws_a_sequence_seen_before(model: ToyHeads) -> None:
    explorer = HeadExplorer(model)
    first = bytes(explorer.image.value)
    explorer.controls["sequence"].value = 1  # a new background, with this sequence's tokens
    explorer.controls["sequence"].value = 0  # the cached background of sequence 0
    assert bytes(explorer.image.value) == first


def test_reslicer_cuts_the_same_matrix(model: ToyHeads) -> None:
    reslicer = HeadReslicer(model)
    assert list(reslicer.controls["heads"].options) == [1, 2, 4, 8, 16]
    assert reslicer.data["heads"] == 4
    _, weights = run_layer(model, reslicer.tokens)
    assert np.allclose(reslicer.data["maps"], weights[0])  # the trained cut = the trained maps

    for h in (1, 2, 8, 16):
        reslicer.controls["heads"].value = h
        d = reslicer.data
        assert d["d_h"] == 16 // h
        assert d["maps"].shape == (h, 8, 8)
        assert d["wq_blocks"].shape == (h, 16, 16 // h)
        assert np.array_equal(np.concatenate(list(d["wq_blocks"]), axis=1), model.layer.wq)
        assert d["boundaries"][-1] == (16 - 16 // h, 16)

    reslicer.controls["heads"].value = 8
    reslicer.controls["sequence"].value = 2
    assert reslicer.data["sequence"] == 2
    assert reslicer.data["labels"] == model.labels(reslicer.tokens[2])
    assert not np.allclose(reslicer.data["maps"][:4], weights[2])  # other cut, other heads


def test_reslicer_labels_every_map_it_draws(model: ToyHeads) -> None:
    """Issue 28: at h = 8 and 16 the maps lost their token labels (and at 16 their names). Now at most
    four maps are drawn at once, chosen with "heads shown", each with its tokens and its name."""
    reslicer = HeadReslicer(model)
    shown = reslicer.controls["shown"]
    assert [value for _, value in shown.options] == [0] and shown.disabled  # h = 4: every map fits
    for h, pages in ((8, [0, 4]), (16, [0, 4, 8, 12]), (2, [0]), (1, [0])):
        reslicer.controls["heads"].value = h
        assert [value for _, value in shown.options] == pages and shown.value == 0
        assert shown.disabled == (len(pages) == 1)
        for first in pages:
            reslicer._pictures.clear()  # draw it now: a kept picture would leave the figure as it was
            shown.value = first
            reslicer.figure.canvas.draw()
            d = reslicer.data
            visible = list(range(first, min(first + 4, h)))
            assert d["visible"] == visible and d["maps"].shape == (h, 8, 8)
            assert tick_texts(reslicer._maps_ax) == list(d["labels"]) * len(visible), (h, first)
            assert [t.get_text() for t in reslicer._maps_ax.get_yticklabels()] == list(d["labels"])
            names = [t.get_text() for t in reslicer._maps_ax.texts]
            assert names == ([f"head {i}" for i in visible] if h > 1 else []), (h, first)
    reslicer.controls["heads"].value = 16
    shown.value = 12
    assert reslicer.data["title"].endswith("maps of heads 12-15 of 0-15")
    reslicer.controls["heads"].value = 4  # a new h starts from its first heads
    assert shown.value == 0 and reslicer.data["visible"] == [0, 1, 2, 3]
    longest = max(len("heads 12-15"), *(len(name) for name, _ in shown.options))
    assert float(shown.layout.width.removesuffix("em")) >= 0.55 * (longest + len(shown.description))


def test_split_explorer_shows_where_features_go() -> None:
    explorer = SplitExplorer(length=4, width=8, heads=2)
    assert explorer.data["features"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert explorer.data["legend"].splitlines()[1] == "head 1: tokens 0-3, features 4-7"
    explorer.controls["split"].value = "wrong"
    assert explorer.data["features"] == [list(range(8))] * 2
    assert explorer.data["tokens"] == [[0, 1], [2, 3]]
    assert np.array_equal(explorer.data["layout"], split_layout(4, 8, 2, "wrong"))
    explorer.controls["heads"].value = 4
    assert explorer.data["tokens"] == [[0], [1], [2], [3]]
    assert explorer.data["legend"].splitlines()[0] == "head 0: token 0, features 0-7"
    explorer.controls["heads"].value = 8  # more heads than tokens: half a token each (issue 28)
    assert explorer.data["tokens"][:2] == [[0], [0]]
    legend = explorer.data["legend"].splitlines()
    assert legend[:2] == ["head 0: token 0, features 0-3", "head 1: token 0, features 4-7"]
    explorer.controls["heads"].value = 4
    explorer.controls["split"].value = "correct"
    assert explorer.data["features"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert explorer.data["layout"].shape == (4, 8)
    assert repr(explorer) == "SplitExplorer(split='correct', heads=4)"


def test_split_explorer_rejects_bad_heads() -> None:
    with pytest.raises(ValueError, match="divisors of width=8 above 1"):
        SplitExplorer(length=4, width=8, heads=3)


def test_helpers() -> None:
    assert _runs([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    tiled = tile_maps(np.ones((3, 2, 2)), slots=4, per_row=2)
    assert tiled.shape == (5, 5)
    assert np.isnan(tiled).sum() == 25 - 12
    with pytest.raises(ValueError, match="slots"):
        tile_maps(np.ones((5, 2, 2)), slots=4)


def colour_bars(widget: LessonWidget) -> list[Colorbar]:
    """The colour bars of the widget's maps and matrices (images, or meshes of flat cells), in axes order."""
    shown = [artist for ax in widget.figure.axes for artist in [*ax.images, *ax.collections]]
    bars = [getattr(artist, "colorbar", None) for artist in shown]
    return [bar for bar in bars if isinstance(bar, Colorbar)]


@pytest.mark.parametrize(
    ("make", "labels"),
    [
        (HeadExplorer, ["attention weight", "weight entry"]),
        (HeadReslicer, ["wq entry", "attention weight"]),
        (lambda _model: SplitExplorer(), ["head"]),
    ],
)
def test_head_widgets_have_static_colour_bars(
    model: ToyHeads, make: Callable[[ToyHeads], LessonWidget], labels: list[str]
) -> None:
    widget = make(model)
    bars = colour_bars(widget)
    assert [bar.ax.get_ylabel() for bar in bars] == labels
    # Drawn once into the cached background: no colour bar is among the artists redrawn per update.
    assert not {bar.ax for bar in bars} & {getattr(artist, "axes", None) for artist in widget._dynamic}
    for bar in bars:
        assert bar.ax not in widget.figure.axes[:1] and bar.mappable.get_clim()[1] > bar.mappable.get_clim()[0]


def test_split_explorer_bar_names_every_head_it_offers() -> None:
    widget = SplitExplorer()
    (bar,) = colour_bars(widget)
    assert list(bar.get_ticks()) == list(range(max(widget.controls["heads"].options)))


# ----- issue 21: what a learner sees in JupyterLab -------------------------------------------------
def test_every_slider_updates_on_release_and_dropdowns_fit(widget: LessonWidget) -> None:
    for control in widget.controls.values():
        if isinstance(control, widgets.IntSlider):
            assert control.continuous_update is False, "a drag would queue a picture per position"
        if isinstance(control, widgets.Dropdown):
            longest = max(len(str(o[0] if isinstance(o, tuple) else o)) for o in control.options)
            assert float(control.layout.width.removesuffix("em")) >= 0.55 * (longest + len(control.description))


def test_going_back_shows_the_kept_picture_without_drawing(widget: LessonWidget) -> None:
    name = list(widget.controls)[-1]  # the last control: changing it changes no other control
    control = widget.controls[name]
    first, first_picture = control.value, widget.image.value
    if isinstance(control, widgets.Checkbox):
        other = not first
    elif isinstance(control, widgets.IntSlider):
        other = first + 1 if first < control.max else first - 1
    else:
        other = next(o[1] if isinstance(o, tuple) else o for o in control.options
                     if (o[1] if isinstance(o, tuple) else o) != first)
    control.value = other
    assert widget.image.value != first_picture
    drawn: list[int] = []
    original = widget._draw

    def counting_draw() -> None:
        drawn.append(1)
        original()

    widget._draw = counting_draw  # type: ignore[method-assign]
    control.value = first
    assert widget.image.value == first_picture and not drawn, "the earlier picture was drawn again"
    assert widget.data[name] == first  # .data follows the control all the same


def tick_texts(ax: matplotlib.axes.Axes) -> list[str]:
    return [t.get_text() for t in ax.get_xticklabels() if t.get_text()]


def test_reslicer_maps_are_readable_for_few_heads(model: ToyHeads) -> None:
    """h = 1, 2, 4: maps labelled with the tokens, as big as the space allows, next to their colour bar."""
    reslicer = HeadReslicer(model)
    figure = reslicer.figure
    bar = figure.axes[-1]  # the maps' colour bar, added last
    for h in (1, 2, 4):
        reslicer._pictures.clear()  # draw it now: a kept picture would leave the figure as it was
        reslicer.controls["heads"].value = h
        figure.canvas.draw()
        maps = reslicer._maps_ax
        labels = reslicer.data["labels"]
        assert tick_texts(maps) == list(labels) * h, f"h={h}: the maps' tokens are not labelled"
        assert [t.get_text() for t in maps.get_yticklabels()] == list(labels)
        box = maps.get_window_extent()
        per_map = box.width / h / figure.dpi * 100  # CSS pixels
        assert per_map >= 110, f"h={h}: each map is only {per_map:.0f} px wide (85 px before issue 21)"
        gap = (bar.get_window_extent().x0 - box.x1) / figure.dpi * 100
        assert 0 <= gap <= 15, f"h={h}: the colour bar is {gap:.0f} px from the maps"
    reslicer.controls["heads"].value = 1
    assert reslicer.data["title"].endswith("the one head's map") and "0..0" not in reslicer.data["title"]
    reslicer.controls["heads"].value = 16
    assert reslicer.data["title"].endswith("maps of heads 0-3 of 0-15")
