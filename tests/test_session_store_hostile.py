"""A session store shared with other processes and other hands: a forged turn record, two
processes racing one session, objects planted in the file, session ids that are paths."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
from pathlib import Path

import pytest

from primer.harness.durable.checkpoint import approve
from primer.harness.durable.journal import CheckpointError
from primer.harness.sessions.session import SessionError
from primer.harness.sessions.store import SessionStore, read_session
from primer.loop.config import AgentConfig
from primer.loop.model import ScriptedLLM, text_reply, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import tool


def rent_world(paid: list[str]):
    @tool(side_effecting=True, needs_approval=True)
    def pay_rent(month: str) -> str:
        """Pay the month's rent.

        Args:
          month: the month, like 2026-12.
        """
        paid.append(month)
        return f"paid the rent for {month}"

    return [pay_rent]


def rent_llm(month: str) -> ScriptedLLM:
    return ScriptedLLM([tool_reply(("pay_rent", {"month": month})), text_reply("Paid.")])


def paused_session(store: SessionStore, session_id: str, month: str, checkpoints: Path,
                   paid: list[str]):
    session = store.new(rent_llm(month), rent_world(paid), session_id=session_id,
                        config=AgentConfig(checkpoint_dir=str(checkpoints)))
    result = session.send(f"Pay the rent for {month}.")
    assert result.stop_cause is StopCause.AWAITING_APPROVAL
    return session, result


def test_a_forged_turn_record_pointing_at_another_sessions_approved_journal_runs_nothing(
        tmp_path):
    paid: list[str] = []
    store = SessionStore(tmp_path / "sessions")
    _, mine = paused_session(store, "mine", "2026-11", tmp_path / "ck", paid)
    _, theirs = paused_session(store, "theirs", "2026-12", tmp_path / "ck", paid)
    approve(theirs.checkpoint, theirs.pending[0]["id"])
    with sqlite3.connect(store.path) as db:  # point my turn at their approved journal
        record = json.loads(db.execute("SELECT record FROM turns WHERE session_id = 'mine'")
                            .fetchone()[0])
        record["checkpoint"] = theirs.checkpoint
        db.execute("UPDATE turns SET record = ? WHERE session_id = 'mine'",
                   (json.dumps(record),))
    forged = store.load("mine", rent_llm("2026-11"), rent_world(paid))
    with pytest.raises(CheckpointError, match="belongs to turn 1 of session theirs, not to "
                                              "turn 1 of session mine"):
        forged.resume()
    assert paid == []
    assert mine.checkpoint != theirs.checkpoint


# ---------------------------------------------------------------- two processes, one session

TRIALS = 20


def _continue(directory: str, month: str, start: object, outcomes: object) -> None:
    """One process: load the session, wait for the other, send a turn that pays (the tool
    writes its side effect to a file first), report what happened."""
    paid_file = Path(directory) / "paid.log"

    @tool(side_effecting=True)
    def pay_rent(month: str) -> str:
        """Pay the month's rent.

        Args:
          month: the month, like 2026-12.
        """
        with paid_file.open("a") as f:
            f.write(month + "\n")
        return f"paid the rent for {month}"

    store = SessionStore(directory)
    session = store.load("rent", ScriptedLLM([tool_reply(("pay_rent", {"month": month})),
                                              text_reply("Paid.")]), [pay_rent])
    start.wait()  # type: ignore[attr-defined]
    try:
        session.send(f"Pay the rent for {month}.")
        outcomes.put((month, "saved"))  # type: ignore[attr-defined]
    except SessionError as e:
        outcomes.put((month, str(e)))  # type: ignore[attr-defined]


class _NoWait:
    def wait(self) -> None:
        pass


@pytest.mark.slow  # 20 trials of two forked processes: about 0.2 s each on an idle machine
def test_two_processes_racing_one_session_leave_no_side_effect_outside_its_history(tmp_path):
    # one turn here first: the forked processes start with everything imported and warm,
    # so the two meet at the barrier and race for the session itself
    SessionStore(tmp_path / "warm").new(ScriptedLLM([]), session_id="rent")
    said: multiprocessing.SimpleQueue = multiprocessing.SimpleQueue()
    _continue(str(tmp_path / "warm"), "warm", _NoWait(), said)
    assert said.get() == ("warm", "saved")
    read_session(tmp_path / "warm", "rent")  # (reading a history imports the API's types)
    ctx = multiprocessing.get_context("fork")
    refusals = 0
    for trial in range(TRIALS):
        directory = tmp_path / f"trial-{trial}"
        SessionStore(directory).new(ScriptedLLM([]), session_id="rent")
        start, outcomes = ctx.Barrier(2), ctx.Queue()
        months = [f"{trial}-a", f"{trial}-b"]
        procs = [ctx.Process(target=_continue, args=(str(directory), m, start, outcomes))
                 for m in months]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        results = dict(outcomes.get(timeout=5) for _ in procs)
        paid_file = directory / "paid.log"
        paid = paid_file.read_text().split() if paid_file.exists() else []
        stored = read_session(directory, "rent")
        in_history = [b["input"]["month"] for m in stored.messages
                      if isinstance(m["content"], list)
                      for b in m["content"] if b.get("type") == "tool_use"]
        assert sorted(paid) == sorted(in_history), (trial, results)
        assert "saved" in results.values(), results
        refusals += sum(r != "saved" for r in results.values())
        for month, outcome in results.items():
            if outcome != "saved":
                assert "nothing was sent" in outcome.lower(), outcome
                assert month not in paid
    assert refusals >= 1  # the race was real: at least once a process was turned away


# ---------------------------------------------------------------- what the file may hold


@pytest.mark.parametrize("planted", [
    "CREATE TRIGGER t AFTER INSERT ON turns BEGIN DELETE FROM messages; END",
    "CREATE VIEW v AS SELECT * FROM sessions",
    "CREATE INDEX i ON messages(message)",
    "CREATE TABLE notes (x)",
])
def test_a_store_holding_an_object_it_did_not_make_is_refused_before_use(tmp_path, planted):
    SessionStore(tmp_path).new(ScriptedLLM([]), session_id="s1")
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as db:
        db.execute(planted)
    with pytest.raises(SessionError, match="that a session store does not make: the file "
                                           "was changed outside primer"):
        SessionStore(tmp_path)
    with pytest.raises(SessionError, match="does not make"):
        read_session(tmp_path, "s1")


@pytest.mark.parametrize("bad", ["../escape", "a/b", "a..b", "/etc/passwd", ".hidden", "",
                                 "x" * 129, "a\\b"])
def test_a_session_id_that_is_not_a_plain_name_is_refused_everywhere(tmp_path, bad):
    store = SessionStore(tmp_path)
    uses = [lambda: store.load(bad, ScriptedLLM([])), lambda: store.read(bad),
            lambda: store.delete(bad)]
    if bad:  # (new() makes an id up for an empty one)
        uses.append(lambda: store.new(ScriptedLLM([]), session_id=bad))
    for use in uses:
        with pytest.raises(SessionError, match="a session id is a plain name"):
            use()
    assert os.listdir(tmp_path) == ["sessions.sqlite3"]
