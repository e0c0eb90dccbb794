"""Checkpoints: the approval gate, decisions, resume, crash records and bad files.

The journal's own format (signatures, torn lines, appends, the key) is tested in
``test_journal.py``; this file tests what a run, a person and a resume do with it.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from primer.harness.durable.checkpoint import (
    FORMAT_VERSION,
    CheckpointError,
    approve,
    input_sha256,
    list_checkpoints,
    read_checkpoint,
    reject,
    resume,
)
from primer.harness.durable.journal import checkpoint_key, signed_lines
from primer.harness.durable.keystore import forget_anchor
from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.messages import text_block, tool_use_block
from primer.loop.model import Reply, ScriptedLLM
from primer.loop.state import StopCause
from primer.loop.tools import idempotency_key, tool

PAY = {"to": "ACME", "amount": 70}


class World:
    """A payment tool (gated, keyed), a read-only balance tool, and call counters."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.paid: dict[str, dict] = {}  # idempotency key -> payment (the world dedupes)
        self.keys: list[str] = []

        @tool(side_effecting=True, needs_approval=True)
        def pay(to: str, amount: int, idempotency_key: str) -> str:
            """Pay a supplier.

            Args:
              to: supplier name.
              amount: USD.
            """
            self.calls["pay"] += 1
            self.keys.append(idempotency_key)
            self.paid.setdefault(idempotency_key, {"to": to, "amount": amount})
            return f"paid {amount} to {to}"

        @tool
        def balance(account: str) -> str:
            """Read an account's balance.

            Args:
              account: the account name.
            """
            self.calls["balance"] += 1
            return "balance 100"

        @tool(side_effecting=True)
        def notify(text: str) -> str:
            """Send a notice (side effect, no approval, no idempotency key).

            Args:
              text: the notice.
            """
            self.calls["notify"] += 1
            return "sent"

        self.tools = [pay, balance, notify]


def payer(messages: list[dict]) -> Reply:
    """Asks for balance + pay in one reply, then answers from the pay result."""
    last = messages[-1]["content"]
    if isinstance(last, str):
        return Reply([text_block("Checking and paying."),
                      tool_use_block("toolu_bal", "balance", {"account": "ops"}),
                      tool_use_block("toolu_pay", "pay", dict(PAY))], "tool_use")
    results = {b["tool_use_id"]: b for b in last}
    pay = results["toolu_pay"]
    if pay["is_error"]:
        return Reply([text_block(f"Not paid: {pay['content']}")], "end_turn")
    return Reply([text_block(f"Done: {pay['content']}")], "end_turn")


def start(world: World, tmp_path: Path, **config):
    cfg = AgentConfig(checkpoint_dir=str(tmp_path), **config)
    return run_production(ScriptedLLM(payer), "Pay ACME 70 USD.", world.tools, config=cfg)


def test_a_gated_tool_never_runs_when_requested_and_the_run_pauses_with_a_checkpoint(tmp_path):
    world = World()
    result = start(world, tmp_path)
    assert result.stop_cause is StopCause.AWAITING_APPROVAL
    assert world.calls["pay"] == 0
    assert [b["id"] for b in result.pending] == ["toolu_pay"]
    assert Path(result.checkpoint) == tmp_path / "run-001.jsonl"
    data = read_checkpoint(result.checkpoint)
    assert data["version"] == FORMAT_VERSION and data["status"] == "awaiting_approval"
    pay = next(c for c in data["calls"] if c["tool_use_id"] == "toolu_pay")
    assert (pay["name"], pay["input"], pay["state"], pay["decision"]) == ("pay", PAY,
                                                                        "waiting", None)
    assert data["messages"] == result.messages
    assert data["usage"] == result.usage.to_dict() and data["cost_usd"] == result.cost_usd
    assert sum(data["repeat_counts"].values()) == 2  # both calls were counted once
    assert AgentConfig.from_dict(data["config"]).checkpoint_dir == str(tmp_path)


