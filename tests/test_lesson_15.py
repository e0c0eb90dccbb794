"""The figures lesson 15 states, computed again: the stock world's fan-out, the cancelled run
and its continuation, thinking through the SDK, and the fallback's per-model cost."""

import asyncio
import tempfile

import anthropic
import pytest

from primer.harness.async_loop import run_agent_async
from primer.harness.durable.checkpoint import read_checkpoint
from primer.harness.durable.resume import resume
from primer.harness.fallback import FallbackLLM, usage_by_model
from primer.harness.production import run_production
from primer.harness.retry import ManualClock
from primer.loop.config import AgentConfig
from primer.loop.model import Prices, cost_usd
from primer.loop.state import StopCause
from primer.providers.claude import ClaudeLLM
from primer.providers.fake_server import FakeModelServer
from primer.scenarios import stock
from primer.scenarios.parallel import latency_model

PRICES = {"claude-big": Prices(15.0, 75.0), "claude-small": Prices(1.0, 5.0)}


def claude(server, **options):
    client = anthropic.Anthropic(api_key="sk-ant-local", base_url=server.base_url,
                                 max_retries=0)
    return ClaudeLLM(client=client, **options)


def test_the_stock_world_fans_out_eight_calls_and_answers_with_their_sum():
    result = run_production(stock.make_llm(), stock.TASK, stock.make_tools(), system=stock.SYSTEM)
    assert result.final_text == "We have 64 KB-100 keyboards in stock across 8 warehouses."
    assert [len(s.executions) for s in result.steps] == [8, 0]
    assert (result.usage.total_tokens, round(result.cost_usd, 4)) == (1164, 0.0101)
    total, slowest = latency_model(list(stock.LATENCIES.values()))
    assert (round(total, 2), round(slowest, 2), round(total / slowest, 1)) == (4.27, 0.85, 5.0)
    assert max(stock.LATENCIES, key=stock.LATENCIES.get) == "Delhi"


def test_the_cancelled_run_keeps_two_lookups_cancels_delhis_and_resume_asks_for_six():
    async def cancelled():
        press_stop = asyncio.Event()
        return await run_agent_async(
            stock.make_llm(), stock.TASK, stock.make_tools(press_stop=press_stop,
                                                           stop_at="Delhi"),
            system=stock.SYSTEM, cancel=press_stop,
            config=AgentConfig(checkpoint_dir=tempfile.mkdtemp(), max_parallel_tools=1))

    halted = asyncio.run(cancelled())
    assert halted.stop_cause is StopCause.CANCELLED
    assert [e.error_kind for e in halted.executions] == [None] * 2 + ["cancelled"] \
        + ["not_run"] * 5  # Delhi's call was running when stop was pressed
    assert halted.usage.total_tokens == 421
    assert read_checkpoint(halted.checkpoint)["status"] == "cancelled"
    later = resume(halted.checkpoint, stock.make_llm(), stock.make_tools())
    asked = [b["input"]["warehouse"] for b in later.steps[1].reply.tool_uses]
    assert asked == ["Delhi", "Kolkata", "Mumbai", "Hyderabad", "Jaipur", "Lucknow"]
    assert later.stop_cause is StopCause.END_TURN
    assert (len(later.steps), later.usage.total_tokens) == (3, 2521)


def test_the_thinking_run_through_the_sdk_sends_its_thinking_back_and_marks_both_steps():
    with FakeModelServer(stock.make_llm(thinking=True)) as server:
        thought = run_production(claude(server,
                                        thinking={"type": "enabled", "budget_tokens": 1024}),
                                 stock.TASK, stock.make_tools(), system=stock.SYSTEM,
                                 config=AgentConfig(max_tokens=2048))
        second = server.model_requests[1].body
    assert second["messages"][1]["content"] == thought.steps[0].reply.content
    assert [r["tool calls"].startswith("[thought]") for r in thought.rows()] == [True, True]
    assert thought.usage.total_tokens == 1258


@pytest.mark.parametrize("how, cause, requests, ran", [("max_tokens", "max_tokens", 1, 0),
                                                       ("disconnect", "end_turn", 3, 8),
                                                       ("abort", "end_turn", 3, 8)])
def test_a_cut_stream_runs_nothing_or_is_retried_and_runs_each_call_once(how, cause, requests,
                                                                         ran):
    done = []
    clock = ManualClock()
    with FakeModelServer(stock.make_llm()) as server:
        server.cut_next_stream(how)
        result = run_production(claude(server, stream=True), stock.TASK,
                                stock.make_tools(finished=done), system=stock.SYSTEM,
                                config=AgentConfig(clock=clock, sleep=clock.sleep))
        assert len(server.model_requests) == requests
    assert result.stop_cause.value == cause and len(done) == ran


def test_the_fallback_run_costs_each_call_at_its_own_models_prices():
    clock = ManualClock()
    with FakeModelServer(stock.make_llm()) as big, FakeModelServer(stock.make_llm()) as small:
        big.fail_next(529, 2)
        llm = FallbackLLM([claude(big, model="claude-big"), claude(small, model="claude-small")],
                          retries=1, sleep=clock.sleep)
        run = run_production(llm, stock.TASK, stock.make_tools(), system=stock.SYSTEM,
                             config=AgentConfig(model_prices=PRICES))
    assert [s.reply.model for s in run.steps] == ["claude-small", "claude-big"]
    assert llm.fallbacks[0]["attempts"] == 2
    spend = usage_by_model(run.steps, AgentConfig(model_prices=PRICES))
    assert {m: (s.usage.total_tokens, round(s.cost_usd, 4)) for m, s in spend.items()} == {
        "claude-small": (421, 0.0012), "claude-big": (743, 0.0124)}
    assert round(run.cost_usd, 4) == 0.0136
    assert round(sum(cost_usd(s.usage, PRICES["claude-big"]) for s in run.steps), 4) == 0.0304


def test_the_quiz_answers_match_what_the_lesson_shows():
    from primer.course.quiz import load_quiz
    quiz = load_quiz("15")
    assert quiz.answer(2, "b").right and not quiz.answer(2, "a").right
    assert quiz.answer(3, "b").right and quiz.answer(4, "b").right
