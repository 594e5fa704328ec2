"""The one interface every lesson widget shares, and the one way they all draw (lessons 05, 06 and 09).

A widget is one or two rows of ipywidgets controls above a picture (and, for some, a line of text).
Every widget exposes the same three things:

* ``.controls``: name -> ipywidgets control. Set ``w.controls["head"].value = 2`` in a test or a
  notebook cell exactly as a learner moves the control;
* ``.data``: name -> the plain values and arrays the widget shows now: each control's value under
  the control's name, then what is computed from them (text readouts included), and ``alt``: the
  picture in words, written after the readout for screen readers only;
* ``.ui``: the displayable ipywidgets box. Displaying the widget displays it; viewers that cannot
  run widgets show a short HTML note saying so (the website, GitHub, nbviewer) or its ``repr``,
  e.g. ``HeadExplorer(head=0, sequence=0, average=False)``.

A subclass supplies the controls and three steps: ``_compute`` (plain functions from
`lessons_lib` turn the controls' values into ``.data``), ``_build`` (lay out the figure once, with
`lessons_lib.plotting`) and ``_draw`` (show ``.data`` in that figure). This base wires them together:
every change of a control's value recomputes ``.data`` and renders a new picture. Callbacks print
nothing and the figure is not managed by pyplot, so nothing appears in or is left behind by a cell.

Pictures are rendered with Agg at ``PIXEL_DENSITY`` (2) times the pixel density of their displayed
size and shown in an ``ipywidgets.Image`` whose CSS size is the displayed size: crisp on HiDPI screens.
Going back to a state shown a moment ago shows its kept picture again without drawing it
(``PICTURE_CACHE_SIZE`` recent pictures per widget). Sliders send their value when released, so a drag
draws once, never a queue of pictures the learner has already moved past; and a quick run of changes
from the browser (arrow keys held on a dropdown) shows only its last state (``SETTLE_SECONDS``); a text
box, which sends its value only when the learner submits it, is drawn at once.
"""

from __future__ import annotations

import asyncio
import html
import os
import re
import struct
import threading
import zlib
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import QuadMesh
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from numpy.typing import NDArray

from lessons_lib.widgets.access import access_layer

__all__ = [
    "DISPLAY_DPI",
    "PICTURE_CACHE_SIZE",
    "PIXEL_DENSITY",
    "WIDGET_STYLE",
    "LessonWidget",
    "map_in_words",
    "readout_html",
]

DISPLAY_DPI = 100  # CSS pixels per figure inch (the size on the page)
PIXEL_DENSITY = 2  # PNG pixels per CSS pixel (a HiDPI screen shows 2 or more device pixels per CSS pixel)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# How many recent pictures a widget keeps (PNG bytes, 50-200 KB each): going back to a state shown a moment
# ago (head 0 -> 1 -> 0, repeat <-> tile) shows its picture again without drawing it. 0 turns this off.
PICTURE_CACHE_SIZE = int(os.environ.get("LESSONS_PICTURE_CACHE", "24"))
# When the picture of a change from the browser is shown (see `LessonWidget._show`): SETTLE_SECONDS after
# the change at the earliest, so that a next change can still drop it. That is longer than the gap
# between the changes of a burst (a dropdown's arrow keys repeat every 30-40 ms; in the kernel, the
# messages come 35-50 ms apart), and short beside the 150 ms a change may take to show. Within a burst,
# its latest state is drawn once no change has come for BURST_SECONDS (the messages of a burst come
# further apart while the kernel draws: the browser sends the next one once the kernel has taken the last).
SETTLE_SECONDS = float(os.environ.get("LESSONS_SETTLE_MS", "60")) / 1000
BURST_SECONDS = max(0.08, SETTLE_SECONDS)
QUEUED_SECONDS = 0.005  # enough for the kernel to handle the messages already queued before drawing
# Backgrounds a widget keeps (see `LessonWidget._render`): the parts of its picture that never change, and
# on them the layers drawn for the `KEPT_LAYERS` latest background keys (a figure's pixels, 4-7 MB each).
KEPT_LAYERS = 6
STILL = ("the parts that never change",)  # their key among a widget's backgrounds (never a background key)
# Shown in place of the widget where no Python kernel runs it (the website, GitHub, nbviewer);
# JupyterLab shows the live widget instead, because the widget view comes first in its order.
STATIC_NOTE = (
    '<div class="lesson-widget-note"><p><strong>A live widget is shown here</strong> when this lesson runs '
    "with a Python kernel: launch it on Binder, or run it locally in JupyterLab, to move its controls. "
    "The cell below drives it from code and prints what it shows.</p><p><code>{name}</code></p></div>"
)


