"""Lesson 10 widget: `TextExplorer` driven through ``.controls[...].value`` as a learner moves it, and
the plain functions behind it (`read_text`, `visible`, `next_character_view`).

Every number is checked against `shakespeare.run` itself, so the tests hold for any trained weights.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import io
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.text import Text
from numpy.typing import NDArray
from PIL import Image as PILImage

from lessons_lib import shakespeare
from lessons_lib.plotting import MIN_FONT_POINTS
from lessons_lib.plotting.attention_maps import tile_maps
from lessons_lib.shakespeare import ShakespeareModel
from lessons_lib.widgets.base import PIXEL_DENSITY, LessonWidget, readout_html
from lessons_lib.widgets.shakespeare_widgets import (
    ALL,
    DEFAULT_TEXT,
    KEPT_RUNS,
    KEPT_TEXT_LAYERS,
    SHOWN,
    TOP,
    TextExplorer,
    next_character_view,
    read_text,
    visible,
)


@pytest.fixture(scope="module")
def model() -> ShakespeareModel:
    return shakespeare.load_model()


@pytest.fixture()
def explorer(model: ShakespeareModel) -> TextExplorer:
    return TextExplorer(model)


def softmax_last(model: ShakespeareModel, text: str) -> tuple[np.ndarray[Any, Any], list[np.ndarray[Any, Any]]]:
    """The model's own next-character probabilities after ``text``, and its weights (for the comparisons)."""
    logits, weights = shakespeare.run(model, model.encode(text))
    last = logits[0, -1].astype(np.float64)
    p = np.exp(last - last.max())
    return p / p.sum(), weights


def count_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, every call of `shakespeare.run` (the widget's forward pass) appends a 1 to the list."""
    calls: list[int] = []
    real_run = shakespeare.run

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real_run(*args, **kwargs)

    monkeypatch.setattr(shakespeare, "run", counted)
    return calls


# ----- the plain functions ------------------------------------------------------------------------
def test_visible_shows_spaces_and_newlines() -> None:
    assert visible("To be\nor") == "To\u00b7be\u23ceor"
    assert visible("") == ""


def test_read_text(model: ShakespeareModel) -> None:
    v, most = model.vocabulary, model.config.context
    np.testing.assert_array_equal(read_text("To be", v, most), v.encode("To be"))
    np.testing.assert_array_equal(read_text("a\r\nb", v, most), v.encode("a\nb"))  # a pasted Windows line end
    with pytest.raises(ValueError, match="the text is empty: type at least one character"):
        read_text("", v, most)
    with pytest.raises(ValueError, match=r"the text has 257 characters; the model reads at most T_max = 256"):
        read_text("a" * 257, v, most)
    assert len(read_text("a" * 256, v, most)) == 256
    with pytest.raises(ValueError, match=r"no character '\u2014' \(U\+2014\): it knows 83 characters"):
        read_text("To be \u2014 or not", v, most)
    with pytest.raises(ValueError, match=r"no character tab \(U\+0009\), '\u00e9' \(U\+00E9\)"):
        read_text("caf\u00e9\tnoir", v, most)
    with pytest.raises(ValueError, match=r"and 1 more"):
        read_text("\u00e0\u00e1\u00e2\u00e3\u00e4", v, most)
    with pytest.raises(TypeError, match="text must be a str, got int"):
        read_text(3, v, most)  # type: ignore[arg-type]


def test_next_character_view_cuts_the_map_to_the_last_characters() -> None:
    T = 60
    weights = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]  # an evenly spread head
    weights[-1] = 0.0
    weights[-1, 5] = 0.7  # the last query: 0.7 on position 5 (off the map), 0.3 on itself
    weights[-1, -1] = 0.3
    p = np.linspace(1, 2, 83)
    p /= p.sum()
    text = "ab" * 29 + " \n"
    view = next_character_view(p, weights, text)
    assert view["start"] == T - SHOWN and view["map"].shape == (SHOWN, SHOWN)
    np.testing.assert_array_equal(view["map"], weights[-SHOWN:, -SHOWN:])
    assert view["labels"][-2:] == ["\u00b7", "\u23ce"] and len(view["labels"]) == SHOWN
    assert view["hidden_weight"] == pytest.approx(0.7)
    assert (view["strongest"], view["strongest_weight"]) == (5, 0.7)
    assert view["top_ids"] == list(range(82, 82 - TOP, -1))
    np.testing.assert_allclose(view["top_probabilities"], p[82 : 82 - TOP : -1])
    short = next_character_view(p, weights[:4, :4], "abcd")
    assert short["start"] == 0 and short["hidden_weight"] == 0.0 and short["map"].shape == (4, 4)
    with pytest.raises(ValueError, match=r"weights must be one head's \(T, T\) = \(3, 3\) for the text, got \(4, 4\)"):
        next_character_view(p, weights[:4, :4], "abc")


