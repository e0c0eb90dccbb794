"""Sub-agents: a child loop whose results stay out of the parent and whose usage counts."""

from __future__ import annotations

from primer.agents import (
    AgentConfig,
    ScriptedLLM,
    StopCause,
    Usage,
    estimate_tokens,
    run_agent,
    tool,
    tool_reply,
)
from primer.agents.sub_agents import sub_agent_tool


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
    return run_agent(llm, "what went wrong?", [helper_tool],
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


def test_the_parent_stops_on_its_budget_because_of_the_childs_usage():
    h = helper()
    first_call = parent(h).steps[0].usage.total_tokens
    child_tokens = h.fn.runs[0].usage.total_tokens
    # A budget the parent's own first call fits in, but not with the child's tokens added.
    budget = first_call + child_tokens // 2
    h2 = helper()
    result = parent(h2, budget=budget)
    assert result.stop_cause is StopCause.TOKEN_BUDGET
    assert len(result.steps) == 1  # stopped before its second call
    assert "investigate" in result.stop_detail


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
