"""Usage arithmetic, the offline ScriptedLLM and the characters/4 token estimate."""

from __future__ import annotations

import json
import math

import pytest

from primer.loop.messages import text_block, tool_use_block, user_message
from primer.loop.model import (
    Reply,
    ScriptedLLM,
    ScriptExhausted,
    Usage,
    estimate_tokens,
    text_reply,
    tool_reply,
)

TOOLS = [{"name": "get_order", "description": "Look up an order.",
          "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}}}]


def call(llm, messages, *, system="", tools=TOOLS, max_tokens=1024):
    return llm(system=system, messages=messages, tools=tools, max_tokens=max_tokens)


# ---------------------------------------------------------------- Usage

def test_usages_add_field_by_field():
    a = Usage(100, 20, 30, 40)
    b = Usage(1, 2, 3, 4)
    assert a + b == Usage(101, 22, 33, 44)


def test_adding_something_that_is_not_a_usage_is_a_type_error():
    with pytest.raises(TypeError):
        Usage(1, 2) + 3  # noqa: B018


def test_prompt_tokens_count_cache_reads_and_writes_and_total_adds_output():
    u = Usage(input_tokens=100, output_tokens=20, cache_creation_input_tokens=30,
              cache_read_input_tokens=40)
    assert u.prompt_tokens == 100 + 30 + 40
    assert u.total_tokens == 100 + 30 + 40 + 20


def test_usage_round_trips_through_a_dict_and_missing_cache_fields_count_as_zero():
    u = Usage(5, 6, 7, 8)
    assert Usage.from_dict(json.loads(json.dumps(u.to_dict()))) == u
    assert Usage.from_dict({"input_tokens": 3, "output_tokens": 4}) == Usage(3, 4, 0, 0)


def test_a_reply_round_trips_through_a_dict():
    r = Reply([text_block("hi"), tool_use_block("t1", "x", {"a": 1})], "tool_use",
              Usage(3, 4), "m")
    assert Reply.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    assert r.text == "hi" and [b["id"] for b in r.tool_uses] == ["t1"]


# ---------------------------------------------------------------- estimate_tokens

@pytest.mark.parametrize("text", ["", "a", "abcd", "abcde", "x" * 401])
def test_a_string_is_estimated_at_its_characters_over_four_rounded_up(text):
    assert estimate_tokens(text) == math.ceil(len(text) / 4)


def test_none_is_estimated_at_zero_tokens():
    assert estimate_tokens(None) == 0


def test_a_json_value_is_estimated_from_its_compact_json_text():
    value = {"order_id": "A123", "items": [1, 2]}
    compact = '{"order_id":"A123","items":[1,2]}'
    assert estimate_tokens(value) == math.ceil(len(compact) / 4)


def test_non_ascii_text_counts_characters_not_escapes():
    assert estimate_tokens({"k": "₹₹₹₹"}) == math.ceil(len('{"k":"₹₹₹₹"}') / 4)


# ---------------------------------------------------------------- ScriptedLLM

def test_a_list_script_is_replayed_in_order_and_counts_calls():
    llm = ScriptedLLM(["first", "second"])
    assert call(llm, [user_message("q")]).text == "first"
    assert call(llm, [user_message("q")]).text == "second"
    assert llm.calls == 2


def test_a_string_reply_is_an_end_turn_answer_and_a_block_list_with_a_call_is_tool_use():
    llm = ScriptedLLM(["done", [tool_use_block("", "get_order", {"order_id": "A1"})],
                       [text_block("just text")]])
    assert call(llm, [user_message("q")]).stop_reason == "end_turn"
    assert call(llm, [user_message("q")]).stop_reason == "tool_use"
    assert call(llm, [user_message("q")]).stop_reason == "end_turn"


def test_tool_calls_without_an_id_get_one_from_the_call_number_and_block_position():
    llm = ScriptedLLM([tool_reply(("a", {}), ("b", {}), text="thinking"),
                       tool_reply(("c", {}))])
    first = call(llm, [user_message("q")])
    second = call(llm, [user_message("q")])
    # block 1 is the text, so the calls are blocks 2 and 3 of call 1
    assert [b["id"] for b in first.tool_uses] == ["toolu_01_2", "toolu_01_3"]
    assert [b["id"] for b in second.tool_uses] == ["toolu_02_1"]


def test_an_id_given_in_the_script_is_kept():
    llm = ScriptedLLM([tool_reply(("a", {}, "toolu_mine"))])
    assert call(llm, [user_message("q")]).tool_uses[0]["id"] == "toolu_mine"


def test_a_scripted_reply_is_not_mutated_when_it_gets_an_id():
    reply = tool_reply(("a", {}))
    llm = ScriptedLLM([reply])
    call(llm, [user_message("q")])
    assert reply.content[0]["id"] == ""


def test_reported_input_tokens_are_the_estimate_of_system_tools_and_every_message():
    system = "You are careful."
    messages = [user_message("What does order A123 cost?")]
    llm = ScriptedLLM([tool_reply(("get_order", {"order_id": "A123"})), "It costs 5900."])
    first = call(llm, messages, system=system)
    expected = (estimate_tokens(system) + estimate_tokens(TOOLS)
                + estimate_tokens(messages[0]))
    assert first.usage.input_tokens == expected
    assert first.usage.output_tokens == estimate_tokens(first.content)

    # the caller appends to the same list; the count follows it incrementally
    messages.append({"role": "assistant", "content": first.content})
    messages.append(user_message([{"type": "tool_result", "tool_use_id": "toolu_01_1",
                                   "content": "x" * 100, "is_error": False}]))
    second = call(llm, messages, system=system)
    assert second.usage.input_tokens == (estimate_tokens(system) + estimate_tokens(TOOLS)
                                         + sum(estimate_tokens(m) for m in messages))


def test_a_different_message_list_is_counted_from_scratch():
    llm = ScriptedLLM(["a", "b"])
    long = [user_message("x" * 400), user_message("y" * 400)]
    call(llm, long)
    short = [user_message("z")]
    assert call(llm, short).usage.input_tokens == (estimate_tokens(TOOLS)
                                                   + estimate_tokens(short[0]))


def test_a_policy_function_sees_the_message_list_it_is_called_with():
    seen = []

    def policy(messages):
        seen.append(len(messages))
        return f"reply to {len(messages)} messages"

    llm = ScriptedLLM(policy)
    assert call(llm, [user_message("a"), user_message("b")]).text == "reply to 2 messages"
    assert seen == [2]


def test_asking_for_more_replies_than_scripted_fails_loudly_naming_the_call():
    llm = ScriptedLLM(["only one"], name="order model")
    call(llm, [user_message("q")])
    with pytest.raises(ScriptExhausted) as err:
        call(llm, [user_message("q")])
    message = str(err.value)
    assert "order model" in message
    assert "scripted with 1 reply and" in message and "reply 2" in message


def test_a_reply_of_the_wrong_type_is_a_clear_type_error():
    with pytest.raises(TypeError, match="must be a Reply, a string or a list of blocks"):
        call(ScriptedLLM([42]), [user_message("q")])


def test_text_reply_and_tool_reply_build_scripted_replies():
    assert text_reply("hi").stop_reason == "end_turn"
    r = tool_reply(("get_order", {"order_id": "A1"}, "t9"), text="let me look")
    assert r.stop_reason == "tool_use" and r.text == "let me look"
    assert r.tool_uses == [tool_use_block("t9", "get_order", {"order_id": "A1"})]


def test_thinking_tokens_are_a_part_of_the_output_that_adds_up_and_round_trips():
    from primer.loop.model import Usage, cost_usd

    u = Usage(100, 40, thinking_tokens=30) + Usage(50, 10, thinking_tokens=5)
    assert (u.output_tokens, u.thinking_tokens, u.total_tokens) == (50, 35, 200)
    assert Usage.from_dict(u.to_dict()) == u
    assert "thinking_tokens" not in Usage(1, 2).to_dict()  # (old traces read the same)
    assert cost_usd(u) == cost_usd(Usage(150, 50))  # billed as output: never added twice
    with pytest.raises(ValueError, match="usage.thinking_tokens"):
        Usage.from_dict({"output_tokens": 1, "thinking_tokens": -1})
