"""Time one update of every control of every lesson widget: set its value -> new picture (PNG) ready.

    python benchmarks/widgets.py [--updates 20]

The seven widgets of lessons 05, 06, 09 and 10 (`lessons_lib.widgets`) share one interface, so one loop
covers every control of each: a fresh widget per control, then ``--updates`` changes of that
control's value, cycling through its options (a slider: its range; a checkbox: on and off; a number
box: a few values; the box of token ids: reversed, then as they were; TextExplorer's text box: its
words rotated by one more each time, so every change is a text the model has not read yet). Each change runs the
widget's callback: new ``.data`` from plain functions, the picture drawn with Matplotlib's Agg
backend at twice the displayed pixel density, the PNG encoded and handed to the
``ipywidgets.Image``. Target: a median of at most 50 ms per change.

A widget keeps its recent pictures and shows one again without drawing when a control returns to an
earlier state (`widgets.base.PICTURE_CACHE_SIZE`); this benchmark empties that store before every change,
so each change is timed drawing its picture.
HeadExplorer and InductionExplorer keep the part of their picture that does not change (axes, the
sequence's token labels) per sequence; the first visit of a sequence draws it all and is timed
separately, for information. TextExplorer keeps its forward pass and that background per text, so
its layer and head changes redraw only the map; every change of its text is timed as a new text.
Timings depend on the machine and on its load, which is printed alongside.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
import matplotlib

matplotlib.use("Agg")

from lessons_lib.induction import load_induction_model
from lessons_lib.inspect_heads import load_toy_heads
from lessons_lib.shakespeare import load_model
from lessons_lib.widgets.base import LessonWidget
from lessons_lib.widgets.cache_widgets import HeadSharing, KVCacheCalculator
from lessons_lib.widgets.head_widgets import HeadExplorer, HeadReslicer, SplitExplorer
from lessons_lib.widgets.induction_widgets import InductionExplorer
from lessons_lib.widgets.shakespeare_widgets import TextExplorer

TARGET_MS = 50.0


def values_to_cycle(control: Any) -> list[Any]:
    """Distinct values for ``control``, starting with the next one after its current value."""
    if isinstance(control, widgets.Checkbox):
        return [not control.value, control.value]
    if isinstance(control, widgets.Textarea):  # a text: its words rotated by 1, 2, ... (each one new)
        words = control.value.split()
        return [" ".join(words[k:] + words[:k]) for k in range(1, len(words))] + [control.value]
    if isinstance(control, widgets.Text):  # token ids: reversed, then as they were
        return [" ".join(reversed(control.value.split())), control.value]
    if isinstance(control, widgets.IntSlider):
        values = list(range(control.min, control.max + 1))
    elif hasattr(control, "options"):
        values = [option[1] if isinstance(option, tuple) else option for option in control.options]
    else:  # a number box: double, quadruple, back
        return [min(2 * control.value, control.max), min(4 * control.value, control.max), control.value]
    start = values.index(control.value) + 1
    return values[start:] + values[:start]


def time_changes(widget: LessonWidget, name: str, count: int) -> list[float]:
    """Milliseconds for each of ``count`` changes of ``widget.controls[name].value``."""
    control = widget.controls[name]
    times = []
    for value in itertools.islice(itertools.cycle(values_to_cycle(control)), count):
        widget._pictures.clear()  # time a real drawing, not a picture the widget kept from a moment ago
        start = time.perf_counter()
        control.value = value
        times.append(1000 * (time.perf_counter() - start))
    return times


def makers() -> dict[str, Callable[[], LessonWidget]]:
    model = load_toy_heads()
    induction_model = load_induction_model()
    shakespeare_model = load_model()
    return {
        "HeadExplorer": lambda: HeadExplorer(model),
        "HeadReslicer": lambda: HeadReslicer(model),
        "SplitExplorer": SplitExplorer,
        "KVCacheCalculator": KVCacheCalculator,
        "HeadSharing": HeadSharing,
        "InductionExplorer": lambda: InductionExplorer(induction_model, layer=1, head=2),
        "TextExplorer": lambda: TextExplorer(shakespeare_model),
    }


def first_visit_times(make: Callable[[], LessonWidget], count: int) -> list[float]:
    """A fresh explorer per change, so the new sequence draws its labelled background from scratch."""
    return [time_changes(make(), "sequence", 1)[0] for _ in range(count)]


def report(label: str, times: list[float], note: str) -> None:
    median = statistics.median(times)
    print(f"{label:48s} median {median:6.1f} ms  (min {min(times):5.1f}, max {max(times):6.1f})  {note}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=20, help="changes per control (default 20)")
    args = parser.parse_args(argv)
    print(f"load average (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; target <= {TARGET_MS:.0f} ms")
    missed = 0
    for widget_name, make in makers().items():
        for name in make().controls:
            times = time_changes(make(), name, args.updates)
            verdict = "PASS" if statistics.median(times) <= TARGET_MS else "MISS"
            missed += verdict == "MISS"
            report(f"{widget_name} .controls[{name!r}]", times, verdict)
    for widget_name in ("HeadExplorer", "InductionExplorer"):
        cold = first_visit_times(makers()[widget_name], min(args.updates, 8))
        report(f"{widget_name} 'sequence', first visit", cold, "(information: once per sequence)")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
