"""A trace with a forged field: one TraceError naming the line from load_trace, so every
reader (trace show, replay, diagnose, trace export) answers with one line and exit code 2."""

from __future__ import annotations

import json
import logging

import pytest

from primer.__main__ import main
from primer.harness.tracing.trace import TraceError, load_trace


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    path = tmp_path_factory.mktemp("forged") / "run.jsonl"
    assert main(["demo", "pto", "--trace", str(path)]) == 0
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["event"] for e in lines][:3] == ["run_start", "model_call", "tool_execution"]
    assert lines[-1]["event"] == "stop"
    return lines


def _config(key, value):
    return lambda L: L[0]["config"].__setitem__(key, value)


FORGED = {
    "config null": (lambda L: L[0].__setitem__("config", None), 1, "config"),
    "config 0": (lambda L: L[0].__setitem__("config", 0), 1, "config"),
    "config empty string": (lambda L: L[0].__setitem__("config", ""), 1, "config"),
    "prices null": (_config("prices", None), 1, "config.prices"),
    "prices a list": (_config("prices", []), 1, "config.prices"),
    "retry null": (_config("retry", None), 1, "config.retry"),
    "no_progress_window 10**19": (_config("no_progress_window", 10**19), 1,
                                  "no_progress_window"),
    "task with a lone surrogate": (lambda L: L[0].__setitem__("task", "bad \ud800"), 1,
                                   "surrogate"),
    "run_start t null": (lambda L: L[0].__setitem__("t", None), 1, "t must be"),
    "run_start t a string": (lambda L: L[0].__setitem__("t", "x"), 1, "t must be"),
    "run_start t 1e308": (lambda L: L[0].__setitem__("t", 1e308), 1, "t must be"),
    "latency_s null": (lambda L: L[1].__setitem__("latency_s", None), 2, "latency_s"),
    "tool_execution without input": (lambda L: L[2].pop("input"), 3, "input"),
    "stop cause a list": (lambda L: L[-1].__setitem__("cause", []), -1, "cause"),
    "stop cause a number": (lambda L: L[-1].__setitem__("cause", 5), -1, "cause"),
}


def _write(events, tmp_path, forge):
    forged = json.loads(json.dumps(events))
    forge(forged)
    path = tmp_path / "forged.jsonl"
    with path.open("w", encoding="utf-8", errors="surrogatepass") as f:
        f.writelines(json.dumps(e) + "\n" for e in forged)
    return path


@pytest.mark.parametrize("case", sorted(FORGED))
def test_load_trace_refuses_a_forged_field_naming_its_line(events, tmp_path, case):
    forge, line, field = FORGED[case]
    path = _write(events, tmp_path, forge)
    with pytest.raises(TraceError) as e:
        load_trace(path)
    number = len(events) if line == -1 else line
    assert f"line {number}:" in str(e.value) and field in str(e.value)


@pytest.mark.parametrize("command", ["trace show", "replay", "diagnose",
                                     "trace export --otlp-json"])
@pytest.mark.parametrize("case", sorted(FORGED))
def test_every_reader_gives_one_line_and_exit_2(events, tmp_path, capsys, case, command):
    path = _write(events, tmp_path, FORGED[case][0])
    capsys.readouterr()
    assert main([*command.split()[:2], str(path), *command.split()[2:]]) == 2
    captured = capsys.readouterr()
    assert len(captured.err.strip().splitlines()) == 1, captured.err


@pytest.mark.parametrize("field", ["input_tokens", "output_tokens",
                                   "cache_read_input_tokens", "cache_creation_input_tokens"])
def test_export_reads_a_null_usage_count_as_0_without_a_traceback(events, tmp_path, capsys,
                                                                  caplog, field):
    path = _write(events, tmp_path, lambda L: L[1]["reply"]["usage"].__setitem__(field, None))
    capsys.readouterr()
    with caplog.at_level(logging.WARNING):
        assert main(["trace", "export", str(path), "--otlp-json"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and not caplog.records
    assert json.loads(captured.out)["resourceSpans"]


def test_replay_refuses_a_trace_whose_task_is_empty_in_one_line(events, tmp_path, capsys):
    path = _write(events, tmp_path, lambda L: L[0].__setitem__("task", ""))
    capsys.readouterr()
    assert main(["trace", "show", str(path)]) == 0  # still readable
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no task text" in err
