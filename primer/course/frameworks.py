"""The same scripted model under other frameworks' loops, side by side with ``run_agent``.

Each function runs one :class:`~primer.scenarios.Scenario` (its task, tools, system prompt
and scripted model) through one loop and returns a :class:`FrameworkRun`: how many model
calls it made before it stopped, what it returned or raised, the tokens and dollars those
calls cost, and what the caller is told about why it stopped.

The model is always the scenario's scripted model behind a
:class:`~primer.providers.fake_server.FakeModelServer` on ``127.0.0.1``, reached through each
framework's own model client, so no framework is patched and nothing leaves the machine:

- :func:`run_tool_runner`: the ``anthropic`` SDK's ``client.beta.messages.tool_runner``;
- :func:`run_langgraph`: ``langchain.agents.create_agent`` (LangGraph's prebuilt agent;
  ``langgraph.prebuilt.create_react_agent`` is its deprecated name since LangGraph 1.0) with
  ``langchain_anthropic.ChatAnthropic``;
- :func:`run_agents_sdk`: the OpenAI Agents SDK's ``Runner`` with its
  ``OpenAIChatCompletionsModel`` (chat completions, which the local server speaks too).

Tools are the scenario's functions, results rendered as ``run_agent`` renders them
(``claude.as_result_text``); each framework builds its own schema and validation around them, as
it would for a user. The Agents SDK sends a tool's error to the model as plain text (chat
completions has no error flag), so its tools word errors ``"Error: ..."``, the convention
:mod:`primer.providers.openai_compat` reads back, for the scripted model to see the failure.

Needs the ``frameworks`` extra (``pip install -e '.[frameworks]'``); the SDKs are imported
only when a function runs. Tokens are the usage the scripted model reported for every reply
the server sent (characters / 4), priced at :class:`~primer.loop.model.Prices` defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any

from primer.loop.messages import Message
from primer.loop.model import LLM, Prices, Reply, Usage, cost_usd
from primer.providers.claude import DEFAULT_MODEL, as_result_text, sdk_tools
from primer.providers.fake_server import FakeModelServer
from primer.providers.openai_compat import ERROR_PREFIX

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from primer.scenarios import Scenario

#: Any key will do for the local server; it never leaves the machine.
PLACEHOLDER_KEY = "sk-local-placeholder-key"

#: The distributions whose loops are compared, for printing their versions.
DISTRIBUTIONS = ("anthropic", "langgraph", "langchain", "langchain-anthropic", "openai-agents")


def versions() -> dict[str, str]:
    """The installed version of each of :data:`DISTRIBUTIONS` (``"not installed"`` if absent)."""
    out = {}
    for name in DISTRIBUTIONS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


class Tally:
    """An :class:`~primer.loop.model.LLM` that passes calls to ``llm`` and keeps each reply.

    ``replies`` are the replies in order; ``usage`` their summed usage (tokens).
    """

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.replies: list[Reply] = []

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int) -> Reply:
        reply = self.llm(system=system, messages=messages, tools=tools, max_tokens=max_tokens)
        self.replies.append(reply)
        return reply

    @property
    def usage(self) -> Usage:
        """Every reply's usage added up."""
        return sum((r.usage for r in self.replies), Usage())


@dataclass(frozen=True)
class FrameworkRun:
    """One scenario through one loop.

    ``loop`` names it; ``model_calls`` the model calls made; ``ended_with`` what the call
    returned or raised; ``usage`` and ``cost_usd`` what those calls cost (tokens; USD at
    ``Prices()``); ``caller_tokens`` the tokens the caller can add up from what it got back
    (0 when it got nothing); ``told`` what the caller is told about why the run stopped;
    ``named`` whether that is a named reason (a stop cause, or an exception of its own type).
    """

    loop: str
    model_calls: int
    ended_with: str
    usage: Usage
    cost_usd: float
    caller_tokens: int
    told: str
    named: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """A table row for :func:`~primer.loop.loop.format_trace_table`."""
        return {"loop": self.loop, "model calls": self.model_calls,
                "ended with": self.ended_with, "tokens": self.usage.total_tokens,
                "USD": f"{self.cost_usd:.4f}", "tokens the caller sees": self.caller_tokens,
                "why, as the caller is told": self.told}


def _finish(loop: str, tally: Tally, ended_with: str, caller_tokens: int, told: str,
            named: bool, **extra: Any) -> FrameworkRun:
    return FrameworkRun(loop, len(tally.replies), ended_with, tally.usage,
                        cost_usd(tally.usage, Prices()), caller_tokens, told, named, extra)


def run_ours(scenario: Scenario) -> FrameworkRun:
    """``run_agent`` with the scenario's own limits (``scenario.run``)."""
    tally = Tally(scenario.make_llm())
    result = scenario.run(llm=tally)
    return _finish("run_agent", tally, f"AgentResult ({result.stop_cause.value})",
                   result.usage.total_tokens, f"{result.stop_cause.value}: {result.stop_detail}",
                   True, result=result)


