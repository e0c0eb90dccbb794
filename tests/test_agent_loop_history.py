"""``run_production(..., messages=earlier.messages)``: a conversation that goes on for another
turn."""

from __future__ import annotations

import copy
import json

import pytest

from primer.harness.durable.checkpoint import approve
from primer.harness.durable.resume import resume
from primer.harness.production import run_production
from primer.harness.request_check import messages_problems
from primer.harness.tracing.replay import replay
from primer.harness.tracing.trace import load_trace
from primer.loop.config import AgentConfig
from primer.loop.loop import start_run
from primer.loop.messages import UNANSWERED_RESULT, text_block, unanswered_tool_uses, user_message
from primer.loop.model import ScriptedLLM, estimate_tokens, text_reply, tool_reply
from primer.loop.state import RunState, StopCause
from primer.loop.tools import tool
from primer.scenarios.orders import SYSTEM, make_llm, make_tools


@pytest.fixture(scope="module")
def first():
    """The order task, answered: 5900.0 rupees after four model calls."""
    result = run_production(make_llm(), "What does order A123 cost in total with 18% GST?",
                            make_tools(), system=SYSTEM)
    assert result.stop_cause is StopCause.END_TURN
    return result


def test_the_second_turn_is_appended_after_the_whole_first_conversation(first):
    seen = []

    def model(messages):
        seen.append(copy.deepcopy(messages))
        return text_reply("Two keyboards, 5900.0 rupees in all.")

    second = run_production(ScriptedLLM(model), "How many keyboards was that?", make_tools(),
                            system=SYSTEM, messages=first.messages)
    assert seen[0] == [*first.messages, user_message("How many keyboards was that?")]
    assert second.messages[: len(first.messages)] == first.messages
    assert second.final_text == "Two keyboards, 5900.0 rupees in all."


def test_the_earlier_results_messages_are_never_changed(first):
    before = copy.deepcopy(first.messages)
    run_production(ScriptedLLM([text_reply("ok")]), "Thanks!", make_tools(),
                   messages=first.messages)
    assert first.messages == before


def test_steps_usage_and_cost_are_this_runs_alone(first):
    second = run_production(ScriptedLLM([text_reply("ok")]), "Thanks!", make_tools(),
                            system=SYSTEM, messages=first.messages)
    assert [s.index for s in second.steps] == [1]
    assert second.usage == second.steps[0].usage
    # the one call re-sent the whole history, so it cost more input than the first call did
    assert second.usage.input_tokens > first.steps[0].usage.input_tokens


def test_the_step_limit_counts_this_runs_model_calls_not_the_conversations(first):
    llm = ScriptedLLM([tool_reply(("calculator", {"expression": "1 + 1"})), text_reply("2")])
    second = run_production(llm, "What is 1 + 1?", make_tools(), messages=first.messages,
                            config=AgentConfig(max_steps=2))
    assert second.stop_cause is StopCause.END_TURN and len(second.steps) == 2


def test_a_token_budget_is_per_run_so_a_long_history_alone_does_not_spend_it(first):
    budget = first.usage.total_tokens  # the first run used all of it
    second = run_production(ScriptedLLM([text_reply("ok")]), "Thanks!", make_tools(),
                            messages=first.messages, config=AgentConfig(token_budget=budget))
    assert second.stop_cause is StopCause.END_TURN
    assert first.usage.total_tokens + second.usage.total_tokens > budget


def test_the_context_window_check_counts_the_history_that_is_sent(first):
    history_tokens = sum(estimate_tokens(m) for m in first.messages)
    small = AgentConfig(context_window=history_tokens, context_stop_share=0.8)
    alone = run_production(ScriptedLLM([text_reply("ok")]), "Thanks!", config=small)
    again = run_production(ScriptedLLM([text_reply("ok")]), "Thanks!", messages=first.messages,
                           config=small)
    assert alone.stop_cause is StopCause.END_TURN
    assert again.stop_cause is StopCause.CONTEXT_WINDOW and again.steps == []


