"""Import hygiene: NumPy-only lessons never pay for importing torch, and the package is typed.

Imports run in a fresh interpreter (``sys.executable``) because this test process has torch loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import lessons_lib

PACKAGE_DIR = Path(lessons_lib.__file__).resolve().parent

# Imports the modules named after the watched one, one by one, and reports the first after which
# the watched module (argv[1]) is in sys.modules.
PROBE = """
import importlib, json, sys
watched, culprit = sys.argv[1], None
for name in sys.argv[2:]:
    importlib.import_module(name)
    if culprit is None and watched in sys.modules:
        culprit = name
print(json.dumps({"culprit": culprit}))
"""


def numpy_only_modules() -> list[str]:
    """The modules that must not import torch: the package, its NumPy core and every lesson checker."""
    checkers = sorted(
        f"lessons_lib.checks.{path.stem}" for path in (PACKAGE_DIR / "checks").glob("lesson[0-9]*.py")
    )
    return [
        "lessons_lib",
        "lessons_lib.validation",
        "lessons_lib.mha_numpy",
        "lessons_lib.checks",
        "lessons_lib.kv_cache",
        "lessons_lib.plotting",
        "lessons_lib.widgets",
        *checkers,
    ]


def first_module_loading(watched: str, modules: list[str]) -> str | None:
    """In a fresh interpreter, the first of ``modules`` whose import brings in ``watched``."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, watched, *modules], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    culprit: str | None = json.loads(result.stdout.strip().splitlines()[-1])["culprit"]
    return culprit


def test_numpy_only_modules_do_not_import_torch() -> None:
    modules = numpy_only_modules()
    culprit = first_module_loading("torch", modules)
    assert culprit is None, (
        f"importing {culprit} put torch in sys.modules; NumPy-only lessons must not pay for torch. "
        f"Import torch only inside lessons_lib.mha_torch (or a module that truly needs it)."
    )


def test_the_probe_notices_a_heavy_import() -> None:
    """Control: the probe does name the module that brings in a library (NumPy here; torch is slow
    to import), so a clean result above means something."""
    modules = ["lessons_lib", "lessons_lib.validation", "lessons_lib.mha_numpy", "lessons_lib.kv_cache"]
    assert first_module_loading("numpy", modules) == "lessons_lib.mha_numpy"


def test_package_ships_py_typed() -> None:
    marker = PACKAGE_DIR / "py.typed"
    assert marker.is_file(), f"{marker} is missing; type checkers would ignore lessons_lib's hints"
