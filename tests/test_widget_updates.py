"""When a lesson widget draws (issue 31): a burst of changes from the browser shows only its last state, a
change made in Python draws at once, and a state shown for the first time draws no more than it must.

A change from the browser is simulated as ipywidgets receives one: ``control.set_state({...})`` (what the
widget's comm calls with a message's state: a slider's ``value``, a dropdown's ``index``), inside a
running asyncio loop, as in a kernel. No browser and no real timing: the changes of a burst are made
without yielding to the loop in between, so none of them can draw before the last one has arrived.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import pytest

from lessons_lib.induction import InductionModel, load_induction_model
from lessons_lib.inspect_heads import ToyHeads, load_toy_heads
from lessons_lib.widgets import base
from lessons_lib.widgets.base import BURST_SECONDS, KEPT_LAYERS, SETTLE_SECONDS, LessonWidget
from lessons_lib.widgets.cache_widgets import HeadSharing, KVCacheCalculator
from lessons_lib.widgets.head_widgets import HeadExplorer, HeadReslicer, SplitExplorer
from lessons_lib.widgets.induction_widgets import InductionExplorer


@pytest.fixture(scope="module")
def toy() -> ToyHeads:
    return load_toy_heads()


@pytest.fixture(scope="module")
def induction_model() -> InductionModel:
    return load_induction_model()


def counting(widget: LessonWidget) -> tuple[list[object], list[object]]:
    """Note ``.data``'s value of the widget's first control at every picture the widget draws, and at
    every picture it shows (hands to its image)."""
    drawn: list[object] = []
    shown: list[object] = []
    render = widget._render
    first = next(iter(widget.controls))

    def counting_render() -> bytes:
        drawn.append(widget.data[first])
        return render()

    widget._render = counting_render  # type: ignore[method-assign]
    widget.image.observe(lambda _change: shown.append(widget.data[first]), names="value")
    return drawn, shown


def from_browser(control: widgets.ValueWidget, value: object) -> None:
    """Change ``control`` as a message from the browser does: a dropdown sends its new index."""
    if isinstance(control, widgets.Dropdown):
        values = [option[1] if isinstance(option, tuple) else option for option in control.options]
        control.set_state({"index": values.index(value)})
    else:
        control.set_state({"value": value})


async def settle() -> None:
    """Wait until a waiting picture has been shown. In two sleeps: the timer that shows a picture is set
    only once its drawing ends, so the second sleep starts after that timer, however long drawing took."""
    for _ in range(2):
        await asyncio.sleep(BURST_SECONDS)


def test_a_burst_from_the_browser_shows_only_its_last_state() -> None:
    sharing = HeadSharing()  # h = 8
    drawn, shown = counting(sharing)
    before = bytes(sharing.image.value)

    async def burst() -> None:
        for h in (9, 10, 11, 12):  # four changes in a row, as arrow keys held on the dropdown send them
            from_browser(sharing.controls["heads"], h)
            assert sharing.data["heads"] == h  # .data follows every change at once
            assert sharing.data["alt"].startswith(f"Query heads q0 to q{h - 1} ")
        assert not drawn and bytes(sharing.image.value) == before  # no picture yet
        await settle()

    asyncio.run(burst())
    assert drawn == shown == [12], "the burst drew more than its last state"
    assert bytes(sharing.image.value) != before
    assert "q11" in sharing.readout.value  # the readout came with the picture
    assert sharing._pending is None


def test_a_submitted_text_is_drawn_and_shown_at_once() -> None:
    """A text box sends its value only on Enter or when it loses focus: no burst to wait for."""
    explorer = InductionExplorer()
    drawn, shown = counting(explorer)

    async def submit() -> None:
        from_browser(explorer.controls["tokens"], "3 1 4 1 5 9 2 6")
        assert len(drawn) == len(shown) == 1 and explorer._pending is None  # shown before set_state returned

    asyncio.run(submit())
    assert explorer.data["ids"] == [3, 1, 4, 1, 5, 9, 2, 6] and "3 1 4 1 5 9 2 6" in explorer.readout.value


def test_a_single_change_is_drawn_at_once_and_shown_when_no_other_follows() -> None:
    sharing = HeadSharing()
    drawn, shown = counting(sharing)

    async def single() -> None:
        from_browser(sharing.controls["heads"], 9)
        await asyncio.sleep(SETTLE_SECONDS / 2)
        assert drawn == [9] and shown == []  # drawn ahead, kept back in case another change follows
        await settle()
        assert shown == [9]

    asyncio.run(single())
    assert drawn == [9]


def test_a_change_while_a_picture_waits_drops_it() -> None:
    """The first change of a burst may be drawn ahead; it is never shown, and the burst's last state is."""
    sharing = HeadSharing()
    drawn, shown = counting(sharing)

    async def burst() -> None:
        from_browser(sharing.controls["heads"], 9)
        await asyncio.sleep(SETTLE_SECONDS / 2)  # drawn ahead meanwhile, not shown
        for h in (10, 11, 12):
            from_browser(sharing.controls["heads"], h)
            await asyncio.sleep(0)
        await settle()

    asyncio.run(burst())
    assert shown == [12] and drawn == [9, 12]


