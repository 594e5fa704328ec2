"""``several-heads doctor`` (`lessons_lib.doctor`): every check passes on the tested set, and each kind of
broken machine gets a FAIL line that says what to do."""

from __future__ import annotations

import importlib.metadata

import pytest

from lessons_lib import cli, doctor, shakespeare


def installed(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_every_check_passes_here_and_the_command_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """On the tested set every check passes; the oldest set (requirements-oldest.txt) has no JupyterLab,
    and that is the only line the doctor may fail there."""
    missing = [name for name in doctor.MINIMUM_VERSIONS if not installed(name)]
    assert set(missing) <= {"jupyterlab"}
    assert cli.main(["doctor"]) == (1 if missing else 0)
    lines = capsys.readouterr().out.splitlines()
    names = [line.split(":")[0].split(maxsplit=1)[1] for line in lines[:-1]]
    assert names == ["Python", *doctor.MINIMUM_VERSIONS, "lessons", "data", "NumPy = PyTorch"]
    assert [name for name, line in zip(names, lines, strict=False) if not line.startswith("OK")] == missing
    assert lines[-1].startswith("All 12 checks passed") if not missing else lines[-1].startswith("1 of 12 checks")


def test_a_missing_or_old_package_fails_with_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version

    def version(name: str) -> str:
        if name == "torch":
            raise importlib.metadata.PackageNotFoundError(name)
        return "1.20.0" if name == "numpy" else real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    found = {check.name: check for check in doctor.run_checks()}
    assert not found["torch"].ok and found["torch"].detail.startswith("not installed: pip install -r requirements.txt")
    assert str(found["numpy"]).startswith("FAIL  numpy: 1.20.0 is older than 1.26.0")
    assert found["matplotlib"].ok


def test_damaged_data_and_a_broken_check_are_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shakespeare, "load_text", lambda split: "not the plays")
    def _lessons() -> doctor.Check:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(doctor, "_lessons", _lessons)
    found = {check.name: check for check in doctor.run_checks()}
    assert not found["data"].ok and "differs from its manifest (SHA-256)" in found["data"].detail
    assert not found["lessons"].ok and found["lessons"].detail == "ZeroDivisionError: division by zero"


def test_the_command_exits_1_and_counts_the_failures(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    too_old = doctor.Check("Python", False, "3.9.0; the lessons need 3.10 or newer")
    monkeypatch.setattr(doctor, "_python", lambda: too_old)
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  Python: 3.9.0; the lessons need 3.10 or newer" in out
    missing = [name for name in doctor.MINIMUM_VERSIONS if not installed(name)]  # none but in the oldest set
    failed = ", ".join(["Python", *missing])
    last = f"{1 + len(missing)} of 12 checks failed ({failed}): fix them before the first lesson."
    assert out.splitlines()[-1] == last


@pytest.mark.parametrize(
    ("text", "expected"), [("2.13.0+cpu", (2, 13, 0)), ("1.26.0", (1, 26, 0)), ("4.0.0rc1", (4, 0, 0)), ("8", (8,))]
)
def test_version_tuple_reads_the_leading_numbers(text: str, expected: tuple[int, ...]) -> None:
    assert doctor.version_tuple(text) == expected


def test_version_tuple_refuses_what_is_not_a_version() -> None:
    with pytest.raises(ValueError, match="does not start with a number"):
        doctor.version_tuple("dev")
    with pytest.raises(TypeError, match="version must be a str"):
        doctor.version_tuple(2)  # type: ignore[arg-type]
