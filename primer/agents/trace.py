"""Traces: a run written down as it happens, read back as a table, and replayed offline.

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
    ``name``, ``description``, ``input_schema``).
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
``api_key``, ``authorization``, ``x-api-key`` or ``headers`` with ``"[REDACTED]"``.

Reading and replaying
---------------------
:func:`load_trace` reads and validates a file into a :class:`Trace` (``trace.rows()``,
``trace.table()``: one row per step). :func:`replay` runs the loop again offline from the
recorded model replies (:class:`ReplayLLM`) with the recorded config and the tools you give
it, and reports the first step where the run now differs from the record
(:class:`Divergence`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .agent_loop import (
    AgentConfig,
    AgentResult,
    EventSink,
    StopCause,
    call_cells,
    format_trace_table,
    run_agent,
)
from .cost import cost_usd
from .llm import Reply, Usage
from .messages import Message, assistant_message, tool_result_block, user_message
from .tools import Tool, ToolRegistry

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

PathLike = str | os.PathLike[str]


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

    ``TraceWriter(path)`` creates ``path`` (and its folder), empty. Called as
    ``writer(kind, data)``, it writes one line ``{"event": kind, "seq", "t", **data}`` with
    secrets removed by :func:`redact`, then flushes and closes the file, so nothing waits in a
    buffer if the process dies. ``forward``, if given, receives every event too (unredacted),
    so a trace and another sink can watch the same run. ``fsync=True`` also asks the OS to
    put each line on disk (slower; survives a machine crash, not just a process crash).

    Raises ``OSError`` when the file cannot be created, and ``TypeError`` naming the event
    when an event holds a value JSON cannot encode.
    """

    def __init__(self, path: PathLike, *, forward: EventSink | None = None,
                 fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("", encoding="utf-8")
        self.forward = forward
        self.fsync = fsync
        self.seq = 0
        self._start = time.monotonic()

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        record: dict[str, Any] = {"event": kind, "seq": self.seq,
                                  "t": round(time.monotonic() - self._start, 6)}
        if kind == "run_start":
            record.update(format=FORMAT_NAME, version=FORMAT_VERSION,
                          primer_version=_primer_version())
        record.update({k: v for k, v in data.items() if k not in ("event", "seq", "t")})
        try:
            line = json.dumps(redact(record), ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError) as e:
            raise TypeError(f"trace event {kind!r} holds a value JSON cannot encode: {e}") from e
        # A lone surrogate (e.g. a file name decoded with os.fsdecode) cannot be UTF-8;
        # backslashreplace writes it as a \\udcXX escape, which JSON reads back unchanged.
        with self.path.open("a", encoding="utf-8", errors="backslashreplace") as f:
            f.write(line + "\n")
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        self.seq += 1
        if self.forward is not None:
            self.forward(kind, data)


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
        """The message list rebuilt from the record: task, replies, tool results."""
        msgs: list[Message] = [user_message(self.task)]
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
        """One dict per step: the request, the reply, the tool calls and results, the totals.

        ``request`` is the number of messages sent and the prompt's estimated size (tokens);
        ``in`` / ``out`` are the call's reported prompt and output tokens; ``tokens so far``
        and ``cost so far USD`` are running totals at the run's prices (including any failed
        model attempts that were retried, from ``model_retry`` events). A run that paused for
        approval lists, on its last step, the calls that ran and those awaiting approval.
        """
        prices = self.config.prices
        retried: dict[int, Usage] = {}  # usage of failed model attempts that were retried
        for e in self.events:
            if e["event"] == "model_retry" and e.get("usage"):
                retried[e["step"]] = retried.get(e["step"], Usage()) + Usage.from_dict(
                    e["usage"])
        total, cost, n_messages = Usage(), 0.0, 1
        rows = []
        paused_on = len(self.steps()) if self.stop_cause is StopCause.AWAITING_APPROVAL else None
        for s in self.steps():
            reply = s.reply
            for usage in (retried.get(s.index, Usage()), reply.usage):
                total = total + usage
                cost += cost_usd(usage, prices)
            unrun = "awaiting approval" if s.index == paused_on else "not run"
            calls, results = call_cells(reply.tool_uses, s.executions, unrun)
            if not s.executions:
                results = reply.text or "-"
                if unrun == "not run":
                    asked = ", ".join(str(b.get("name")) for b in reply.tool_uses)
                    calls = f"not run: {asked}" if asked else "-"
            rows.append({"step": s.index,
                         "request": f"{n_messages} msgs, ~{s.call.get('prompt_estimate', 0):,} tok",
                         "stop_reason": reply.stop_reason, "tool calls": calls,
                         "results / answer": results, "in": reply.usage.prompt_tokens,
                         "out": reply.usage.output_tokens, "tokens so far": total.total_tokens,
                         "cost so far USD": f"{cost:.4f}"})
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


# ---------------------------------------------------------------- replay


class ReplayExhausted(RuntimeError):
    """The replayed run asked for a model reply the trace does not hold."""


class ReplayLLM:
    """A model that returns a trace's recorded replies in order, with their recorded usage.

    Raises :class:`ReplayExhausted` when asked for more replies than were recorded; the loop
    turns that into a ``model_error`` stop and :func:`replay` reports it as a divergence.
    """

    def __init__(self, replies: Iterable[Reply]) -> None:
        self.replies = list(replies)
        self.calls = 0
        self.exhausted = False

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int) -> Reply:
        if self.calls >= len(self.replies):
            self.exhausted = True
            raise ReplayExhausted(f"the trace recorded {len(self.replies)} model replies and "
                                  f"the replay asked for reply {self.calls + 1}")
        reply = self.replies[self.calls]
        self.calls += 1
        return Reply(list(reply.content), reply.stop_reason, reply.usage, reply.model)