# ----- the widget ---------------------------------------------------------------------------------
def test_explorer_starts_on_hamlet(explorer: TextExplorer, model: ShakespeareModel) -> None:
    d = explorer.data
    assert d["text"] == DEFAULT_TEXT == d["characters"] and d["error"] is None
    assert (d["layer"], d["head"]) == (0, 0)
    assert d["ids"] == model.vocabulary.encode(DEFAULT_TEXT).tolist()
    assert d["labels"] == [visible(ch) for ch in DEFAULT_TEXT[-SHOWN:]]
    assert d["title"] == "layer 0, head 0"
    assert explorer.readout.value == readout_html(d["readout"], None, d["alt"])
    assert d["readout"].startswith("After '\u2026") and "Layer 0, head 0: the last character puts" in d["readout"]
    assert f"The map shows the last {SHOWN} of {len(DEFAULT_TEXT)} characters" in d["readout"]
    assert repr(explorer) == f"TextExplorer(text={DEFAULT_TEXT!r}, layer=0, head=0)"
    assert isinstance(explorer.controls["text"], widgets.Textarea)  # newlines can be typed


def test_the_prediction_is_the_models_softmax_at_the_last_position(
    explorer: TextExplorer, model: ShakespeareModel
) -> None:
    for text in (DEFAULT_TEXT, "ROMEO:\nBut soft, what light through yonder window breaks?", "T"):
        explorer.controls["text"].value = text
        d = explorer.data
        p, _ = softmax_last(model, text)
        np.testing.assert_allclose(d["probabilities"], p, rtol=1e-6, atol=1e-9)
        order = np.argsort(-p, kind="stable")[:TOP]
        assert d["top_ids"] == order.tolist()
        np.testing.assert_allclose(d["top_probabilities"], p[order], rtol=1e-6)
        assert d["likeliest"] == model.vocabulary.chars[order[0]]
        assert d["likeliest_probability"] == pytest.approx(p[order[0]])
        assert d["top_characters"] == [visible(model.vocabulary.chars[i]) for i in order]
        assert f"the likeliest next character is '{visible(d['likeliest'])}' (p = {p[order[0]]:.2f};" in d["readout"]
        bars = [bar.get_width() for bar in explorer._bars]
        np.testing.assert_allclose(bars, d["top_probabilities"])
        assert [t.get_text() for t in explorer._choices] == d["top_characters"]


def shown_cells(explorer: TextExplorer) -> NDArray[np.float64]:
    """The map's cells within the axes' limits (its mesh has room for every head's map side by side)."""
    (left, right), (bottom, top) = explorer._map_ax.get_xlim(), explorer._map_ax.get_ylim()
    cells = np.asarray(explorer._map.get_array(), dtype=np.float64)
    assert (left, top) == (-0.5, -0.5) and np.isnan(cells[round(bottom + 0.5):]).all()
    return cells[: round(bottom + 0.5), : round(right + 0.5)]


