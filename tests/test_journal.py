"""The checkpoint journal: one signed line per fixed point, appends only, replays exactly."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from primer.harness.durable.checkpoint import approve, read_checkpoint, resume
from primer.harness.durable.journal import (
    FORMAT_NAME,
    FORMAT_VERSION,
    KEY_ENV,
    KEY_FILE_ENV,
    CheckpointError,
    checkpoint_key,
    key_file_path,
    read_journal,
)
from primer.harness.durable.keystore import forget_anchor
from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.messages import text_block, tool_use_block
from primer.loop.model import Reply, ScriptedLLM
from primer.loop.state import StopCause
from primer.loop.tools import tool


def world():
    """A side-effecting ``send`` (keyed) and a read-only ``look``; calls are counted."""
    sent: list[str] = []

    @tool(side_effecting=True)
    def send(n: int, idempotency_key: str) -> str:
        """Send message n.

        Args:
          n: the message number.
        """
        sent.append(idempotency_key)
        return f"sent {n}"

    @tool
    def look(n: int) -> str:
        """Look something up.

        Args:
          n: what.
        """
        return f"seen {n}"

    return [send, look], sent


def sender(steps: int, name: str = "send"):
    """A model that calls ``name`` once per reply, ``steps - 1`` times, then answers."""
    def policy(messages):
        n = (len(messages) + 1) // 2
        if n >= steps:
            return Reply([text_block("all sent")], "end_turn")
        return Reply([tool_use_block(f"toolu_{n}", name, {"n": n})], "tool_use")
    return ScriptedLLM(policy)


def run(tmp_path: Path, steps: int, name: str = "send", **config):
    tools, sent = world()
    cfg = AgentConfig(checkpoint_dir=str(tmp_path), max_steps=steps, repeat_threshold=None,
                      token_budget=None, **config)
    return run_production(sender(steps, name), "send them", tools, config=cfg), sent


def lines(path) -> list[bytes]:
    return Path(path).read_bytes().splitlines(keepends=True)


def test_the_first_line_is_a_header_and_every_line_is_signed(tmp_path):
    result, _ = run(tmp_path, 3)
    rows = [json.loads(line) for line in lines(result.checkpoint)]
    header = rows[0]
    assert (header["type"], header["format"], header["version"], header["run_id"]) == (
        "header", FORMAT_NAME, FORMAT_VERSION, "run-001")
    assert AgentConfig.from_dict(header["config"]).max_steps == 3
    assert [t["name"] for t in header["tools"]] == ["send", "look", "handoff_to_human"]
    assert all(len(r["mac"]) == 64 and list(r)[-1] == "mac" for r in rows)
    assert [r["type"] for r in rows] == ["header", "state", "started", "done", "results",
                                         "started", "done", "results", "stop"]


def test_reading_the_journal_replays_exactly_the_state_the_run_ended_with(tmp_path):
    result, _ = run(tmp_path, 6)
    data = read_checkpoint(result.checkpoint)
    assert data["messages"] == result.messages
    assert [s["index"] for s in data["steps"]] == [s.index for s in result.steps]
    assert data["steps"] == [s.to_dict() for s in result.steps]
    assert data["usage"] == result.usage.to_dict() and data["cost_usd"] == result.cost_usd
    assert (data["status"], data["result"]["final_text"]) == ("finished", "all sent")


def test_each_step_appends_only_what_is_new_so_a_late_step_costs_what_an_early_one_did(
        tmp_path):
    result, _ = run(tmp_path / "long", 60)
    sizes = [len(line) for line in lines(result.checkpoint)]
    per_step = [sum(sizes[k:k + 3]) for k in range(2, len(sizes) - 3, 3)]  # started, done, results
    assert len(per_step) == 59
    assert max(per_step[-5:]) <= 1.05 * max(per_step[:5])  # flat: no line repeats the history


def test_a_run_with_no_pause_and_no_side_effect_writes_no_journal(tmp_path):
    result, _ = run(tmp_path, 4, name="look")
    assert result.stop_cause is StopCause.END_TURN and result.checkpoint is None
    assert list(tmp_path.iterdir()) == []


def synced_lines(monkeypatch) -> list[str]:
    """The types of the lines written with an fsync from now on."""
    from primer.harness.durable import recorder

    synced: list[str] = []
    real = recorder.append_bytes

    def spy(fd, data, durable):
        real(fd, data, durable)
        if durable:
            synced.extend(json.loads(line)["type"] for line in data.splitlines())

    monkeypatch.setattr(recorder, "append_bytes", spy)
    return synced


def test_side_effects_and_the_stop_are_on_disk_before_the_run_goes_on(tmp_path, monkeypatch):
    synced = synced_lines(monkeypatch)
    result, _ = run(tmp_path, 3)
    assert synced == ["header", "state", "started", "done", "started", "done", "stop"]
    assert [json.loads(x)["type"] for x in lines(result.checkpoint)].count("results") == 2


def test_a_torn_last_line_is_dropped_with_a_note_and_the_run_resumes_from_before_it(tmp_path):
    tools, sent = world()
    result, _ = run(tmp_path, 4)
    path = Path(result.checkpoint)
    kept = b"".join(lines(path)[:6])  # header, state, started, done, results, started
    path.write_bytes(kept + b'{"type": "done", "tool_use_id": "tool')  # killed mid-write
    forget_anchor(json.loads(kept.split(b"\n")[0])["journal_id"])  # (as the kill left it)
    journal = read_journal(path)
    assert journal.notes and "line 7 is torn" in journal.notes[0]
    assert journal.calls["toolu_2"].state == "started"
    resumed = resume(path, sender(4), tools)
    assert resumed.stop_cause is StopCause.END_TURN and sent == ["idem-toolu_2", "idem-toolu_3"]
    assert read_journal(path).notes == []  # the torn bytes were cut before anything followed


def test_a_journal_holding_only_its_header_is_refused(tmp_path):
    result, _ = run(tmp_path, 2)
    path = Path(result.checkpoint)
    path.write_bytes(lines(path)[0])
    with pytest.raises(CheckpointError, match="a header and nothing else"):
        read_journal(path)


# ---------------------------------------------------------------- the key


def test_the_key_comes_from_the_environment_first(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "s3cret")
    assert checkpoint_key(tmp_path) == b"s3cret"


def test_without_one_a_key_file_is_made_once_with_mode_0600_outside_the_checkpoints(
        tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    path = key_file_path()
    assert path == tmp_path / "config" / "primer" / "checkpoint.key"
    key = checkpoint_key(tmp_path / "checkpoints")
    assert len(key) == 64 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert checkpoint_key(tmp_path / "checkpoints") == key  # made once, then read


def test_a_key_file_inside_the_checkpoint_directory_or_readable_by_others_is_refused(
        tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv(KEY_FILE_ENV, str(tmp_path / "ck" / "checkpoint.key"))
    with pytest.raises(CheckpointError, match="lies inside the checkpoint directory"):
        checkpoint_key(tmp_path / "ck")
    loose = tmp_path / "loose.key"
    loose.write_text("k")
    os.chmod(loose, 0o644)
    monkeypatch.setenv(KEY_FILE_ENV, str(loose))
    with pytest.raises(CheckpointError, match="can be read by other users.*chmod 600"):
        checkpoint_key(tmp_path / "ck")


def test_a_pause_and_a_decision_are_appended_signed_and_on_disk(tmp_path, monkeypatch):
    synced = synced_lines(monkeypatch)
    @tool(side_effecting=True, needs_approval=True)
    def pay(amount: int) -> str:
        """Pay.

        Args:
          amount: USD.
        """
        return "paid"

    script = [Reply([tool_use_block("toolu_p", "pay", {"amount": 5})], "tool_use"),
              Reply([text_block("done")], "end_turn")]
    paused = run_production(ScriptedLLM(script), "pay", [pay],
                            config=AgentConfig(checkpoint_dir=str(tmp_path)))
    before = lines(paused.checkpoint)
    approve(paused.checkpoint, "toolu_p", note="ok")
    after = lines(paused.checkpoint)
    assert after[:len(before)] == before  # appended, never rewritten
    [decision] = [json.loads(x) for x in after[len(before):]]
    assert (decision["type"], decision["approved"], decision["note"]) == ("decision", True, "ok")
    assert read_checkpoint(paused.checkpoint)["calls"][0]["decision"]["approved"] is True
    assert synced == ["header", "state", "pause", "decision"]
