"""Cancelling a run: checked before each model call and before each tool call starts; the run
stops with ``cancelled``, keeps every finished result, answers every ``tool_use``, and a
recorded run can be continued later."""

import asyncio
import json
import multiprocessing
import sys
import threading
import time

import anthropic
import anyio
import mcp_types as types
import pytest
from mcp.server import Server

from primer.harness.async_loop import run_agent_async
from primer.harness.durable.checkpoint import list_checkpoints, read_checkpoint
from primer.harness.durable.resume import resume
from primer.harness.production import run_production
from primer.harness.timeouts import run_in_subprocess
from primer.loop import checks as exits
from primer.loop.config import AgentConfig
from primer.loop.loop import run_agent
from primer.loop.messages import tool_use_block
from primer.loop.model import Reply, ScriptedLLM, Usage, text_reply, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import tool
from primer.providers.claude import AsyncClaudeLLM, ClaudeLLM
from primer.providers.fake_server import FakeModelServer
from primer.providers.mcp import MCPConnection, mcp_inprocess_tools


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


# ---------------------------------------------------------------- work in flight
#
# Each test presses stop while something runs and measures the time from the press to the
# run's return. The bound asserted is generous (a loaded 2-core machine); the figures are
# CANCEL_POLL_S + CANCEL_GRACE_S (0.27 s) for a call that ignores the cancel, and about one
# poll or one streamed event for one that does not.

GENEROUS_S = 5.0


class StopPress:
    """A cancel signal pressed from another thread once ``when`` is set; ``.at`` is when."""

    def __init__(self, when: threading.Event, after_s: float = 0.05) -> None:
        self.signal, self.at = threading.Event(), None

        def press():
            if when.wait(30):
                time.sleep(after_s)
                self.at = time.monotonic()
                self.signal.set()

        threading.Thread(target=press, daemon=True).start()

    def seconds_to(self, end: float) -> float:
        """Seconds from the press to ``end`` (printed: ``pytest -s`` shows each figure)."""
        assert self.at is not None, "stop was never pressed"
        print(f"\ntime to stop: {end - self.at:.3f} s")
        return end - self.at


def _sleeper(started, seconds=30.0, side_effecting=False):
    @tool(side_effecting=side_effecting)
    def refund(order_id: str) -> str:
        """Refund an order (slowly).

        Args:
            order_id: the order
        """
        started.set()
        time.sleep(seconds)
        return f"refunded {order_id}"

    return refund


def test_a_running_tool_is_answered_cancelled_and_the_run_stops_within_the_bound():
    started = threading.Event()
    press = StopPress(started)
    llm = ScriptedLLM([tool_reply(("refund", {"order_id": "A1"}),
                                  ("refund", {"order_id": "A2"})), "never asked"])
    result = run_production(llm, "refund both", [_sleeper(started)], cancel=press.signal)
    took = press.seconds_to(time.monotonic())
    assert result.stop_cause is StopCause.CANCELLED and llm.calls == 1
    assert [e.error_kind for e in result.executions] == ["cancelled", "cancelled"]
    assert "abandoned, not stopped" in result.executions[0].content
    assert "cancelled while running: refund ×2" in result.summary
    asked, answered = _answered(result.messages)
    assert asked == answered and len(asked) == 2
    assert took < GENEROUS_S, f"the run took {took:.2f} s to stop"


def test_run_agent_alone_answers_a_running_tool_as_cancelled_too():
    started = threading.Event()
    press = StopPress(started)
    result = run_agent(ScriptedLLM([tool_reply(("refund", {"order_id": "A1"})), "never"]),
                       "refund", [_sleeper(started)], cancel=press.signal)
    assert result.stop_cause is StopCause.CANCELLED
    assert result.executions[0].error_kind == "cancelled"
    assert press.seconds_to(time.monotonic()) < GENEROUS_S


