"""diagnose(): each failure mode is found on its exercise trace and on no healthy one, the
guard's saving is the record's own arithmetic, and every demo gets the verdict its stop
cause implies."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from primer.__main__ import main
from primer.harness.tracing.conversation import read_conversation, to_conversation
from primer.harness.tracing.diagnosis import FailureMode, _number_spans, diagnose
from primer.harness.tracing.trace import load_trace
from primer.loop.model import text_reply, tool_reply
from primer.loop.state import StopCause
from primer.scenarios import all_demos
from primer.scenarios.gallery import GALLERY, gallery_path

FAILING = [e for e in GALLERY.values() if e.mode is not None]
HEALTHY = [e for e in GALLERY.values() if e.mode is None]


def test_the_gallery_has_two_healthy_runs_and_one_run_per_failure_mode():
    assert len(HEALTHY) == 2
    # alternation, rate limits, errors as text and empty results have their cases in the
    # gallery of outside conversations (tests/test_diagnose_gallery.py)
    looked_for = {m.value for m in FailureMode} - {"stopped", "unfinished", "alternation",
                                                   "rate_limited", "errors_as_text",
                                                   "empty_results"}
    assert sorted(e.mode for e in FAILING) == sorted(looked_for)


@pytest.mark.parametrize("entry", FAILING, ids=lambda e: e.name)
def test_each_failure_mode_is_found_on_its_gallery_trace_and_nothing_else_is(entry):
    found = diagnose(gallery_path(entry.name))
    assert [m.value for m in found.modes] == [entry.mode]
    assert found.exit_code == 1


@pytest.mark.parametrize("entry", HEALTHY, ids=lambda e: e.name)
def test_no_failure_mode_is_found_on_a_healthy_gallery_trace(entry):
    found = diagnose(gallery_path(entry.name))
    assert found.findings == []
    assert found.exit_code == 0
    assert found.verdict.startswith("no known failure mode found")


def _raw_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_no_progress_saving_is_the_input_tokens_of_the_calls_after_the_third_error():
    """By hand, from the file's JSON alone: the first three results are errors, so a window of
    3 stops the run after call 3; every later call's prompt tokens are what it saves."""
    path = gallery_path("no-progress")
    events = _raw_events(path)
    calls = {e["step"]: e["reply"]["usage"] for e in events if e["event"] == "model_call"}
    errors = [e["step"] for e in events if e["event"] == "tool_execution" and e["is_error"]]
    assert errors[:3] == [1, 2, 3]
    prompt = {k: u["input_tokens"] + u["cache_creation_input_tokens"]
              + u["cache_read_input_tokens"] for k, u in calls.items()}
    saved = sum(v for k, v in prompt.items() if k > 3)
    dollars = sum((u["input_tokens"] * 5 + u["output_tokens"] * 25) / 1e6
                  for k, u in calls.items() if k > 3)  # the run's prices: 5 / 25 USD per MTok

    effect = diagnose(path).findings[0].effect
    assert effect.setting == "no_progress_window=3"
    assert (effect.stops_at, effect.before_call, effect.in_run) == (3, False, False)
    assert effect.calls_saved == len(calls) - 3
    assert effect.input_tokens_saved == saved
    assert effect.input_tokens_total == sum(prompt.values())
    assert effect.cost_usd_saved == pytest.approx(dollars)
    assert f"{saved:,} of {sum(prompt.values()):,} input tokens" in diagnose(path).report()


def test_a_guard_that_already_fired_in_the_run_is_reported_as_the_runs_own():
    found = diagnose(_record_demo("orders-repeat"))
    (finding,) = found.findings
    assert finding.mode is FailureMode.REPEATS
    assert finding.effect.in_run and finding.effect.stops_at == 3
    assert 'get_order:{"id":"A123"} requested 3 times' in finding.evidence


def test_the_context_guard_stops_before_the_call_whose_prompt_is_past_its_share():
    effect = diagnose(gallery_path("context-rot")).findings[0].effect
    trace = load_trace(gallery_path("context-rot"))
    limit = trace.config.context_window * 0.8
    first_over = next(s.index for s in trace.steps() if s.call["prompt_estimate"] > limit)
    assert effect.setting == "context_stop_share=0.8"
    assert effect.before_call and effect.stops_at == first_over


