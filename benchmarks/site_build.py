"""How long the website takes to build, against its target.

    python benchmarks/site_build.py              # median of 3 builds
    python benchmarks/site_build.py --repeats 5

Each run is the maintainers' command, `bash scripts/build_site.sh OUT_DIR`, into a fresh temporary
folder: Sphinx with myst-nb and the book theme, all nine lessons from their stored outputs, warnings
as errors. The wall time of the whole command is measured (interpreter start-up and imports
included, as a maintainer or the browser test pays them). Target: a median of at most 15 s.
Needs the site tools (`pip install -r requirements-site.txt`). Timings depend on the machine and
on what else runs on it, so the 1-minute load average is printed next to them; the exit code is 1
when a build fails or, with --fail-on-miss, when the target is missed.
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

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 15.0


def load_average() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:  # not available on every platform
        return "n/a"


def timed_build() -> float:
    """Seconds one build takes; exits with the build's messages when it fails."""
    with tempfile.TemporaryDirectory() as folder:
        command = ["bash", str(ROOT / "scripts" / "build_site.sh"), str(Path(folder) / "site")]
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"the site build failed (exit {result.returncode}):\n{result.stderr}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="builds to time (default 3)")
    parser.add_argument("--fail-on-miss", action="store_true", help="exit 1 when the median misses the target")
    args = parser.parse_args()

    print(f"load average (1 min): {load_average()} on {os.cpu_count()} cores; target <= {TARGET_S:.0f} s")
    runs = [timed_build() for _ in range(args.repeats)]
    median = statistics.median(runs)
    mark = "PASS" if median <= TARGET_S else "MISS"
    spread = ", ".join(f"{seconds:.2f}" for seconds in runs)
    print(f"site build `bash scripts/build_site.sh`: median {median:.2f} s (runs: {spread})  {mark}")
    print(f"load average (1 min) after: {load_average()}")
    return 1 if args.fail_on_miss and mark == "MISS" else 0


if __name__ == "__main__":
    sys.exit(main())
