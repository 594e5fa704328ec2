"""How long the instructor's check takes, against the floor that starting the notebooks' kernels sets.

    python benchmarks/instructor_check.py                 # floor, instructor check (3 runs), whole suite
    python benchmarks/instructor_check.py --skip-suite    # without the whole test command

Measured in one run, each from the repository root, side by side:

(a) the **sequential import floor**: for every ``notebooks/*.ipynb``, a fresh ``python3`` kernel is
    started (nbclient, as nbval does) and runs only what every lesson must import before its first
    line of teaching: NumPy, Matplotlib's pyplot and ``lessons_lib``, plus ``torch`` when the
    notebook imports it. The sum over notebooks is what one notebook after another cannot avoid;
    the lessons' own cells come on top;
(b) the **instructor check**, the README command ``python -m pytest notebooks -q`` (strict nbval,
    spread over the cores by pytest-xdist), median of ``--repeats`` runs; target <= 1.2 x (a);
(c) the **whole test command** ``python -m pytest -q`` (unit tests, nbval, browser tests), run
    once; target <= 90 s.

Timings depend on the machine and on what else runs on it: the load average and core count are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
FLOOR_RATIO_TARGET = 1.2
SUITE_TARGET_S = 90.0
BASE_IMPORTS = "import numpy\nimport matplotlib.pyplot\nimport lessons_lib"


def uses_torch(path: Path) -> bool:
    notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    return any(cell.cell_type == "code" and "import torch" in cell.source for cell in notebook.cells)


def import_floor(path: Path) -> float:
    """Seconds to start a kernel for ``path`` and run the imports its lesson cannot do without."""
    source = BASE_IMPORTS + ("\nimport torch" if uses_torch(path) else "")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])  # type: ignore[no-untyped-call]
    start = time.perf_counter()
    NotebookClient(notebook, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    return time.perf_counter() - start


def wall(command: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, result.returncode


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of the instructor check (median)")
    parser.add_argument("--skip-suite", action="store_true", help="do not time the whole test command")
    args = parser.parse_args(argv)
    print(f"load average (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")

    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    floors = {path.name: import_floor(path) for path in notebooks}
    floor = sum(floors.values())
    for name, seconds in floors.items():
        print(f"  floor {name:40s} {seconds:5.2f} s{'  (with torch)' if uses_torch(ROOT / 'notebooks' / name) else ''}")
    print(f"(a) sequential import floor, {len(notebooks)} notebooks: {floor:.1f} s")

    runs = [wall([sys.executable, "-m", "pytest", "notebooks", "-q"]) for _ in range(args.repeats)]
    check = statistics.median(seconds for seconds, _ in runs)
    failed = any(code != 0 for _, code in runs)
    ratio = check / floor
    verdict = "PASS" if ratio <= FLOOR_RATIO_TARGET and not failed else "MISS"
    print(
        f"(b) instructor check `python -m pytest notebooks -q`: median {check:.1f} s of "
        f"{[round(s, 1) for s, _ in runs]}; {ratio:.2f} x the floor (target <= {FLOOR_RATIO_TARGET}) {verdict}"
        + ("  (a run failed)" if failed else "")
    )
    missed = verdict == "MISS"
    if not args.skip_suite:
        seconds, code = wall([sys.executable, "-m", "pytest", "-q"])
        suite = "PASS" if seconds <= SUITE_TARGET_S and code == 0 else "MISS"
        print(f"(c) whole test command `python -m pytest -q`: {seconds:.1f} s (target <= {SUITE_TARGET_S:.0f} s) "
              f"{suite}" + ("" if code == 0 else f"  (exit code {code})"))
        missed = missed or suite == "MISS"
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