def test_a_call_that_finishes_with_its_result_after_the_press_keeps_it():
    started = threading.Event()
    press = StopPress(started, after_s=0.0)
    result = run_production(ScriptedLLM([tool_reply(("refund", {"order_id": "A1"})), "never"]),
                            "refund", [_sleeper(started, seconds=0.1)], cancel=press.signal)
    assert result.stop_cause is StopCause.CANCELLED
    assert (result.executions[0].error_kind, result.executions[0].content) == \
        (None, "refunded A1")


def test_a_cancelled_side_effect_says_to_check_state_and_a_resume_never_runs_it_again(
        tmp_path):
    started, ran = threading.Event(), []

    @tool(side_effecting=True)
    def refund(order_id: str) -> str:
        """Refund an order (slowly).

        Args:
            order_id: the order
        """
        ran.append(order_id)
        started.set()
        time.sleep(3)
        return f"refunded {order_id}"

    press = StopPress(started)
    script = [tool_reply(("refund", {"order_id": "A1"})), text_reply("I will check first.")]
    first = run_production(ScriptedLLM(script), "refund A1", [refund], cancel=press.signal,
                           config=AgentConfig(checkpoint_dir=str(tmp_path)))
    (e,) = first.executions
    assert e.error_kind == "cancelled" and "refund changes state: check the current state" \
        in e.content
    assert read_checkpoint(first.checkpoint)["status"] == "cancelled"
    again = resume(first.checkpoint, ScriptedLLM(script[1:]), [refund])
    assert again.stop_cause is StopCause.END_TURN and ran == ["A1"]


def test_a_subprocess_tool_is_killed_by_the_cancel():
    started = threading.Event()

    @tool
    def crunch(seconds: float) -> str:
        """Crunch numbers in a process of its own.

        Args:
            seconds: how long
        """
        started.set()
        return run_in_subprocess(time.sleep, seconds, timeout_s=60)

    press = StopPress(started, after_s=0.5)  # the child has started by then
    result = run_production(ScriptedLLM([tool_reply(("crunch", {"seconds": 30})), "never"]),
                            "crunch", [crunch], cancel=press.signal)
    took = press.seconds_to(time.monotonic())
    (e,) = result.executions
    assert e.error_kind == "cancelled"
    deadline = time.monotonic() + 5  # (on a loaded machine the kill may land after the grace)
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not multiprocessing.active_children()  # killed, not left to finish
    assert took < GENEROUS_S


def test_the_async_loop_cancels_a_running_async_tool_and_abandons_a_sync_one():
    stopped, started = [], threading.Event()

    @tool
    async def supplier(sku: str) -> str:
        """Ask the supplier.

        Args:
            sku: the item
        """
        try:
            await asyncio.sleep(30)
        finally:
            stopped.append(sku)
        return "soon"

    async def go():
        press = StopPress(started)
        llm = ScriptedLLM([tool_reply(("supplier", {"sku": "KB"}),
                                      ("refund", {"order_id": "A1"})), "never"])
        result = await run_agent_async(llm, "t", [supplier, _sleeper(started)],
                                       cancel=press.signal)
        return result, press.seconds_to(time.monotonic())

    result, took = asyncio.run(go())
    assert result.stop_cause is StopCause.CANCELLED and stopped == ["KB"]
    first, second = result.executions
    assert first.error_kind == second.error_kind == "cancelled"
    assert "abandoned, not stopped" in second.content  # a thread cannot be stopped
    assert took < GENEROUS_S


def _hanging_mcp_server(started, cancelled):
    """An MCP server whose one tool never answers until its request is cancelled."""
    async def list_tools(_ctx, _params):
        return types.ListToolsResult(tools=[types.Tool(
            name="lookup", description="Never ends.", input_schema={"type": "object"})])

    async def call_tool(_ctx, _params):
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    return Server("hangs", on_list_tools=list_tools, on_call_tool=call_tool)


