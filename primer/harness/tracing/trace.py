"""Traces: a run written down as it happens, and read back as a table.

"You cannot debug or evaluate an agent you cannot replay." ``run_agent(..., trace=PATH)``
writes one JSON object per line (JSON Lines) to ``PATH`` *as the run goes*: each line is
written and flushed before the loop moves on, so a run that crashes or is killed keeps every
event before the crash.

The format (``primer-trace``, version :data:`FORMAT_VERSION`)
-------------------------------------------------------------
Every line holds ``event`` (its kind), ``seq`` (0, 1, 2, ... in writing order) and ``t``
(wall seconds since the trace was opened, to the microsecond), plus the fields of its kind:

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

Secrets never reach the file: :func:`~primer.harness.tracing.redaction.redact` replaces values
(and dict keys) that look like API keys (``sk-ant-...``, ``sk-...``, ``Bearer ...``) and every
value stored under a key such as ``api_key``, ``authorization``, ``x-api-key`` or
``headers`` with ``"[REDACTED]"``. The writer encodes each line with orjson, looks for any
trace of a secret in it (:func:`~primer.harness.tracing.redaction.may_hold_secret`) and walks the
event with ``redact`` only when it finds one. In a ``model_call`` or ``tool_execution``
event of the shape the loop writes, it looks only at what came from outside the loop (the
reply; the call's id, name, input, result, error kind and attempt records): every other
field is a number the loop counted or measured, which can hold no secret.

Reading
-------
:func:`load_trace` reads and validates a file into a :class:`Trace` (``trace.rows()``,
``trace.table()``: one row per step). :mod:`primer.harness.tracing.replay` runs a recorded run again
offline and reports where it differs.
"""

from __future__ import annotations

import json
import os
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from primer.harness.files import UnreadableFile, check_writable, read_text
from primer.loop.config import AgentConfig
from primer.loop.messages import (
    Message,
    assistant_message,
    compact,
    tool_result_block,
    transcript_content,
    user_message,
    with_new_turn,
)
from primer.loop.model import EventSink, Reply, Usage, cost_usd
from primer.loop.result import format_trace_table, step_row
from primer.loop.state import StopCause
from primer.loop.text import JSONRefused, parse_json, safe_repr

from .redaction import may_hold_secret, redact
from .trace_check import TraceError, check_events

FORMAT_NAME = "primer-trace"
#: The trace format's version, written in ``run_start``; a reader refuses newer versions.
#: Version 2 writes what the loop decided about a reply (``refused``, ``received``) beside
#: the ``reply`` of a ``model_call`` event; version 1 wrote them inside it (still read).
FORMAT_VERSION = 2

def _line(record: object) -> bytes:
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

# What the writer looks for secrets in. Every field of a step's two events is either
# something that came from outside the loop (the model's reply; a tool call's id, name,
# input, result, error kind and attempt records) or a number the loop counted or measured
# itself (the step, the prompt estimate, seconds, attempts, token counts). A number holds no
# secret, and redact() changes nothing in it, so when an event is a plain dict (not a
# subclass, which could answer len() and lookups otherwise than orjson reads it) with exactly
# the fields the loop writes (each looked up below, and the count of fields matches) and
# each counted field holds a number, only the outside part is looked at (a fraction of the
# line). Any other event, or one of another shape, is looked at whole.


def _model_call_outside(data: dict[str, Any]) -> tuple[Any, ...] | None:
    try:
        reply = data["reply"]
        usage = reply["usage"]
        if not (type(reply) is dict and type(usage) is dict and len(reply) == 4
                and len(data) == 4 + ("received" in data) + ("refused" in data)
                and type(data["step"]) is int
                and type(data["prompt_estimate"]) is int and type(data["latency_s"]) is float
                and len(usage) == 4 and type(usage["input_tokens"]) is int
                and type(usage["output_tokens"]) is int
                and type(usage["cache_creation_input_tokens"]) is int
                and type(usage["cache_read_input_tokens"]) is int):
            return None
        return (reply["content"], reply["stop_reason"], reply["model"], data.get("received"),
                data.get("refused"))
    except (KeyError, TypeError):  # a field missing, or not a dict where one belongs
        return None