def test_the_runaway_guard_is_the_default_token_budget_when_the_run_had_none():
    effect = diagnose(gallery_path("runaway-cost")).findings[0].effect
    trace = load_trace(gallery_path("runaway-cost"))
    running = 0
    for s in trace.steps():
        running += s.reply.usage.total_tokens
        if running > 50_000:
            break
    assert effect.setting == "token_budget=50_000" and effect.stops_at == s.index


# ---------------------------------------------------------------- every demo's trace

EXPLAINED_BY = {StopCause.LOOP_DETECTED: FailureMode.REPEATS,
                StopCause.NO_PROGRESS: FailureMode.NO_PROGRESS,
                StopCause.CONTEXT_WINDOW: FailureMode.CONTEXT_ROT,
                StopCause.MAX_TOKENS: FailureMode.CUT_OFF}
NOT_A_FAILURE = {StopCause.END_TURN, StopCause.HANDOFF, StopCause.AWAITING_APPROVAL}


def _record_demo(name: str, tmp: Path | None = None) -> Path:
    import tempfile

    folder = Path(tmp or tempfile.mkdtemp(prefix="primer-diagnose-test-"))
    path = folder / f"{name}.jsonl"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["demo", name, "--trace", str(path)]) == 0
    return path


@pytest.mark.parametrize("name", sorted(all_demos()))
def test_diagnose_gives_each_demo_trace_the_verdict_its_stop_cause_implies(name, tmp_path):
    path = _record_demo(name, tmp_path)
    cause = load_trace(path).stop_cause
    found = diagnose(path)
    assert found.stop_cause is cause
    if cause in NOT_A_FAILURE:
        assert found.findings == [] and found.exit_code == 0
        assert found.verdict.startswith("no known failure mode found"
                                        if cause is StopCause.END_TURN
                                        else "handed to a person")
    else:
        assert found.exit_code == 1
        expected = EXPLAINED_BY.get(cause)
        if expected is not None:
            assert expected in found.modes
        if cause is StopCause.MAX_STEPS:  # something made it use every step
            assert {FailureMode.REPEATS, FailureMode.NO_PROGRESS,
                    FailureMode.RUNAWAY_COST} & set(found.modes)


# ---------------------------------------------------------------- conversations

def test_a_trace_saved_as_a_conversation_gets_the_same_findings_and_savings(tmp_path):
    trace = load_trace(gallery_path("repeats"))
    path = tmp_path / "repeats.json"
    path.write_text(json.dumps(to_conversation(trace)))
    as_trace, as_conversation = diagnose(trace), diagnose(path)
    assert as_conversation.kind == "conversation"
    assert as_conversation.modes == as_trace.modes == [FailureMode.REPEATS]
    a, b = as_trace.findings[0].effect, as_conversation.findings[0].effect
    assert (a.stops_at, a.calls_saved, a.input_tokens_saved) == (
        b.stops_at, b.calls_saved, b.input_tokens_saved)


def test_a_bare_messages_list_without_usage_is_read_with_estimated_tokens():
    messages = [{"role": "user", "content": "What is 2 + 2?"},
                {"role": "assistant", "content": [{"type": "text", "text": "4"}]}]
    trace = read_conversation(messages)
    assert trace.steps()[0].reply.usage.input_tokens > 0
    found = diagnose(trace)
    assert "estimated (characters / 4)" in " ".join(found.notes)
    assert found.ended == "the conversation ends with an answer (call 1)"


def _conversation(*replies, results=(), tools=None) -> dict:
    """A conversation: the task, then each reply followed by its results (if any)."""
    messages = [{"role": "user", "content": "What does order A123 cost in total?"}]
    for k, reply in enumerate(replies):
        messages.append({"role": "assistant", "content": reply.content,
                         "stop_reason": reply.stop_reason})
        if k < len(results) and results[k]:
            messages.append({"role": "user", "content": results[k]})
    return {"messages": messages, "tools": tools if tools is not None else [ORDER_TOOL]}


ORDER_TOOL = {"name": "get_order", "description": "Look up an order.",
              "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}},
                               "required": ["order_id"], "additionalProperties": False}}


