"""routing.route and orchestrator.orchestrate: one router call; a split decided at run time."""

from __future__ import annotations

import json

import pytest

from primer.harness.patterns.orchestrator import orchestrate, parse_subtasks
from primer.harness.patterns.routing import Route, route
from primer.harness.patterns.workflows import PatternError
from primer.loop.model import ScriptedLLM

ROUTES = [Route("billing", "money questions", lambda text: f"billing: {text}"),
          Route("human", "anything else", lambda text: f"human: {text}")]


@pytest.mark.parametrize("answer", ["billing", " Billing. ", "BILLING"])
def test_the_router_answer_picks_the_route_ignoring_case_and_a_full_stop(answer):
    r = route(ScriptedLLM([answer]), "where is my money", ROUTES, fallback="human")
    assert (r.route, r.fell_back, r.output) == ("billing", False, "billing: where is my money")
    assert r.router_call.label == "route" and r.cost_usd > 0


def test_an_answer_that_names_no_route_goes_to_the_fallback():
    r = route(ScriptedLLM(["I think it is about shoes"]), "shoes?", ROUTES, fallback="human")
    assert (r.route, r.fell_back, r.output) == ("human", True, "human: shoes?")


def test_the_router_prompt_lists_every_route_with_its_description():
    seen = []

    def policy(messages):
        seen.append(messages[-1]["content"])
        return "human"

    route(ScriptedLLM(policy), "hello", ROUTES, fallback="human")
    assert "- billing: money questions" in str(seen[0]) and "- human: anything else" in str(seen[0])


@pytest.mark.parametrize("routes, fallback", [([], "x"), (ROUTES + ROUTES[:1], "human"),
                                              (ROUTES, "nobody")])
def test_bad_routes_or_fallback_are_refused_before_any_call(routes, fallback):
    llm = ScriptedLLM([])
    with pytest.raises(ValueError):
        route(llm, "x", routes, fallback=fallback)


def _split(*instructions):
    return json.dumps([{"id": f"s{k}", "instruction": i} for k, i in enumerate(instructions, 1)])


def test_orchestrate_runs_one_worker_per_subtask_then_combines():
    lead = ScriptedLLM([_split("do a", "do b"), "a and b"])
    worker = ScriptedLLM(lambda messages: "done: " + str(messages[-1]["content"]))
    run = orchestrate(lead, worker, "a then b")
    assert run.outcome == "done" and run.final_text == "a and b"
    assert [c.label for c in run.calls] == ["orchestrate", "worker s1", "worker s2", "synthesise"]
    assert [r.output for r in run.results] == ["done: do a", "done: do b"]
    assert run.model_calls == 4 and run.usage.total_tokens == sum(
        c.usage.total_tokens for c in run.calls)


def test_a_split_over_the_cap_stops_before_any_worker_runs():
    worker = ScriptedLLM([])  # would raise if called
    run = orchestrate(ScriptedLLM([_split("a", "b", "c")]), worker, "abc", max_subtasks=2)
    assert run.outcome == "too_many_subtasks" and run.results == [] and run.final_text is None
    assert run.model_calls == 1


@pytest.mark.parametrize("text", ["not json", "[]", '{"id": 1}', '[{"id": "a"}]',
                                  '[{"id": "a", "instruction": "x"}, {"id": "a", '
                                  '"instruction": "y"}]'])
def test_a_split_that_cannot_be_used_is_a_pattern_error(text):
    with pytest.raises(PatternError):
        parse_subtasks(text)


def test_a_cut_off_worker_is_reported_to_the_synthesis_and_the_run_is_partial():
    from primer.loop.messages import text_block
    from primer.loop.model import Reply
    seen = []

    def lead(messages):
        seen.append(str(messages[-1]["content"]))
        return _split("a", "b") if len(seen) == 1 else "combined"

    worker = ScriptedLLM([Reply([text_block("half")], "max_tokens"), "b done"])
    run = orchestrate(ScriptedLLM(lead), worker, "ab")
    assert run.outcome == "partial" and run.results[0].error and run.results[1].output == "b done"
    assert "(failed:" in seen[1] and "b done" in seen[1]


def test_max_subtasks_below_one_is_refused():
    with pytest.raises(ValueError):
        orchestrate(ScriptedLLM([]), ScriptedLLM([]), "x", max_subtasks=0)


@pytest.mark.parametrize("text", ["[" * 1500 + "]" * 1500, "[" + "9" * 5000 + "]"])
def test_a_split_too_deep_or_with_a_huge_number_is_a_pattern_error(text):
    with pytest.raises(PatternError, match="not JSON"):
        parse_subtasks(text)
