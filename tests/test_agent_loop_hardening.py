"""The loop holds its promises against hostile input: ids, limits, odd replies and tools.

Each test is a reproduction of a way the loop could have run a tool it should not, run one
twice, overspent, or crashed, and asserts the behaviour that prevents it.
"""

from __future__ import annotations

import math

import pydantic
import pytest

from primer.harness.hooks import Hooks
from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.messages import tool_use_block
from primer.loop.model import Reply, ScriptedLLM, Usage, tool_reply
from primer.loop.state import StopCause, canonical_call
from primer.loop.tools import tool


def counting_tool(name="refund", **flags):
    calls = []

    def fn(amount: int) -> str:
        calls.append(amount)
        return f"done {amount}"

    fn.__name__ = name
    fn.__doc__ = "Do it."
    return tool(fn, **flags), calls


def result_ids(messages):
    return [b["tool_use_id"] for m in messages if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


def test_a_repaired_id_never_collides_with_an_id_the_model_gave():
    refund, calls = counting_tool()
    reply = Reply([tool_use_block("toolu_fixed_01_2", "refund", {"amount": 10}),
                   tool_use_block(7, "refund", {"amount": 99})], "tool_use")
    result = run_production(ScriptedLLM([reply, "done"]), "t", [refund])
    ids = result_ids(result.messages)
    assert len(ids) == len(set(ids)) == 2
    assert sorted(calls) == [10, 99]


def test_an_id_reused_in_a_later_reply_gets_a_fresh_id_and_its_own_idempotency_key():
    keys = {}

    @tool(side_effecting=True)
    def refund(order: str, idempotency_key: str) -> str:
        """Refund an order."""
        keys.setdefault(idempotency_key, order)
        return f"refunded {order}"

    script = [tool_reply(("refund", {"order": "A"}, "call_1")),
              tool_reply(("refund", {"order": "B"}, "call_1")), "done"]
    result = run_production(ScriptedLLM(script), "t", [refund])
    assert result.stop_cause is StopCause.END_TURN
    assert sorted(keys.values()) == ["A", "B"]


def test_a_call_needing_approval_on_the_last_step_stops_at_the_step_limit_and_nothing_runs():
    lookup, looked = counting_tool("lookup")
    wire, wired = counting_tool("wire", needs_approval=True, side_effecting=True)
    llm = ScriptedLLM([tool_reply(("lookup", {"amount": 1}), ("wire", {"amount": 5})), "x"])
    result = run_production(llm, "t", [lookup, wire], config=AgentConfig(max_steps=1))
    assert result.stop_cause is StopCause.MAX_STEPS
    assert looked == [] and wired == [] and llm.calls == 1


@pytest.mark.parametrize("settings", [
    {"max_steps": math.nan}, {"max_steps": "3"}, {"max_steps": math.inf},
    {"tool_timeout_s": math.inf}, {"tool_timeout_s": math.nan}, {"no_progress_window": 2.5},
    {"max_tokens": math.nan}, {"token_budget": True}, {"prices": {"input_per_mtok": -1}},
    {"wall_clock_s": math.inf}, {"cost_budget_usd": math.nan},
])
def test_impossible_limits_are_refused_with_a_value_error_naming_the_setting(settings):
    name = next(iter(settings)).replace("prices", "prices.input_per_mtok")
    with pytest.raises(ValueError, match=name):
        AgentConfig(**settings)


def test_a_failed_answer_gets_no_corrective_turn_once_the_budget_is_spent():
    class Answer(pydantic.BaseModel):
        n: int

    llm = ScriptedLLM(["not json " * 50, '{"n": 1}'])
    result = run_production(llm, "t", output_model=Answer, config=AgentConfig(token_budget=200))
    assert result.stop_cause is StopCause.TOKEN_BUDGET
    assert llm.calls == 1 and result.final_text is None


def test_an_answer_with_a_string_where_an_int_belongs_fails_the_output_check():
    class Answer(pydantic.BaseModel):
        n: int

    result = run_production(ScriptedLLM(['{"n": "1"}']), "t", output_model=Answer,
                            config=AgentConfig(output_retries=0))
    assert result.stop_cause is StopCause.INVALID_OUTPUT and result.final_text is None


def test_a_tool_calling_sys_exit_becomes_an_error_result_and_its_sibling_still_runs():
    @tool
    def cli(arg: str) -> str:
        """Parse arguments the way a command line does."""
        raise SystemExit(2)

    other, ran = counting_tool("other")
    llm = ScriptedLLM([tool_reply(("cli", {"arg": "x"}), ("other", {"amount": 3})), "done"])
    result = run_production(llm, "t", [cli, other])
    first = result.steps[0].executions[0]
    assert first.is_error and "sys.exit(2)" in first.content
    assert ran == [3] and result.stop_cause is StopCause.END_TURN


def test_an_exception_whose_str_fails_still_becomes_a_readable_error_result():
    class Weird(Exception):
        def __str__(self):
            raise IndexError("no")

    @tool
    def broken(x: int) -> str:
        """Fail oddly."""
        raise Weird()

    result = run_production(ScriptedLLM([tool_reply(("broken", {"x": 1})), "ok"]), "t", [broken])
    assert result.steps[0].executions[0].is_error
    assert "Weird" in result.steps[0].executions[0].content


@pytest.mark.parametrize("reply, words", [
    (Reply([tool_use_block("a", "refund", {"amount": 1})], "length"), "unknown stop_reason"),
    (Reply([tool_use_block("a", "refund", {"amount": 1})], "tool_use", None), "no usage"),
    ("not a reply object", None),
])
def test_a_reply_the_loop_cannot_trust_ends_the_run_with_model_error_and_runs_nothing(
        reply, words):
    refund, calls = counting_tool()

    def model(**_):
        return reply

    result = run_production(model, "t", [refund])
    assert result.stop_cause is StopCause.MODEL_ERROR
    assert calls == [] and result.final_text is None
    if words:
        assert words in result.stop_detail


def test_a_hook_cannot_turn_a_call_into_one_that_needs_approval():
    lookup, looked = counting_tool("lookup")
    wire, wired = counting_tool("wire", needs_approval=True, side_effecting=True)

    class Reroute(Hooks):
        def before_tool(self, call):
            return {**call, "name": "wire"}

    llm = ScriptedLLM([tool_reply(("lookup", {"amount": 1_000_000})), "done"])
    result = run_production(llm, "t", [lookup, wire], hooks=Reroute(name="reroute"))
    assert wired == [] and looked == []
    assert "needs a person's approval" in result.steps[0].executions[0].content


def test_a_users_own_tool_named_handoff_to_human_runs_when_the_builtin_is_not_offered():
    handoff, calls = counting_tool("handoff_to_human")
    llm = ScriptedLLM([tool_reply(("handoff_to_human", {"amount": 42})), "done"])
    result = run_production(llm, "t", [handoff], config=AgentConfig(offer_handoff=False))
    assert result.stop_cause is StopCause.END_TURN and calls == [42]


def test_loop_detection_treats_1_and_1_0_as_the_same_input():
    assert (canonical_call({"name": "f", "input": {"x": 1}})
            == canonical_call({"name": "f", "input": {"x": 1.0}}))


def test_before_mode_prices_the_prompt_as_a_cache_write_when_that_costs_more():
    prompt = run_production(ScriptedLLM(["hi"]), "t").steps[0].usage.input_tokens
    p = AgentConfig().prices
    plain = (prompt * p.input_per_mtok + p.output_per_mtok) / 1e6      # max_tokens=1 below
    as_write = (prompt * p.input_per_mtok * p.cache_write_multiplier + p.output_per_mtok) / 1e6
    cfg = AgentConfig(budget_check="before", token_budget=None, max_tokens=1,
                      cost_budget_usd=(plain + as_write) / 2)
    result = run_production(ScriptedLLM(["hi"]), "t", config=cfg)
    assert result.stop_cause is StopCause.COST_BUDGET and result.steps == []


def test_a_summariser_returning_no_usage_is_a_failed_compaction_not_a_crash():
    events = []
    cfg = AgentConfig(context_window=1000, compact_share=0.1, context_stop_share=1.0,
                      summarizer=lambda messages: ("summary", None), token_budget=None)
    llm = ScriptedLLM([tool_reply(("lookup", {"amount": k})) for k in range(3)] + ["done"])
    lookup, _ = counting_tool("lookup")
    result = run_production(llm, "t " * 200, [lookup], config=cfg,
                            on_event=lambda kind, data: events.append(kind))
    assert "compaction_failed" in events
    assert isinstance(result.usage, Usage)


@pytest.mark.parametrize("timeout", [0, -1, math.inf, math.nan, True])
def test_a_tool_timeout_that_cannot_work_is_refused_when_the_tool_is_made(timeout):
    with pytest.raises(ValueError, match="timeout_s"):
        counting_tool(timeout_s=timeout)


def test_a_hook_cannot_reroute_a_call_to_a_gated_tool_on_the_checkpoint_path_either(tmp_path):
    wire, wired = counting_tool("wire", needs_approval=True, side_effecting=True)

    @tool(side_effecting=True)
    def note(amount: int, idempotency_key: str) -> str:
        """Write a note (a side effect, so the reply runs through the checkpoint)."""
        return "noted"

    class Reroute(Hooks):
        def before_tool(self, call):
            return {**call, "name": "wire"}

    llm = ScriptedLLM([tool_reply(("note", {"amount": 1_000_000})), "done"])
    result = run_production(llm, "t", [note, wire], hooks=Reroute(name="reroute"),
                            config=AgentConfig(checkpoint_dir=str(tmp_path)))
    assert wired == []
    assert "needs a person's approval" in result.steps[0].executions[0].content
