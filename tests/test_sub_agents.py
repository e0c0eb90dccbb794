"""Sub-agents: a child loop whose results stay out of the parent and whose usage counts."""

from __future__ import annotations

import threading
import time

import pytest

from primer.harness.allowance import RunScope, running
from primer.harness.hooks import Hooks
from primer.harness.production import run_production
from primer.harness.retry import ManualClock
from primer.harness.sub_agents import sub_agent_tool
from primer.loop.config import AgentConfig
from primer.loop.loop import start_run
from primer.loop.messages import tool_use_block
from primer.loop.model import (
    Reply,
    ScriptedLLM,
    TransientModelError,
    Usage,
    estimate_tokens,
    tool_reply,
)
from primer.loop.state import StopCause
from primer.loop.tools import tool


@tool
def read_log(day: str) -> str:
    """Read a day's log.

    Args:
        day: YYYY-MM-DD.
    """
    return f"log for {day}: " + "line " * 400


def child_llm():
    return ScriptedLLM([tool_reply(("read_log", {"day": "2026-01-01"})),
                        "Three errors, all from the payment service."])


def helper(config=None, make_llm=child_llm):
    return sub_agent_tool("investigate", "Delegate reading logs.", make_llm, [read_log],
                         config=config or AgentConfig(max_steps=4, offer_handoff=False))


def parent(helper_tool, budget=50_000, budget_check="after"):
    llm = ScriptedLLM([tool_reply(("investigate", {"task": "summarise the errors"})),
                       "The payment service failed three times."])
    return run_production(llm, "what went wrong?", [helper_tool],
                          config=AgentConfig(token_budget=budget, offer_handoff=False,
                                        budget_check=budget_check))


def test_the_childs_tool_results_never_enter_the_parents_message_list():
    h = helper()
    result = parent(h)
    assert result.stop_cause is StopCause.END_TURN
    parent_text = str(result.messages)
    assert "line line" not in parent_text
    assert "Three errors" in parent_text
    child = h.fn.runs[0]
    assert "line line" in str(child.messages)
    assert child.messages is not result.messages


def test_the_childs_usage_counts_in_the_parents_totals():
    h = helper()
    result = parent(h)
    child = h.fn.runs[0]
    own = Usage()
    for s in result.steps:
        own = own + s.usage
    assert result.usage == own + child.usage
    assert result.executions[0].usage == child.usage
    assert abs(result.cost_usd - (sum(s.usage.input_tokens for s in result.steps) * 5
                                  + sum(s.usage.output_tokens for s in result.steps) * 25)
               / 1e6 - child.cost_usd) < 1e-12


def test_a_child_gets_at_most_the_parents_remaining_tokens_so_the_parent_never_overshoots():
    h = helper()
    first_call = parent(h).steps[0].usage.total_tokens
    child_tokens = h.fn.runs[0].usage.total_tokens
    # A budget the parent's own first call fits in, but not with all the child's tokens.
    budget = first_call + child_tokens // 2
    h2 = helper()
    result = parent(h2, budget=budget)
    given = h2.fn.configs[0]
    assert given.token_budget == budget - first_call  # what the parent had left
    assert given.budget_check == "before"  # so the child never passes it
    child = h2.fn.runs[0]
    assert child.stop_cause is StopCause.TOKEN_BUDGET
    assert child.usage.total_tokens <= given.token_budget
    assert result.usage.total_tokens <= budget
    assert result.executions[0].is_error and "token_budget" in result.executions[0].content


def test_a_child_keeps_its_own_smaller_limits():
    h = helper(config=AgentConfig(max_steps=4, token_budget=300, offer_handoff=False))
    parent(h, budget=50_000)
    assert h.fn.configs[0].token_budget == 300 and h.fn.configs[0].max_steps == 4


def test_a_child_gets_at_most_the_parents_remaining_dollars_steps_and_seconds():
    clock = ManualClock()
    h = helper(config=AgentConfig(max_steps=6, offer_handoff=False))
    llm = ScriptedLLM([tool_reply(("investigate", {"task": "summarise the errors"})), "done"])

    def clocked_llm(**kw):
        clock.advance(4.0)  # each parent call takes 4 s
        return llm(**kw)

    result = run_production(clocked_llm, "what went wrong?", [h],
                            config=AgentConfig(max_steps=3, cost_budget_usd=0.05, token_budget=None,
                                          wall_clock_s=10.0, clock=clock, offer_handoff=False))
    given = h.fn.configs[0]
    first = result.steps[0]
    assert given.max_steps == 3 - 1  # the parent's step limit minus its one call
    assert given.cost_budget_usd == pytest.approx(0.05 - first.cost_usd)
    assert given.wall_clock_s == pytest.approx(10.0 - 4.0)
    assert given.token_budget == 50_000  # the child's own: the parent has no token budget
    assert result.cost_usd <= 0.05


def test_a_child_the_parent_has_nothing_left_for_does_not_run():
    h = helper()
    state = start_run(ScriptedLLM([]), "hi", config=AgentConfig(token_budget=1000))
    state.usage = Usage(900, 100)
    with running(state):
        out = h.fn(task="summarise the errors")
    assert h.fn.runs == []
    assert out.is_error and out.value == ("The helper did not run: the run has no tokens of "
                                          "its budget left.")


