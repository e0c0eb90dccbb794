"""The approval desk (lesson 08): a plain object with approve()/reject(), and its buttons."""

from __future__ import annotations

import pytest

from primer.harness.durable.checkpoint import ApprovalDesk, login_name, read_checkpoint
from primer.scenarios import get_demo
from primer.scenarios.refunds import DELAY_ENV, LEDGER_ENV
from primer.views.widgets import approval_buttons


@pytest.fixture
def paused(tmp_path, monkeypatch):
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "ledger.sqlite"))
    monkeypatch.delenv(DELAY_ENV, raising=False)
    return get_demo("refund").run(checkpoint_dir=str(tmp_path / "ck"))


def decision(paused):
    call_id = paused.pending[0]["id"]
    return next(c for c in read_checkpoint(paused.checkpoint)["calls"]
                if c["tool_use_id"] == call_id)["decision"]


def test_the_desk_describes_the_call_with_its_exact_arguments(paused):
    desk = ApprovalDesk(paused.checkpoint, paused.pending[0]["id"])
    assert desk.describe().startswith('issue_refund({"amount_usd": 40.0')
    assert desk.describe().endswith("- undecided")


def test_the_desk_approves_with_its_note_and_says_so(paused):
    desk = ApprovalDesk(paused.checkpoint, paused.pending[0]["id"], note="checked")
    status = desk.approve()
    assert status.startswith(f"approved issue_refund ({paused.pending[0]['id']}) by ")
    assert status.endswith(", note: checked")
    d = decision(paused)
    assert (d["approved"], d["note"], d["approver"], d["expires_at"]) == (True, "checked",
                                                                          login_name(), None)


def test_the_desk_turns_a_bad_id_into_an_error_line_not_an_exception(paused):
    desk = ApprovalDesk(paused.checkpoint, "toolu_nope")
    assert desk.reject().startswith("error: ") and "toolu_nope" in desk.status


def test_the_reject_button_calls_the_desk_with_the_typed_note(paused):
    desk = ApprovalDesk(paused.checkpoint, paused.pending[0]["id"])
    panel = approval_buttons(desk)
    call, note, buttons, status = panel.children
    note.value = "no damage on the photo"
    buttons.children[1].click()
    assert decision(paused)["approved"] is False
    assert decision(paused)["note"] == "no damage on the photo"
    assert "rejected issue_refund" in status.value and "rejected" in call.value
