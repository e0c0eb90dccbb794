"""FallbackLLM: on an overload, a server error or no answer, after the primary's own retries,
the next model answers; each step records which model answered, priced at its own prices;
no model is sent thinking another model wrote, and no side effect is asked for again."""

import asyncio

import anthropic
import pytest

from primer.harness.async_loop import run_agent_async
from primer.harness.fallback import FOREIGN_THINKING_NOTE, FallbackLLM, usage_by_model
from primer.harness.production import run_production
from primer.harness.retry import ManualClock
from primer.harness.streaming import StreamingScriptedLLM
from primer.loop.config import AgentConfig
from primer.loop.messages import text_block, thinking_block, tool_use_block
from primer.loop.model import (
    PermanentModelError,
    Prices,
    Reply,
    ScriptedLLM,
    TransientModelError,
    Usage,
    cost_usd,
    tool_reply,
)
from primer.loop.state import StopCause
from primer.loop.tools import tool
from primer.providers.claude import ClaudeLLM
from primer.providers.fake_server import FakeModelServer


class Flaky:
    """A model that fails with ``errors`` (one per call, in order), then answers with
    ``inner``; ``calls`` counts every call."""

    def __init__(self, inner, errors, model):
        self.inner, self.errors, self.model, self.calls = inner, list(errors), model, 0

    def __call__(self, **request):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.inner(**request)