def test_children_run_one_after_another_each_get_what_the_one_before_left():
    h = helper(config=AgentConfig(max_steps=4, offer_handoff=False, max_tokens=64))
    two = ScriptedLLM([tool_reply(("investigate", {"task": "day one"}),
                                  ("investigate", {"task": "day two"})), "done"])
    budget = 2_000
    result = run_production(two, "what went wrong?", [h],
                            config=AgentConfig(token_budget=budget, offer_handoff=False,
                                          max_tokens=64, max_parallel_tools=1))
    left = budget - result.steps[0].usage.total_tokens
    first, second = h.fn.runs
    assert [c.token_budget for c in h.fn.configs] == [left, left - first.usage.total_tokens]
    assert result.steps[0].total_usage.total_tokens + first.usage.total_tokens \
        + second.usage.total_tokens <= budget


def test_two_children_running_at_once_never_hold_more_than_is_left():
    started = threading.Event()

    def waiting_llm():
        child = child_llm()

        def call(**kw):
            started.wait(5)  # until the sibling has asked for its share
            return child(**kw)
        return call

    h = helper(make_llm=waiting_llm)
    shares = []

    def after_tool(call, execution):
        shares.append(execution.content)
        if execution.content.startswith("The helper did not run"):
            started.set()

    two = ScriptedLLM([tool_reply(("investigate", {"task": "day one"}),
                                  ("investigate", {"task": "day two"})), "done"])
    result = run_production(two, "what went wrong?", [h], hooks=Hooks(after_tool=after_tool),
                            config=AgentConfig(token_budget=5_000, offer_handoff=False))
    assert len(h.fn.runs) == 1  # the first to ask held everything that was left
    assert sum(x.startswith("The helper did not run: the run has no tokens") for x in shares) == 1
    assert h.fn.configs[0].token_budget == 5_000 - result.steps[0].usage.total_tokens


def test_called_outside_a_run_a_child_has_its_own_limits():
    h = helper(config=AgentConfig(max_steps=4, token_budget=777, offer_handoff=False))
    out = h.fn(task="summarise the errors")
    assert h.fn.configs[0].token_budget == 777 and not out.is_error


def test_nothing_is_held_for_a_run_once_its_next_reply_comes():
    state = start_run(ScriptedLLM([]), "hi", config=AgentConfig(token_budget=1000))
    scope = RunScope(state)
    first = scope.take()
    assert first.tokens == 1000 and scope.take().tokens == 0  # all of it is held
    scope.settle(first, 300, 0.0)
    assert scope.take().tokens == 700 - 0  # the 300 spent stay held until they are counted
    state.steps.append(None)  # type: ignore[arg-type]  - a next model call
    state.usage = Usage(300, 0)
    assert scope.take().tokens == 700


def test_a_child_that_hits_its_own_limit_is_reported_as_a_result_not_a_crash():
    def looping():
        return ScriptedLLM(lambda msgs: tool_reply(("read_log", {"day": f"d{len(msgs)}"})))

    h = helper(config=AgentConfig(max_steps=2, offer_handoff=False), make_llm=looping)
    result = parent(h)
    e = result.executions[0]
    assert e.is_error and "max_steps" in e.content
    assert result.stop_cause is StopCause.END_TURN
    assert h.fn.runs[0].stop_cause is StopCause.MAX_STEPS


def test_the_summary_is_cut_to_its_length():
    long_child = lambda: ScriptedLLM(["word " * 500])  # noqa: E731
    h = sub_agent_tool("helper", "d", long_child, summary_chars=100)
    out = h.fn(task="x")
    assert len(out.value) == 100 and estimate_tokens(out.value) <= 25


def test_a_child_interrupted_at_its_time_limit_still_spends_the_parents_budget():
    spent = []

    def slow_child(**kw):  # each call takes its time, then reports 150 tokens
        time.sleep(0.2)
        spent.append(150)
        return Reply([tool_use_block(f"toolu_c{len(spent)}", "read_log",
                                     {"day": f"2026-01-{len(spent):02d}"})],
                     "tool_use", Usage(100, 50))

    h = helper(AgentConfig(max_steps=50, offer_handoff=False, repeat_threshold=None),
               make_llm=lambda: slow_child)
    llm = ScriptedLLM([tool_reply(("investigate", {"task": "read every log"})), "Done."])
    config = AgentConfig(token_budget=100_000, tool_timeout_s=0.5, tool_retries=0,
                         offer_handoff=False)
    result = run_production(llm, "what went wrong?", [h], config=config)
    assert result.executions[0].error_kind == "timeout"
    own = sum(s.usage.total_tokens for s in result.steps)
    assert spent and result.usage.total_tokens == own + sum(spent)  # none of it lost


def test_a_child_interrupted_in_a_backoff_still_charges_the_failed_attempts():
    def overloaded_child(**kw):
        raise TransientModelError("529", status=529, usage=Usage(30_000, 0), retry_after_s=5)

    h = helper(AgentConfig(max_steps=5, offer_handoff=False, model_retries=3),
               make_llm=lambda: overloaded_child)
    llm = ScriptedLLM([tool_reply(("investigate", {"task": "read every log"})), "Done."])
    config = AgentConfig(tool_timeout_s=0.5, tool_retries=0, offer_handoff=False)
    result = run_production(llm, "what went wrong?", [h], config=config)
    assert result.executions[0].error_kind == "timeout"
    own = sum(s.usage.total_tokens for s in result.steps)
    assert result.usage.total_tokens == own + 30_000  # the attempt before the backoff