def test_calls_needing_no_approval_run_before_the_pause_and_only_once(tmp_path):
    world = World()
    result = start(world, tmp_path)
    bal = next(c for c in read_checkpoint(result.checkpoint)["calls"]
               if c["name"] == "balance")
    assert (bal["state"], bal["result"]["content"]) == ("done", "balance 100")
    assert [e.name for e in result.executions] == ["balance"]
    assert "succeeded: balance" in result.summary
    approve(result.checkpoint, "toolu_pay")
    resumed = resume(result.checkpoint, ScriptedLLM(payer), world.tools)
    assert world.calls["balance"] == 1
    assert [e.name for e in resumed.steps[0].executions] == ["balance", "pay"]  # request order


def test_without_a_checkpoint_dir_a_pause_keeps_pending_runs_nothing_and_writes_no_file(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    world = World()
    result = run_production(ScriptedLLM(payer), "Pay ACME 70 USD.", world.tools)
    assert result.stop_cause is StopCause.AWAITING_APPROVAL
    assert [b["id"] for b in result.pending] == ["toolu_bal", "toolu_pay"]
    assert result.checkpoint is None and not world.calls and not list(tmp_path.iterdir())


def test_an_approved_call_runs_once_with_the_approved_arguments_and_its_key(tmp_path):
    world = World()
    paused = start(world, tmp_path)
    approve(paused.checkpoint, "toolu_pay", note="invoice 7 checked")
    result = resume(paused.checkpoint, ScriptedLLM(payer), world.tools)
    assert result.stop_cause is StopCause.END_TURN
    assert result.final_text == "Done: paid 70 to ACME"
    assert world.calls["pay"] == 1
    assert world.keys == [idempotency_key("toolu_pay")]
    assert list(world.paid.values()) == [PAY]
    assert read_checkpoint(paused.checkpoint)["status"] == "finished"


def test_a_rejected_call_never_runs_and_the_model_reads_the_rejection_with_its_note(tmp_path):
    world = World()
    paused = start(world, tmp_path)
    reject(paused.checkpoint, "toolu_pay", note="supplier is on hold")
    result = resume(paused.checkpoint, ScriptedLLM(payer), world.tools)
    assert world.calls["pay"] == 0
    assert result.stop_cause is StopCause.END_TURN
    assert "A person rejected this call to pay" in result.final_text
    assert "supplier is on hold" in result.final_text
    rejected = next(e for e in result.executions if e.name == "pay")
    assert (rejected.is_error, rejected.error_kind) == (True, "rejected")


def test_an_undecided_call_never_runs_and_resume_stays_paused(tmp_path):
    world = World()
    paused = start(world, tmp_path)
    before = Path(paused.checkpoint).read_text()
    result = resume(paused.checkpoint, ScriptedLLM(payer), world.tools)
    assert result.stop_cause is StopCause.AWAITING_APPROVAL
    assert "no decision yet for toolu_pay" in result.stop_detail
    assert [b["id"] for b in result.pending] == ["toolu_pay"]
    assert world.calls["pay"] == 0
    assert Path(paused.checkpoint).read_text() == before  # nothing new: nothing appended


def test_resuming_a_finished_checkpoint_twice_runs_nothing_twice(tmp_path):
    world = World()
    paused = start(world, tmp_path)
    approve(paused.checkpoint, "toolu_pay")
    first = resume(paused.checkpoint, ScriptedLLM(payer), world.tools)
    model = ScriptedLLM(payer)
    second = resume(paused.checkpoint, model, world.tools)
    assert world.calls == Counter({"pay": 1, "balance": 1})
    assert model.calls == 0
    assert (second.stop_cause, second.final_text) == (first.stop_cause, first.final_text)


def test_a_stale_copy_of_an_approved_checkpoint_is_refused_after_the_run_went_on(tmp_path):
    world = World()
    paused = start(world, tmp_path)
    approve(paused.checkpoint, "toolu_pay")
    (tmp_path / "copy").mkdir()
    stale = tmp_path / "copy" / Path(paused.checkpoint).name
    stale.write_bytes(Path(paused.checkpoint).read_bytes())
    resume(paused.checkpoint, ScriptedLLM(payer), world.tools)
    with pytest.raises(CheckpointError, match="older copy of run run-001"):
        resume(stale, ScriptedLLM(payer), world.tools)
    assert world.keys == [idempotency_key("toolu_pay")]


def records(path: str | Path) -> list[dict]:
    """The journal's lines as dicts (signatures and all)."""
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def resign(path: str | Path, edit) -> None:
    """Rewrite a journal with ``edit(records)`` applied and every line signed again with the
    key: what only a process holding the key can do (a bug, or a newer writer)."""
    rows = records(path)
    for r in rows:
        r.pop("mac")
    edit(rows)
    data, _ = signed_lines(rows, checkpoint_key(Path(path).parent), b"primer-checkpoint")
    Path(path).write_bytes(data)
    forget_anchor(rows[0]["journal_id"])  # a rewritten file: read as from elsewhere


def crash_after(path: str | Path, predicate) -> None:
    """Cut the journal after the first line ``predicate`` accepts: the process died there."""
    kept = []
    for line in Path(path).read_text().splitlines(keepends=True):
        kept.append(line)
        if predicate(json.loads(line)):
            break
    Path(path).write_text("".join(kept))
    # a real crash there leaves the journal's anchor no further than its last line
    forget_anchor(json.loads(kept[0])["journal_id"])


def run_to_the_end(world, tmp_path):
    """A paused payment, approved and resumed to its end (the journal of a whole run)."""
    paused = start(world, tmp_path)
    approve(paused.checkpoint, "toolu_pay")
    resume(paused.checkpoint, ScriptedLLM(payer), world.tools)
    return Path(paused.checkpoint)


def test_a_side_effecting_call_is_recorded_as_started_with_its_key_before_it_runs(tmp_path):
    world = World()
    paused = start(world, tmp_path)
    approve(paused.checkpoint, "toolu_pay")
    seen = []
    original = world.tools[0].fn

    def spy(**kwargs):
        call = next(c for c in read_checkpoint(paused.checkpoint)["calls"]
                    if c["tool_use_id"] == "toolu_pay")
        seen.append((call["state"], call["idempotency_key"]))
        return original(**kwargs)

    world.tools[0].fn = spy
    resume(paused.checkpoint, ScriptedLLM(payer), world.tools)
    assert seen == [("started", idempotency_key("toolu_pay"))]


def test_a_call_that_started_but_has_no_result_is_rerun_with_the_same_key(tmp_path):
    world = World()
    path = run_to_the_end(world, tmp_path)
    crash_after(path, lambda r: r["type"] == "started")  # died inside the payment
    assert read_checkpoint(path)["status"] == "awaiting_approval"
    result = resume(path, ScriptedLLM(payer), world.tools)
    assert world.keys == [idempotency_key("toolu_pay")] * 2  # the same key again
    assert len(world.paid) == 1 and result.stop_cause is StopCause.END_TURN


def test_a_call_recorded_done_before_a_crash_is_not_run_again(tmp_path):
    world = World()
    path = run_to_the_end(world, tmp_path)
    crash_after(path, lambda r: r["type"] == "done" and r["tool_use_id"] == "toolu_pay")
    result = resume(path, ScriptedLLM(payer), world.tools)
    assert world.calls["pay"] == 1 and result.final_text == "Done: paid 70 to ACME"


def test_a_started_side_effect_without_an_idempotency_key_is_not_rerun_blind(tmp_path):
    world = World()
    script = [Reply([tool_use_block("toolu_n", "notify", {"text": "hi"})], "tool_use"),
              Reply([text_block("ok")], "end_turn")]
    cfg = AgentConfig(checkpoint_dir=str(tmp_path))
    done = run_production(ScriptedLLM(script), "Notify.", world.tools, config=cfg)
    assert world.calls["notify"] == 1
    crash_after(done.checkpoint, lambda r: r["type"] == "started")
    result = resume(done.checkpoint, ScriptedLLM(script[1:]), world.tools)
    assert world.calls["notify"] == 1
    unknown = next(e for e in result.executions if e.name == "notify")
    assert unknown.error_kind == "unknown_outcome" and "Check the current state" in unknown.content


def test_every_reply_with_a_side_effect_is_checkpointed_around_the_call(tmp_path):
    world = World()
    states = []
    original = world.tools[2].fn

    def spy(**kwargs):
        data = read_checkpoint(tmp_path / "run-001.jsonl")
        states.append([(c["name"], c["state"]) for c in data["calls"]])
        return original(**kwargs)

    world.tools[2].fn = spy
    script = [Reply([tool_use_block("toolu_n", "notify", {"text": "hi"})], "tool_use"),
              Reply([text_block("ok")], "end_turn")]
    cfg = AgentConfig(checkpoint_dir=str(tmp_path))
    result = run_production(ScriptedLLM(script), "Notify.", world.tools, config=cfg)
    assert states == [[("notify", "started")]]
    assert read_checkpoint(result.checkpoint)["status"] == "finished"


def test_a_decision_is_keyed_by_tool_use_id_and_an_unknown_id_is_a_clear_error(tmp_path):
    world = World()
    paused = start(world, tmp_path)
    with pytest.raises(CheckpointError, match=r"no call with tool_use_id 'toolu_nope'.*"
                                              r"toolu_pay \(pay\)"):
        approve(paused.checkpoint, "toolu_nope")
    with pytest.raises(CheckpointError, match="toolu_bal"):
        approve(paused.checkpoint, "toolu_bal")  # needs no approval: not decidable


def test_approving_twice_is_a_no_op_and_a_decision_cannot_be_reversed(tmp_path):
    paused = start(World(), tmp_path)
    approve(paused.checkpoint, "toolu_pay", note="ok")
    assert approve(paused.checkpoint, "toolu_pay")["decision"]["note"] == "ok"
    with pytest.raises(CheckpointError, match="already approved; a decision cannot be changed"):
        reject(paused.checkpoint, "toolu_pay")


def test_the_decision_stores_a_hash_of_the_exact_input_the_person_saw(tmp_path):
    paused = start(World(), tmp_path)
    call = approve(paused.checkpoint, "toolu_pay")
    assert call["decision"]["input_sha256"] == input_sha256(PAY)


# ---------------------------------------------------------------- crash-safe writes


def test_a_failing_first_write_leaves_no_file_and_no_temporary_file(tmp_path, monkeypatch):
    from primer.harness.durable import recorder

    def disk_pulled(*_, **__):
        raise OSError("disk pulled")

    monkeypatch.setattr(recorder.os, "link", disk_pulled)
    with pytest.raises(CheckpointError, match="disk pulled.*was not recorded"):
        start(World(), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".run-001.jsonl.lock"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_process_killed_during_its_first_write_leaves_nothing_to_block_a_resume(tmp_path):
    from primer.harness.durable import recorder

    pid = os.fork()
    if pid == 0:  # the child dies half-way through writing its journal's first lines
        def write_half(fd, data, durable):
            os.write(fd, data[: len(data) // 2])
            os._exit(9)

        recorder.append_bytes = write_half
        start(World(), tmp_path)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 9
    assert not [p for p in tmp_path.iterdir() if not p.name.endswith(".lock")]
    again = start(World(), tmp_path)  # the next run starts clean, as run-001
    assert Path(again.checkpoint).name == "run-001.jsonl"
    assert read_checkpoint(again.checkpoint)["status"] == "awaiting_approval"


def test_each_run_gets_its_own_checkpoint_file(tmp_path):
    first, second = start(World(), tmp_path), start(World(), tmp_path)
    assert [Path(r.checkpoint).name for r in (first, second)] == ["run-001.jsonl",
                                                                    "run-002.jsonl"]


# ---------------------------------------------------------------- bad input: nothing runs


def paused_file(tmp_path):
    world = World()
    paused = start(world, tmp_path)
    approve(paused.checkpoint, "toolu_pay")
    return world, Path(paused.checkpoint)


@pytest.mark.parametrize("damage, message", [
    (lambda t: t[:200], "first line is incomplete.*truncated or corrupt"),
    (lambda t: "\x00garbage" + t, "line 1: not valid JSON"),
    (lambda t: t.replace('"amount": 70', '"amount": 7000'), r"line \d: the line does not "
                                                          "match its signature"),
    (lambda t: "[]\n", "not a primer checkpoint"),
    (lambda t: json.dumps({"format": "primer-checkpoint", "version": 1}, indent=1),
     "format version 1 .one JSON file."),
], ids=["truncated", "corrupt", "hand-edited", "not-a-checkpoint", "old-format"])
def test_a_damaged_checkpoint_is_a_clear_error_and_nothing_runs(tmp_path, damage, message):
    world, path = paused_file(tmp_path)
    path.write_text(damage(path.read_text()))
    with pytest.raises(CheckpointError, match=message):
        resume(path, ScriptedLLM(payer), world.tools)
    assert world.calls["pay"] == 0


@pytest.mark.parametrize("damage", ["reordered", "cut in the middle", "forged", "other key"])
def test_a_reordered_cut_forged_or_foreign_journal_is_refused_by_line(tmp_path, damage,
                                                                      monkeypatch):
    world, path = paused_file(tmp_path)
    lines = path.read_text().splitlines(keepends=True)
    if damage == "reordered":
        lines[2], lines[3] = lines[3], lines[2]
    elif damage == "cut in the middle":
        del lines[2]
    elif damage == "forged":  # a whole new journal, signed with a key the forger made up
        monkeypatch.setenv("PRIMER_CHECKPOINT_KEY", "the forger's key")
        resign(path, lambda rows: rows[2]["calls"][0].update(needs_approval=False))
        monkeypatch.delenv("PRIMER_CHECKPOINT_KEY")
        lines = path.read_text().splitlines(keepends=True)
    if damage != "other key":
        path.write_text("".join(lines))
    else:  # an honest journal, read on a machine with another key
        monkeypatch.setenv("PRIMER_CHECKPOINT_KEY", "another machine")
    with pytest.raises(CheckpointError, match=r"line \d: the line does not match its signature.*"
                                              r"Nothing was run"):
        resume(path, ScriptedLLM(payer), world.tools)
    assert world.calls["pay"] == 0


def test_swapped_arguments_after_approval_are_refused_even_when_signed_again(tmp_path):
    world, path = paused_file(tmp_path)

    def swap(rows):
        for r in rows:
            for m in r.get("state", {}).get("messages", []) + r.get("messages", []):
                for b in m["content"] if isinstance(m["content"], list) else []:
                    if b.get("id") == "toolu_pay":
                        b["input"]["amount"] = 7000
            for s in r.get("state", {}).get("steps", []) + r.get("steps", []):
                for b in s["reply"]["content"]:
                    if b.get("id") == "toolu_pay":
                        b["input"]["amount"] = 7000

    resign(path, swap)
    with pytest.raises(CheckpointError, match="differs from what the model asked for"):
        resume(path, ScriptedLLM(payer), world.tools)
    assert world.calls["pay"] == 0


def test_resume_takes_needs_approval_from_the_live_tool_not_from_the_file(tmp_path):
    world = World()
    paused = start(world, tmp_path)

    def ungate(rows):  # the file now says pay needs no approval (and has no decision)
        for r in rows:
            for c in r.get("calls", []):
                c["needs_approval"] = False

    resign(paused.checkpoint, ungate)
    result = resume(paused.checkpoint, ScriptedLLM(payer), world.tools)
    assert result.stop_cause is StopCause.AWAITING_APPROVAL and world.calls["pay"] == 0
    assert "no decision yet for toolu_pay" in result.stop_detail
    approve(paused.checkpoint, "toolu_pay")  # the resume paused it again: a person can decide
    assert resume(paused.checkpoint, ScriptedLLM(payer), world.tools).final_text == \
        "Done: paid 70 to ACME"


def test_resume_takes_the_idempotency_key_rule_from_the_live_tool(tmp_path):
    world = World()
    path = run_to_the_end(world, tmp_path)
    crash_after(path, lambda r: r["type"] == "started")
    keyless = World()  # the same pay tool, now without an idempotency_key parameter

    @tool(side_effecting=True, needs_approval=True)
    def pay(to: str, amount: int) -> str:
        """Pay a supplier.

        Args:
          to: supplier name.
          amount: USD.
        """
        keyless.calls["pay"] += 1
        return "paid"

    result = resume(path, ScriptedLLM(payer), [pay, *keyless.tools[1:]])
    assert keyless.calls["pay"] == 0  # not re-run blind: the live tool takes no key
    assert next(e for e in result.executions if e.name == "pay").error_kind == "unknown_outcome"


def test_a_checkpoint_from_a_newer_format_version_is_refused_by_name(tmp_path):
    world, path = paused_file(tmp_path)
    resign(path, lambda rows: rows[0].update(version=FORMAT_VERSION + 1))
    with pytest.raises(CheckpointError, match=f"format version {FORMAT_VERSION + 1}.*Upgrade"):
        resume(path, ScriptedLLM(payer), world.tools)
    assert world.calls["pay"] == 0


def test_a_schema_violation_names_the_line_and_the_field(tmp_path):
    world, path = paused_file(tmp_path)
    resign(path, lambda rows: rows[2]["calls"][1].update(needs_approval="no"))
    with pytest.raises(CheckpointError, match="line 3: not a valid 'pause' record: at "
                                              "'calls/1/needs_approval'"):
        resume(path, ScriptedLLM(payer), world.tools)


def test_a_missing_checkpoint_file_says_how_to_find_one(tmp_path):
    with pytest.raises(CheckpointError, match="no such checkpoint file.*approvals list"):
        approve(tmp_path / "run-404.json", "toolu_pay")


def test_resuming_without_a_tool_the_run_needs_is_a_clear_error(tmp_path):
    world, path = paused_file(tmp_path)
    with pytest.raises(CheckpointError, match="needs the tool\\(s\\) pay"):
        resume(path, ScriptedLLM(payer), world.tools[1:])
    assert world.calls["pay"] == 0


def test_listing_shows_each_pending_call_and_marks_bad_files_invalid(tmp_path):
    paused = start(World(), tmp_path)
    (tmp_path / "broken.jsonl").write_text('{"type": "header", "for\n')
    infos = {i.path.name: i for i in list_checkpoints(tmp_path)}
    assert infos["broken.jsonl"].status == "invalid"
    assert "not valid JSON" in infos["broken.jsonl"].error
    text = infos[Path(paused.checkpoint).name].describe()
    assert "awaiting_approval" in text and 'toolu_pay  pay({"amount": 70, "to": "ACME"})' in text
    assert "undecided" in text


def test_the_file_lock_is_a_hidden_side_file(tmp_path):
    paused = start(World(), tmp_path)
    assert os.path.exists(tmp_path / ".run-001.jsonl.lock")
    assert [i.path.name for i in list_checkpoints(tmp_path)] == [Path(paused.checkpoint).name]


def test_before_tool_hooks_also_guard_the_calls_a_resume_runs(tmp_path):
    from primer.harness.hooks import BlockTools

    world = World()
    paused = start(world, tmp_path)
    approve(paused.checkpoint, "toolu_pay")
    result = resume(paused.checkpoint, ScriptedLLM(payer), world.tools,
                    hooks=BlockTools({"pay"}, "payments are frozen today"))
    assert world.calls["pay"] == 0
    assert next(e for e in result.executions if e.name == "pay").is_error


# ---------------------------------------------------------------- traces of the pause path


def test_calls_run_at_a_pause_and_at_resume_reach_the_trace_once_each(tmp_path):
    events: list[tuple[str, dict]] = []
    w = World()
    paused = run_production(ScriptedLLM(payer), "pay ACME", w.tools,
                            config=AgentConfig(checkpoint_dir=str(tmp_path)),
                            on_event=lambda kind, data: events.append((kind, data)))
    ran = [d["name"] for k, d in events if k == "tool_execution"]
    assert ran == ["balance"]  # it ran at the pause, before any decision
    approve(paused.checkpoint, "toolu_pay", note="invoice 7 checked")
    events.clear()
    resume(paused.checkpoint, ScriptedLLM(payer), w.tools,
           on_event=lambda kind, data: events.append((kind, data)))
    assert [d["name"] for k, d in events if k == "tool_execution"] == ["pay"]
    [decision] = [d for k, d in events if k == "approval"]
    assert (decision["tool_use_id"], decision["approved"], decision["note"]) == (
        "toolu_pay", True, "invoice 7 checked")
    assert w.calls == Counter({"balance": 1, "pay": 1})


def test_the_table_of_a_paused_run_shows_the_calls_awaiting_approval(tmp_path):
    for checkpoint_dir in (None, str(tmp_path)):
        paused = run_production(ScriptedLLM(payer), "pay ACME", World().tools,
                                config=AgentConfig(checkpoint_dir=checkpoint_dir))
        row = paused.rows()[-1]
        assert "[awaiting approval] pay(" in row["tool calls"]
        assert "balance(" in row["tool calls"]
    # with a checkpoint the lookup ran: its result sits beside the waiting call's mark
    assert row["results / answer"] == "balance 100; awaiting approval"


def test_a_checkpoint_records_the_scenario_it_was_given_and_resume_keeps_it(tmp_path):
    paused = run_production(ScriptedLLM(payer), "pay ACME", World().tools,
                            config=AgentConfig(checkpoint_dir=str(tmp_path)), scenario="payments")
    assert read_checkpoint(paused.checkpoint)["scenario"] == "payments"
    approve(paused.checkpoint, "toolu_pay")
    resume(paused.checkpoint, ScriptedLLM(payer), World().tools)
    assert read_checkpoint(paused.checkpoint)["scenario"] == "payments"
    bare = run_production(ScriptedLLM(payer), "pay ACME", World().tools,
                          config=AgentConfig(checkpoint_dir=str(tmp_path / "b")))
    assert "scenario" not in read_checkpoint(bare.checkpoint)  # optional: older files lack it


def test_listing_one_checkpoint_file_shows_that_file_and_its_calls(tmp_path):
    paused = run_production(ScriptedLLM(payer), "pay ACME", World().tools,
                            config=AgentConfig(checkpoint_dir=str(tmp_path)))
    [info] = list_checkpoints(paused.checkpoint)
    assert info.status == "awaiting_approval"
    assert [c["tool_use_id"] for c in info.calls] == ["toolu_pay"]


def test_a_signed_journal_with_a_malformed_step_is_a_checkpoint_error(tmp_path):
    from primer.scenarios import get_demo

    demo = get_demo("refund")
    paused = demo.run(checkpoint_dir=str(tmp_path))
    resign(paused.checkpoint, lambda rows: rows[1]["state"].update(steps=[{}]))
    with pytest.raises(CheckpointError, match="does not fit the lines before it|malformed"):
        resume(paused.checkpoint, demo.make_llm(), demo.tools(str(tmp_path)))


def test_an_approved_call_that_hangs_on_resume_is_answered_and_the_run_finishes(tmp_path):
    import threading

    release = threading.Event()

    @tool(side_effecting=True, needs_approval=True, timeout_s=0.05)
    def pay(to: str, amount: int, idempotency_key: str) -> str:
        """Pay a supplier.

        Args:
          to: supplier name.
          amount: USD.
        """
        release.wait(30)
        return "paid late"

    world = World()
    tools = [pay, *world.tools[1:]]
    paused = run_production(ScriptedLLM(payer), "Pay ACME 70 USD.", tools,
                            config=AgentConfig(checkpoint_dir=str(tmp_path)))
    approve(paused.checkpoint, "toolu_pay")
    result = resume(paused.checkpoint, ScriptedLLM(payer), tools)
    release.set()
    assert result.stop_cause is StopCause.END_TURN and "timed out" in result.final_text
    assert read_checkpoint(paused.checkpoint)["status"] == "finished"
    assert [c for c in records(paused.checkpoint) if c["type"] == "done"
            and c["tool_use_id"] == "toolu_pay"]  # its outcome is recorded, never re-run
