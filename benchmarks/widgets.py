"""Time one update of each lesson 04 widget: set a control's value -> new picture rendered (PNG).

    python benchmarks/widgets.py [--updates 20]

Each update runs the widget's callback: new data from `lessons_lib.inspect_heads`, the changed artists
drawn with Matplotlib's Agg backend, the PNG encoded and handed to the ``ipywidgets.Image``. The
target is a median of at most 50 ms per update at lesson sizes. Timings depend on the machine and
on its load, which is printed alongside.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import matplotlib

matplotlib.use("Agg")

from lessons_lib.inspect_heads import load_toy_heads  # noqa: E402
from lessons_lib.widgets.head_widgets import HeadExplorer, HeadReslicer, SplitExplorer  # noqa: E402

TARGET_MS = 50.0


def time_updates(updates: Iterator[Callable[[], Any]], count: int) -> list[float]:
    """Milliseconds for each of ``count`` updates (each a call that sets one control's value)."""
    times = []
    for update in itertools.islice(updates, count):
        start = time.perf_counter()
        update()
        times.append(1000 * (time.perf_counter() - start))
    return times


def setter(control: Any, value: Any) -> Callable[[], None]:
    def update() -> None:
        control.value = value

    return update


def first_visit_times(count: int) -> list[float]:
    """A fresh explorer per update, so each new sequence draws its labelled background from scratch."""
    model = load_toy_heads()
    times = []
    for _ in range(count):
        explorer = HeadExplorer(model)
        times += time_updates(iter([setter(explorer.batch, 1)]), 1)
    return times


def scenarios() -> dict[str, tuple[Any, list[Callable[[], None]]]]:
    model = load_toy_heads()
    explorer = HeadExplorer(model)
    reslicer = HeadReslicer(model)
    split = SplitExplorer()
    return {
        "HeadExplorer .head": (explorer, [setter(explorer.head, v) for v in (1, 2, 3, 0)]),
        "HeadExplorer .average": (explorer, [setter(explorer.average, v) for v in (True, False)]),
        "HeadExplorer .batch (sequences seen before)": (explorer, [setter(explorer.batch, v) for v in (1, 2, 3, 0)]),
        "HeadReslicer .heads": (reslicer, [setter(reslicer.heads, v) for v in (1, 2, 8, 16, 4)]),
        "HeadReslicer .batch": (reslicer, [setter(reslicer.batch, v) for v in (1, 2, 3, 0)]),
        "SplitExplorer .split_mode": (split, [setter(split.split_mode, v) for v in ("wrong", "correct")]),
        "SplitExplorer .heads": (split, [setter(split.heads, v) for v in (4, 8, 2)]),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=20)
    args = parser.parse_args(argv)
    print(f"load average (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; target <= {TARGET_MS:.0f} ms")
    missed = 0
    for name, (_, updates) in scenarios().items():
        times = time_updates(itertools.cycle(updates), args.updates)
        median = statistics.median(times)
        verdict = "PASS" if median <= TARGET_MS else "MISS"
        missed += verdict == "MISS"
        print(f"{name:50s} median {median:6.1f} ms  (min {min(times):5.1f}, max {max(times):6.1f})  {verdict}")
    cold = first_visit_times(min(args.updates, 8))
    print(f"{'HeadExplorer .batch, first visit (full redraw)':50s} median {statistics.median(cold):6.1f} ms  "
          f"(min {min(cold):5.1f}, max {max(cold):6.1f})  (information: once per sequence)")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
