"""The entry point of a child process started by :func:`primer.harness.timeouts.run_in_subprocess`.

Kept apart from :mod:`primer.harness` so the child imports nothing heavy before it runs the
tool: starting it costs an interpreter start, not the whole library's imports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def run_and_send(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
    """Call ``fn(*args, **kwargs)`` and send ``(True, result)`` or ``(False, exception)``.

    ``conn`` is the write end of a ``multiprocessing`` pipe. A result or exception that
    cannot be pickled is replaced by a ``RuntimeError`` that says so.
    """
    try:
        message: tuple[bool, Any] = (True, fn(*args, **kwargs))
    except BaseException as e:  # noqa: BLE001 - sent back to the parent
        message = (False, e)
    try:
        conn.send(message)
    except Exception as e:  # noqa: BLE001 - an unpicklable result or exception
        conn.send((False, RuntimeError(f"the result could not be sent back from the "
                                       f"subprocess: {type(e).__name__}: {e}")))
    finally:
        conn.close()