def _tool_execution_outside(data: dict[str, Any]) -> tuple[Any, ...] | None:
    try:
        if not (len(data) == 10 and type(data["step"]) is int
                and type(data["is_error"]) is bool and type(data["latency_s"]) is float
                and type(data["attempts"]) is int):
            return None
        return (data["tool_use_id"], data["name"], data["input"], data["content"],
                data["error_kind"], data["attempt_log"])
    except KeyError:
        return None


_OUTSIDE = {"model_call": _model_call_outside, "tool_execution": _tool_execution_outside}


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

    Raises ``OSError`` when the file cannot be created,
    :class:`~primer.harness.files.UnreadableFile` (a ``ValueError``) when ``path`` is a FIFO,
    a device, a directory or a symbolic link to nothing, and ``TypeError`` naming the event
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
        check_writable(self.path)  # a FIFO would block the run; a dangling link write elsewhere
        # unbuffered: each line goes to the OS in one write, nothing waits in a buffer
        f = self.path.open(mode, buffering=0)
        self._file = f
        self._closer = weakref.finalize(self, f.close)
        return f

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        # t to the microsecond (round(x, 6) costs a decimal conversion; this, an integer)
        t = round((time.monotonic() - self._start) * 1e6) / 1e6
        outside = _OUTSIDE.get(kind) if type(kind) is str and type(data) is dict else None
        part = outside(data) if outside is not None else None
        if part is not None:  # a step's event as the loop writes it: no reserved field in it
            record: dict[str, Any] = {"event": kind, "seq": self.seq, "t": t, **data}
        else:
            record = {"event": kind, "seq": self.seq, "t": t}
            if kind == "run_start":
                record.update(format=FORMAT_NAME, version=FORMAT_VERSION,
                              primer_version=_primer_version())
            record.update({k: v for k, v in data.items() if k not in _RESERVED})
        try:
            line = _line(record)
            if may_hold_secret(line if part is None else _line(part)):
                # redact what the line holds (orjson writes dataclasses, enums, subclasses
                # of dict as their JSON; redact sees them as that JSON too)
                line = _line(redact(json.loads(line)))
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


