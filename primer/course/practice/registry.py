"""Lesson 02's exercise: a tool definition, a registry, and an ``execute`` that never raises.

A registry here is a plain dict, tool name → ``(definition, function)``, where
``definition`` is what the model sees, ``{"name", "description", "input_schema"}``. The
learner writes ``execute(registry, call)``: ``call`` is one ``tool_use`` block
(``{"type": "tool_use", "id", "name", "input"}``) and the return value is its
``tool_result`` block::

    {"type": "tool_result", "tool_use_id": call["id"], "content": str, "is_error": bool}

``content`` is text (a result that is not a string is sent as ``json.dumps`` of it). The
three failures become results with ``"is_error": True``, never exceptions: a name not in
the registry (the message lists the real tools), input that fails the tool's
``input_schema`` (checked before the function runs; nothing is converted), and the
function raising (the message carries the exception's). :func:`check_execute` runs it on a
registry of its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from primer.course.checking import Case, ExerciseReport, Problem, run_cases, short
from primer.course.practice.tool_results import content_text, tool_result_problem

_STOCK_DEF = {
    "name": "get_stock",
    "description": "How many units of a product are in stock. Use it when a customer asks "
                   "whether something is available.",
    "input_schema": {"type": "object",
                     "properties": {"sku": {"type": "string",
                                            "description": "the product code, e.g. KB-101"}},
                     "required": ["sku"], "additionalProperties": False},
}
_PRICE_DEF = {
    "name": "convert_price",
    "description": "Convert a price in rupees to another currency. Use it when a customer "
                   "asks for a price in dollars or euros.",
    "input_schema": {"type": "object",
                     "properties": {"amount": {"type": "number"},
                                    "currency": {"type": "string", "enum": ["USD", "EUR"]}},
                     "required": ["amount", "currency"], "additionalProperties": False},
}
_SKU_ERROR = "no product with sku 'Q1'; skus look like 'KB-101'"


class _Tools:
    """The check's two tools, recording every run so a case can see what executed."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, dict[str, Any]]] = []

    def get_stock(self, sku: str) -> dict[str, Any]:
        self.runs.append(("get_stock", {"sku": sku}))
        if sku != "KB-101":
            raise ValueError(_SKU_ERROR)
        return {"sku": sku, "in_stock": 4}

    def convert_price(self, amount: float, currency: str) -> str:
        self.runs.append(("convert_price", {"amount": amount, "currency": currency}))
        return f"{amount / 90:.2f} {currency}"

    def registry(self) -> dict[str, tuple[dict[str, Any], Callable[..., Any]]]:
        return {"get_stock": (json.loads(json.dumps(_STOCK_DEF)), self.get_stock),
                "convert_price": (json.loads(json.dumps(_PRICE_DEF)), self.convert_price)}


def _block_problem(block: Any, call: dict[str, Any], *, error: bool) -> Problem:
    """What is wrong with ``block`` as the ``tool_result`` for ``call`` (an error when
    ``error``)."""
    problem = tool_result_problem(block, call["id"])
    if problem:
        return problem
    flag = block.get("is_error", False)
    if error and not flag:
        return ("a failure came back with is_error false; set 'is_error': True so the model "
                "knows the call failed")
    if not error and flag:
        return (f"a good call came back with is_error true ({short(block.get('content'))!r}); "
                f"only failures are errors")
    return None


def _run(execute: Callable[..., Any], name: str, args: Any, call_id: str
         ) -> tuple[_Tools, dict[str, Any], Any]:
    tools = _Tools()
    call = {"type": "tool_use", "id": call_id, "name": name, "input": args}
    return tools, call, execute(tools.registry(), call)


def _good_call(execute: Callable[..., Any]) -> Problem:
    tools, call, block = _run(execute, "convert_price", {"amount": 900, "currency": "EUR"},
                              "toolu_good")
    problem = _block_problem(block, call, error=False)
    if problem:
        return problem
    if tools.runs != [("convert_price", {"amount": 900, "currency": "EUR"})]:
        return (f"expected convert_price to run once with the call's input as keyword "
                f"arguments, fn(**call['input']); the tools ran {tools.runs}")
    if content_text(block["content"]) != "10.00 EUR":
        return (f"content is {short(block['content'])!r}, expected the function's result "
                f"'10.00 EUR' as it returned it")
    return None


def _json_result(execute: Callable[..., Any]) -> Problem:
    _, call, block = _run(execute, "get_stock", {"sku": "KB-101"}, "toolu_json")
    if isinstance(block, dict) and isinstance(block.get("content"), dict):
        return ("content is the dict the function returned; the API takes text: send "
                "json.dumps(result)")
    problem = _block_problem(block, call, error=False)
    if problem:
        return problem
    text = content_text(block["content"]) or ""
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if parsed != {"sku": "KB-101", "in_stock": 4}:
        return (f"content is {short(text)!r}, not JSON of the result "
                f"{{'sku': 'KB-101', 'in_stock': 4}}; send json.dumps(result) when the "
                f"result is not a string (str() of a dict is not JSON)")
    return None


