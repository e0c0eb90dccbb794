"""Corrupted checkpoints and traces, and unusable paths: one clear line, a non-zero exit.

Every entry of the two corpora below is a way a file was broken in a real run (truncated,
edited, the wrong encoding, a FIFO or a device in its place, JSON nested too deep or an
integer too long to parse, a field of the wrong type, a line removed). Each command that
reads the file must answer with one line on stderr naming the problem and exit 2, never a
traceback, never a hang, and never run anything.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from primer.__main__ import BROKEN_PIPE_EXIT, main
from primer.harness.durable.checkpoint import read_checkpoint
from primer.harness.durable.journal import FORMAT_NAME, checkpoint_key, read_journal, signed_lines
from primer.harness.durable.keystore import (
    CheckpointError,
    anchor_path,
    forget_anchor,
    write_anchor,
)
from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.model import ScriptedLLM, text_reply, tool_reply
from primer.loop.state import StopCause
from primer.scenarios import get_demo
from primer.scenarios.refunds import RefundLedger, ledger_path

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str) -> tuple[int, str, str]:
    """Run ``python -m primer ARGS`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def assert_one_line_refusal(code: int, err: str) -> None:
    assert code == 2, err
    assert err.strip() and err.strip().count("\n") == 0, err
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def recorded_trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "orders.jsonl"
    get_demo("orders").run(trace=str(path))
    return path


@pytest.fixture
def paused(tmp_path, monkeypatch) -> Path:
    monkeypatch.delenv("PRIMER_REFUND_LEDGER", raising=False)
    result = get_demo("refund").run(checkpoint_dir=str(tmp_path / "ck"))
    assert result.stop_cause is StopCause.AWAITING_APPROVAL
    return Path(result.checkpoint)


def refunds_paid(checkpoint: Path) -> int:
    return len(RefundLedger(ledger_path(checkpoint.parent)).refunds())


# ---------------------------------------------------------------- paths that are not files


def special(kind: str, where: Path) -> Path:
    path = where / f"{kind}.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    return path  # "missing": nothing there


SPECIAL = ["fifo", "dev-zero", "directory", "missing", "empty"]


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("command", ["trace show", "replay", "approve", "resume",
                                     "approvals list"])
def test_an_unusable_path_is_one_line_and_exit_2_from_every_command(tmp_path, kind, command,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = str(special(kind, tmp_path))
    args = {"approve": [path, "toolu_x", "--yes"]}.get(command, [path])
    if kind == "directory" and command == "approvals list":
        assert cli("approvals", "list", path)[0] == 0  # a directory is what it lists
        return
    assert_one_line_refusal(*[cli(*command.split(), *args)[i] for i in (0, 2)])
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".lock")]


def test_approve_with_a_wrong_path_creates_no_stray_lock_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for path in ("ck2", "no/such/dir/run-001.jsonl"):
        code, _, err = cli("approve", path, "toolu_x", "--yes")
        assert_one_line_refusal(code, err)
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_dir_whose_parent_is_a_file_is_refused_before_the_run(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match="is not a directory. Nothing was run"):
        run_production(ScriptedLLM(["done"]), "task",
                       config=AgentConfig(checkpoint_dir=str(tmp_path / "file" / "ck")))


# ---------------------------------------------------------------- the checkpoint corpus


def resigned(path: Path, edit) -> None:
    """Rewrite the journal at ``path`` with ``edit(records)`` and sign it again with this
    machine's key (a writer with the key that wrote what it should not)."""
    records = [json.loads(line[: line.rindex(', "mac"')] + "}")
               for line in path.read_text().splitlines()]
    data, _ = signed_lines(edit(records), checkpoint_key(path.parent), FORMAT_NAME.encode())
    path.write_bytes(data)
    forget_anchor(records[0]["journal_id"])  # rewritten: read as a journal from elsewhere


def _edit_line(records, kind, change):
    for r in records:
        if r["type"] == kind:
            change(r)
    return records


CHECKPOINT_CORPUS = {
    "truncated-first-line": lambda p: p.write_bytes(p.read_bytes()[:150]),
    "edited-amount": lambda p: p.write_text(p.read_text().replace('"amount_usd": 40.0',
                                                                  '"amount_usd": 400.0')),
    "lines-reordered": lambda p: p.write_text("\n".join(
        (lambda ls: [ls[0], ls[2], ls[1], *ls[3:]])(p.read_text().splitlines())) + "\n"),
    "utf16": lambda p: p.write_bytes(p.read_text().encode("utf-16")),
    "not-a-journal": lambda p: p.write_text('{"hello": "world"}\n'),
    "binary": lambda p: p.write_bytes(os.urandom(512)),
    "header-only": lambda p: p.write_text(p.read_text().splitlines()[0] + "\n"),
    "newer-version": lambda p: p.write_text(p.read_text().replace('"version": 3', '"version": 99',
                                                                  1)),
    "signed-deep-json": lambda p: resigned(p, lambda rs: [*rs[:1], {**rs[1], "deep": _deep()},
                                                           *rs[2:]]),
    "signed-4300-digit-integer": lambda p: resigned(p, lambda rs: [
        *rs[:1], {**rs[1], "n": int("9" * 4300)}, *rs[2:]]),
    "signed-wrong-field-type": lambda p: resigned(p, lambda rs: _edit_line(
        rs, "pause", lambda r: r["calls"][0].update(needs_approval="no"))),
    "signed-unknown-record": lambda p: resigned(p, lambda rs: [*rs, {"type": "party"}]),
    "tail-cut-at-a-line-boundary": lambda p: p.write_text(
        "".join(line + "\n" for line in p.read_text().splitlines()[:-1])),
}


def _deep():
    value: list = []
    for _ in range(300):
        value = [value]
    return value


@pytest.mark.parametrize("damage", list(CHECKPOINT_CORPUS))
def test_every_corrupted_checkpoint_is_one_line_and_exit_2_and_nothing_runs(paused, damage):
    before = refunds_paid(paused)
    CHECKPOINT_CORPUS[damage](paused)
    call = "toolu_R1001_01_1"
    for args in (["approve", str(paused), call, "--yes"], ["resume", str(paused)],
                 ["approvals", "list", str(paused)]):
        code, _, err = cli(*args)
        assert_one_line_refusal(code, err)
    assert refunds_paid(paused) == before


def test_a_needs_approval_false_written_into_the_checkpoint_cannot_unlock_the_call(paused):
    """Even a file signed with the key (so past the HMAC) cannot turn approval off: resume
    takes every safety property from the live tools it is given."""
    resigned(paused, lambda rs: _edit_line(
        rs, "pause", lambda r: [c.update(needs_approval=False) for c in r["calls"]]))
    assert all(not c["needs_approval"] for c in read_checkpoint(paused)["calls"])
    code, out, _ = cli("resume", str(paused))
    assert code == 0 and "stop cause: awaiting_approval" in out
    assert refunds_paid(paused) == 0


def test_an_edited_checkpoint_is_refused_by_its_signature_not_a_digest_anyone_can_recompute(
        paused):
    text = paused.read_text().replace('"needs_approval": true', '"needs_approval": false')
    paused.write_text(text)
    code, _, err = cli("resume", str(paused))
    assert_one_line_refusal(code, err)
    assert "does not match its signature" in err and refunds_paid(paused) == 0


def test_a_second_resume_of_a_finished_run_says_it_had_already_finished(paused):
    call = read_checkpoint(paused)["calls"][0]["tool_use_id"]
    assert cli("approve", str(paused), call, "--yes")[0] == 0
    code, first, _ = cli("resume", str(paused))
    assert code == 0 and "Refunded" in first and refunds_paid(paused) == 1
    code, again, _ = cli("resume", str(paused))
    assert code == 0 and "had already finished; nothing was run again" in again
    assert refunds_paid(paused) == 1


def test_the_journal_read_back_is_the_same_after_every_refusal(paused):
    """A refused command touched nothing: the file and what it says are as they were."""
    before = paused.read_bytes()
    cli("approve", str(paused), "toolu_nope", "--yes")
    assert paused.read_bytes() == before and read_journal(paused).status == "awaiting_approval"


# ---------------------------------------------------------------- a journal's end


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def test_a_journal_cut_at_a_line_boundary_after_its_end_was_on_disk_is_refused(paused):
    paused.write_text("".join(_lines(paused)[:-1]))  # the pause line, fsynced, is gone
    with pytest.raises(CheckpointError, match="ends before its last line that was on disk"):
        read_journal(paused)


def test_an_older_copy_put_back_in_place_of_a_journal_is_refused(paused, tmp_path):
    older = paused.read_bytes()
    call = read_checkpoint(paused)["calls"][0]["tool_use_id"]
    assert cli("approve", str(paused), call, "--yes")[0] == 0  # a decision line, fsynced
    paused.write_bytes(older)  # the approval "never happened"? it did
    code, _, err = cli("resume", str(paused))
    assert_one_line_refusal(code, err)
    assert "ends before its last line that was on disk" in err and refunds_paid(paused) == 0


def test_a_copy_of_a_journal_elsewhere_is_held_to_the_same_anchor(paused, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    copy = tmp_path / "elsewhere" / paused.name
    copy.write_text("".join(_lines(paused)[:-1]))
    with pytest.raises(CheckpointError, match="ends before its last line that was on disk"):
        read_journal(copy)
    copy.write_bytes(paused.read_bytes())
    assert read_journal(copy).notes == [] and read_journal(paused).notes == []


def test_a_journal_whose_anchor_is_gone_is_read_with_a_note_that_its_end_is_unchecked(paused):
    forget_anchor(read_journal(paused).header["journal_id"])
    assert any("cut-off end could not be noticed" in n for n in read_journal(paused).notes)


def test_a_crash_after_a_line_but_before_its_anchor_is_still_read(paused):
    """The line is on disk before its anchor is written: a kill between the two leaves the
    anchor one line behind, which is a journal that goes on, not one cut short."""
    journal = read_journal(paused)
    header = json.loads(_lines(paused)[0][: _lines(paused)[0].rindex(', "mac"')] + "}")
    before = sum(len(line.encode()) for line in _lines(paused)[:-1])
    previous_mac = _lines(paused)[-2].rsplit('"mac": "', 1)[1][:64].encode()
    write_anchor(anchor_path(header["journal_id"]), before, previous_mac)
    assert read_journal(paused).size == journal.size


# ---------------------------------------------------------------- the trace corpus


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _rewrite(path: Path, events: list, raw: str | None = None) -> None:
    path.write_text(raw if raw is not None else
                    "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events))


def _first(events, kind):
    return next(e for e in events if e["event"] == kind)


def edit(kind, change):
    def damage(path, events):
        change(_first(events, kind))
        _rewrite(path, events)
    return damage


TRACE_CORPUS = {
    "bad-config": edit("run_start", lambda e: e["config"].update(max_steps="ten")),
    "unknown-config-key": edit("run_start", lambda e: e["config"].update(colour="red")),
    "tools-not-a-list": edit("run_start", lambda e: e.update(tools={"get_order": 1})),
    "task-not-text": edit("run_start", lambda e: e.update(task=["a"])),
    "missing-reply": edit("model_call", lambda e: e.pop("reply")),
    "missing-step": edit("model_call", lambda e: e.pop("step")),
    "step-as-text": edit("model_call", lambda e: e.update(step="1")),
    "null-content": edit("model_call", lambda e: e["reply"].update(content=None)),
    "numeric-content": edit("model_call", lambda e: e["reply"].update(content=5)),
    "text-is-a-number": edit("model_call", lambda e: e["reply"].update(
        content=[{"type": "text", "text": 5}])),
    "usage-as-string": edit("model_call", lambda e: e["reply"].update(usage="12 tokens")),
    "usage-negative": edit("model_call", lambda e: e["reply"]["usage"].update(input_tokens=-5)),
    "usage-float": edit("model_call", lambda e: e["reply"]["usage"].update(input_tokens=1.5)),
    "unknown-stop-cause": edit("stop", lambda e: e.update(cause="gave_up_happily")),
    "execution-is-error-text": edit("tool_execution", lambda e: e.update(is_error="no")),
    "execution-for-no-step": edit("tool_execution", lambda e: e.update(step=99)),
    "seq-as-text": edit("model_call", lambda e: e.update(seq="3")),
    "usage-nan": lambda p, ev: _rewrite(p, ev, p.read_text().replace(
        '"input_tokens":', '"input_tokens":NaN,"x":', 1)),
    "usage-1e400": lambda p, ev: _rewrite(p, ev, p.read_text().replace(
        '"input_tokens":', '"input_tokens":1e400,"x":', 1)),
    "huge-integer": lambda p, ev: _rewrite(p, ev, p.read_text().replace(
        '"input_tokens":', f'"input_tokens":{"7" * 4300},"x":', 1)),
    "deep-nesting": lambda p, ev: _rewrite(p, ev, p.read_text().replace(
        '"input":{', '"input":{"d":' + "[" * 5000 + "]" * 5000 + ",", 1)),
    "non-utf8": lambda p, ev: p.write_bytes(p.read_bytes().replace(b"order", b"ord\xffr", 1)),
    "utf16": lambda p, ev: p.write_bytes(p.read_text().encode("utf-16")),
    "utf16-no-bom": lambda p, ev: p.write_bytes(p.read_text().encode("utf-16-le")),
    "not-json-line": lambda p, ev: _rewrite(p, ev, p.read_text().replace("\n", "\n{oops\n", 1)),
    "array-line": lambda p, ev: _rewrite(p, ev, p.read_text().replace("\n", "\n[1, 2]\n", 1)),
    "model-call-removed": lambda p, ev: _rewrite(p, [e for e in ev if e is not
                                                     _first(ev, "model_call")]),
    "line-duplicated": lambda p, ev: _rewrite(p, ev[:3] + ev[2:]),
    "first-line-removed": lambda p, ev: _rewrite(p, ev[1:]),
    "newer-version": edit("run_start", lambda e: e.update(version=99)),
    "not-a-trace": lambda p, ev: _rewrite(p, ev, '{"event": "hello"}\n'),
}


@pytest.mark.parametrize("damage", list(TRACE_CORPUS))
def test_every_corrupted_trace_is_one_line_and_exit_2_from_trace_show_and_replay(
        recorded_trace, tmp_path, damage):
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(recorded_trace.read_bytes())
    TRACE_CORPUS[damage](path, _events(path))
    for command in (["trace", "show"], ["replay"], ["trace", "export", "--otlp-json"]):
        code, _, err = cli(*command, str(path))
        assert_one_line_refusal(code, err)


def test_the_trace_corpus_covers_the_kinds_of_damage_the_issue_lists():
    assert len(TRACE_CORPUS) + len(SPECIAL) >= 30
    assert len(CHECKPOINT_CORPUS) >= 10


def test_a_trace_whose_stop_line_was_removed_is_shown_but_never_matches_on_replay(
        recorded_trace, tmp_path):
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(line + "\n" for line in recorded_trace.read_text().splitlines()[:-1]))
    code, out, _ = cli("trace", "show", str(path))
    assert code == 0 and "no stop event" in out
    code, out, _ = cli("replay", str(path))
    assert code == 1 and "replay matches" not in out and "no stop line" in out


def test_an_untouched_trace_still_replays_and_matches(recorded_trace):
    code, out, _ = cli("replay", str(recorded_trace))
    assert code == 0 and "replay matches the trace" in out


# ---------------------------------------------------------------- the command line itself


def test_piping_a_command_into_head_ends_quietly_without_a_traceback(tmp_path):
    path = tmp_path / "long.jsonl"
    run_production(ScriptedLLM([tool_reply(("nope", {"k": f"{n} " + "x" * 2000}))
                           for n in range(60)] + [text_reply("done")]), "task", trace=path,
                   config=AgentConfig(max_steps=61, repeat_threshold=None, token_budget=None,
                                 tool_timeout_s=None))
    child = subprocess.Popen([sys.executable, "-m", "primer", "trace", "show", str(path),
                              "--width", "4000"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=ROOT)
    assert child.stdout.read(10)
    child.stdout.close()  # as `head` does once it has its lines
    _, err = child.communicate(timeout=60)
    assert child.returncode == BROKEN_PIPE_EXIT and err == b""
