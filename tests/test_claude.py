"""ClaudeLLM drives the real ``anthropic`` client against the local Messages API server."""

from __future__ import annotations

import json
import logging
import typing

import anthropic
import pytest
from anthropic.types import StopReason

from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.model import (
    STOP_REASONS,
    PermanentModelError,
    PromptTooLong,
    Reply,
    ScriptedLLM,
    TransientModelError,
    cost_usd,
    text_reply,
    tool_reply,
)
from primer.loop.state import StopCause
from primer.loop.tools import tool
from primer.providers.claude import (
    API_KEY_ENV_VAR,
    DEFAULT_MODEL,
    MODEL_ENV_VAR,
    ClaudeLLM,
    default_model,
    reply_from_message,
)
from primer.providers.fake_server import FakeModelServer

KEY = "sk-ant-test-0123456789-never-print-me"
USER = [{"role": "user", "content": "hello"}]


def claude(srv: FakeModelServer, **kwargs) -> ClaudeLLM:
    client = anthropic.Anthropic(api_key=KEY, base_url=srv.base_url,
                                 max_retries=kwargs.pop("max_retries", 0))
    return ClaudeLLM(client=client, **kwargs)


calls: list[str] = []


@tool
def lookup(city: str) -> str:
    """Look up the weather in a city. Use it for any weather question."""
    calls.append(city)
    return f"sunny in {city}"


@pytest.fixture(autouse=True)
def _fresh_calls():
    calls.clear()


def test_the_stop_reasons_we_handle_are_exactly_the_ones_the_sdk_defines():
    from anthropic.types.beta import BetaStopReason

    assert set(STOP_REASONS) == set(typing.get_args(StopReason)) | {"compaction"}
    assert set(STOP_REASONS) == set(typing.get_args(BetaStopReason))


def test_a_call_sends_system_messages_tool_definitions_and_max_tokens():
    defs = [lookup.definition()] if hasattr(lookup, "definition") else None
    with FakeModelServer(ScriptedLLM([text_reply("hi")])) as srv:
        llm = claude(srv, model="claude-test")
        tools = defs or [{"name": "lookup", "description": "d",
                          "input_schema": {"type": "object"}}]
        reply = llm(system="be brief", messages=USER, tools=tools, max_tokens=77)
        body = srv.requests[0].body
    assert body["system"] == "be brief"
    assert body["messages"] == USER
    assert body["tools"] == tools and "input_schema" in body["tools"][0]
    assert body["max_tokens"] == 77 and body["model"] == "claude-test"
    assert reply == Reply([{"type": "text", "text": "hi"}], "end_turn", reply.usage,
                          "claude-test")


@pytest.mark.parametrize("stop_reason", typing.get_args(StopReason))
def test_every_stop_reason_the_sdk_defines_reaches_the_reply_unchanged(stop_reason):
    with FakeModelServer(ScriptedLLM([text_reply("x", stop_reason=stop_reason)])) as srv:
        reply = claude(srv)(system="", messages=USER, tools=[], max_tokens=10)
    assert reply.stop_reason == stop_reason


def test_a_run_answers_every_tool_use_with_one_tool_result_in_one_user_message():
    script = [tool_reply(("lookup", {"city": "Paris"}), ("lookup", {"city": "Oslo"}),
                         ("lookup", {"city": "Lima"})),
              text_reply("all sunny")]
    with FakeModelServer(ScriptedLLM(script)) as srv:
        result = run_production(claude(srv), "weather in three cities?", [lookup])
        second = srv.requests[1].body["messages"]
    assert result.stop_cause is StopCause.END_TURN and result.final_text == "all sunny"
    asked = [b["id"] for b in second[1]["content"] if b["type"] == "tool_use"]
    answer = second[2]
    assert len(second) == 3 and answer["role"] == "user"
    assert [b["tool_use_id"] for b in answer["content"]] == asked
    assert all(b["type"] == "tool_result" for b in answer["content"])
    assert sorted(calls) == ["Lima", "Oslo", "Paris"]


