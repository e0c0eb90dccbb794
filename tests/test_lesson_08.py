"""Lesson 08's claims about what runs before a person decides, computed as the lesson does."""

from __future__ import annotations

from dataclasses import replace

import pytest

from primer.harness.durable.checkpoint import approve, reject
from primer.harness.durable.resume import resume
from primer.scenarios import get_demo
from primer.scenarios.refunds import DELAY_ENV, LEDGER_ENV, ORDERS, OUTBOX, RefundLedger, sent


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
