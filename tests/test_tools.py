"""Tools: schemas from typed functions, strict validation, errors as results, parallel calls."""

from __future__ import annotations

import json
import threading

import jsonschema
import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from primer.loop.messages import result_text
from primer.loop.steps import execute_tools
from primer.loop.tools import Tool, ToolError, ToolRegistry, idempotency_key, tool


@tool
def get_order(order_id: str, include_items: bool = True) -> dict:
    """Look up an order by its id.

    Use it before computing any total.

    Args:
        order_id: The order id, like A123.
        include_items: Whether to list
            the line items.
    """
    if order_id != "A123":
        raise ToolError(f"no order {order_id!r}; order ids look like A123")
    return {"id": "A123", "unit_price": 2500, "quantity": 2}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


REGISTRY = ToolRegistry([get_order, add])


def use(name, input, id="toolu_1"):  # noqa: A002 - the field's name
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def returning(value, name="f"):
    """A tool with no arguments that returns ``value``."""
    return Tool(name, "returns a fixed value", {"type": "object"}, lambda: value)


# ---------------------------------------------------------------- @tool

def test_the_schema_comes_from_the_type_hints_with_defaults_optional():
    schema = get_order.input_schema
    assert schema["type"] == "object"
    assert schema["properties"]["order_id"]["type"] == "string"
    assert schema["properties"]["include_items"]["type"] == "boolean"
    assert schema["required"] == ["order_id"]


def test_the_description_and_field_descriptions_come_from_the_docstring():
    assert get_order.name == "get_order"
    assert get_order.description == ("Look up an order by its id. "
                                      "Use it before computing any total.")
    props = get_order.input_schema["properties"]
    assert props["order_id"]["description"] == "The order id, like A123."
    assert props["include_items"]["description"] == "Whether to list the line items."


def test_the_schema_forbids_extra_properties_so_a_misspelt_argument_is_an_error():
    assert get_order.input_schema["additionalProperties"] is False
    problem = get_order.input_errors({"order_id": "A123", "include_itmes": False})
    assert problem is not None and "include_itmes" in problem


class Line(TypedDict):
    sku: str
    qty: int


class Address(BaseModel):
    city: str
    title: str  # a field named like the keyword pydantic adds


@tool
def place(lines: list[Line], ship_to: Address, tags: dict[str, int]) -> str:
    """Place an order."""
    return "placed"


def test_a_misspelt_field_of_a_nested_object_is_an_error_too():
    good = {"lines": [{"sku": "A1", "qty": 1}], "ship_to": {"city": "Oslo", "title": "Dr"},
            "tags": {"any-name": 3}}
    assert place.input_errors(good) is None
    problem = place.input_errors({**good, "lines": [{"sku": "A1", "qty": 1, "qtty": 2}],
                                  "ship_to": {"city": "Oslo", "title": "Dr", "zip": "0150"}})
    assert problem is not None
    assert "at 'lines/0'" in problem and "'qtty' was unexpected" in problem
    assert "at 'ship_to'" in problem and "'zip' was unexpected" in problem


def test_the_nested_schemas_carry_no_titles_but_keep_a_field_named_title():
    text = json.dumps(place.input_schema)
    defs = place.input_schema["$defs"]
    assert set(defs["Address"]["properties"]) == {"city", "title"}
    assert '"title": "' not in text  # no pydantic title keyword left anywhere
    assert place.input_schema["properties"]["tags"]["additionalProperties"] == {
        "type": "integer"}  # a mapping stays open to any key


def test_the_definition_is_exactly_what_the_model_sees():
    assert get_order.definition() == {"name": "get_order",
                                      "description": get_order.description,
                                      "input_schema": get_order.input_schema}


def test_a_parameter_without_a_type_hint_is_refused_by_name():
    def untyped(x):
        """No hints."""

    with pytest.raises(TypeError, match="'x' needs a type hint"):
        tool(untyped)


def test_tool_with_arguments_overrides_name_and_marks_flags():
    @tool(name="refund", side_effecting=True, needs_approval=True, timeout_s=2.0)
    def issue_refund(order_id: str) -> str:
        """Refund an order."""
        return "ok"

    assert (issue_refund.name, issue_refund.side_effecting, issue_refund.needs_approval,
            issue_refund.timeout_s) == ("refund", True, True, 2.0)


