"""Root pytest configuration, loaded whichever folder pytest is started from.

- Building Matplotlib's font cache prints a notice on stderr the first time Matplotlib is imported
  on a machine. Under strict nbval that notice would land in a notebook's output and fail the
  comparison, so we build the cache here, in the pytest process, before any notebook kernel starts.
- nbval's sanitize file is given by absolute path, so ``cd notebooks && python -m pytest .`` finds it.
- With pytest-xdist (``-n auto`` in pyproject.toml) tests spread over the cores; the scheduler
  below keeps every cell of one notebook together, so a notebook runs top to bottom in one kernel
  on one worker, while other notebooks and tests run beside it.
- Every process of the test command uses one BLAS/OpenMP thread (see below), notebook kernels included.
- Property tests (Hypothesis) are reproducible: the profile "repeatable" (loaded here, before any
  test module builds its ``@settings``) derives every example from the test itself, keeps no
  example database and has no deadline, so the same code gives the same examples on every run and
  every machine, CI's included, and a test never fails by chance. ``HYPOTHESIS_PROFILE=explore``
  draws fresh random examples instead, to hunt for new failures by hand.
"""

from __future__ import annotations

import os

# One BLAS/OpenMP thread per process (set before NumPy or torch is loaded here, and inherited by every
# notebook kernel the tests start): the test command runs one worker more than there are cores, and a
# multi-threaded BLAS on a busy core spins instead of working (lesson 10's forward pass took 300-800 ms
# instead of 8 ms so). Set any of them in the environment to override.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import matplotlib  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

matplotlib.use("Agg")
import matplotlib.font_manager  # noqa: E402  (builds the font cache now, see above)

settings.register_profile("repeatable", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

SHARED_BUILD = "tests/browser/test_site.py"
SANITIZE = Path(__file__).resolve().parent / "tests" / "nbval_sanitize.cfg"


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "nbval_sanitize_with", "absent") is None:
        config.option.nbval_sanitize_with = str(SANITIZE)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: ignored where xdist is not installed
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the cores this process may use. Much of the browser tests'
    time is spent waiting for Chromium, JupyterLab and kernels, which run in processes of their own;
    an extra worker keeps the cores busy meanwhile (on 2 cores: 170 s instead of 237 s, measured the
    same hour). ``PYTEST_XDIST_AUTO_NUM_WORKERS=N`` still chooses N."""
    chosen = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "")
    if chosen.isdigit():
        return int(chosen)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores + 1


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: ignored where xdist is not installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """One notebook = one unit of work (its cells run in order, in one kernel, on one worker); so is
    the site's browser test file (its tests share one build of the site, made once per worker); every
    other test is a unit of its own, so the browser tests of different notebooks run side by side."""
    from xdist.scheduler import LoadScopeScheduling

    class NotebookScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path.endswith((".ipynb", SHARED_BUILD)) else nodeid

    return NotebookScheduling(config, log)
