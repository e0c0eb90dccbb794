"""Replay: run a recorded run again offline, and find where it now differs from the record.

"You cannot debug or evaluate an agent you cannot replay." :func:`replay` runs the loop
again from a trace's recorded model replies (:class:`ReplayLLM`, with their recorded usage,
so budgets fire exactly as before), with the recorded task, system prompt and config and the
tools as they are *now*, and reports the first step where the run differs from the record
(:class:`Divergence`): a tool result, a call made or missing, the stop cause, the number of
steps or the final text.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from primer.loop.config import AgentConfig
from primer.loop.messages import Message
from primer.loop.model import EventSink, Reply
from primer.loop.result import AgentResult
from primer.loop.state import StopCause
from primer.loop.tools import Tool, ToolRegistry

from ..production import run_production
from .trace import PathLike, Trace, load_trace, redact
from .trace_check import TraceError


class ReplayExhausted(RuntimeError):
    """The replayed run asked for a model reply the trace does not hold."""


class ReplayLLM:
    """A model that returns a trace's recorded replies in order, with their recorded usage.

    Give it the replies as the model sent them (:meth:`Trace.sent_replies
    <primer.harness.tracing.trace.Trace.sent_replies>`), so the replayed run meets the same
    repairs and refusals.

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
        content = reply.content  # (a copy: the loop's boundary may repair it)
        return Reply(list(content) if isinstance(content, list) else content,
                     reply.stop_reason, reply.usage, reply.model)


@dataclass
class Divergence:
    """The first point where a replay differs from its trace.

    ``kind`` is one of ``"tool_result"`` (a call's result or error flag changed),
    ``"missing_tool_call"`` (the record ran a call the replay did not),
    ``"extra_tool_call"`` (the replay ran a call the record did not),
    ``"extra_model_call"`` (the replay needed a reply the trace does not hold),
    ``"stop_cause"`` (also when the trace has no ``stop`` line: a record that does not say
    how the run ended cannot be matched), ``"steps"`` or ``"final_text"``. ``step`` counts
    model calls from 1.
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
    so budgets fire exactly as before); the task, system prompt, config and any earlier
    conversation come from the trace (``config`` overrides the config); ``tools`` are the
    tools as they are *now*. Each step's tool results are compared with the recorded ones
    in request order; the first mismatch is the :class:`Divergence` (results are compared as
    the trace would store them, secrets redacted). Then the step count, stop cause and
    final text are compared. Needing more model replies than recorded is a divergence, not a crash.

    A run that had a ``checkpoint_dir`` replays with a temporary one, removed afterwards (so a
    pause runs the calls that need no approval, as it did, and the recorded run's checkpoints
    are never touched). A run stopped by the wall clock will not stop there again (replays
    are fast), which shows as a ``stop_cause`` divergence. Raises :class:`TraceError` for an
    unreadable trace or one with no task.
    """
    if not isinstance(trace, Trace):
        trace = load_trace(trace)
    if not trace.task.strip():
        where = trace.path or "the trace"
        raise TraceError(f"{where}: its run_start has no task text, so there is no run to "
                         f"replay (a run always starts with one); `trace show` still reads it.")
    llm = ReplayLLM(trace.sent_replies())
    config = config or trace.config
    with tempfile.TemporaryDirectory(prefix="primer-replay-") as scratch:
        if config.checkpoint_dir is not None:  # same pause path, never the recorded run's files
            config = dataclasses.replace(config, checkpoint_dir=scratch)
        result = run_production(llm, trace.task, tools, system=trace.system, config=config,
                                on_event=on_event, trace=trace_out, messages=trace.history or None)
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
    if trace.stop is None:  # killed, or its end was cut off: nothing to match the end with
        return Divergence("stop_cause", max(n_old, 1),
                          recorded="(no stop line: the trace does not say how the run ended)",
                          now=result.stop_cause.value)
    stop = cast(StopCause, trace.stop_cause)  # the trace has a stop line (checked above)
    if stop is not result.stop_cause:
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