def test_changes_from_the_browser_apart_show_each(toy: ToyHeads) -> None:
    explorer = HeadExplorer(toy)
    drawn, shown = counting(explorer)

    async def apart() -> None:
        for head in (1, 2, 3):
            from_browser(explorer.controls["head"], head)
            await settle()
            assert shown[-1] == head  # shown once the learner stopped

    asyncio.run(apart())
    assert drawn == shown == [1, 2, 3]


def test_a_change_made_in_python_draws_at_once_and_drops_a_waiting_picture(toy: ToyHeads) -> None:
    explorer = HeadExplorer(toy)
    drawn, shown = counting(explorer)

    async def mixed() -> None:
        from_browser(explorer.controls["head"], 1)  # a picture waits
        assert explorer._pending is not None and not drawn
        explorer.controls["head"].value = 2  # a notebook cell: .data and the picture at once
        assert drawn == shown == [2] and explorer._pending is None
        assert explorer.data["head"] == 2 and "Head 2 on sequence 0" in explorer.readout.value
        await settle()

    asyncio.run(mixed())
    assert drawn == shown == [2], "the dropped picture was drawn after all"


def test_a_change_without_a_running_loop_draws_at_once(toy: ToyHeads) -> None:
    explorer = HeadExplorer(toy)
    drawn, shown = counting(explorer)
    from_browser(explorer.controls["sequence"], 2)  # e.g. a front end driven outside a kernel
    assert drawn == shown == [0] and explorer.data["sequence"] == 2 and explorer._pending is None


def test_a_burst_that_adjusts_other_controls_shows_its_last_state(toy: ToyHeads) -> None:
    """HeadReslicer's h sets the options of "heads shown"; the picture shown is that of the last h."""
    reslicer = HeadReslicer(toy)
    drawn, shown = counting(reslicer)

    async def burst() -> None:
        for h in (8, 16, 2):
            from_browser(reslicer.controls["heads"], h)
        await settle()

    asyncio.run(burst())
    assert drawn == shown == [2] and reslicer.data["visible"] == [0, 1]
    picture = bytes(reslicer.image.value)
    reslicer._pictures.clear()
    reslicer.refresh()  # the same state drawn now, from Python
    assert bytes(reslicer.image.value) == picture


# ----- first visits: a state never shown draws no more than what it changes ----------------------
MAKERS: dict[str, Callable[[ToyHeads, InductionModel], LessonWidget]] = {
    "HeadExplorer": lambda toy, _: HeadExplorer(toy),
    "HeadReslicer": lambda toy, _: HeadReslicer(toy),
    "SplitExplorer": lambda _toy, _: SplitExplorer(),
    "InductionExplorer": lambda _toy, model: InductionExplorer(model),
}
NEW_STATES: dict[str, list[dict[str, object]]] = {
    "HeadExplorer": [{"sequence": 1}, {"sequence": 2, "average": True}, {"average": False, "head": 3}],
    "HeadReslicer": [{"heads": 8}, {"shown": 4}, {"sequence": 3}, {"heads": 1}],
    "SplitExplorer": [{"split": "wrong"}, {"heads": 4}],
    "InductionExplorer": [{"sequence": "random"}, {"tokens": "3 1 4 1 5 9 2 6"}, {"layer": 0}],
}


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_state_shown_for_the_first_time_draws_no_whole_figure(
    name: str, toy: ToyHeads, induction_model: InductionModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parts of a picture that never change are drawn once, when the widget is made; a new sequence,
    a new h, a new text draws only what it changes (its token labels once, then the dynamic artists)."""
    widget = MAKERS[name](toy, induction_model)
    full_draws: list[int] = []
    monkeypatch.setattr(widget.figure.canvas, "draw", lambda: full_draws.append(1))
    for state in NEW_STATES[name]:
        before = bytes(widget.image.value)
        for control, value in state.items():
            widget.controls[control].value = value
        assert full_draws == [], f"{name} {state}: the whole figure was drawn again"
        assert bytes(widget.image.value) != before, f"{name} {state}: no new picture"


def test_the_kept_layers_are_bounded(induction_model: InductionModel) -> None:
    explorer = InductionExplorer(induction_model)
    for n in range(2, 2 + 2 * KEPT_LAYERS):
        explorer.controls["tokens"].value = " ".join(str(i) for i in range(n))
    assert len(explorer._backgrounds) == KEPT_LAYERS + 1  # the latest sequences' labels + the still parts
    assert base.STILL in explorer._backgrounds


def test_pictures_that_change_as_a_whole_draw_the_whole_figure() -> None:
    """KVCacheCalculator and HeadSharing: bar heights, scales and lines all change; nothing is kept."""
    for widget in (KVCacheCalculator(), HeadSharing()):
        assert widget._dynamic == [] and widget._layer() == []
