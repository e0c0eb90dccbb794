"""Hooks at fixed points: log, block, change, and fail without crashing the run."""

from __future__ import annotations

from primer.harness.hooks import (
    Blocked,
    BlockTools,
    CallLog,
    Hooks,
    SchemaHook,
    ThoughtRequired,
    replace_input,
    replace_result,
)
from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.model import ScriptedLLM, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import ToolRegistry, tool

RAN: list[str] = []


@tool
def refund(order_id: str, amount: int) -> str:
    """Refund an order.

    Args:
        order_id: the order.
        amount: rupees.
    """
    RAN.append(f"{order_id}:{amount}")
    return f"refunded {amount} on {order_id}"


def run(script, hooks, **cfg):
    RAN.clear()
    llm = ScriptedLLM(script)
    return run_production(llm, "refund A123", [refund], hooks=hooks,
                          config=AgentConfig(offer_handoff=False, **cfg)), llm


def test_a_blocked_call_never_runs_and_the_model_reads_why():
    result, _ = run([tool_reply(("refund", {"order_id": "A123", "amount": 100})), "ok"],
                    BlockTools(["refund"], "refunds need a person this week."))
    assert RAN == []
    e = result.executions[0]
    assert e.is_error and e.error_kind == "blocked"
    assert "refunds need a person this week." in e.content
    assert result.messages[2]["content"][0]["content"] == e.content
    assert result.stop_cause is StopCause.END_TURN


def test_a_before_tool_hook_that_raises_becomes_an_error_result_not_a_crash():
    def boom(call):
        raise RuntimeError("audit store is down")

    result, _ = run([tool_reply(("refund", {"order_id": "A123", "amount": 100})), "ok"],
                    Hooks(before_tool=boom, name="audit"))
    e = result.executions[0]
    assert RAN == [] and e.is_error and e.error_kind == "hook_error"
    assert "audit" in e.content and "audit store is down" in e.content
    assert result.stop_cause is StopCause.END_TURN


def test_an_after_tool_hook_that_raises_withholds_the_result_but_the_run_goes_on():
    def boom(call, execution):
        raise ValueError("bad")

    result, _ = run([tool_reply(("refund", {"order_id": "A123", "amount": 100})), "ok"],
                    Hooks(after_tool=boom))
    e = result.executions[0]
    assert RAN == ["A123:100"]  # the tool did run
    assert e.is_error and e.error_kind == "hook_error" and "ran" in e.content
    assert result.stop_cause is StopCause.END_TURN


def test_an_after_reply_hook_that_raises_is_reported_and_the_run_finishes():
    events = []

    def boom(reply):
        raise KeyError("x")

    llm = ScriptedLLM(["done"])
    result = run_production(llm, "t", hooks=Hooks(after_reply=boom),
                            on_event=lambda kind, data: events.append(kind))
    assert result.stop_cause is StopCause.END_TURN and "hook_error" in events


def test_a_hook_can_change_a_call_and_the_result_still_answers_the_models_id():
    def cap(call):
        changed = replace_input(call, amount=min(call["input"]["amount"], 500))
        return {**changed, "id": "other"}  # a changed id is put back: pairing must hold

    result, _ = run([tool_reply(("refund", {"order_id": "A123", "amount": 9000}, "t1")), "ok"],
                    Hooks(before_tool=cap))
    assert RAN == ["A123:500"]
    assert result.executions[0].tool_use_id == "t1"
    assert result.messages[2]["content"][0]["tool_use_id"] == "t1"


def test_a_hook_can_change_a_result_the_model_sees():
    result, _ = run([tool_reply(("refund", {"order_id": "A123", "amount": 1})), "ok"],
                    Hooks(after_tool=lambda c, e: replace_result(e, "REDACTED")))
    assert result.messages[2]["content"][0]["content"] == "REDACTED"


def test_hooks_run_in_order_and_the_log_hook_sees_every_call():
    log = CallLog()
    result, _ = run([tool_reply(("refund", {"order_id": "A1", "amount": 1}),
                                ("refund", {"order_id": "A2", "amount": 2})), "ok"],
                    [log, Hooks(before_tool=lambda c: None)])
    assert sorted(r["input"]["order_id"] for r in log.log) == ["A1", "A2"]
    assert result.stop_cause is StopCause.END_TURN


def test_the_schema_check_as_a_before_tool_hook_gives_the_registrys_own_message():
    registry = ToolRegistry([refund])
    bad = {"type": "tool_use", "id": "t", "name": "refund", "input": {"order_id": "A1"}}
    verdict = SchemaHook(registry).before_tool(bad)
    assert isinstance(verdict, Blocked)
    assert verdict.reason == registry.run(bad).content


def test_thought_required_blocks_a_bare_action_and_lets_a_reasoned_one_run():
    script = [tool_reply(("refund", {"order_id": "A1", "amount": 1})),
              tool_reply(("refund", {"order_id": "A1", "amount": 1}), text="Thought: refund it."),
              "ok"]
    result, _ = run(script, ThoughtRequired())
    kinds = [e.error_kind for e in result.executions]
    assert kinds == ["blocked", None] and RAN == ["A1:1"]


def test_hooks_must_be_hooks_objects():
    import pytest

    with pytest.raises(TypeError, match="Hooks"):
        run_production(ScriptedLLM(["x"]), "t", hooks=[lambda c: c])
