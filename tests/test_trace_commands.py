"""The trace, replay and eval sub-commands and ``demo --trace``."""

from __future__ import annotations

import json

import pytest

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
    assert out.count(" msg, ~") + out.count(" msgs, ~") == n_calls and "1 msg, ~" in out
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


def test_replay_takes_the_tools_from_the_scenario_named_like_resume_does(tmp_path, capsys):
    path = tmp_path / "pto.jsonl"
    main(["demo", "pto", "--trace", str(path)])
    capsys.readouterr()
    assert main(["replay", str(path), "--scenario", "pto"]) == 0
    assert capsys.readouterr().out.startswith("tools from demo: pto\n")
    assert main(["replay", str(path), "--scenario", "nope"]) == 2
    assert "no demo named 'nope'" in capsys.readouterr().err


def test_replay_help_shows_scenario_and_hides_the_old_demo_alias(capsys):
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    out = capsys.readouterr().out
    assert "--scenario NAME" in out and "--demo" not in out


def test_trace_show_on_a_missing_file_says_so_and_exits_2(tmp_path, capsys):
    assert main(["trace", "show", str(tmp_path / "none.jsonl")]) == 2
    assert "no such trace file" in capsys.readouterr().err


def test_eval_command_prints_a_row_per_task_and_the_summary(capsys):
    assert main(["eval", "--relay-tasks", "3", "--hops", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "relay-2-2" in out and "success rate:" in out and "latency p50 / p95" in out


def test_eval_help_explains_each_column_of_the_table(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    out = capsys.readouterr().out
    for column in ("success", "path ok", "steps", "in, out", "cost USD", "stop cause",
                   "latency ms"):
        assert f"\n  {column} " in out


def test_eval_trace_dir_inside_a_missing_directory_exits_2_before_running(tmp_path, capsys):
    assert main(["eval", "--trace-dir", str(tmp_path / "a" / "b")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"the directory {tmp_path / 'a'} does not exist" in captured.err
    assert list(tmp_path.iterdir()) == []


def test_eval_creates_a_new_trace_dir_and_writes_a_trace_per_task(tmp_path, capsys):
    out = tmp_path / "traces"
    assert main(["eval", "--relay-tasks", "1", "--hops", "2", "--no-progress",
                 "--trace-dir", str(out)]) == 0
    assert (out / "relay-2-0.jsonl").is_file()