def test_a_cut_off_reply_never_runs_its_tool_call():
    cut = tool_reply(("lookup", {"city": "Par"}), stop_reason="max_tokens")
    with FakeModelServer(ScriptedLLM([cut])) as srv:
        result = run_production(claude(srv), "weather?", [lookup])
        sent = len(srv.model_requests)
    assert result.stop_cause is StopCause.MAX_TOKENS
    assert calls == [] and sent == 1
    assert result.final_text is None


def test_a_refusal_stops_the_run_and_its_text_is_not_taken_as_an_answer():
    with FakeModelServer(ScriptedLLM([text_reply("I can't help", stop_reason="refusal")])) as srv:
        result = run_production(claude(srv), "something bad", [lookup])
    assert result.stop_cause is StopCause.REFUSAL and result.final_text is None


def test_pause_turn_continues_by_sending_the_paused_reply_back():
    script = [text_reply("searching...", stop_reason="pause_turn"), text_reply("found it")]
    with FakeModelServer(ScriptedLLM(script)) as srv:
        result = run_production(claude(srv), "search", [lookup])
        resumed = srv.requests[1].body["messages"]
    assert result.stop_cause is StopCause.END_TURN and result.final_text == "found it"
    assert resumed[-1]["role"] == "assistant"
    assert resumed[-1]["content"] == [{"type": "text", "text": "searching..."}]


def test_model_context_window_exceeded_stops_on_the_context_window():
    script = [text_reply("", stop_reason="model_context_window_exceeded")]
    with FakeModelServer(ScriptedLLM(script)) as srv:
        result = run_production(claude(srv), "long", [lookup])
    assert result.stop_cause is StopCause.CONTEXT_WINDOW


def test_a_prompt_too_long_400_is_a_request_too_large_not_a_cut_off_reply():
    with FakeModelServer(ScriptedLLM([])) as srv:
        srv.fail_next(400, message="prompt is too long: 210000 tokens > 200000 maximum")
        with pytest.raises(PromptTooLong, match="does not fit the model's context window"):
            claude(srv)(system="", messages=[{"role": "user", "content": "long"}], tools=[],
                        max_tokens=64)


def test_a_prompt_too_long_400_stops_the_run_on_the_context_window_with_no_step():
    with FakeModelServer(ScriptedLLM([])) as srv:
        srv.fail_next(400, message="prompt is too long: 210000 tokens > 200000 maximum")
        result = run_production(claude(srv), "long", [lookup])
    assert result.stop_cause is StopCause.CONTEXT_WINDOW
    assert result.steps == []  # no reply was made: the request was refused
    assert "refused model call 1" in result.stop_detail
    assert "210000 tokens > 200000 maximum" in result.stop_detail


def test_an_unknown_stop_reason_stops_the_run_with_model_error_as_the_docstring_says():
    script = [tool_reply(("lookup", {"city": "Paris"}), stop_reason="some_new_reason")]
    with FakeModelServer(ScriptedLLM(script)) as srv:
        result = run_production(claude(srv), "weather?", [lookup])
    assert result.stop_cause is StopCause.MODEL_ERROR
    assert "unknown stop_reason 'some_new_reason'" in result.stop_detail
    assert calls == []  # its tool call did not run
    assert "stops on it with ``model_error``" in " ".join(reply_from_message.__doc__.split())


