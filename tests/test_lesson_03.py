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
