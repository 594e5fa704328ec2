"""The Colab setup cell (scripts/add_colab_cell.py), tested offline.

* The script puts one identical cell right after each lesson's title, and running it again changes
  nothing; a lesson that already has the cell has the current one.
* Outside Colab the cell does nothing and prints nothing.
* On a fake Colab (its environment variable set, in a fresh virtual environment that sees this
  environment's numpy and torch the way Colab's runtime has its own), the cell installs lessons_lib
  from a wheel built here, without touching numpy or torch, and the lessons' imports then work.
  pip runs with ``--no-index``: nothing comes from the network. This part needs ``build``
  (``requirements-classroom.txt``).
"""

from __future__ import annotations

import importlib.util
import json
import re
import runpy
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Any

from classroom_support import REPO, require

SCRIPT = REPO / "scripts" / "add_colab_cell.py"
LESSONS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("add_colab_cell", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cells(path: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return cells


def _uncounted(cell: dict[str, Any]) -> dict[str, Any]:
    """A cell without its execution counts (the script renumbers them)."""
    copy: dict[str, Any] = json.loads(json.dumps(cell))
    copy.pop("execution_count", None)
    for output in copy.get("outputs", []):
        output.pop("execution_count", None)
    return copy


def test_the_cell_installs_from_the_repository_the_badges_open() -> None:
    script = _script()
    repository = runpy.run_path(str(REPO / "site" / "conf.py"))["REPOSITORY"]
    assert script.package_source() == f"git+https://github.com/{repository}"
    assert f'"git+https://github.com/{repository}"' in script.cell_source()
    assert "==" not in script.cell_source(), "the cell must not pin anything (Colab's numpy and torch stay)"


def test_the_script_inserts_one_cell_after_the_title_and_is_idempotent(tmp_path: Path) -> None:
    script = _script()
    for lesson in LESSONS:
        shutil.copy(lesson, tmp_path / lesson.name)
    copies = sorted(tmp_path.glob("*.ipynb"))
    before = {path.name: _cells(path) for path in copies}
    assert script.main([str(path) for path in copies]) == 0
    first = {path.name: path.read_bytes() for path in copies}
    for path in copies:
        cells = _cells(path)
        tagged = [i for i, cell in enumerate(cells) if script.TAG in cell["metadata"].get("tags", [])]
        assert tagged == [1], f"{path.name}: the Colab cell belongs right after the title"
        assert "".join(cells[1]["source"]) == script.cell_source() and cells[1]["outputs"] == []
        others = [_uncounted(cell) for i, cell in enumerate(cells) if i != 1]
        assert others == [_uncounted(c) for c in before[path.name] if script.TAG not in c["metadata"].get("tags", [])]
        code = [cell for cell in cells if cell["cell_type"] == "code"]
        assert [cell["execution_count"] for cell in code] == list(range(1, len(code) + 1))
    assert script.main([str(path) for path in copies]) == 0
    assert {path.name: path.read_bytes() for path in copies} == first, "a second run must change nothing"
    assert script.main(["--check", *map(str, copies)]) == 0
    # An older cell (say, after REPOSITORY changed) is replaced in place, keeping its id.
    notebook = json.loads(copies[0].read_text(encoding="utf-8"))
    notebook["cells"][1]["source"] = "# an older setup cell"
    notebook["cells"][1]["id"] = "older-id"
    copies[0].write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    assert script.main(["--check", str(copies[0])]) == 1
    script.main([str(copies[0])])
    cells = _cells(copies[0])
    assert cells[1]["id"] == "older-id" and "".join(cells[1]["source"]) == script.cell_source()
    assert sum(script.TAG in cell["metadata"].get("tags", []) for cell in cells) == 1


def test_lessons_that_have_the_cell_have_the_current_one() -> None:
    script = _script()
    having = [path for path in LESSONS if any(script.TAG in c["metadata"].get("tags", []) for c in _cells(path))]
    for path in having:
        assert script.main(["--check", str(path)]) == 0, f"run: python scripts/add_colab_cell.py {path}"


def test_outside_colab_the_cell_does_nothing_and_prints_nothing(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no COLAB_RELEASE_TAG
    done = subprocess.run([sys.executable, "-c", _script().cell_source()], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""


def _versions(python: Path, env: dict[str, str]) -> str:
    code = "import numpy, torch; print(numpy.__version__, torch.__version__, numpy.__file__)"
    home = env["HOME"]
    done = subprocess.run([str(python), "-c", code], env=env, capture_output=True, text=True, check=True, cwd=home)
    return done.stdout


def test_on_a_fake_colab_the_cell_installs_lessons_lib_from_a_wheel(tmp_path: Path) -> None:
    require("build", "numpy", "torch")
    # The wheel, built from a copy of the package (the repository gets no build/ folder).
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "lessons_lib", source / "lessons_lib", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not the repository, whose build/ folder (the website) would hide the build module
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("lessons_lib-*.whl")

    # "Colab": a fresh environment whose numpy and torch are preinstalled (this environment's, seen
    # through a .pth file, as Colab's runtime has its own), without lessons_lib.
    colab = tmp_path / "colab"
    subprocess.run([sys.executable, "-m", "venv", str(colab)], check=True)
    python = colab / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(purelib, "colab_preinstalled.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    env = {"PATH": f"{colab / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "PIP_NO_INDEX": "1"}
    run = {"env": env, "capture_output": True, "text": True, "cwd": tmp_path}  # not the repository: no lessons_lib
    missing = subprocess.run([str(python), "-c", "import lessons_lib"], **run)  # type: ignore[call-overload]
    assert missing.returncode != 0, "the fake Colab must start without lessons_lib"
    before = _versions(python, env)

    colab_env = {**env, "COLAB_RELEASE_TAG": "release-colab-fake", "LESSONS_LIB_SOURCE": str(wheel)}
    cell = _script().cell_source()
    for attempt in range(2):  # the second run finds lessons_lib and installs nothing
        done = subprocess.run([str(python), "-c", cell], env=colab_env, capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0, f"run {attempt + 1}: {done.stdout}{done.stderr}"
        assert done.stdout == "" and done.stderr == "", f"run {attempt + 1}: {done.stdout}{done.stderr}"

    assert _versions(python, env) == before, "the cell changed Colab's numpy or torch"
    check = (
        "import importlib.resources, lessons_lib\n"
        "from lessons_lib import mha_numpy, mha_torch\n"
        "from lessons_lib.checks import one_head\n"
        "from lessons_lib.widgets import head_widgets\n"
        "print(lessons_lib.__file__)\n"
        "print((importlib.resources.files('lessons_lib') / 'data' / 'toy_heads.npz').is_file())\n"
    )
    imported = subprocess.run([str(python), "-c", check], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    location, has_data = imported.stdout.split()
    assert Path(location).is_relative_to(colab) and has_data == "True"


COLAB_BADGE = re.compile(r"\[!\[[^\]]*\]\(https://colab\.research\.google\.com/assets/colab-badge\.svg\)\]\(([^)\s]+)\)")


def test_readme_colab_badges_open_the_lessons_where_the_site_buttons_do() -> None:
    config = runpy.run_path(str(REPO / "site" / "conf.py"))
    badges = COLAB_BADGE.findall((REPO / "README.md").read_text(encoding="utf-8"))
    assert badges, "README.md has no Open in Colab badge"
    for link in badges:
        assert link.startswith(config["COLAB_LAUNCH"]), f"{link}: change site/conf.py and README.md together"
        assert (REPO / link.removeprefix(config["COLAB_LAUNCH"])).is_file(), link
    # sphinx-book-theme's Colab button: {colab_url}/github/{owner}/{name}/blob/{branch}/{path}.
    options = config["html_theme_options"]
    owner, name = options["repository_url"].removeprefix("https://github.com/").split("/")
    built = f"{options['launch_buttons']['colab_url']}/github/{owner}/{name}/blob/{options['repository_branch']}/"
    assert built == config["COLAB_LAUNCH"]
