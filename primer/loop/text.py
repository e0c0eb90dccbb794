"""JSON the loop can trust: the limits on JSON, and text that describes any value.

JSON comes from models and from files, and either can be hostile; the limits live here so no
reader grows its own. :func:`parse_json` (text) and :func:`json_problem` (a value in memory,
e.g. a tool input) apply the same limits, :data:`MAX_DEPTH` and :data:`MAX_INT_DIGITS`, and
every refusal names the limit and where (Python's own parser would raise ``RecursionError`` or
an unlabelled ``ValueError``). The limits are generous for anything a run records (a journal
line nests about 10 levels above a tool input) and far below what breaks the interpreter.
:func:`safe_repr`, :func:`safe_str`, :func:`one_line` and :func:`compact_json` turn any
value into text that can be shown, and never raise. Reading files within limits:
:mod:`primer.harness.files`; the JSON text messages are sent as: :mod:`primer.loop.messages`.
"""

from __future__ import annotations

import json
from typing import Any

#: The deepest nesting of arrays and objects a JSON document or value may have.
MAX_DEPTH = 100
#: The most digits an integer in JSON may have (Python refuses to parse past 4,300).
MAX_INT_DIGITS = 100
#: The deepest a model's tool input may nest: a journal line holds an input about eight
#: levels down, so what a run records stays within :data:`MAX_DEPTH` when read back.
MAX_INPUT_DEPTH = 64

_BIG = 10**MAX_INT_DIGITS


class JSONRefused(ValueError):
    """JSON text or a value outside this module's limits (or not JSON at all). ``reason``: the
    problem in a few words, with where when known (``line 3 column 7``, ``at 'items/0'``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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
    """Parse JSON ``text`` (bytes must be UTF-8) within this module's limits. Raises
    :class:`JSONRefused` for invalid JSON (the parser's message and position), nesting deeper
    than :data:`MAX_DEPTH`, an integer of over :data:`MAX_INT_DIGITS` digits,
    ``NaN``/``Infinity``, a number beyond a float's range (``1e400``) and bytes not UTF-8."""
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
    JSON values: dicts with ``str`` keys, lists and tuples, ``str``, ``int`` of at most
    :data:`MAX_INT_DIGITS` digits, finite ``float``, ``bool`` and ``None``, nested at most
    ``max_depth`` deep; with ``text``, strings (keys too) must be valid Unicode (no lone
    surrogate). Names the first problem and where (``at 'items/0/name'``). Iterative: any
    depth is safe to check."""
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


def compact_json(value: Any) -> str:
    """``value`` as one line of JSON for messages and tables (its ``repr`` if not JSON)."""
    try:
        return json.dumps(value, separators=(", ", ": "), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
