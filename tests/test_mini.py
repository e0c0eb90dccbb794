"""The stand-alone JSON-text loop of lesson 3, on the order-A123 world."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from primer.loop import mini
from primer.loop.mini import run_mini
from primer.scenarios import orders


def run(kind, **limits):
    return run_mini(orders.mini_model(kind), orders.TASK, orders.mini_tools(), **limits)


def scripted(*replies):
    """A text model that returns ``replies`` in order."""
    it = iter(replies)
    return lambda *, system, messages: next(it)


def test_the_recovering_model_answers_5900_after_fixing_its_call():
    result = run("recover", max_steps=6, token_budget=3000)
    assert result.stop_cause == "end_turn"
    assert "5900.0 rupees" in result.answer
    first = json.loads(result.rows[0]["observation"])
    assert first["is_error"] and "order_id" in first["result"]
    assert len(result.rows) == 4


def test_the_repeating_model_stops_on_its_third_identical_request():
    result = run("repeat", max_steps=6)
    assert (result.stop_cause, len(result.rows), result.answer) == ("loop_detected", 3, None)
    assert result.rows[-1]["observation"] == ""  # the third call never ran


def test_the_wandering_model_stops_at_the_step_limit():
    result = run("wander", max_steps=4)
    assert (result.stop_cause, len(result.rows), result.answer) == ("max_steps", 4, None)


def test_the_recovering_model_under_a_400_token_budget_stops_on_the_budget():
    result = run("budget", max_steps=6, token_budget=400)
    assert result.stop_cause == "token_budget" and result.answer is None
    assert result.total_tokens > 400 >= result.rows[-2]["total"]


def test_token_counts_are_prompt_plus_reply_and_the_total_is_their_running_sum():
    result = run("recover")
    task = result.messages[0]["content"]
    prompt = mini.estimate_tokens(result.system) + mini.estimate_tokens(task)
    assert result.rows[0]["tokens"] == prompt + mini.estimate_tokens(result.rows[0]["model wrote"])
    assert result.total_tokens == sum(r["tokens"] for r in result.rows)


def test_a_reply_that_is_not_json_becomes_an_error_observation_not_a_crash():
    result = run_mini(scripted("the total is 5900", '{"answer": "5900.0"}'), "task", {})
    seen = json.loads(result.rows[0]["observation"])
    assert seen["is_error"] and "not valid JSON" in seen["result"]
    assert result.answer == "5900.0"


def test_a_reply_with_neither_key_becomes_an_error_observation():
    result = run_mini(scripted('{"thought": "hmm"}', '{"answer": "ok"}'), "task", {})
    assert "neither a 'tool' nor an 'answer'" in result.rows[0]["observation"]


def test_an_unknown_tool_lists_the_real_tools():
    result = run_mini(scripted('{"tool": "rm", "input": {}}', '{"answer": "ok"}'), "task",
                      orders.mini_tools())
    assert "Available tools: get_order, calculator" in result.rows[0]["observation"]


def test_a_raising_tool_and_bad_input_become_error_observations():
    replies = ('{"tool": "get_order", "input": {"order_id": "Z1"}}',
               '{"tool": "calculator", "input": "2+2"}', '{"answer": "gave up"}')
    result = run_mini(scripted(*replies), "task", orders.mini_tools())
    first, second = (json.loads(r["observation"]) for r in result.rows[:2])
    assert first["is_error"] and "capital letter" in first["result"]
    assert second["is_error"] and "not a JSON object" in second["result"]


def test_an_argument_of_the_wrong_type_is_refused_before_the_tool_runs():
    ran = []

    def calculator(expression: str) -> float:
        """Evaluate arithmetic."""
        ran.append(expression)
        return 0.0

    replies = ('{"tool": "calculator", "input": {"expression": 5}}', '{"answer": "gave up"}')
    result = run_mini(scripted(*replies), "task", {"calculator": calculator})
    seen = json.loads(result.rows[0]["observation"])
    assert seen["is_error"] and "5 is not of type 'string'" in seen["result"]
    assert '"expression": {"type": "string"}' in seen["result"]  # the schema, to fix the call
    assert ran == []  # refused by the harness, not failed inside the tool


def test_the_check_is_the_registrys_own_for_the_same_function():
    checked = mini.checked_tools(orders.mini_tools())
    for args in ({"id": "A123"}, {"order_id": 123}, {"order_id": "A123", "x": 1}):
        assert checked["get_order"].input_errors(args) == orders.get_order.input_errors(args)


def test_a_tool_parameter_without_a_type_hint_is_refused_before_the_run_starts():
    def untyped(x):
        return x

    with pytest.raises(TypeError, match="run_mini: tool 'untyped'.*'x' needs a type hint"):
        run_mini(scripted('{"answer": "ok"}'), "task", {"untyped": untyped})


def test_the_system_prompt_travels_beside_the_list_not_in_it():
    seen = []

    def model(*, system, messages):
        seen.append((system, [m["role"] for m in messages]))
        return '{"answer": "ok"}'

    result = run_mini(model, "task", orders.mini_tools())
    assert seen == [(result.system, ["user"])]
    assert "get_order(order_id: str) -> dict" in result.system


def test_limits_that_cannot_work_are_refused():
    with pytest.raises(ValueError, match="max_steps >= 1"):
        run_mini(scripted(), "task", {}, max_steps=0)


def test_the_mini_loop_does_not_import_the_production_loop():
    tree = ast.parse(Path(mini.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any("agent_loop" in (m or "") for m in imported)
    assert imported - {"__future__", "inspect", "json", "collections", "collections.abc",
                       "dataclasses", "typing"} == {"messages", "model", "tools"}
