"""Hostile replies, tool inputs and tool results never break the harness (issue 14).

Each test reproduces one way a broken provider or an attacker broke a run, with the small
input that did it, and asserts what the harness does instead: the run keeps its work, ends
with a stop cause, runs nothing it should not, and every request it sends stays valid for
the Messages API.
"""

from __future__ import annotations

import json

import pytest

from primer.harness.durable.checkpoint import approve
from primer.harness.durable.resume import resume
from primer.harness.hooks import Hooks
from primer.harness.production import run_production
from primer.harness.request_check import messages_problems
from primer.harness.retry import TransientToolError
from primer.harness.tracing.trace import load_trace
from primer.loop.config import AgentConfig
from primer.loop.messages import EMPTY_REPLY_TEXT, text_block, tool_use_block, user_message
from primer.loop.model import Reply, Usage
from primer.loop.replies import ASSISTANT_BLOCK_TYPES
from primer.loop.state import StopCause
from primer.loop.tools import Tool, ToolOutput, tool

FAST = {"tool_timeout_s": None}


class Recorded:
    """A model that returns ``replies`` in order and keeps a copy of every request."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []

    def __call__(self, *, system, messages, tools, max_tokens):
        self.requests.append(json.loads(json.dumps(messages)))
        return self.replies[min(len(self.requests), len(self.replies)) - 1]


def reply(*blocks, stop="tool_use", usage=None):
    return Reply(list(blocks), stop, usage or Usage(10, 5))


def done(text="done"):
    return reply(text_block(text), stop="end_turn")


def counter(name="echo", **flags):
    ran = []

    def fn(x: str) -> str:
        ran.append(x)
        return f"got {x}"

    fn.__name__, fn.__doc__ = name, "Echo x."
    return tool(fn, **flags), ran


def every_request_valid(llm):
    for request in llm.requests:
        assert messages_problems(request) == [], request


# ---------------------------------------------------------------- replies and usage


@pytest.mark.parametrize("text", [None, 5, ["a"]], ids=["null", "number", "list"])
def test_a_text_block_whose_text_is_not_a_string_is_repaired_not_a_type_error(text):
    llm = Recorded([reply({"type": "text", "text": text}, stop="end_turn")])
    result = run_production(llm, "hi", config=AgentConfig(**FAST))
    assert result.stop_cause is StopCause.END_TURN
    assert result.messages[-1]["content"][0]["text"].startswith("(a text block whose text was")
    assert result.steps[0].received == [{"type": "text", "text": text}]


@pytest.mark.parametrize("usage", [{"input_tokens": float("inf"), "output_tokens": 1},
                                   {"input_tokens": 10**309, "output_tokens": 1},
                                   Usage(10**309, 1), Usage(1, float("inf")),
                                   {"input_tokens": "12", "output_tokens": 1}],
                         ids=["1e400", "309-digit-dict", "309-digit-usage", "inf", "string"])
def test_an_absurd_usage_ends_the_run_with_model_error_not_an_overflow(usage):
    used, ran = counter()
    result = run_production(Recorded([Reply([tool_use_block("a", "echo", {"x": "1"})], "tool_use",
                                       usage)]), "hi", [used], config=AgentConfig(**FAST))
    assert result.stop_cause is StopCause.MODEL_ERROR and "usage" in result.stop_detail
    assert ran == [] and result.steps == []


def test_negative_usage_is_refused_so_a_before_mode_budget_cannot_be_bypassed():
    used, ran = counter()
    replies = [Reply([tool_use_block(f"t{k}", "echo", {"x": str(k)})], "tool_use",
                     Usage(-10**9 if k == 0 else 1000, 1)) for k in range(10)]
    result = run_production(Recorded(replies), "hi", [used],
                            config=AgentConfig(token_budget=2000, budget_check="before",
                                          max_steps=10, **FAST))
    assert result.stop_cause is StopCause.MODEL_ERROR and "-1000000000" in result.stop_detail
    assert ran == []  # not eight calls through a 2,000-token budget: none


def test_the_openai_adapter_never_reports_negative_input_tokens():
    from primer.providers.openai_compat import reply_from_chat_completion as to_reply

    completion = {"model": "m", "choices": [{"message": {"role": "assistant", "content": "hi"},
                                             "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 10, "completion_tokens": 2,
                            "prompt_tokens_details": {"cached_tokens": 50}}}
    usage = to_reply(completion).usage
    assert usage.problem() is None and usage.input_tokens == 0


def nested(depth):
    value = {"x": "deep"}
    for _ in range(depth):
        value = {"x": value}
    return value


@pytest.mark.parametrize("repeat_threshold", [3, None])
def test_a_tool_input_nested_500_deep_is_refused_before_loop_detection_or_the_trace(
        tmp_path, repeat_threshold):
    used, ran = counter()
    llm = Recorded([reply(tool_use_block("a", "echo", nested(500))), done()])
    result = run_production(llm, "hi", [used], trace=tmp_path / "t.jsonl",
                            config=AgentConfig(repeat_threshold=repeat_threshold, **FAST))
    assert result.stop_cause is StopCause.END_TURN and ran == []
    assert result.executions[0].error_kind == "invalid_input"
    assert "nested deeper than 64 levels" in result.executions[0].content
    assert result.messages[1]["content"][0]["input"] == {}
    every_request_valid(llm)
    assert load_trace(tmp_path / "t.jsonl").complete  # the trace was written and reads back


def test_a_refusal_with_empty_content_leaves_no_empty_assistant_message():
    result = run_production(Recorded([reply(stop="refusal")]), "hi", config=AgentConfig(**FAST))
    assert result.stop_cause is StopCause.REFUSAL
    assert result.messages[-1] == {"role": "assistant",
                                   "content": [text_block(EMPTY_REPLY_TEXT)]}
    # the conversation can go on: the history plus a new user turn is a valid request
    assert messages_problems([*result.messages, user_message("and now?")]) == []


def test_the_boundary_knows_every_block_type_a_model_reply_can_hold():
    from typing import get_args

    import anthropic.types as t

    sdk = {get_args(cls.model_fields["type"].annotation)[0]
           for cls in get_args(get_args(t.ContentBlock)[0])}
    assert ASSISTANT_BLOCK_TYPES == sdk | {"compaction"}  # (the beta union's too)


# ---------------------------------------------------------------- tool inputs


def test_broken_argument_json_is_sent_on_as_an_empty_object_and_kept_for_the_trace(tmp_path):
    used, ran = counter()
    broken = '{"x": "SELECT 1",}'
    llm = Recorded([reply(tool_use_block("a", "echo", broken)), done(), done()])
    result = run_production(llm, "hi", [used], trace=tmp_path / "t.jsonl",
                            config=AgentConfig(**FAST))
    assert ran == [] and result.stop_cause is StopCause.END_TURN
    assert result.messages[1]["content"][0]["input"] == {}  # what every later request sends
    every_request_valid(llm)
    assert result.steps[0].received[0]["input"] == broken
    recorded = load_trace(tmp_path / "t.jsonl").steps()[0].call  # beside the reply, not in it
    assert recorded["received"][0]["input"] == broken and recorded["refused"]["a"]
    assert "received" not in recorded["reply"] and "refused" not in recorded["reply"]


@pytest.mark.parametrize("text, parser_says", [
    ('{"x": "1",}', "Expecting property name enclosed in double quotes at line 1 column 11"),
    ('{"x": "1"}{"x": "2"}', "Extra data at line 1 column 11"),
    ('{"x": "1"', "Expecting ',' delimiter at line 1 column 10"),
], ids=["trailing-comma", "concatenated", "unterminated"])
def test_the_json_parsers_own_error_and_its_position_reach_the_model(text, parser_says):
    used, _ = counter()
    result = run_production(Recorded([reply(tool_use_block("a", "echo", text)), done()]), "hi",
                            [used], config=AgentConfig(**FAST))
    said = result.messages[2]["content"][0]["content"]
    assert parser_says in said and "arrived as a string" not in said


def test_a_lone_surrogate_in_a_side_effecting_input_is_refused_even_with_a_checkpoint_dir(
        tmp_path):
    pay, ran = counter("pay", side_effecting=True)
    llm = Recorded([reply(tool_use_block("a", "pay", {"x": "\ud800"})), done()])
    result = run_production(llm, "hi", [pay], config=AgentConfig(checkpoint_dir=str(tmp_path),
                                                            **FAST))
    assert result.stop_cause is StopCause.END_TURN and ran == []
    assert "lone surrogate" in result.executions[0].content
    every_request_valid(llm)


def test_a_side_effecting_tool_returning_a_lone_surrogate_runs_once_and_resume_never_reruns_it(
        tmp_path):
    runs = []

    @tool(side_effecting=True)
    def pay(x: str, idempotency_key: str) -> str:
        """Pay."""
        runs.append(idempotency_key)
        return "paid \ud800"

    @tool(needs_approval=True)
    def confirm(x: str) -> str:
        """Confirm."""
        return "confirmed"

    script = [reply(tool_use_block("p", "pay", {"x": "1"})),
              reply(tool_use_block("c", "confirm", {"x": "1"})), done()]
    config = AgentConfig(checkpoint_dir=str(tmp_path), **FAST)
    paused = run_production(Recorded(script), "hi", [pay, confirm], config=config)
    assert paused.stop_cause is StopCause.AWAITING_APPROVAL and len(runs) == 1
    assert "\ufffd" in paused.messages[2]["content"][0]["content"]
    approve(paused.checkpoint, "c")
    finished = resume(paused.checkpoint, Recorded(script[2:]), [pay, confirm])
    again = resume(paused.checkpoint, Recorded(script[2:]), [pay, confirm])
    assert finished.stop_cause is again.stop_cause is StopCause.END_TURN
    assert len(runs) == 1  # the side effect ran once, for all the resumes


# ---------------------------------------------------------------- how many calls


def test_max_tool_calls_per_reply_runs_none_of_a_flood_and_tells_the_model():
    pay, ran = counter("pay", side_effecting=True)
    flood = reply(*(tool_use_block(f"t{k}", "pay", {"x": str(k)}) for k in range(5)))
    llm = Recorded([flood, done()])
    result = run_production(llm, "hi", [pay],
                            config=AgentConfig(max_tool_calls_per_reply=2, **FAST))
    assert ran == [] and result.stop_cause is StopCause.END_TURN
    assert {e.error_kind for e in result.executions} == {"too_many_calls"}
    assert "at most 2 may run per reply" in result.executions[0].content
    every_request_valid(llm)


def test_the_default_per_reply_limit_refuses_a_flood_of_side_effects():
    pay, ran = counter("pay", side_effecting=True)
    flood = reply(*(tool_use_block(f"t{k}", "pay", {"x": str(k)}) for k in range(33)))
    run_production(Recorded([flood, done()]), "hi", [pay], config=AgentConfig(**FAST))
    assert AgentConfig().max_tool_calls_per_reply == 32 and ran == []


def test_max_tool_calls_per_run_refuses_every_call_past_it():
    pay, ran = counter("pay", side_effecting=True)
    script = [reply(*(tool_use_block(f"r{n}c{k}", "pay", {"x": f"{n}.{k}"}) for k in range(2)))
              for n in range(3)] + [done()]
    result = run_production(Recorded(script), "hi", [pay],
                            config=AgentConfig(max_tool_calls_per_run=3, **FAST))
    assert ran == ["0.0", "0.1"]  # reply 2 would make it four: none of its calls ran
    assert [e.error_kind for e in result.steps[1].executions] == ["too_many_calls"] * 2
    assert "may make 3 tool calls in all and has made 2" in result.steps[1].executions[0].content
    assert result.stop_cause is StopCause.END_TURN


def test_calls_refused_by_a_limit_never_wait_for_approval():
    gated, ran = counter("refund", needs_approval=True)
    flood = reply(*(tool_use_block(f"t{k}", "refund", {"x": str(k)}) for k in range(3)))
    result = run_production(Recorded([flood, done()]), "hi", [gated],
                            config=AgentConfig(max_tool_calls_per_reply=2, **FAST))
    assert result.stop_cause is StopCause.END_TURN and ran == [] and result.pending == []


# ---------------------------------------------------------------- retries and timeouts


def test_a_keyless_side_effecting_tool_raising_transient_errors_is_not_retried():
    orders = []

    @tool(side_effecting=True)
    def place_order(item: str) -> str:
        """Place an order."""
        orders.append(item)
        raise TransientToolError("503 Service Unavailable")

    result = run_production(Recorded([reply(tool_use_block("a", "place_order", {"item": "x"})),
                                 done()]), "hi", [place_order], config=AgentConfig(**FAST))
    assert orders == ["x"]  # one order, not three
    assert "takes no idempotency key, so it was not retried" in result.executions[0].content


def test_a_side_effecting_tool_that_takes_a_key_is_retried_with_the_same_key():
    keys = []

    @tool(side_effecting=True)
    def place_order(item: str, idempotency_key: str) -> str:
        """Place an order."""
        keys.append(idempotency_key)
        if len(keys) < 2:
            raise TransientToolError("503")
        return "placed"

    from primer.harness.retry import ManualClock

    clock = ManualClock()
    result = run_production(Recorded([reply(tool_use_block("a", "place_order", {"item": "x"})),
                                 done()]), "hi", [place_order],
                            config=AgentConfig(clock=clock, sleep=clock.sleep, **FAST))
    assert keys == ["idem-a", "idem-a"] and result.executions[0].content == "placed"


@pytest.mark.parametrize("timeout", [None, 30.0], ids=["untimed", "timed"])
def test_a_plain_timeout_error_from_a_side_effecting_tool_says_the_outcome_is_unknown(timeout):
    sent = []

    @tool(side_effecting=True)
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        raise TimeoutError("The read operation timed out")

    result = run_production(Recorded([reply(tool_use_block("a", "send_email", {"to": "x"})),
                                 done()]), "hi", [send_email],
                            config=AgentConfig(tool_timeout_s=timeout))
    e = result.executions[0]
    assert sent == ["x"] and e.error_kind == "timeout"
    assert "outcome is unknown" in e.content and "Check the current state" in e.content


def test_a_plain_timeout_error_from_a_tool_without_a_runner_is_a_timeout_result_too():
    from primer.loop.tools import ToolRegistry

    @tool(side_effecting=True)
    def send_email(to: str) -> str:
        """Send an email."""
        raise TimeoutError("read timed out")

    e = ToolRegistry([send_email]).run(tool_use_block("a", "send_email", {"to": "x"}))
    assert e.error_kind == "timeout" and "outcome is unknown" in e.content


# ---------------------------------------------------------------- approval per call


def refund_tool(gate):
    paid = []

    @tool(side_effecting=True, needs_approval=gate)
    def issue_refund(amount_usd: float) -> str:
        """Refund an amount."""
        paid.append(amount_usd)
        return "refunded"

    return issue_refund, paid


def test_needs_approval_as_a_predicate_gates_only_the_calls_it_says():
    refund, paid = refund_tool(lambda args: args["amount_usd"] > 100)
    small = run_production(Recorded([reply(tool_use_block("a", "issue_refund",
                                                     {"amount_usd": 40.0})), done()]),
                           "hi", [refund], config=AgentConfig(**FAST))
    big = run_production(Recorded([reply(tool_use_block("b", "issue_refund",
                                                   {"amount_usd": 400.0})), done()]),
                         "hi", [refund], config=AgentConfig(**FAST))
    assert small.stop_cause is StopCause.END_TURN and paid == [40.0]
    assert big.stop_cause is StopCause.AWAITING_APPROVAL and [b["id"] for b in big.pending] == ["b"]


def test_a_predicate_gated_call_pauses_and_resumes_from_a_checkpoint(tmp_path):
    refund, paid = refund_tool(lambda args: args["amount_usd"] > 100)
    script = [reply(tool_use_block("b", "issue_refund", {"amount_usd": 400.0})), done()]
    paused = run_production(Recorded(script), "hi", [refund],
                            config=AgentConfig(checkpoint_dir=str(tmp_path), **FAST))
    assert paused.stop_cause is StopCause.AWAITING_APPROVAL and paid == []
    approve(paused.checkpoint, "b")
    assert resume(paused.checkpoint, Recorded(script[1:]), [refund]).stop_cause \
        is StopCause.END_TURN
    assert paid == [400.0]


@pytest.mark.parametrize("gate", ["yes", 1, None], ids=["string", "int", "none"])
def test_needs_approval_that_is_neither_a_bool_nor_a_function_is_refused(gate):
    with pytest.raises(ValueError, match="needs_approval must be True, False or a function"):
        Tool("t", "A tool.", {"type": "object"}, lambda: None, needs_approval=gate)


@pytest.mark.parametrize("gate", [lambda args: 1 / 0, lambda args: "no"],
                         ids=["raises", "not-a-bool"])
def test_a_needs_approval_predicate_that_fails_fails_closed(gate):
    refund, paid = refund_tool(gate)
    result = run_production(Recorded([reply(tool_use_block("a", "issue_refund",
                                                      {"amount_usd": 1.0})), done()]),
                            "hi", [refund], config=AgentConfig(**FAST))
    assert result.stop_cause is StopCause.AWAITING_APPROVAL and paid == []


def test_a_hook_cannot_change_an_input_into_one_the_predicate_gates():
    refund, paid = refund_tool(lambda args: args["amount_usd"] > 100)
    inflate = Hooks(before_tool=lambda call: {**call, "input": {"amount_usd": 5000.0}})
    result = run_production(Recorded([reply(tool_use_block("a", "issue_refund",
                                                      {"amount_usd": 40.0})), done()]),
                            "hi", [refund], hooks=inflate, config=AgentConfig(**FAST))
    assert paid == [] and result.executions[0].error_kind == "hook_error"


def shifting(field, values):
    """A Reply subclass whose ``field`` answers the next of ``values`` at each read."""
    answers = iter(values * 10)
    return type("Shifting", (Reply,), {field: property(lambda self: next(answers),
                                                       lambda self, v: None)})


@pytest.mark.parametrize("field, values", [
    ("content", [[text_block("a")], [text_block("a")], 42]),
    ("stop_reason", ["end_turn", 5]),
    ("usage", [Usage(1, 1), Usage(1, 1), "junk"]),
    ("model", ["m", object()]),
])
@pytest.mark.parametrize("turn", range(3))
def test_a_reply_whose_fields_change_between_reads_is_read_once(field, values, turn):
    Shifting = shifting(field, values[turn:] + values[:turn])  # each rotation of the answers
    result = run_production(lambda **kw: Shifting([text_block("a")], "end_turn", Usage(1, 1)),
                            "go", config=AgentConfig(**FAST))
    assert result.stop_cause in (StopCause.END_TURN, StopCause.MODEL_ERROR)
    assert not messages_problems(result.messages)


def test_a_field_that_raises_when_read_is_a_model_error():
    class Raising(Reply):
        @property
        def usage(self):
            raise RuntimeError("boom")

        @usage.setter
        def usage(self, value):
            pass

    result = run_production(lambda **kw: Raising([text_block("a")], "end_turn"), "go")
    assert result.stop_cause == StopCause.MODEL_ERROR
    assert "could not be read (RuntimeError: boom)" in result.stop_detail


def test_a_usage_subclass_cannot_vouch_for_its_own_counts():
    class Lenient(Usage):
        def problem(self):
            return None

    calls = []

    def model(**kw):
        calls.append(1)
        return Reply([tool_use_block(f"toolu_{len(calls)}", "echo", {})], "tool_use",
                     Lenient(float("nan"), 1_000_000))

    result = run_production(model, "go", [tool(lambda: "ok", name="echo", description="Say ok.")],
                            config=AgentConfig(token_budget=1000, **FAST))
    assert result.stop_cause == StopCause.MODEL_ERROR and len(calls) == 1
    assert "usage.input_tokens is nan" in result.stop_detail


@pytest.mark.parametrize("kind", [["text"], {"t": 1}, 5, None])
def test_a_block_whose_type_is_not_a_string_becomes_a_note(kind):
    model = Recorded([Reply([{"type": kind, "text": "x"}, text_block("done")], "end_turn",
                            Usage(1, 1)), ])
    result = run_production(model, "go", config=AgentConfig(**FAST))
    assert result.stop_cause == StopCause.END_TURN
    assert not messages_problems(result.messages)


@pytest.mark.parametrize("field", ["cache_creation_input_tokens", "cache_read_input_tokens"])
@pytest.mark.parametrize("value", [None, "", [], 0.0])
def test_an_empty_but_not_zero_cache_count_is_an_untrustworthy_usage(field, value):
    usage = Usage(1, 1, **{field: value})
    result = run_production(lambda **kw: Reply([text_block("a")], "end_turn", usage), "go",
                            config=AgentConfig(**FAST))
    assert result.stop_cause == StopCause.MODEL_ERROR
    assert f"usage.{field} is" in result.stop_detail


@pytest.mark.parametrize("usage, cost, says", [
    (Usage(10, 10), float("nan"), "cost_usd is nan"),
    (Usage(-10**9, 0), 0.0, "usage.input_tokens is -1000000000"),
    ({"input_tokens": 5}, 0.0, "not a Usage"),
    (Usage(5, None), 0.0, "usage.output_tokens is None"),
    (Usage(5, 5), "0.01", "cost_usd is '0.01'"),
])
def test_a_tool_output_whose_spend_budgets_cannot_count_is_refused_when_made(usage, cost, says):
    with pytest.raises(ValueError, match="ToolOutput: ") as caught:
        ToolOutput("x", usage, cost)
    assert says in str(caught.value)


def test_a_tool_output_keeps_a_plain_copy_of_a_usage_subclass():
    class Eraser(Usage):
        def __radd__(self, other):
            return Usage()  # would wipe the run's totals if it were ever added

    out = ToolOutput("x", Eraser(60_000, 0))
    assert type(out.usage) is Usage and out.usage == Usage(60_000, 0)
