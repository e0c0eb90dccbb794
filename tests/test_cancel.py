"""Cancelling a run: checked before each model call and before each tool call starts; the run
stops with ``cancelled``, keeps every finished result, answers every ``tool_use``, and a
recorded run can be continued later."""

import asyncio
import json
import threading

from primer.harness.durable.checkpoint import list_checkpoints, read_checkpoint
from primer.harness.durable.resume import resume
from primer.harness.production import run_production
from primer.loop import checks as exits
from primer.loop.config import AgentConfig
from primer.loop.loop import run_agent
from primer.loop.messages import tool_use_block
from primer.loop.model import Reply, ScriptedLLM, Usage, text_reply, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import tool


def _lookups(cancel, ran):
    @tool
    def lookup(key: str) -> str:
        """Look a key up; the first lookup makes a person press stop.

        Args:
            key: what to look up
        """
        ran.append(key)
        cancel.set()
        return f"value of {key}"

    return lookup


def _answered(messages):
    """Every tool_use id of the assistant turns, and every tool_result id of the user turns."""
    asked = [b["id"] for m in messages if m["role"] == "assistant"
             and isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"]
    answered = [b["tool_use_id"] for m in messages if m["role"] == "user"
                and isinstance(m["content"], list) for b in m["content"]
                if b["type"] == "tool_result"]
    return asked, answered


def test_a_cancel_set_before_the_run_stops_it_before_any_model_call():
    cancel = threading.Event()
    cancel.set()
    llm = ScriptedLLM(["never"])
    result = run_production(llm, "task", cancel=cancel)
    assert result.stop_cause is StopCause.CANCELLED and llm.calls == 0
    assert result.final_text is None and result.summary.startswith("Cancelled: ")
    assert "before model call 1" in result.stop_detail


def test_a_cancel_between_tool_calls_keeps_the_finished_result_and_answers_the_rest():
    cancel, ran = threading.Event(), []
    reply = tool_reply(("lookup", {"key": "a"}), ("lookup", {"key": "b"}),
                       ("lookup", {"key": "c"}))
    llm = ScriptedLLM([reply, "never asked"])
    result = run_production(llm, "task", [_lookups(cancel, ran)], cancel=cancel,
                            config=AgentConfig(max_parallel_tools=1, no_progress_window=1))
    assert ran == ["a"] and llm.calls == 1
    assert result.stop_cause is StopCause.CANCELLED  # not no_progress: not_run is no error
    kinds = [e.error_kind for e in result.executions]
    assert kinds == [None, "not_run", "not_run"]
    assert result.executions[0].content == "value of a"
    assert "cancelled" in result.executions[1].content
    asked, answered = _answered(result.messages)
    assert asked == answered and len(asked) == 3
    assert "2 tool calls of call 1 had not started" in result.stop_detail


def test_a_cancel_during_the_model_call_runs_none_of_its_calls():
    cancel, ran = threading.Event(), []

    def model(**request):
        cancel.set()  # pressed while the model was writing
        return Reply([tool_use_block("call_1", "lookup", {"key": "a"})], "tool_use",
                     Usage(10, 5))

    result = run_production(model, "task", [_lookups(threading.Event(), ran)], cancel=cancel)
    assert ran == [] and result.stop_cause is StopCause.CANCELLED
    assert [e.error_kind for e in result.executions] == ["not_run"]
    asked, answered = _answered(result.messages)
    assert asked == answered == ["call_1"]


def test_a_cancelled_run_is_recorded_and_resume_continues_it(tmp_path):
    cancel, ran = threading.Event(), []
    lookup = _lookups(cancel, ran)
    script = [tool_reply(("lookup", {"key": "a"})), tool_reply(("lookup", {"key": "b"})),
              text_reply("a and b found")]
    first = run_production(ScriptedLLM(script), "find a and b", [lookup], cancel=cancel,
                           config=AgentConfig(checkpoint_dir=str(tmp_path)))
    assert first.stop_cause is StopCause.CANCELLED and first.checkpoint is not None
    assert read_checkpoint(first.checkpoint)["status"] == "cancelled"
    [info] = list_checkpoints(tmp_path)
    assert info.status == "cancelled" and info.summary == first.summary

    later = ScriptedLLM(script[1:])  # the model answers from where the run stopped
    again = resume(first.checkpoint, later, [_lookups(threading.Event(), ran)])
    assert again.stop_cause is StopCause.END_TURN and again.final_text == "a and b found"
    assert ran == ["a", "b"] and later.calls == 2
    assert again.messages[:len(first.messages)] == first.messages
    assert [s.index for s in again.steps] == [1, 2, 3]
    assert again.usage.total_tokens > first.usage.total_tokens
    assert read_checkpoint(first.checkpoint)["status"] == "finished"
    json.dumps(again.to_dict())


def test_the_cancel_check_sits_in_the_declared_order_before_each_call():
    assert exits.check_cancelled in exits.BEFORE_CALL
    assert exits.check_cancelled.causes == (StopCause.CANCELLED,)


def test_a_cancelled_error_raised_by_a_sync_model_is_its_own_failure_not_the_runs():
    def model(**kw):  # an SDK's inner cancel scope, leaking out of a sync wrapper
        raise asyncio.CancelledError("inner scope")

    result = run_agent(model, "go")
    assert result.stop_cause == StopCause.MODEL_ERROR
    assert "CancelledError: inner scope" in result.stop_detail
