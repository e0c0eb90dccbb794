"""Compact JSON text, fast: the standard library's own C encoder, built once and reused.

``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))`` builds a new encoder on every
call, and ``JSONEncoder.encode`` still builds its C encoder per call; the loop encodes a few
small messages every step (token estimates, loop-detection keys, trace lines), where that
set-up is most of the cost. :func:`compact` and :func:`compact_sorted` return exactly the
text those calls return, and raise what they raise (``TypeError`` for a value JSON cannot
encode, ``ValueError`` for a circular one), from one encoder each. Where the C encoder is
missing (another Python implementation) they fall back to a cached ``json.JSONEncoder``.

:func:`compact_length`, the size of that text (what the characters/4 token estimate counts,
twice a step), is measured on orjson's text, several times faster to make.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

try:
    from json.encoder import c_make_encoder, encode_basestring
except ImportError:  # pragma: no cover - no C accelerator
    c_make_encoder = None

_DEFAULT = json.JSONEncoder().default  # raises TypeError: "Object of type X is not JSON ..."


def _encoder(sort_keys: bool) -> Callable[[Any], str]:
    slow = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)
    if c_make_encoder is None:  # pragma: no cover
        return slow.encode
    # markers=None: no per-call state, so one encoder serves every call and thread; a
    # circular value then recurses instead, and the slow path reports it as json.dumps does
    fast = c_make_encoder(None, _DEFAULT, encode_basestring, None, ":", ",", sort_keys,
                          False, True)

    def encode(obj: Any) -> str:
        if isinstance(obj, str):
            return encode_basestring(obj)
        try:
            return "".join(fast(obj, 0))
        except RecursionError:
            return slow.encode(obj)

    return encode


#: ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))``, fast.
compact = _encoder(sort_keys=False)
#: The same with ``sort_keys=True``.
compact_sorted = _encoder(sort_keys=True)


#: orjson hands these to ``default`` (none given: ``TypeError``), so they go the standard
#: library's way: dataclasses and dates (orjson would write them, json.dumps refuses them)
#: and subclasses of str, int, dict and list (json.dumps writes them its own way).
_AS_JSON_DUMPS = (orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
                  | orjson.OPT_PASSTHROUGH_SUBCLASS)


def compact_length(obj: Any) -> int:
    """``len(compact(obj))``, measured on orjson's compact text (UTF-8, counted in characters).

    The two texts are the same but for a few numbers: orjson writes a float between 1e-9
    and 1e-4 in full (``0.00001``, not ``1e-05``) or with a one-digit exponent (``1e-7``,
    not ``1e-07``), and NaN or an infinity as ``null``. What orjson refuses (an integer
    past 64 bits, a key that is not a string, a lone surrogate) and what it would write
    but json.dumps does not (:data:`_AS_JSON_DUMPS`) is measured on :func:`compact`, which
    raises what json.dumps raises.
    """
    try:
        text = orjson.dumps(obj, option=_AS_JSON_DUMPS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return len(compact(obj))
    return len(text) if text.isascii() else len(text.decode("utf-8"))


def compact_json(value: Any) -> str:
    """``value`` as one line of JSON for messages and tables (its ``repr`` if not JSON)."""
    try:
        return json.dumps(value, separators=(", ", ": "), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