def test_an_idempotency_key_parameter_is_hidden_from_the_schema_and_filled_from_the_call_id():
    @tool
    def charge(amount: int, idempotency_key: str) -> str:
        """Charge an amount."""
        return idempotency_key

    assert list(charge.input_schema["properties"]) == ["amount"]
    ran = ToolRegistry([charge]).run(use("charge", {"amount": 5}, id="toolu_9"))
    assert ran.content == idempotency_key("toolu_9")


def test_an_invalid_schema_or_name_is_refused_when_the_tool_is_built():
    with pytest.raises(jsonschema.SchemaError):
        Tool("ok", "d", {"type": "no such type"}, lambda: None)
    with pytest.raises(ValueError, match="must be 1-64 letters"):
        Tool("has space", "d", {"type": "object"}, lambda: None)


# ---------------------------------------------------------------- validation, no coercion

def test_a_string_for_an_integer_field_is_an_error_naming_the_field_not_coerced():
    ran = REGISTRY.run(use("add", {"a": "2", "b": 1}))
    assert ran.is_error and ran.error_kind == "invalid_input"
    assert "at 'a'" in ran.content and "'integer'" in ran.content


@pytest.mark.parametrize("value", [True, 2.0])
def test_a_boolean_or_float_for_an_integer_field_is_an_error_too(value):
    ran = REGISTRY.run(use("add", {"a": value, "b": 1}))
    assert ran.is_error and ran.error_kind == "invalid_input" and "at 'a'" in ran.content


def test_the_schema_error_shows_the_expected_input_schema():
    ran = REGISTRY.run(use("add", {"a": 1}))
    assert "'b' is a required property" in ran.content
    assert json.dumps(add.input_schema, separators=(", ", ": ")) in ran.content


@pytest.mark.parametrize("bad, kind", [([1, 2], "an array"), (None, "null"), (7, "a number"),
                                       (True, "a boolean")])
def test_input_that_is_not_an_object_is_an_error_saying_what_it_was(bad, kind):
    ran = REGISTRY.run(use("add", bad))
    assert ran.is_error and ran.error_kind == "invalid_input"
    assert f"must be a JSON object, not {kind}" in ran.content
    assert '"required": ["a", "b"]' in ran.content


def test_input_that_is_a_json_string_is_refused_rather_than_parsed():
    ran = REGISTRY.run(use("add", '{"a": 1, "b": 2}'))
    assert ran.is_error and ran.error_kind == "invalid_input"
    assert "arrived as text holding a JSON object" in ran.content


@pytest.mark.parametrize("name", ["get_ordr", None, ["get_order"]])
def test_an_unknown_tool_never_runs_and_the_error_lists_the_real_tools(name):
    ran = REGISTRY.run(use(name, {"order_id": "A123"}))
    assert ran.is_error and ran.error_kind == "unknown_tool"
    assert "Available tools: get_order, add." in ran.content


def test_a_near_miss_tool_name_gets_a_suggestion():
    assert "Did you mean 'get_order'?" in REGISTRY.run(use("get_ordr", {})).content


def test_registering_two_tools_with_one_name_is_an_error():
    with pytest.raises(ValueError, match="already registered"):
        ToolRegistry([add, add])


def test_the_registry_renders_definitions_in_registration_order_and_reuses_the_list():
    defs = REGISTRY.definitions()
    assert [d["name"] for d in defs] == ["get_order", "add"]
    assert REGISTRY.definitions() is defs


# ---------------------------------------------------------------- failures and results

def test_a_tool_error_reaches_the_model_as_its_message():
    ran = REGISTRY.run(use("get_order", {"order_id": "B9"}))
    assert (ran.is_error, ran.error_kind) == (True, "tool_error")
    assert ran.content == "no order 'B9'; order ids look like A123"


def test_any_other_exception_becomes_an_error_result_with_its_type():
    def boom():
        raise KeyError("ledger")

    ran = ToolRegistry([Tool("boom", "d", {"type": "object"}, boom)]).run(use("boom", {}))
    assert (ran.is_error, ran.error_kind) == (True, "exception")
    assert ran.content == "boom failed: KeyError: 'ledger'"


def test_a_dict_result_is_sent_as_json_text():
    ran = REGISTRY.run(use("get_order", {"order_id": "A123"}))
    assert not ran.is_error
    assert json.loads(ran.content) == {"id": "A123", "unit_price": 2500, "quantity": 2}


