"""The wrap-up at a limit: one more call with tools off for a best-effort answer."""

from __future__ import annotations

import asyncio

import pytest

from primer.harness.async_loop import run_agent_async
from primer.loop.config import AgentConfig
from primer.loop.loop import run_agent
from primer.loop.messages import text_of, unanswered_tool_uses
from primer.loop.model import Reply, ScriptedLLM, TransientModelError, tool_reply
from primer.loop.state import StopCause
from primer.loop.steps import WRAP_UP_OPENING
from primer.loop.tools import tool
from primer.scenarios import burner

ANSWER = "Best effort: A123 is a keyboard; I did not get to the total."


@tool
def lookup(query: str) -> str:
    """Look something up.

    Args:
        query: what to look up.
    """
    return f"notes on {query}: " + "details " * 40


class Searcher:
    """Calls lookup on every call; answers only when a wrap-up asks (the note is in the last
    user turn). Keeps each request's tools and max_tokens."""

    def __init__(self, *, wrap_reply: object = ANSWER) -> None:
        self.wrap_reply = wrap_reply
        self.requests: list[dict] = []
        self.llm = ScriptedLLM(self.policy)

    def policy(self, messages):
        if WRAP_UP_OPENING in text_of(messages[-1]["content"]):
            return self.wrap_reply
        return tool_reply(("lookup", {"query": f"topic {len(messages)}"}), text="More.")

    def __call__(self, *, system, messages, tools, max_tokens, **extra):
        self.requests.append({"tools": tools, "max_tokens": max_tokens, **extra})
        return self.llm(system=system, messages=messages, tools=tools, max_tokens=max_tokens)


