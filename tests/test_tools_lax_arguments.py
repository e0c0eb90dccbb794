"""Argument mode: strict by default (what the lessons teach); an opt-in lax mode converts a
value of the wrong JSON type as pydantic's lax mode does, and records each conversion."""

from __future__ import annotations

import pytest

from primer.harness.production import run_production
from primer.harness.tracing.trace import load_trace
from primer.loop.loop import run_agent
from primer.loop.model import ScriptedLLM, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import Tool, tool

SEEN: list[dict] = []


def make_transfer(mode: str) -> Tool:
    @tool(argument_mode=mode)
    def transfer(amount: float, count: int, urgent: bool = False,
                 memo: str | None = None, limit: int | None = None) -> str:
        """Send money.

        Args:
            amount: USD
            count: how many transfers
        """
        SEEN.append({"amount": amount, "count": count, "urgent": urgent, "limit": limit})
        return f"sent {amount!r} x {count!r}"

    return transfer


def one_call(t: Tool, args: dict, **kw):
    SEEN.clear()
    return run_agent(ScriptedLLM([tool_reply((t.name, args)), "done"]), "t", [t], **kw)


def test_strict_is_the_default_and_refuses_a_number_sent_as_text():
    t = make_transfer("strict")
    assert Tool("x", "x", {"type": "object"}, lambda: "").argument_mode == "strict"
    result = one_call(t, {"amount": "98.7", "count": "7"})
    (e,) = result.steps[0].executions
    assert e.error_kind == "invalid_input" and "'98.7' is not of type 'number'" in e.content
    assert SEEN == [] and e.coerced == []


def test_lax_converts_text_to_a_number_and_an_integer_and_records_each_conversion():
    t = make_transfer("lax")
    result = one_call(t, {"amount": "98.7", "count": "7", "urgent": "yes"})
    (e,) = result.steps[0].executions
    assert (e.is_error, e.content) == (False, "sent 98.7 x 7")
    assert SEEN == [{"amount": 98.7, "count": 7, "urgent": True, "limit": None}]
    assert e.coerced == [
        {"path": "amount", "from": "98.7", "to": 98.7, "type": "number"},
        {"path": "count", "from": "7", "to": 7, "type": "integer"},
        {"path": "urgent", "from": "yes", "to": True, "type": "boolean"}]
    assert e.input == {"amount": "98.7", "count": "7", "urgent": "yes"}  # as the model sent it


def test_lax_converts_inside_an_optional_and_a_whole_float():
    t = make_transfer("lax")
    one_call(t, {"amount": 1, "count": 2.0, "limit": "5"})
    assert SEEN == [{"amount": 1, "count": 2, "urgent": False, "limit": 5}]


@pytest.mark.parametrize("args, message", [
    ({"amount": 1, "count": "7.5"}, "'7.5' is not of type 'integer'"),
    ({"amount": "ninety", "count": 1}, "'ninety' is not of type 'number'"),
    ({"amount": "nan", "count": 1}, "'nan' is not of type 'number'"),
    ({"amount": 1, "count": 1, "memo": 5}, "5 is not valid under any of the given schemas"),
], ids=["fraction to integer", "words to number", "nan", "number to string"])
def test_lax_refuses_what_pydantic_lax_mode_refuses(args, message):
    t = make_transfer("lax")
    (e,) = one_call(t, args).steps[0].executions
    assert e.error_kind == "invalid_input" and message in e.content and SEEN == []


def test_a_conversion_is_written_to_the_trace(tmp_path):
    t = make_transfer("lax")
    path = tmp_path / "run.jsonl"
    llm = ScriptedLLM([tool_reply((t.name, {"amount": "98.7", "count": 1})), "done"])
    run_production(llm, "t", [t], trace=path)
    (step,) = [s for s in load_trace(path).steps() if s.executions]
    assert step.executions[0]["coerced"] == [
        {"path": "amount", "from": "98.7", "to": 98.7, "type": "number"}]


def test_an_approval_rule_judges_the_converted_value():
    refund = Tool("refund", "Refund.", {"type": "object", "properties": {
        "amount": {"type": "number"}}, "required": ["amount"]}, lambda amount: "ok",
        needs_approval=lambda args: args["amount"] > 100, argument_mode="lax")
    assert refund.requires_approval({"amount": "120"})
    assert not refund.requires_approval({"amount": "20"})
    result = run_agent(ScriptedLLM([tool_reply(("refund", {"amount": "120"}))]), "t", [refund])
    assert result.stop_cause is StopCause.AWAITING_APPROVAL


def test_an_unknown_argument_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="argument_mode must be 'strict' or 'lax'"):
        Tool("x", "x", {"type": "object"}, lambda: "", argument_mode="loose")


def test_the_async_loop_converts_and_records_as_the_sync_loop_does():
    import asyncio

    from primer.harness.async_loop import run_agent_async

    t = make_transfer("lax")
    SEEN.clear()
    llm = ScriptedLLM([tool_reply((t.name, {"amount": "98.7", "count": "7"})), "done"])
    result = asyncio.run(run_agent_async(llm, "t", [t]))
    (e,) = result.steps[0].executions
    assert (e.content, SEEN[0]["count"]) == ("sent 98.7 x 7", 7)
    assert [c["path"] for c in e.coerced] == ["amount", "count"]
