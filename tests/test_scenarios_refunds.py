"""The refund world: approval in another process, rejection, hand-off, a deduplicating ledger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from primer.harness.durable.checkpoint import approve, read_checkpoint, reject, resume
from primer.loop.state import StopCause
from primer.loop.tools import ToolRegistry
from primer.scenarios import get_demo
from primer.scenarios.refunds import (
    DELAY_ENV,
    LEDGER_ENV,
    ORDERS,
    REFUND_AUTHORITY_USD,
    RefundLedger,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def ledger(tmp_path, monkeypatch) -> RefundLedger:
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "ledger.sqlite"))
    monkeypatch.delenv(DELAY_ENV, raising=False)
    return RefundLedger(tmp_path / "ledger.sqlite")


def primer_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m primer ARGS`` in a new process (same environment, so the same ledger)."""
    return subprocess.run([sys.executable, "-m", "primer", *args], cwd=ROOT,
                          capture_output=True, text=True, env=dict(os.environ), timeout=60)


def test_the_ledger_pays_once_per_idempotency_key(ledger):
    first, dup1 = ledger.issue("k1", "R-1001", 40.0, "broken")
    again, dup2 = ledger.issue("k1", "R-1001", 40.0, "broken")
    other, _ = ledger.issue("k2", "R-1001", 40.0, "broken")
    assert (dup1, dup2) == (False, True) and again == first
    assert [r.refund_id for r in ledger.refunds("R-1001")] == [first.refund_id, other.refund_id]


def test_the_refund_run_pauses_before_issue_refund_with_nothing_paid(ledger, tmp_path):
    result = get_demo("refund").run(checkpoint_dir=str(tmp_path / "ck"))
    assert result.stop_cause is StopCause.AWAITING_APPROVAL
    assert [(b["name"], b["input"]["amount_usd"]) for b in result.pending] == [
        ("issue_refund", ORDERS["R-1001"]["amount_usd"])]
    assert ledger.refunds() == []


def test_approved_in_another_process_the_refund_runs_exactly_once(ledger, tmp_path):
    paused = get_demo("refund").run(checkpoint_dir=str(tmp_path / "ck"))
    call_id = paused.pending[0]["id"]
    done = primer_cli("approve", paused.checkpoint, call_id, "--yes", "--note", "photo checked")
    assert done.returncode == 0, done.stderr
    assert f"approved {call_id}: issue_refund(" in done.stdout
    resumed = primer_cli("resume", paused.checkpoint, "--scenario", "refund")
    assert resumed.returncode == 0, resumed.stderr
    assert "stop cause: end_turn" in resumed.stdout and "Refunded 40.00 USD" in resumed.stdout
    again = primer_cli("resume", paused.checkpoint, "--scenario", "refund")
    assert again.returncode == 0 and "Refunded 40.00 USD" in again.stdout
    [refund] = ledger.refunds("R-1001")
    assert refund.idempotency_key == f"idem-{call_id}" and refund.amount_usd == 40.0


def test_rejected_the_model_takes_another_path_and_nothing_is_paid(ledger, tmp_path):
    scenario = get_demo("refund")
    paused = scenario.run(checkpoint_dir=str(tmp_path / "ck"))
    reject(paused.checkpoint, paused.pending[0]["id"], note="the photo shows no damage")
    result = resume(paused.checkpoint, scenario.make_llm(), scenario.make_tools())
    assert result.stop_cause is StopCause.END_TURN
    assert "rejected" in result.final_text and "replacement" in result.final_text
    assert "the photo shows no damage" in result.final_text  # the person's note, passed on
    assert "Do not retry" not in result.final_text  # the harness's words stay with the model
    assert ledger.refunds() == []


def test_a_refund_above_the_agents_authority_is_handed_off_with_the_reason(ledger, tmp_path):
    result = get_demo("refund-handoff").run(checkpoint_dir=str(tmp_path / "ck"))
    assert ORDERS["R-2002"]["amount_usd"] > REFUND_AUTHORITY_USD
    assert result.stop_cause is StopCause.HANDOFF
    assert "above my refund authority" in result.stop_detail
    assert ledger.refunds() == [] and result.pending == []


def test_issue_refund_refuses_an_amount_above_the_authority_even_if_approved(ledger):
    tools = {t.name: t for t in get_demo("refund").make_tools()}
    block = {"type": "tool_use", "id": "toolu_x", "name": "issue_refund",
             "input": {"order_id": "R-2002", "amount_usd": 1800.0, "reason": "broken"}}
    e = ToolRegistry(tools.values()).run(block)
    assert e.is_error and "above your refund authority" in e.content
    assert ledger.refunds() == []


def test_the_model_never_sees_the_idempotency_key(ledger):
    issue = next(t for t in get_demo("refund").make_tools() if t.name == "issue_refund")
    assert "idempotency_key" not in json.dumps(issue.definition())
    assert issue.side_effecting and issue.needs_approval and issue.takes_idempotency_key


def test_the_checkpoint_on_disk_holds_the_exact_refund_arguments(ledger, tmp_path):
    paused = get_demo("refund").run(checkpoint_dir=str(tmp_path / "ck"))
    data = read_checkpoint(paused.checkpoint)
    gated = [c for c in data["calls"] if c["needs_approval"]]
    assert [c["input"] for c in gated] == [b["input"] for b in paused.pending]
    approve(paused.checkpoint, gated[0]["tool_use_id"])


