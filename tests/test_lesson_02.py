"""Lesson 02's figures and its round trip on the wire, recomputed with the library."""

from __future__ import annotations

import json

import anthropic
import pytest

from primer.loop.messages import assistant_message, user_message
from primer.loop.model import ScriptedLLM, estimate_tokens, text_reply, tool_reply
from primer.loop.tools import ToolRegistry
from primer.providers.fake_server import FakeModelServer
from primer.scenarios import orders


def test_the_order_worlds_two_definitions_take_208_tokens():
    registry = ToolRegistry(orders.make_tools())
    assert registry.names == ["get_order", "calculator"]
    assert estimate_tokens(registry.definitions()) == 208


def test_one_order_is_24_tokens_and_the_order_book_with_notes_485_twenty_times_more():
    one = ToolRegistry(orders.make_tools()).run(
        {"id": "c1", "name": "get_order", "input": {"order_id": "A123"}}).content
    everything = json.dumps([dict(o, notes="customer notes, delivery history, invoices " * 20)
                             for o in orders.ORDERS.values()])
    assert (estimate_tokens(one), estimate_tokens(everything)) == (24, 485)
    assert round(estimate_tokens(everything) / estimate_tokens(one)) == 20


@pytest.fixture
def wire():
    model = ScriptedLLM([tool_reply(("get_order", {"order_id": "A123"}), text="Looking."),
                         text_reply("Two keyboards.")])
    with FakeModelServer(model) as server:
        yield server, anthropic.Anthropic(api_key="offline", base_url=server.base_url)


def test_the_reply_that_calls_a_tool_has_a_tool_use_block_and_stop_reason_tool_use(wire):
    server, client = wire
    registry = ToolRegistry(orders.make_tools())
    messages = [user_message("What is in order A123?")]
    reply = client.messages.create(model="m", max_tokens=1024, system=orders.SYSTEM,
                                   tools=registry.definitions(), messages=messages)
    sent = server.model_requests[0].body
    assert sent["system"] == orders.SYSTEM and sent["messages"] == messages
    assert [t["name"] for t in sent["tools"]] == ["get_order", "calculator"]
    assert "input_schema" in sent["tools"][0]
    assert reply.stop_reason == "tool_use"
    assert [type(b).__name__ for b in reply.content] == ["TextBlock", "ToolUseBlock"]
    call = reply.content[1]
    assert (call.type, call.name, call.input) == ("tool_use", "get_order", {"order_id": "A123"})

    blocks = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
    results = [registry.run(b).result_block() for b in blocks if b["type"] == "tool_use"]
    messages += [assistant_message(blocks), user_message(results)]
    second = client.messages.create(model="m", max_tokens=1024, system=orders.SYSTEM,
                                    tools=registry.definitions(), messages=messages)
    turn = server.model_requests[1].body["messages"][2]
    assert turn["role"] == "user" and turn["content"][0]["type"] == "tool_result"
    assert turn["content"][0]["tool_use_id"] == call.id
    assert second.stop_reason == "end_turn"


def test_a_tool_use_left_unanswered_is_refused_with_a_400(wire):
    server, client = wire
    registry = ToolRegistry(orders.make_tools())
    reply = client.messages.create(model="m", max_tokens=1024, tools=registry.definitions(),
                                   messages=[user_message("A123?")])
    blocks = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
    with pytest.raises(anthropic.BadRequestError, match="without `tool_result` blocks"):
        client.messages.create(model="m", max_tokens=1024, tools=registry.definitions(),
                               messages=[user_message("A123?"), assistant_message(blocks),
                                         user_message("Well?")])


def test_the_quiz_s_1040_is_five_calls_each_sending_the_208_tokens_of_definitions():
    from primer.course.quiz import load_quiz
    per_call = estimate_tokens(ToolRegistry(orders.make_tools()).definitions())
    assert (per_call, 5 * per_call) == (208, 1040)
    assert load_quiz("02").questions[4].number == 5 * per_call
    assert "208" in load_quiz("02").questions[4].ask


def test_the_four_tool_choice_forms_are_the_sdk_s():
    import anthropic.types as t
    for kind in ("Auto", "Any", "Tool", "None"):
        assert getattr(t, f"ToolChoice{kind}Param").__annotations__["type"]
    assert "disable_parallel_tool_use" in t.ToolChoiceAutoParam.__annotations__
    assert "disable_parallel_tool_use" not in t.ToolChoiceNoneParam.__annotations__
