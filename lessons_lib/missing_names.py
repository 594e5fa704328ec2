"""A NameError in a lesson says what a learner usually has to do about it.

The commonest NameError in the lessons comes from a check cell: ``print(check_merge(merge))`` when
``merge`` is not defined, because the learner has not run their exercise cell yet, or ran it and it
stopped with an error before reaching its ``def``. Python's own message names the missing name but
not that. `install` (called when ``lessons_lib.checks`` is imported inside IPython or Jupyter) keeps
IPython's usual traceback and adds one line under it that says what to do. Outside IPython it does
nothing. Only the display changes: the error is raised as before, so a cell still stops there.
"""

from __future__ import annotations

import sys
import textwrap
from types import TracebackType
from typing import Any

ADVICE = (
    "`{name}` is not defined yet. If it is yours (an exercise's answer), run the cell that defines "
    "it first; if that cell stopped with an error, mend that error and run it again."
)
_FLAG = "_several_heads_explains_missing_names"


def advice(error: BaseException) -> str | None:
    """The line added under a NameError, or None for any other error (or a NameError with no name)."""
    name = getattr(error, "name", None)
    if not isinstance(error, NameError) or not isinstance(name, str) or not name:
        return None
    return textwrap.fill(ADVICE.format(name=name), width=79)  # JupyterLab would cut a longer line anywhere


def _show(shell: Any, etype: type[BaseException], value: BaseException, tb: TracebackType | None,
          tb_offset: int | None = None) -> None:
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    line = advice(value)
    if line is not None:
        print(line, file=sys.stderr)


def install(shell: Any = None) -> bool:
    """Add the advice to the IPython shell (the running one by default); True when installed now."""
    if shell is None:
        ipython = sys.modules.get("IPython")  # never imported here: plain Python has no shell to add to
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "set_custom_exc") or getattr(shell, _FLAG, False):
        return False
    shell.set_custom_exc((NameError,), _show)
    setattr(shell, _FLAG, True)
    return True