def test_an_order_is_never_refunded_more_than_was_paid_even_under_new_keys(ledger):
    registry = ToolRegistry(get_demo("refund").make_tools())

    def refund(call_id):
        return registry.run({"type": "tool_use", "id": call_id, "name": "issue_refund",
                             "input": {"order_id": "R-1003", "amount_usd": 65.0,
                                       "reason": "broken"}})

    assert not refund("toolu_a").is_error
    assert not refund("toolu_a").is_error  # the same call again: deduplicated, not refused
    second = refund("toolu_b")
    assert second.is_error and "already been refunded 65.00 of the 65.00 USD" in second.content
    assert len(ledger.refunds("R-1003")) == 1


def test_two_separate_requests_for_one_order_get_different_tool_use_ids(ledger, tmp_path):
    demo = get_demo("refund")
    first = demo.run(checkpoint_dir=str(tmp_path / "ck"))
    second = demo.run(checkpoint_dir=str(tmp_path / "ck"))
    assert first.pending[0]["id"] != second.pending[0]["id"]
    ids = [b["id"] for m in first.messages if m["role"] == "assistant"
           for b in m["content"] if b["type"] == "tool_use"]
    tags = {i.split("_")[2] for i in ids}
    assert len(ids) == len(set(ids)) == 3 and len(tags) == 1  # one run, one tag


def test_a_run_resumed_in_a_new_process_keeps_its_run_tag(ledger, tmp_path):
    demo = get_demo("refund")
    paused = demo.run(checkpoint_dir=str(tmp_path / "ck"))
    approve(paused.checkpoint, paused.pending[0]["id"])
    done = resume(paused.checkpoint, demo.make_llm(), demo.make_tools())
    assert done.stop_cause is StopCause.END_TURN
    tags = {b["id"].split("_")[2] for m in done.messages if m["role"] == "assistant"
            for b in m["content"] if isinstance(m["content"], list) and b["type"] == "tool_use"}
    assert len(tags) == 1


def test_a_second_request_for_an_order_refunded_in_full_is_refused_with_a_clear_answer(
        ledger, tmp_path):
    demo = get_demo("refund")
    answers = []
    for _ in range(2):
        paused = demo.run(checkpoint_dir=str(tmp_path / "ck"))
        approve(paused.checkpoint, paused.pending[0]["id"])
        answers.append(resume(paused.checkpoint, demo.make_llm(), demo.make_tools()).final_text)
    assert answers[0].startswith("Refunded 40.00 USD for order R-1001")
    assert "did not refund order R-1001 again" in answers[1]
    assert "Nothing new was paid" in answers[1] and "Refunded" not in answers[1]
    assert len(ledger.refunds("R-1001")) == 1


def test_a_duplicate_answer_from_the_ledger_is_reported_as_nothing_new_paid(ledger):
    from primer.loop.messages import assistant_message, tool_result_block, user_message
    from primer.scenarios.refunds import decide

    task = user_message("Order R-1001 arrived broken. Please refund the customer in full.")
    first = decide([task])
    looked_up = [task, assistant_message(first.content), user_message([tool_result_block(
        first.tool_uses[0]["id"], json.dumps(ORDERS["R-1001"]), False)])]
    ask = decide(looked_up)
    refund_id, lookup_id = (b["id"] for b in ask.tool_uses)
    book, _ = ledger.issue("idem-earlier", "R-1001", 40.0, "broken")
    dup = {"refund_id": book.refund_id, "order_id": "R-1001", "amount_usd": 40.0,
           "status": "already issued (same idempotency key)"}
    history = [*looked_up, assistant_message(ask.content), user_message([
        tool_result_block(refund_id, json.dumps(dup), False),
        tool_result_block(lookup_id, json.dumps({"name": "Priya Nair"}), False)])]
    answer = decide(history).text
    assert "had already been refunded" in answer and "nothing new was paid" in answer
    assert not answer.startswith("Refunded")


def test_with_a_checkpoint_dir_the_ledger_lives_beside_the_checkpoint(tmp_path, monkeypatch):
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    paused = get_demo("refund").run(checkpoint_dir="ck")
    approve(paused.checkpoint, paused.pending[0]["id"])
    done = primer_cli("resume", str(tmp_path / paused.checkpoint))  # scenario from the file
    assert done.returncode == 0, done.stderr
    assert "Refunded 40.00 USD" in done.stdout
    assert len(RefundLedger(tmp_path / "ck" / "refund_ledger.sqlite").refunds()) == 1
    assert not (tmp_path / "refund_ledger.sqlite").exists()


def test_the_paused_refund_journal_lesson_08_describes(ledger, tmp_path):
    """Lesson 08's figures: the paused refund run's journal has 5 signed lines (header, state,
    the pause, the lookup run at the pause, the stop) and 4 messages, 1,237 tokens, 0.0088
    USD."""
    paused = get_demo("refund").run(checkpoint_dir=str(tmp_path / "ck"))
    data = read_checkpoint(paused.checkpoint)
    lines = Path(paused.checkpoint).read_text().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["header", "state", "pause", "done",
                                                             "stop"]
    assert (len(lines), len(data["messages"]), sum(data["usage"].values()),
            round(data["cost_usd"], 4)) == (5, 4, 1237, 0.0088)
