"""The local Messages API server answers in the wire format the SDKs read, raw over HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from primer.loop.model import Reply, ScriptedLLM, Usage, estimate_tokens, text_reply, tool_reply
from primer.providers.fake_server import FakeModelServer, message_json


def post(srv: FakeModelServer, path: str, body: object, headers: dict | None = None):
    req = urllib.request.Request(srv.base_url + path, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json", **(headers or {})},
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


BODY = {"model": "claude-test", "max_tokens": 100,
        "messages": [{"role": "user", "content": "hello"}]}


def test_a_reply_carries_every_field_the_sdk_requires():
    with FakeModelServer(ScriptedLLM([text_reply("hi")])) as srv:
        status, _, reply = post(srv, "/v1/messages", BODY)
    assert status == 200
    assert set(reply) >= {"id", "type", "role", "model", "content", "stop_reason",
                          "stop_sequence", "usage"}
    assert (reply["type"], reply["role"], reply["model"]) == ("message", "assistant",
                                                              "claude-test")
    assert reply["content"] == [{"type": "text", "text": "hi"}]
    assert set(reply["usage"]) >= {"input_tokens", "output_tokens",
                                   "cache_creation_input_tokens", "cache_read_input_tokens"}


def test_the_query_string_is_ignored_and_extra_fields_are_tolerated():
    with FakeModelServer(ScriptedLLM([text_reply("hi")])) as srv:
        status, _, reply = post(srv, "/v1/messages?beta=true",
                                {**BODY, "metadata": {"user_id": "u1"}, "temperature": 0.2})
        assert srv.requests[0].path == "/v1/messages"
        assert srv.requests[0].query == "beta=true"
    assert status == 200 and reply["stop_reason"] == "end_turn"


@pytest.mark.parametrize(("status", "error_type"), [(429, "rate_limit_error"),
                                                    (529, "overloaded_error"),
                                                    (400, "invalid_request_error")])
def test_scripted_errors_come_back_with_their_status_and_the_apis_error_body(status,
                                                                            error_type):
    with FakeModelServer(ScriptedLLM([text_reply("after the error")])) as srv:
        srv.fail_next(status, retry_after_s=0.25)
        got, headers, body = post(srv, "/v1/messages", BODY)
        again, _, reply = post(srv, "/v1/messages", BODY)
    assert got == status
    assert body["type"] == "error" and body["error"]["type"] == error_type
    assert {k.lower(): v for k, v in headers.items()}["retry-after-ms"] == "250"
    assert again == 200 and reply["content"][0]["text"] == "after the error"


def test_a_tool_use_without_its_tool_result_in_the_next_message_gets_the_apis_400():
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}},
                    {"type": "tool_use", "id": "toolu_b", "name": "f", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "ok"}]}]
    with FakeModelServer(ScriptedLLM([text_reply("never")])) as srv:
        status, _, body = post(srv, "/v1/messages", {**BODY, "messages": messages})
    assert status == 400
    assert "toolu_b" in body["error"]["message"]
    assert "tool_result" in body["error"]["message"]


def test_a_tool_result_answering_no_tool_use_is_rejected_too():
    messages = [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_ghost", "content": "?"}]}]
    with FakeModelServer(ScriptedLLM([text_reply("never")])) as srv:
        status, _, body = post(srv, "/v1/messages", {**BODY, "messages": messages})
    assert status == 400 and "toolu_ghost" in body["error"]["message"]


def test_a_missing_required_field_is_a_400_naming_the_field():
    with FakeModelServer(ScriptedLLM([text_reply("never")])) as srv:
        status, _, body = post(srv, "/v1/messages", {"model": "m", "messages": []})
    assert status == 400 and body["error"]["message"].startswith("max_tokens")


def test_count_tokens_gives_the_same_prompt_size_the_scripted_model_reports():
    tools = [{"name": "f", "description": "does f", "input_schema": {"type": "object"}}]
    body = {**BODY, "system": "be brief", "tools": tools}
    with FakeModelServer(ScriptedLLM([text_reply("hi")])) as srv:
        _, _, counted = post(srv, "/v1/messages/count_tokens", body)
        _, _, reply = post(srv, "/v1/messages", body)
    expected = (estimate_tokens("be brief") + estimate_tokens(tools)
                + estimate_tokens(BODY["messages"][0]))
    assert counted == {"input_tokens": expected}
    assert reply["usage"]["input_tokens"] == expected


def test_the_api_key_is_never_recorded():
    with FakeModelServer(ScriptedLLM([text_reply("hi")])) as srv:
        post(srv, "/v1/messages", BODY, {"x-api-key": "sk-ant-do-not-keep",
                                        "authorization": "Bearer sk-do-not-keep"})
        recorded = srv.requests[0]
    assert recorded.headers["x-api-key"] == "<redacted>"
    assert recorded.headers["authorization"] == "<redacted>"
    assert "do-not-keep" not in repr(recorded)


def test_a_thread_continue_adds_the_new_messages_to_the_history_the_server_holds():
    seen: list[list] = []

    def policy(messages):
        seen.append(messages)
        if len(messages) == 1:
            return tool_reply(("f", {}, "toolu_1"))
        return text_reply("done")

    with FakeModelServer(ScriptedLLM(policy)) as srv:
        _, _, first = post(srv, "/v1/messages", {**BODY, "thread": {"type": "create"}})
        result = {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}]}
        status, _, second = post(srv, "/v1/messages", {
            "model": "claude-test", "max_tokens": 100, "messages": [result],
            "thread": {"type": "continue", "previous_message_id": first["id"]}})
        lost, _, body = post(srv, "/v1/messages", {
            "model": "claude-test", "max_tokens": 100, "messages": [],
            "thread": {"type": "continue", "previous_message_id": "msg_unknown"}})
    assert status == 200 and second["content"][0]["text"] == "done"
    assert [m["role"] for m in seen[1]] == ["user", "assistant", "user"]
    assert lost == 404 and body["error"]["details"]["error_code"] == "thread_not_found"


def test_cache_control_on_the_tools_turns_the_prefix_into_cache_writes_then_reads():
    tools = [{"name": "f", "description": "does f " * 20, "input_schema": {"type": "object"},
              "cache_control": {"type": "ephemeral"}}]
    plain = [{k: v for k, v in tools[0].items() if k != "cache_control"}]
    with FakeModelServer(ScriptedLLM([text_reply("a"), text_reply("b")])) as srv:
        _, _, first = post(srv, "/v1/messages", {**BODY, "tools": tools})
        _, _, second = post(srv, "/v1/messages", {**BODY, "tools": tools})
    prefix = estimate_tokens(plain)
    assert first["usage"]["cache_creation_input_tokens"] == prefix
    assert first["usage"]["cache_read_input_tokens"] == 0
    assert second["usage"]["cache_read_input_tokens"] == prefix
    assert second["usage"]["cache_creation_input_tokens"] == 0
    assert (first["usage"]["input_tokens"] + prefix
            == second["usage"]["input_tokens"] + prefix)


def test_message_json_keeps_the_reply_as_it_was():
    reply = Reply([{"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}],
                  "tool_use", Usage(3, 4))
    wire = message_json(reply, "msg_1", "m")
    assert wire["content"] == reply.content
    assert wire["usage"]["input_tokens"] == 3 and wire["usage"]["output_tokens"] == 4


def test_fail_next_refuses_a_status_that_is_not_an_error():
    with pytest.raises(ValueError, match="error status"):
        FakeModelServer(ScriptedLLM([])).fail_next(200)


def test_a_failing_script_is_answered_with_a_500_and_kept_for_the_test_to_read():
    def broken(messages):
        raise KeyError("no such order")

    with FakeModelServer(ScriptedLLM(broken)) as srv:
        status, headers, body = post(srv, "/v1/messages", BODY)
    assert status == 500 and "KeyError" in body["error"]["message"]
    assert {k.lower(): v for k, v in headers.items()}["x-should-retry"] == "false"
    assert isinstance(srv.failures[0], KeyError)
