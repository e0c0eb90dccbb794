"""Redaction: the one function that takes secrets out of anything the primer writes down.

Traces (:mod:`primer.harness.tracing.trace`), their OpenTelemetry export
(:mod:`primer.harness.tracing.otel`),
replay's comparison with a record, and the requests :class:`~primer.providers.fake_server.
FakeModelServer` records all pass what they keep through :func:`redact`, so an API key that
reaches a tool input, a result, a header or a dict key is never written to a file. A key
broken across lines (a raw line break, or one escaped as ``\\n`` in JSON text, with any
indentation after it), or across the strings of a list (chunks), is found as well.
"""

from __future__ import annotations

import bisect
import itertools
import re
from typing import Any

REDACTED = "[REDACTED]"

#: Keys whose values are always replaced (compared lower-case, ``-`` read as ``_``).
SECRET_KEYS = frozenset({
    "api_key", "apikey", "anthropic_api_key", "openai_api_key", "authorization",
    "proxy_authorization", "x_api_key", "headers", "default_headers", "cookie", "set_cookie",
    "password", "secret", "client_secret", "access_token", "refresh_token", "auth_token",
})

#: Strings that look like credentials: Anthropic (``sk-ant-...``) and OpenAI project
#: (``sk-proj-...``) keys anywhere, even glued to letters (``tokensk-ant-...``) or broken
#: across lines (the key characters at the start of each following line go with it); other
#: ``sk-...`` keys not preceded by a letter (so ``task-...`` words survive), also URL-encoded
#: after ``=``; bearer tokens (the scheme name in any case, as HTTP allows); AWS access key ids.
SECRET_PATTERN = re.compile(
    r"sk-(?:ant|proj|svcacct|admin)-[A-Za-z0-9_\-]{12,}(?:\r?\n[A-Za-z0-9_\-]+)*"
    r"|(?:(?<![A-Za-z])|(?<=%3D)|(?<=%3d))sk-[A-Za-z0-9_\-]{16,}"
    r"|(?i:\bbearer)\s+[A-Za-z0-9._~+/\-]{16,}=*"
    r"|\bAKIA[0-9A-Z]{16}\b")

#: A secret-looking key followed by its value inside text (JSON text, a query string, a
#: header line): the value is replaced, the key kept.
SECRET_ASSIGNMENT = re.compile(
    r"(?i)(\b(?:x[_-]api[_-]key|api[_-]?key|authorization|password|passwd|secret|"
    r"client[_-]secret|access[_-]token|refresh[_-]token|auth[_-]token)\b\"?\s*(?:[:=]|%3D)"
    r"\s*\"?)([^\"\s,&;}]+)")

#: Every word that a match of :data:`SECRET_PATTERN`, :data:`SECRET_ASSIGNMENT` or a key of
#: :data:`SECRET_KEYS` must contain, lower-case: a line holding none of them (case ignored)
#: needs no redaction, so the writer skips the walk of :func:`redact` for it.
SECRET_HINTS = ("sk-", "bearer", "akia", "api",  # api_key, api-key, apikey, x-api-key
                "auth",  # authorization, auth_token, proxy_authorization
                "passw", "secret", "access_token", "access-token", "refresh_token",
                "refresh-token", "headers", "cookie")


#: The four letters outside ASCII that a case-insensitive pattern matches to an ASCII letter
#: (``İ`` and ``ı`` match ``i``, ``ſ`` matches ``s``, the Kelvin sign ``K`` matches ``k``,
#: and ``str.lower`` turns it into ``k``): lowering a line's bytes leaves them as they are,
#: so a line holding one of them (UTF-8) is looked at as if it held a hint.
FOLDED_LETTERS = ("\u0130", "\u0131", "\u017f", "\u212a")

_HINTS = re.compile(b"|".join(re.escape(w.encode()) for w in SECRET_HINTS + FOLDED_LETTERS))


#: Where a secret may be broken in a line of JSON text: a line break escaped as ``\\n`` or
#: ``\\r`` (once or more) and the indentation after it, or the end of one string of a list
#: and the start of the next (``", "``).
_JSON_BREAK = re.compile(rb'(?:\\+[nr])+[ \t]*|",\s*"')


def may_hold_secret(line: bytes) -> bool:
    """Whether a UTF-8 ``line`` holds any of :data:`SECRET_HINTS` (ASCII case ignored) or
    one of :data:`FOLDED_LETTERS`, also once its escaped line breaks and the seams between
    the strings of a list are taken out: a cheap superset test of what :func:`redact` would
    change in it (one scan of the lowered line, a second only for a line with a break or a
    list of strings; a case-insensitive pattern would cost ten times more)."""
    low = line.lower()
    if _HINTS.search(low) is not None:
        return True
    return (b"\\" in low or b'"' in low) and \
        _HINTS.search(_JSON_BREAK.sub(b"", low)) is not None


