"""Lesson 04 widgets, driven without a browser: set a control's value, check what is shown."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lessons_lib.inspect_heads import load_toy_heads, run_layer  # noqa: E402
from lessons_lib.widgets.head_widgets import HeadExplorer, HeadReslicer, SplitExplorer, _runs, _tile  # noqa: E402

PNG = b"\x89PNG"


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    return load_toy_heads()


def test_head_explorer_follows_its_controls(model) -> None:  # type: ignore[no-untyped-def]
    explorer = HeadExplorer(model)
    _, weights = run_layer(model, explorer.tokens)
    first_picture = bytes(explorer.image.value)
    assert first_picture.startswith(PNG)
    assert explorer.current["head"] == 0 and np.allclose(explorer.current["map"], weights[0, 0])

    explorer.head.value = 2
    c = explorer.current
    assert c["columns"] == (8, 12)
    assert np.array_equal(c["wq"], model.layer.wq[:, 8:12])
    assert np.array_equal(c["wk"], model.layer.wk[:, 8:12])
    assert np.array_equal(c["wv"], model.layer.wv[:, 8:12])
    assert np.allclose(c["map"], weights[0, 2])
    assert bytes(explorer.image.value) != first_picture

    explorer.batch.value = 3
    assert explorer.current["labels"] == model.labels(explorer.tokens[3])
    assert np.allclose(explorer.current["map"], weights[3, 2])

    explorer.average.value = True
    assert np.allclose(explorer.current["map"], weights[3].mean(axis=0))
    assert explorer.current["head"] == 2  # the columns still show the chosen head
    explorer.average.value = False
    assert np.allclose(explorer.current["map"], weights[3, 2])


def test_head_explorer_display_text_is_stable(model) -> None:  # type: ignore[no-untyped-def]
    bundle = HeadExplorer(model)._repr_mimebundle_()
    assert bundle["text/plain"] == "HeadExplorer widget"
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_reslicer_cuts_the_same_matrix(model) -> None:  # type: ignore[no-untyped-def]
    reslicer = HeadReslicer(model)
    assert reslicer.heads.options == (1, 2, 4, 8, 16)
    assert reslicer.current["heads"] == 4
    _, weights = run_layer(model, reslicer.tokens)
    assert np.allclose(reslicer.current["maps"], weights[0])  # the trained cut = the trained maps

    for h in (1, 2, 8, 16):
        reslicer.heads.value = h
        c = reslicer.current
        assert c["d_h"] == 16 // h
        assert c["maps"].shape == (h, 8, 8)
        assert c["wq_blocks"].shape == (h, 16, 16 // h)
        assert np.array_equal(np.concatenate(list(c["wq_blocks"]), axis=1), model.layer.wq)
        assert c["boundaries"][-1] == (16 - 16 // h, 16)
        visible = [line.get_visible() for line in reslicer._edges]
        assert sum(visible) == h - 1  # one boundary line between neighbouring heads

    reslicer.heads.value = 8
    reslicer.batch.value = 2
    assert reslicer.current["batch"] == 2
    assert not np.allclose(reslicer.current["maps"][:4], weights[2])  # other cut, other heads


def test_split_explorer_shows_where_features_go() -> None:
    explorer = SplitExplorer(length=4, width=8, heads=2)
    assert explorer.current["features"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    explorer.split_mode.value = "wrong"
    assert explorer.current["features"] == [list(range(8))] * 2
    assert explorer.current["tokens"] == [[0, 1], [2, 3]]
    explorer.heads.value = 4
    assert explorer.current["tokens"] == [[0], [1], [2], [3]]
    explorer.split_mode.value = "correct"
    assert explorer.current["features"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert explorer.current["layout"].shape == (4, 8)
    assert bytes(explorer.image.value).startswith(PNG)


def test_split_explorer_rejects_bad_heads() -> None:
    with pytest.raises(ValueError, match="divisors of width=8 above 1"):
        SplitExplorer(length=4, width=8, heads=3)


def test_callbacks_print_nothing(model, capsys) -> None:  # type: ignore[no-untyped-def]
    explorer = HeadExplorer(model)
    reslicer = HeadReslicer(model)
    explorer.head.value = 1
    explorer.average.value = True
    reslicer.heads.value = 2
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


def test_helpers() -> None:
    assert _runs([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    tiled = _tile(np.ones((3, 2, 2)), slots=4, per_row=2)
    assert tiled.shape == (5, 5)
    assert np.isnan(tiled).sum() == 25 - 12
    with pytest.raises(ValueError, match="slots"):
        _tile(np.ones((5, 2, 2)), slots=4)
