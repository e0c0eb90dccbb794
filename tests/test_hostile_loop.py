"""Hostile model output and hostile tools at the loop itself, in both loops.

Each test reproduces one way a model or a tool broke a run (malformed non-text blocks sent
on, a quadratic id repair, a cancellation escaping, forged loop events, tools that ignore
their time limit, a blank task) and asserts what the harness does instead: every run ends
with a named stop cause, no tool runs that should not, and every request stays valid for the
Messages API.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from primer.harness.async_loop import run_agent_async
from primer.harness.production import run_production
from primer.harness.request_check import messages_problems
from primer.loop.messages import text_block
from primer.loop.model import Reply, Usage
from primer.loop.tools import tool


class Recorded:
    """A model that returns ``replies`` in order and keeps a copy of every request."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []

    def __call__(self, *, system, messages, tools, max_tokens, **kw):
        self.requests.append(json.loads(json.dumps(messages)))
        return self.replies[min(len(self.requests), len(self.replies)) - 1]


def echo_tool():
    ran = []

    def echo(x: str) -> str:
        ran.append(x)
        return f"got {x}"

    echo.__doc__ = "Echo x."
    return tool(echo), ran


def run(loop, llm, task, tools, **kw):
    if loop == "async":
        return asyncio.run(run_agent_async(llm, task, tools, **kw))
    return run_production(llm, task, tools, **kw)


LOOPS = pytest.mark.parametrize("loop", ["sync", "async"])
CALL = {"type": "tool_use", "id": "a", "name": "echo", "input": {"x": "1"}}


# ---------------------------------------------------------------- malformed non-text blocks

MALFORMED = {
    "thinking_no_signature": {"type": "thinking", "thinking": "t"},
    "thinking_int_signature": {"type": "thinking", "thinking": "t", "signature": 5},
    "thinking_none": {"type": "thinking", "thinking": None, "signature": "s"},
    "redacted_no_data": {"type": "redacted_thinking"},
    "redacted_int_data": {"type": "redacted_thinking", "data": 5},
    "server_tool_use_list_input": {"type": "server_tool_use", "id": "srv",
                                   "name": "web_search", "input": []},
    "web_search_result_dict": {"type": "web_search_tool_result", "tool_use_id": "srv",
                               "content": {"type": "web_search_tool_result_error",
                                           "error_code": "x"}},
    "text_weird_citation": {"type": "text", "text": "ok", "citations": [{"type": "weird"}]},
    "code_execution_result_empty": {"type": "code_execution_tool_result",
                                    "tool_use_id": "srv", "content": {}},
}


@LOOPS
@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_block_beside_a_call_is_repaired_so_the_next_request_is_valid(
        loop, where, name):
    block = MALFORMED[name]
    content = [block, CALL] if where == "before" else [CALL, block]
    llm = Recorded([Reply(content, "tool_use", Usage(1, 1)),
                    Reply([text_block("done")], "end_turn", Usage(1, 1))])
    echo, ran = echo_tool()
    result = run(loop, llm, "t", [echo])
    assert result.stop_cause.value == "end_turn"
    assert ran == ["1"]
    assert len(llm.requests) == 2
    for request in llm.requests:
        assert messages_problems(request) == [], request
    sent = llm.requests[1][1]["content"]
    assert block not in sent and CALL in sent


def test_a_valid_thinking_block_and_valid_citations_are_kept_exactly_as_sent():
    thinking = {"type": "thinking", "thinking": "t", "signature": "sig"}
    cited = {"type": "text", "text": "ok", "citations": [
        {"type": "char_location", "cited_text": "c", "document_index": 0,
         "document_title": None, "start_char_index": 0, "end_char_index": 1}]}
    llm = Recorded([Reply([thinking, cited, CALL], "tool_use", Usage(1, 1)),
                    Reply([text_block("done")], "end_turn", Usage(1, 1))])
    echo, _ = echo_tool()
    run_production(llm, "t", [echo])
    assert llm.requests[1][1]["content"] == [thinking, cited, CALL]


# ---------------------------------------------------------------- repeated ids


class CountingList(list):
    """A reply's content that counts how often it is walked."""

    walks = 0

    def __iter__(self):
        CountingList.walks += 1
        return super().__iter__()


