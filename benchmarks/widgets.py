"""Time one update of every control of every lesson widget: set its value -> new picture (PNG) ready.

    python benchmarks/widgets.py [--updates 20] [--first 8]

The seven widgets of lessons 05, 06, 09 and 10 (`lessons_lib.widgets`) share one interface, so one loop
covers every control of each. Each change runs the widget's callback: new ``.data`` from plain
functions, the picture drawn with Matplotlib's Agg backend at twice the displayed pixel density, the
PNG encoded and handed to the ``ipywidgets.Image``. Two timings per control, each against a target
median of 50 ms per change:

* all changes: a fresh widget, then ``--updates`` changes of the control's value, cycling through its
  options (a slider: its range; a checkbox: on and off; a number box: a few values; the box of token
  ids: reversed, then as they were; TextExplorer's text box: its words rotated by one more each time,
  so every change is a text the model has not read yet). A widget keeps its recent pictures and shows
  one again without drawing when a control returns to an earlier state
  (`widgets.base.PICTURE_CACHE_SIZE`); this loop empties that store before every change, so each
  change draws its picture; what a widget keeps besides (the parts of a picture that do not change,
  per background) it keeps, as a learner's widget does.
* first visits: each change reaches a state the widget has never shown, so neither its kept pictures
  nor its kept backgrounds help: a fresh widget per change, its control set to one of the values
  above (``--first`` changes, cycling through them; the control's starting value is left out).

A control with a single option (HeadReslicer's "heads shown" while every head fits) has nothing to
time and is skipped. Timings depend on the machine and on its load, which is printed alongside.
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
    """Distinct values for ``control``, starting with the next one after its current value (which comes last)."""
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
        return [2 * control.value, 4 * control.value, control.value]
    start = values.index(control.value) + 1
    return values[start:] + values[:start]


def time_changes(widget: LessonWidget, name: str, count: int) -> list[float]:
    """Milliseconds for each of ``count`` changes of ``widget.controls[name].value``, each drawing its picture."""
    control = widget.controls[name]
    times = []
    for value in itertools.islice(itertools.cycle(values_to_cycle(control)), count):
        widget._pictures.clear()  # time a real drawing, not a picture the widget kept from a moment ago
        start = time.perf_counter()
        control.value = value
        times.append(1000 * (time.perf_counter() - start))
    return times


def first_visit_times(make: Callable[[], LessonWidget], name: str, count: int) -> list[float]:
    """Milliseconds for ``count`` changes of control ``name``, each on a fresh widget to a value it has not shown."""
    others = values_to_cycle(make().controls[name])[:-1]  # every value but the starting one
    times = []
    for value in itertools.islice(itertools.cycle(others), count):
        widget = make()
        start = time.perf_counter()
        widget.controls[name].value = value
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


def summary(times: list[float]) -> str:
    median = statistics.median(times)
    verdict = "PASS" if median <= TARGET_MS else "MISS"
    return f"median {median:6.1f} (min {min(times):5.1f}, max {max(times):6.1f}) {verdict}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=20, help="changes per control, all changes (default 20)")
    parser.add_argument("--first", type=int, default=8, help="first visits per control (default 8)")
    args = parser.parse_args(argv)
    print(f"load average (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; target: median <= "
          f"{TARGET_MS:.0f} ms per control, over all changes and over first visits; times in ms")
    print(f"{'':48s} {'all changes':39s}   first visits")
    missed = 0
    for widget_name, make in makers().items():
        for name, control in make().controls.items():
            if len(values_to_cycle(control)) < 2:
                print(f"{widget_name} .controls[{name!r}]: one option, nothing to change")
                continue
            every = time_changes(make(), name, args.updates)
            first = first_visit_times(make, name, args.first)
            line = f"{summary(every)}   {summary(first)}"
            missed += line.count("MISS")
            print(f"{widget_name + ' .controls[' + repr(name) + ']':48s} {line}")
    print("all PASS" if not missed else f"{missed} MISS")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
