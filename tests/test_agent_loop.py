"""The production loop: every exit, the order of its checks, bad model output, flat per-step work.

Every run here goes through :func:`check_run`, which asserts what must hold on any stop: the
result is JSON-serialisable, ``final_text`` is ``None`` unless the run ended with
``end_turn``, and (except when paused for approval) every ``tool_use`` got exactly one
``tool_result`` with its id, all in the one user message that follows it.
"""

from __future__ import annotations

import json
import threading

import pydantic
import pytest

import primer.loop.checks as exits
import primer.loop.model as llm_module
import primer.loop.state as state_module
from primer.loop.config import AgentConfig
from primer.loop.loop import run_agent
from primer.loop.messages import text_block, tool_use_block
from primer.loop.model import (
    Prices,
    Reply,
    ScriptedLLM,
    ScriptExhausted,
    Usage,
    cost_usd,
    estimate_tokens,
    text_reply,
    tool_reply,
)
from primer.loop.state import HANDOFF_TOOL_DEF, HANDOFF_TOOL_NAME, StopCause
from primer.loop.tools import Tool, ToolError, tool

# ---------------------------------------------------------------- a small world


@tool
def get_order(order_id: str) -> dict:
    """Look up an order by its id (ids look like A123).

    Args:
        order_id: The order id.
    """
    if order_id != "A123":
        raise ToolError(f"no order {order_id!r}; order ids look like A123")
    return {"id": "A123", "item": "keyboard", "unit_price": 2500, "quantity": 2}


@tool
def search(query: str) -> str:
    """Search the knowledge base.

    Args:
        query: What to look for.
    """
    return f"no results for {query!r}"


TOOLS = [get_order, search]


def check_run(result):
    """Assert the invariants every run keeps, whatever its stop cause; return the result."""
    json.dumps(result.to_dict())  # JSON-serialisable end to end, messages included
    if result.stop_cause is not StopCause.END_TURN:
        assert result.final_text is None, result.stop_cause
    messages = result.messages
    for i, m in enumerate(messages):
        if m["role"] != "assistant" or isinstance(m["content"], str):
            continue
        ids = [b["id"] for b in m["content"] if b.get("type") == "tool_use"]
        if not ids:
            continue
        if i == len(messages) - 1:
            assert result.stop_cause is StopCause.AWAITING_APPROVAL, "unanswered tool_use"
            continue
        answer = messages[i + 1]
        assert answer["role"] == "user"
        assert [b["type"] for b in answer["content"]] == ["tool_result"] * len(ids)
        assert [b["tool_use_id"] for b in answer["content"]] == ids
    all_ids = [b["id"] for m in messages if m["role"] == "assistant"
               and not isinstance(m["content"], str)
               for b in m["content"] if b.get("type") == "tool_use"]
    assert len(all_ids) == len(set(all_ids)), "tool_use ids must be unique"
    assert result.table().endswith(f"stop cause: {result.stop_cause.value}\n{result.summary}")
    return result


def run(script, tools=TOOLS, **settings):
    """Run ``script`` (a list of replies or a policy) under ``AgentConfig(**settings)``."""
    llm = ScriptedLLM(script)
    result = run_agent(llm, "What does order A123 cost with 18% GST?", tools,
                       system="You are a careful order assistant.",
                       config=AgentConfig(**settings))
    return check_run(result), llm


def searching_forever():
    """A policy that asks for a new search each call (never the same input twice)."""
    def policy(messages):
        return tool_reply(("search", {"query": f"attempt {len(messages)}"}))
    return policy


def recorder(name="record", returns="ok", needs_approval=False):
    """A tool that records each call's input, and the list it records into."""
    calls = []

    def fn(**kwargs):
        calls.append(kwargs)
        return returns

    schema = {"type": "object", "properties": {"n": {"type": "integer"}},
              "additionalProperties": False}
    return Tool(name, "Records its calls.", schema, fn, needs_approval=needs_approval), calls