@dataclass
class Divergence:
    """The first point where a replay differs from its trace.

    ``kind`` is one of ``"tool_result"`` (a call's result or error flag changed),
    ``"missing_tool_call"`` (the record ran a call the replay did not),
    ``"extra_tool_call"`` (the replay ran a call the record did not),
    ``"extra_model_call"`` (the replay needed a reply the trace does not hold),
    ``"stop_cause"``, ``"steps"`` or ``"final_text"``. ``step`` counts model calls from 1.
    """

    kind: str
    step: int
    tool_use_id: str | None = None
    name: str | None = None
    recorded: Any = None
    now: Any = None

    def describe(self) -> str:
        """One sentence for a person: where and how the runs differ."""
        call = f" ({self.name}, {self.tool_use_id})" if self.tool_use_id else ""
        return (f"step {self.step}{call}: {self.kind.replace('_', ' ')} differs; "
                f"recorded {self.recorded!r}, now {self.now!r}")


@dataclass
class ReplayResult:
    """What :func:`replay` found: the new run and the first divergence, if any."""

    trace: Trace
    result: AgentResult
    divergence: Divergence | None

    @property
    def matches(self) -> bool:
        """True when the replay reproduced every tool result, the steps, the stop and answer."""
        return self.divergence is None

    def report(self) -> str:
        """A few lines for a terminal or a notebook."""
        rec = self.trace.stop
        lines = [f"recorded: {len(self.trace.steps())} steps, stop cause "
                 f"{rec['cause'] if rec else '(unfinished)'}",
                 f"replayed: {len(self.result.steps)} steps, stop cause "
                 f"{self.result.stop_cause.value}"]
        if self.divergence is None:
            lines.append("replay matches the trace: same tool results, steps, stop cause and "
                         "final text")
        else:
            lines.append(f"diverged at {self.divergence.describe()}")
        return "\n".join(lines)


