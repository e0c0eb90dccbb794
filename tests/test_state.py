"""A step keeps the approval gate's answer for each call: asked once, kept in its JSON form."""

from __future__ import annotations

import dataclasses

from primer.loop.loop import run_agent
from primer.loop.messages import tool_use_block
from primer.loop.model import Reply, ScriptedLLM
from primer.loop.state import Step, StopCause
from primer.loop.tools import ToolRegistry, tool

asked: list[int] = []


def over_100(args: dict) -> bool | str:
    asked.append(args["amount"])
    return "a refund over 100 USD needs a person" if args["amount"] > 100 else False


@tool(side_effecting=True, needs_approval=over_100)
def refund(amount: int) -> str:
    """Refund.

    Args:
      amount: USD.
    """
    return "refunded"


def two_refunds(_messages: list[dict]) -> Reply:
    return Reply([tool_use_block("toolu_1", "refund", {"amount": 20}),
                  tool_use_block("toolu_2", "refund", {"amount": 300})], "tool_use")


def test_the_gate_asks_a_predicate_once_per_call_and_the_step_keeps_each_answer():
    asked.clear()
    result = run_agent(ScriptedLLM(two_refunds), "Refund both.", [refund])
    assert result.stop_cause is StopCause.AWAITING_APPROVAL
    assert sorted(asked) == [20, 300]
    step = result.steps[-1]
    assert step.gate == {"toolu_1": None, "toolu_2": "a refund over 100 USD needs a person"}
    registry = ToolRegistry([refund])
    assert step.approval_reason(registry, step.reply.tool_uses[1]) == \
        "a refund over 100 USD needs a person"
    assert sorted(asked) == [20, 300]  # read from the step, not asked again
    assert "(a refund over 100 USD needs a person)" in result.stop_detail


def test_a_steps_gate_answers_survive_its_json_form():
    asked.clear()
    step = run_agent(ScriptedLLM(two_refunds), "Refund both.", [refund]).steps[-1]
    again = Step.from_dict(step.to_dict())
    assert again.gate == step.gate
    assert again.approval_reason(ToolRegistry([refund]), again.reply.tool_uses[0]) is None
    assert len(asked) == 2


def test_a_predicate_that_raises_or_answers_oddly_means_yes_with_a_reason_saying_so():
    def broken(args: dict) -> bool:
        raise KeyError("limit")

    def odd(args: dict) -> bool:
        return None  # type: ignore[return-value]

    for gate, words in ((broken, "raised KeyError"), (odd, "returned None")):
        t = dataclasses.replace(refund, needs_approval=gate)
        reason = t.approval_reason({"amount": 1})
        assert reason is not None and words in reason and "means yes" in reason