def _result(tool_use_id: str, content: str, is_error: bool = False) -> list[dict]:
    return [{"type": "tool_result", "tool_use_id": tool_use_id, "content": content,
             "is_error": is_error}]


def test_input_that_fails_its_schema_and_ran_anyway_is_tool_hallucination():
    call = tool_reply(("get_order", {"id": "A123"}))
    ran = _conversation(call, text_reply("It costs 5000."),
                        results=[_result(call.tool_uses[0]["id"], '{"total": 5000}')])
    refused = _conversation(call, text_reply("It costs 5000."),
                            results=[_result(call.tool_uses[0]["id"], "invalid input", True)])
    assert FailureMode.TOOL_HALLUCINATION in diagnose(read_conversation(ran)).modes
    assert FailureMode.TOOL_HALLUCINATION not in diagnose(read_conversation(refused)).modes


def test_a_conversation_ending_on_tool_results_is_unfinished():
    call = tool_reply(("get_order", {"order_id": "A123"}))
    convo = _conversation(call, results=[_result(call.tool_uses[0]["id"], "{}")])
    found = diagnose(read_conversation(convo))
    assert found.modes == [FailureMode.UNFINISHED]


def test_a_tool_use_answered_nowhere_in_the_middle_is_unanswered():
    first = tool_reply(("get_order", {"order_id": "A123"}))
    convo = _conversation(first, text_reply("Done."))
    assert diagnose(read_conversation(convo)).modes == [FailureMode.UNANSWERED_TOOL_USE]


def test_a_trace_killed_during_a_tool_call_has_its_tool_use_unanswered(tmp_path):
    lines = gallery_path("healthy-orders").read_text().splitlines()
    first_call = next(k for k, line in enumerate(lines) if '"tool_execution"' in line)
    path = tmp_path / "killed.jsonl"
    path.write_text("\n".join(lines[:first_call]) + "\n")  # killed before the result arrived
    found = diagnose(path)
    assert found.modes == [FailureMode.UNANSWERED_TOOL_USE]
    assert found.ended == "the trace has no stop line after 1 model call"


# ---------------------------------------------------------------- numbers in answers

@pytest.mark.parametrize("text, numbers", [
    ("Order A123 costs 5,900.0 rupees with 18% GST.", ["5,900.0", "18"]),
    ("12 days left as of 2026-09-25 [hr-001].", ["12"]),
    ("Total: 5900. Done.", ["5900"]),
    ("item_7 and v2 and 3/4", []),
])
def test_numbers_standing_alone_are_read_and_names_and_dates_are_not(text, numbers):
    assert [t for t, _ in _number_spans(text)] == numbers


def test_an_answer_number_matches_a_tool_result_by_value():
    call = tool_reply(("get_order", {"order_id": "A123"}))
    result = [_result(call.tool_uses[0]["id"], "5900.0")]
    same = _conversation(call, text_reply("It costs 5,900 rupees."), results=result)
    other = _conversation(call, text_reply("It costs 5,950 rupees."), results=result)
    assert diagnose(read_conversation(same)).findings == []
    (finding,) = diagnose(read_conversation(other)).findings
    assert finding.mode is FailureMode.SILENT_WRONG_ANSWER and "5,950" in finding.evidence


def test_to_dict_is_json_with_one_entry_per_finding():
    found = diagnose(gallery_path("runaway-cost"))
    data = json.loads(json.dumps(found.to_dict()))
    assert data["found"] is True and data["stop_cause"] == "max_steps"
    assert [f["mode"] for f in data["findings"]] == ["runaway_cost"]
    assert data["findings"][0]["effect"]["setting"] == "token_budget=50_000"


def test_a_budget_checked_before_each_call_stops_before_the_call_that_could_cross_it(tmp_path):
    """budget_check="before": the first call whose worst case (total so far + its prompt
    estimate + max_tokens of output) passes the budget is never made."""
    from primer.harness.production import run_production
    from primer.loop.config import AgentConfig
    from primer.scenarios import burner

    path = tmp_path / "before.jsonl"
    run_production(burner.make_llm(), burner.TASK, burner.make_tools(), system=burner.SYSTEM,
                   config=AgentConfig(max_steps=30, token_budget=None, budget_check="before"),
                   trace=path)
    trace = load_trace(path)
    spent, first_refused = 0, None
    for s in trace.steps():
        if spent + s.call["prompt_estimate"] + trace.config.max_tokens > 50_000:
            first_refused = s.index
            break
        spent += s.reply.usage.total_tokens
    effect = diagnose(path).findings[0].effect
    assert effect.before_call and effect.stops_at == first_refused
    assert effect.calls_saved == len(trace.steps()) - first_refused + 1


