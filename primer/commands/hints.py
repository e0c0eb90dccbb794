"""The command lines a command prints for the reader to paste, spelled for this machine.

After a pause, ``demo`` and ``approve`` print the next commands to run. Printed as
``python -m primer ...`` they would run whatever ``python`` is first on the reader's
``PATH``, often not the project's virtual environment, where ``primer`` is not installed.
So they name the interpreter actually running: ``.venv/bin/python -m primer ...`` when it
lives under the current directory (as in the README), else plain ``python``.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path


def interpreter(executable: str | None = None, cwd: str | os.PathLike[str] | None = None
                ) -> str:
    """How to name the running Python in a command line typed in ``cwd``.

    ``executable`` defaults to ``sys.executable`` and ``cwd`` to the current directory.
    Returns the interpreter's path relative to ``cwd`` when it lies inside it (``./python``
    rather than a bare ``python`` when it sits in ``cwd`` itself, so the shell does not look
    it up on ``PATH``), quoted for a POSIX shell if needed; else ``"python"`` (also when
    ``sys.executable`` is empty, as in some embedded interpreters). Symbolic links are not
    followed: a virtual environment's ``bin/python`` is usually a link to the system Python,
    and the link is what selects the environment. Never raises.
    """
    exe = executable if executable is not None else sys.executable
    if not exe:
        return "python"
    here = Path(os.path.abspath(cwd if cwd is not None else os.getcwd()))
    try:
        relative = Path(os.path.abspath(exe)).relative_to(here)
    except ValueError:
        return "python"
    text = str(relative) if relative.parent != Path(".") else f".{os.sep}{relative}"
    return shlex.quote(text)


def primer_command(*args: str) -> str:
    """The command line ``<interpreter> -m primer ARGS...`` to paste into a shell here.

    ``args`` are joined with spaces as given (quote them yourself if they need it; a
    placeholder such as ``"--no --note \\"why\\""`` stays as written). See
    :func:`interpreter` for how the Python is named.
    """
    return " ".join([interpreter(), "-m", "primer", *args])