def reference_totals(script_factory, steps):
    """Running token totals and costs of an unlimited run, one per step, to derive limits from."""
    result, _ = run(script_factory(), max_steps=steps, token_budget=None, repeat_threshold=None)
    assert len(result.steps) == steps
    return ([s.total_usage.total_tokens for s in result.steps],
            [s.cost_usd for s in result.steps])


# ---------------------------------------------------------------- end_turn


def test_a_run_that_answers_ends_with_end_turn_and_the_answer_as_final_text():
    result, llm = run([tool_reply(("get_order", {"order_id": "A123"})),
                       "Order A123 costs 5900.0 rupees with GST."])
    assert result.stop_cause is StopCause.END_TURN
    assert result.final_text == "Order A123 costs 5900.0 rupees with GST."
    assert llm.calls == len(result.steps) == 2
    assert result.usage == result.steps[0].usage + result.steps[1].usage
    assert result.cost_usd == pytest.approx(cost_usd(result.usage, Prices()))


def test_the_summary_says_what_the_run_finished_and_why_it_stopped():
    result, _ = run([tool_reply(("get_order", {"order_id": "B1"})),
                     tool_reply(("get_order", {"order_id": "A123"})), "5900.0"])
    assert result.summary.startswith("Finished: the model answered on call 3.")
    assert "succeeded: get_order" in result.summary
    assert "failed: get_order" in result.summary


def test_pause_turn_continues_the_run():
    result, llm = run([Reply([text_block("working")], "pause_turn"), "done"])
    assert (result.stop_cause, result.final_text, llm.calls) == (StopCause.END_TURN, "done", 2)


# ---------------------------------------------------------------- max_tokens and refusal


def test_a_cut_off_reply_never_runs_its_tool_call():
    rec, calls = recorder()
    cut = Reply([tool_use_block("", "record", {"n": 1})], "max_tokens")
    result, _ = run([cut], tools=[rec])
    assert result.stop_cause is StopCause.MAX_TOKENS
    assert calls == []
    [execution] = result.executions
    assert (execution.error_kind, execution.is_error) == ("not_run", True)
    assert "did not run" in result.stop_detail


def test_a_cut_off_text_reply_is_not_passed_off_as_an_answer():
    result, _ = run([text_reply("The total is 59", stop_reason="max_tokens")])
    assert result.stop_cause is StopCause.MAX_TOKENS and result.final_text is None


def test_a_refusal_stops_the_run_and_its_content_is_not_an_answer():
    rec, calls = recorder()
    refusal = Reply([text_block("I can't help with that."),
                     tool_use_block("", "record", {"n": 1})], "refusal")
    result, _ = run([refusal], tools=[rec])
    assert result.stop_cause is StopCause.REFUSAL
    assert result.final_text is None and calls == []


# ---------------------------------------------------------------- budgets


def test_the_token_budget_after_a_call_stops_at_the_first_call_past_it():
    totals, _ = reference_totals(searching_forever, 6)
    budget = totals[2]  # the running total after call 3: call 4 is the first past it
    result, _ = run(searching_forever(), max_steps=6, token_budget=budget)
    assert result.stop_cause is StopCause.TOKEN_BUDGET
    assert len(result.steps) == 4
    assert result.steps[-1].total_usage.total_tokens > budget >= totals[2]
    assert result.executions[-1].error_kind == "not_run"


def test_the_token_budget_before_a_call_is_never_overspent():
    totals, _ = reference_totals(searching_forever, 6)
    budget = totals[2] + 1
    settings = dict(max_steps=6, token_budget=budget, budget_check="before", max_tokens=64)
    result, llm = run(searching_forever(), **settings)
    assert result.stop_cause is StopCause.TOKEN_BUDGET
    assert result.usage.total_tokens <= budget
    assert all(s.total_usage.total_tokens <= budget for s in result.steps)
    # it stopped *before* a call: the call it refused could have crossed the budget
    assert llm.calls == len(result.steps)
    defs = [t.definition() for t in TOOLS] + [HANDOFF_TOOL_DEF]
    next_prompt = ScriptedLLM(["x"])(system="You are a careful order assistant.",
                                    messages=result.messages, tools=defs, max_tokens=64)
    worst = result.usage.total_tokens + next_prompt.usage.input_tokens + 64
    assert worst > budget
    assert "could take the run to" in result.stop_detail


