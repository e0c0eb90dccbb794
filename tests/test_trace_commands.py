"""The trace, replay and eval sub-commands and ``demo --trace``."""

from __future__ import annotations

import json

from primer.__main__ import main


def test_demo_trace_records_a_file_that_trace_show_prints_step_by_step(tmp_path, capsys):
    path = tmp_path / "orders.jsonl"
    assert main(["demo", "orders", "--trace", str(path)]) == 0
    steps = [json.loads(x) for x in path.read_text().splitlines()]
    assert steps[0]["event"] == "run_start" and steps[-1]["event"] == "stop"
    capsys.readouterr()
    assert main(["trace", "show", str(path)]) == 0
    out = capsys.readouterr().out
    n_calls = sum(e["event"] == "model_call" for e in steps)
    assert out.count(" msgs, ~") == n_calls
    assert f"stop cause: {steps[-1]['cause']}" in out


def test_replay_command_matches_an_untouched_trace_and_exits_0(tmp_path, capsys):
    path = tmp_path / "pto.jsonl"
    main(["demo", "pto", "--trace", str(path)])
    capsys.readouterr()
    assert main(["replay", str(path)]) == 0
    assert "replay matches the trace" in capsys.readouterr().out


def test_replay_command_exits_1_when_a_recorded_result_no_longer_matches(tmp_path, capsys):
    path = tmp_path / "orders.jsonl"
    main(["demo", "orders", "--trace", str(path)])
    events = [json.loads(x) for x in path.read_text().splitlines()]
    first = next(e for e in events if e["event"] == "tool_execution")
    first["content"] = "a result the tool no longer gives"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    capsys.readouterr()
    assert main(["replay", str(path), "--demo", "orders"]) == 1
    assert f"diverged at step {first['step']}" in capsys.readouterr().out


def test_trace_show_on_a_missing_file_says_so_and_exits_2(tmp_path, capsys):
    assert main(["trace", "show", str(tmp_path / "none.jsonl")]) == 2
    assert "no such trace file" in capsys.readouterr().err


def test_eval_command_prints_a_row_per_task_and_the_summary(capsys):
    assert main(["eval", "--relay-tasks", "3", "--hops", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "relay-2-2" in out and "success rate:" in out and "latency p50 / p95" in out
