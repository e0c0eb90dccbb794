"""Sub-agents: a tool that runs a whole child loop and returns a short summary.

A parent agent hands a self-contained piece of work to a child: a second
:func:`~primer.loop.loop.run_agent` with its own message list, tools, limits and stop
cause. The child's tool calls and results never enter the parent's list; the parent sees one
``tool_result``: the child's answer cut to ``summary_chars`` characters. That keeps the
parent's context small, at the price of the child's own calls.

What the child costs is not hidden: the tool returns a
:class:`~primer.loop.tools.ToolOutput` carrying the child's usage and dollars, and the loop
adds them to the parent's running totals. And a child never gets more than the parent has
left: called from a run, its limits are the smaller of its own and the parent's remaining
tokens, dollars, model calls and wall-clock seconds (:mod:`primer.harness.allowance`), and
with a budget from the parent it checks before each call, so the parent cannot overshoot
through it. Two children running at once share what is left. A child that stops on its own
limit (steps, budget, a hand-off) is reported to the parent as an error result naming its
stop cause, never as an exception; one the parent has nothing left for does not run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from primer.loop.config import AgentConfig
from primer.loop.loop import continue_run, drive
from primer.loop.model import LLM
from primer.loop.result import AgentResult
from primer.loop.state import RunState, StopCause
from primer.loop.text import one_line
from primer.loop.tools import Tool, ToolOutput

from .allowance import current_scope, running
from .production import start_production

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string",
                            "description": "A self-contained task: everything the helper "
                                           "needs to know, and what to report back."}},
    "required": ["task"], "additionalProperties": False,
}


class SubAgent:
    """The function behind a sub-agent tool: ``agent(task=...) -> ToolOutput``.

    ``make_llm()`` builds the child's model for each call (a fresh scripted model, or
    ``lambda: claude`` to share one client); ``tools``, ``system`` and ``config`` are the
    child's own. ``summary_chars`` caps the text returned to the parent (characters).
    ``runs`` keeps every child :class:`~primer.loop.result.AgentResult` for inspection,
    ``configs`` the config each was run with (its limits after the parent's remainder).
    """

    def __init__(self, make_llm: Callable[[], LLM], tools: Iterable[Tool] = (), *,
                 system: str = "", config: AgentConfig | None = None,
                 summary_chars: int = 400) -> None:
        if summary_chars < 20:
            raise ValueError(f"summary_chars must be at least 20 (got {summary_chars})")
        self.make_llm, self.tools = make_llm, list(tools)
        self.system, self.config = system, config or AgentConfig(max_steps=6)
        self.summary_chars = summary_chars
        self.runs: list[AgentResult] = []
        self.configs: list[AgentConfig] = []

    def __call__(self, task: str) -> ToolOutput:
        scope = current_scope()
        if scope is None:  # called outside a run: the child's own limits only
            return self._report(self._run(task, self.config))
        given = scope.take()
        child: AgentResult | None = None
        started: list[RunState] = []
        try:
            if (why := given.problem()) is not None:
                return ToolOutput(f"The helper did not run: {why}.", is_error=True)
            child = self._run(task, given.limit(self.config), started)
            return self._report(child)
        except BaseException:  # interrupted (its time limit): what the child spent still counts
            if started:
                scope.charge(started[0].usage, started[0].cost_usd)
            raise
        finally:
            scope.settle(given, child.usage.total_tokens if child else 0,
                         child.cost_usd if child else 0.0)

    def _run(self, task: str, config: AgentConfig,
             started: list[RunState] | None = None) -> AgentResult:
        """The child run; its state goes into ``started`` as soon as it exists."""
        self.configs.append(config)
        state, _ = start_production(self.make_llm(), task, self.tools, system=self.system,
                                    config=config)
        if started is not None:
            started.append(state)
        with running(state):
            child = drive(state, continue_run(state))
        self.runs.append(child)
        return child

    def _report(self, child: AgentResult) -> ToolOutput:
        if child.stop_cause is StopCause.END_TURN and child.final_text is not None:
            return ToolOutput(one_line(child.final_text, self.summary_chars), child.usage,
                              child.cost_usd)
        return ToolOutput(one_line(f"The helper stopped without an answer "
                                   f"({child.stop_cause.value}). {child.summary}",
                                   self.summary_chars),
                          child.usage, child.cost_usd, is_error=True)


def sub_agent_tool(name: str, description: str, make_llm: Callable[[], LLM],
                  tools: Iterable[Tool] = (), *, system: str = "",
                  config: AgentConfig | None = None, summary_chars: int = 400) -> Tool:
    """A :class:`~primer.loop.tools.Tool` taking ``{"task": str}`` that runs a
    :class:`SubAgent`; the agent is at ``tool.fn`` (``tool.fn.runs`` holds each child run).

    Give it a description that says when to delegate. The child's own ``config`` limits it
    (default 6 steps and the default budget), and never beyond what the parent has left;
    its usage counts in the parent's.
    """
    agent = SubAgent(make_llm, tools, system=system, config=config, summary_chars=summary_chars)
    return Tool(name, description, TASK_SCHEMA, agent)
