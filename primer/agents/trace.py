"""Traces: a run written down as it happens, and read back as a table.

"You cannot debug or evaluate an agent you cannot replay." ``run_agent(..., trace=PATH)``
writes one JSON object per line (JSON Lines) to ``PATH`` *as the run goes*: each line is
written and flushed before the loop moves on, so a run that crashes or is killed keeps every
event before the crash.

The format (``primer-trace``, version :data:`FORMAT_VERSION`)
-------------------------------------------------------------
Every line holds ``event`` (its kind), ``seq`` (0, 1, 2, ... in writing order) and ``t``
(wall seconds since the trace was opened), plus the fields of its kind:

``run_start`` (always the first line)
    ``format`` (``"primer-trace"``), ``version`` (an int), ``primer_version``, ``task`` (the
    user's task), ``system`` (the system prompt), ``config`` (every :class:`AgentConfig`
    setting, see ``AgentConfig.to_dict``), ``tools`` (the tool definitions offered:
    ``name``, ``description``, ``input_schema``) and, for a run that continued a
    conversation, ``history`` (the messages sent before the task, as repaired).
``model_call`` (one per model call)
    ``step`` (from 1), ``prompt_estimate`` (the request's size in tokens, characters/4),
    ``reply`` (``content`` blocks, ``stop_reason``, ``usage``, ``model``) and ``latency_s``.
``tool_execution`` (one per tool call that ran)
    ``step``, ``tool_use_id``, ``name``, ``input`` (the arguments), ``content`` (the
    ``tool_result`` text), ``is_error``, ``error_kind``, ``attempts``, ``latency_s``.
``approval`` and any other kind the loop emits
    kept as written (a reader ignores kinds it does not know).
``stop`` (the last line of a finished run)
    ``cause`` (a :class:`StopCause` value), ``detail``, ``summary``, ``usage`` (totals),
    ``cost_usd`` and ``steps`` (model calls).

A trace without a ``stop`` line is the record of a run that did not finish (killed, or the
process crashed). A last line cut off mid-write is reported and dropped; every line before
it is kept.

Secrets never reach the file: :func:`redact` replaces values that look like API keys
(``sk-ant-...``, ``sk-...``, ``Bearer ...``) and every value stored under a key such as
``api_key``, ``authorization``, ``x-api-key`` or ``headers`` with ``"[REDACTED]"``. The
writer encodes each line with orjson, looks for any trace of a secret in it (the words of
:data:`SECRET_HINTS`, case ignored) and walks the event with :func:`redact` only when it
finds one.

Reading
-------
:func:`load_trace` reads and validates a file into a :class:`Trace` (``trace.rows()``,
``trace.table()``: one row per step). :mod:`primer.agents.replay` runs a recorded run again
offline and reports where it differs.
"""

from __future__ import annotations

import json
import os
import re
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from .config import AgentConfig
from .cost import cost_usd
from .history import with_new_turn
from .jsontext import compact
from .llm import Reply, Usage
from .messages import Message, assistant_message, tool_result_block, user_message
from .result import format_trace_table, step_row
from .state import EventSink, StopCause

FORMAT_NAME = "primer-trace"
#: The trace format's version, written in ``run_start``; a reader refuses newer versions.
FORMAT_VERSION = 1

REDACTED = "[REDACTED]"

#: Keys whose values are always replaced (compared lower-case, ``-`` read as ``_``).
SECRET_KEYS = frozenset({
    "api_key", "apikey", "anthropic_api_key", "openai_api_key", "authorization",
    "proxy_authorization", "x_api_key", "headers", "default_headers", "cookie", "set_cookie",
    "password", "secret", "client_secret", "access_token", "refresh_token", "auth_token",
})

