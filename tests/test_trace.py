"""Traces: the JSON Lines format, reading it back, redaction and offline replay."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from primer.harness.production import run_production
from primer.harness.tracing.redaction import REDACTED
from primer.harness.tracing.replay import ReplayLLM, replay
from primer.harness.tracing.trace import (
    FORMAT_VERSION,
    TraceError,
    load_trace,
    redact,
)
from primer.loop.config import AgentConfig
from primer.loop.model import ScriptedLLM, cost_usd, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import ToolError, tool

ROOT = Path(__file__).resolve().parent.parent
PRICES = {"A1": 40, "B2": 7}


@tool
def get_price(item: str) -> dict:
    """Price of one item in rupees.

    Args:
        item: an item id such as "A1".
    """
    if item not in PRICES:
        raise ToolError(f"no item {item!r}; ids look like 'A1'")
    return {"item": item, "price": PRICES[item]}


@tool
def get_price_changed(item: str) -> dict:
    """Price of one item in rupees (a later version whose prices changed)."""
    return {"item": item, "price": PRICES.get(item, 0) + 1}


def script():
    return ScriptedLLM([tool_reply(("get_price", {"item": "Z9"})),
                        tool_reply(("get_price", {"item": "A1"}), ("get_price", {"item": "B2"})),
                        "A1 and B2 cost 47 rupees together."])


def record(tmp_path, **kwargs):
    path = tmp_path / "run.jsonl"
    result = run_production(script(), "What do A1 and B2 cost?", [get_price], trace=path, **kwargs)
    return path, result


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_a_trace_has_run_start_each_model_call_each_tool_execution_and_the_stop(tmp_path):
    path, result = record(tmp_path)
    kinds = [e["event"] for e in lines(path)]
    assert kinds == ["run_start", "model_call", "tool_execution", "model_call",
                     "tool_execution", "tool_execution", "model_call", "stop"]
    assert [e["seq"] for e in lines(path)] == list(range(len(kinds)))
    assert lines(path)[-1]["cause"] == result.stop_cause.value == "end_turn"


def test_run_start_names_the_format_version_config_and_tools_offered(tmp_path):
    path, _ = record(tmp_path, config=AgentConfig(max_steps=5))
    start = lines(path)[0]
    assert (start["format"], start["version"]) == ("primer-trace", FORMAT_VERSION)
    assert start["config"]["max_steps"] == 5
    assert [t["name"] for t in start["tools"]] == ["get_price", "handoff_to_human"]
    assert start["task"] == "What do A1 and B2 cost?"


def test_model_call_and_tool_execution_lines_hold_reply_usage_latency_and_result(tmp_path):
    path, result = record(tmp_path)
    call = next(e for e in lines(path) if e["event"] == "model_call")
    assert call["reply"]["stop_reason"] == "tool_use"
    assert call["reply"]["usage"] == result.steps[0].usage.to_dict()
    assert call["prompt_estimate"] == result.steps[0].prompt_estimate
    assert call["latency_s"] >= 0
    execution = next(e for e in lines(path) if e["event"] == "tool_execution")
    assert execution["tool_use_id"] == result.steps[0].executions[0].tool_use_id
    assert execution["input"] == {"item": "Z9"}
    assert execution["is_error"] is True and "ids look like" in execution["content"]
    assert execution["attempts"] == 1


def test_the_trace_also_forwards_every_event_to_on_event(tmp_path):
    seen = []
    record(tmp_path, on_event=lambda kind, data: seen.append(kind))
    assert seen == [e["event"] for e in lines(tmp_path / "run.jsonl")]


def test_redact_replaces_values_under_secret_keys_and_strings_shaped_like_keys():
    event = {"headers": {"x-api-key": "abc"}, "API_KEY": 123, "Authorization": "Bearer x",
             "note": "key sk-ant-api03-ABCDEFGHIJKLMNOPQRSTUVWX here",
             "list": ["sk-proj-ABCDEFGHIJKLMNOPQRSTUV", "input_tokens"], "input_tokens": 5}
    clean = redact(event)
    assert clean["headers"] == clean["API_KEY"] == clean["Authorization"] == REDACTED
    assert clean["note"] == f"key {REDACTED} here"
    assert clean["list"] == [REDACTED, "input_tokens"]
    assert clean["input_tokens"] == 5


def test_a_planted_api_key_never_reaches_the_trace_file(tmp_path):
    key = "sk-ant-api03-PLANTEDplantedPLANTED0123456789"

    @tool
    def leaky(q: str) -> dict:
        """A tool that echoes its configuration, secrets included."""
        return {"answer": q, "api_key": key, "headers": {"authorization": f"Bearer {key}"}}

    llm = ScriptedLLM([tool_reply(("leaky", {"q": key})), f"done, the key was {key}"])
    path = tmp_path / "leak.jsonl"
    result = run_production(llm, f"use {key}", [leaky], trace=path)
    text = path.read_text()
    assert result.stop_cause is StopCause.END_TURN
    assert key not in text and "PLANTED" not in text
    assert REDACTED in text


def test_a_run_killed_mid_way_keeps_every_event_before_the_kill(tmp_path):
    path = tmp_path / "killed.jsonl"
    code = textwrap.dedent(f"""
        import os, signal
        from primer import ScriptedLLM, run_production, tool, tool_reply

        calls = []

        @tool
        def step(n: int) -> str:
            '''Do step n.'''
            calls.append(n)
            if n == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            return f"step {{n}} done"

        llm = ScriptedLLM([tool_reply(("step", {{"n": k}})) for k in (1, 2, 3, 4)] + ["done"])
        run_production(llm, "do four steps", [step], trace={str(path)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          timeout=60)
    assert proc.returncode != 0  # killed, not finished
    trace = load_trace(path)
    assert not trace.complete and trace.stop is None
    assert [s.index for s in trace.steps()] == [1, 2, 3]
    assert [len(s.executions) for s in trace.steps()] == [1, 1, 0]
    assert any("did not finish" in n for n in trace.notes)
    assert "no stop event" in trace.table()


def test_a_torn_last_line_is_dropped_with_a_note_and_the_events_before_it_kept(tmp_path):
    path, _ = record(tmp_path)
    text = path.read_text()
    path.write_text(text[: len(text) - 25])  # cut the stop line mid-write
    trace = load_trace(path)
    assert len(trace.events) == len(text.splitlines()) - 1
    assert any("line 8 is torn" in n and "kept the 7 events" in n for n in trace.notes)
    assert trace.stop is None


def test_a_broken_line_before_the_last_is_an_error_naming_the_line(tmp_path):
    path, _ = record(tmp_path)
    rows = path.read_text().splitlines()
    rows[2] = "{not json"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(TraceError, match=r"line 3: not valid JSON"):
        load_trace(path)


@pytest.mark.parametrize("content, message", [
    ("", "is empty"),
    ('{"event": "model_call"}\n', "expected a run_start event"),
    ('{"event": "run_start", "format": "primer-trace", "version": 99}\n', "version 99"),
])
def test_an_empty_foreign_or_newer_file_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(TraceError, match=message):
        load_trace(path)


def test_a_missing_file_is_an_error_saying_how_to_record_one(tmp_path):
    with pytest.raises(TraceError, match="no such trace file.*trace="):
        load_trace(tmp_path / "nope.jsonl")


def test_trace_rows_give_tokens_and_cost_so_far_equal_to_the_run_totals(tmp_path):
    path, result = record(tmp_path)
    rows = load_trace(path).rows()
    assert len(rows) == len(result.steps)
    assert rows[-1]["tokens so far"] == result.usage.total_tokens
    assert rows[-1]["cost so far USD"] == f"{result.cost_usd:.4f}"
    first = result.steps[0].usage
    assert rows[0]["cost so far USD"] == f"{cost_usd(first):.4f}"
    assert [r["request"].split()[0] for r in rows] == ["1", "3", "5"]
    assert rows[1]["tool calls"] == 'get_price({"item": "A1"}); get_price({"item": "B2"})'


def test_messages_rebuilt_from_the_trace_equal_the_runs_message_list(tmp_path):
    path, result = record(tmp_path)
    assert load_trace(path).messages() == result.messages


def test_replay_with_the_same_tools_reproduces_stop_cause_steps_and_final_text(tmp_path):
    path, result = record(tmp_path)
    again = replay(path, [get_price])
    assert again.matches, again.report()
    assert again.result.stop_cause is result.stop_cause
    assert again.result.final_text == result.final_text
    assert [s.usage for s in again.result.steps] == [s.usage for s in result.steps]
    assert again.result.messages == result.messages


def test_a_changed_tool_makes_replay_report_the_first_step_where_results_differ(tmp_path):
    path, _ = record(tmp_path)
    changed = get_price_changed
    changed.name = "get_price"
    again = replay(path, [changed])
    d = again.divergence
    assert d is not None and d.kind == "tool_result"
    # step 1 asked for Z9: the old tool failed, the new one answers, so step 1 diverges
    assert (d.step, d.tool_use_id, d.name) == (1, "toolu_01_1", "get_price")
    assert d.recorded.startswith("error: ") and '"price": 1' in d.now
    assert "diverged at step 1" in again.report()


def test_replay_reports_a_divergence_when_it_needs_more_replies_than_recorded(tmp_path):
    path, _ = record(tmp_path)
    rows = path.read_text().splitlines()
    path.write_text("\n".join(rows[:-2]) + "\n")  # drop the final answer and the stop
    again = replay(path, [get_price])
    assert again.result.stop_cause is StopCause.MODEL_ERROR
    assert again.divergence.kind == "extra_model_call" and again.divergence.step == 3


def test_replay_reproduces_a_budget_stop_from_the_recorded_usage(tmp_path):
    path, result = record(tmp_path, config=AgentConfig(token_budget=400))
    assert result.stop_cause is StopCause.TOKEN_BUDGET
    again = replay(path, [get_price])
    assert again.matches and again.result.stop_cause is StopCause.TOKEN_BUDGET


def test_replay_llm_returns_recorded_replies_in_order_then_refuses(tmp_path):
    path, result = record(tmp_path)
    llm = ReplayLLM(load_trace(path).sent_replies())
    got = [llm(system="", messages=[], tools=[], max_tokens=10) for _ in result.steps]
    assert [r.to_dict() for r in got] == [s.reply.to_dict() for s in result.steps]
    with pytest.raises(RuntimeError, match="recorded 3 model replies"):
        llm(system="", messages=[], tools=[], max_tokens=10)


def test_trace_totals_include_failed_model_attempts_that_were_retried(tmp_path):
    from primer.loop.model import TransientModelError, Usage

    inner = script()
    failures = iter([TransientModelError("overloaded", usage=Usage(50, 5))])

    def flaky(**kwargs):
        for e in failures:
            raise e
        return inner(**kwargs)

    path = tmp_path / "retry.jsonl"
    result = run_production(flaky, "What do A1 and B2 cost?", [get_price], trace=path,
                            config=AgentConfig(sleep=lambda s: None))
    assert any(e["event"] == "model_retry" for e in lines(path))
    rows = load_trace(path).rows()
    assert rows[-1]["tokens so far"] == result.usage.total_tokens
    assert rows[-1]["cost so far USD"] == f"{result.cost_usd:.4f}"


def test_a_run_paused_with_a_checkpoint_traces_what_ran_and_replays_without_divergence(
        tmp_path, monkeypatch):
    from primer.scenarios import get_demo
    from primer.scenarios.refunds import LEDGER_ENV

    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "ledger.sqlite"))
    demo = get_demo("refund")
    path = tmp_path / "refund.jsonl"
    paused = demo.run(checkpoint_dir=str(tmp_path / "ck"), trace=path)
    ran = [e["name"] for e in lines(path) if e["event"] == "tool_execution"]
    assert ran == [e.name for e in paused.executions] == ["get_order", "lookup_customer"]
    trace = load_trace(path)
    last = trace.rows()[-1]
    assert last["tool calls"].startswith("[awaiting approval] issue_refund(")
    assert "not run" not in last["tool calls"] and "lookup_customer(" in last["tool calls"]
    assert trace.messages() == paused.messages  # a pause ends on the model's reply
    result = replay(trace, demo.make_tools())
    assert result.matches, result.report()
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == [
        ".run-001.jsonl.lock", "run-001.jsonl"]  # the replay wrote no checkpoint of its own
