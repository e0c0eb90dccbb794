"""Messages and content blocks keep the Anthropic Messages shape and survive JSON."""

from __future__ import annotations

import json

from primer.loop.messages import (
    assistant_message,
    blocks_of,
    text_block,
    text_of,
    tool_result_block,
    tool_use_block,
    tool_uses_of,
    user_message,
)


def test_each_block_builder_produces_the_documented_keys():
    assert text_block("hi") == {"type": "text", "text": "hi"}
    assert tool_use_block("toolu_1", "get_order", {"order_id": "A123"}) == {
        "type": "tool_use", "id": "toolu_1", "name": "get_order",
        "input": {"order_id": "A123"}}
    assert tool_result_block("toolu_1", "ok") == {
        "type": "tool_result", "tool_use_id": "toolu_1", "content": "ok", "is_error": False}
    assert tool_result_block("toolu_1", "bad", is_error=True)["is_error"] is True


def test_a_tool_use_keeps_malformed_input_as_given_so_the_harness_can_answer_it():
    assert tool_use_block("t", "x", '{"a": 1}')["input"] == '{"a": 1}'
    assert tool_use_block("t", "x", [1, 2])["input"] == [1, 2]


def test_messages_carry_their_role_and_content():
    assert user_message("task") == {"role": "user", "content": "task"}
    blocks = [text_block("a")]
    assert assistant_message(blocks) == {"role": "assistant", "content": blocks}


def test_a_plain_string_reads_as_one_text_block_and_an_empty_string_as_none():
    assert blocks_of("hello") == [text_block("hello")]
    assert blocks_of("") == []
    blocks = [text_block("a"), tool_use_block("t", "x", {})]
    assert blocks_of(blocks) == blocks and blocks_of(blocks) is not blocks


def test_text_of_joins_text_blocks_and_ignores_tool_calls():
    content = [text_block("one"), tool_use_block("t", "x", {}), text_block("two")]
    assert text_of(content) == "one\ntwo"
    assert text_of("plain") == "plain"


def test_tool_uses_of_returns_the_calls_in_the_order_written_and_skips_junk():
    a, b = tool_use_block("1", "a", {}), tool_use_block("2", "b", {})
    assert tool_uses_of([a, text_block("x"), "not a block", b]) == [a, b]
    assert tool_uses_of("a string has no calls") == []


def test_a_conversation_round_trips_through_json_unchanged():
    conversation = [
        user_message("What does order A123 cost?"),
        assistant_message([text_block("Looking it up."),
                           tool_use_block("toolu_1", "get_order", {"order_id": "A123"})]),
        user_message([tool_result_block("toolu_1", '{"total": 5000}')]),
        assistant_message([text_block("It costs 5000.")]),
    ]
    assert json.loads(json.dumps(conversation)) == conversation
