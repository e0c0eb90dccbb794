"""The figures lesson 13 states about retries, caching past the minimum prefix, the cache's
lifetime during an approval wait, the tool runner's threads and its ToolError, computed again."""

from __future__ import annotations

from dataclasses import replace

import anthropic
import httpx
import pytest

from primer.harness.production import run_production
from primer.loop.model import TransientModelError, Usage, cost_usd
from primer.loop.tools import tool
from primer.providers.claude import (
    DEFAULT_MODEL,
    MIN_CACHEABLE_TOKENS,
    ClaudeLLM,
    model_error,
    sdk_tools,
)
from primer.providers.fake_server import FakeModelServer
from primer.scenarios import get_demo, hr
from primer.scenarios.handbook import system_with_handbook

pto = get_demo("pto")
KEY = "sk-ant-local-placeholder-key"


def client(server):
    return anthropic.Anthropic(api_key=KEY, base_url=server.base_url, max_retries=0)


@pytest.mark.parametrize("status, headers", [
    (400, None), (401, None), (404, None), (408, None), (409, None), (429, None), (500, None),
    (529, None), (400, {"x-should-retry": "true"}), (503, {"x-should-retry": "false"})])
def test_the_retry_table_rows_agree_with_the_sdk(status, headers):
    response = httpx.Response(status, headers=headers or {},
                              request=httpx.Request("POST", "https://api.anthropic.com"))
    error = anthropic.APIStatusError("error", response=response, body=None)
    sdk = anthropic.Anthropic(api_key=KEY)
    assert isinstance(model_error(error), TransientModelError) is sdk._should_retry(response)


def _cached_run(**options):
    with FakeModelServer(pto.make_llm()) as server:
        return run_production(ClaudeLLM(client=client(server), **options), pto.task,
                              pto.make_tools(),
                              system=system_with_handbook(pto.system), config=pto.config)


def test_the_cached_prefix_of_3228_tokens_is_above_the_default_models_2048_minimum():
    cached = _cached_run(cache_prefix=True)
    prefix = cached.steps[0].usage.cache_creation_input_tokens
    assert (prefix, MIN_CACHEABLE_TOKENS[DEFAULT_MODEL]) == (3_228, 2_048)
    assert cached.steps[1].usage.cache_read_input_tokens == prefix


def test_an_expired_5_minute_cache_costs_more_than_none_and_the_1_hour_cache_saves_0_006456():
    prefix = _cached_run(cache_prefix=True).steps[0].usage.cache_creation_input_tokens
    p5 = pto.config.prices
    p1h = replace(p5, cache_write_multiplier=2.0)
    write = Usage(0, 0, cache_creation_input_tokens=prefix)
    read = Usage(0, 0, cache_read_input_tokens=prefix)
    none = 2 * cost_usd(Usage(prefix, 0), p5)
    fresh = cost_usd(write, p5) + cost_usd(read, p5)
    expired = 2 * cost_usd(write, p5)
    hour = cost_usd(write, p1h) + cost_usd(read, p1h)
    assert [round(x, 6) for x in (none, fresh, expired, hour)] == [
        0.032280, 0.021789, 0.040350, 0.033894]
    assert round(expired - hour, 6) == 0.006456 and expired > none


def _runner(llm, tools, **options):
    with FakeModelServer(llm) as server:
        replies = list(client(server).beta.messages.tool_runner(
            model=DEFAULT_MODEL, max_tokens=1024, system=pto.system, tools=sdk_tools(tools),
            messages=[{"role": "user", "content": pto.task}], **options))
        return replies, server.model_requests


def test_thread_false_sends_every_message_and_our_server_bills_both_ways_alike():
    threaded, t_requests = _runner(pto.make_llm(), pto.make_tools())
    unthreaded, u_requests = _runner(pto.make_llm(), pto.make_tools(), thread=False)
    assert [len(r.body["messages"]) for r in t_requests] == [1, 1]
    assert [len(r.body["messages"]) for r in u_requests] == [1, 3]
    assert "thread" not in u_requests[1].body
    assert [r.usage.input_tokens for r in threaded] == [r.usage.input_tokens
                                                         for r in unthreaded] == [260, 485]


def test_the_runner_sends_a_tool_error_as_its_message_and_a_bug_as_its_repr():
    _, requests = _runner(hr.make_llm("bad_date"), pto.make_tools())
    sent = next(b for b in requests[1].body["messages"][0]["content"] if b.get("is_error"))
    assert sent["content"] == ("as_of must be YYYY-MM-DD, a real date such as '2026-09-25' "
                               "(got '25/09/2026').")

    @tool
    def get_pto_balance(employee: str, as_of: str) -> str:
        """Days of PTO left for an employee as of a date (YYYY-MM-DD)."""
        return {"alice": 12}[employee.upper()]

    broken = [get_pto_balance if t.name == "get_pto_balance" else t for t in pto.make_tools()]
    _, requests = _runner(hr.make_llm(), broken, max_iterations=6)
    sent = next(b for b in requests[1].body["messages"][0]["content"] if b.get("is_error"))
    assert sent["content"] == "KeyError('ALICE')"


def test_the_by_hand_request_is_one_the_api_accepts_and_the_sdk_sends_the_same_fields():
    from primer.harness.request_check import request_problems
    tools = [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
             for t in pto.make_tools()]
    request = {"model": DEFAULT_MODEL, "max_tokens": 1024, "system": pto.system,
               "messages": [{"role": "user", "content": pto.task}], "tools": tools}
    assert request_problems(request) == []
    with FakeModelServer(pto.make_llm()) as server:
        pto.run(llm=ClaudeLLM(client=client(server)))
        assert sorted(server.model_requests[0].body) == sorted(request)


def test_the_13b_quiz_number_is_the_last_running_count_of_output_tokens():
    from notebook_cells import solution

    from primer.course.quiz import load_quiz
    from primer.harness.streaming import wire_events
    message = {"id": "m", "type": "message", "role": "assistant", "model": "m",
               "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
               "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 83}}
    events = wire_events(message)
    events[0]["message"]["usage"]["output_tokens"] = 1
    at = next(i for i, e in enumerate(events) if e["type"] == "message_delta")
    events[at:at] = [{"type": "message_delta", "delta": {"stop_reason": None},
                      "usage": {"output_tokens": n}} for n in (27, 55)]
    usage = solution("13b", "outcome")(events)["usage"]
    assert usage["output_tokens"] == 83 == load_quiz("13b").questions[1].number
    assert 1 + 27 + 55 + 83 == 166 and 27 + 55 + 83 == 165    # the wrong answers' sums
