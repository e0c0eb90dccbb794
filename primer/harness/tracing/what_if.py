"""What a guard would have done: replay a recorded run with one setting changed.

:func:`what_if` replays a :class:`~primer.harness.tracing.trace.Trace` through ``run_agent`` (via
:func:`~primer.harness.tracing.trace.replay`): the recorded replies play back with their recorded
usage, each tool returns its recorded result (:func:`recorded_tools`), and the loop's own
checks, in the loop's own order, decide where the run stops with the one setting changed.
The recorded calls after that point are what the guard saves (:class:`GuardEffect`). No
check is re-implemented here: the replay *is* the loop.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass
from typing import Any

from primer.loop.messages import tool_use_block
from primer.loop.model import cost_usd
from primer.loop.result import AgentResult
from primer.loop.state import HANDOFF_TOOL_NAME, StopCause, canonical_call
from primer.loop.tools import Tool, ToolError

from .replay import replay
from .trace import Trace


@dataclass(frozen=True)
class GuardEffect:
    """Where a guard stops a recorded run, and what that saves (from :func:`what_if`).

    ``setting`` is the guard as code (``"repeat_threshold=3"``). ``stops_at`` is the model
    call at which the loop stops (after that call's reply, or before it when ``before_call``),
    ``None`` when the guard does not fire within the record; ``detail`` is the loop's own
    stop detail. ``in_run`` says the run's own setting fired there. The saving counts the
    recorded model calls the guard leaves out: ``calls_saved``, their prompt tokens
    ``input_tokens_saved`` of the run's ``input_tokens_total`` (input + cache tokens), and
    their price ``cost_usd_saved`` (USD, at the run's prices).
    """

    setting: str
    stops_at: int | None
    before_call: bool = False
    detail: str = ""
    in_run: bool = False
    calls_saved: int = 0
    input_tokens_saved: int = 0
    input_tokens_total: int = 0
    cost_usd_saved: float = 0.0

    def describe(self) -> str:
        """One clause, e.g. ``repeat_threshold=3 stops this at call 3: 3 calls, 1,530 of
        3,570 input tokens (0.0089 USD) not spent``."""
        if self.stops_at is None:
            return f"{self.setting} would not stop it within the recorded calls"
        where = f"{'before' if self.before_call else 'at'} call {self.stops_at}"
        if self.in_run:
            return f"{self.setting} (the run's own setting) stopped it {where}"
        if not self.calls_saved:
            return f"{self.setting} stops this {where}, the last call: nothing to save"
        return (f"{self.setting} stops this {where}: {self.calls_saved} "
                f"call{'s' if self.calls_saved != 1 else ''}, "
                f"{self.input_tokens_saved:,} of {self.input_tokens_total:,} input tokens "
                f"({self.cost_usd_saved:.4f} USD) not spent")



def what_if(trace: Trace, **setting: Any) -> GuardEffect:
    """Replay ``trace`` through ``run_agent`` with one :class:`AgentConfig` field changed.

    The recorded replies play back with their recorded usage
    (:func:`~primer.harness.tracing.trace.replay`), each tool returns what it returned in the record
    (:func:`recorded_tools`), and the loop's own checks decide where the run stops. The
    run's other settings stay, except those that only make sense live (timeouts, retries,
    the wall clock, checkpoints: a replay has nothing to wait for). Returns the
    :class:`GuardEffect`; ``ValueError`` for a setting ``AgentConfig`` refuses.
    """
    (name, value), = setting.items()
    base = trace.config
    config = dataclasses.replace(base, tool_timeout_s=None, tool_retries=0, model_retries=0,
                                 wall_clock_s=None, checkpoint_dir=None, max_parallel_tools=1,
                                 **setting)
    result = replay(trace, recorded_tools(trace), config=config).result
    steps = trace.steps()
    stopped_by = _guard_cause(name, result)
    shown = _setting_text(name, value)
    if stopped_by is None:
        return GuardEffect(shown, None)
    before = stopped_by in (StopCause.CONTEXT_WINDOW,) or (
        stopped_by in (StopCause.TOKEN_BUDGET, StopCause.COST_BUDGET)
        and config.budget_check == "before" and len(result.steps) < len(steps)
        and "could take" in result.stop_detail)
    made = len(result.steps)
    left = [s for s in steps if s.index > made]
    prices = base.prices
    in_run = (trace.stop_cause is stopped_by and len(steps) == made
              and getattr(base, name) == value)
    return GuardEffect(shown, made + 1 if before else made, before, result.stop_detail, in_run,
                       len(left), sum(s.reply.usage.prompt_tokens for s in left),
                       sum(s.reply.usage.prompt_tokens for s in steps),
                       sum(cost_usd(s.reply.usage, prices) for s in left))


_GUARD_CAUSES = {"repeat_threshold": {StopCause.LOOP_DETECTED},
                 "no_progress_window": {StopCause.NO_PROGRESS},
                 "token_budget": {StopCause.TOKEN_BUDGET},
                 "cost_budget_usd": {StopCause.COST_BUDGET},
                 "context_stop_share": {StopCause.CONTEXT_WINDOW},
                 "context_window": {StopCause.CONTEXT_WINDOW},
                 "max_steps": {StopCause.MAX_STEPS}}


def _guard_cause(name: str, result: AgentResult) -> StopCause | None:
    causes = _GUARD_CAUSES.get(name, set())
    return result.stop_cause if result.stop_cause in causes else None


def _setting_text(name: str, value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 10_000:
        return f"{name}={value:_}"
    return f"{name}={value:g}" if isinstance(value, float) else f"{name}={value!r}"


def recorded_tools(trace: Trace) -> list[Tool]:
    """Stand-ins for the tools a trace offered, returning the results it recorded.

    Each call gets the next recorded result of the same tool with the same canonical input
    (:func:`~primer.loop.loop.canonical_call`), in recorded order; an error result
    is raised again as a :class:`~primer.loop.tools.ToolError` with its recorded text, so
    the replay's tool results and error flags are the record's. A call the record does not
    hold fails with an error saying so. The hand-off tool is left out (``run_agent`` adds
    its own when the config offers it).
    """
    queues: dict[str, deque[tuple[str, bool]]] = {}
    for s in trace.steps():
        for x in s.executions:
            if x.get("error_kind") != "not_run":
                # the key reads a call's name and input only (a checked trace's names are
                # strings), so the stand-in block's id is left empty
                key = canonical_call(tool_use_block("", str(x.get("name")), x.get("input")))
                queues.setdefault(key, deque()).append((str(x.get("content", "")),
                                                        bool(x.get("is_error"))))

    def stand_in(name: str) -> Any:
        def run(**kwargs: Any) -> str:
            queue = queues.get(canonical_call(tool_use_block("", name, kwargs)))
            if not queue:
                raise ToolError(f"{name}: this call is not in the record")
            content, is_error = queue.popleft()
            if is_error:
                raise ToolError(content)
            return content
        return run

    tools = []
    for t in trace.tools:
        name = t.get("name") if isinstance(t, dict) else None
        if not isinstance(name, str) or name == HANDOFF_TOOL_NAME:
            continue
        try:
            tools.append(Tool(name, str(t.get("description", "")),
                              t.get("input_schema") or {"type": "object"}, stand_in(name)))
        except Exception:  # noqa: BLE001 - a definition our Tool refuses: its calls fail
            continue
    return tools

