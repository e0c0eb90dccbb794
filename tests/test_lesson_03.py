"""Lesson 03's figures, recomputed with the library: the numbers its prose cells display."""

from __future__ import annotations

import json

import pytest

from primer.loop.mini import run_mini
from primer.loop.tools import ToolError
from primer.scenarios import orders


def run(kind, **limits):
    return run_mini(orders.mini_model(kind), orders.TASK, orders.mini_tools(), **limits)


def test_the_recovering_run_answers_after_4_calls_and_1342_tokens():
    result = run("recover", max_steps=6, token_budget=3000)
    assert (result.stop_cause, len(result.rows), result.total_tokens) == ("end_turn", 4, 1342)
    assert [r["tokens"] for r in result.rows] == [187, 326, 398, 431]


def test_the_four_models_end_on_four_stop_causes_with_these_tokens():
    cases = [("recover", 6, 3000), ("repeat", 6, 3000), ("wander", 4, 3000), ("budget", 6, 400)]
    got = [(r.stop_cause, len(r.rows), r.total_tokens)
           for r in (run(k, max_steps=s, token_budget=b) for k, s, b in cases)]
    assert got == [("end_turn", 4, 1342), ("loop_detected", 3, 963), ("max_steps", 4, 1177),
                   ("token_budget", 2, 513)]


def test_the_wanderer_ran_a_tool_on_its_last_allowed_step_that_no_call_reads():
    wander = run("wander", max_steps=4, token_budget=3000)
    last = json.loads(wander.rows[-1]["observation"])
    assert last["tool"] == "get_order" and "'A0123'" in last["result"]
    assert wander.messages[-1]["role"] == "user"  # the result was appended after the last call


@pytest.mark.parametrize("expression", ["__import__('os').getcwd()",
                                        "open('secrets.txt').read()", "2 ** 1000000"])
def test_the_calculator_refuses_what_is_not_arithmetic(expression):
    with pytest.raises(ToolError):
        orders.evaluate(expression)
    assert orders.evaluate("2500 * 2 * 1.18") == 5900.0


def test_the_same_run_costs_1342_in_run_mini_1988_in_the_ten_line_loop_2408_in_run_agent():
    from primer.loop.config import AgentConfig
    from primer.loop.loop import run_agent
    from primer.loop.mini import system_prompt, ten_line_loop
    from primer.loop.model import estimate_tokens
    from primer.loop.state import HANDOFF_TOOL_DEF
    from primer.loop.tools import ToolRegistry

    mini = run("recover", max_steps=6, token_budget=3000)
    definitions = ToolRegistry(orders.make_tools()).definitions()
    _, replies = ten_line_loop(orders.make_llm("recover"), orders.TASK,
                               ToolRegistry(orders.make_tools()), system=orders.SYSTEM)
    api_total = sum(r.usage.total_tokens for r in replies)
    handoff = estimate_tokens([*definitions, HANDOFF_TOOL_DEF]) - estimate_tokens(definitions)
    production = run_agent(orders.make_llm(), orders.TASK, orders.make_tools(),
                           system=orders.SYSTEM, config=AgentConfig(max_steps=6,
                                                                    token_budget=3000))
    assert (mini.total_tokens, api_total, production.usage.total_tokens) == (1342, 1988, 2408)
    assert (estimate_tokens(system_prompt(orders.mini_tools())), estimate_tokens(definitions),
            handoff) == (148, 208, 105)
    assert api_total + len(replies) * handoff == production.usage.total_tokens
    assert len(replies) == len(mini.rows) == len(production.steps) == 4


def test_the_model_that_answers_at_once_ends_end_turn_with_a_wrong_answer():
    from primer.loop.mini import run_mini as run_it

    def my_model(*, system, messages):
        return json.dumps({"answer": "About 6000 rupees, I think."})

    tools = orders.mini_tools()
    mine = run_it(my_model, orders.TASK, tools, max_steps=5)
    order = tools["get_order"](order_id="A123")
    right = tools["calculator"](expression=f"{order['unit_price']} * {order['quantity']} * 1.18")
    assert (mine.stop_cause, len(mine.rows), right) == ("end_turn", 1, 5900.0)
    assert "5900" not in mine.answer


def test_the_reference_loop_passes_5_of_the_batterys_11():
    from notebook_cells import solution

    from primer.course.exercises import check_loop
    report = check_loop(solution("03", "my_loop"), show=False)
    assert (report.score, report.total) == (5, 11)
