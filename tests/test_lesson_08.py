"""Lesson 08's claims, computed as the lesson does: pause and resume by hand on the refund
world (yes pays once, no pays nothing and the model takes another path), the quiz's figures,
what runs before a person decides, and the hand-off above the agent's authority."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from notebook_cells import solution

from primer.course.quiz import load_quiz
from primer.harness.durable.checkpoint import approve, reject
from primer.harness.durable.resume import resume
from primer.loop.messages import text_block, tool_use_block
from primer.loop.model import Reply
from primer.loop.tools import ToolRegistry, tool
from primer.scenarios import get_demo
from primer.scenarios.refunds import (
    DELAY_ENV,
    LEDGER_ENV,
    ORDERS,
    OUTBOX,
    REFUND_AUTHORITY_USD,
    RefundLedger,
    make_llm,
    refund_tools,
    sent,
)


@pytest.fixture
def ck(tmp_path, monkeypatch):
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "ck" / "ledger.sqlite"))
    monkeypatch.delenv(DELAY_ENV, raising=False)
    return tmp_path / "ck"


def _gate_side_effects(tools):
    return [replace(t, needs_approval=True) if t.side_effecting else t for t in tools]


def test_the_eager_agents_email_goes_out_before_the_rejected_refund(ck):
    eager = get_demo("refund-notify")
    waiting = eager.run(checkpoint_dir=str(ck))
    assert [c["name"] for c in waiting.pending] == ["issue_refund"]
    mails = sent(ck / OUTBOX)
    assert len(mails) == 1 and f"{ORDERS['R-1003']['amount_usd']:.2f} USD" in mails[0]["body"]
    reject(waiting.checkpoint, waiting.pending[0]["id"], approver="Dana", note="no damage")
    told = resume(waiting.checkpoint, eager.make_llm(), eager.tools(ck))
    assert told.final_text.startswith("I did not refund order R-1003")
    assert len(sent(ck / OUTBOX)) == 1 and RefundLedger(ck / "ledger.sqlite").refunds() == []


def test_gating_every_side_effect_holds_the_email_until_the_person_approves(ck):
    eager = get_demo("refund-notify")
    careful = replace(eager, make_tools_in=lambda d: _gate_side_effects(eager.tools(d)))
    held = careful.run(checkpoint_dir=str(ck))
    assert [c["name"] for c in held.pending] == ["issue_refund", "email_customer"]
    assert sent(ck / OUTBOX) == []
    for call in held.pending:
        approve(held.checkpoint, call["id"], approver="Dana")
    done = resume(held.checkpoint, careful.make_llm(), careful.tools(ck))
    assert done.stop_cause.value == "end_turn" and done.final_text.startswith("Refunded 65.00")
    assert len(sent(ck / OUTBOX)) == 1 and len(RefundLedger(ck / "ledger.sqlite").refunds()) == 1


def test_an_approved_email_waits_while_the_refund_of_its_reply_is_undecided(ck):
    eager = get_demo("refund-notify")
    careful = replace(eager, make_tools_in=lambda d: _gate_side_effects(eager.tools(d)))
    held = careful.run(checkpoint_dir=str(ck))
    email = next(c for c in held.pending if c["name"] == "email_customer")
    approve(held.checkpoint, email["id"], approver="Dana")
    again = resume(held.checkpoint, careful.make_llm(), careful.tools(ck))
    assert again.stop_cause.value == "awaiting_approval"  # the refund is still undecided
    assert sent(ck / OUTBOX) == []  # nothing of the reply runs while one call waits


def _by_hand(ledger_file, approved):
    """The lesson's opening: loop until a gated call, save as JSON, decide, loop on."""
    pause, resume_paused = solution("08", "pause"), solution("08", "resume_paused")
    demo, llm = get_demo("refund"), make_llm()
    registry = ToolRegistry(refund_tools(ledger_file))
    messages = [{"role": "user", "content": "Order R-1004 arrived broken. Please refund it."}]
    while True:
        reply = llm(system=demo.system, messages=messages, tools=registry.definitions(),
                    max_tokens=1024)
        if reply.stop_reason != "tool_use":
            return reply.text
        if any(registry.get(c["name"]).needs_approval for c in reply.tool_uses):
            saved = json.loads(json.dumps(pause(messages, reply)))
            registry = ToolRegistry(refund_tools(ledger_file))  # as after a restart
            messages = resume_paused(saved, approved, registry)
            continue
        messages = [*messages, {"role": "assistant", "content": reply.content},
                    {"role": "user",
                     "content": [registry.run(c).result_block() for c in reply.tool_uses]}]


def test_by_hand_yes_pays_the_refund_once(tmp_path, monkeypatch):
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    answer = _by_hand(tmp_path / "ledger.sqlite", True)
    assert answer.startswith("Refunded 120.00 USD for order R-1004")
    assert [r.order_id for r in RefundLedger(tmp_path / "ledger.sqlite").refunds()] == ["R-1004"]


def test_by_hand_no_pays_nothing_and_the_model_takes_another_path(tmp_path, monkeypatch):
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    answer = _by_hand(tmp_path / "ledger.sqlite", False)
    assert answer.startswith("I did not refund order R-1004: a person reviewed the refund")
    assert "replacement desk lamp" in answer
    assert RefundLedger(tmp_path / "ledger.sqlite").refunds() == []


def test_quiz_question_2_three_calls_one_rejected_get_three_results():
    pause, resume_paused = solution("08", "pause"), solution("08", "resume_paused")

    @tool
    def read(key: str) -> str:
        """Read a value.

        Args:
          key: the key.
        """
        return key

    @tool(side_effecting=True, needs_approval=True)
    def delete(key: str) -> str:
        """Delete a value.

        Args:
          key: the key.
        """
        raise AssertionError("a rejected call must not run")

    reply = Reply([text_block("three calls"), tool_use_block("t1", "read", {"key": "a"}),
                   tool_use_block("t2", "delete", {"key": "a"}),
                   tool_use_block("t3", "read", {"key": "b"})], "tool_use")
    out = resume_paused(pause([{"role": "user", "content": "tidy up"}], reply), False,
                        ToolRegistry([read, delete]))
    results = out[-1]["content"]
    assert [b["tool_use_id"] for b in results] == ["t1", "t2", "t3"]
    assert [bool(b.get("is_error")) for b in results] == [False, True, False]
    quiz = load_quiz("08")
    assert quiz.answer(2, len(results)).right
    assert not quiz.answer(2, 1).right and not quiz.answer(2, 2).right


def test_the_quiz_opens_with_the_design_question_and_its_figures_are_the_worlds():
    quiz = load_quiz("08")
    assert "What do you save" in quiz.questions[0].ask
    assert quiz.answer(1, "b").right
    assert (ORDERS["R-2002"]["amount_usd"], REFUND_AUTHORITY_USD) == (1800.0, 500.0)
    assert "1,800 USD" in quiz.questions[3].ask and "500 USD" in quiz.questions[3].ask


def test_above_the_agents_authority_the_run_hands_off_and_pays_nothing(ck):
    handed = get_demo("refund-handoff").run(checkpoint_dir=str(ck))
    assert handed.stop_cause.value == "handoff"
    assert "1,800.00 USD, above my refund authority of 500.00 USD" in handed.stop_detail
    assert RefundLedger(ck / "ledger.sqlite").refunds() == []