def test_a_hung_mcp_call_is_cancelled_on_the_session_and_the_run_stops():
    started, cancelled = threading.Event(), threading.Event()
    press = StopPress(started)
    with mcp_inprocess_tools(_hanging_mcp_server(started, cancelled), timeout_s=60) as tools:
        result = run_production(ScriptedLLM([tool_reply(("lookup", {})), "never"]), "t",
                                tools, cancel=press.signal)
        took = press.seconds_to(time.monotonic())
        assert cancelled.wait(5), "the server's handler was never cancelled"
    assert result.stop_cause is StopCause.CANCELLED
    assert result.executions[0].error_kind == "cancelled"
    assert took < GENEROUS_S


@pytest.mark.slow  # a server process of its own: about 6 s
def test_a_hung_stdio_mcp_call_gets_notifications_cancelled_over_the_wire():
    with MCPConnection.stdio(sys.executable, ["-m", "primer", "mcp-serve", "orders", "--hang",
                                              "get_order"], timeout_s=60) as conn:
        started = threading.Event()
        threading.Timer(1.0, started.set).start()  # the request has crossed the pipe by then
        press = StopPress(started, after_s=0.0)
        result = run_production(ScriptedLLM([tool_reply(("get_order", {"order_id": "A1"})),
                                             "never"]), "t", conn.tools, cancel=press.signal)
        took = press.seconds_to(time.monotonic())
        deadline = time.monotonic() + 5  # the server logs the cancel it received
        while "cancelled the call of get_order" not in conn.server_stderr():
            assert time.monotonic() < deadline, conn.server_stderr()
            time.sleep(0.05)
    assert result.executions[0].error_kind == "cancelled"
    assert took < GENEROUS_S


WORDS = " ".join(f"word{k}" for k in range(200))


def _stream_until_stop(model_for, run):
    """Stream a 200-word answer from the local server, events 50 ms apart, through the
    real SDK; the listener presses stop after 10 words. Returns the result, the time from
    the press to the run's end, what the listener showed, and the server."""
    cancel, shown, at = threading.Event(), [], []

    def on_event(kind, data):
        if kind == "text_delta":
            shown.append(data["text"])
            if len(shown) == 10:
                at.append(time.monotonic())
                cancel.set()

    with FakeModelServer(ScriptedLLM([WORDS])) as server:
        server.slow_next_stream(0.05)
        result = run(model_for(server), cancel, on_event)
        took = time.monotonic() - at[0]
        print(f"\ntime to stop: {took:.3f} s")
        deadline = time.monotonic() + 5
        while server.streams_closed_early == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
    return result, took, "".join(shown), server


def test_a_stream_in_flight_is_closed_and_the_text_shown_is_kept():
    def model(server):
        return ClaudeLLM(client=anthropic.Anthropic(api_key="sk-ant-local",
                                                    base_url=server.base_url, max_retries=0),
                         stream=True)

    result, took, shown, server = _stream_until_stop(
        model, lambda llm, cancel, on_event: run_production(llm, "t", cancel=cancel,
                                                            on_event=on_event))
    assert result.stop_cause is StopCause.CANCELLED and result.final_text is None
    assert result.partial_text == shown and WORDS.startswith(shown) and len(shown) < 200
    assert "kept in partial_text" in result.stop_detail
    assert server.streams_closed_early == 1  # the client hung up; the stream did not finish
    assert [m["role"] for m in result.messages] == ["user"]  # nothing half-written is sent
    assert took < GENEROUS_S


def test_an_async_stream_in_flight_is_closed_at_once_and_its_text_kept():
    def model(server):
        return AsyncClaudeLLM(client=anthropic.AsyncAnthropic(
            api_key="sk-ant-local", base_url=server.base_url, max_retries=0), stream=True)

    def run(llm, cancel, on_event):
        return asyncio.run(run_agent_async(llm, "t", cancel=cancel, on_event=on_event))

    result, took, shown, server = _stream_until_stop(model, run)
    assert result.stop_cause is StopCause.CANCELLED and result.partial_text == shown
    assert server.streams_closed_early == 1
    assert took < GENEROUS_S
