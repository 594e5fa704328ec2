"""Foundation benchmark: how long the instructor's checks take, against the project's targets.

    python benchmarks/foundation.py                 # all three measurements
    python benchmarks/foundation.py --skip-suite    # skip (a), the slowest one

Measures, each in a fresh subprocess started from the repository root:

(a) the wall time of the README test command ``python -m pytest -q`` (run once; no target);
(b) the strict-nbval wall time of every ``notebooks/*.ipynb`` (``python -m pytest notebooks/X.ipynb -q``),
    median of ``--repeats`` runs, target <= 2.5 s per notebook;
(b2) the same notebooks timed inside one pytest run (kernel start + cells, without pytest's own
    start-up, which (b) pays once per notebook);
(c) the time of ``import lessons_lib`` in a fresh interpreter, timed with ``time.perf_counter``
    around the import inside the subprocess, median of ``--import-repeats`` runs, target <= 0.15 s.
    ``import lessons_lib.mha_numpy`` (which loads NumPy) is reported alongside for information.

Timings depend on the machine and on what else runs on it, so the 1-minute load average is printed too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_TARGET_S = 2.5
IMPORT_TARGET_S = 0.15

IMPORT_PROBE = "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"


def run_timed(command: list[str]) -> tuple[float, int]:
    """Run ``command`` from the repository root; return ``(wall seconds, exit code)``."""
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, result.returncode


def import_seconds(module: str) -> float:
    """Seconds ``import module`` takes in a fresh interpreter, measured inside that interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE.format(module=module)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    return float(result.stdout.strip().splitlines()[-1])


def verdict(seconds: float, target: float) -> str:
    return "PASS" if seconds <= target else "MISS"


def load_average() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:  # not available on every platform
        return "n/a"


def bench_suite() -> None:
    seconds, code = run_timed([sys.executable, "-m", "pytest", "-q"])
    status = "tests passed" if code == 0 else f"tests FAILED (exit {code})"
    print(f"(a) test suite `python -m pytest -q`: {seconds:.1f} s, {status} (no target)")


def bench_notebooks(paths: list[Path], repeats: int) -> bool:
    """Print one line per notebook; return True if every notebook passed and met the target."""
    print(f"(b) strict nbval per notebook, median of {repeats} (target <= {NOTEBOOK_TARGET_S} s):")
    if not paths:
        print("    no notebooks found in notebooks/; nothing to measure")
        return True
    all_ok = True
    for path in paths:
        command = [sys.executable, "-m", "pytest", str(path.relative_to(ROOT)), "-q", "-n", "0"]  # one process
        runs = [run_timed(command) for _ in range(repeats)]
        median = statistics.median(seconds for seconds, _ in runs)
        failed = [code for _, code in runs if code != 0]
        mark = f"MISS (nbval failed, exit {failed[0]})" if failed else verdict(median, NOTEBOOK_TARGET_S)
        all_ok &= mark == "PASS"
        spread = ", ".join(f"{seconds:.2f}" for seconds, _ in runs)
        print(f"    {path.name:<40} {median:5.2f} s  (runs: {spread})  {mark}")
    return all_ok


def in_suite_seconds(paths: list[Path]) -> dict[str, float]:
    """Per-notebook seconds inside ONE pytest run over all ``paths`` (from its JUnit report).

    Each notebook's time is the sum over its cells of setup + call + teardown, which includes
    starting its kernel but not pytest's own start-up (about 2 s of imports, paid once per run).
    """
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-n", "0", f"--junitxml={report}"]  # one process
        subprocess.run(command + [str(p) for p in paths], cwd=ROOT, capture_output=True, check=False)
        cases = list(ElementTree.parse(report).iter("testcase"))
    # A notebook's cells are reported with classname "notebooks.<file name>".
    return {
        path.name: sum(float(c.get("time", 0)) for c in cases if c.get("classname", "").endswith(path.name))
        for path in paths
    }


def bench_notebooks_in_suite(paths: list[Path], repeats: int) -> None:
    print(f"(b2) the same notebooks inside one pytest run, median of {repeats} (kernel start + cells):")
    if not paths:
        return
    runs = [in_suite_seconds(paths) for _ in range(repeats)]
    for path in paths:
        median = statistics.median(run[path.name] for run in runs)
        print(f"    {path.name:<40} {median:5.2f} s  {verdict(median, NOTEBOOK_TARGET_S)}")


def bench_import(repeats: int) -> bool:
    """Print the import times; return True if ``import lessons_lib`` met the target."""
    print(f"(c) import time in a fresh interpreter, median of {repeats} (target <= {IMPORT_TARGET_S} s):")
    package = statistics.median(import_seconds("lessons_lib") for _ in range(repeats))
    print(f"    import lessons_lib                       {package:.4f} s  {verdict(package, IMPORT_TARGET_S)}")
    core = statistics.median(import_seconds("lessons_lib.mha_numpy") for _ in range(repeats))
    print(f"    import lessons_lib.mha_numpy (+ NumPy)  {core:.4f} s  (information)")
    return package <= IMPORT_TARGET_S


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to time (default: notebooks/*.ipynb)")
    parser.add_argument("--skip-suite", action="store_true", help="do not time the whole test command")
    parser.add_argument("--repeats", type=int, default=3, help="runs per notebook (default 3)")
    parser.add_argument("--import-repeats", type=int, default=5, help="fresh interpreters for (c) (default 5)")
    parser.add_argument("--fail-on-miss", action="store_true", help="exit 1 if any target is missed")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or sorted((ROOT / "notebooks").glob("*.ipynb"))

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load_average()}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    if args.skip_suite:
        print("(a) test suite: skipped (--skip-suite)")
    else:
        bench_suite()
    notebooks_ok = bench_notebooks(paths, args.repeats)
    bench_notebooks_in_suite(paths, args.repeats)
    import_ok = bench_import(args.import_repeats)
    print(f"load average at the end {load_average()}")
    return 1 if args.fail_on_miss and not (notebooks_ok and import_ok) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
