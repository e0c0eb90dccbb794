"""Lesson 04's check, check_run_call: the notebook's reference passes, realistic mistakes fail
the right case with a message that says what to fix, and junk never escapes the check."""

from __future__ import annotations

import json

import jsonschema
import pytest
from notebook_cells import solution

from primer.course.practice.error_results import CASES, check_run_call, shop_tools


def judge(fn):
    return check_run_call(fn, show=False)


def result(call, content, is_error=False):
    return {"type": "tool_result", "tool_use_id": call["id"], "content": content,
            "is_error": is_error}


def schema_of(tools, name):
    return next(d["input_schema"] for d in tools.definitions if d["name"] == name)


def reference(call, tools):
    return solution("04", "run_call")(call, tools)


def lets_it_raise(call, tools):                        # lesson 03's happy path only
    return result(call, json.dumps(tools[call["name"]](**call["input"])))


def catches_but_never_validates(call, tools):          # the tool sees a text quantity
    try:
        return result(call, json.dumps(tools[call["name"]](**call["input"])))
    except Exception as e:  # noqa: BLE001
        return result(call, f"{type(e).__name__}: {e}", True)


def unknown_without_the_list(call, tools):             # says no, not what exists
    if call["name"] not in tools:
        return result(call, f"Error: no tool called {call['name']}.", True)
    return reference(call, tools)


def validates_without_the_field(call, tools):          # jsonschema's message alone
    name = call["name"]
    if name in tools:
        try:
            jsonschema.validate(call["input"], schema_of(tools, name))
        except jsonschema.ValidationError as e:
            return result(call, f"invalid input: {e.message}", True)
    return reference(call, tools)


def forgets_is_error(call, tools):                     # the error reads like a result
    block = reference(call, tools)
    return {**block, "is_error": False}


def hides_the_message(call, tools):                    # "something went wrong"
    try:
        jsonschema.validate(call["input"], schema_of(tools, call["name"]))
        return result(call, json.dumps(tools[call["name"]](**call["input"])))
    except jsonschema.ValidationError as e:
        return result(call, f"{call['name']}: bad input at {e.json_path}: {e.message}", True)
    except StopIteration:
        return result(call, f"Unknown tool. Available tools: {', '.join(tools)}.", True)
    except Exception:  # noqa: BLE001
        return result(call, "The tool failed. Please try again.", True)


def sends_the_raw_value(call, tools):                  # content must be text
    block = reference(call, tools)
    if not block["is_error"]:
        block["content"] = json.loads(block["content"])
    return block


def makes_up_an_id(call, tools):                       # the API cannot pair it
    return {**reference(call, tools), "tool_use_id": "result_1"}


#: mistake -> (function, case that fails, words of its FAIL line)
GALLERY = {
    "lets every failure raise": (lets_it_raise, "unknown tool", "catch it and return an "
                                 "is_error tool_result"),
    "catches but never validates": (catches_but_never_validates, "wrong type",
                                    "before calling it"),
    "unknown tool without the list": (unknown_without_the_list, "unknown tool",
                                      "does not name get_price, quote"),
    "jsonschema's message without the field": (validates_without_the_field, "wrong type",
                                               "does not name quantity"),
    "errors not marked": (forgets_is_error, "missing argument", "mark every failure"),
    "hides the exception's message": (hides_the_message, "tool that raises",
                                      "pass on the exception's message"),
    "sends the raw value": (sends_the_raw_value, "valid call", "content is a dict"),
    "makes up an id": (makes_up_an_id, "valid call", "copy call['id']"),
}


def test_the_notebooks_reference_passes_every_case():
    report = judge(solution("04", "run_call"))
    assert report.ok and report.total == len(CASES) == 6


def test_the_gallery_holds_realistic_mistakes():
    assert len(GALLERY) >= 4


@pytest.mark.parametrize("mistake", GALLERY)
def test_each_mistake_fails_its_case_saying_what_to_fix(mistake):
    fn, case, words = GALLERY[mistake]
    report = judge(fn)
    assert case in report.failed, report
    assert words in report.detail(case), report.detail(case)


def test_a_tool_that_ran_on_bad_input_is_named_with_what_it_returned():
    detail = judge(catches_but_never_validates).detail("wrong type")
    assert detail.startswith("quote ran with {'sku': 'KB-01', 'quantity': '2'}")


def test_the_shop_tools_look_like_the_coding_rounds():
    ran = []
    tools = shop_tools(ran)
    assert sorted(tools) == ["get_price", "quote"]
    assert [d["name"] for d in tools.definitions] == ["get_price", "quote"]
    assert schema_of(tools, "quote")["required"] == ["sku", "quantity"]
    assert tools["quote"](sku="KB-01", quantity=2)["total"] == 5000
    assert ran == [("quote", {"sku": "KB-01", "quantity": 2})]


@pytest.mark.parametrize("junk", [
    lambda call, tools: None,
    lambda call, tools: 1 / 0,
    lambda call, tools: "ok",
    lambda call, tools: {"type": "tool_result"},
    lambda call, tools: {"type": "tool_result", "tool_use_id": call["id"], "content": None},
    lambda call: None,
])
def test_junk_is_a_failure_never_an_exception(junk):
    report = judge(junk)
    assert report.score == 0 and report.total == 6


def test_a_value_that_is_not_a_function_is_refused():
    with pytest.raises(TypeError):
        check_run_call(None)