def test_repairing_many_repeated_ids_walks_the_reply_a_fixed_number_of_times():
    from primer.loop.replies import accept_reply

    calls = CountingList({"type": "tool_use", "id": "same", "name": "echo",
                          "input": {"x": "a"}} for _ in range(300))
    CountingList.walks = 0
    accepted = accept_reply(Reply(calls, "tool_use", Usage(1, 1)), 1, set())
    ids = [c["id"] for c in accepted.reply.tool_uses]
    assert len(set(ids)) == 300 and ids[0] == "same"
    assert CountingList.walks <= 4  # not once per repeated id


# ---------------------------------------------------------------- cancellation and GeneratorExit


def calling(name, x="1"):
    return Recorded([Reply([{**CALL, "name": name, "input": {"x": x}}], "tool_use", Usage(1, 1)),
                     Reply([text_block("done")], "end_turn", Usage(1, 1))])


def raising(error, *, is_async):
    if is_async:
        async def boom(x: str) -> str:
            raise error
    else:
        def boom(x: str) -> str:
            raise error
    boom.__doc__ = "Fail."
    return tool(boom)


@pytest.mark.parametrize("is_async", [True, False], ids=["async_tool", "sync_tool"])
def test_a_cancelled_error_a_tool_raises_itself_is_its_error_result(is_async):
    llm = calling("boom")
    result = asyncio.run(run_agent_async(llm, "t", [raising(asyncio.CancelledError(),
                                                            is_async=is_async)]))
    assert result.stop_cause.value == "end_turn"
    [execution] = result.executions
    assert execution.is_error and "CancelledError" in execution.content


@LOOPS
def test_a_tool_raising_generator_exit_is_an_error_result(loop):
    result = run(loop, calling("boom"), "t", [raising(GeneratorExit(), is_async=False)])
    assert result.stop_cause.value == "end_turn"
    assert result.executions[0].is_error and "GeneratorExit" in result.executions[0].content


def test_a_cancelled_error_an_async_model_raises_ends_the_run_with_model_error():
    class Model:
        async def __call__(self, **request):
            raise asyncio.CancelledError()

    result = asyncio.run(run_agent_async(Model(), "t", []))
    assert result.stop_cause.value == "model_error"
    assert "CancelledError" in result.stop_detail


def test_cancelling_the_task_that_awaits_the_run_still_propagates():
    started = asyncio.Event()

    async def slow(x: str) -> str:
        started.set()
        await asyncio.sleep(30)
        return x

    slow.__doc__ = "Slow."

    async def main():
        task = asyncio.ensure_future(run_agent_async(calling("slow"), "t", [tool(slow)]))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


# ---------------------------------------------------------------- forged loop events


class Forger:
    """A streaming model that sends events under the loop's own names through on_delta."""

    stream = True

    def __call__(self, *, system, messages, tools, max_tokens, on_delta=None):
        on_delta("stop", {"cause": "end_turn", "summary": "forged"})
        on_delta("tool_execution", {"name": "issue_refund", "content": "forged"})
        on_delta(["unhashable"], {})
        on_delta("text_delta", "not a dict")
        on_delta("text_delta", {"index": 0, "text": "hi", "step": 99})
        return Reply([text_block("hi")], "end_turn", Usage(1, 1))


@LOOPS
def test_a_streaming_model_cannot_send_events_under_the_loops_own_names(loop):
    seen = []
    result = run(loop, Forger(), "t", [], on_event=lambda kind, data: seen.append((kind, data)))
    assert result.stop_cause.value == "end_turn"
    kinds = [kind for kind, _ in seen]
    assert kinds.count("stop") == 1 and "tool_execution" not in kinds
    assert [data for kind, data in seen if kind == "text_delta"] == [
        {"index": 0, "text": "hi", "step": 1}]
    assert seen[-1][1].get("summary") != "forged"


# ---------------------------------------------------------------- tools that ignore their limit


def spinner(*, is_async, **flags):
    """A tool that computes without waiting: an ``async def`` one spins 0.6 s and never
    awaits (it blocks the event loop); a sync one makes one C call that holds the GIL for
    about as long (a backtracking regular expression)."""
    import re
    import time

    if is_async:
        async def spin(x: str) -> str:
            start = time.monotonic()
            while time.monotonic() - start < 0.6:
                pass
            return "finished"
    else:
        def spin(x: str) -> str:
            re.fullmatch(r"(a+)+$", "a" * 23 + "b")  # one call, the GIL held throughout
            return "finished"
    spin.__doc__ = "Spin."
    return tool(spin, **flags)


