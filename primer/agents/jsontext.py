"""Compact JSON text, fast: the standard library's own C encoder, built once and reused.

``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))`` builds a new encoder on every
call, and ``JSONEncoder.encode`` still builds its C encoder per call; the loop encodes a few
small messages every step (token estimates, loop-detection keys, trace lines), where that
set-up is most of the cost. :func:`compact` and :func:`compact_sorted` return exactly the
text those calls return, and raise what they raise (``TypeError`` for a value JSON cannot
encode, ``ValueError`` for a circular one), from one encoder each. Where the C encoder is
missing (another Python implementation) they fall back to a cached ``json.JSONEncoder``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

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