@pytest.mark.parametrize("value, text", [
    ("plain", "plain"), (None, "(no output)"), ("₹5900".encode(), "₹5900"),
    (bytearray(b"ok"), "ok"), ({"total": 5900.0}, '{"total": 5900.0}'), ([1, "a"], '[1, "a"]'),
    (42, "42"), (False, "false"),
])
def test_result_text_turns_each_kind_of_return_value_into_text(value, text):
    assert result_text(value) == (text, None)


@pytest.mark.parametrize("value, words", [
    (b"\xff\xfe", "not UTF-8"), ({1, 2}, "cannot be sent as JSON"),
    (float("nan"), "cannot be sent as JSON"), (object(), "cannot be sent as JSON"),
])
def test_results_that_cannot_be_sent_as_text_are_problems_not_garbled_text(value, words):
    text, problem = result_text(value)
    assert text == "" and words in problem


def test_a_tool_returning_bad_bytes_gives_a_bad_result_error():
    ran = ToolRegistry([returning(b"\xff", "raw")]).run(use("raw", {}))
    assert (ran.is_error, ran.error_kind) == (True, "bad_result")
    assert ran.content.startswith("raw returned 1 bytes that are not UTF-8")


def test_an_execution_answers_its_call_with_one_result_block():
    ran = REGISTRY.run(use("add", {"a": 1, "b": 2}, id="toolu_42"))
    assert ran.result_block() == {"type": "tool_result", "tool_use_id": "toolu_42",
                                  "content": "3", "is_error": False}
    assert json.loads(json.dumps(ran.to_dict()))["tool_use_id"] == "toolu_42"


# ---------------------------------------------------------------- execute_tools

def test_the_calls_of_one_reply_run_at_the_same_time():
    n = 3
    barrier = threading.Barrier(n, timeout=5)

    def meet(k: int) -> int:
        barrier.wait()  # only returns once all n calls are inside their functions
        return k

    meeting = ToolRegistry([Tool("meet", "d", {"type": "object"}, meet)])
    results = execute_tools(meeting, [use("meet", {"k": k}, f"t{k}") for k in range(n)])
    assert [r.content for r in results] == ["0", "1", "2"]
    assert not any(r.is_error for r in results)


def test_results_come_back_in_request_order_even_when_the_first_call_finishes_last():
    second_done = threading.Event()
    finished = []

    def slow() -> str:
        assert second_done.wait(timeout=5)
        finished.append("slow")
        return "slow"

    def fast() -> str:
        finished.append("fast")
        second_done.set()
        return "fast"

    reg = ToolRegistry([Tool("slow", "d", {"type": "object"}, slow),
                        Tool("fast", "d", {"type": "object"}, fast)])
    results = execute_tools(reg, [use("slow", {}, "t1"), use("fast", {}, "t2")])
    assert finished == ["fast", "slow"]
    assert [(r.tool_use_id, r.content) for r in results] == [("t1", "slow"), ("t2", "fast")]


def test_one_failing_call_keeps_its_siblings_results():
    calls = [use("add", {"a": 1, "b": 2}, "t1"), use("nope", {}, "t2"),
             use("get_order", {"order_id": "X"}, "t3"),
             use("get_order", {"order_id": "A123"}, "t4")]
    results = execute_tools(REGISTRY, calls)
    assert [r.tool_use_id for r in results] == ["t1", "t2", "t3", "t4"]
    assert [r.error_kind for r in results] == [None, "unknown_tool", "tool_error", None]


def test_the_pool_never_uses_more_threads_than_its_cap():
    threads = set()
    lock = threading.Lock()

    def where() -> str:
        with lock:
            threads.add(threading.current_thread().name)
        return "ok"

    reg = ToolRegistry([Tool("where", "d", {"type": "object"}, where)])
    execute_tools(reg, [use("where", {}, f"t{k}") for k in range(6)], max_workers=2)
    assert 1 <= len(threads) <= 2


def test_a_single_call_runs_in_the_calling_thread():
    reg = ToolRegistry([Tool("who", "d", {"type": "object"},
                             lambda: threading.current_thread().name)])
    assert execute_tools(reg, [use("who", {})])[0].content == threading.current_thread().name


def test_execute_tools_uses_a_replacement_runner_when_given_one():
    seen = []
    execute_tools(REGISTRY, [use("add", {"a": 1, "b": 1})], run=lambda b: seen.append(b) or
                  REGISTRY.run(b))
    assert [b["name"] for b in seen] == ["add"]