def test_a_crashed_runs_history_is_repaired_before_it_is_sent_and_the_repair_is_reported(first):
    crashed = first.messages[:2]  # the task and the first reply, whose call never returned
    events = []
    seen = []

    def model(messages):
        seen.append(copy.deepcopy(messages))
        return text_reply("Sorry, let me start again.")

    result = run_production(ScriptedLLM(model), "Are you there?", make_tools(), messages=crashed,
                            on_event=lambda kind, data: events.append((kind, data)))
    sent = seen[0]
    assert messages_problems(sent) == []  # the provider's 400 rule holds
    call_id = crashed[1]["content"][1]["id"]
    assert sent[2]["content"] == [
        {"type": "tool_result", "tool_use_id": call_id, "content": UNANSWERED_RESULT,
         "is_error": True},
        text_block("Are you there?")]
    assert ("history_repaired", {"tool_use_ids": [call_id]}) in events
    assert unanswered_tool_uses(result.messages) == []


def test_a_history_that_is_not_one_is_refused_before_the_model_is_called():
    llm = ScriptedLLM([text_reply("never")])
    with pytest.raises(ValueError, match=r"messages=\.\.\.\): message 0: role 'bot'"):
        run_production(llm, "Hi", messages=[{"role": "bot", "content": "hello"}])
    assert llm.calls == 0


def test_a_new_reply_that_reuses_an_id_from_the_history_gets_a_fresh_one(first):
    old_id = first.messages[1]["content"][1]["id"]
    llm = ScriptedLLM([tool_reply(("calculator", {"expression": "1 + 1"}, old_id)),
                       text_reply("2")])
    second = run_production(llm, "What is 1 + 1?", make_tools(), messages=first.messages)
    new_id = second.steps[0].executions[0].tool_use_id
    assert new_id != old_id
    assert messages_problems(second.messages) == []


def test_a_continued_runs_trace_holds_the_history_and_replays_to_a_match(first, tmp_path):
    path = tmp_path / "turn2.jsonl"
    llm = ScriptedLLM([tool_reply(("calculator", {"expression": "5900 / 2"})),
                       text_reply("2950.0 rupees each.")])
    second = run_production(llm, "And per keyboard?", make_tools(), system=SYSTEM,
                            messages=first.messages, trace=path)
    trace = load_trace(path)
    assert trace.history == first.messages
    assert trace.messages() == second.messages
    again = replay(trace, make_tools())
    assert again.divergence is None
    assert again.result.messages == second.messages


def test_a_fresh_runs_trace_has_no_history(tmp_path):
    path = tmp_path / "t.jsonl"
    run_production(ScriptedLLM([text_reply("hi")]), "Hello", trace=path)
    first_line = json.loads(path.read_text().splitlines()[0])
    assert "history" not in first_line and load_trace(path).history == []


@tool(needs_approval=True)
def refund(order_id: str) -> str:
    """Refund an order in full.

    Args:
        order_id: the order to refund.
    """
    return f"refunded {order_id}"


def test_a_continued_run_that_pauses_resumes_with_its_history_and_its_ids(first, tmp_path):
    llm = ScriptedLLM([tool_reply(("refund", {"order_id": "A123"})), text_reply("Refunded.")])
    tools = [*make_tools(), refund]
    paused = run_production(llm, "Refund it, please.", tools, messages=first.messages,
                            config=AgentConfig(checkpoint_dir=str(tmp_path)))
    assert paused.stop_cause is StopCause.AWAITING_APPROVAL
    approve(paused.checkpoint, paused.pending[0]["id"])
    done = resume(paused.checkpoint, llm, tools)
    assert done.stop_cause is StopCause.END_TURN
    assert done.messages[: len(first.messages)] == first.messages
    assert messages_problems(done.messages) == []


def test_a_state_read_back_knows_the_ids_of_the_conversation_before_the_run(first):
    state = start_run(ScriptedLLM([]), "hi", make_tools())
    state.messages = list(first.messages)
    again = RunState.from_dict(state.to_dict(), state.inputs)
    ids = {b["id"] for m in first.messages if m["role"] == "assistant"
           for b in m["content"] if b["type"] == "tool_use"}
    assert ids and ids <= again.tool_use_ids
