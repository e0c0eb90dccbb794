"""The local server applies SDK 2.x's request options as the API does: output_config's
effort and format, and server-side compaction (its trigger, its block, what it drops)."""

from __future__ import annotations

import anthropic
import pytest

from primer.loop.model import ScriptedLLM
from primer.providers.api_options import (
    after_compaction,
    format_problem,
    output_config,
    requested_compaction,
    summary_of,
    trigger_tokens,
)
from primer.providers.fake_server import FakeModelServer

USER = [{"role": "user", "content": "hello"}]


def send(**fields):
    with FakeModelServer(ScriptedLLM(['{"n": 1}'])) as srv:
        c = anthropic.Anthropic(api_key="k", base_url=srv.base_url, max_retries=0)
        return c.messages.create(model="claude-test", max_tokens=64, messages=USER, **fields)


@pytest.mark.parametrize("effort", ["low", "medium", "high", "xhigh", "max"])
def test_the_server_accepts_every_effort_and_answers_well_formed(effort):
    reply = send(output_config={"effort": effort})
    assert reply.stop_reason == "end_turn" and reply.content[0].text == '{"n": 1}'


@pytest.mark.parametrize("config, field", [
    ({"effort": "extreme"}, "output_config.effort"),
    ({"format": {"type": "json", "schema": {}}}, "output_config.format"),
    ({"colour": "blue"}, "output_config.colour"),
])
def test_a_malformed_output_config_gets_the_apis_400_naming_the_field(config, field):
    with pytest.raises(anthropic.BadRequestError, match=field.replace(".", r"\.")):
        send(output_config=config)


def test_a_structured_answer_is_checked_against_its_schema():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    assert send(output_config={"format": {"type": "json_schema", "schema": schema}})
    assert format_problem('{"n": 1}', schema) is None
    assert format_problem('{"n": "1"}', schema) == "n: '1' is not of type 'integer'"
    assert format_problem("one", schema).startswith("the answer is not JSON")
    assert output_config({}) is None


def test_a_compaction_trigger_must_count_input_tokens():
    with pytest.raises(ValueError, match=r"edits\.0\.trigger"):
        requested_compaction({"context_management": {"edits": [
            {"type": "compact_20260112", "trigger": {"type": "turns", "value": 3}}]}})
    edit = requested_compaction({"context_management": {"edits": [{"type": "compact_20260112"}]}})
    assert trigger_tokens(edit) == 150_000
    assert requested_compaction({}) is None


def test_messages_before_the_last_compaction_block_are_dropped_and_its_summary_stands_in():
    messages = [{"role": "user", "content": "Find the weather."},
                {"role": "assistant", "content": [{"type": "compaction", "content": "old"}]},
                {"role": "user", "content": "more"},
                {"role": "assistant", "content": [{"type": "compaction", "content": "newer"},
                                                  {"type": "text", "text": "Working."}]},
                {"role": "user", "content": "go on"}]
    assert after_compaction(messages) == [
        {"role": "user", "content": [{"type": "text", "text": "newer"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Working."}]},
        {"role": "user", "content": "go on"}]
    assert after_compaction(messages[:1]) == messages[:1]


def test_the_stand_in_summary_keeps_the_task_and_the_tools_called():
    text = summary_of([{"role": "user", "content": "Weather in Oslo?"},
                       {"role": "assistant", "content": [
                           {"type": "tool_use", "id": "t1", "name": "weather", "input": {}}]}])
    assert text == ("Summary of 2 earlier messages. The task: Weather in Oslo? "
                    "Tools called so far: weather.")
