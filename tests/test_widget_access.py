"""What a screen reader and a keyboard user get from every lesson widget, checked without a browser:
the picture in words (current after every change, under the readout for screen readers only), a tooltip
on every control (ipywidgets shows "null" without one), a text readout, the style sheet's colours at
WCAG's ratios, and the access layer (access.py) that gives the picture its alt, names and states.
The browser tests (tests/browser) check the same things in JupyterLab."""

from __future__ import annotations

import functools
import html
import re
import sys
import types
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import numpy as np
import pytest

from lessons_lib.widgets import access
from lessons_lib.widgets.base import FOCUS_COLOUR, KNOB_EDGE, WIDGET_STYLE, LessonWidget, map_in_words, readout_html
from lessons_lib.widgets.cache_widgets import HeadSharing, KVCacheCalculator
from lessons_lib.widgets.head_widgets import HeadExplorer, HeadReslicer, SplitExplorer
from lessons_lib.widgets.induction_widgets import InductionExplorer
from lessons_lib.widgets.shakespeare_widgets import TextExplorer

# Each widget, and one change of a control that changes its picture: (control, new value).
WIDGETS: dict[str, tuple[Callable[[], LessonWidget], str, object]] = {
    "HeadExplorer": (HeadExplorer, "head", 1),
    "HeadReslicer": (HeadReslicer, "heads", 8),
    "SplitExplorer": (SplitExplorer, "split", "wrong"),
    "KVCacheCalculator": (KVCacheCalculator, "kv_heads", 1),
    "HeadSharing": (HeadSharing, "mapping", "tile"),
    "InductionExplorer": (InductionExplorer, "head", 1),
    "TextExplorer": (TextExplorer, "layer", 1),
}


@pytest.fixture(scope="module", params=list(WIDGETS))
def made(request: pytest.FixtureRequest) -> tuple[LessonWidget, str, object]:
    maker, control, value = WIDGETS[request.param]
    return maker(), control, value


# ----- the picture in words ------------------------------------------------------------------------
def test_a_map_in_words_names_the_offset_most_queries_share() -> None:
    previous = np.eye(5, k=-1)
    previous[0, 0] = 1.0  # the first query has nothing before it
    assert map_in_words(previous).startswith("4 of 5 queries put their largest weight 1 step back; sharp")
    assert map_in_words(np.eye(3)).startswith("every query puts its largest weight on itself")
    two_back = np.eye(6, k=-2)
    two_back[:2, :2] = np.eye(2)
    assert map_in_words(two_back).startswith("4 of 6 queries put their largest weight 2 steps back")
    ahead = np.eye(3, k=1)
    ahead[2, 2] = 1.0
    assert map_in_words(ahead).startswith("2 of 3 queries put their largest weight 1 step ahead")


def test_a_map_in_words_names_a_key_position_with_its_label() -> None:
    to_first = np.zeros((4, 4))
    to_first[:, 2] = 0.7
    to_first[:, 0] = 0.3
    text = map_in_words(to_first, ["a", "b", "c", "d"])
    assert text.startswith("every query puts its largest weight on key position 2 (c)")
    assert text.endswith("in between, the largest weight averages 0.70")


def test_a_map_in_words_says_when_no_key_stands_out() -> None:
    assert map_in_words(np.full((3, 3), 1 / 3)).startswith("every query gives several keys the same largest weight")
    assert "spread out" in map_in_words(np.full((2, 8), 1 / 8))
    with pytest.raises(ValueError, match=r"one map \(T, S\)"):
        map_in_words(np.zeros((2, 3, 3)))
    with pytest.raises(ValueError, match=r"one map \(T, S\)"):
        map_in_words(np.zeros((0, 3)))


def test_a_map_in_words_counts_the_queries_of_a_cached_map_from_the_end() -> None:
    """Two queries over four keys (a cache): query 0 is position 2, query 1 position 3."""
    back_one = np.zeros((2, 4))
    back_one[0, 1] = back_one[1, 2] = 1.0
    assert map_in_words(back_one).startswith("every query puts its largest weight 1 step back")


# ----- every widget ------------------------------------------------------------------------------
def test_the_picture_in_words_follows_every_change(made: tuple[LessonWidget, str, object]) -> None:
    """The words for the picture, under the readout for screen readers only, renewed with each change and
    with each kept picture shown again."""
    widget, control, value = made
    before = widget.data["alt"]
    assert len(before) > 40 and _hidden_words(widget) == before
    first = widget.controls[control].value
    widget.controls[control].value = value
    after = widget.data["alt"]
    assert after != before and _hidden_words(widget) == after
    widget.controls[control].value = first  # back: the kept picture is shown, with its own words again
    assert _hidden_words(widget) == before
    assert widget.image.tooltip is None, "an Image's tooltip breaks its view in ipywidgets 8.1's front end"