def test_layer_and_head_change_the_map_without_running_the_model_again(
    explorer: TextExplorer, model: ShakespeareModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, weights = softmax_last(model, DEFAULT_TEXT)
    calls = count_runs(monkeypatch)
    c = model.config
    pictures = {bytes(explorer.image.value)}
    start = len(DEFAULT_TEXT) - SHOWN
    for layer, head in [(0, 1), (c.layers - 1, 1), (c.layers - 1, c.heads - 1), (1, 2)]:
        explorer.controls["layer"].value = layer
        explorer.controls["head"].value = head
        d = explorer.data
        assert (d["layer"], d["head"]) == (layer, head) and d["title"] == f"layer {layer}, head {head}"
        head_weights = weights[layer][0, head]
        np.testing.assert_allclose(d["map"], head_weights[start:, start:], rtol=1e-6)
        np.testing.assert_allclose(shown_cells(explorer), np.sqrt(d["map"]), rtol=1e-6)
        assert d["hidden_weight"] == pytest.approx(float(head_weights[-1, :start].sum()), abs=1e-6)
        assert d["strongest"] == int(head_weights[-1].argmax())
        assert f"Layer {layer}, head {head}: the last character puts its largest weight, " \
               f"{head_weights[-1].max():.2f}" in d["readout"]
        pictures.add(bytes(explorer.image.value))
    assert calls == [], "a change of layer or head must read the kept forward pass"
    assert len(pictures) == 5, "every head shows its own picture"


def test_a_new_text_runs_the_model_once(
    explorer: TextExplorer, model: ShakespeareModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "KING:\nNow is the winter"
    _, weights = softmax_last(model, text)
    calls = count_runs(monkeypatch)
    explorer.controls["layer"].value = 2
    explorer.controls["text"].value = text
    d = explorer.data
    assert calls == [1] and d["characters"] == text and d["start"] == 0
    assert d["map"].shape == (len(text), len(text)) and d["labels"] == [visible(ch) for ch in text]
    np.testing.assert_allclose(d["map"], weights[2][0, 0], rtol=1e-6)
    explorer.controls["head"].value = 3
    explorer.controls["text"].value = DEFAULT_TEXT  # the first text's pass is still kept
    assert calls == [1]
    for k in range(KEPT_RUNS + 3):  # only the latest few passes are kept
        explorer.controls["text"].value = f"text number {k}"
    assert len(explorer._runs) == KEPT_RUNS and len(explorer._backgrounds) == KEPT_TEXT_LAYERS + 1  # + the still parts


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("", "the text is empty: type at least one character"),
        ("Thou art \u201cfair\u201d", "the model has no character '\u201c' (U+201C), '\u201d' (U+201D)"),
        ("x" * 300, "the text has 300 characters; the model reads at most T_max = 256"),
    ],
)
def test_a_bad_text_keeps_the_last_picture_and_names_the_problem(
    explorer: TextExplorer, entry: str, problem: str
) -> None:
    explorer.controls["text"].value = "To be, or not to be"
    before = explorer.data
    picture = bytes(explorer.image.value)
    explorer.controls["text"].value = entry
    d = explorer.data
    assert d["error"].startswith(f"Could not read the text: {problem}")
    assert d["error"].endswith(". Still showing the last text the model could read.")
    assert d["text"] == entry and explorer.controls["text"].value == entry  # the entry stays, to be corrected
    assert d["characters"] == "To be, or not to be" and d["ids"] == before["ids"]
    np.testing.assert_array_equal(d["map"], before["map"])
    assert bytes(explorer.image.value) == picture
    shown = explorer.readout.value
    assert shown.startswith('<p role="alert"') and shown.index("</p>") < shown.index("After ")
    explorer.controls["head"].value = 1  # another control: the old text is still shown, the error stays
    assert explorer.data["characters"] == "To be, or not to be" and explorer.data["error"] is not None
    explorer.controls["text"].value = "To be"  # a good entry clears it
    assert explorer.data["error"] is None and 'role="alert"' not in explorer.readout.value


