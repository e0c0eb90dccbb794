"""Scorers judge one run each: answer, stop cause, tool order, cost, and a judge model."""

from __future__ import annotations

import pytest

from primer.harness.evals.scorers import (
    AnswerContains,
    CostUnder,
    ModelGraded,
    StopCauseIs,
    ToolsInOrder,
    scorer_name,
)
from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.model import Reply, ScriptedLLM, Usage, tool_reply
from primer.scenarios import get_demo
from primer.scenarios.relay import next_code, peek_code
from primer.scenarios.suite import scripted_judge


def run(*replies, **config):
    return run_production(ScriptedLLM(list(replies)), "what is it?", [next_code, peek_code],
                          config=AgentConfig(**config))


def test_answer_contains_needs_every_text_and_an_answer():
    result = run("it is 42 [kb-1]")
    assert AnswerContains("42", "[kb-1]")(result)
    assert not AnswerContains("42", "[kb-2]")(result)
    stopped = run(tool_reply(("next_code", {"code": "a"})), max_steps=1)
    assert stopped.final_text is None and not AnswerContains("42")(stopped)
    with pytest.raises(ValueError, match="non-empty"):
        AnswerContains()


def test_stop_cause_is_compares_the_exit_and_refuses_a_name_that_is_no_stop_cause():
    stopped = run(tool_reply(("next_code", {"code": "a"})), max_steps=1)
    assert StopCauseIs("max_steps")(stopped) and not StopCauseIs("end_turn")(stopped)
    with pytest.raises(ValueError):
        StopCauseIs("finished")


def test_tools_in_order_allows_calls_between_unless_exact():
    result = run(tool_reply(("next_code", {"code": "a"})), tool_reply(("next_code", {"code": "b"})),
                 tool_reply(("peek_code", {"code": "b"})), "42")
    assert ToolsInOrder("next_code", "peek_code")(result)
    assert not ToolsInOrder("peek_code", "next_code")(result)
    exact = ToolsInOrder("next_code", "peek_code", exact=True)(result)
    assert not exact and "['next_code', 'next_code', 'peek_code']" in exact.reason
    assert ToolsInOrder("next_code", "next_code", "peek_code", exact=True)(result)


def test_cost_under_passes_at_or_below_the_cap_and_says_both_figures():
    result = run("42")
    assert CostUnder(result.cost_usd)(result)
    verdict = CostUnder(result.cost_usd / 2)(result)
    assert not verdict and f"cost {result.cost_usd:.4f} USD" in verdict.reason
    with pytest.raises(ValueError, match="finite"):
        CostUnder(-1)


def test_a_model_graded_check_passes_or_fails_with_the_judges_reason():
    pto = get_demo("pto").run()
    judge = scripted_judge()
    good = ModelGraded(judge, "The answer gives alice's balance, 12 days, and cites [hr-001].")
    bad = ModelGraded(judge, "The answer says alice has 15 days left.")
    assert good(pto).passed
    verdict = bad(pto)
    assert not verdict and "15" in verdict.reason


def test_the_judge_sees_the_task_the_answer_and_the_criteria():
    seen = []

    def judge_policy(messages):
        seen.append(messages[-1]["content"])
        return "PASS. fine."

    result = run("it is 42")
    assert ModelGraded(ScriptedLLM(judge_policy), "Says 42.")(result)
    assert seen == ["Task:\nwhat is it?\n\nAnswer:\nit is 42\n\nCriteria:\nSays 42."]


def test_a_judge_reply_without_a_verdict_or_a_judge_that_raises_is_a_fail_not_a_pass():
    result = run("it is 42")
    rambling = ModelGraded(ScriptedLLM(lambda m: "Well, it depends."), "Says 42.")(result)
    assert not rambling and "did not start with PASS or FAIL" in rambling.reason

    def broken(**kwargs):
        raise ConnectionError("judge offline")

    failed = ModelGraded(broken, "Says 42.")(result)
    assert not failed and "ConnectionError: judge offline" in failed.reason


def test_a_judge_grading_a_run_with_no_answer_is_told_so():
    stopped = run(tool_reply(("next_code", {"code": "a"})), max_steps=1)
    verdict = ModelGraded(scripted_judge(), "Says 42.")(stopped)
    assert not verdict and "no answer" in verdict.reason


def test_any_llm_can_judge_including_one_returning_a_reply_object():
    def claude_like(*, system, messages, tools, max_tokens):
        assert tools == [] and "PASS or FAIL" in system
        return Reply([{"type": "text", "text": "FAIL: the total is wrong."}], "end_turn",
                     Usage(10, 5), "judge")

    verdict = ModelGraded(claude_like, "Says 43.")(run("it is 42"))
    assert not verdict and verdict.reason == "the total is wrong"


def test_scorer_names_are_snake_case_class_names_or_the_function_name():
    def looks_polite(result):
        return True

    assert scorer_name(AnswerContains("x")) == "answer_contains"
    assert scorer_name(ToolsInOrder("a")) == "tools_in_order"
    assert scorer_name(ModelGraded(scripted_judge(), "x")) == "model_graded"
    assert scorer_name(looks_polite) == "looks_polite"