# Shown once with every widget (a <style> element applies to the whole page, so every rule is scoped to
# the widgets' own box). WCAG 2.2 asks 3:1 for a focus ring and for what shows a control's state, against
# what is next to it, and 4.5:1 for text. In JupyterLab's light theme (white, buttons #eeeeee) and its
# dark theme (#111111): the focus ring and the pressed toggle's fill (#2f6fd6) 4.81:1 on white, 4.15:1
# against an unpressed button, 3.93:1 on #111111, the pressed toggle's white text 4.81:1 on its fill; the
# slider knob's edge (#767676) 4.54:1 on white, 4.16:1 on #111111. `tests/test_widget_access.py` checks these.
FOCUS_COLOUR = "#2f6fd6"
KNOB_EDGE = "#767676"
WIDGET_STYLE = f"""<style>
.lesson-widget :focus-visible, .lesson-widget :focus {{
  outline: 3px solid {FOCUS_COLOUR} !important; outline-offset: 1px; }}
.lesson-widget .widget-toggle-button.mod-active {{ background: {FOCUS_COLOUR}; color: #ffffff; font-weight: 600; }}
.lesson-widget .noUi-handle {{ border: 2px solid {KNOB_EDGE} !important; }}
.lesson-widget .lesson-sr-only {{ position: absolute; width: 1px; height: 1px; overflow: hidden;
  clip-path: inset(50%); white-space: nowrap; }}
</style>"""