def redact(value: Any) -> Any:
    """A copy of ``value`` (any JSON-ready value) with secrets replaced by ``"[REDACTED]"``.

    Every value under a key in :data:`SECRET_KEYS` is replaced whole, whatever its type;
    inside any other string, each match of :data:`SECRET_PATTERN` is replaced, and so is the
    value of each :data:`SECRET_ASSIGNMENT` (``"api_key": "..."`` in JSON text, ``api_key=``
    in a URL, an ``Authorization:`` header line). Dict keys are strings too: a key that holds
    a secret is redacted the same way (``"[REDACTED]"``, then ``"[REDACTED] 2"``, ... so no
    entry is lost). Dicts, lists and tuples are walked; other values are returned as they
    are.
    """
    if isinstance(value, str):
        return _redact_text(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            clean = redact(v) if not _is_secret_key(k) else REDACTED
            if isinstance(k, str):
                k = redact(k)
                if k in out:
                    k = next(f"{k} {n}" for n in itertools.count(2) if f"{k} {n}" not in out)
            out[k] = clean
        return out
    if isinstance(value, list | tuple):
        items = list(value)
        strings = [k for k, v in enumerate(items) if isinstance(v, str)]
        if len(strings) > 1:  # a key may be cut across chunks: look at them joined
            for k, text in zip(strings, _redact_broken([items[k] for k in strings]),
                               strict=True):
                items[k] = text
        return [redact(v) for v in items]
    return value


#: The length of an Anthropic API key as the Console issues them (``sk-ant-api03-`` and 95
#: characters): an ``sk-ant-`` piece shorter than this at the end of a chunk goes on in the
#: next chunk.
ANTHROPIC_KEY_CHARS = 108

#: A line break inside a string (raw, or escaped as in JSON text, once or more) and the
#: indentation after it.
_BREAK = re.compile(r"(?:\\+[nr]|[\r\n])+[ \t]*")


def _redact_text(text: str) -> str:
    if "\n" in text or "\r" in text or "\\" in text:
        text = _redact_broken([text])[0]
    text = SECRET_PATTERN.sub(REDACTED, text)
    return SECRET_ASSIGNMENT.sub(lambda m: m.group(1) + REDACTED, text)


def _redact_broken(parts: list[str]) -> list[str]:
    """``parts`` with every key that :data:`SECRET_PATTERN` finds once the line breaks in
    them (:data:`_BREAK`) and the seams between them are taken out replaced: the first piece
    of a key by ``[REDACTED]``, its other pieces removed. A key is followed into the next
    part only from a piece too short to be a key by itself, or an ``sk-ant-`` piece shorter
    than :data:`ANTHROPIC_KEY_CHARS`."""
    starts: list[int] = []  # where each kept segment starts in the joined text
    where: list[tuple[int, int, int]] = []  # each segment: (part, start, end) in that part
    joined: list[str] = []
    size = 0
    for k, part in enumerate(parts):
        pos = 0
        for m in itertools.chain(_BREAK.finditer(part), [None]):
            end = len(part) if m is None else m.start()
            starts.append(size)
            where.append((k, pos, end))
            joined.append(part[pos:end])
            size += end - pos
            pos = len(part) if m is None else m.end()
    cuts: list[tuple[int, int, int, bool]] = []  # (part, start, end, first piece of a key)
    for m in SECRET_PATTERN.finditer("".join(joined)):
        pieces: list[tuple[int, int, int, bool]] = []
        for seg in range(bisect.bisect_right(starts, m.start()) - 1, len(starts)):
            if starts[seg] >= m.end():
                break
            k, a, b = where[seg]
            lo, hi = a + max(m.start() - starts[seg], 0), a + min(m.end() - starts[seg], b - a)
            if lo < hi:
                pieces.append((k, lo, hi, not pieces))
        k, lo, hi, _ = pieces[0]
        if pieces[-1][0] != k and SECRET_PATTERN.fullmatch(parts[k], lo, hi) and not (
                parts[k].startswith("sk-ant-", lo) and hi - lo < ANTHROPIC_KEY_CHARS):
            # a whole key at the end of one string of a list: what the next string starts
            # with is another value, not the rest of the key (that is looked for only after
            # a piece too short to be a key, or shorter than an Anthropic key)
            pieces = [p for p in pieces if p[0] == k]
        cuts.extend(pieces)
    out = list(parts)
    for k, lo, hi, first in sorted(cuts, reverse=True):
        out[k] = out[k][:lo] + (REDACTED if first else "") + out[k][hi:]
    return out


def _is_secret_key(key: Any) -> bool:
    return isinstance(key, str) and key.lower().replace("-", "_") in SECRET_KEYS
