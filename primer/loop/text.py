"""Bounded input: the one reader for every file the project opens, and the limits on JSON.

Files come from people and from disks that crash; JSON comes from files and from models.
Either can be hostile. Three functions hold every limit, so no reader grows its own:

* :func:`read_bounded` reads a file only when it is a *regular* file of at most
  :data:`MAX_FILE_BYTES` bytes. A directory, a FIFO (which would block the reader forever),
  a device such as ``/dev/zero`` (which never ends) or a socket is refused, also behind a
  symbolic link, before a byte is read; a file that grows past the limit while it is read is
  refused too. :func:`check_writable` holds the same rule for a file about to be written
  or an SQLite database about to be opened: a regular file or nothing.
* :func:`parse_json` parses JSON text with the limits below: nesting at most
  :data:`MAX_DEPTH` arrays and objects deep, integers of at most :data:`MAX_INT_DIGITS`
  digits, no ``NaN`` or ``Infinity`` (not JSON), no number too large for a float (``1e400``).
  Python's own parser would raise ``RecursionError`` for deep nesting and an unlabelled
  ``ValueError`` past 4,300 digits; here every refusal is one :class:`JSONRefused` naming
  the limit and, when known, the position.
* :func:`json_problem` checks a value already in memory (a model's tool input, a reply's
  content) against the same limits, plus what JSON can carry at all: dicts with string
  keys, lists, strings, finite numbers, booleans and ``None``, and (``text=True``) strings
  that are valid Unicode (no lone surrogate such as ``"\\ud800"``, which UTF-8 cannot
  encode). It walks without recursion, so a value nested 100,000 deep is described, not
  crashed on.

The limits are generous for anything a run records (a journal line nests about 10 levels
above a tool input) and far below what breaks the interpreter.
"""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path
from typing import Any

#: The largest file any reader of the project opens (bytes): a run's record, not a dump.
MAX_FILE_BYTES = 64 * 1024 * 1024
#: The deepest nesting of arrays and objects a JSON document or value may have.
MAX_DEPTH = 100
#: The most digits an integer in JSON may have (Python refuses to parse past 4,300).
MAX_INT_DIGITS = 100
#: The deepest a model's tool input may nest: a journal line holds an input about eight
#: levels down, so what a run records stays within :data:`MAX_DEPTH` when read back.
MAX_INPUT_DEPTH = 64

_BIG = 10**MAX_INT_DIGITS


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


