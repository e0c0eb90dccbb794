"""Workflows, ReAct, plan-and-execute and reflection: paths, calls and costs."""

from __future__ import annotations

import json

import pytest

from primer.harness.patterns.workflows import (
    ModelCalls,
    PatternError,
    format_plan,
    parse_plan,
    parse_review,
    react_prompt,
    react_rows,
    reflect,
    run_plan_and_execute,
    run_workflow,
)
from primer.loop.model import ScriptedLLM, text_reply
from primer.loop.state import StopCause
from primer.scenarios import get_demo
from primer.scenarios import support as s


def test_a_workflow_makes_one_call_per_model_step_and_none_for_code_steps():
    llm = ScriptedLLM(lambda m: "refund")
    steps = [("a", lambda r: r.ask("q1")), ("b", lambda r: r.outputs["a"].upper()),
             ("c", lambda r: r.ask("q2"))]
    result = run_workflow(llm, steps, {})
    assert result.model_calls == 2 == llm.calls
    assert result.outputs["b"] == "REFUND" and result.final == "refund"
    assert result.usage.input_tokens == sum(c.usage.input_tokens for c in result.calls)


def test_a_failing_workflow_step_is_named_not_raised():
    steps = [("a", lambda r: r.ask("q")), ("b", lambda r: {}["missing"]), ("c", lambda r: 1)]
    result = run_workflow(ScriptedLLM(["x"]), steps, {})
    assert result.failed_step == "b" and "KeyError" in result.error and result.final is None
    assert "c" not in result.outputs


def test_a_cut_off_reply_is_not_built_on():
    calls = ModelCalls(ScriptedLLM([text_reply("half", stop_reason="max_tokens")]))
    with pytest.raises(PatternError, match="max_tokens"):
        calls.ask("q", label="classify")
    assert calls.count == 1  # still counted: it was paid for


def test_the_workflow_is_cheaper_and_the_agent_handles_the_ticket_off_its_path():
    wf, agent = s.compare()
    assert wf["model calls"] == 2 * len(s.TICKETS)  # classify + draft per ticket
    assert agent["model calls"] > wf["model calls"]
    assert agent["cost USD"] > wf["cost USD"] and agent["input tokens"] > wf["input tokens"]
    off_path = [t for t in s.TICKETS if t.needs]
    assert wf["succeeded"] == len(s.TICKETS) - len(off_path)
    assert agent["succeeded"] == len(s.TICKETS)
    for t in off_path:
        assert not s.handle_with_workflow(t).success and s.handle_with_agent(t).success


def test_a_damaged_item_ticket_naming_an_order_gets_no_refund_amount():
    ticket = s.Ticket("T6", "The keyboard from order A123 arrived broken.", "pol-damaged")
    agent = s.handle_with_agent(ticket)
    assert agent.success and "A123" in agent.reply
    assert s.AMOUNT.search(agent.reply) is None


def test_a_reply_quoting_an_amount_the_ticket_did_not_ask_for_fails():
    ticket = s.Ticket("T6", "The keyboard from order A123 arrived broken.", "pol-damaged")
    right = "We will send a replacement. [pol-damaged]"
    assert s.reply_succeeds(ticket, right)
    assert not s.reply_succeeds(ticket, right + " The keyboard cost 2500 rupees, so that is "
                                                "what you get back.")


def test_every_ticket_is_classified_to_the_policy_it_needs():
    for t in s.TICKETS:
        assert s.POLICY_BY_CATEGORY[s.classify(t.text)] == t.policy_id


def test_react_rows_keep_a_thought_before_each_action():
    result = get_demo("support-agent").run()
    rows = react_rows(result, width=400)
    assert result.stop_cause is StopCause.END_TURN
    assert all(r["thought"].startswith("Thought:") for r in rows[:-1])
    assert rows[-1]["action"] == "answer" and "[pol-returns]" in rows[-1]["observation"]
    assert "Thought:" in react_prompt("base")


def fulfilment_run(replan=True, sell_out=True, **kw):
    world = s.Fulfilment()
    hook = (lambda n: world.sell_out("north") if n == 1 else None) if sell_out else None
    return world, run_plan_and_execute(s.make_planner_llm(), s.PLAN_TASK, world.tools(),
                                       replan=replan, between_steps=hook, **kw)


def test_a_plan_runs_step_by_step_with_two_model_calls_when_nothing_changes():
    world, run = fulfilment_run(sell_out=False)
    assert run.outcome == "done" and run.model_calls == 2 and len(run.plans) == 1
    assert world.shipped == ["A123 from north"]
    assert format_plan(run.plans[0]).splitlines()[0].startswith("1. ")


def test_a_plan_goes_stale_when_a_fact_changes_and_a_replan_recovers():
    world, run = fulfilment_run()
    assert run.log[1]["is_error"] and "out of stock at north" in run.log[1]["result"]
    assert run.outcome == "done" and len(run.plans) == 2 and run.model_calls == 3
    assert world.shipped == ["A123 from south"] and "south" in run.final_text


def test_without_replanning_a_stale_plan_stops_at_the_failed_step():
    world, run = fulfilment_run(replan=False)
    assert run.outcome == "step_failed" and run.final_text is None
    assert world.shipped == [] and run.model_calls == 1 and "reserve" in run.detail


def test_replans_are_capped():
    world = s.Fulfilment(stock={"north": 0, "south": 0})
    run = run_plan_and_execute(s.make_planner_llm(), s.PLAN_TASK, world.tools(), max_replans=1)
    assert run.outcome == "replan_limit" and len(run.plans) == 2 and run.final_text is None


def test_a_plan_that_is_not_json_is_reported():
    run = run_plan_and_execute(ScriptedLLM(["first check stock, then ship"]), "t", [])
    assert run.outcome == "bad_plan" and "not JSON" in run.detail
    with pytest.raises(PatternError, match="step 1"):
        parse_plan(json.dumps([{"tool": 3}]))


def test_reflection_retries_until_the_review_passes_and_counts_the_extra_calls():
    run = reflect(s.make_drafter_llm(), s.make_reviewer_llm(), s.REFLECT_TASK, s.CRITERIA)
    assert run.passed and run.outcome == "passed" and len(run.rounds) == 2
    assert run.model_calls == 4  # draft, review, draft, review
    assert s.review_draft(run.draft)["pass"]
    assert not run.rounds[0][1].passed and len(run.rounds[0][1].problems) == 3


def test_reflection_stops_at_its_retry_cap_and_never_reports_a_pass():
    run = reflect(s.make_drafter_llm(learns=False), s.make_reviewer_llm(), s.REFLECT_TASK,
                  s.CRITERIA, max_retries=2)
    assert not run.passed and run.outcome == "retry_cap"
    assert run.model_calls == 2 * 3


def test_an_unreadable_review_counts_as_a_failed_review():
    assert parse_review("looks good to me!").passed is False
    assert parse_review('{"pass": "yes"}').passed is False
    assert parse_review('{"pass": true, "problems": []}').passed is True
    with pytest.raises(ValueError):
        reflect(ScriptedLLM(["x"]), ScriptedLLM(["y"]), "t", [])
