"""Lesson 04's exercise: run one ``tool_use`` block and return its ``tool_result``, never raising.

The learner writes::

    def run_call(call, tools) -> dict:
        # call:  {"type": "tool_use", "id", "name", "input"}
        # tools: dict name -> function, plus tools.definitions (the coding round's tools)
        # returns {"type": "tool_result", "tool_use_id": call["id"], "content": str,
        #          "is_error": bool}

Every failure is an ``is_error`` result the model can act on: an unknown name lists the
real tools; input that fails the tool's ``input_schema`` (found in ``tools.definitions``)
names the field and the tool does not run; a function that raises passes its message on.
``tools`` has the shape of the coding round's (:class:`~primer.course.exercises.Toolbox`),
so lesson 05 can call ``run_call`` from the loop of lesson 03. :func:`check_run_call` runs the
learner's function on a small shop (:func:`shop_tools`) it has never seen: the tools
``get_price`` and ``quote``, whose ``quote(sku, quantity)`` multiplies without checking
types, so a quantity sent as the text ``"2"`` makes it return garbage unless the input is
checked against the schema first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from primer.course.checking import (
    Case,
    ExerciseReport,
    Problem,
    describe_exception,
    run_cases,
    short,
)
from primer.course.exercises import Toolbox
from primer.course.practice.tool_results import content_text, tool_result_problem
from primer.loop.tools import tool

#: The shop's catalogue: sku → unit price in rupees.
PRICES = {"KB-01": 2500, "MS-02": 800}


def shop_tools(ran: list[tuple[str, dict[str, Any]]] | None = None) -> Toolbox:
    """The shop's tools as the coding round hands them over: a dict name → function
    (``get_price(sku)``, ``quote(sku, quantity)``) whose ``definitions`` are the tool
    definitions the model sees (``input_schema`` from the type hints). Each call is
    appended to ``ran`` as ``(name, input)`` when a list is given. An unknown sku raises
    ``LookupError`` with a message naming the real skus; ``quote`` does not check the type
    of ``quantity`` (the schema is the check)."""
    log = ran if ran is not None else []

    def get_price(sku: str) -> dict:
        """The unit price of a product, in rupees. Use it before quoting.

        Args:
            sku: the product code, e.g. "KB-01".
        """
        log.append(("get_price", {"sku": sku}))
        if sku not in PRICES:
            raise LookupError(f"no product with sku {sku!r}; skus look like 'KB-01' "
                              f"(known: {', '.join(PRICES)})")
        return {"sku": sku, "unit_price": PRICES[sku]}

    def quote(sku: str, quantity: int) -> dict:
        """The price of ``quantity`` units of one product, in rupees.

        Args:
            sku: the product code, e.g. "KB-01".
            quantity: how many units, a whole number.
        """
        log.append(("quote", {"sku": sku, "quantity": quantity}))
        unit = PRICES.get(sku, 0)
        return {"sku": sku, "quantity": quantity, "total": unit * quantity}

    functions = (get_price, quote)
    for fn in functions:
        fn.__qualname__ = fn.__name__  # Python's TypeError for a bad call names it: quote()
    return Toolbox({fn.__name__: fn for fn in functions},
                   [dict(tool(fn).definition()) for fn in functions])


def _call(name: str, given: dict[str, Any], n: int) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_check_{n}", "name": name, "input": given}


def _text(content: Any) -> str:
    return content_text(content) or ""


def _run(fn: Callable[..., Any], name: str, given: dict[str, Any], n: int
         ) -> tuple[dict[str, Any] | None, list[tuple[str, dict[str, Any]]], Problem]:
    """Call ``fn`` on one call to the shop: (the block, the tool runs, a problem or None)."""
    ran: list[tuple[str, dict[str, Any]]] = []
    tools = shop_tools(ran)
    call = _call(name, given, n)
    try:
        block = fn(json.loads(json.dumps(call)), tools)
    except Exception as e:  # noqa: BLE001 - the learner's exception is the verdict
        return None, ran, (f"{describe_exception(e, fn)}; catch it and return an is_error "
                           f"tool_result: an exception here ends the whole run")
    return block, ran, tool_result_problem(block, call["id"])


def _error_case(name: str, given: dict[str, Any], n: int, what: str,
                mention: tuple[str, ...], any_of: bool = False,
                must_not_run: str | None = None, fix: str = "") -> Callable[..., Problem]:
    """A probe: the call must come back as an error naming ``mention`` (all of them, or one
    when ``any_of``), and tool ``must_not_run`` must not have run."""

    def probe(fn: Callable[..., Any]) -> Problem:
        block, ran, problem = _run(fn, name, given, n)
        if problem or block is None:
            return problem
        text = _text(block.get("content"))
        if must_not_run and any(tool_name == must_not_run for tool_name, _ in ran):
            got = next(g for t, g in ran if t == must_not_run)
            return (f"{must_not_run} ran with {got} and returned {short(text)}; check the "
                    f"input against the tool's input_schema (in tools.definitions) before "
                    f"calling it, e.g. with jsonschema.validate, so a bad call never runs")
        if block.get("is_error") is not True:
            return (f"{what} came back with is_error {block.get('is_error')!r} and content "
                    f"{short(text)}; mark every failure \"is_error\": True")
        found = [m for m in mention if m in text]
        if (not found) if any_of else (len(found) < len(mention)):
            missing = [m for m in mention if m not in text]
            return (f"the error {short(text, 70)} does not name "
                    f"{' or '.join(missing) if any_of else ', '.join(missing)}; {fix}")
        return None

    return probe


def _good_call(fn: Callable[..., Any]) -> Problem:
    block, ran, problem = _run(fn, "quote", {"sku": "KB-01", "quantity": 2}, 1)
    if problem or block is None:
        return problem
    if len(ran) != 1:
        return f"quote ran {len(ran)} times for one call; run the tool once per call"
    if block.get("is_error"):
        return (f"a valid quote call came back as an error: {short(_text(block['content']))}; "
                f"run the tool when its input is valid")
    try:
        value = json.loads(_text(block["content"]))
    except ValueError:
        return (f"content was {short(_text(block['content']))}, not JSON; send "
                f"json.dumps(output) so the model reads the tool's value as it was")
    expected = {"sku": "KB-01", "quantity": 2, "total": 5000}
    if value != expected:
        return f"content held {short(value)}; expected the tool's output {expected}"
    return None


#: The cases, in the order printed.
CASES: tuple[Case, ...] = (
    Case("valid call", _good_call,
         "quote(KB-01, 2) ran once; its output came back as JSON text, is_error false"),
    Case("unknown tool", _error_case(
        "lookup_price", {"sku": "KB-01"}, 2, "the call to lookup_price, a tool that "
        "does not exist,", ("get_price", "quote"),
        fix="list the real tools (e.g. ', '.join(tools)) so the model can pick one"),
         "lookup_price came back as an error listing get_price and quote"),
    Case("missing argument", _error_case(
        "quote", {"sku": "KB-01"}, 3, "quote without quantity", ("quantity",),
        must_not_run="quote", fix="name the missing field, e.g. from the schema's 'required'"),
         "quote without quantity did not run; the error names quantity"),
    Case("wrong type", _error_case(
        "quote", {"sku": "KB-01", "quantity": "2"}, 4, "quantity sent as the text '2'",
        ("quantity",), must_not_run="quote",
        fix="name the field whose value is wrong (a jsonschema error's .path holds it), not "
            "only the value"),
         "quantity '2' (text) was refused before quote ran; the error names quantity"),
    Case("unexpected argument", _error_case(
        "quote", {"sku": "KB-01", "quantity": 2, "rush": True}, 5, "quote with an extra "
        "argument rush", ("rush",), must_not_run="quote",
        fix="name the argument the schema does not allow"),
         "quote with rush=True did not run; the error names rush"),
    Case("tool that raises", _error_case(
        "get_price", {"sku": "ZZ-99"}, 6, "get_price of an unknown sku (it raises "
        "LookupError)", ("no product with sku", "KB-01"),
        fix="pass on the exception's message (str(e)): it says what to send instead"),
         "get_price's LookupError came back as an error with its message"),
)


def check_run_call(fn: Callable[..., Any], *, show: bool = True) -> ExerciseReport:
    """Run the learner's ``run_call(call, tools) -> tool_result block`` on :data:`CASES`.

    Each case hands ``fn`` one ``tool_use`` block and a fresh :func:`shop_tools`, and
    checks the block it returns: its shape (``type``, the call's ``tool_use_id``, string
    ``content``, boolean ``is_error``), that failures are ``is_error`` results naming what
    to fix, and that input failing the schema never reaches the tool. Prints one
    ``PASS``/``FAIL`` line per case and ``score: k/6`` when ``show``; returns the
    :class:`~primer.course.checking.ExerciseReport`. Never raises because of ``fn``;
    ``TypeError`` when ``fn`` is not callable.
    """
    return run_cases(fn, CASES, what="run_call", show=show)
