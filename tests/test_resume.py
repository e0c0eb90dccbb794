"""Resume: what a paused call needs is the gate's recorded answer, and an approval holds only
for the tool definition and approval rules it was made on (fail closed)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from primer.harness.approval_rules import ApprovalRules
from primer.harness.durable.checkpoint import (
    CheckpointError,
    approve,
    list_checkpoints,
    read_checkpoint,
    reject,
    resume,
)
from primer.harness.hooks import Hooks, replace_input
from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.messages import text_block, tool_use_block
from primer.loop.model import Reply, ScriptedLLM
from primer.loop.state import StopCause
from primer.loop.tools import Tool, tool

LIMIT = {"version": "1", "rules": [{"tool": "refund", "when": {"amount": {">": 50}},
                                    "reason": "a refund over 50 USD needs a person"}]}


class Shop:
    """A refund tool (side-effecting, keyed) that counts what it paid."""

    def __init__(self) -> None:
        self.paid: list[int] = []

        @tool(side_effecting=True)
        def refund(order: str, amount: int, idempotency_key: str) -> str:
            """Refund an order.

            Args:
              order: the order id.
              amount: USD.
            """
            self.paid.append(amount)
            return f"refunded {amount} USD on {order}"

        self.refund = refund


def refunder(*amounts: int):
    """A model that asks for one refund per amount in one reply, then reports the results."""
    def policy(messages: list[dict]) -> Reply:
        last = messages[-1]["content"]
        if isinstance(last, str):
            return Reply([tool_use_block(f"toolu_{n}", "refund",
                                         {"order": f"R-{n}", "amount": a})
                          for n, a in enumerate(amounts, start=1)], "tool_use")
        return Reply([text_block("; ".join(b["content"] for b in last))], "end_turn")
    return ScriptedLLM(policy)


def pause(tmp_path: Path, tools: list[Tool], *amounts: int):
    cfg = AgentConfig(checkpoint_dir=str(tmp_path))
    return run_production(refunder(*amounts), "Refund.", tools, config=cfg)


def with_rules(shop: Shop, data: dict) -> list[Tool]:
    return ApprovalRules.from_dict(data).apply([shop.refund])


def test_a_predicate_is_asked_once_per_call_across_the_pause_the_decision_and_the_resume(
        tmp_path):
    shop, asked = Shop(), []

    def over_50(args: dict) -> bool:
        asked.append(args["amount"])
        return args["amount"] > 50

    tools = [dataclasses.replace(shop.refund, needs_approval=over_50)]
    paused = pause(tmp_path, tools, 20, 80)
    assert paused.stop_cause is StopCause.AWAITING_APPROVAL
    assert sorted(asked) == [20, 80]  # the gate, the pause and the journal asked once each
    approve(paused.checkpoint, "toolu_2")
    done = resume(paused.checkpoint, refunder(), tools)
    assert done.stop_cause is StopCause.END_TURN
    assert sorted(asked) == [20, 80] and shop.paid == [20, 80]


def test_an_undecided_call_never_runs_when_the_predicate_flips_between_pause_and_resume(
        tmp_path):
    shop, verdict, asked = Shop(), {"yes": True}, []

    def flips(args: dict) -> bool:
        asked.append(1)
        return verdict["yes"]

    tools = [dataclasses.replace(shop.refund, needs_approval=flips)]
    paused = pause(tmp_path, tools, 500)
    verdict["yes"] = False  # asked again now, it would let the call through
    again = resume(paused.checkpoint, refunder(), tools)
    assert again.stop_cause is StopCause.AWAITING_APPROVAL
    assert [b["id"] for b in again.pending] == ["toolu_1"]
    assert shop.paid == [] and len(asked) == 1
    call = read_checkpoint(paused.checkpoint)["calls"][0]
    assert call["needs_approval"] is True  # the recorded answer, not a new one


def test_a_resume_under_new_rules_records_the_pause_anew_for_an_undecided_call(tmp_path):
    shop = Shop()
    paused = pause(tmp_path, with_rules(shop, LIMIT), 80)
    again = resume(paused.checkpoint, refunder(), with_rules(shop, {**LIMIT, "version": "2"}))
    assert again.stop_cause is StopCause.AWAITING_APPROVAL and shop.paid == []
    [call] = read_checkpoint(paused.checkpoint)["calls"]
    assert (call["rules_version"], call["needs_approval"]) == ("2", True)
    approve(paused.checkpoint, "toolu_1")  # decided on the rules as they are now
    done = resume(paused.checkpoint, refunder(), with_rules(shop, {**LIMIT, "version": "2"}))
    assert done.stop_cause is StopCause.END_TURN and shop.paid == [80]


def test_a_pause_records_each_calls_answer_reason_tool_hash_and_rules_version(tmp_path):
    shop = Shop()
    paused = pause(tmp_path, with_rules(shop, LIMIT), 20, 80)
    calls = {c["tool_use_id"]: c for c in read_checkpoint(paused.checkpoint)["calls"]}
    assert (calls["toolu_1"]["needs_approval"], calls["toolu_1"]["reason"]) == (False, "")
    assert (calls["toolu_2"]["needs_approval"], calls["toolu_2"]["reason"]) == (
        True, "a refund over 50 USD needs a person")
    assert calls["toolu_2"]["rules_version"] == "1"
    assert len(calls["toolu_2"]["tool_sha256"]) == 64
    assert "(a refund over 50 USD needs a person)" in paused.stop_detail


def test_resuming_under_a_new_version_of_the_rules_refuses_the_approval_and_asks_again(
        tmp_path):
    shop = Shop()
    paused = pause(tmp_path, with_rules(shop, LIMIT), 80)
    approve(paused.checkpoint, "toolu_1", approver="Dana")
    stricter = {**LIMIT, "version": "2"}
    stricter["rules"] = [{**LIMIT["rules"][0], "when": {"amount": {">": 10}}}]
    with pytest.raises(CheckpointError, match=r"approval rules of refund changed from version "
                                              r"1 to 2.*Nothing was run.*fresh decision"):
        resume(paused.checkpoint, refunder(), with_rules(shop, stricter))
    assert shop.paid == []
    [info] = list_checkpoints(paused.checkpoint)
    assert info.status == "awaiting_approval"
    assert [(c["tool_use_id"], c["decision"], c["rules_version"]) for c in info.calls] == [
        ("toolu_1", None, "2")]  # the old yes does not carry over
    undecided = resume(paused.checkpoint, refunder(), with_rules(shop, stricter))
    assert undecided.stop_cause is StopCause.AWAITING_APPROVAL and shop.paid == []
    approve(paused.checkpoint, "toolu_1", approver="Dana")  # decided again, on version 2
    done = resume(paused.checkpoint, refunder(), with_rules(shop, stricter))
    assert done.stop_cause is StopCause.END_TURN and shop.paid == [80]


def test_resuming_with_a_changed_tool_definition_refuses_the_approval(tmp_path):
    shop = Shop()
    paused = pause(tmp_path, with_rules(shop, LIMIT), 80)
    approve(paused.checkpoint, "toolu_1")
    reworded = dataclasses.replace(shop.refund, description="Refund an order, in cents.")
    with pytest.raises(CheckpointError, match=r"definition of refund \(name, description or "
                                              r"input_schema\) changed"):
        resume(paused.checkpoint, refunder(), with_rules_on(reworded))
    assert shop.paid == []
    assert read_checkpoint(paused.checkpoint)["calls"][0]["decision"] is None


def with_rules_on(t: Tool) -> list[Tool]:
    return ApprovalRules.from_dict(LIMIT).apply([t])


def test_resuming_with_the_same_rules_and_tool_runs_the_approved_call_once(tmp_path):
    shop = Shop()
    paused = pause(tmp_path, with_rules(shop, LIMIT), 80)
    approve(paused.checkpoint, "toolu_1")
    done = resume(paused.checkpoint, refunder(), with_rules(shop, LIMIT))  # rebuilt from data
    assert done.stop_cause is StopCause.END_TURN and shop.paid == [80]


def test_a_rejection_stands_under_changed_rules_and_the_call_never_runs(tmp_path):
    shop = Shop()
    paused = pause(tmp_path, with_rules(shop, LIMIT), 80)
    reject(paused.checkpoint, "toolu_1", note="no receipt")
    done = resume(paused.checkpoint, refunder(), with_rules(shop, {**LIMIT, "version": "9"}))
    assert done.stop_cause is StopCause.END_TURN and shop.paid == []
    assert "rejected" in done.final_text and "no receipt" in done.final_text


class Tenfold(Hooks):
    """A before_tool hook that multiplies every refund by ten, after the person approved it."""

    def before_tool(self, call):
        return replace_input(call, amount=call["input"]["amount"] * 10)


def test_a_hook_cannot_change_an_approved_input_into_one_that_needs_a_person(tmp_path):
    shop = Shop()
    paused = pause(tmp_path, with_rules(shop, LIMIT), 80)
    approve(paused.checkpoint, "toolu_1")
    done = resume(paused.checkpoint, refunder(), with_rules(shop, LIMIT), hooks=Tenfold())
    assert shop.paid == []
    [result] = done.steps[0].executions
    assert result.error_kind == "hook_error" and "which a person never saw" in result.content


def test_approvals_list_shows_why_a_person_is_needed(tmp_path):
    paused = pause(tmp_path, with_rules(Shop(), LIMIT), 80)
    [info] = list_checkpoints(paused.checkpoint)
    assert "undecided (why a person: a refund over 50 USD needs a person)" in info.describe()