# One widget update at a time, in every thread: a kernel may handle widget messages on a thread of their
# own (ipykernel 7's subshells, which JupyterLab uses for them) while a cell runs on the main thread.
_UPDATING = threading.RLock()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread (a Jupyter kernel's, while it handles a message), else None."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _pin_axis_labels(*axes: Axis) -> None:
    """Keep each axis's label where Matplotlib last placed it (beside the tick labels drawn then).

    Left to itself, Matplotlib places an axis label anew on every draw of its axis, measuring every tick
    label twice more to do so: a third of the time of an axis drawn per update or per sequence. Call it
    once the picture has been drawn, for an axis whose box and widest tick label stay as they are.
    """
    for axis in axes:
        x, y = axis.label.get_position()
        axis.set_label_coords(x, y, transform=axis.label.get_transform())


def _as_mesh(image: AxesImage, shape: tuple[int, int] | None = None) -> QuadMesh:
    """``image`` (an ``imshow`` of a matrix, cell ``(r, c)`` centred on ``x = c, y = r``) made a mesh of flat
    cells: the same cells, colours, colour scale and place. Agg draws the mesh 5-10 times faster than it
    resamples the image to the screen's pixels (and the cells' edges land on the same pixels, or one beside).

    ``shape``: room for up to that many rows and columns; cells past the data stay empty, out of sight as
    long as the axes' limits show only the data. Show new data with `_set_cells`.
    """
    ax = image.axes
    limits = ax.get_xlim(), ax.get_ylim()
    data = np.asarray(image.get_array(), dtype=np.float64)
    rows, columns = shape or data.shape[:2]
    mesh = ax.pcolormesh(np.arange(columns + 1) - 0.5, np.arange(rows + 1) - 0.5, np.full((rows, columns), np.nan),
                         cmap=image.get_cmap(), norm=image.norm, antialiased=False,  # type: ignore[arg-type]
                         zorder=image.get_zorder())
    _set_cells(mesh, data)
    image.remove()
    ax.set_xlim(limits[0])  # as the image left them (adding the mesh may have widened them)
    ax.set_ylim(limits[1])
    return mesh


def _set_cells(mesh: QuadMesh, data: NDArray[Any]) -> None:
    """Show the matrix ``data`` in ``mesh`` (from `_as_mesh`): cell ``(r, c)`` is ``data[r, c]``, the rest empty."""
    rows, columns = (size - 1 for size in np.shape(mesh.get_coordinates())[:2])
    cells = np.full((rows, columns), np.nan)
    cells[: data.shape[0], : data.shape[1]] = data
    mesh.set_array(np.ma.masked_invalid(cells))  # type: ignore[no-untyped-call]


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png(rgba: NDArray[np.uint8]) -> bytes:
    """An Agg buffer ``(height, width, 4)`` as an RGB PNG, encoded for speed, not size.

    Rows are stored unfiltered and deflated at level 1: the pictures are mostly flat colour, which
    compresses well anyway, and this is about twice as fast as Pillow's PNG encoder (the encoding
    would otherwise be a third of an update's time).
    """
    height, width, _ = rgba.shape
    rows = np.zeros((height, 1 + 3 * width), dtype=np.uint8)  # each row: filter type 0 (none), then R G B ...
    pixels = rows[:, 1:].reshape(height, width, 3)  # a view into rows
    for channel in range(3):  # R, G, B; the figure is opaque, so alpha is dropped
        pixels[:, :, channel] = rgba[:, :, channel]  # one channel at a time: twice as fast as [:, :, :3]
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlacing
    body = zlib.compress(rows.tobytes(), 1)
    return PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", body) + _chunk(b"IEND", b"")


def _fit_labels(control: widgets.ValueWidget) -> None:
    """One look for every control: descriptions and option labels shown in full, never cut off, and a
    tooltip (ipywidgets shows "null" for a control without one)."""
    control.style.description_width = "initial"  # as wide as the description needs
    if not control.tooltip:
        control.tooltip = control.description
    if isinstance(control, widgets.Checkbox):
        control.indent = False  # no empty description column before the box
    if isinstance(control, widgets.IntSlider):
        control.continuous_update = False  # one update when the drag ends: a drag never queues stale pictures
    if isinstance(control, widgets.Dropdown):  # wide enough for its description and its longest option
        labels = [str(option[0] if isinstance(option, tuple) else option) for option in control.options]
        longest = max((len(label) for label in labels), default=1)
        control.layout.width = f"{0.6 * (len(control.description) + longest) + 4:.1f}em"
    if isinstance(control, widgets.ToggleButtons):
        labels = [str(option[0] if isinstance(option, tuple) else option) for option in control.options]
        longest = max(len(label) for label in labels)
        control.style.button_width = f"{0.6 * longest + 2:.1f}em"  # a character is ~0.5 em wide; 2 em of padding


def readout_html(text: str, error: str | None = None, picture: str | None = None) -> str:
    """The readout as HTML: an ``error`` first, on its own line, marked and announced (``role="alert"``);
    then the text; then ``picture``, the picture above in words, for screen readers only (class
    ``lesson-sr-only``: kept out of sight by `WIDGET_STYLE`, still in the page's text).

    "x // y" keeps its operands together (non-breaking spaces), so a line never ends before a lone "y".
    """
    body = re.sub(r" // ", "\u00a0//\u00a0", html.escape(text))
    words = "" if picture is None else f'<span class="lesson-sr-only">The picture above: {html.escape(picture)}</span>'
    if error is None:
        return f"<p>{body}</p>{words}"
    problem = html.escape(error)
    return (f'<p role="alert" style="color:#b00020;font-weight:600;margin-bottom:0.3em">'
            f"\u26a0 {problem}</p><p>{body}</p>{words}")


def _steps(k: int, way: str) -> str:
    return f"{k} step {way}" if k == 1 else f"{k} steps {way}"


def map_in_words(weights: Any, labels: Sequence[str] | None = None) -> str:
    """One attention map ``(T, S)`` in words, for a picture's alt text and a widget's readout.

    Where most queries put their largest weight: at one offset ("every query puts its largest weight
    1 step back", "on itself"), else at one key position (with its label), else nowhere in common (a
    query whose largest weight is shared by several keys counts for none);
    then how sharp the map is (the largest weight per query, averaged). Query ``t`` is position
    ``t + S - T`` (the last ``T`` of ``S`` positions), as in a causal map with a cache.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2 or 0 in w.shape:
        raise ValueError(f"weights must be one map (T, S) with T, S >= 1, got shape {w.shape}")
    T, S = w.shape
    ordered = np.sort(w, axis=1)
    single = ordered[:, -1] - (ordered[:, -2] if S > 1 else 0.0) > 1e-9  # a query whose largest weight is unique
    top = w.argmax(axis=1)[single]  # the key each such query weighs most
    offsets = (np.arange(T) + (S - T))[single] - top

    def lead(n: int) -> str:  # who puts their largest weight there
        if n == T:
            return "every query puts its" if T > 1 else "the one query puts its"
        return f"{n} of {T} queries put their"

    def most(values: NDArray[np.int64]) -> tuple[int, int]:  # the commonest value and how many have it
        found, counts = np.unique(values, return_counts=True)
        return int(found[counts.argmax()]), int(counts.max())

    if not single.any():
        text = "every query gives several keys the same largest weight"
    elif 2 * most(offsets)[1] > T:
        offset, n = most(offsets)
        where = "on itself" if offset == 0 else _steps(offset, "back") if offset > 0 else _steps(-offset, "ahead")
        text = f"{lead(n)} largest weight {where}"
    elif 2 * most(top)[1] > T:
        key, n = most(top)
        named = f" ({labels[key]})" if labels is not None and key < len(labels) else ""
        text = f"{lead(n)} largest weight on key position {key}{named}"
    else:
        text = "no one offset or position takes most queries' largest weight"
    mean_top = float(w.max(axis=1).mean())
    kind = "sharp" if mean_top >= 0.8 else "spread out" if mean_top < 0.3 else "in between"
    return f"{text}; {kind}, the largest weight averages {mean_top:.2f}"


class LessonWidget(ABC):
    """Base of every lesson widget: ``.controls`` in, ``.data`` out, ``.ui`` to display.

    A subclass sets what ``_compute`` needs, then calls ``super().__init__(controls, size, rows)``:
    ``size`` is the picture's displayed size in inches (``DISPLAY_DPI`` CSS pixels each) and ``rows``
    groups the control names into rows (default: one row, in the order of ``controls``).
    Besides ``.controls``, ``.data`` and ``.ui``: ``.figure`` (the Matplotlib figure), ``.image`` (the
    ``ipywidgets.Image`` showing it) and ``.readout`` (the ``ipywidgets.HTML`` under it, shown only
    when ``.data`` has a "readout" text) are the parts ``.ui`` is made of.
    """

    def __init__(
        self,
        controls: dict[str, widgets.ValueWidget],
        size: tuple[float, float],
        rows: Sequence[Sequence[str]] | None = None,
    ) -> None:
        self.controls = controls
        for control in controls.values():
            _fit_labels(control)
        self.figure = Figure(figsize=size, dpi=DISPLAY_DPI * PIXEL_DENSITY, facecolor="white")  # opaque: see _png
        FigureCanvasAgg(self.figure)
        width, height = (round(inches * DISPLAY_DPI) for inches in size)
        self.image = widgets.Image(
            format="png", layout=widgets.Layout(width=f"{width}px", height=f"{height}px", object_fit="contain")
        )
        # The text under the picture wraps at the picture's width, never wider.
        # An empty tooltip, not none: ipywidgets would give the (empty, hidden) description label the title "null".
        self.readout = widgets.HTML(layout=widgets.Layout(max_width=f"{width}px"), tooltip="")
        self.readout.add_class("lesson-readout")  # a live region (see access.py): a screen reader reads each change
        self._holding = False
        self._backgrounds: dict[Hashable, Any] = {}
        self._pictures: dict[Hashable, bytes] = {}  # picture key -> PNG, the most recently shown last
        self.data: dict[str, Any] = self._compute()
        self._dynamic: list[Artist] = self._build()
        for artist in self._dynamic:
            artist.set_animated(True)  # left out of the cached background, drawn on every update
        self._show()
        self._style = widgets.HTML(WIDGET_STYLE, tooltip="")  # focus rings, toggles, knobs at 3:1 (WIDGET_STYLE)
        for name, control in controls.items():
            control.observe(lambda _change, name=name: self._on_value(name), names="value")
        rows = [list(controls)] if rows is None else rows
        boxes = [widgets.HBox([controls[name] for name in row]) for row in rows]
        text = [self.readout] if "readout" in self.data else []
        # The picture's alt, names for slider handles, toggles' state, arrow keys: see access.py (None where
        # its script cannot run; the readout then still carries the picture in words).
        layer = access_layer()
        self.ui = widgets.VBox([*boxes, self.image, *text, self._style, *([] if layer is None else [layer])])
        self.ui.add_class("lesson-widget")

    @abstractmethod
    def _compute(self) -> dict[str, Any]:
        """What to show, from the controls' values: plain values and arrays, no drawing."""

    @abstractmethod
    def _build(self) -> list[Artist]:
        """Lay out ``self.figure`` once. Return the artists ``_draw`` changes (``[]``: redraw it all)."""

    @abstractmethod
    def _draw(self) -> None:
        """Show ``self.data`` in the figure built by ``_build``."""

    def _alt_text(self) -> str:
        """What the picture shows now, in words (its alt text); override to say more than its title."""
        return str(self.data.get("title", type(self).__name__))

    def _background_key(self) -> Hashable:
        """Which cached background fits ``self.data`` (override when the static part changes)."""
        return None

    # The update path's state (class defaults, so `__init__` sets none): the event loop a change from the
    # browser is being handled on (None for a change made in Python); the picture waiting on an event loop
    # (the callback's handle and its loop), if any; and the number of the latest change, which a waiting
    # callback checks before it draws or shows anything (a newer change makes it stale).
    _settling: asyncio.AbstractEventLoop | None = None
    _pending: tuple[asyncio.TimerHandle, asyncio.AbstractEventLoop] | None = None
    _turn = 0
    _kept_layers = KEPT_LAYERS  # backgrounds kept besides the still parts (see `_render`)

    def _changed(self, name: str) -> None:
        """Called when control ``name`` changes; override to adjust other controls first."""
        self.refresh()

    def refresh(self) -> None:
        """Recompute ``.data`` from the controls and show it (see `_show` for when its picture comes)."""
        with _UPDATING:
            self.data = self._compute()
            self._show()

    def _on_value(self, name: str) -> None:
        with _UPDATING:
            if self._holding:
                return
            # A change the browser sent: ipywidgets applies it inside `Widget.set_state`, which holds the
            # control's property lock while the observers run. A change made in Python (a test, a notebook
            # cell) holds none.
            # A text box that sends its value only when the learner submits it (Enter, or leaving the box)
            # cannot send a burst: its picture is drawn and shown at once, as for a change made in Python.
            control = self.controls[name]
            submitted = isinstance(control, (widgets.Text, widgets.Textarea)) and not control.continuous_update
            outer = self._settling
            self._settling = _running_loop() if control._property_lock and not submitted else None
            try:
                self._changed(name)
            finally:
                self._settling = outer

    def _replace_options(self, name: str, options: Sequence[Any], value: Any) -> None:
        """New options (and value) for control ``name`` without a redraw per intermediate value."""
        self._holding = True
        try:
            self.controls[name].options = options
            self.controls[name].value = value
        finally:
            self._holding = False

    def _picture_key(self) -> Hashable:
        """What the picture depends on (default: every control's value); override when it depends on more."""
        return tuple(control.value for control in self.controls.values())

    def _show(self) -> None:
        """Show ``.data``: its words (``.data["alt"]``) at once, its picture and the readout under it now
        for a change made in Python (``.data`` and ``.image`` are current when ``.value = ...`` returns),
        a moment later for a change from the browser, so that a burst of changes shows only its last state.

        A change from the browser waits on the event loop of the kernel's thread that handles it. Out of
        quiet, its picture is drawn as soon as the messages already queued have been handled
        (`QUEUED_SECONDS`) and shown once `SETTLE_SECONDS` have passed since the change (at once if drawing
        took that long). A change that comes while a picture waits (to be drawn or shown) is one of a burst
        (arrow keys held on a dropdown, quick clicks): the waiting picture is dropped, and the burst's
        latest state is drawn and shown once no change has come for `BURST_SECONDS`. A change made in
        Python drops a waiting picture too.
        """
        # The picture in words, current with every change. ipywidgets' Image has no alt attribute (and its
        # tooltip breaks the view in ipywidgets 8.1: the front end reads a description an Image lacks), so
        # the words go into the readout under the picture, hidden from the eye, read by a screen reader;
        # the access layer (access.py) copies them into the picture's alt where its script runs.
        self.data["alt"] = self._alt_text()
        self._turn += 1
        burst = self._pending is not None  # a picture waits: this change is one of a burst
        self._drop_pending()
        loop = self._settling
        if loop is None:
            self._present(self._picture())
        elif burst:
            self._wait(loop, BURST_SECONDS, self._present_turn, self._turn)
        else:
            self._wait(loop, QUEUED_SECONDS, self._draw_ahead, self._turn, loop.time() + SETTLE_SECONDS)

    def _wait(self, loop: asyncio.AbstractEventLoop, delay: float, callback: Any, *args: Any) -> None:
        """Call ``callback(*args)`` on ``loop`` after ``delay`` seconds, as the picture waiting."""
        self._pending = (loop.call_later(delay, callback, *args), loop)

    def _drop_pending(self) -> None:
        """Cancel the waiting callback, if any (on its own loop: the change may come on another thread)."""
        if self._pending is not None:
            handle, loop = self._pending
            if loop is _running_loop():
                handle.cancel()
            elif not loop.is_closed():  # else it will never run; either way its turn has passed
                loop.call_soon_threadsafe(handle.cancel)
            self._pending = None

    def _draw_ahead(self, turn: int, due: float) -> None:
        """Draw the picture of a change from the browser now; show it at loop time ``due`` (or, if that has
        passed, once the messages queued meanwhile have been handled) unless another change comes first."""
        with _UPDATING:
            if turn != self._turn:
                return  # a newer change came meanwhile (on another thread)
            picture = self._picture()
            loop = asyncio.get_running_loop()
            self._wait(loop, max(due - loop.time(), QUEUED_SECONDS), self._present_turn, turn, picture)

    def _present_turn(self, turn: int, picture: bytes | None = None) -> None:
        """Show ``picture`` (drawn ahead; None: draw ``.data``'s now) with the readout, unless a newer change came."""
        with _UPDATING:
            if turn == self._turn:
                self._present(self._picture() if picture is None else picture)

    def _picture(self) -> bytes:
        """The picture of ``.data`` as PNG: a picture already drawn for the same key again, without drawing."""
        key = self._picture_key()
        picture = self._pictures.pop(key, None)
        if picture is None:
            self._draw()
            picture = self._render()
        self._pictures[key] = picture  # most recent last
        while len(self._pictures) > PICTURE_CACHE_SIZE:
            self._pictures.pop(next(iter(self._pictures)))
        return picture

    def _present(self, picture: bytes) -> None:
        """Hand ``picture`` to the image (the browser swaps it) and the readout of ``.data`` to its text."""
        self._pending = None
        self.image.value = picture
        if "readout" in self.data:
            self.readout.value = readout_html(self.data["readout"], self.data.get("error"), self.data["alt"])

    def _layer(self) -> list[Artist]:
        """Those of the dynamic artists that change only with `_background_key` (a sequence's token labels).

        `_render` draws them once per key, on the parts that never change, and keeps that drawing as the
        key's background; an update then draws only the other dynamic artists. ``[]`` (the default): the
        whole background is drawn once per key, all dynamic artists on every update.
        """
        return []

    def _render(self) -> bytes:
        """Draw the figure with Agg and return it as PNG.

        Speed: with dynamic artists, the rest (axes, tick labels) is drawn once and kept; an update
        restores it and draws only the dynamic artists on top. With a `_layer`, the still parts are kept
        once, and on them each background key's layer is drawn once and kept (the `KEPT_LAYERS` latest).
        """
        canvas = self.figure.canvas
        assert isinstance(canvas, FigureCanvasAgg)
        key = self._background_key()
        layer = self._layer()
        # Unhinted text: hinting snaps glyphs to a coarse pixel grid, which twice the pixel density
        # does not need, and Matplotlib draws text much faster without it (text dominates a redraw).
        with matplotlib.rc_context({"text.hinting": "none"}):
            if not self._dynamic:
                canvas.draw()  # type: ignore[no-untyped-call]
            elif key in self._backgrounds:
                canvas.restore_region(self._backgrounds[key])  # type: ignore[no-untyped-call]
            else:
                self._draw_background(canvas, key, layer)
            in_layer = {id(artist) for artist in layer}
            for artist in self._dynamic:
                if id(artist) not in in_layer:
                    self.figure.draw_artist(artist)
        return _png(np.asarray(canvas.buffer_rgba()))  # type: ignore[no-untyped-call]

    def _draw_background(self, canvas: FigureCanvasAgg, key: Hashable, layer: list[Artist]) -> None:
        """Draw and keep the background for ``key``: everything but the dynamic artists, then ``layer``."""
        if not layer:
            canvas.draw()  # type: ignore[no-untyped-call]  # everything except the dynamic artists
        else:  # the layer's artists are dynamic (animated): left out of the still parts
            if STILL not in self._backgrounds:
                canvas.draw()  # type: ignore[no-untyped-call]
                self._backgrounds[STILL] = canvas.copy_from_bbox(self.figure.bbox)  # type: ignore[no-untyped-call]
            else:
                canvas.restore_region(self._backgrounds[STILL])  # type: ignore[no-untyped-call]
            for artist in layer:
                self.figure.draw_artist(artist)
        kept = [k for k in self._backgrounds if k != STILL]
        for oldest in kept[: max(len(kept) - self._kept_layers + 1, 0)]:
            del self._backgrounds[oldest]
        self._backgrounds[key] = canvas.copy_from_bbox(self.figure.bbox)  # type: ignore[no-untyped-call]

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={control.value!r}" for name, control in self.controls.items())
        return f"{type(self).__name__}({values})"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle: dict[str, Any] = self.ui._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = repr(self)  # what viewers without a widget manager show
        bundle["text/html"] = STATIC_NOTE.format(name=html.escape(repr(self)))  # ... or, if they render HTML, this
        return bundle
