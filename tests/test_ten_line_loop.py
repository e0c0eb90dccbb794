"""The ten-line loop of lessons 03-05: the Messages API loop with the model's stop_reason as
its only exit."""

from __future__ import annotations

import inspect

import pytest

from primer.harness.request_check import check_messages
from primer.loop.mini import ten_line_loop
from primer.loop.model import ScriptedLLM, ScriptExhausted, text_reply, tool_reply
from primer.loop.tools import ToolRegistry, tool
from primer.scenarios import hr, orders


def test_the_loop_body_is_ten_lines():
    source = inspect.getsource(ten_line_loop)
    body = source.split('"""')[2].strip().splitlines()
    assert len(body) == 10


def test_the_recovering_order_model_answers_5900_after_four_calls():
    messages, replies = ten_line_loop(orders.make_llm("recover"), orders.TASK,
                                      ToolRegistry(orders.make_tools()), system=orders.SYSTEM)
    assert [r.stop_reason for r in replies] == ["tool_use"] * 3 + ["end_turn"]
    assert "5900.0 rupees" in replies[-1].text
    assert [m["role"] for m in messages] == ["user", "assistant"] * 4
    first_results = messages[2]["content"]
    assert first_results[0]["is_error"] and "'order_id' is a required property" in \
        first_results[0]["content"]


def test_parallel_calls_are_answered_in_one_user_message_in_request_order():
    messages, _ = ten_line_loop(hr.make_llm(), hr.TASK, ToolRegistry(hr.make_tools()),
                                system=hr.SYSTEM)
    asked = [b["id"] for b in messages[1]["content"] if b["type"] == "tool_use"]
    answered = [b["tool_use_id"] for b in messages[2]["content"]]
    assert len(asked) == 2 and answered == asked
    check_messages(messages)  # the API's pairing rule holds (raises when it does not)


def test_the_system_prompt_is_a_parameter_not_a_message():
    seen = []

    def model(*, system, messages, tools, max_tokens):
        seen.append((system, [m["role"] for m in messages], [t["name"] for t in tools]))
        return text_reply("done")

    ten_line_loop(model, "task", ToolRegistry(orders.make_tools()), system="be brief")
    assert seen == [("be brief", ["user"], ["get_order", "calculator"])]


def test_a_cut_off_reply_ends_the_loop_without_running_its_call():
    ran = []

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        ran.append(key)
        return key

    registry = ToolRegistry([lookup])
    calls = ScriptedLLM([tool_reply(("lookup", {"key": "a"})), text_reply("done")])
    ten_line_loop(calls, "task", registry)
    assert ran == ["a"]  # a tool_use reply runs its call
    cut = tool_reply(("lookup", {"key": "b"}), stop_reason="max_tokens")
    messages, replies = ten_line_loop(ScriptedLLM([cut]), "task", registry)
    assert replies[-1].stop_reason == "max_tokens" and len(messages) == 2 and ran == ["a"]


def test_a_model_that_never_stops_is_not_stopped_by_this_loop():
    llm = ScriptedLLM([tool_reply(("get_order", {"order_id": "A123"}))] * 5)
    with pytest.raises(ScriptExhausted, match="reply 6"):
        ten_line_loop(llm, "task", ToolRegistry(orders.make_tools()))
