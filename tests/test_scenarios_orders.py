"""The order-A123 world: its tools, and the four scripted models, one per exit."""

from __future__ import annotations

import json

import pytest

from primer.loop.state import StopCause
from primer.loop.tools import ToolError, ToolRegistry
from primer.scenarios import get_demo, orders
from primer.scenarios.policy import Observation


def run(name):
    return get_demo(name).run()


def test_get_order_returns_the_keyboard_order_for_a123():
    order = orders.get_order(order_id="A123")
    assert (order["item"], order["unit_price"], order["quantity"]) == ("keyboard", 2500, 2)


def test_an_unknown_order_id_raises_a_tool_error_showing_what_ids_look_like():
    with pytest.raises(ToolError, match="capital letter followed by three digits.*A123"):
        orders.get_order(order_id="Z9")


@pytest.mark.parametrize("expression, value", [
    ("2500 * 2 * 1.18", 2500 * 2 * 1.18), ("-(3 + 4) * 2", -14), ("2 ** 10", 1024),
    ("7 / 2", 3.5), ("+1.5 - 0.5", 1.0)])
def test_the_calculator_computes_arithmetic_from_the_syntax_tree(expression, value):
    assert orders.calculator(expression=expression) == value


@pytest.mark.parametrize("expression", [
    "__import__('os')", "(1).__class__", "abs(-1)", "x + 1", "[1, 2]", "1 if 1 else 2",
    "'a' * 3", "True + 1"])
def test_the_calculator_rejects_anything_but_arithmetic_and_says_what_is_allowed(expression):
    with pytest.raises(ToolError, match=r"Use only numbers, \+ - \* / \*\*"):
        orders.calculator(expression=expression)


@pytest.mark.parametrize("expression, problem", [
    ("1 / 0", "divides by zero"), ("10 ** 1000", "Exponents are limited"),
    ("2 +", "Cannot parse"), ("1" * 300, "characters long"), ("1e308 * 10", "finite")])
def test_the_calculator_turns_bad_expressions_into_tool_errors(expression, problem):
    with pytest.raises(ToolError, match=problem):
        orders.calculator(expression=expression)


def test_the_calculator_rejects_an_import_through_the_registry_as_an_error_result():
    registry = ToolRegistry(orders.make_tools())
    execution = registry.run({"id": "t1", "name": "calculator",
                              "input": {"expression": "__import__('os').system('ls')"}})
    assert execution.is_error and execution.error_kind == "tool_error"
    assert "not allowed" in execution.content


def test_the_recovering_model_fixes_its_argument_name_after_the_schema_error_and_answers_5900():
    result = run("orders")
    assert result.stop_cause is StopCause.END_TURN
    calls = [(e.name, e.input, e.is_error) for e in result.executions]
    assert calls[0] == ("get_order", {"id": "A123"}, True)
    assert "order_id" in result.executions[0].content
    assert calls[1] == ("get_order", {"order_id": "A123"}, False)
    assert calls[2] == ("calculator", {"expression": "2500 * 2 * 1.18"}, False)
    assert json.loads(result.executions[2].content) == 2500 * 2 * 1.18
    assert "5900.0 rupees" in result.final_text
    assert len(result.steps) == 4


def test_the_recovering_model_finishes_within_its_limits_of_6_steps_and_3000_tokens():
    demo = get_demo("orders")
    result = demo.run()
    assert (demo.config.max_steps, demo.config.token_budget) == (6, 3000)
    assert len(result.steps) <= 6 and result.usage.total_tokens <= 3000


def test_the_recovering_model_fixes_its_call_because_it_sees_an_error_not_from_a_script():
    registry = ToolRegistry(orders.make_tools())
    first = orders.decide("recover", 1, None)
    execution = registry.run({"id": "t1", "name": first["tool"], "input": first["input"]})
    failed = Observation(execution.name, execution.input, execution.content, True)
    worked = Observation(execution.name, {"order_id": "A123"},
                         json.dumps(orders.get_order(order_id="A123")), False)
    assert orders.decide("recover", 2, failed)["input"] == {"order_id": "A123"}
    assert orders.decide("recover", 2, worked)["tool"] == "calculator"


def test_the_repeating_model_stops_on_loop_detected_at_its_third_identical_call():
    result = run("orders-repeat")
    assert result.stop_cause is StopCause.LOOP_DETECTED
    assert len(result.steps) == 3
    assert len({json.dumps(e.input, sort_keys=True) for e in result.executions}) == 1
    assert result.executions[-1].error_kind == "not_run"


def test_the_wandering_model_tries_a_new_wrong_id_each_step_and_stops_at_4_steps():
    result = run("orders-wander")
    assert result.stop_cause is StopCause.MAX_STEPS
    assert len(result.steps) == 4
    ids = [e.input["order_id"] for e in result.executions]
    assert len(set(ids)) == 4 and "A123" not in ids


def test_the_recovering_model_under_a_400_token_budget_stops_on_the_budget():
    result = run("orders-budget")
    assert get_demo("orders-budget").config.token_budget == 400
    assert result.stop_cause is StopCause.TOKEN_BUDGET
    assert result.final_text is None
    assert result.usage.total_tokens > 400


def test_an_unknown_model_kind_is_refused_with_the_known_kinds():
    with pytest.raises(ValueError, match="recover, repeat, wander, budget"):
        orders.make_llm("lucky")