class Clock:
    """A clock that moves only when a tool runs (10 s a call)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run(config: AgentConfig, model: Searcher | None = None, clock: Clock | None = None):
    model = model or Searcher()
    tools = [lookup]
    if clock is not None:
        @tool
        def lookup_slowly(query: str) -> str:
            """Look something up, slowly.

            Args:
                query: what to look up.
            """
            clock.now += 10
            return lookup.fn(query=query)
        lookup_slowly.name = "lookup"
        tools = [lookup_slowly]
    return run_agent(model, "What does order A123 cost?", tools, config=config), model


LIMITS = {
    "max_steps": dict(max_steps=3, token_budget=None),
    "token_budget": dict(max_steps=50, token_budget=6_000, budget_check="before"),
    "cost_budget": dict(max_steps=50, token_budget=None, cost_budget_usd=0.04,
                        budget_check="before"),
}


@pytest.mark.parametrize("cause", sorted(LIMITS))
def test_each_limit_ends_with_a_marked_wrap_up_answer_and_keeps_its_stop_cause(cause):
    result, model = run(AgentConfig(**LIMITS[cause], wrap_up=True))
    assert result.stop_cause.value == cause
    assert result.final_text == ANSWER and result.wrapped_up
    assert "wrap-up call with tools off gave a best-effort answer" in result.summary
    assert model.requests[-1]["tools"] == [] and model.requests[-1]["max_tokens"] == 512


def test_the_wall_clock_limit_ends_with_a_wrap_up_answer():
    clock = Clock()
    result, _ = run(AgentConfig(max_steps=50, token_budget=None, wall_clock_s=25, clock=clock,
                                wrap_up=True), clock=clock)
    assert result.stop_cause is StopCause.WALL_CLOCK
    assert result.final_text == ANSWER and result.wrapped_up


def test_without_wrap_up_the_same_limit_ends_with_no_answer():
    result, model = run(AgentConfig(**LIMITS["max_steps"]))
    assert result.final_text is None and not result.wrapped_up
    assert len(model.requests) == 3 and "wrap-up" not in result.summary


def test_the_step_limits_summary_counts_the_calls_before_the_wrap_up():
    result, model = run(AgentConfig(**LIMITS["max_steps"], wrap_up=True))
    assert len(model.requests) == len(result.steps) == 4
    assert result.summary.startswith("Stopped at the step limit after 3 model calls.")
    assert result.rows()[-1]["results / answer"].startswith("Best effort")


@pytest.mark.parametrize("cause", sorted(LIMITS))
def test_every_tool_use_is_answered_before_and_after_the_wrap_up(cause):
    result, _ = run(AgentConfig(**LIMITS[cause], wrap_up=True))
    assert unanswered_tool_uses(result.messages) == []
    assert [m["role"] for m in result.messages[-2:]] == ["user", "assistant"]


def test_tools_asked_for_in_the_wrap_up_do_not_run_and_are_answered():
    stubborn = Searcher(wrap_reply=tool_reply(("lookup", {"query": "more"})))
    result, _ = run(AgentConfig(**LIMITS["max_steps"], wrap_up=True), stubborn)
    assert result.final_text is None and not result.wrapped_up
    assert result.executions[-1].error_kind == "not_run"
    assert unanswered_tool_uses(result.messages) == []
    assert "the model asked for tools, which were off" in result.summary


@pytest.mark.parametrize("budget", range(3_000, 14_001, 500))
def test_with_the_wrap_up_the_run_never_passes_its_token_budget(budget):
    result = burner.SCENARIO.run(budget_check="before", token_budget=budget, wrap_up=True)
    assert result.stop_cause is StopCause.TOKEN_BUDGET and result.wrapped_up
    assert result.usage.total_tokens <= budget


@pytest.mark.parametrize("budget_usd", [0.02, 0.03, 0.05, 0.08])
def test_with_the_wrap_up_the_run_never_passes_its_dollar_budget(budget_usd):
    result = burner.SCENARIO.run(budget_check="before", token_budget=None,
                                 cost_budget_usd=budget_usd, wrap_up=True)
    assert result.stop_cause is StopCause.COST_BUDGET and result.wrapped_up
    assert result.cost_usd <= budget_usd


def test_the_wrap_ups_cost_is_counted_in_the_runs_totals():
    result = burner.SCENARIO.run(budget_check="before", wrap_up=True)
    last = result.steps[-1]
    assert result.wrapped_up and last.reply.text == result.final_text
    assert result.usage == last.total_usage and result.cost_usd == last.cost_usd
    assert last.usage.output_tokens > 0


def test_the_budget_check_keeps_room_for_the_wrap_up():
    plain = burner.SCENARIO.run(budget_check="before")
    kept = burner.SCENARIO.run(budget_check="before", wrap_up=True)
    assert len(kept.steps) - 1 < len(plain.steps)  # it stopped earlier, to leave room
    assert "kept for a wrap-up" in kept.stop_detail


def test_a_wrap_up_that_does_not_fit_is_not_made_and_the_summary_says_why():
    after = burner.SCENARIO.run(wrap_up=True)  # checked after each call: already past it
    plain = burner.SCENARIO.run()
    assert after.final_text is None and not after.wrapped_up
    assert after.usage == plain.usage and len(after.steps) == len(plain.steps)
    assert "No wrap-up call was made: it could take the run to" in after.summary


def test_a_failing_wrap_up_call_ends_the_run_with_the_limits_stop_cause():
    failing = Searcher(wrap_reply=None)

    def policy(messages):
        if WRAP_UP_OPENING in text_of(messages[-1]["content"]):
            raise TransientModelError("overloaded")
        return failing.policy(messages)

    failing.llm = ScriptedLLM(policy)
    result, _ = run(AgentConfig(**LIMITS["max_steps"], wrap_up=True, model_retries=0),
                    failing)
    assert result.stop_cause is StopCause.MAX_STEPS and result.final_text is None
    assert "The wrap-up call failed" in result.summary


def test_other_stops_get_no_wrap_up():
    repeating = ScriptedLLM([tool_reply(("lookup", {"query": "x"}))] * 3)
    result = run_agent(repeating, "Find x.", [lookup], config=AgentConfig(wrap_up=True))
    assert result.stop_cause is StopCause.LOOP_DETECTED and not result.wrapped_up
    assert repeating.calls == 3


def test_a_model_that_takes_tool_choice_keeps_its_tools_and_is_told_none():
    model = Searcher()
    model.takes_tool_choice = True
    result, _ = run(AgentConfig(**LIMITS["max_steps"], wrap_up=True), model)
    assert result.wrapped_up
    assert model.requests[-1]["tool_choice"] == {"type": "none"}
    assert [t["name"] for t in model.requests[-1]["tools"]] == ["lookup", "handoff_to_human"]


def test_the_note_tells_the_model_what_fired_and_how_long_to_answer():
    result, _ = run(AgentConfig(**LIMITS["max_steps"], wrap_up=True, wrap_up_max_tokens=300))
    note = result.messages[-2]["content"][-1]["text"]
    assert note.startswith(WRAP_UP_OPENING + ": the step limit of 3 model calls was reached")
    assert "Tools are off" in note and "at most 300 tokens" in note


def test_wrap_up_settings_travel_in_the_config_json_only_when_set():
    assert "wrap_up" not in AgentConfig().to_dict()
    on = AgentConfig(wrap_up=True, wrap_up_max_tokens=200)
    assert AgentConfig.from_dict(on.to_dict()) == on
    with pytest.raises(ValueError, match="wrap_up_max_tokens must be an integer >= 1"):
        AgentConfig(wrap_up_max_tokens=0)


def test_a_scripted_reply_object_can_be_the_wrap_up():
    model = Searcher(wrap_reply=Reply([{"type": "text", "text": "short"}], "end_turn"))
    result, _ = run(AgentConfig(**LIMITS["max_steps"], wrap_up=True), model)
    assert result.final_text == "short" and result.to_dict()["wrapped_up"] is True


def test_the_async_loop_makes_the_same_wrap_up():
    model = Searcher()
    result = asyncio.run(run_agent_async(model, "What does order A123 cost?", [lookup],
                                         config=AgentConfig(**LIMITS["max_steps"],
                                                            wrap_up=True)))
    assert result.stop_cause is StopCause.MAX_STEPS and result.final_text == ANSWER
    assert result.wrapped_up and model.requests[-1]["tools"] == []


def test_the_stop_event_says_the_run_wrapped_up():
    events = []
    run_agent(Searcher(), "What does order A123 cost?", [lookup],
              config=AgentConfig(**LIMITS["max_steps"], wrap_up=True),
              on_event=lambda kind, data: events.append((kind, data)))
    stop = [d for k, d in events if k == "stop"][-1]
    assert stop["cause"] == "max_steps" and stop["wrapped_up"] is True
    assert [d["step"] for k, d in events if k == "model_call"] == [1, 2, 3, 4]