#: Strings that look like credentials: Anthropic (``sk-ant-...``) and OpenAI-style
#: (``sk-...``, ``sk-proj-...``) API keys, also glued to a name or URL-encoded after ``=``;
#: bearer tokens (the scheme name in any case, as HTTP allows); AWS access key ids.
SECRET_PATTERN = re.compile(
    r"(?:(?<![A-Za-z])|(?<=%3D)|(?<=%3d))sk-[A-Za-z0-9_\-]{16,}"
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


_HINTS = re.compile(b"|".join(re.escape(w.encode()) for w in SECRET_HINTS))


def may_hold_secret(line: bytes) -> bool:
    """Whether an encoded ``line`` holds any of :data:`SECRET_HINTS` (case ignored): a cheap
    superset test of what :func:`redact` would change in it (one scan of the lowered line;
    a case-insensitive pattern would cost ten times more)."""
    return _HINTS.search(line.lower()) is not None


def _line(record: dict[str, Any]) -> bytes:
    """One trace line (UTF-8, newline included), written by orjson: compact JSON in well
    under a microsecond. NaN and infinities, which JSON cannot hold, become ``null``. What
    orjson refuses (a lone surrogate such as a file name decoded with ``os.fsdecode``, an
    integer past 64 bits, a key that is not a string) is written by the standard library
    instead, a lone surrogate as a ``\\udcXX`` escape that JSON reads back unchanged."""
    try:
        return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return compact(record).encode("utf-8", "backslashreplace") + b"\n"


PathLike = str | os.PathLike[str]
_RESERVED = frozenset({"event", "seq", "t"})


def redact(value: Any) -> Any:
    """A copy of ``value`` (any JSON-ready value) with secrets replaced by ``"[REDACTED]"``.

    Every value under a key in :data:`SECRET_KEYS` is replaced whole, whatever its type;
    inside any other string, each match of :data:`SECRET_PATTERN` is replaced, and so is the
    value of each :data:`SECRET_ASSIGNMENT` (``"api_key": "..."`` in JSON text, ``api_key=``
    in a URL, an ``Authorization:`` header line). Dicts, lists
    and tuples are walked; other values are returned as they are.
    """
    if isinstance(value, str):
        value = SECRET_PATTERN.sub(REDACTED, value)
        return SECRET_ASSIGNMENT.sub(lambda m: m.group(1) + REDACTED, value)
    if isinstance(value, dict):
        return {k: (REDACTED if _is_secret_key(k) else redact(v)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def _is_secret_key(key: Any) -> bool:
    return isinstance(key, str) and key.lower().replace("-", "_") in SECRET_KEYS


class TraceWriter:
    """An ``on_event`` sink that appends each event to a JSON Lines file and flushes it.

    ``TraceWriter(path)`` creates ``path`` (and its folder), empty, and keeps it open.
    Called as ``writer(kind, data)``, it writes one line ``{"event": kind, "seq", "t",
    **data}`` with secrets removed by :func:`redact`, and flushes it, so nothing waits in a
    buffer if the process dies. The file is closed after the ``stop`` event, by
    :meth:`close`, or when the writer is garbage-collected; an event after that reopens it
    to append. ``forward``, if given, receives every event too (unredacted), so a trace and
    another sink can watch the same run. ``fsync=True`` also asks the OS to put each line on
    disk (slower; survives a machine crash, not just a process crash).

    Raises ``OSError`` when the file cannot be created, and ``TypeError`` naming the event
    when an event holds a value JSON cannot encode.
    """

    def __init__(self, path: PathLike, *, forward: EventSink | None = None,
                 fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.forward = forward
        self.fsync = fsync
        self.seq = 0
        self._start = time.monotonic()
        self._file: IO[bytes] | None = None
        self._open("wb")

    def _open(self, mode: str) -> IO[bytes]:
        # unbuffered: each line goes to the OS in one write, nothing waits in a buffer
        f = self.path.open(mode, buffering=0)
        self._file = f
        self._closer = weakref.finalize(self, f.close)
        return f

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        record: dict[str, Any] = {"event": kind, "seq": self.seq,
                                  "t": round(time.monotonic() - self._start, 6)}
        if kind == "run_start":
            record.update(format=FORMAT_NAME, version=FORMAT_VERSION,
                          primer_version=_primer_version())
        if _RESERVED.isdisjoint(data):
            record.update(data)
        else:
            record.update({k: v for k, v in data.items() if k not in _RESERVED})
        try:
            line = _line(record)
            if may_hold_secret(line):
                line = _line(redact(record))
        except (TypeError, ValueError) as e:
            raise TypeError(f"trace event {kind!r} holds a value JSON cannot encode: {e}") from e
        f = self._file or self._open("ab")
        written = f.write(line)
        while written < len(line):  # a raw write may take less than all (a signal)
            written += f.write(memoryview(line)[written:])
        if self.fsync:
            os.fsync(f.fileno())
        self.seq += 1
        if kind == "stop":
            self.close()
        if self.forward is not None:
            self.forward(kind, data)

    def close(self) -> None:
        """Close the file (the next event, if any, reopens it to append)."""
        if self._file is not None:
            self._file = None
            self._closer()


def _primer_version() -> str:
    from primer import __version__
    return __version__


# ---------------------------------------------------------------- reading


class TraceError(ValueError):
    """A trace file that cannot be read: the message names the file, the line and the fix."""


@dataclass
class TraceStep:
    """One model call of a recorded run: its ``model_call`` event and its tool executions."""

    index: int
    call: dict[str, Any]
    executions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def reply(self) -> Reply:
        """The recorded model reply."""
        return Reply.from_dict(self.call["reply"])


@dataclass
class Trace:
    """A trace read back by :func:`load_trace`.

    ``events`` are the lines as dicts, in order; ``notes`` say what the reader had to
    leave out (a torn last line) or what is missing (no ``stop`` line).
    """

    path: Path | None
    events: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    @property
    def run_start(self) -> dict[str, Any]:
        """The ``run_start`` event."""
        return self.events[0]

    @property
    def task(self) -> str:
        """The task the run was given."""
        return self.run_start.get("task", "")

    @property
    def history(self) -> list[Message]:
        """The conversation the run continued (``[]`` for a run that started afresh)."""
        return self.run_start.get("history") or []

    @property
    def system(self) -> str:
        """The system prompt of the run."""
        return self.run_start.get("system", "")

    @property
    def config(self) -> AgentConfig:
        """The run's limits and prices as an :class:`AgentConfig`."""
        return AgentConfig.from_dict(self.run_start.get("config", {}))

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tool definitions the model was offered."""
        return self.run_start.get("tools", [])

    @property
    def stop(self) -> dict[str, Any] | None:
        """The ``stop`` event, or ``None`` when the run did not finish."""
        return next((e for e in reversed(self.events) if e["event"] == "stop"), None)

    @property
    def complete(self) -> bool:
        """Whether the trace ends with a ``stop`` event."""
        return self.stop is not None

    @property
    def stop_cause(self) -> StopCause | None:
        """The recorded stop cause, or ``None`` when the run did not finish."""
        return StopCause(self.stop["cause"]) if self.stop else None

    @property
    def final_text(self) -> str | None:
        """The answer, when the run ended with ``end_turn`` (else ``None``)."""
        steps = self.steps()
        if self.stop_cause is not StopCause.END_TURN or not steps:
            return None
        return steps[-1].reply.text

    def steps(self) -> list[TraceStep]:
        """The model calls with the tool executions that followed each, in order."""
        steps: dict[int, TraceStep] = {}
        for e in self.events:
            if e["event"] == "model_call":
                steps[e["step"]] = TraceStep(e["step"], e)
            elif e["event"] == "tool_execution" and e.get("step") in steps:
                steps[e["step"]].executions.append(e)
        return list(steps.values())

    def replies(self) -> list[Reply]:
        """The recorded model replies in order (what :class:`ReplayLLM` plays back)."""
        return [s.reply for s in self.steps()]

    def messages(self) -> list[Message]:
        """The message list rebuilt from the record: history, task, replies, tool results."""
        msgs: list[Message] = with_new_turn(self.history, self.task)
        steps = self.steps()
        paused = self.stop_cause is StopCause.AWAITING_APPROVAL
        for s in steps:
            msgs.append(assistant_message(s.call["reply"]["content"]))
            if s.executions and not (paused and s is steps[-1]):  # a pause ends on the reply
                msgs.append(user_message([tool_result_block(x["tool_use_id"], x["content"],
                                                            x["is_error"])
                                          for x in s.executions]))
        return msgs

    def rows(self) -> list[dict[str, Any]]:
        """One dict per step (:func:`~primer.agents.result.step_row`, the same columns as a
        run's own table), plus ``request``: the number of messages sent and the prompt's
        estimated size (tokens). ``tokens so far`` and ``cost so far USD`` are running
        totals at the run's prices (including any failed model attempts that were retried,
        from ``model_retry`` events). A run that paused for approval lists, on its last
        step, the calls that ran and those awaiting approval.
        """
        prices = self.config.prices
        retried: dict[int, Usage] = {}  # usage of failed model attempts that were retried
        for e in self.events:
            if e["event"] == "model_retry" and e.get("usage"):
                retried[e["step"]] = retried.get(e["step"], Usage()) + Usage.from_dict(
                    e["usage"])
        total, cost, n_messages = Usage(), 0.0, 1
        rows = []
        steps = self.steps()
        paused_on = len(steps) if self.stop_cause is StopCause.AWAITING_APPROVAL else None
        for s in steps:
            reply = s.reply
            for usage in (retried.get(s.index, Usage()), reply.usage):
                total = total + usage
                cost += cost_usd(usage, prices)
            rows.append(step_row(
                s.index, reply, s.executions, total.total_tokens, cost,
                unrun="awaiting approval" if s.index == paused_on else "not run",
                request=f"{n_messages} msgs, ~{s.call.get('prompt_estimate', 0):,} tok"))
            n_messages += 1 + (1 if s.executions else 0)
        return rows

    def table(self, width: int = 60) -> str:
        """The trace as text for a terminal: task, tools, one row per step, the stop."""
        names = ", ".join(t.get("name", "?") for t in self.tools) or "(none)"
        lines = [f"task: {self.task}", f"tools offered: {names}",
                 format_trace_table(self.rows(), width=width)]
        stop = self.stop
        if stop is None:
            lines.append("no stop event: the run did not finish (killed or crashed)")
        else:
            lines.append(f"stop cause: {stop['cause']}")
            lines.append(str(stop.get("summary", "")))
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)

    def __repr__(self) -> str:
        cause = self.stop["cause"] if self.stop else "unfinished"
        return (f"Trace({str(self.path) if self.path else '<memory>'!r}, "
                f"{len(self.steps())} steps, stop={cause})")


def load_trace(path: PathLike) -> Trace:
    """Read and check a trace file written by :class:`TraceWriter`.

    Returns a :class:`Trace`. A last line that is not valid JSON (the process died while
    writing it) is dropped with a note in ``trace.notes``; every line before it is kept.

    Raises :class:`TraceError` when the file is missing or empty, when a line other than
    the last is not a JSON object with an ``event``, when the first line is not a
    ``run_start`` of the ``primer-trace`` format, or when its version is newer than
    :data:`FORMAT_VERSION`.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceError(f"{p}: no such trace file. Record one with run_agent(..., "
                         f"trace='{p}') or `python -m primer demo NAME --trace {p}`.") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise TraceError(f"{p} is empty: the run never wrote its run_start line.")
    events: list[dict[str, Any]] = []
    notes: list[str] = []
    for n, line in enumerate(lines, start=1):
        try:
            event = json.loads(line)
            problem = None if isinstance(event, dict) and isinstance(
                event.get("event"), str) else "not a JSON object with an 'event' field"
        except json.JSONDecodeError as e:
            event, problem = None, (f"not valid JSON: {e.msg.removesuffix(' at')} "
                                     f"at column {e.colno}")
        if problem is None:
            events.append(event)
            continue
        if n == len(lines) and n > 1:
            notes.append(f"line {n} is torn ({problem}): the process probably died while "
                         f"writing it; kept the {len(events)} events before it")
            break
        raise TraceError(f"{p}, line {n}: {problem}. A trace holds one JSON object per line, "
                         f"as run_agent(..., trace=PATH) writes it.")
    _check_header(p, events[0])
    trace = Trace(p, events, notes)
    if not trace.complete:
        notes.append("no stop event: the run did not finish (killed or crashed); the steps "
                     "shown are the ones it recorded")
    return trace


def _check_header(p: Path, first: dict[str, Any]) -> None:
    if first.get("event") != "run_start" or first.get("format") != FORMAT_NAME:
        raise TraceError(f"{p}, line 1: expected a run_start event of the {FORMAT_NAME!r} "
                         f"format, found event {first.get('event')!r} with format "
                         f"{first.get('format')!r}. Is this a trace written by run_agent?")
    version = first.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise TraceError(f"{p}, line 1: trace format version {version!r} is not supported "
                         f"(this primer reads versions up to {FORMAT_VERSION}); upgrade "
                         f"primer to read it.")