def overloaded():
    return TransientModelError("the API answered 529 (overloaded): Overloaded", status=529)


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key
    """
    return f"value of {key}"


def look_up_then_answer(messages):
    """Look a up, then answer: whichever model is asked, it answers from the history."""
    return tool_reply(("lookup", {"key": "a"})) if len(messages) == 1 else "a is found"


def test_an_overloaded_primary_falls_back_after_its_own_retries():
    clock = ManualClock()
    primary = Flaky(ScriptedLLM(look_up_then_answer, model="big"), [overloaded()] * 2, "big")
    secondary = ScriptedLLM(look_up_then_answer, model="small")
    llm = FallbackLLM([primary, secondary], retries=1, sleep=clock.sleep)
    result = run_production(llm, "task", [lookup])
    assert result.stop_cause is StopCause.END_TURN
    assert primary.calls == 3  # two failures (one retry), then it answers call 2
    assert [s.reply.model for s in result.steps] == ["small", "big"]
    assert len(clock.slept) == 1 and llm.fallbacks == [
        {"call": 1, "from": "big", "to": "small", "attempts": 2,
         "error": "TransientModelError: the API answered 529 (overloaded): Overloaded"}]


@pytest.mark.parametrize("status, switches", [(529, True), (500, True), (503, True),
                                              (None, True), (429, False), (408, False)])
def test_only_an_overload_a_server_error_or_no_answer_switches_models(status, switches):
    error = TransientModelError(f"status {status}", status=status)
    primary = Flaky(ScriptedLLM(["from big"], model="big"), [error], "big")
    llm = FallbackLLM([primary, ScriptedLLM(["from small"], model="small")], retries=0)
    if switches:
        reply = llm(system="", messages=[], tools=[], max_tokens=100)
        assert reply.model == "small"
    else:
        with pytest.raises(TransientModelError):
            llm(system="", messages=[], tools=[], max_tokens=100)
        assert llm.fallbacks == []


def test_a_permanent_error_is_raised_at_once_without_trying_the_next_model():
    secondary = ScriptedLLM(["never"], model="small")
    primary = Flaky(None, [PermanentModelError("bad key")], "big")
    with pytest.raises(PermanentModelError):
        FallbackLLM([primary, secondary])(system="", messages=[], tools=[], max_tokens=9)
    assert secondary.calls == 0


def test_when_every_model_fails_the_run_stops_with_a_model_error_naming_the_overload():
    clock = ManualClock()
    models = [Flaky(None, [overloaded()] * 9, name) for name in ("a", "b")]
    config = AgentConfig(model_retries=1, clock=clock, sleep=clock.sleep)
    result = run_production(FallbackLLM(models, retries=0), "task", config=config)
    assert result.stop_cause is StopCause.MODEL_ERROR and "529" in result.stop_detail
    assert [m.calls for m in models] == [2, 2]  # the chain, then the loop's one retry of it


def test_each_model_is_priced_at_its_own_prices():
    primary = Flaky(ScriptedLLM(look_up_then_answer, model="big"), [overloaded()], "big")
    llm = FallbackLLM([primary, ScriptedLLM(look_up_then_answer, model="small")], retries=0)
    prices = {"big": Prices(15.0, 75.0), "small": Prices(1.0, 5.0)}
    config = AgentConfig(model_prices=prices)
    result = run_production(llm, "task", [lookup], config=config)
    by_model = usage_by_model(result.steps, config)
    assert list(by_model) == ["small", "big"]
    for name, spend in by_model.items():
        [step] = [s for s in result.steps if s.reply.model == name]
        assert spend.calls == 1 and spend.usage == step.usage
        assert spend.cost_usd == pytest.approx(cost_usd(step.usage, prices[name]))
    assert result.cost_usd == pytest.approx(sum(s.cost_usd for s in by_model.values()))


def test_model_prices_travel_with_the_config_and_bad_ones_are_named():
    config = AgentConfig(model_prices={"small": Prices(1.0, 5.0)})
    again = AgentConfig.from_dict(config.to_dict())
    assert again.prices_for("small") == Prices(1.0, 5.0)
    assert again.prices_for("other") == again.prices
    assert "model_prices" not in AgentConfig().to_dict()
    with pytest.raises(ValueError, match=r"model_prices\['small'\].input_per_mtok"):
        AgentConfig(model_prices={"small": Prices(-1.0, 5.0)})


def test_a_streaming_fallback_passes_the_deltas_on_and_says_when_it_switched():
    seen = []
    primary = Flaky(StreamingScriptedLLM(["never"], model="big"), [overloaded()], "big")
    primary.stream = True
    llm = FallbackLLM([primary, StreamingScriptedLLM(["All good."], model="small")],
                      retries=0)
    result = run_production(llm, "task", on_event=lambda kind, data: seen.append((kind, data)))
    assert result.final_text == "All good."
    kinds = [k for k, _ in seen]
    assert kinds.index("model_fallback") < kinds.index("text_delta")
    assert dict(seen)["model_fallback"]["to"] == "small"


def test_the_fallback_works_under_the_async_loop_too():
    primary = Flaky(ScriptedLLM(look_up_then_answer, model="big"), [overloaded()], "big")
    llm = FallbackLLM([primary, ScriptedLLM(look_up_then_answer, model="small")], retries=0)
    result = asyncio.run(run_agent_async(llm, "task", [lookup]))
    assert [s.reply.model for s in result.steps] == ["small", "big"]


def test_bad_model_lists_are_refused():
    with pytest.raises(ValueError, match="at least one model"):
        FallbackLLM([])

    async def async_model(**request):
        return None

    with pytest.raises(TypeError, match="sync models"):
        FallbackLLM([async_model])


def test_what_failed_attempts_reported_is_counted_in_the_answer_or_the_error():
    clock = ManualClock()

    def burnt():
        return TransientModelError("529 overloaded", status=529, usage=Usage(40_000, 4_000))

    primary = Flaky(ScriptedLLM(["a is found"], model="big"), [burnt(), burnt()], "big")
    secondary = ScriptedLLM(["a is found"], model="small")
    llm = FallbackLLM([primary, secondary], retries=1, sleep=clock.sleep)
    result = run_production(llm, "task", config=AgentConfig(sleep=clock.sleep))
    answer = result.steps[0].usage
    assert result.usage == answer and answer.input_tokens >= 80_000  # both failures counted

    always = FallbackLLM([Flaky(None, [burnt()] * 9, "big")], retries=1, sleep=clock.sleep)
    result = run_production(always, "task", config=AgentConfig(model_retries=0,
                                                                sleep=clock.sleep))
    assert result.stop_cause is StopCause.MODEL_ERROR
    assert result.usage == Usage(80_000, 8_000)  # the error carried both attempts' usage


def test_a_retry_that_would_pass_the_runs_wall_clock_gives_up_instead_of_waiting():
    clock = ManualClock()
    primary = Flaky(None, [TransientModelError("429", status=429, retry_after_s=250.0)] * 9,
                    "big")
    llm = FallbackLLM([primary], retries=2, sleep=clock.sleep)
    config = AgentConfig(model_retries=0, wall_clock_s=10, clock=clock, sleep=clock.sleep)
    result = run_production(llm, "task", config=config)
    assert result.stop_cause is StopCause.MODEL_ERROR and clock.slept == []


# ---------------------------------------------------------------- what the next model accepts

THINK = {"type": "enabled", "budget_tokens": 1024}


def rejects_foreign_thinking(answer, model="claude-small"):
    """A second model whose API, like the real one, refuses another model's signed thinking
    with a 400; else it answers ``answer``. ``seen`` holds the messages it was sent."""
    seen = []

    def second(*, system, messages, tools, max_tokens):
        seen.append(messages)
        for i, m in enumerate(messages):
            for j, b in enumerate(m["content"] if isinstance(m["content"], list) else []):
                if b.get("type") in ("thinking", "redacted_thinking"):
                    raise PermanentModelError(f"the API answered 400: messages.{i}.content.{j}:"
                                              f" Invalid `signature` in `{b['type']}` block")
        return Reply([text_block(answer)], "end_turn", Usage(60, 8), model)

    second.model, second.seen = model, seen
    return second


def test_a_fallback_after_a_reply_that_thought_drops_the_thinking_and_runs_the_side_effect_once():
    refunds = []

    @tool(side_effecting=True)
    def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id: the order
        """
        refunds.append(order_id)
        return f"refunded {order_id}"

    def first_model(messages):  # thinks, asks for the refund; then its provider is overloaded
        big.fail_next(529, 5)
        return Reply([thinking_block("A1 is eligible for a refund."),
                      tool_use_block("toolu_1", "refund", {"order_id": "A1"})], "tool_use",
                     Usage(80, 30))

    second = rejects_foreign_thinking("A1 is refunded.")
    clock = ManualClock()
    with FakeModelServer(ScriptedLLM(first_model)) as big:
        client = anthropic.Anthropic(api_key="sk-ant-local", base_url=big.base_url,
                                     max_retries=0)
        llm = FallbackLLM([ClaudeLLM(client=client, model="claude-big", thinking=THINK),
                           second], retries=1, sleep=clock.sleep)
        result = run_production(llm, "Refund A1", [refund],
                                config=AgentConfig(max_tokens=2048, sleep=clock.sleep))
    assert result.stop_cause is StopCause.END_TURN, result.stop_detail
    assert result.final_text == "A1 is refunded." and refunds == ["A1"]  # once, never again
    assert [s.reply.model for s in result.steps] == ["claude-big", "claude-small"]
    (sent,) = second.seen
    assert sent[1]["content"] == [tool_use_block("toolu_1", "refund", {"order_id": "A1"})]
    assert sent[2]["content"][0]["content"] == "refunded A1"  # it reads the refund was done
    assert result.messages[1]["content"][0]["type"] == "thinking"  # the run keeps it whole