class JSONRefused(ValueError):
    """JSON text or a value outside the limits of this module (or not JSON at all).

    ``reason`` is the problem in a few words, with the position in the text when known
    (``line 3 column 7``), or the path in the value (``at 'items/0'``).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ---------------------------------------------------------------- files


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


def decode_utf8(data: bytes) -> str:
    """``data`` as UTF-8 text (a byte-order mark is dropped); :class:`JSONRefused` naming
    the first bad byte, or UTF-16 when the bytes look like it."""
    utf16 = data[:2] in (b"\xff\xfe", b"\xfe\xff") or (
        len(data) >= 4 and (data[1:4:2] == b"\x00\x00" or data[0:3:2] == b"\x00\x00"))
    if utf16:  # a byte-order mark, or ASCII text with a zero byte after or before each letter
        raise JSONRefused("is UTF-16 text, not UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise JSONRefused(f"is not UTF-8 text (byte {e.start} is {data[e.start]:#04x})") \
            from None


# ---------------------------------------------------------------- JSON text


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise JSONRefused(f"an integer of {digits:,} digits (at most {MAX_INT_DIGITS} here)")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise JSONRefused(f"the number {text[:40]} is too large for a float")
    return value


def _constant(name: str) -> Any:
    raise JSONRefused(f"{name} is not JSON (JSON has no NaN or Infinity)")


_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)


def parse_json(text: str | bytes) -> Any:
    """Parse JSON ``text`` (bytes must be UTF-8) within this module's limits.

    Raises :class:`JSONRefused`: for invalid JSON (the parser's own message and position),
    nesting deeper than :data:`MAX_DEPTH`, an integer of more than :data:`MAX_INT_DIGITS`
    digits, ``NaN``/``Infinity`` or a number beyond a float's range, and text that is not
    UTF-8.
    """
    if isinstance(text, (bytes, bytearray)):
        text = decode_utf8(bytes(text))
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as e:
        raise JSONRefused(f"not valid JSON: {e.msg.removesuffix(' at')} at line {e.lineno} "
                          f"column {e.colno}") from None
    except RecursionError:
        raise JSONRefused(f"nested deeper than {MAX_DEPTH} levels") from None
    problem = json_problem(value)
    if problem:
        raise JSONRefused(problem)
    return value


# ---------------------------------------------------------------- JSON values in memory

_SCALARS = (str, int, float, bool, type(None))


def _where(path: list[Any]) -> str:
    return f" at '{'/'.join(map(str, path))}'" if path else ""


def _scalar_problem(value: Any, text: bool) -> str | None:
    t = type(value)
    if t is str:
        if text and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                return (f"a string with a lone surrogate ({value[e.start]!r}, character "
                        f"{e.start}), which is not valid Unicode text")
        return None
    if t is int:
        if not -_BIG < value < _BIG:
            return f"an integer of more than {MAX_INT_DIGITS} digits"
        return None
    if t is float:
        if value != value or value in (float("inf"), float("-inf")):
            return f"the number {value}, which JSON cannot hold"
        return None
    if t is bool or value is None:
        return None
    return f"a {t.__name__}, which JSON cannot carry"


def json_problem(value: Any, *, text: bool = False, max_depth: int = MAX_DEPTH) -> str | None:
    """Why ``value`` is not a JSON value within the limits, or ``None`` when it is.

    JSON values are dicts with ``str`` keys, lists (and tuples, sent as arrays), ``str``,
    ``int`` of at most :data:`MAX_INT_DIGITS` digits, finite ``float``, ``bool`` and
    ``None``, nested at most ``max_depth`` deep. With ``text`` every string (keys too) must
    also be valid Unicode (no lone surrogate). The answer names the first problem and where
    it is (``at 'items/0/name'``). Iterative: any depth is safe to check.
    """
    t = type(value)
    if t is dict:  # the common case, a flat object of plain values: no walk
        for k, v in value.items():
            tv = type(v)
            if type(k) is not str or (text and not k.isascii()):
                break
            if tv is str:
                if text and not v.isascii():
                    break
            elif tv is int:
                if not -_BIG < v < _BIG:
                    break
            elif tv is float:
                if v - v != 0.0:  # NaN or an infinity
                    break
            elif tv is not bool and v is not None:
                break
        else:
            return None
    elif t in _SCALARS:
        return _scalar_problem(value, text)
    stack: list[tuple[Any, list[Any], int]] = [(value, [], 1)]
    while stack:
        node, path, depth = stack.pop()
        kind = type(node)
        if kind is dict or kind is list or kind is tuple:
            if depth > max_depth:
                return f"nested deeper than {max_depth} levels{_where(path[:3])} ..."
            if kind is dict:
                for k, v in node.items():
                    if type(k) is not str:
                        return f"a key {safe_repr(k)} that is not a string{_where(path)}"
                    if text:
                        problem = _scalar_problem(k, True)
                        if problem:
                            return f"a key that is {problem}{_where(path)}"
                    stack.append((v, [*path, k], depth + 1))
            else:
                stack.extend((v, [*path, i], depth + 1) for i, v in enumerate(node))
            continue
        problem = _scalar_problem(node, text)
        if problem:
            return problem + _where(path)
    return None


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: a surrogate pair written as two characters is joined into
    the one character it stands for, and each lone surrogate becomes U+FFFD (the replacement
    character). UTF-8, and so any request to a model, cannot carry a lone surrogate."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def safe_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters; never raises."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - describing a value must not fail
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def safe_str(value: Any, limit: int = 2000) -> str:
    """``str(value)`` that never raises (a broken ``__str__`` falls back to the type name)
    and is cut to ``limit`` characters."""
    try:
        text = str(value)
    except Exception:  # noqa: BLE001 - describing a value must not fail
        try:
            text = object.__repr__(value)
        except Exception:  # noqa: BLE001
            text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def one_line(value: Any, limit: int) -> str:
    """``str(value)`` on one line (each run of whitespace one space), cut to ``limit``
    characters and ending with "…" when cut: for tables and messages a person reads."""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
