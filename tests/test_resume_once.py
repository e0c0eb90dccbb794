"""A journal resumes only as the run it belongs to, once: a copy at another path, a journal
swapped in from another run and an older copy put back cannot pay an approved refund again.

The refund demo keeps its ledger beside the checkpoint (``refund_ledger.sqlite``), so a copy
resumed in another directory would pay from a ledger that has never seen the refund's
idempotency key: only the journal's binding to its run can stop it there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from primer.harness.durable.checkpoint import approve, read_checkpoint, resume
from primer.harness.durable.journal import CheckpointError, read_journal
from primer.loop.state import StopCause
from primer.scenarios import get_demo
from primer.scenarios.refunds import RefundLedger, ledger_path


@pytest.fixture(autouse=True)
def _ledger_beside_the_checkpoint(monkeypatch):
    monkeypatch.delenv("PRIMER_REFUND_LEDGER", raising=False)


def approved_refund(directory: Path) -> Path:
    """A refund run paused in ``directory`` with its refund approved (not yet resumed)."""
    result = get_demo("refund").run(checkpoint_dir=str(directory))
    assert result.stop_cause is StopCause.AWAITING_APPROVAL
    path = Path(result.checkpoint)
    approve(path, read_checkpoint(path)["calls"][0]["tool_use_id"], approver="ops")
    return path


def resume_refund(path: Path):
    demo = get_demo("refund")
    return resume(path, demo.make_llm(), demo.tools(path.parent))


def refunds(directory: Path) -> int:
    return len(RefundLedger(ledger_path(directory)).refunds())


def test_a_copy_at_another_path_of_an_approved_journal_cannot_refund_again(tmp_path):
    path = approved_refund(tmp_path / "ck")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    copy = Path(shutil.copy(path, elsewhere / path.name))
    assert resume_refund(path).stop_cause is StopCause.END_TURN
    with pytest.raises(CheckpointError, match="older copy of run run-001") as refused:
        resume_refund(copy)
    assert "could run again a side effect the run already finished" in str(refused.value)
    assert (refunds(tmp_path / "ck"), refunds(elsewhere)) == (1, 0)


def test_a_journal_swapped_in_from_another_run_is_refused(tmp_path):
    first, second = approved_refund(tmp_path / "ck"), approved_refund(tmp_path / "ck")
    assert (first.name, second.name) == ("run-001.jsonl", "run-002.jsonl")
    approved_first = first.read_bytes()
    assert resume_refund(first).stop_cause is StopCause.END_TURN
    second.write_bytes(approved_first)  # the other run's journal, as it was approved
    with pytest.raises(CheckpointError, match="older copy of run run-001"):
        resume_refund(second)
    second.write_bytes(first.read_bytes())  # and as it is now, finished
    with pytest.raises(CheckpointError, match="holds the journal of run run-001, not of a "
                                              "run named run-002"):
        resume_refund(second)
    assert refunds(tmp_path / "ck") == 1


def test_an_older_copy_of_an_approved_journal_put_back_after_the_refund_is_refused(tmp_path):
    path = approved_refund(tmp_path / "ck")
    older = path.read_bytes()
    assert resume_refund(path).stop_cause is StopCause.END_TURN
    path.write_bytes(older)  # the journal as it was before the refund ran
    with pytest.raises(CheckpointError, match="older copy of run run-001"):
        resume_refund(path)
    assert refunds(tmp_path / "ck") == 1


def test_a_copy_of_the_finished_journal_elsewhere_runs_nothing(tmp_path):
    path = approved_refund(tmp_path / "ck")
    first = resume_refund(path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    copy = Path(shutil.copy(path, elsewhere / path.name))
    again = resume_refund(copy)
    assert (again.stop_cause, again.final_text) == (first.stop_cause, first.final_text)
    assert (refunds(tmp_path / "ck"), refunds(elsewhere)) == (1, 0)
    assert read_journal(copy).notes == []  # held to the run's own anchor there too