def test_the_before_check_refuses_a_first_call_that_could_not_fit():
    result, llm = run(["never sent"], token_budget=10, budget_check="before")
    assert result.stop_cause is StopCause.TOKEN_BUDGET
    assert llm.calls == 0 and result.steps == [] and result.usage == Usage()


class UnderReporting:
    """A scripted model whose provider reports a third of the prompt it was sent."""

    def __init__(self, script):
        self.inner, self.honest = ScriptedLLM(script), []

    @property
    def calls(self):
        return self.inner.calls

    def __call__(self, **request):
        reply = self.inner(**request)
        self.honest.append(reply.usage.input_tokens)
        usage = Usage(reply.usage.input_tokens // 3, reply.usage.output_tokens)
        return Reply(reply.content, reply.stop_reason, usage, reply.model)


def test_the_before_check_is_not_fooled_by_a_model_that_under_reports_its_prompt():
    script = [tool_reply(("search", {"query": "gst"})), "Done."]
    honest, _ = run(list(script), max_steps=3, token_budget=None)
    next_prompt = honest.steps[1].usage.input_tokens  # what call 2 really sends
    llm = UnderReporting(list(script))
    first = llm(system="You are a careful order assistant.",
                messages=[{"role": "user", "content": "What does order A123 cost with 18% GST?"}],
                tools=[t.definition() for t in TOOLS] + [HANDOFF_TOOL_DEF], max_tokens=64)
    used = first.usage.total_tokens
    budget = used + next_prompt + 64 - 1  # call 2 could pass it by one token
    # built on the reported prompt alone, call 2 would look well inside the budget
    reported_guess = first.usage.input_tokens + next_prompt - llm.honest[0]
    assert used + reported_guess + 64 <= budget
    llm = UnderReporting(list(script))
    result = check_run(run_agent(llm, "What does order A123 cost with 18% GST?", TOOLS,
                                 system="You are a careful order assistant.",
                                 config=AgentConfig(max_steps=3, token_budget=budget,
                                                    budget_check="before", max_tokens=64)))
    assert result.stop_cause is StopCause.TOKEN_BUDGET and llm.calls == 1
    assert f"prompt about {next_prompt:,}" in result.stop_detail


def test_the_cost_budget_stops_at_the_first_call_past_it():
    _, costs = reference_totals(searching_forever, 5)
    budget = costs[1]  # dollars after call 2: call 3 is the first past it
    result, _ = run(searching_forever(), max_steps=5, token_budget=None, cost_budget_usd=budget)
    assert result.stop_cause is StopCause.COST_BUDGET
    assert len(result.steps) == 3 and result.cost_usd > budget
    assert result.cost_usd == pytest.approx(cost_usd(result.usage))


def test_the_cost_budget_before_a_call_is_never_overspent():
    _, costs = reference_totals(searching_forever, 5)
    budget = costs[1]
    result, _ = run(searching_forever(), max_steps=5, token_budget=None, cost_budget_usd=budget,
                    budget_check="before", max_tokens=64)
    assert result.stop_cause is StopCause.COST_BUDGET
    assert result.cost_usd <= budget


# ---------------------------------------------------------------- handoff


def test_a_handoff_stops_the_run_with_its_reason_and_runs_nothing_else():
    rec, calls = recorder()
    result, _ = run([tool_reply(("record", {"n": 1}),
                                (HANDOFF_TOOL_NAME, {"reason": "refund above my authority"}))],
                    tools=[rec])
    assert result.stop_cause is StopCause.HANDOFF
    assert "refund above my authority" in result.stop_detail
    assert calls == []
    assert [e.error_kind for e in result.executions] == ["not_run", "not_run"]
    assert result.executions[1].content == "Handed off to a person; the run has ended."


def test_the_handoff_tool_is_offered_only_when_configured():
    seen = []

    def model(*, system, messages, tools, max_tokens):
        seen.append([t["name"] for t in tools])
        return Reply([text_block("ok")], "end_turn")

    run_agent(model, "task", TOOLS)
    run_agent(model, "task", TOOLS, config=AgentConfig(offer_handoff=False))
    assert seen == [["get_order", "search", HANDOFF_TOOL_NAME], ["get_order", "search"]]


# ---------------------------------------------------------------- loop detection


def test_the_third_identical_call_stops_the_run_by_default_and_never_runs():
    rec, calls = recorder()
    same = tool_reply(("record", {"n": 7}))
    result, llm = run([same, same, same, "unreachable"], tools=[rec])
    assert AgentConfig().repeat_threshold == 3
    assert result.stop_cause is StopCause.LOOP_DETECTED
    assert llm.calls == 3 and len(calls) == 2
    assert "3 times (threshold 3)" in result.stop_detail


def test_loop_detection_ignores_the_order_of_keys():
    reg = Tool("pair", "d", {"type": "object"}, lambda **kw: "ok")
    result, llm = run([tool_reply(("pair", {"a": 1, "b": 2})),
                       tool_reply(("pair", {"b": 2, "a": 1}))], tools=[reg], repeat_threshold=2)
    assert result.stop_cause is StopCause.LOOP_DETECTED and llm.calls == 2


def test_the_same_tool_with_different_input_is_not_a_loop():
    rec, calls = recorder()
    script = [tool_reply(("record", {"n": k})) for k in range(5)] + ["done"]
    result, _ = run(script, tools=[rec])
    assert result.stop_cause is StopCause.END_TURN and len(calls) == 5


def test_loop_detection_can_be_turned_off():
    rec, _ = recorder()
    same = tool_reply(("record", {"n": 1}))
    result, _ = run([same] * 4 + ["done"], tools=[rec], repeat_threshold=None)
    assert result.stop_cause is StopCause.END_TURN


# ---------------------------------------------------------------- max_steps


@pytest.mark.parametrize("limit", [1, 2, 4])
def test_the_step_limit_allows_exactly_that_many_model_calls(limit):
    result, llm = run(searching_forever(), max_steps=limit)
    assert result.stop_cause is StopCause.MAX_STEPS
    assert llm.calls == len(result.steps) == limit
    # the last call's request is answered but not run: no model call would read it
    assert [e.error_kind for e in result.executions] == [None] * (limit - 1) + ["not_run"]
    assert result.final_text is None
    calls = "1 model call." if limit == 1 else f"{limit} model calls."
    assert result.summary.startswith(f"Stopped at the step limit after {calls}")
    assert "not run: search" in result.summary


def test_an_answer_on_the_last_allowed_call_is_end_turn_not_max_steps():
    result, llm = run([tool_reply(("get_order", {"order_id": "A123"})), "5900.0"], max_steps=2)
    assert (result.stop_cause, result.final_text, llm.calls) == (StopCause.END_TURN, "5900.0", 2)


def test_a_pause_turn_on_the_last_allowed_call_stops_at_the_step_limit():
    result, llm = run([Reply([text_block("still working")], "pause_turn")], max_steps=1)
    assert result.stop_cause is StopCause.MAX_STEPS and llm.calls == 1
    assert result.final_text is None


# ---------------------------------------------------------------- wall clock


def test_the_wall_clock_is_checked_before_each_model_call():
    now = [100.0]

    @tool
    def slow_lookup(n: int) -> str:
        """Takes four seconds of the fake clock."""
        now[0] += 4
        return "ok"

    def policy(messages):
        return tool_reply(("slow_lookup", {"n": len(messages)}))

    result, llm = run(policy, tools=[slow_lookup], wall_clock_s=10, clock=lambda: now[0])
    # calls start at t = 0, 4, 8 s; before the 4th, 12 s have passed
    assert result.stop_cause is StopCause.WALL_CLOCK
    assert llm.calls == 3
    assert "before model call 4" in result.stop_detail


# ---------------------------------------------------------------- no progress


def failing_tool():
    def fn(n: int) -> str:
        raise ToolError(f"attempt {n} failed")

    return Tool("flaky", "Always fails.", {"type": "object",
                                           "properties": {"n": {"type": "integer"}}}, fn)


def test_no_progress_stops_when_the_last_n_results_were_all_errors():
    def policy(messages):
        return tool_reply(("flaky", {"n": len(messages)}))

    result, llm = run(policy, tools=[failing_tool()], no_progress_window=3)
    assert result.stop_cause is StopCause.NO_PROGRESS
    assert llm.calls == 3 and all(e.is_error for e in result.executions)
    assert "last 3 tool results were all errors" in result.stop_detail


def test_a_success_resets_the_no_progress_count():
    ok = tool_reply(("search", {"query": "x"}))
    fail = [tool_reply(("flaky", {"n": k})) for k in range(6)]
    script = [fail[0], fail[1], ok, fail[2], fail[3], fail[4], "unreachable"]
    result, llm = run(script, tools=[failing_tool(), search], no_progress_window=3)
    assert result.stop_cause is StopCause.NO_PROGRESS and llm.calls == 6


def test_several_failing_calls_in_one_reply_count_one_by_one():
    reply = tool_reply(*[("flaky", {"n": k}) for k in range(3)])
    result, llm = run([reply, "unreachable"], tools=[failing_tool()], no_progress_window=3)
    assert result.stop_cause is StopCause.NO_PROGRESS and llm.calls == 1


# ---------------------------------------------------------------- context window


def test_the_run_stops_before_a_call_whose_prompt_outgrows_its_share_of_the_window():
    @tool
    def read_file(path: str) -> str:
        """Returns a long file."""
        return "x" * 6000

    window, share = 2000, 0.5
    result, llm = run([tool_reply(("read_file", {"path": "big.txt"})), "unreachable"],
                      tools=[read_file], context_window=window, context_stop_share=share)
    assert result.stop_cause is StopCause.CONTEXT_WINDOW
    assert llm.calls == 1
    assert estimate_tokens("x" * 6000) > window * share
    assert "2,000-token window" in result.stop_detail


def test_a_reply_reporting_the_window_exceeded_stops_on_the_context_window():
    result, _ = run([text_reply("", stop_reason="model_context_window_exceeded")])
    assert result.stop_cause is StopCause.CONTEXT_WINDOW and result.final_text is None


# ---------------------------------------------------------------- approval and model errors


def test_a_call_that_needs_approval_pauses_the_run_without_running_it():
    gated, calls = recorder("issue_refund", needs_approval=True)
    result, _ = run([tool_reply(("issue_refund", {"n": 500}))], tools=[gated])
    assert result.stop_cause is StopCause.AWAITING_APPROVAL
    assert calls == [] and result.final_text is None
    assert [b["name"] for b in result.pending] == ["issue_refund"]
    assert result.messages[-1]["role"] == "assistant"  # the call waits, unanswered


def test_a_model_call_that_raises_ends_the_run_with_model_error_and_keeps_the_work():
    replies = iter([tool_reply(("get_order", {"order_id": "A123"}), "toolu_a")])

    def model(*, system, messages, tools, max_tokens):
        reply = next(replies, None)
        if reply is None:
            raise ConnectionError("the server closed the connection")
        return Reply(reply.content, reply.stop_reason, Usage(10, 5))

    result = check_run(run_agent(model, "task", TOOLS))
    assert result.stop_cause is StopCause.MODEL_ERROR
    assert len(result.steps) == 1 and result.executions[0].error_kind is None
    assert "model call 2 failed: ConnectionError" in result.stop_detail


def test_an_exhausted_script_is_a_bug_in_the_script_and_propagates():
    with pytest.raises(ScriptExhausted):
        run([tool_reply(("get_order", {"order_id": "A123"}))])


# ---------------------------------------------------------------- the order of checks


def test_a_cut_off_reply_that_also_exceeds_the_budget_reports_max_tokens():
    cut = Reply([tool_use_block("", "search", {"query": "x"})], "max_tokens")
    result, _ = run([cut], token_budget=1)
    assert result.stop_cause is StopCause.MAX_TOKENS


def test_a_handoff_and_a_repeat_in_one_reply_report_the_handoff():
    same = ("search", {"query": "x"})
    result, _ = run([tool_reply(same),
                     tool_reply(same, (HANDOFF_TOOL_NAME, {"reason": "stuck"}))],
                    repeat_threshold=2)
    assert result.stop_cause is StopCause.HANDOFF


def test_a_budget_is_checked_before_a_handoff():
    result, _ = run([tool_reply((HANDOFF_TOOL_NAME, {"reason": "stuck"}))], token_budget=1)
    assert result.stop_cause is StopCause.TOKEN_BUDGET


def test_a_handoff_on_the_last_allowed_call_reports_the_handoff():
    result, _ = run([tool_reply((HANDOFF_TOOL_NAME, {"reason": "stuck"}))], max_steps=1)
    assert result.stop_cause is StopCause.HANDOFF


def test_a_loop_is_detected_before_the_approval_gate():
    gated, _ = recorder("issue_refund", needs_approval=True)
    result, _ = run([tool_reply(("issue_refund", {"n": 1}), ("issue_refund", {"n": 1}))],
                    tools=[gated], repeat_threshold=2)
    assert result.stop_cause is StopCause.LOOP_DETECTED


# ---------------------------------------------------------------- bad model output


def test_every_kind_of_bad_call_gets_one_error_result_and_the_run_goes_on():
    def boom() -> str:
        raise ValueError("disk full")

    odd = [Tool("boom", "Raises.", {"type": "object"}, boom),
           Tool("as_dict", "Returns a dict.", {"type": "object"}, lambda: {"total": 5900.0}),
           Tool("as_none", "Returns None.", {"type": "object"}, lambda: None),
           Tool("as_bytes", "Returns bytes.", {"type": "object"}, lambda: "₹5900".encode())]
    calls = [("get_ordr", {"order_id": "A123"}), ("get_order", ["A123"]),
             ("get_order", {"order_id": 123}), ("get_order", '{"order_id": "A123"}'),
             ("boom", {}), ("as_dict", {}), ("as_none", {}), ("as_bytes", {})]
    result, llm = run([tool_reply(*calls), "done"], tools=TOOLS + odd)
    assert result.stop_cause is StopCause.END_TURN and llm.calls == 2
    results = result.messages[2]["content"]
    assert len(results) == len(calls)  # one user message, one result per call, in order
    by_kind = [(e.error_kind, e.content) for e in result.executions]
    assert by_kind[0][0] == "unknown_tool"
    assert "Available tools: get_order, search, " in by_kind[0][1]
    assert by_kind[1][0] == "invalid_input" and "not an array" in by_kind[1][1]
    assert by_kind[2][0] == "invalid_input" and "at 'order_id'" in by_kind[2][1]
    assert '"required": ["order_id"]' in by_kind[2][1]
    assert by_kind[3][0] == "invalid_input"
    assert "arrived as text holding a JSON object" in by_kind[3][1]
    assert by_kind[4] == ("exception", "boom failed: ValueError: disk full")
    assert by_kind[5] == (None, '{"total": 5900.0}')
    assert by_kind[6] == (None, "(no output)")
    assert by_kind[7] == (None, "₹5900")


def test_calls_with_missing_or_repeated_ids_each_get_a_fresh_id_and_one_result():
    def model(*, system, messages, tools, max_tokens):
        if len(messages) > 1:
            return Reply([text_block("done")], "end_turn")
        return Reply([{"type": "tool_use", "name": "search", "input": {"query": "a"}},
                      tool_use_block("dup", "search", {"query": "b"}),
                      tool_use_block("dup", "search", {"query": "c"})], "tool_use")

    result = check_run(run_agent(model, "task", TOOLS))
    ids = [e.tool_use_id for e in result.executions]
    assert len(set(ids)) == 3 and ids[1] == "dup"


def test_unreadable_reply_content_does_not_crash_the_loop():
    def model(*, system, messages, tools, max_tokens):
        return Reply(["not a block", 42], "end_turn")

    result = check_run(run_agent(model, "task", TOOLS))
    assert result.stop_cause is StopCause.END_TURN
    assert "unreadable content block" in result.final_text


def test_the_calls_of_one_reply_run_concurrently_inside_the_loop():
    barrier = threading.Barrier(3, timeout=5)

    @tool
    def meet(k: int) -> int:
        """Waits for the other calls of its turn."""
        barrier.wait()
        return k

    result, _ = run([tool_reply(*[("meet", {"k": k}) for k in range(3)]), "met"], tools=[meet])
    assert [e.content for e in result.executions] == ["0", "1", "2"]


# ---------------------------------------------------------------- per-step work stays flat


def test_the_running_prompt_estimate_equals_the_reported_input_tokens_on_every_step():
    result, _ = run(searching_forever(), max_steps=8, token_budget=None)
    assert len(result.steps) == 8
    assert [s.prompt_estimate for s in result.steps] == [s.usage.input_tokens
                                                         for s in result.steps]


def counting(monkeypatch, module, name):
    """Wrap ``module.name`` so each call's first argument is recorded."""
    original = getattr(module, name)
    seen = []

    def wrapper(obj, *args, **kwargs):
        seen.append(obj)
        return original(obj, *args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return seen


def test_the_harness_estimates_each_message_once_never_re_scanning_old_ones(monkeypatch):
    harness = counting(monkeypatch, state_module, "estimate_tokens")
    model = counting(monkeypatch, llm_module, "estimate_tokens")
    result, _ = run(searching_forever(), max_steps=8, token_budget=None)
    sent = result.messages[:-2]  # the last reply and its not-run results reach no model
    for seen, expected in ((harness, result.messages), (model, sent)):
        estimated = [m for m in seen if isinstance(m, dict) and "role" in m]
        assert [id(m) for m in estimated] == [id(m) for m in expected]  # each once, in order
    assert len(harness) <= len(result.messages) + 2  # + system prompt + tool definitions


def test_loop_detection_keys_each_requested_call_once(monkeypatch):
    keyed = counting(monkeypatch, exits, "canonical_call")
    result, _ = run(searching_forever(), max_steps=8, token_budget=None)
    assert len(keyed) == len(result.executions) == 8


def test_the_model_gets_the_same_message_list_every_call_never_a_copy():
    lists = []

    def model(*, system, messages, tools, max_tokens):
        lists.append(messages)
        if len(lists) < 4:
            return Reply([tool_use_block(f"t{len(lists)}", "search",
                                         {"query": str(len(lists))})], "tool_use")
        return Reply([text_block("done")], "end_turn")

    result = check_run(run_agent(model, "task", TOOLS))
    assert all(m is result.messages for m in lists)


# ---------------------------------------------------------------- every exit is reachable


def _raising_model(*, system, messages, tools, max_tokens):
    raise TimeoutError("no reply")


def _ticking_clock():
    now = [0.0]

    def clock():
        now[0] += 1.0
        return now[0]

    return clock


_gated, _ = recorder("issue_refund", needs_approval=True)
_same = tool_reply(("search", {"query": "x"}))
class _Total(pydantic.BaseModel):
    total: float


def _invalid_output_run():
    result = run_agent(ScriptedLLM(["about 5900"]), "task", TOOLS, output_model=_Total,
                       config=AgentConfig(output_retries=0))
    return check_run(result), None


def _cancelled_run():
    cancel = threading.Event()
    cancel.set()
    result = run_agent(ScriptedLLM(["never asked"]), "task", TOOLS, cancel=cancel)
    return check_run(result), None


#: One small run per stop cause, keyed by the cause's value.
ONE_RUN_PER_CAUSE = {
    "end_turn": lambda: run(["done"]),
    "max_tokens": lambda: run([text_reply("cut", stop_reason="max_tokens")]),
    "refusal": lambda: run([text_reply("no", stop_reason="refusal")]),
    "token_budget": lambda: run([_same], token_budget=1),
    "cost_budget": lambda: run([_same], cost_budget_usd=1e-9),
    "handoff": lambda: run([tool_reply((HANDOFF_TOOL_NAME, {"reason": "r"}))]),
    "loop_detected": lambda: run([_same, _same], repeat_threshold=2),
    "max_steps": lambda: run([_same], max_steps=1),
    "wall_clock": lambda: run([_same], wall_clock_s=1.5, clock=_ticking_clock()),
    "no_progress": lambda: run([tool_reply(("nope", {}))], no_progress_window=1),
    "context_window": lambda: run(["x"], context_window=10),
    "awaiting_approval": lambda: run([tool_reply(("issue_refund", {"n": 1}))], tools=[_gated]),
    "model_error": lambda: (check_run(run_agent(_raising_model, "task")), None),
    "invalid_output": _invalid_output_run,
    "cancelled": _cancelled_run,
}


def test_every_stop_cause_has_a_run_that_reaches_it():
    assert set(ONE_RUN_PER_CAUSE) == {c.value for c in StopCause}


@pytest.mark.parametrize("value", list(ONE_RUN_PER_CAUSE))
def test_each_exit_is_reachable_and_only_end_turn_gives_a_final_text(value):
    cause = StopCause(value)
    result, _ = ONE_RUN_PER_CAUSE[value]()
    assert result.stop_cause is cause
    assert (result.final_text is not None) == (cause is StopCause.END_TURN)
    assert json.loads(json.dumps(result.to_dict()))["stop_cause"] == cause.value
    assert result.summary and result.stop_detail


# ---------------------------------------------------------------- AgentConfig


def test_the_default_config_has_the_course_limits_and_prices():
    c = AgentConfig()
    assert (c.max_steps, c.token_budget, c.repeat_threshold) == (10, 50_000, 3)
    assert (c.prices.input_per_mtok, c.prices.output_per_mtok) == (5.0, 25.0)


@pytest.mark.parametrize("setting, value", [
    ("max_steps", 0), ("budget_check", "sometimes"), ("repeat_threshold", 1),
    ("no_progress_window", 0), ("context_stop_share", 0), ("context_stop_share", 1.5),
    ("max_tokens", 0), ("token_budget", 0), ("token_budget", -5), ("cost_budget_usd", -1.0),
    ("wall_clock_s", 0), ("context_window", 0), ("max_parallel_tools", 0),
])
def test_a_limit_that_cannot_work_is_refused_naming_the_setting(setting, value):
    with pytest.raises(ValueError, match=f"AgentConfig: .*{setting}"):
        AgentConfig(**{setting: value})


def test_several_bad_settings_are_reported_together():
    with pytest.raises(ValueError) as err:
        AgentConfig(max_steps=0, max_tokens=0)
    assert "max_steps" in str(err.value) and "max_tokens" in str(err.value)


def test_a_config_round_trips_through_json():
    c = AgentConfig(max_steps=6, token_budget=3000, budget_check="before",
                    cost_budget_usd=0.25, prices=Prices(3.0, 15.0), repeat_threshold=4,
                    wall_clock_s=30.0, no_progress_window=5, context_window=100_000)
    again = AgentConfig.from_dict(json.loads(json.dumps(c.to_dict())))
    assert again == c and again.prices == Prices(3.0, 15.0)


def test_an_unknown_setting_in_a_dict_is_named():
    with pytest.raises(ValueError, match="unknown settings \\['max_stpes'\\]"):
        AgentConfig.from_dict({"max_stpes": 3})


def test_a_compaction_stop_reason_goes_on_like_a_pause_and_keeps_its_block():
    block = {"type": "compaction", "content": "Summary: the user wants the weather."}
    llm = ScriptedLLM([Reply([block], "compaction"), "Sunny."])
    result = run_agent(llm, "Weather?")
    assert result.stop_cause is StopCause.END_TURN and result.final_text == "Sunny."
    assert result.messages[1] == {"role": "assistant", "content": [block]}


def test_a_refusals_category_is_named_in_the_stop_detail_and_on_the_result():
    details = {"type": "refusal", "category": "bio", "explanation": "dangerous lab methods"}
    result = run_agent(ScriptedLLM([Reply([text_block("No.")], "refusal",
                                          stop_details=details)]), "How do I culture ...?")
    assert result.stop_cause is StopCause.REFUSAL
    assert result.stop_detail == ("the model refused on call 1 (category: bio; dangerous lab "
                                  "methods)")
    assert result.stop_details == details
    assert result.steps[0].reply.to_dict()["stop_details"] == details
