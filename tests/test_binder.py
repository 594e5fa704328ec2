"""The Binder configuration (binder/) builds the environment the notebooks were tested in.

mybinder.org builds an image with repo2docker from `binder/`. When a `binder/` folder exists
repo2docker reads only it (not the root requirements.txt or pyproject.toml), so the two requirement
files must be kept in step by hand; these tests catch the drift:

* every package pinned in one file is pinned to the same version in the other (torch compared
  without its local `+cpu` tag),
* Binder installs the CPU build of torch from the PyTorch CPU wheel index, as an extra index,
* Binder installs this repository's lessons_lib,
* runtime.txt names a Python that pyproject.toml and the pinned packages support,
* postBuild writes the learner copy (`several-heads prepare my-lessons`) that every README badge
  opens, and it does (run here with the command on PATH).

When jupyter-repo2docker is installed, one more test asks it for the Dockerfile it would build
(`--no-build --debug` needs no Docker engine) and checks that plan.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from lessons_lib import cli

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 has no tomllib; tomli is the same parser from PyPI
    tomllib = pytest.importorskip("tomli", reason="Python 3.10 needs tomli to read pyproject.toml")

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# Pinned at the root but deliberately absent on Binder: test tooling a learner there never uses.
# The browser-test driver needs a Chromium that a Binder image does not have, and repo2docker is
# what builds the Binder image, not something to run inside it.
ROOT_ONLY = {"playwright", "jupyter-repo2docker"}
LOCAL_PACKAGE_LINES = {"-e .", "--editable .", "--editable=.", "."}
LEARNER_COPY = "my-lessons"
BADGE_URLPATH = re.compile(r"\]\(https://mybinder\.org/v2/gh/[^)\s]*\?urlpath=lab/tree/([^)\s]+)\)")


def requirement_lines(path: Path) -> list[str]:
    """Non-empty lines of a requirements file with comments removed."""
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def pins(path: Path) -> dict[str, Version]:
    """Package name (canonical) -> pinned version, for every `name==version` line of ``path``.

    Raises ValueError naming the line when a package line is not an exact `==` pin.
    """
    pinned: dict[str, Version] = {}
    for line in requirement_lines(path):
        if line.startswith("-") or line in LOCAL_PACKAGE_LINES:
            continue  # pip options and the local package
        requirement = Requirement(line)
        if requirement.marker and not requirement.marker.evaluate({"python_version": str(runtime_python())}):
            continue  # a pin for another Python than Binder's (e.g. the Python 3.10 fallbacks)
        specifiers = list(requirement.specifier)
        if len(specifiers) != 1 or specifiers[0].operator != "==":
            raise ValueError(f"{path.name}: '{line}' is not pinned with ==; pin it like name==1.2.3")
        pinned[canonicalize_name(requirement.name)] = Version(specifiers[0].version)
    return pinned


def runtime_python() -> Version:
    """The Python version named by binder/runtime.txt (format `python-X.Y`)."""
    text = (BINDER / "runtime.txt").read_text(encoding="utf-8").strip()
    match = re.fullmatch(r"python-(\d+\.\d+)", text)
    assert match, f"binder/runtime.txt should read like 'python-3.11', found {text!r}"
    return Version(match.group(1))


def test_binder_pins_exactly_what_the_root_requirements_pin() -> None:
    root, binder = pins(ROOT / "requirements.txt"), pins(BINDER / "requirements.txt")
    missing_on_binder = sorted(set(root) - set(binder) - ROOT_ONLY)
    missing_at_root = sorted(set(binder) - set(root))
    assert not missing_on_binder, f"pinned in requirements.txt but not in binder/requirements.txt: {missing_on_binder}"
    assert not missing_at_root, f"pinned in binder/requirements.txt but not in requirements.txt: {missing_at_root}"
    differing = {
        name: (str(root[name]), str(binder[name]))
        for name in sorted(set(root) & set(binder))
        if root[name].public != binder[name].public  # torch==2.13.0 matches torch==2.13.0+cpu
    }
    assert not differing, f"root vs binder versions differ (root, binder): {differing}; make them equal"


def test_binder_takes_torch_cpu_build_from_the_extra_cpu_index() -> None:
    lines = requirement_lines(BINDER / "requirements.txt")
    assert f"--extra-index-url {CPU_INDEX}" in lines, (
        f"binder/requirements.txt needs '--extra-index-url {CPU_INDEX}' (an extra index, so that the "
        "other packages still come from PyPI)"
    )
    assert not any(line.startswith(("--index-url", "-i ")) for line in lines), (
        "binder/requirements.txt must not replace PyPI with --index-url; use --extra-index-url"
    )
    torch = pins(BINDER / "requirements.txt").get("torch")
    assert torch is not None, "binder/requirements.txt must pin torch (an unpinned torch pulls a CUDA build)"
    assert torch.local == "cpu", f"binder torch must be the CPU build, like torch=={torch.public}+cpu; found {torch}"


def test_binder_installs_lessons_lib_from_the_repository() -> None:
    lines = requirement_lines(BINDER / "requirements.txt")
    assert LOCAL_PACKAGE_LINES & set(lines), (
        "binder/requirements.txt must install this repository ('-e .'): repo2docker runs "
        "pip install -r binder/requirements.txt from the repository root and ignores pyproject.toml "
        "when a binder/ folder exists"
    )


def test_runtime_python_is_supported_by_the_project_and_every_pin() -> None:
    python = runtime_python()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert python in SpecifierSet(project["requires-python"]), (
        f"runtime.txt names Python {python}, but pyproject.toml requires {project['requires-python']}"
    )
    checked, unsupported = [], {}
    for name, version in pins(BINDER / "requirements.txt").items():
        try:
            metadata = importlib.metadata.metadata(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if Version(metadata["Version"]).public != version.public:
            continue  # installed here at another version: its metadata says nothing about the pin
        checked.append(name)
        requires = metadata.json.get("requires_python")
        if requires and python not in SpecifierSet(requires):
            unsupported[name] = requires
    assert checked, "no pinned package is installed here at its pinned version; run pip install -r requirements.txt"
    assert not unsupported, f"Python {python} (runtime.txt) is outside these pins' Requires-Python: {unsupported}"


def test_runtime_python_is_one_repo2docker_can_build() -> None:
    if importlib.util.find_spec("repo2docker") is None:
        pytest.skip("jupyter-repo2docker not installed (pip install jupyter-repo2docker to check this)")
    with warnings.catch_warnings():  # repo2docker's logging dependency warns about its own rename on import
        warnings.simplefilter("ignore", DeprecationWarning)
        from repo2docker.buildpacks.conda.supported_python_version import SUPPORTED_PYTHON_VERSION

    assert str(runtime_python()) in SUPPORTED_PYTHON_VERSION, (
        f"repo2docker builds Python {SUPPORTED_PYTHON_VERSION}, not {runtime_python()} (binder/runtime.txt)"
    )


def test_repo2docker_build_plan_installs_binder_requirements_on_python_311(tmp_path: Path) -> None:
    """Ask repo2docker for the Dockerfile it would build; no Docker engine is needed for that."""
    if importlib.util.find_spec("repo2docker") is None:
        pytest.skip(
            "jupyter-repo2docker not installed: `pip install jupyter-repo2docker` to check the Binder "
            "build plan (its --no-build --debug mode prints the Dockerfile without a Docker engine)"
        )
    # repo2docker reads only binder/ when it exists; copy what it looks at, not the whole work tree.
    repo = tmp_path / "repo"
    shutil.copytree(BINDER, repo / "binder")
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    # --user-id/--user-name as mybinder.org builds: the repository then belongs to the user that runs pip.
    command = [sys.executable, "-m", "repo2docker", "--no-build", "--debug"]
    command += ["--user-id", "1000", "--user-name", "jovyan", str(repo)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    plan = result.stdout + result.stderr
    assert result.returncode == 0, f"repo2docker --no-build failed:\n{plan}"
    assert "Building conda environment for python=3.11" in plan, f"repo2docker did not pick Python 3.11:\n{plan}"
    # the lock file name appears escaped in COPY lines ('.' -> '-2e', '-' -> '-2d')
    python_311 = r"environment(\.|-2e)py(-|-2d)3(\.|-2e)11"
    assert re.search(python_311, plan), "the base environment is not the Python 3.11 one"
    assert re.search(r"^RUN \./binder/postBuild$", plan, re.M), f"the build plan never runs binder/postBuild:\n{plan}"
    copy_repo = plan.find("COPY --chown=1000:1000 src/ ${REPO_DIR}/")
    pip_install = plan.find('${KERNEL_PYTHON_PREFIX}/bin/pip install --no-cache-dir -r "binder/requirements.txt"')
    assert pip_install >= 0, f"the build plan never installs binder/requirements.txt:\n{plan}"
    # `-e .` needs the whole repository in place, owned by the user, before pip runs.
    assert 0 <= copy_repo < pip_install, "binder/requirements.txt is installed before the repository is copied in"
    # postBuild calls `several-heads`, which `-e .` in binder/requirements.txt installs.
    assert pip_install < plan.find("RUN ./binder/postBuild"), "postBuild runs before lessons_lib is installed"
    assert re.search(r"^USER \$\{NB_USER\}\s*\nRUN \$\{KERNEL_PYTHON_PREFIX\}/bin/pip install", plan, re.M), (
        "pip should run as the notebook user"
    )


def test_post_build_writes_the_learner_copy(tmp_path: Path) -> None:
    """binder/postBuild, run as repo2docker runs it (from the repository's folder, here a temporary
    one, with the package's console script on PATH), writes my-lessons/ with every lesson."""
    post_build = BINDER / "postBuild"
    assert post_build.is_file() and os.access(post_build, os.X_OK), "binder/postBuild must exist and be executable"
    assert f"several-heads prepare {LEARNER_COPY}" in post_build.read_text(encoding="utf-8")
    shims = tmp_path / "bin"
    shims.mkdir()
    shim = shims / "several-heads"  # what `pip install -e .` puts on PATH on Binder
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m lessons_lib.cli "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run([str(post_build)], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    lessons = [path.name for path in cli.find_lessons(None)]
    assert sorted(path.name for path in (tmp_path / LEARNER_COPY).glob("*.ipynb")) == lessons
    assert "01_one_head.ipynb" in result.stdout and "added" in result.stdout


def test_every_badge_opens_the_learner_copy_of_a_lesson() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = BADGE_URLPATH.findall(readme)
    assert targets, "README.md has no Binder badge opening JupyterLab (urlpath=lab/tree/...)"
    assert len(targets) == readme.count("(https://mybinder.org/badge_logo.svg)"), "a badge opens something else"
    lessons = {path.name for path in cli.find_lessons(None)}
    for target in targets:
        folder, _, name = target.partition("/")
        assert folder == LEARNER_COPY and name in lessons, (
            f"the badge opening {target} should open the learner copy, lab/tree/{LEARNER_COPY}/<lesson>.ipynb "
            "(binder/postBuild writes it; notebooks/ has every answer stored under its cell)"
        )
