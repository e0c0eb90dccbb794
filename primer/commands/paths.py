"""Checks for the paths a command will write to, made before the run starts.

A command that writes a file or a directory checks its path up front, so a typo costs one
clear line and exit code 2 rather than a traceback after the run, and no directory is made
by accident. The rules: a file's directory must already exist (a command never creates
directories for a single file); a directory of outputs (checkpoints, one trace per eval
task) may be created, but only inside a directory that exists.
"""

from __future__ import annotations

import os
from pathlib import Path

from primer.harness.files import UnreadableFile, check_writable


def output_file_problem(path: str | os.PathLike[str], option: str) -> str | None:
    """What stops ``path`` being written as a file, or ``None`` when it looks writable.

    ``option`` names the command-line option (``"--trace"``) in the message. Problems: the
    path is a directory, its parent directory does not exist or is not a directory, or
    the parent is not writable (``os.access``). A ``None`` is no promise: the write itself
    may still fail (a full disk, ``/proc``); report that ``OSError`` with :func:`os_error_line`.
    """
    p = Path(path)
    if p.is_dir():
        return f"{option} {path}: that is a directory; give a file name, e.g. {p / 'run.jsonl'}"
    parent = p.parent
    if not parent.exists():
        return (f"{option} {path}: the directory {parent} does not exist; create it first "
                f"(mkdir -p {parent}) or choose a file in an existing directory")
    if not parent.is_dir():
        return f"{option} {path}: {parent} is not a directory"
    if not os.access(parent, os.W_OK):
        return f"{option} {path}: the directory {parent} is not writable"
    try:
        check_writable(p)
    except UnreadableFile as e:
        return f"{option} {e}"
    return None


def output_dir_problem(path: str | os.PathLike[str], option: str) -> str | None:
    """What stops ``path`` being used (or created) as a directory of outputs, or ``None``.

    ``option`` names the command-line option (``"--checkpoint-dir"``) in the message. An
    existing ``path`` must be a writable directory; a new one must sit in an existing,
    writable directory (only the last component may be created, and only by the run).
    """
    p = Path(path)
    if p.exists():
        if not p.is_dir():
            return f"{option} {path}: that is a file, not a directory"
        if not os.access(p, os.W_OK):
            return f"{option} {path}: the directory is not writable"
        return None
    parent = p.parent
    if not parent.is_dir():
        return (f"{option} {path}: the directory {parent} does not exist; create it first "
                f"(mkdir -p {parent}) or choose a directory inside an existing one")
    if not os.access(parent, os.W_OK):
        return f"{option} {path}: cannot create it, {parent} is not writable"
    return None


def os_error_line(command: str, e: OSError) -> str:
    """One line for an ``OSError`` raised while a command wrote its output, e.g.
    ``demo: cannot use /proc/x.jsonl: No such file or directory``."""
    where = f" {e.filename}" if e.filename else " a file"
    return f"{command}: cannot use{where}: {e.strerror or e}"