def _hidden_words(widget: LessonWidget) -> str:
    found = re.findall(r'<span class="lesson-sr-only">The picture above: (.*?)</span>', widget.readout.value)
    assert len(found) == 1, widget.readout.value
    return html.unescape(found[0])


def test_every_control_has_a_tooltip_and_the_widget_a_readout(made: tuple[LessonWidget, str, object]) -> None:
    widget, _, _ = made
    for name, control in widget.controls.items():
        assert control.tooltip, f"{name} has no tooltip: ipywidgets would show 'null'"
    for part in widget.ui.children:  # the readout and the style sheet: an empty tooltip, never none
        if isinstance(part, widgets.HTML):
            assert part.tooltip is not None
    assert widget.data.get("readout"), "a screen reader hears the readout: every widget has one"
    assert widget.readout in widget.ui.children


def test_every_widget_carries_the_style_sheet_in_its_own_box(made: tuple[LessonWidget, str, object]) -> None:
    widget, _, _ = made
    assert "lesson-widget" in widget.ui._dom_classes
    styles = [child for child in widget.ui.children if isinstance(child, widgets.HTML) and "<style>" in child.value]
    assert [s.value for s in styles] == [WIDGET_STYLE]
    assert ".lesson-widget .lesson-sr-only" in WIDGET_STYLE and "clip-path: inset(50%)" in WIDGET_STYLE
    rules = re.findall(r"([^{}]+)\{", WIDGET_STYLE.split("<style>")[1])
    assert all(rule.strip().startswith(".lesson-widget ") for rule in rules), "a rule would reach the whole page"


def test_every_widget_carries_its_access_layer_out_of_sight(made: tuple[LessonWidget, str, object]) -> None:
    widget, _, _ = made
    layer_class = access._layer_class()
    assert layer_class is not None, "anywidget is in requirements.txt"
    layers = [child for child in widget.ui.children if isinstance(child, layer_class)]
    assert len(layers) == 1 and layers[0].layout.display == "none"
    assert "lesson-readout" in widget.readout._dom_classes  # what the layer makes a live region


def test_the_access_script_sets_what_ipywidgets_leaves_out() -> None:
    script = access.ACCESS_SCRIPT
    for call in ("set(img, 'alt', alt)", "set(handle, 'aria-label', nameOf(slider))", "set(button, 'aria-pressed'",
                 "set(readout, 'aria-live', 'polite')", "set(control, 'data-lm-suppress-shortcuts', 'true')"):
        assert call in script, f"the script never does {call}"
    assert "export default { render }" in script and "MutationObserver" in script
    assert "The picture above: " in script and "The picture above: " in readout_html("x", picture="y")


def test_no_access_layer_where_its_script_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    assert access.access_layer() is not None
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    assert access.access_layer() is None  # Colab shows third-party widgets only after enabling them
    monkeypatch.delitem(sys.modules, "google.colab")
    # a fresh cache for this test only: widgets made elsewhere keep the one class they were made with
    monkeypatch.setattr(access, "_layer_class", functools.cache(access._layer_class.__wrapped__))
    monkeypatch.setitem(sys.modules, "anywidget", None)  # import anywidget fails
    try:
        assert access.access_layer() is None
        widget = SplitExplorer()  # the widget itself still works, its words still under the readout
        assert not any(isinstance(child, widgets.DOMWidget) and child.layout.display == "none"
                       for child in widget.ui.children)
        assert "The picture above: " in widget.readout.value
    finally:
        monkeypatch.delitem(sys.modules, "anywidget")


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _ratio(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("page", ["#ffffff", "#111111"])  # JupyterLab's light and dark backgrounds
def test_focus_rings_pressed_toggles_and_knobs_reach_three_to_one(page: str) -> None:
    assert FOCUS_COLOUR in WIDGET_STYLE and KNOB_EDGE in WIDGET_STYLE
    assert _ratio(FOCUS_COLOUR, page) >= 3.0
    assert _ratio(KNOB_EDGE, page) >= 3.0
    assert _ratio(FOCUS_COLOUR, "#eeeeee") >= 3.0  # the pressed toggle beside an unpressed one (light theme)
    assert _ratio(FOCUS_COLOUR, "#ffffff") >= 4.5  # the pressed toggle's white label on its fill