def run_tool_runner(scenario: Scenario, *, max_iterations: int | None = None,
                    give_up_after: int = 30) -> FrameworkRun:
    """The SDK's tool runner; ``max_iterations`` is its own cap (``None``, its default, means
    no cap). The caller stops iterating after ``give_up_after`` model calls if the runner has
    not stopped by then (a runner with no cap and a model that never stops runs forever)."""
    import anthropic

    tally = Tally(scenario.make_llm())
    messages = []
    with FakeModelServer(tally) as server:
        client = anthropic.Anthropic(api_key=PLACEHOLDER_KEY, base_url=server.base_url,
                                     max_retries=0)
        # anthropic types max_iterations as int | Omit, but hands it on to
        # BetaMessageThread.tool_runner, whose max_iterations is int | None (None: no cap)
        runner = client.beta.messages.tool_runner(
            model=DEFAULT_MODEL, max_tokens=scenario.config.max_tokens,
            system=scenario.system, tools=sdk_tools(scenario.make_tools()),
            messages=[{"role": "user", "content": scenario.task}],
            max_iterations=max_iterations)  # type: ignore[arg-type]
        for message in runner:
            messages.append(message)
            if len(messages) >= give_up_after:
                break
    seen = sum(m.usage.input_tokens + m.usage.output_tokens for m in messages)
    last = messages[-1].stop_reason if messages else None
    if len(messages) >= give_up_after and last == "tool_use":
        return _finish("anthropic tool runner", tally,
                       f"still going: we broke off after {give_up_after} calls", seen,
                       f"nothing: the last message's stop_reason is {last}", False)
    capped = max_iterations is not None and len(messages) == max_iterations
    return _finish("anthropic tool runner", tally, "returned its last message",
                   seen, f"stop_reason {last}" + (" (max_iterations reached)" if capped else ""),
                   False)


def run_langgraph(scenario: Scenario, *, recursion_limit: int | None = None) -> FrameworkRun:
    """LangGraph's prebuilt agent; ``recursion_limit`` caps its super-steps (one model call
    or one round of tools each); ``None`` keeps LangGraph's default."""
    from langchain.agents import create_agent
    from langchain_anthropic import ChatAnthropic
    from langchain_core.tools import StructuredTool
    from langgraph.errors import GraphRecursionError

    tally = Tally(scenario.make_llm())
    with FakeModelServer(tally) as server:
        # ChatAnthropic accepts its field names (model, max_tokens) as well as their aliases
        # and turns a str key into a SecretStr
        model = ChatAnthropic(model=DEFAULT_MODEL, api_key=PLACEHOLDER_KEY,
                              base_url=server.base_url, max_retries=0,
                              max_tokens=scenario.config.max_tokens)
        tools = [StructuredTool.from_function(func=as_result_text(t.fn), name=t.name,
                                              description=t.description)
                 for t in scenario.make_tools()]
        agent = create_agent(model, tools, system_prompt=scenario.system)
        config: RunnableConfig | None = ({"recursion_limit": recursion_limit}
                                         if recursion_limit is not None else None)
        try:
            state = agent.invoke({"messages": [{"role": "user", "content": scenario.task}]},
                                 config)
        except GraphRecursionError as e:
            return _finish("LangGraph create_agent", tally, "raised GraphRecursionError", 0,
                           str(e).splitlines()[0], True)
    seen = sum((m.usage_metadata or {}).get("total_tokens", 0)
               for m in state["messages"] if getattr(m, "usage_metadata", None))
    return _finish("LangGraph create_agent", tally, "returned its state", seen,
                   "nothing: the last message has no tool calls", False)


async def run_agents_sdk(scenario: Scenario, *, max_turns: int | None = None) -> FrameworkRun:
    """The OpenAI Agents SDK's ``Runner.run``; ``max_turns`` is its cap (``None`` keeps the
    SDK's default). A coroutine: ``await`` it (a notebook cell can), or ``asyncio.run`` it."""
    from agents import (
        Agent,
        MaxTurnsExceeded,
        ModelSettings,
        OpenAIChatCompletionsModel,
        RunConfig,
        Runner,
        function_tool,
    )
    from openai import AsyncOpenAI

    def error_text(_context: Any, error: Exception) -> str:
        return ERROR_PREFIX + str(error)

    tally = Tally(scenario.make_llm())
    with FakeModelServer(tally) as server:
        async with AsyncOpenAI(api_key=PLACEHOLDER_KEY, base_url=server.base_url + "/v1",
                               max_retries=0) as client:
            agent = Agent(
                name=scenario.name, instructions=scenario.system,
                model=OpenAIChatCompletionsModel(model="gpt-fake", openai_client=client),
                model_settings=ModelSettings(max_tokens=scenario.config.max_tokens),
                tools=[function_tool(as_result_text(t.fn), name_override=t.name,
                                     description_override=t.description,
                                     failure_error_function=error_text)
                       for t in scenario.make_tools()])
            limit: dict[str, Any] = {"max_turns": max_turns} if max_turns is not None else {}
            try:
                result = await Runner.run(agent, scenario.task,
                                          run_config=RunConfig(tracing_disabled=True), **limit)
            except MaxTurnsExceeded as e:
                responses = e.run_data.raw_responses if e.run_data else []
                seen = sum(r.usage.total_tokens for r in responses)
                return _finish("OpenAI Agents SDK", tally, "raised MaxTurnsExceeded", seen,
                               str(e), True)
    seen = sum(r.usage.total_tokens for r in result.raw_responses)
    return _finish("OpenAI Agents SDK", tally, "returned a RunResult", seen,
                   "nothing: final_output is set", False)