def test_all_heads_side_by_side(explorer: TextExplorer, model: ShakespeareModel) -> None:
    c = model.config
    _, weights = softmax_last(model, DEFAULT_TEXT)
    start = len(DEFAULT_TEXT) - SHOWN
    explorer.controls["layer"].value = 2
    explorer.controls["head"].value = ALL
    d = explorer.data
    assert d["head"] == ALL and d["title"] == "layer 2, all heads" and d["map"].shape == (c.heads, SHOWN, SHOWN)
    np.testing.assert_allclose(d["map"], weights[2][0][:, start:, start:], rtol=1e-6)
    last = weights[2][0][:, -1]  # (h, T): each head's last query
    np.testing.assert_allclose(d["hidden_weight"], last[:, :start].sum(axis=-1), rtol=1e-5)
    assert d["strongest"] == last.argmax(axis=-1).tolist()
    tiled = tile_maps(np.sqrt(d["map"]), 4, 2)  # h = 4: two rows of two maps
    np.testing.assert_allclose(shown_cells(explorer), tiled, rtol=1e-6, equal_nan=True)
    assert [t.get_text() for t in explorer._names] == [f"head {j}" for j in range(c.heads)]
    assert not any(t.get_text() for t in [explorer._key_row, *explorer._keys, *explorer._queries])  # too small
    assert "Layer 2, every head: the last character puts its largest weight in head 0, " in d["readout"]
    assert f"(heads 0-{c.heads - 1}) of its weight on the {start} before them" in d["readout"]
    assert repr(explorer).endswith("layer=2, head='all')")
    explorer._backgrounds.clear()  # draw the characters again (a kept layer would be restored, not drawn)
    explorer.controls["head"].value = 1  # back to one head: its characters, no names
    assert explorer.data["map"].shape == (SHOWN, SHOWN) and not any(t.get_text() for t in explorer._names)
    assert explorer._key_row.get_text() == "".join(explorer.data["labels"])
    assert TextExplorer(model, head=ALL).data["map"].shape == (c.heads, SHOWN, SHOWN)


def test_explorer_constructor_errors(model: ShakespeareModel) -> None:
    with pytest.raises(ValueError, match=r"layer must be in 0 \.\. 3 and head in 0 \.\. 3 or 'all', got 4, 0"):
        TextExplorer(model, layer=4)
    with pytest.raises(ValueError, match=r"got 0, -1"):
        TextExplorer(model, head=-1)
    with pytest.raises(ValueError, match=r"got True, 0"):
        TextExplorer(model, layer=True)
    with pytest.raises(ValueError, match=r"got 0, 'every'"):
        TextExplorer(model, head="every")
    with pytest.raises(ValueError, match="the model has no character '~'"):
        TextExplorer(model, text="~")
    with pytest.raises(TypeError, match=r"model must be a ShakespeareModel from shakespeare\.load_model\(\), got str"):
        TextExplorer("model")  # type: ignore[arg-type]
    w = TextExplorer(model, text="ab\r\ncd", layer=2, head=3)
    assert w.data["characters"] == "ab\ncd" and (w.data["layer"], w.data["head"]) == (2, 3)


def shown_labels(texts: list[Text]) -> list[tuple[float, str]]:
    """The characters written beside the map (keys below it, or queries left of it): ``(position, glyph)``."""
    along = [0 if t.get_horizontalalignment() == "center" else 1 for t in texts]  # keys: x; queries: y
    return [(t.get_position()[a], t.get_text()) for t, a in zip(texts, along, strict=True) if t.get_text()]


