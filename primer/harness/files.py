"""Files within limits: the one reader for every file the project opens.

Files come from people and from disks that crash; either can be hostile.

* :func:`read_bounded` reads a file only when it is a *regular* file of at most
  :data:`MAX_FILE_BYTES` bytes. A directory, a FIFO (which would block the reader forever),
  a device such as ``/dev/zero`` (which never ends) or a socket is refused, also behind a
  symbolic link, before a byte is read; a file that grows past the limit while it is read is
  refused too. :func:`read_text` adds UTF-8 decoding, :func:`open_bounded` reads line by
  line.
* :func:`check_writable` holds the same rule for a file about to be written or an SQLite
  database about to be opened: a regular file or nothing.

The JSON inside is parsed with :func:`primer.loop.text.parse_json` and its limits.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

from primer.loop.text import JSONRefused, decode_utf8

#: The largest file any reader of the project opens (bytes): a run's record, not a dump.
MAX_FILE_BYTES = 64 * 1024 * 1024


class UnreadableFile(ValueError):
    """A file :func:`read_bounded` will not read; ``reason`` says why in a few words.

    ``missing`` is true when nothing exists at ``path`` (callers add their own advice).
    """

    def __init__(self, path: str | os.PathLike[str], reason: str, *,
                 missing: bool = False) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason
        self.missing = missing



def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_bounded(path: str | os.PathLike[str], *, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` bytes of them.

    A symbolic link to a regular file is followed. The file is opened non-blocking (so even
    a FIFO swapped in after the check cannot block) and checked again once open.
    Raises :class:`UnreadableFile` for a missing path (``missing``), anything that is not a
    regular file, a file larger than ``limit`` (before reading it), and an ``OSError``
    while opening or reading (its message in ``reason``).
    """
    fd = _open_regular(path, limit)
    try:
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise UnreadableFile(path, f"grew past the {limit:,} bytes a file may have "
                                           f"here while it was read")
        return b"".join(chunks)
    except OSError as e:
        raise UnreadableFile(path, f"cannot be read ({e.strerror or e})") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], *, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of the regular file at ``path`` (:func:`read_bounded`, then
    :func:`decode_utf8`). Raises :class:`UnreadableFile`, whose ``reason`` also covers text
    that is not UTF-8."""
    data = read_bounded(path, limit=limit)
    try:
        return decode_utf8(data)
    except JSONRefused as e:
        raise UnreadableFile(path, e.reason) from None


def open_bounded(path: str | os.PathLike[str], *,
                 limit: int = MAX_FILE_BYTES) -> io.BufferedReader:
    """The regular file at ``path`` opened for reading in binary (for a reader that goes
    line by line), after the checks of :func:`read_bounded`; the same errors."""
    return os.fdopen(_open_regular(path, limit), "rb")


def _open_regular(path: str | os.PathLike[str], limit: int) -> int:
    """A read descriptor of the regular file at ``path`` of at most ``limit`` bytes."""
    p = os.fspath(path)
    try:
        info = os.stat(p)
    except FileNotFoundError:
        raise UnreadableFile(path, "no such file", missing=True) from None
    except OSError as e:
        raise UnreadableFile(path, f"cannot be read ({e.strerror or e})") from None
    linked = " (behind a symbolic link)" if os.path.islink(p) else ""
    if not stat.S_ISREG(info.st_mode):
        raise UnreadableFile(path, f"is {_kind(info.st_mode)}{linked}, not a regular file; "
                                   f"only regular files are read")
    if info.st_size > limit:
        raise UnreadableFile(path, f"is {info.st_size:,} bytes, more than the {limit:,} bytes "
                                   f"a file may have here")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) \
        | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(p, flags)
    except OSError as e:
        raise UnreadableFile(path, f"cannot be opened ({e.strerror or e})") from None
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode):  # swapped between the check and the open
        os.close(fd)
        raise UnreadableFile(path, f"is {_kind(opened.st_mode)}, not a regular file")
    return fd


def check_writable(path: str | os.PathLike[str]) -> None:
    """Refuse ``path`` as a file to write (or an SQLite database to open) unless it is a
    regular file or nothing at all, so a write can neither block nor land elsewhere.

    Raises :class:`UnreadableFile` when ``path`` is a directory, a FIFO (opening one for
    writing blocks until a reader comes), a device or a socket, also behind a symbolic link,
    and when it is a symbolic link to nothing (writing would create the link's target).
    """
    p = os.fspath(path)
    try:
        info = os.stat(p)
    except FileNotFoundError:
        if os.path.islink(p):
            raise UnreadableFile(path, f"is a symbolic link to {os.readlink(p)}, which does "
                                       f"not exist; give the file itself") from None
        return
    except OSError as e:
        raise UnreadableFile(path, f"cannot be used ({e.strerror or e})") from None
    if not stat.S_ISREG(info.st_mode):
        linked = " (behind a symbolic link)" if os.path.islink(p) else ""
        raise UnreadableFile(path, f"is {_kind(info.st_mode)}{linked}, not a regular file; "
                                   f"only a regular file (or a new one) is used here")