def replay(trace: Trace | PathLike, tools: ToolRegistry | Iterable[Tool] = (), *,
           config: AgentConfig | None = None, on_event: EventSink | None = None,
           trace_out: PathLike | None = None) -> ReplayResult:
    """Re-run a recorded run offline and report where it differs from the record.

    The model is a :class:`ReplayLLM` over the recorded replies (with their recorded usage,
    so budgets fire exactly as before); the task, system prompt and config come from the
    trace (``config`` overrides the config); ``tools`` are the tools as they are *now*. Each
    step's tool results are compared with the recorded ones in request order; the first
    mismatch is the :class:`Divergence` (results are compared as the trace would store them,
    secrets redacted). Then the step count, stop cause and final text are
    compared. Needing more model replies than recorded is a divergence, not a crash.

    A run that had a ``checkpoint_dir`` replays with a temporary one, removed afterwards (so a
    pause runs the calls that need no approval, as it did, and the recorded run's checkpoints
    are never touched). A run stopped by the wall clock will not stop there again (replays
    are fast), which shows as a ``stop_cause`` divergence. Raises :class:`TraceError` for an
    unreadable trace.
    """
    if not isinstance(trace, Trace):
        trace = load_trace(trace)
    llm = ReplayLLM(trace.replies())
    config = config or trace.config
    with tempfile.TemporaryDirectory(prefix="primer-replay-") as scratch:
        if config.checkpoint_dir is not None:  # same pause path, never the recorded run's files
            config = dataclasses.replace(config, checkpoint_dir=scratch)
        result = run_agent(llm, trace.task, tools, system=trace.system, config=config,
                           on_event=on_event, trace=trace_out)
    result.checkpoint = None  # the scratch checkpoint is gone
    return ReplayResult(trace, result, _first_divergence(trace, result, llm))


def _first_divergence(trace: Trace, result: AgentResult, llm: ReplayLLM) -> Divergence | None:
    recorded = {s.index: s.executions for s in trace.steps()}
    now = {s.index: [e for e in s.executions if e.error_kind != "not_run"]
           for s in result.steps}
    for step in range(1, max([0, *recorded, *now]) + 1):
        old, new = recorded.get(step, []), now.get(step, [])
        for a, b in zip(old, new, strict=False):
            if (a["tool_use_id"], a["name"]) != (b.tool_use_id, b.name):
                return Divergence("extra_tool_call", step, b.tool_use_id, b.name,
                                  f"{a['name']} ({a['tool_use_id']})",
                                  f"{b.name} ({b.tool_use_id})")
            if (a["content"], bool(a["is_error"])) != (redact(b.content), b.is_error):
                return Divergence("tool_result", step, b.tool_use_id, b.name,
                                  _result_view(a["content"], a["is_error"]),
                                  _result_view(b.content, b.is_error))
        if len(old) > len(new):
            a = old[len(new)]
            return Divergence("missing_tool_call", step, a["tool_use_id"], a["name"],
                              "ran", "not run")
        if len(new) > len(old):
            b = new[len(old)]
            return Divergence("extra_tool_call", step, b.tool_use_id, b.name, "not run", "ran")
    n_old = len(trace.steps())
    if llm.exhausted:
        return Divergence("extra_model_call", n_old + 1, recorded=f"{n_old} model replies",
                          now=f"asked for reply {n_old + 1}")
    stop = trace.stop_cause
    if stop is not None and stop is not result.stop_cause:
        return Divergence("stop_cause", len(result.steps), recorded=stop.value,
                          now=result.stop_cause.value)
    if n_old != len(result.steps):
        return Divergence("steps", min(n_old, len(result.steps)), recorded=n_old,
                          now=len(result.steps))
    if trace.final_text != redact(result.final_text):
        return Divergence("final_text", len(result.steps), recorded=trace.final_text,
                          now=result.final_text)
    return None


def _result_view(content: str, is_error: bool) -> str:
    return ("error: " if is_error else "") + content
