"""Import hygiene: NumPy-only lessons never pay for importing torch, and the package is typed.

Imports run in a fresh interpreter (``sys.executable``) because this test process has torch loaded.
"""

from __future__ import annotations

import ast
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


def all_modules() -> list[str]:
    """Every module of the package, by dotted name, in a stable order."""
    names = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def numpy_only_modules() -> list[str]:
    """The modules that must not import torch: all but the ``*_torch`` twins."""
    return [name for name in all_modules() if not name.endswith("_torch")]


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


def test_numpy_only_list_covers_the_lesson_checkers() -> None:
    """Control: the list above is built from the files, so a new checker is watched automatically."""
    modules = numpy_only_modules()
    assert "lessons_lib.checks.one_head" in modules
    assert "lessons_lib.widgets.head_widgets" in modules
    assert "lessons_lib.mha_torch" not in modules


def imported_package_modules(path: Path, inside_functions: bool = False) -> set[str]:
    """The ``lessons_lib`` modules one file imports at module level (``import`` and ``from`` forms), and
    with ``inside_functions`` those its functions import when they run too."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    known = set(all_modules())
    for node in ast.walk(tree) if inside_functions else tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lessons_lib"):
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in known else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("lessons_lib"))
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle in ``graph`` (module -> modules it imports), or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for child in sorted(graph.get(node, ())):
            if state.get(child) == "open":
                return [*stack[stack.index(child) :], child]
            if child not in state:
                cycle = visit(child)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def test_find_cycle_sees_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_between_library_modules() -> None:
    graph = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        # A package's own __init__ is imported before its children; an edge to it is not a cycle.
        graph[name] = {m for m in imported_package_modules(path) if not name.startswith(m + ".")}
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph) or [])}"


def test_no_import_cycle_even_through_imports_inside_functions() -> None:
    """A module that imports another inside a function still depends on it: two modules that need each
    other that way are one module in two files (issue 31: cli and classroom were)."""
    graph = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found = imported_package_modules(path, inside_functions=True)
        graph[name] = {m for m in found if not name.startswith(m + ".") and m != name}
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph) or [])}"


def test_no_lazy_module_getattr_and_unique_file_names() -> None:
    stems = [path.stem for path in PACKAGE_DIR.rglob("*.py") if path.stem != "__init__"]
    assert len(stems) == len(set(stems)), f"two modules share a file name: {sorted(stems)}"
    for path in PACKAGE_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert "__getattr__" not in names, f"{path.name} defines a module-level __getattr__"