@dataclass
class TraceStep:
    """One model call of a recorded run: its ``model_call`` event and its tool executions."""

    index: int
    call: dict[str, Any]
    executions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def reply(self) -> Reply:
        """The recorded model reply, as the loop took it (its transcript form)."""
        return Reply.from_dict(self.call["reply"])

    @property
    def sent(self) -> Reply:
        """The reply as the model sent it: the content before the loop's boundary repaired
        it (the event's ``received``), when it had to."""
        reply = self.reply
        received = self.call.get("received", self.call["reply"].get("received"))  # (version 1)
        if received is None:
            return reply
        content = list(received) if isinstance(received, list) else received
        return Reply(content, reply.stop_reason, reply.usage, reply.model)


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
        """The recorded model replies in order, as the loop took them."""
        return [s.reply for s in self.steps()]

    def sent_replies(self) -> list[Reply]:
        """The recorded model replies in order, as the model sent them (what
        :class:`~primer.harness.tracing.replay.ReplayLLM` plays back, so a replayed run
        meets the same repairs and refusals)."""
        return [s.sent for s in self.steps()]

    def messages(self) -> list[Message]:
        """The message list rebuilt from the record: history, task, replies, tool results."""
        msgs: list[Message] = with_new_turn(self.history, self.task)
        steps = self.steps()
        paused = self.stop_cause is StopCause.AWAITING_APPROVAL
        for s in steps:
            msgs.append(assistant_message(transcript_content(s.call["reply"]["content"])))
            if s.executions and not (paused and s is steps[-1]):  # a pause ends on the reply
                msgs.append(user_message([tool_result_block(x["tool_use_id"], x["content"],
                                                            x["is_error"])
                                          for x in s.executions]))
        return msgs

    def rows(self) -> list[dict[str, Any]]:
        """One dict per step (:func:`~primer.loop.result.step_row`, the same columns as a
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
                request=f"{n_messages} msg{'' if n_messages == 1 else 's'}, "
                        f"~{s.call.get('prompt_estimate', 0):,} tok"))
            n_messages += 1 + (1 if s.executions else 0)
        return rows

    def table(self, width: int = 60) -> str:
        """The trace as text for a terminal: task, tools, one row per step, the stop."""
        names = ", ".join(t.get("name", "?") for t in self.tools) or "(none)"
        lines = [f"task: {self.task}", f"tools offered: {names}",
                 format_trace_table(self.rows(), width=width)]
        stop = self.stop
        if stop is None:
            if not any(n.startswith("no stop event") for n in self.notes):  # (else said below)
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

    The file is read with :func:`~primer.harness.files.read_bounded` (a regular file of
    bounded size: a FIFO, a device or a directory is refused) and each line parsed with
    :func:`~primer.loop.text.parse_json` (bounded nesting and integers). A last line
    cut off mid-write (no newline at the end of the file) is dropped with a note in
    ``trace.notes``; every line before it is kept. A trace without a ``stop`` line gets a
    note too: it reads like a run that was killed, whether it was or the end was cut off.

    Raises :class:`TraceError` naming the file, the line and what is wrong, when the file is
    missing, unreadable, not UTF-8, empty, or when a line is not a JSON event of this format
    (:func:`check_record`), is out of sequence (``seq`` numbers each line from 0, so a line
    removed from the middle is noticed), or the first line is not a ``run_start`` of a
    version this primer reads.
    """
    p = Path(path)
    try:
        text = read_text(p)
    except UnreadableFile as e:
        if e.missing:
            raise TraceError(f"{p}: no such trace file. Record one with run_agent(..., "
                             f"trace='{p}') or `python -m primer demo NAME --trace {p}`.") \
                from None
        raise TraceError(f"{p}: {e.reason}; a trace is a UTF-8 JSON Lines file, as "
                         f"run_agent(..., trace=PATH) writes it.") from None
    lines = text.split("\n")
    torn_end = lines.pop() != ""  # a complete file ends with a newline
    if torn_end:
        lines.append(text.rsplit("\n", 1)[-1])
    if not lines or lines == [""]:
        raise TraceError(f"{p} is empty: the run never wrote its run_start line.")
    events: list[dict[str, Any]] = []
    notes: list[str] = []
    for n, line in enumerate(lines, start=1):
        try:
            event = parse_json(line)
            problem = None if isinstance(event, dict) and isinstance(
                event.get("event"), str) else "not a JSON object with an 'event' field"
        except JSONRefused as e:
            event, problem = None, e.reason
        if problem is None and n == len(lines) and torn_end and n > 1:
            problem = "not ended by a newline"
        if problem is None:
            events.append(event)
            continue
        if n == len(lines) and torn_end and n > 1:
            notes.append(f"line {n} is torn ({problem}): the process probably died while "
                         f"writing it; kept the {len(events)} events before it")
            break
        raise TraceError(f"{p}, line {n}: {problem}. A trace holds one JSON object per line, "
                         f"as run_agent(..., trace=PATH) writes it.")
    _check_header(p, events[0])
    for n, ev in enumerate(events):
        if ev.get("seq") != n:
            raise TraceError(f"{p}, line {n + 1}: its seq is {_shown(ev.get('seq'))}, not {n}: "
                             f"a line before it is missing or out of order (lines are numbered "
                             f"from 0 as they are written). The trace was edited or cut; "
                             f"record the run again.")
    trace = check_record(Trace(p, events, notes))
    if not trace.complete:
        notes.append("no stop event: the run did not finish (killed or crashed), or the end of "
                     "the trace was cut off; the steps shown are the ones it recorded")
    return trace


def _check_header(p: Path, first: dict[str, Any]) -> None:
    if first.get("event") != "run_start" or first.get("format") != FORMAT_NAME:
        raise TraceError(f"{p}, line 1: expected a run_start event of the {FORMAT_NAME!r} "
                         f"format, found event {_shown(first.get('event'))} with format "
                         f"{_shown(first.get('format'))}. Is this a trace written by "
                         f"run_agent?")
    version = first.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version > FORMAT_VERSION:
        raise TraceError(f"{p}, line 1: trace format version {_shown(version)} is not "
                         f"supported (this primer reads versions up to {FORMAT_VERSION}); "
                         f"upgrade primer to read it.")


def _shown(value: Any) -> str:
    return safe_repr(value, 40)


def check_record(trace: Trace) -> Trace:
    """``trace`` itself when every event a reader uses has the shape the format gives it
    (:func:`~primer.harness.tracing.trace_check.check_events`); :class:`TraceError` otherwise."""
    check_events(trace.events, str(trace.path) if trace.path else "trace")
    return trace