def test_a_run_its_caller_cancelled_is_not_a_failure(tmp_path):
    import threading

    from primer.harness.production import run_production
    from primer.scenarios import get_demo

    demo, cancel = get_demo("orders"), threading.Event()
    inner, calls = demo.make_llm(), []

    def llm(**kw):  # the caller cancels while the second call is under way
        calls.append(1)
        if len(calls) == 2:
            cancel.set()
        return inner(**kw)

    path = tmp_path / "cancelled.jsonl"
    result = run_production(llm, demo.task, demo.make_tools(), system=demo.system,
                            config=demo.config, trace=path, cancel=cancel)
    assert result.stop_cause is StopCause.CANCELLED
    d = diagnose(path)
    assert d.findings == [] and d.verdict.startswith("cancelled by its caller")


@pytest.mark.parametrize("block, field", [
    ({"type": "tool_use", "id": [], "name": "g", "input": {}}, "tool_use"),
    ({"type": "tool_use", "id": "t1", "name": {}, "input": {}}, "tool_use"),
    ({"type": "tool_use", "id": "t1", "name": "g", "input": "x"}, "tool_use"),
])
def test_a_conversation_with_a_forged_tool_use_is_one_line_and_exit_2(tmp_path, capsys, block,
                                                                      field):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": [block]}]}))
    assert main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"messages[1].content[0] is a {field}" in err


def test_a_tool_result_whose_id_is_not_a_string_is_refused(tmp_path):
    from primer.harness.tracing.trace import TraceError

    with pytest.raises(TraceError, match=r"messages\[2\].content\[0\] is a tool_result"):
        read_conversation([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "g",
                                               "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": 5}]}])


def test_the_report_names_the_file_not_its_whole_path():
    path = gallery_path(next(iter(GALLERY)))
    first = diagnose(path).report().splitlines()[0]
    assert first.startswith(f"{path.name}: ") and str(path.parent) not in first


def test_tool_inputs_are_checked_with_one_checker_per_tool_not_one_per_call(monkeypatch):
    import primer.harness.tracing.diagnosis as diagnosis

    built = []
    real = diagnosis.Tool

    def counting(*args, **kwargs):
        built.append(args[0])
        return real(*args, **kwargs)

    trace = load_trace(gallery_path("repeats"))
    calls = sum(len(s.reply.tool_uses) for s in trace.steps())
    monkeypatch.setattr(diagnosis, "Tool", counting)
    diagnose(trace)
    assert calls > len(trace.tools) and len(built) == len(trace.tools)


def test_a_schema_with_a_dangling_ref_is_a_note_not_a_traceback(tmp_path):
    path = tmp_path / "badref.json"
    path.write_text(json.dumps({
        "tools": [{"name": "t", "input_schema": {"$ref": "#/definitions/nope"}}],
        "messages": [{"role": "user", "content": "hi"},
                     {"role": "assistant", "content": [
                         {"type": "tool_use", "id": "a", "name": "t", "input": {"x": 1}}]},
                     {"role": "user", "content": [
                         {"type": "tool_result", "tool_use_id": "a", "content": "r"}]},
                     {"role": "assistant", "content": "done"}]}))
    found = diagnose(path)
    assert found.findings == []
    assert any("input_schema of t cannot be checked" in n for n in found.notes)


def test_many_numbers_in_an_answer_are_checked_quickly(tmp_path):
    import time

    numbers = " , ".join(str(i) for i in range(3000))
    path = tmp_path / "many.json"
    path.write_text(json.dumps({"messages": [
        {"role": "user", "content": "sum"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": numbers}]},
        {"role": "assistant", "content": "sum " + " ".join(
            str(i * 13.7) for i in range(3000))}]}))
    start = time.monotonic()
    diagnose(path)
    assert time.monotonic() - start < 10