def test_usage_counts_cache_writes_and_reads_and_the_dollars_include_them():
    script = [tool_reply(("lookup", {"city": "Paris"})), text_reply("sunny")]
    with FakeModelServer(ScriptedLLM(script)) as srv:
        result = run_production(claude(srv, cache_prefix=True), "weather?", [lookup],
                                system="You answer weather questions. " * 10)
        first = srv.requests[0].body
    u1, u2 = result.steps[0].usage, result.steps[1].usage
    assert first["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert u1.cache_creation_input_tokens > 0 and u1.cache_read_input_tokens == 0
    assert u2.cache_read_input_tokens == u1.cache_creation_input_tokens
    assert result.usage == u1 + u2
    assert result.cost_usd == pytest.approx(cost_usd(u1) + cost_usd(u2))
    assert result.usage.total_tokens == u1.total_tokens + u2.total_tokens


@pytest.mark.parametrize("status", [429, 529])
def test_a_rate_limit_or_overload_raises_a_transient_error_with_the_servers_wait(status):
    with FakeModelServer(ScriptedLLM([])) as srv:
        srv.fail_next(status, retry_after_s=0.01)
        with pytest.raises(TransientModelError) as caught:
            claude(srv)(system="", messages=USER, tools=[], max_tokens=10)
        sent = len(srv.requests)
    assert caught.value.retry_after_s == pytest.approx(0.01)
    assert str(status) in str(caught.value) and sent == 1  # the SDK did not retry itself


@pytest.mark.parametrize("status", [429, 529])
def test_the_loop_retries_429_and_529_through_the_real_client(status):
    waits: list[float] = []
    with FakeModelServer(ScriptedLLM([text_reply("made it")])) as srv:
        srv.fail_next(status, times=2, retry_after_s=0.01)
        config = AgentConfig(model_retries=2, sleep=waits.append)
        result = run_production(claude(srv), "hello", [lookup], config=config)
        sent = len(srv.model_requests)
    assert result.stop_cause is StopCause.END_TURN and result.final_text == "made it"
    assert sent == 3 and len(waits) == 2
    assert len(result.steps[0].model_retries) == 2


def test_the_sdks_own_retries_can_be_switched_back_on():
    with FakeModelServer(ScriptedLLM([text_reply("made it")])) as srv:
        srv.fail_next(429, times=2, retry_after_s=0.001)
        reply = claude(srv, max_retries=2)(system="", messages=USER, tools=[], max_tokens=10)
        retry_counts = [r.headers.get("x-stainless-retry-count") for r in srv.requests]
    assert reply.text == "made it"
    assert retry_counts == ["0", "1", "2"]


def test_a_bad_request_is_permanent_and_the_run_stops_with_model_error():
    with FakeModelServer(ScriptedLLM([])) as srv:
        srv.fail_next(400, message="tools.0.input_schema: Field required")
        with pytest.raises(PermanentModelError, match="input_schema"):
            claude(srv)(system="", messages=USER, tools=[], max_tokens=10)
        srv.fail_next(401, message="invalid x-api-key")
        result = run_production(claude(srv), "hello", [lookup], config=AgentConfig(model_retries=0))
    assert result.stop_cause is StopCause.MODEL_ERROR
    assert API_KEY_ENV_VAR in result.summary


def test_the_exact_budget_check_asks_count_tokens_before_each_call():
    config = AgentConfig(budget_check="before", token_budget=60, max_tokens=10)
    with FakeModelServer(ScriptedLLM([text_reply("too big to send")])) as srv:
        result = run_production(claude(srv, exact_count=True), "hello " * 50, [lookup],
                                config=config)
        paths = [r.path for r in srv.requests]
    assert paths == ["/v1/messages/count_tokens"]
    assert result.stop_cause is StopCause.TOKEN_BUDGET
    assert "prompt exactly" in result.stop_detail


def test_without_a_key_claude_llm_says_how_to_set_one(monkeypatch):
    monkeypatch.delenv(API_KEY_ENV_VAR, raising=False)
    with pytest.raises(PermanentModelError, match=API_KEY_ENV_VAR):
        ClaudeLLM()


def test_the_default_model_is_defined_once_and_overridable_by_the_environment(monkeypatch):
    monkeypatch.delenv(MODEL_ENV_VAR, raising=False)
    assert default_model() == DEFAULT_MODEL
    monkeypatch.setenv(MODEL_ENV_VAR, "claude-other")
    assert default_model() == "claude-other"
    with FakeModelServer(ScriptedLLM([text_reply("hi")])) as srv:
        claude(srv)(system="", messages=USER, tools=[], max_tokens=5)
        assert srv.requests[0].body["model"] == "claude-other"


def test_the_api_key_never_reaches_traces_results_logs_or_reprs(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    trace = tmp_path / "run.jsonl"
    script = [tool_reply(("lookup", {"city": "Paris"})), text_reply("sunny")]
    with FakeModelServer(ScriptedLLM(script)) as srv:
        srv.fail_next(429, retry_after_s=0.001)
        llm = claude(srv)
        result = run_production(llm, "weather?", [lookup], trace=trace,
                                config=AgentConfig(model_retries=1, sleep=lambda s: None))
        recorded = repr(srv.requests)
    assert result.stop_cause is StopCause.END_TURN
    places = {"trace": trace.read_text(), "result": json.dumps(result.to_dict()),
              "logs": caplog.text, "repr": repr(llm), "recorded requests": recorded}
    leaked = [name for name, text in places.items() if KEY in text]
    assert leaked == [], f"the API key leaked into: {leaked}"


def test_claude_llm_is_reachable_from_primer_without_an_eager_import():
    import primer
    import primer.providers.claude

    primer.__dict__.pop("ClaudeLLM", None)
    assert "ClaudeLLM" not in vars(primer)  # resolved by the lazy __getattr__
    assert primer.ClaudeLLM is primer.providers.claude.ClaudeLLM
    # tests/test_packaging.py checks, in a fresh interpreter, that the import pulls no SDK


def test_the_sdks_tool_runner_sends_only_new_messages_on_a_thread_but_usage_counts_all():
    from anthropic import beta_tool

    @beta_tool
    def weather(city: str) -> str:
        """Weather in a city.

        Args:
            city: the city
        """
        return f"sunny in {city}"

    script = [tool_reply(("weather", {"city": "Paris"}), ("weather", {"city": "Oslo"})),
              text_reply("both sunny")]
    with FakeModelServer(ScriptedLLM(script)) as srv:
        client = anthropic.Anthropic(api_key=KEY, base_url=srv.base_url, max_retries=0)
        runner = client.beta.messages.tool_runner(
            model="claude-test", max_tokens=100, tools=[weather], system="be brief",
            messages=[{"role": "user", "content": "weather in Paris and Oslo?"}])
        replies = list(runner)
        bodies = [r.body for r in srv.requests]
    assert [r.stop_reason for r in replies] == ["tool_use", "end_turn"]
    assert bodies[0]["thread"] == {"type": "create"}
    assert bodies[1]["thread"]["type"] == "continue"
    assert "system" not in bodies[1] and "tools" not in bodies[1]
    assert [m["role"] for m in bodies[1]["messages"]] == ["user"]  # only the results
    assert replies[1].usage.input_tokens > replies[0].usage.input_tokens


def test_the_default_model_is_not_one_the_installed_sdk_marks_as_deprecated():
    from anthropic._data import DEPRECATED_MODELS

    assert DEFAULT_MODEL not in DEPRECATED_MODELS, (
        f"{DEFAULT_MODEL} is deprecated ({DEPRECATED_MODELS[DEFAULT_MODEL]}); pick a current "
        f"model for DEFAULT_MODEL in primer/providers/claude.py")


def test_demo_claude_without_a_key_says_what_to_do_and_exits_2(monkeypatch, capsys):
    from primer.__main__ import main

    monkeypatch.delenv(API_KEY_ENV_VAR, raising=False)
    assert main(["demo", "pto", "--claude"]) == 2
    err = capsys.readouterr().err
    assert API_KEY_ENV_VAR in err and "offline" in err.lower()
    assert "Traceback" not in err


def test_demo_claude_runs_the_pto_task_through_claude_llm(monkeypatch, capsys):
    from primer.__main__ import main
    from primer.scenarios import get_demo

    pto = get_demo("pto")
    with FakeModelServer(pto.make_llm()) as srv:
        monkeypatch.setenv(API_KEY_ENV_VAR, KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        assert main(["demo", "pto", "--claude"]) == 0
        first = srv.requests[0].body
    out = capsys.readouterr()
    assert first["messages"][0]["content"] == pto.task
    assert first["system"] == pto.system
    assert "stop cause: end_turn" in out.out and "[hr-001]" in out.out
    assert KEY not in out.out + out.err


def test_sdk_tools_hand_the_runner_our_definitions_and_text_results():
    from primer.providers.claude import sdk_tools

    @tool
    def balance(employee: str) -> dict:
        """Days of PTO left for an employee."""
        return {"employee": employee, "days_left": 12}

    (runnable,) = sdk_tools([balance])
    assert runnable.to_dict()["input_schema"] == balance.input_schema
    assert runnable.to_dict()["name"] == "balance"
    assert json.loads(runnable.call({"employee": "alice"})) == {"employee": "alice",
                                                                "days_left": 12}


@pytest.mark.parametrize("name", ["pto", "orders"])
def test_a_scenario_runs_the_same_offline_and_through_the_sdk(name):
    from primer.scenarios import get_demo

    demo = get_demo(name)
    offline = demo.run()
    with FakeModelServer(demo.make_llm()) as srv:
        online = demo.run(llm=claude(srv))
    assert online.stop_cause is offline.stop_cause
    assert online.final_text == offline.final_text
    assert [s.usage for s in online.steps] == [s.usage for s in offline.steps]
    assert online.messages == offline.messages


def _status_error(status: int, headers: dict[str, str] | None = None) -> anthropic.APIStatusError:
    import httpx

    response = httpx.Response(status, headers=headers or {},
                              request=httpx.Request("POST", "http://localhost/v1/messages"))
    return anthropic.APIStatusError("error", response=response, body=None)


@pytest.mark.parametrize("status, headers", [
    (408, None), (409, None), (429, None), (500, None), (529, None), (400, None),
    (404, None), (400, {"x-should-retry": "true"}), (503, {"x-should-retry": "false"}),
    (429, {"x-should-retry": "false"})])
def test_what_we_retry_is_exactly_what_the_sdk_would_retry(status, headers):
    from primer.providers.claude import model_error

    error = _status_error(status, headers)
    client = anthropic.Anthropic(api_key=KEY, base_url="http://localhost")
    sdk_retries = client._should_retry(error.response)
    assert isinstance(model_error(error), TransientModelError) is sdk_retries


def test_a_connection_error_is_transient_as_the_sdk_treats_it():
    import httpx

    from primer.providers.claude import model_error

    err = anthropic.APIConnectionError(request=httpx.Request("POST", "http://localhost"))
    assert isinstance(model_error(err), TransientModelError)


def test_a_cache_ttl_of_one_hour_is_sent_on_the_cache_marks():
    with FakeModelServer(ScriptedLLM(["hi"])) as srv:
        run_production(claude(srv, cache_prefix=True, cache_ttl="1h"), "hello", [lookup],
                       system="You answer.")
        body = srv.requests[0].body
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    with pytest.raises(ValueError, match="cache_ttl"):
        ClaudeLLM(client=anthropic.Anthropic(api_key=KEY), cache_ttl="2h")


def test_the_tool_runner_gets_our_tool_errors_as_its_own_tool_error():
    from anthropic.lib.tools import ToolError as SDKToolError

    from primer.loop.tools import ToolError
    from primer.providers.claude import sdk_tools

    @tool
    def strict(day: str) -> str:
        """Check a day."""
        raise ToolError(f"day must be YYYY-MM-DD (got {day!r})")

    (runnable,) = sdk_tools([strict])
    with pytest.raises(SDKToolError) as caught:
        runnable.call({"day": "25/09"})
    assert caught.value.content == "day must be YYYY-MM-DD (got '25/09')"