def test_the_map_labels_every_character_it_can(explorer: TextExplorer) -> None:
    explorer.controls["text"].value = "To be,\nor not"
    every = list(enumerate("To\u00b7be,\u23ceor\u00b7not"))
    assert shown_labels(explorer._keys) == every and shown_labels(explorer._queries) == every
    assert [*explorer._map_ax.get_xlim(), *explorer._map_ax.get_ylim()] == [-0.5, 12.5, 12.5, -0.5]
    assert len(explorer._ticks[0].get_segments()) == len(explorer._ticks[1].get_segments()) == 13
    assert explorer._map_ax.get_title() == "layer 0, head 0"
    explorer._pictures.clear()  # draw it all now: the kept picture and layers of the first text would be
    explorer._backgrounds.clear()  # shown again and leave the figure's artists as they were
    explorer.controls["text"].value = DEFAULT_TEXT  # 226 characters: the last 48 on the map
    labels = explorer.data["labels"]
    # a full map's keys: one text, each monospaced character one cell wide, at least 9 pt
    assert explorer._key_row.get_text() == "".join(labels) and not shown_labels(explorer._keys)
    assert float(explorer._key_row.get_fontsize()) >= MIN_FONT_POINTS
    renderer = explorer.figure.canvas.get_renderer()  # type: ignore[attr-defined]
    box = explorer._key_row.get_window_extent(renderer)
    cells = explorer._map_ax.transData.transform([(-0.5, 0), (SHOWN - 0.5, 0)])[:, 0]
    assert box.x0 == pytest.approx(cells[0], abs=2) and box.x1 == pytest.approx(cells[1], abs=2)
    rows = shown_labels(explorer._queries)
    assert rows == list(enumerate(labels))[1::2] and rows[-1] == (SHOWN - 1, labels[-1])  # every 2nd, the last
    assert len(explorer._ticks[1].get_segments()) == SHOWN  # a tick mark at every row
    start = len(DEFAULT_TEXT) - SHOWN
    assert explorer._map_ax.get_title() == f"layer 0, head 0: characters {start}-{len(DEFAULT_TEXT) - 1} of 226"


def test_every_text_of_the_picture_is_at_least_9_points(
    explorer: TextExplorer, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[Text] = []
    draw = Text.draw

    def recording_draw(text: Text, renderer: Any) -> None:
        if text.get_visible() and text.get_text().strip():
            drawn.append(text)
        draw(text, renderer)

    monkeypatch.setattr(Text, "draw", recording_draw)
    for text in ("a", DEFAULT_TEXT, "W" * 256):
        explorer.controls["text"].value = text
        explorer._pictures.clear()
        explorer._backgrounds.clear()
        explorer.refresh()
    assert drawn and min(float(t.get_fontsize()) for t in drawn) >= MIN_FONT_POINTS


# ----- the interface every lesson widget shares (as test_head_widgets.py checks for 05, 06 and 09) -----
def test_the_shared_interface(model: ShakespeareModel, capsys: pytest.CaptureFixture[str]) -> None:
    open_before = set(plt.get_fignums())  # another test on this worker may have left a pyplot figure open
    explorer = TextExplorer(model)
    assert isinstance(explorer, LessonWidget) and isinstance(explorer.ui, widgets.Box)
    for name, control in explorer.controls.items():
        assert explorer.data[name] == control.value and control.style.description_width == "initial"
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == repr(explorer) and "live widget" in bundle["text/html"]
    layout = explorer.image.layout
    shown = (int(layout.width.removesuffix("px")), int(layout.height.removesuffix("px")))
    picture = PILImage.open(io.BytesIO(explorer.image.value))
    assert picture.size == (PIXEL_DENSITY * shown[0], PIXEL_DENSITY * shown[1])
    for name, new in (("text", "Good night, sweet prince"), ("layer", 3), ("head", 2)):
        before = bytes(explorer.image.value)
        explorer.controls[name].value = new
        assert explorer.data[name] == new and bytes(explorer.image.value) != before, name
    assert capsys.readouterr() == ("", "")
    assert set(plt.get_fignums()) == open_before  # the widget opened no pyplot figure
