"""Peak memory of each lesson's kernel, against the 1 GiB that mybinder.org guarantees a session.

    python benchmarks/notebook_memory.py                       # every notebook in notebooks/
    python benchmarks/notebook_memory.py notebooks/06_grouped_query_attention.ipynb
    python benchmarks/notebook_memory.py --budget-mib 2048     # another host's limit

Each notebook runs top to bottom in a fresh ``python3`` kernel (nbclient, as the regenerate script
does); nothing is written back. When the last cell has finished we read the kernel process's
``VmHWM`` (the high-water mark of its resident memory, kept by Linux) from /proc/<pid>/status.
``VmRSS`` read right after the kernel started shows what the bare kernel costs before any lesson code.

Only the kernel is measured. On Binder the same 1 GiB also holds the Jupyter server (its peak
resident memory was about 110 MiB here, with JupyterLab 4.6.6 running lessons 05 and 06), so a
notebook should leave that much headroom. Linux only (/proc). The exit code is 1
when any notebook misses the budget, so the script can gate a CI job.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
BINDER_GUARANTEE_MIB = 1024.0  # mybinder.org: at least 1 GB of memory per session, at most 2 GB
KIB_PER_MIB = 1024.0


@dataclass(frozen=True)
class Measurement:
    """One notebook's kernel memory, in MiB, and how long it ran."""

    notebook: str
    start_mib: float
    peak_mib: float
    seconds: float


def status_field_mib(pid: int, field: str) -> float:
    """Read ``field`` (e.g. "VmHWM", "VmRSS"; given in kB) from /proc/<pid>/status, in MiB."""
    status = Path(f"/proc/{pid}/status")
    if not status.exists():
        raise RuntimeError(f"{status} does not exist: this benchmark needs Linux and a live kernel process")
    for line in status.read_text(encoding="ascii").splitlines():
        name, _, value = line.partition(":")
        if name == field:
            kib = float(value.split()[0])  # "  123456 kB"
            return kib / KIB_PER_MIB
    raise RuntimeError(f"{status} has no {field} line")


def kernel_pid(client: NotebookClient) -> int:
    """Process id of the kernel that ``client`` started (jupyter_client's local provisioner)."""
    provisioner = getattr(client.km, "provisioner", None)
    process = getattr(provisioner, "process", None)
    if process is None or process.pid is None:
        raise RuntimeError("the kernel manager exposes no local kernel process; run this with a local python3 kernel")
    return int(process.pid)


def measure(path: Path) -> Measurement:
    """Execute ``path`` in a fresh kernel and read the kernel's memory at start and at its peak."""
    notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    client = NotebookClient(
        notebook, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(path.parent)}}
    )
    start = time.perf_counter()
    with client.setup_kernel():
        pid = kernel_pid(client)
        start_mib = status_field_mib(pid, "VmRSS")
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        peak_mib = status_field_mib(pid, "VmHWM")  # read while the kernel still runs
    return Measurement(path.name, start_mib, peak_mib, time.perf_counter() - start)


def report(measurements: list[Measurement], budget_mib: float) -> str:
    """A fixed-width table: one line per notebook with PASS (peak <= budget) or MISS."""
    lines = [
        f"{'notebook':<38} {'kernel at start':>16} {'kernel peak':>12} {'budget':>8} {'run':>7}  verdict",
    ]
    for m in measurements:
        verdict = "PASS" if m.peak_mib <= budget_mib else "MISS"
        lines.append(
            f"{m.notebook:<38} {m.start_mib:>12.0f} MiB {m.peak_mib:>8.0f} MiB {budget_mib:>4.0f} MiB "
            f"{m.seconds:>5.1f} s  {verdict}"
        )
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command line: optional notebook paths and the memory budget in MiB."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to measure (default: notebooks/*.ipynb)")
    parser.add_argument(
        "--budget-mib", type=float, default=BINDER_GUARANTEE_MIB,
        help=f"memory budget per kernel in MiB (default {BINDER_GUARANTEE_MIB:.0f}, Binder's guarantee)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.budget_mib <= 0:
        parser.error(f"--budget-mib must be positive, got {args.budget_mib}")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    if not paths:
        print("no notebooks found in notebooks/", file=sys.stderr)
        return 2
    measurements = []
    for path in paths:
        measurements.append(measure(path))
        print(f"measured {path.name}", file=sys.stderr, flush=True)
    print(report(measurements, args.budget_mib))
    return 0 if all(m.peak_mib <= args.budget_mib for m in measurements) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
