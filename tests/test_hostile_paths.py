"""Every path a command opens or writes: a FIFO or a dangling symbolic link gets one line and
exit code 2 at once, never a hang and never a file written somewhere else."""

from __future__ import annotations

import os
import threading

import pytest

from primer.__main__ import main


def _run(argv: list[str], capsys, fifo) -> tuple[int, str]:
    """``main(argv)`` in a thread; a FIFO left blocking after 20 s fails the test (and is
    then opened from this side, so the thread can finish)."""
    outcome: list[int] = []
    worker = threading.Thread(target=lambda: outcome.append(main(argv)), daemon=True)
    worker.start()
    worker.join(20)
    if not outcome:
        os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
        pytest.fail(f"{' '.join(argv)} blocked on the FIFO")
    return outcome[0], capsys.readouterr().err


def _trace(tmp_path) -> str:
    path = tmp_path / "run.jsonl"
    assert main(["demo", "pto", "--trace", str(path)]) == 0
    return str(path)


@pytest.mark.parametrize("case", [
    "sessions list FIFO", "sessions show FIFO x", "sessions list DIR", "sessions show DIR x",
    "eval --relay-tasks 1 --summary-only --no-progress --results FIFO",
    "demo pto --trace FIFO", "trace export TRACE --otlp-json -o FIFO"])
def test_a_fifo_gets_one_line_and_exit_2_at_once(tmp_path, capsys, case):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    store = tmp_path / "store"
    store.mkdir()
    os.mkfifo(store / "sessions.sqlite3")
    trace = _trace(tmp_path) if "TRACE" in case else ""
    capsys.readouterr()
    argv = [{"FIFO": str(fifo), "DIR": str(store), "TRACE": trace}.get(a, a)
            for a in case.split()]
    code, err = _run(argv, capsys, fifo if "FIFO" in case else store / "sessions.sqlite3")
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert "FIFO" in err


@pytest.mark.parametrize("case", [
    "eval --relay-tasks 1 --summary-only --no-progress --results LINK",
    "demo pto --trace LINK", "trace export TRACE --otlp-json -o LINK"])
def test_a_dangling_symlink_is_refused_rather_than_writing_its_target(tmp_path, capsys, case):
    link = tmp_path / "link"
    os.symlink(tmp_path / "target", link)
    trace = _trace(tmp_path) if "TRACE" in case else ""
    capsys.readouterr()
    argv = [{"LINK": str(link), "TRACE": trace}.get(a, a) for a in case.split()]
    code, err = _run(argv, capsys, link)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert "symbolic link" in err
    assert not (tmp_path / "target").exists()


def test_run_agent_refuses_a_fifo_as_its_trace_before_any_call(tmp_path):
    from primer.harness.files import UnreadableFile
    from primer.harness.production import run_production
    from primer.loop.model import ScriptedLLM

    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    calls: list[int] = []
    outcome: list[BaseException] = []

    def attempt() -> None:
        llm = ScriptedLLM(["never"])
        try:
            run_production(lambda **kw: calls.append(1) or llm(**kw), "hi", trace=fifo)
        except UnreadableFile as e:
            outcome.append(e)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
        pytest.fail("run_agent blocked on a FIFO given as its trace")
    assert outcome and "FIFO" in str(outcome[0]).upper() and calls == []
