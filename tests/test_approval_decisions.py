"""A decision records who approved, when (UTC) and until when; an expired approval never runs."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone

import pytest

import primer.harness.durable.checkpoint as checkpoint_module
from primer.__main__ import main
from primer.harness.durable.checkpoint import (
    approve,
    edit,
    input_sha256,
    read_checkpoint,
    reject,
    respond,
)
from primer.harness.durable.keystore import CheckpointError
from primer.harness.durable.resume import resume
from primer.scenarios import get_demo
from primer.scenarios.refunds import DELAY_ENV, LEDGER_ENV, RefundLedger

refund = get_demo("refund")


@pytest.fixture
def paused(tmp_path, monkeypatch):
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "ledger.sqlite"))
    monkeypatch.delenv(DELAY_ENV, raising=False)
    return refund.run(checkpoint_dir=str(tmp_path / "ck"))


def _decision(paused):
    call_id = paused.pending[0]["id"]
    return next(c for c in read_checkpoint(paused.checkpoint)["calls"]
                if c["tool_use_id"] == call_id)["decision"]


def _refunds(tmp_path):
    return len(RefundLedger(tmp_path / "ledger.sqlite").refunds())


def test_a_decision_records_its_approver_its_utc_time_and_its_expiry(paused):
    before = datetime.now(timezone.utc).replace(microsecond=0)
    ends = before + timedelta(hours=4)
    approve(paused.checkpoint, paused.pending[0]["id"], approver="Dana (support lead)",
            expires_at=ends)
    d = _decision(paused)
    assert d["approver"] == "Dana (support lead)"
    at = datetime.fromisoformat(d["at"])
    assert at.utcoffset() == timedelta(0) and before <= at <= datetime.now(timezone.utc)
    assert datetime.fromisoformat(d["expires_at"]) == ends


def test_an_expired_approval_is_refused_on_resume_and_nothing_runs(paused, tmp_path):
    call_id = paused.pending[0]["id"]
    now = datetime.now(timezone.utc)
    approve(paused.checkpoint, call_id, approver="dana", expires_at=now + timedelta(hours=1))
    with pytest.raises(CheckpointError) as caught:
        resume(paused.checkpoint, refund.make_llm(), refund.tools(tmp_path / "ck"),
               now=now + timedelta(hours=2))
    message = str(caught.value)
    assert f"approval of call {call_id} (issue_refund) by dana expired at" in message
    assert "Record a new decision" in message and "Nothing was run" in message
    assert _refunds(tmp_path) == 0


def test_an_approval_before_its_expiry_runs(paused, tmp_path):
    now = datetime.now(timezone.utc)
    approve(paused.checkpoint, paused.pending[0]["id"], expires_at=now + timedelta(hours=1))
    result = resume(paused.checkpoint, refund.make_llm(), refund.tools(tmp_path / "ck"),
                    now=now + timedelta(minutes=59))
    assert result.stop_cause.value == "end_turn" and _refunds(tmp_path) == 1


def test_after_an_expiry_a_new_decision_can_be_recorded_and_it_applies(paused, tmp_path,
                                                                       monkeypatch):
    call_id = paused.pending[0]["id"]
    approve(paused.checkpoint, call_id, approver="dana",
            expires_at=datetime.now(timezone.utc) + timedelta(hours=1))
    with pytest.raises(CheckpointError, match="a decision cannot be changed"):
        reject(paused.checkpoint, call_id, approver="lee")  # not expired yet: final
    later = datetime.now(timezone.utc) + timedelta(hours=2)

    class TwoHoursLater(datetime):
        @classmethod
        def now(cls, tz=None):
            return later

    monkeypatch.setattr(checkpoint_module, "datetime", TwoHoursLater)
    reject(paused.checkpoint, call_id, approver="lee", note="too late, ask again")
    d = _decision(paused)
    assert (d["approved"], d["approver"], d["expires_at"]) == (False, "lee", None)
    result = resume(paused.checkpoint, refund.make_llm(), refund.tools(tmp_path / "ck"))
    assert "A person rejected" in next(e.content for e in result.executions
                                       if e.name == "issue_refund")
    assert _refunds(tmp_path) == 0


@pytest.mark.parametrize("bad", [datetime(2030, 1, 1),  # no timezone
                                 datetime(2000, 1, 1, tzinfo=timezone.utc)])  # in the past
def test_an_expiry_without_a_timezone_or_in_the_past_is_refused(paused, bad):
    with pytest.raises(ValueError, match="expires_at"):
        approve(paused.checkpoint, paused.pending[0]["id"], expires_at=bad)
    assert _decision(paused) is None


def test_an_empty_approver_is_refused(paused):
    with pytest.raises(ValueError, match="approver"):
        approve(paused.checkpoint, paused.pending[0]["id"], approver="  ")
    assert _decision(paused) is None


def test_resume_refuses_a_naive_now(paused, tmp_path):
    with pytest.raises(ValueError, match="timezone-aware"):
        resume(paused.checkpoint, refund.make_llm(), refund.tools(tmp_path / "ck"),
               now=datetime(2030, 1, 1))


def test_the_cli_records_approver_and_expiry_and_lists_them(paused, tmp_path, capsys):
    call_id = paused.pending[0]["id"]
    assert main(["approve", paused.checkpoint, call_id, "--yes", "--approver", "dana",
                 "--expires-in", "4h"]) == 0
    out = capsys.readouterr().out
    assert f"approved {call_id}: issue_refund(" in out and "by dana at " in out
    assert ", expires " in out
    ends = datetime.fromisoformat(_decision(paused)["expires_at"])
    assert timedelta(hours=3, minutes=59) < ends - datetime.now(timezone.utc) <= timedelta(hours=4)
    assert main(["approvals", "list", str(tmp_path / "ck")]) == 0
    assert "approved by dana at " in capsys.readouterr().out


def test_the_cli_refuses_a_duration_it_cannot_read(paused, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["approve", paused.checkpoint, paused.pending[0]["id"], "--yes",
              "--expires-in", "soon"])
    assert exited.value.code == 2 and "not a duration like 30m" in capsys.readouterr().err
    assert _decision(paused) is None


def test_the_cli_refuses_an_expiry_on_a_rejection(paused, capsys):
    assert main(["approve", paused.checkpoint, paused.pending[0]["id"], "--no",
                 "--expires-in", "4h"]) == 2
    assert "applies to an approval" in capsys.readouterr().err
    assert _decision(paused) is None


@pytest.mark.parametrize("duration", ["999999999d", "99999999999999999999999d"])
def test_an_expiry_past_the_calendar_is_a_usage_error_not_a_traceback(paused, capsys, duration):
    with pytest.raises(SystemExit) as stopped:
        main(["approve", paused.checkpoint, paused.pending[0]["id"], "--yes",
              f"--expires-in={duration}"])
    assert stopped.value.code == 2 and "too long a duration" in capsys.readouterr().err
    assert _decision(paused) is None


@pytest.mark.parametrize("name", ["bob\nAPPROVED by ceo", "dana\x1b[2K", "a\tb"])
def test_an_approver_name_with_control_characters_is_refused(paused, name):
    with pytest.raises(ValueError, match="no control characters"):
        approve(paused.checkpoint, paused.pending[0]["id"], approver=name)
    assert _decision(paused) is None


# ---------------------------------------------------------------- edit and respond


def test_an_edit_runs_the_call_with_the_persons_input_and_tells_the_model(paused, tmp_path):
    call_id = paused.pending[0]["id"]
    seen = paused.pending[0]["input"]
    changed = {**seen, "amount_usd": 25.0}
    edit(paused.checkpoint, call_id, changed, note="half now", approver="Dana")
    d = _decision(paused)
    assert (d["action"], d["approved"], d["edited_input"]) == ("edit", True, changed)
    assert d["input_sha256"] == input_sha256(seen)  # bound to what the person reviewed
    assert d["edited_sha256"] == input_sha256(changed)
    done = resume(paused.checkpoint, refund.make_llm(), refund.tools(tmp_path / "ck"))
    [paid] = RefundLedger(tmp_path / "ledger.sqlite").refunds()
    assert paid.amount_usd == 25.0
    result = next(e for e in done.executions if e.tool_use_id == call_id)
    assert result.input == changed and "A person changed the input of this call to" in \
        result.content


def test_an_edit_the_tools_input_schema_refuses_is_not_recorded(paused):
    call_id = paused.pending[0]["id"]
    with pytest.raises(ValueError, match="does not fit its input_schema: at 'amount_usd'"):
        edit(paused.checkpoint, call_id, {**paused.pending[0]["input"], "amount_usd": "lots"})
    with pytest.raises(ValueError, match="must be a JSON object"):
        edit(paused.checkpoint, call_id, ["not", "an", "object"])
    assert _decision(paused) is None


@pytest.mark.parametrize("amount", [float("inf"), float("nan"), 10**200])
def test_an_edit_that_is_not_plain_json_is_refused_and_the_checkpoint_stays_usable(
        paused, amount):
    call_id = paused.pending[0]["id"]
    with pytest.raises(ValueError, match="not plain JSON"):
        edit(paused.checkpoint, call_id, {**paused.pending[0]["input"], "amount_usd": amount})
    assert _decision(paused) is None
    edit(paused.checkpoint, call_id, {**paused.pending[0]["input"], "amount_usd": 40.0})
    assert _decision(paused) is not None


def test_an_edit_the_live_tool_refuses_does_not_run(paused, tmp_path):
    call_id = paused.pending[0]["id"]
    edit(paused.checkpoint, call_id, {**paused.pending[0]["input"], "amount_usd": 25.0})
    tighter = []
    for t in refund.tools(tmp_path / "ck"):
        if t.name == "issue_refund":
            schema = {**t.input_schema, "properties": {
                **t.input_schema["properties"], "amount_usd": {"type": "number",
                                                               "maximum": 20}}}
            t = dataclasses.replace(t, input_schema=schema)
        tighter.append(t)
    with pytest.raises(CheckpointError):  # the definition changed: refused, nothing runs
        resume(paused.checkpoint, refund.make_llm(), tighter)
    assert _refunds(tmp_path) == 0


def test_a_response_goes_back_as_the_calls_result_and_the_tool_never_runs(paused, tmp_path):
    call_id = paused.pending[0]["id"]
    respond(paused.checkpoint, call_id, "Refunds are paused today; offer a voucher instead.")
    assert _decision(paused)["action"] == "respond"
    done = resume(paused.checkpoint, refund.make_llm(), refund.tools(tmp_path / "ck"))
    assert _refunds(tmp_path) == 0
    result = next(e for e in done.executions if e.tool_use_id == call_id)
    assert result.error_kind == "not_run" and not result.is_error
    assert result.content.endswith("Their answer: Refunds are paused today; offer a voucher "
                                   "instead.")
    assert "not run: issue_refund" in done.summary
    with pytest.raises(ValueError, match="needs the person's text"):
        respond(paused.checkpoint, call_id, "  ")


def test_a_rejected_call_never_reaches_its_tool_however_often_the_run_is_resumed(paused,
                                                                                 tmp_path):
    reject(paused.checkpoint, paused.pending[0]["id"], note="no photo")
    for _ in range(2):
        resume(paused.checkpoint, refund.make_llm(), refund.tools(tmp_path / "ck"))
    assert _refunds(tmp_path) == 0


def test_a_decision_of_one_kind_cannot_be_turned_into_another(paused):
    call_id = paused.pending[0]["id"]
    respond(paused.checkpoint, call_id, "Handled by phone.")
    with pytest.raises(CheckpointError, match="already answered in the tool's place"):
        approve(paused.checkpoint, call_id)
    with pytest.raises(CheckpointError, match="a decision cannot be changed"):
        edit(paused.checkpoint, call_id, dict(paused.pending[0]["input"]))


def test_the_cli_records_an_edit_and_a_response(paused, tmp_path, capsys):
    call_id = paused.pending[0]["id"]
    assert main(["approve", paused.checkpoint, call_id, "--edit",
                 json.dumps({**paused.pending[0]["input"], "amount_usd": 30})]) == 0
    assert "approved with the input changed to" in capsys.readouterr().out
    other = refund.run(checkpoint_dir=str(tmp_path / "ck2"))
    assert main(["approve", other.checkpoint, other.pending[0]["id"], "--respond",
                 "Call the customer first."]) == 0
    assert "answered in the tool's place" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:
        main(["approve", paused.checkpoint, call_id, "--edit", "not json"])
    assert bad.value.code == 2 and "not JSON" in capsys.readouterr().err