def _failure(execute: Callable[..., Any], name: str, args: Any, *, mentions: list[str],
             what: str, hint: str) -> Problem:
    """A call that must come back as an error result naming ``mentions``, running nothing
    (except the raising case, whose one run is expected)."""
    tools, call, block = _run(execute, name, args, f"toolu_{what.replace(' ', '_')}")
    problem = _block_problem(block, call, error=True)
    if problem:
        return problem
    ran = [r for r in tools.runs if r != ("get_stock", {"sku": "Q1"})]
    if ran:
        return (f"the function ran with {short(ran[0][1])} though {what}; validate the input "
                f"against input_schema (jsonschema.validate) before calling")
    text = content_text(block["content"]) or ""
    missing = [m for m in mentions if m not in text]
    if missing:
        return f"the error says {short(text, 70)!r}, which does not name {missing[0]!r}; {hint}"
    return None


def _definition_problem(registry: Any) -> Problem:
    """What is wrong with the learner's own registry (name → (definition, function))."""
    if not isinstance(registry, dict) or not registry:
        return (f"registry is {type(registry).__name__} {short(registry)}; make it a dict, "
                f"tool name → (definition, function)")
    for key, entry in registry.items():
        if not (isinstance(entry, tuple) and len(entry) == 2 and callable(entry[1])):
            return (f"registry[{key!r}] is {short(entry)}; each entry is a pair "
                    f"(definition, function)")
        d = entry[0]
        if not isinstance(d, dict) or set(d) != {"name", "description", "input_schema"}:
            keys = sorted(map(str, d)) if isinstance(d, dict) else type(d).__name__
            return (f"the definition of {key!r} has {keys}; it needs exactly name, "
                    f"description and input_schema")
        if d["name"] != key:
            return f"registry key {key!r} holds a definition named {short(d['name'])!r}"
        if not isinstance(d["description"], str) or len(d["description"].split()) < 5:
            return (f"the description of {key!r} is {short(d['description'])!r}; write a "
                    f"sentence or two: what the tool does and when to use it")
        schema = d["input_schema"]
        if not (isinstance(schema, dict) and schema.get("type") == "object"
                and isinstance(schema.get("properties"), dict)):
            return (f"the input_schema of {key!r} is {short(schema)}; it must be a JSON "
                    f"Schema object: {{'type': 'object', 'properties': {{...}}, "
                    f"'required': [...]}}")
        if not schema["properties"]:
            return f"the input_schema of {key!r} lists no properties; describe each argument"
    return None


def _cases(registry: Any) -> list[Case]:
    cases = [] if registry is None else [
        Case("your tool definition", lambda _fn: _definition_problem(registry),
             "each entry is (definition, function); the definition has a name, a "
             "description and an object input_schema")]
    return cases + [
        Case("a good call", _good_call,
             "the tool ran with the call's input; its result came back under the call's id"),
        Case("a result that is not a string", _json_result,
             "a dict result came back as JSON text"),
        Case("unknown tool", lambda fn: _failure(
            fn, "delete_orders", {}, mentions=["delete_orders", "get_stock", "convert_price"],
            what="the tool does not exist",
            hint="name the unknown tool and list the real ones so the model can pick again"),
             "is_error, naming the unknown tool and listing get_stock and convert_price"),
        Case("missing argument", lambda fn: _failure(
            fn, "get_stock", {}, mentions=["sku"], what="a required argument is missing",
            hint="say which argument is missing (jsonschema's message does)"),
             "is_error naming sku; the function did not run"),
        Case("wrong type", lambda fn: _failure(
            fn, "convert_price", {"amount": "ten", "currency": "EUR"}, mentions=["number"],
            what="amount is not a number",
            hint="say what type was expected (jsonschema's message does)"),
             "is_error saying a number was expected; nothing was converted or run"),
        Case("argument not in the schema", lambda fn: _failure(
            fn, "get_stock", {"sku": "KB-101", "warehouse": "Pune"}, mentions=["warehouse"],
            what="warehouse is not in the schema",
            hint="name the unexpected argument (the schema has additionalProperties false)"),
             "is_error naming warehouse; the function did not run"),
        Case("the function raises", lambda fn: _failure(
            fn, "get_stock", {"sku": "Q1"}, mentions=[_SKU_ERROR], what="it raised",
            hint="put the exception's message in the result: it says how to fix the call"),
             "is_error carrying the exception's message"),
    ]


def check_execute(execute: Callable[..., Any], registry: Any = None, *, show: bool = True
                  ) -> ExerciseReport:
    """Judge lesson 02's ``execute(registry, call) -> tool_result block``.

    ``execute`` is called with the check's own registry (tool name → ``(definition,
    function)``: ``get_stock`` and ``convert_price``) and one ``tool_use`` block; it must
    return ``{"type": "tool_result", "tool_use_id", "content": str, "is_error": bool}`` and
    never raise. Seven cases: a good call, a dict result (sent as JSON), an unknown tool, a
    missing argument, a wrong type, an argument not in the schema, and a function that
    raises. Given the learner's own ``registry``, a first case checks its shape and
    definitions. Prints one PASS/FAIL line per case and the score when ``show``; raises
    ``TypeError`` only when ``execute`` is not callable.
    """
    return run_cases(execute, _cases(registry), what="execute", show=show)
