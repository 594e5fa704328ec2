"""A check cell run before its exercise cell ran says what to do, under IPython's usual traceback."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from typing import Any

import pytest

from lessons_lib import missing_names


@pytest.fixture(scope="module")
def shell() -> Any:
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


def test_a_missing_answer_gets_the_advice_and_still_stops_the_cell(shell: Any) -> None:
    missing_names.install(shell)
    assert not missing_names.install(shell), "installed twice"
    shown, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(errors):
        result = shell.run_cell("print(check(my_merge_answer))")
    assert isinstance(result.error_in_exec, NameError), "the cell must still stop with the NameError"
    assert "NameError" in shown.getvalue() + errors.getvalue(), "IPython's own traceback is kept"
    advice = " ".join(errors.getvalue().split())
    assert "`check` is not defined yet" in advice and "run the cell that defines it" in advice
    assert all(len(line) <= 79 for line in errors.getvalue().splitlines()), errors.getvalue()


def test_other_errors_are_shown_as_before(shell: Any) -> None:
    missing_names.install(shell)
    errors = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errors):
        result = shell.run_cell("1 / 0")
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    assert "not defined yet" not in errors.getvalue()
    assert missing_names.advice(ValueError("x")) is None
    assert missing_names.advice(NameError("no name given")) is None


def test_importing_the_checks_outside_ipython_changes_nothing() -> None:
    code = "import lessons_lib.checks\nfrom lessons_lib import missing_names\nprint(missing_names.install())"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False", result.stdout + result.stderr
