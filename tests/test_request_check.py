"""request_check says no to what the Messages API rejects, and yes to what it accepts."""

from __future__ import annotations

import pytest

from primer.harness.request_check import (
    InvalidRequest,
    check_request,
    messages_problems,
    request_problems,
)

USE = {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {"q": 1}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_a", "content": "ok", "is_error": False}
ASK = {"role": "user", "content": "hi"}
CALL = {"role": "assistant", "content": [{"type": "text", "text": "let me look"}, USE]}
ANSWER = {"role": "user", "content": [RESULT]}
BODY = {"model": "claude-x", "max_tokens": 100, "messages": [ASK, CALL, ANSWER],
        "system": "be brief", "tools": [{"name": "f", "description": "F.",
                                         "input_schema": {"type": "object"}}]}


def test_a_valid_tool_round_trip_has_no_problems():
    assert request_problems(BODY) == []
    check_request(BODY)


@pytest.mark.parametrize("messages", [
    [ASK, CALL],  # the final assistant turn: a prefill or a pause_turn continuation
    [ASK, CALL, {"role": "user", "content": [RESULT, {"type": "text", "text": "and?"}]}],
    [ASK, {"role": "user", "content": "more"}],  # consecutive user turns are combined
    [ASK, {"role": "assistant", "content": ""}],  # an empty final assistant message
    [ASK, CALL, ANSWER, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        {"type": "text", "text": "done", "citations": None}]}],
], ids=["final-call-unanswered", "text-after-results", "two-user-turns", "empty-final",
        "thinking"])
def test_what_the_api_accepts_passes(messages):
    assert messages_problems(messages) == []


@pytest.mark.parametrize("messages, says", [
    ([ASK, CALL, {"role": "user", "content": "next"}],
     "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_a"),
    ([ASK, {"role": "assistant", "content": [{**USE, "input": "{}"}]}, ANSWER],
     "messages.1.content.0.input: Input should be a valid dictionary"),
    ([ASK, {"role": "assistant", "content": []}, {"role": "user", "content": "x"}],
     "all messages must have non-empty content except for the optional final assistant"),
    ([ASK, CALL, {"role": "user", "content": [{**RESULT, "content": 5}]}],
     "messages.2.content.0.content: Input should be a valid string or list of content"),
    ([ASK, CALL, {"role": "user", "content": [{"type": "text", "text": "x"}, RESULT]}],
     "`tool_result` blocks must come first"),
    ([{"role": "user", "content": [RESULT]}], "unexpected `tool_use_id` found in `tool_result`"),
    ([ASK, CALL, {"role": "user", "content": [RESULT, RESULT]}], "answered twice: toolu_a"),
    ([ASK, CALL, ANSWER, CALL, {"role": "user", "content": [RESULT]}],
     "`tool_use` ids must be unique"),
    ([{"role": "user", "content": [{"type": "text", "text": ""}]}],
     "text content blocks must be non-empty"),
    ([{"role": "user", "content": [{"type": "text", "text": " \n"}]}],
     "text content blocks must contain non-whitespace text"),
    ([{"role": "user", "content": [{"type": "text", "text": "x", "extra": 1}]}],
     "messages.0.content.0.extra: Extra inputs are not permitted"),
    ([ASK, CALL, {"role": "user", "content": [{**RESULT, "is_error": "yes"}]}],
     "is_error: Input should be a valid boolean"),
    ([{"role": "user", "content": [USE]}], "a tool_use block can only be in an assistant"),
    ([ASK, {"role": "assistant", "content": [RESULT]}], "can only be in a user message"),
    ([{"role": "system", "content": "x"}], "role: Input should be 'user' or 'assistant'"),
    ([{"role": "user", "content": "\ud800"}], "lone surrogate"),
    ([ASK, {"role": "assistant", "content": "answer "}], "cannot end with trailing whitespace"),
    ([{"role": "user", "content": [{"type": "nonsense"}]}], "Input tag 'nonsense' is not one of"),
    ([], "at least one message is required"),
], ids=["unanswered", "input-not-object", "empty-assistant", "result-content-int",
        "results-after-text", "stray-result", "answered-twice", "duplicate-id", "empty-text",
        "whitespace-text", "extra-field", "is-error-string", "tool-use-from-user",
        "result-from-assistant", "role", "surrogate", "trailing-whitespace", "unknown-type",
        "no-messages"])
def test_what_the_api_rejects_is_named(messages, says):
    problems = messages_problems(messages)
    assert problems and says in problems[0], problems


@pytest.mark.parametrize("change, says", [
    ({"max_tokens": 0}, "max_tokens"), ({"model": ""}, "model"), ({"system": 5}, "system"),
    ({"tools": [{"name": "a b", "input_schema": {"type": "object"}}]}, "tools.0.name"),
    ({"tools": [{"name": "f", "input_schema": {}}] * 2}, "input_schema"),
], ids=["max-tokens", "model", "system", "tool-name", "schema"])
def test_a_bad_request_field_is_named(change, says):
    with pytest.raises(InvalidRequest, match=says):
        check_request({**BODY, **change})


def test_a_thread_history_can_be_checked_instead_of_the_bodys_messages():
    assert request_problems({**BODY, "messages": [ANSWER]}, messages=[ASK, CALL, ANSWER]) == []
    assert request_problems({"model": "m", "messages": [ASK]}, count_tokens=True) == []
