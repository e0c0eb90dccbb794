"""Lesson 02's check, check_execute: the reference passes, realistic mistakes fail the right
case with a message that says what to fix, and junk never escapes the check."""

from __future__ import annotations

import json

import pytest
from jsonschema import ValidationError, validate
from notebook_cells import solution

from primer.course.practice.registry import check_execute


def judge(fn, registry=None):
    return check_execute(fn, registry, show=False)


def reference():
    return solution("02", "execute")


def result(call, content, is_error=False):
    return {"type": "tool_result", "tool_use_id": call["id"], "content": content,
            "is_error": is_error}


def lets_it_raise(registry, call):                     # no error handling at all
    definition, fn = registry[call["name"]]
    return result(call, json.dumps(fn(**call["input"])))


def unknown_without_the_list(registry, call):          # says no, but not what exists
    if call["name"] not in registry:
        return result(call, "Error: tool not found.", True)
    return reference()(registry, call)


def checks_required_keys_by_hand(registry, call):      # no types, no extra keys
    if call["name"] not in registry:
        return reference()(registry, call)
    definition, fn = registry[call["name"]]
    missing = [k for k in definition["input_schema"].get("required", [])
               if k not in call["input"]]
    if missing:
        return result(call, f"missing argument: {missing[0]}", True)
    try:
        value = fn(**call["input"])
    except Exception as e:  # noqa: BLE001
        return result(call, str(e), True)
    return result(call, value if isinstance(value, str) else json.dumps(value))


def swallows_the_message(registry, call):              # a bare "failed" teaches nothing
    if call["name"] in registry:
        definition, fn = registry[call["name"]]
        try:
            validate(call["input"], definition["input_schema"])
        except ValidationError as e:
            return result(call, e.message, True)
        try:
            value = fn(**call["input"])
        except Exception:  # noqa: BLE001
            return result(call, "the tool failed", True)
        return result(call, value if isinstance(value, str) else json.dumps(value))
    return reference()(registry, call)


def str_of_the_dict(registry, call):                   # str() is not JSON
    block = reference()(registry, call)
    if not block["is_error"] and block["content"].startswith("{"):
        block["content"] = str(json.loads(block["content"]))
    return block


def errors_without_the_flag(registry, call):           # an error the model reads as data
    return dict(reference()(registry, call), is_error=False)


def its_own_id(registry, call):                        # invents an id: the pairing breaks
    return dict(reference()(registry, call), tool_use_id="result_1")


def test_the_notebooks_reference_solution_scores_full_marks_with_its_registry():
    report = judge(reference(), solution("02", "registry"))
    assert report.ok, str(report)


@pytest.mark.parametrize("fn, case, says", [
    (lets_it_raise, "unknown tool", "raised KeyError: 'delete_orders' at line 2"),
    (lets_it_raise, "the function raises", "raised ValueError"),
    (unknown_without_the_list, "unknown tool", "does not name 'delete_orders'"),
    (checks_required_keys_by_hand, "wrong type", "jsonschema.validate"),
    (swallows_the_message, "the function raises", "the exception's message"),
    (str_of_the_dict, "a result that is not a string", "str() of a dict is not JSON"),
    (errors_without_the_flag, "missing argument", "set 'is_error': True"),
    (its_own_id, "a good call", "so the API can pair the result with its call"),
])
def test_a_broken_execute_fails_the_right_case_with_a_fix(fn, case, says):
    report = judge(fn)
    assert case in report.failed, str(report)
    assert says in report.detail(case)


def test_a_number_given_as_text_is_refused_not_converted():
    def converts(registry, call):
        args = dict(call["input"])
        if isinstance(args.get("amount"), str):
            args["amount"] = 10.0
        return reference()(registry, dict(call, input=args))
    report = judge(converts)
    assert report.failed == ["wrong type"]
    assert "a failure came back with is_error false" in report.detail("wrong type")


@pytest.mark.parametrize("registry, says", [
    ({}, "make it a dict"),
    ({"get_weather": ({"name": "get_weather", "description": "...",
                       "input_schema": {"type": "object", "properties": {"city": {}}}},
                      print)}, "what the tool does and when to use it"),
    ({"get_weather": ({"name": "weather", "description": "Weather for a city; use it when "
                       "asked.", "input_schema": {"type": "object", "properties": {"c": {}}}},
                      print)}, "holds a definition named 'weather'"),
    ({"get_weather": ({"name": "get_weather", "description": "Weather for a city; use it "
                       "when asked.", "input_schema": {"city": "string"}}, print)},
     "must be a JSON Schema object"),
    ({"get_weather": {"name": "get_weather"}}, "each entry is a pair"),
])
def test_a_broken_registry_fails_its_own_case(registry, says):
    report = judge(reference(), registry)
    assert report.failed == ["your tool definition"], str(report)
    assert says in report.detail("your tool definition")


@pytest.mark.parametrize("junk", [
    lambda registry, call: None,
    lambda registry, call: "ok",
    lambda registry, call: {"type": "tool_result"},
    lambda registry, call: 1 / 0,
    lambda: None,
])
def test_junk_fails_every_case_and_never_escapes(junk):
    assert judge(junk).score == 0


def test_without_a_registry_there_are_seven_cases_and_the_output_names_each(capsys):
    check_execute(lets_it_raise)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8 and lines[-1] == "score: 1/7"