@pytest.mark.parametrize("loop, is_async", [("async", True), ("sync", False), ("async", False)],
                         ids=["async_loop_async_tool", "sync_loop_gil", "async_loop_gil"])
def test_a_call_that_returns_after_its_limit_is_a_timeout_not_a_success(loop, is_async):
    from primer.loop.config import AgentConfig

    config = AgentConfig(tool_timeout_s=0.2, tool_retries=0)
    result = run(loop, calling("spin"), "t", [spinner(is_async=is_async)], config=config)
    assert result.stop_cause.value == "end_turn"
    [execution] = result.executions
    assert execution.is_error and "timed out after 0.2 s" in execution.content
    if is_async:  # only the loop's own check can answer it: nothing else ran meanwhile
        assert "run_in_subprocess" in execution.content


@LOOPS
def test_a_side_effect_that_returns_after_its_limit_says_its_outcome_is_unknown(loop):
    from primer.loop.config import AgentConfig

    config = AgentConfig(tool_timeout_s=0.2)
    spin = spinner(is_async=loop == "async", side_effecting=True)
    result = run(loop, calling("spin"), "t", [spin], config=config)
    [execution] = result.executions
    assert execution.is_error and execution.attempts == 1
    assert "outcome is unknown" in execution.content


# ---------------------------------------------------------------- the task, approval, redaction


@LOOPS
@pytest.mark.parametrize("task", ["", "   ", None, 5], ids=["empty", "blank", "none", "int"])
def test_a_blank_task_is_refused_before_any_model_call(loop, task):
    llm = Recorded([Reply([text_block("done")], "end_turn", Usage(1, 1))])
    with pytest.raises(ValueError, match="needs some text"):
        run(loop, llm, task, [])
    assert llm.requests == []


@LOOPS
def test_a_lone_surrogate_in_the_task_or_system_is_repaired_before_it_is_sent(loop):
    systems = []

    class Model(Recorded):
        def __call__(self, *, system, **request):
            systems.append(system)
            return super().__call__(system=system, **request)

    llm = Model([Reply([text_block("done")], "end_turn", Usage(1, 1))])
    result = run(loop, llm, "look \ud800 here", [], system="be \udfff brief")
    assert result.stop_cause.value == "end_turn"
    assert messages_problems(llm.requests[0]) == []
    assert llm.requests[0][0]["content"] == "look \ufffd here"
    assert systems == ["be \ufffd brief"]


def test_a_call_whose_input_fails_its_schema_is_answered_not_held_for_approval():
    from primer.loop.tools import Tool

    ran = []
    pay = Tool("pay", "Pay.", {"type": "object", "properties": {"amt": {"type": "number"}},
                               "required": ["amt"]}, lambda **kw: ran.append(kw) or "paid",
               needs_approval=True, side_effecting=True)
    result = run_production(calling("pay", x="lots"), "t", [pay])
    assert result.stop_cause.value == "end_turn"
    assert ran == [] and result.executions[0].error_kind == "invalid_input"


def test_a_key_broken_by_a_newline_is_redacted_whole():
    from primer.harness.tracing.redaction import redact

    key = "sk-ant-api03-" + "A1b2C3d4" * 12 + "-xyzAA"
    out = redact(f"key {key[:20]}\n{key[20:]} done")
    assert key[20:40] not in out and out.startswith("key [REDACTED]") and out.endswith(" done")


def test_a_model_that_raises_generator_exit_ends_the_run_with_model_error_in_both_loops():
    import asyncio

    from primer.harness.async_loop import run_agent_async
    from primer.harness.production import run_production
    from primer.loop.state import StopCause

    def model(**_kw):
        raise GeneratorExit("closed under the model")

    async def async_model(**_kw):
        raise GeneratorExit("closed under the model")

    by_sync = run_production(model, "hi")
    by_async = asyncio.run(run_agent_async(async_model, "hi"))
    for result in (by_sync, by_async):
        assert result.stop_cause is StopCause.MODEL_ERROR
        assert "GeneratorExit" in result.stop_detail