def test_without_dropping_it_the_second_model_refuses_the_first_ones_thinking():
    second = rejects_foreign_thinking("never")
    with pytest.raises(PermanentModelError, match="Invalid `signature`"):
        second(system="", max_tokens=10, tools=[], messages=[
            {"role": "user", "content": "t"},
            {"role": "assistant", "content": [thinking_block("x", "sig-big"), text_block("y")]},
            {"role": "user", "content": "again"}])


def test_each_model_gets_back_only_its_own_thinking_redacted_included():
    history = [{"role": "user", "content": "t"},
               {"role": "assistant", "content": [
                   thinking_block("primary's", "sig-big"),
                   {"type": "redacted_thinking", "data": "enc-big"},
                   tool_use_block("toolu_1", "lookup", {"key": "a"})]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                             "content": "1"}]}]
    small_reply = Reply([thinking_block("secondary's", "sig-small"), text_block("done")],
                        "end_turn", Usage(1, 1), "claude-small")
    llm = FallbackLLM([Flaky(None, [overloaded()] * 2, "claude-big"),
                       lambda **request: small_reply], retries=1, sleep=lambda s: None)
    assert llm.sent_to(0, history) is history  # nothing another model wrote: sent unread
    llm(system="", messages=history, tools=[], max_tokens=100)
    to_small = llm.sent_to(1, history)
    assert to_small[1]["content"] == [tool_use_block("toolu_1", "lookup", {"key": "a"})]
    later = [*history, {"role": "assistant", "content": small_reply.content},
             {"role": "user", "content": "and b?"}]
    to_big = llm.sent_to(0, later)
    assert to_big[1] == history[1]  # the primary's own blocks, unchanged
    assert to_big[3]["content"] == [text_block("done")]
    assert llm.sent_to(1, later)[3] == later[3]


def test_an_assistant_turn_of_another_models_thinking_alone_is_sent_as_a_note():
    llm = FallbackLLM([ScriptedLLM(["x"]), ScriptedLLM(["y"])])
    history = [{"role": "user", "content": "t"},
               {"role": "assistant", "content": [thinking_block("only this", "sig")]},
               {"role": "user", "content": "go on"}]
    assert llm.sent_to(1, history)[1]["content"] == [text_block(FOREIGN_THINKING_NOTE)]


def test_the_wrap_up_through_a_fallback_keeps_the_tools_when_every_model_takes_tool_choice():
    from primer.loop.loop import run_agent
    from primer.loop.tools import tool

    @tool
    def look(q: str) -> str:
        """Look something up.

        Args:
            q: what to look up.
        """
        return "found " + q

    class Chooser:
        takes_tool_choice = True

        def __init__(self):
            self.requests = []
            self.llm = ScriptedLLM(lambda m: tool_reply(("look", {"q": str(len(m))}))
                                   if len(m) < 4 else "Partial: found 1.")

        def __call__(self, *, system, messages, tools, max_tokens, tool_choice=None):
            self.requests.append({"tools": tools, "tool_choice": tool_choice})
            return self.llm(system=system, messages=messages, tools=tools,
                            max_tokens=max_tokens)

    primary = Chooser()
    fallback = FallbackLLM([primary, Chooser()])
    assert fallback.takes_tool_choice
    result = run_agent(fallback, "find", [look], config=AgentConfig(max_steps=2, wrap_up=True))
    assert result.wrapped_up and result.final_text == "Partial: found 1."
    assert primary.requests[-1]["tool_choice"] == {"type": "none"} and primary.requests[-1]["tools"]
    assert not FallbackLLM([primary, ScriptedLLM(["x"])]).takes_tool_choice
