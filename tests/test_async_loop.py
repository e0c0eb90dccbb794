"""run_agent_async: the same exits in the same order as run_production, identical results on every
scenario, tool calls of one reply concurrent on asyncio (sync tools on threads), timeouts that
cancel an async tool, async models, deltas in the event loop's thread, and cancel."""

import asyncio
import itertools
import json
import re
import threading

import pydantic
import pytest

from primer.harness import async_loop
from primer.harness.async_loop import run_agent_async
from primer.harness.durable.resume import resume
from primer.harness.hooks import Blocked as HookBlock
from primer.harness.hooks import Hooks
from primer.harness.production import run_production
from primer.harness.retry import ManualClock, TransientToolError
from primer.harness.streaming import StreamingScriptedLLM
from primer.loop.config import AgentConfig
from primer.loop.model import Reply, ScriptedLLM, Usage, text_reply, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import tool
from primer.scenarios import all_demos, stock

# ---------------------------------------------------------------- comparing two runs

_ID = re.compile(r"toolu_[A-Za-z0-9_]+")


def comparable(result, events=None):
    """A result (and its events) as JSON with wall times zeroed and tool_use ids numbered in
    order of appearance (a scenario may tag its ids with a random run tag)."""
    d = result.to_dict()
    d.pop("checkpoint")
    text = json.dumps({"result": d, "events": events or []}, sort_keys=True)
    text = re.sub(r'"(latency_s|model_latency_s)": [0-9.e-]+', r'"\1": 0', text)
    names = {}
    return _ID.sub(lambda m: names.setdefault(m.group(), f"id{len(names) + 1}"), text)


def events_sink(events):
    return lambda kind, data: events.append([kind, data])


def both(make_llm, task, make_tools, **kwargs):
    """The same run on both loops, each with a fresh model and fresh tools; each result with
    the kinds and data of its events."""
    runs = []
    for loop in ("sync", "async"):
        events: list = []
        sink = events_sink(events)
        if loop == "sync":
            result = run_production(make_llm(), task, make_tools(), on_event=sink, **kwargs)
        else:
            result = asyncio.run(run_agent_async(make_llm(), task, make_tools(), on_event=sink,
                                                 **kwargs))
        runs.append((result, events))
    return runs


SCENARIOS = {**all_demos(), "stock": stock.SCENARIO}  # every demo, and lesson 15's world


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_both_loops_give_identical_results_and_events_on_every_scenario(name):
    demo = SCENARIOS[name]
    (a, ea), (b, eb) = both(demo.make_llm, demo.task, lambda: demo.tools(None),
                            system=demo.system, config=demo.config, scenario=demo.name)
    assert b.stop_cause is a.stop_cause
    assert comparable(b, eb) == comparable(a, ea)


def test_the_async_loop_drives_the_sync_loops_own_body_not_a_copy():
    from primer.loop import loop

    assert async_loop.continue_run is loop.continue_run
    source = open(async_loop.__file__).read()
    for copy in ("first_stop(", "def check_", "Stop(StopCause.", "add_results(", "finish("):
        assert copy not in source


# ---------------------------------------------------------------- every exit, both loops


@tool
def search(query: str) -> str:
    """Search the notes.

    Args:
        query: what to look for
    """
    return f"notes about {query}"


@tool(needs_approval=True)
def refund(n: int) -> str:
    """Refund n dollars.

    Args:
        n: dollars
    """
    return "refunded"


class Total(pydantic.BaseModel):
    total: float


_SAME = tool_reply(("search", {"query": "x"}))


def _set(event):
    event.set()
    return event


#: (script, settings, run keywords) per stop cause but model_error (below).
EXITS = {
    "end_turn": (["done"], {}, {}),
    "max_tokens": ([text_reply("cut", stop_reason="max_tokens")], {}, {}),
    "refusal": ([text_reply("no", stop_reason="refusal")], {}, {}),
    "token_budget": ([_SAME], {"token_budget": 1}, {}),
    "cost_budget": ([_SAME], {"cost_budget_usd": 1e-9}, {}),
    "handoff": ([tool_reply(("handoff_to_human", {"reason": "r"}))], {}, {}),
    "loop_detected": ([_SAME, _SAME], {"repeat_threshold": 2}, {}),
    "max_steps": ([_SAME], {"max_steps": 1}, {}),
    "wall_clock": ([_SAME], {"wall_clock_s": 1.5}, {}),
    "no_progress": ([tool_reply(("nope", {}))], {"no_progress_window": 1}, {}),
    "context_window": (["x"], {"context_window": 10}, {}),
    "awaiting_approval": ([tool_reply(("refund", {"n": 1}))], {}, {}),
    "invalid_output": (["about 5900"], {"output_retries": 0}, {"output_model": Total}),
    "cancelled": (["never"], {}, {"cancel": "set"}),
}


@pytest.mark.parametrize("cause", sorted(EXITS))
def test_every_exit_fires_the_same_way_in_both_loops(cause):
    script, settings, extra = EXITS[cause]
    runs = []
    for loop in ("sync", "async"):
        if cause == "wall_clock":
            settings = {**settings, "clock": itertools.count(1).__next__}  # 1 s a reading
        kwargs = dict(extra)
        if kwargs.get("cancel") == "set":
            kwargs["cancel"] = _set(threading.Event() if loop == "sync" else asyncio.Event())
        config = AgentConfig(**settings)
        if loop == "sync":
            runs.append(run_production(ScriptedLLM(script), "task", [search, refund], config=config,
                                       **kwargs))
        else:
            runs.append(asyncio.run(run_agent_async(ScriptedLLM(script), "task",
                                                    [search, refund], config=config,
                                                    **kwargs)))
    a, b = runs
    assert a.stop_cause.value == cause
    assert comparable(b) == comparable(a)


def test_a_model_error_is_the_same_in_both_loops():
    def broken(**request):
        raise RuntimeError("the model is broken")

    a = run_production(broken, "task")
    b = asyncio.run(run_agent_async(broken, "task"))
    assert a.stop_cause is b.stop_cause is StopCause.MODEL_ERROR
    assert b.stop_detail == a.stop_detail


def test_a_corrective_turn_for_a_bad_answer_is_the_same_in_both_loops():
    script = ["about 5900", '{"total": 5900.0}']
    (a, ea), (b, eb) = both(lambda: ScriptedLLM(script), "task", lambda: [],
                            output_model=Total)
    assert b.stop_cause is StopCause.END_TURN and b.output == Total(total=5900.0)
    assert comparable(b, eb) == comparable(a, ea)


# ---------------------------------------------------------------- tools on asyncio


def _async_waiter(seconds, log, in_flight):
    @tool
    async def wait(k: int) -> str:
        """Wait, then answer.

        Args:
            k: which call this is
        """
        in_flight.append(1)
        log.append(max(log[-1] if log else 0, len(in_flight)))
        try:
            await asyncio.sleep(seconds[k])
        finally:
            in_flight.pop()
        return f"done {k} on {threading.current_thread().name}"

    return wait


def test_async_tools_of_one_reply_run_at_once_and_come_back_in_request_order():
    seconds = [0.05, 0.01, 0.03, 0.0, 0.04, 0.02, 0.05, 0.01]
    peak, in_flight = [], []
    wait = _async_waiter(seconds, peak, in_flight)
    script = [tool_reply(*[("wait", {"k": k}) for k in range(8)]), "ok"]
    result = asyncio.run(run_agent_async(ScriptedLLM(script), "go", [wait]))
    assert max(peak) == 8  # all eight were waiting at the same time
    contents = [e.content for e in result.executions]
    assert [c.split()[1] for c in contents] == [str(k) for k in range(8)]
    assert all(c.endswith(threading.main_thread().name) for c in contents)  # the loop's thread
    assert len(result.messages[2]["content"]) == 8  # one user message of results


def test_max_parallel_tools_caps_the_calls_in_flight():
    peak, in_flight = [], []
    wait = _async_waiter([0.01] * 6, peak, in_flight)
    script = [tool_reply(*[("wait", {"k": k}) for k in range(6)]), "ok"]
    asyncio.run(run_agent_async(ScriptedLLM(script), "go", [wait],
                                config=AgentConfig(max_parallel_tools=2)))
    assert max(peak) == 2


def test_a_sync_tool_runs_on_a_worker_thread_not_the_event_loop():
    @tool
    def where() -> str:
        """Say which thread runs this."""
        return threading.current_thread().name

    result = asyncio.run(run_agent_async(ScriptedLLM([tool_reply(("where", {})), "ok"]), "go",
                                         [where]))
    assert result.executions[0].content != threading.main_thread().name


def test_an_async_tool_past_its_time_limit_is_cancelled_and_the_run_goes_on():
    stopped = []

    @tool(timeout_s=0.05)
    async def hang() -> str:
        """Never answers."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            stopped.append(True)
            raise
        return "never"

    result = asyncio.run(run_agent_async(ScriptedLLM([tool_reply(("hang", {})), "ok"]), "go",
                                         [hang], config=AgentConfig(tool_retries=0)))
    assert stopped == [True]
    e = result.executions[0]
    assert e.is_error and "timed out after 0.05 s (it was cancelled)" in e.content
    assert result.stop_cause is StopCause.END_TURN


def test_a_sync_tool_past_its_time_limit_is_abandoned_not_stopped():
    release = threading.Event()

    @tool(timeout_s=0.05)
    def stuck() -> str:
        """Waits for a release that comes too late."""
        release.wait(5)
        return "late"

    result = asyncio.run(run_agent_async(ScriptedLLM([tool_reply(("stuck", {})), "ok"]), "go",
                                         [stuck], config=AgentConfig(tool_retries=0)))
    release.set()
    assert "timed out after 0.05 s (it may still be running)" in result.executions[0].content


def test_a_side_effecting_async_tool_that_times_out_is_not_retried():
    calls = []

    @tool(side_effecting=True, timeout_s=0.02)
    async def pay(amount: int, idempotency_key: str) -> str:
        """Pay an amount.

        Args:
            amount: dollars
        """
        calls.append(idempotency_key)
        await asyncio.sleep(5)
        return "paid"

    result = asyncio.run(run_agent_async(ScriptedLLM([tool_reply(("pay", {"amount": 5})), "ok"]),
                                         "go", [pay]))
    e = result.executions[0]
    assert len(calls) == 1 and e.error_kind == "timeout"
    assert "it was cancelled, possibly part-way" in e.content


def test_retries_of_a_transient_error_follow_the_same_schedule_in_both_loops():
    def flaky_tools():
        attempts = []

        @tool
        async def lookup(key: str) -> str:
            """Look a key up (fails twice first).

            Args:
                key: the key
            """
            attempts.append(key)
            if len(attempts) < 3:
                raise TransientToolError("503 Service Unavailable", retry_after_s=None)
            return "found"

        return [lookup]

    runs = []
    for loop in ("sync", "async"):
        clock = ManualClock()
        config = AgentConfig(clock=clock, sleep=clock.sleep, tool_timeout_s=None)
        llm = ScriptedLLM([tool_reply(("lookup", {"key": "a"})), "ok"])
        if loop == "sync":
            runs.append((run_production(llm, "go", flaky_tools(), config=config), clock.slept))
        else:
            runs.append((asyncio.run(run_agent_async(llm, "go", flaky_tools(), config=config)),
                         clock.slept))
    (a, slept_a), (b, slept_b) = runs
    assert b.executions[0].attempts == 3 and slept_b == slept_a and len(slept_a) == 2
    assert comparable(b) == comparable(a)


def test_the_sync_loop_runs_an_async_tool_to_completion():
    peak, in_flight = [], []
    wait = _async_waiter([0.0, 0.0], peak, in_flight)
    result = run_production(ScriptedLLM([tool_reply(("wait", {"k": 0}), ("wait", {"k": 1})), "ok"]),
                            "go", [wait])
    assert [e.content.split()[:2] for e in result.executions] == [["done", "0"], ["done", "1"]]
    assert not any(e.is_error for e in result.executions)


def test_hooks_run_around_async_calls_as_around_sync_ones():
    seen = []
    hooks = Hooks(before_tool=lambda call: None if call["input"]["query"] != "secret" else
                  HookBlock("secret queries are not searched"),
                  after_tool=lambda call, e: seen.append(e.content) or None)
    script = [tool_reply(("search", {"query": "a"}), ("search", {"query": "secret"})), "ok"]
    (a, ea), (b, eb) = both(lambda: ScriptedLLM(script), "go", lambda: [search], hooks=hooks)
    assert b.executions[0].content == "notes about a"
    assert b.executions[1].is_error and "secret queries" in b.executions[1].content
    assert seen == ["notes about a"] * 2  # once per loop: the refused call never ran
    assert comparable(b, eb) == comparable(a, ea)


# ---------------------------------------------------------------- models on asyncio


class AsyncModel:
    """An ``async def`` model: replays a script, noting the thread each call ran in."""

    def __init__(self, script):
        self.inner = ScriptedLLM(script)
        self.threads = []

    async def __call__(self, *, system, messages, tools, max_tokens):
        self.threads.append(threading.current_thread().name)
        await asyncio.sleep(0)
        return self.inner(system=system, messages=messages, tools=tools, max_tokens=max_tokens)


def test_an_async_model_is_awaited_and_gives_the_same_run_as_its_sync_script():
    script = [tool_reply(("search", {"query": "a"})), "found a"]
    model = AsyncModel(script)
    b = asyncio.run(run_agent_async(model, "go", [search]))
    a = run_production(ScriptedLLM(script), "go", [search])
    assert model.threads == [threading.main_thread().name] * 2
    assert comparable(b) == comparable(a)


def test_the_sync_loop_runs_an_async_model_to_completion():
    result = run_production(AsyncModel(["hello"]), "go")
    assert result.final_text == "hello" and result.stop_cause is StopCause.END_TURN


def test_a_sync_models_deltas_reach_on_event_in_the_event_loops_thread_in_order():
    seen = []

    def sink(kind, data):
        seen.append((kind, data.get("text"), threading.current_thread().name))

    llm = StreamingScriptedLLM([text_reply("one two three")])
    asyncio.run(run_agent_async(llm, "go", on_event=sink))
    texts = [t for k, t, _ in seen if k == "text_delta"]
    assert texts == ["one ", "two ", "three"]
    assert {name for _, _, name in seen} == {threading.main_thread().name}
    kinds = [k for k, _, _ in seen]
    assert kinds.index("text_delta") < kinds.index("model_call") < kinds.index("stop")


def test_transient_model_errors_are_retried_with_the_same_waits_in_both_loops():
    from primer.loop.model import TransientModelError

    def flaky():
        inner = ScriptedLLM(["ok"])
        failures = [2]

        def model(**request):
            if failures[0]:
                failures[0] -= 1
                raise TransientModelError("529 overloaded", retry_after_s=0.5, status=529)
            return inner(**request)

        return model

    waits = []
    for loop in ("sync", "async"):
        clock = ManualClock()
        config = AgentConfig(clock=clock, sleep=clock.sleep)
        if loop == "sync":
            result = run_production(flaky(), "go", config=config)
        else:
            result = asyncio.run(run_agent_async(flaky(), "go", config=config))
        assert result.final_text == "ok" and len(result.steps[0].model_retries) == 2
        waits.append(clock.slept)
    assert waits[0] == waits[1] and all(w >= 0.5 for w in waits[0])


# ---------------------------------------------------------------- cancel, pause, resume


def test_an_asyncio_event_set_by_a_tool_cancels_the_run_between_calls():
    cancel = asyncio.Event()

    @tool
    async def stop_here(k: int) -> str:
        """Press stop.

        Args:
            k: which
        """
        cancel.set()
        return f"finished {k}"

    script = [tool_reply(("stop_here", {"k": 1}), ("stop_here", {"k": 2})), "never"]

    async def go():
        return await run_agent_async(ScriptedLLM(script), "go", [stop_here], cancel=cancel,
                                     config=AgentConfig(max_parallel_tools=1))

    result = asyncio.run(go())
    assert result.stop_cause is StopCause.CANCELLED
    assert [e.error_kind for e in result.executions] == [None, "not_run"]
    assert result.messages[-1]["role"] == "user" and len(result.messages[-1]["content"]) == 2


def test_an_approval_pause_in_the_async_loop_is_resumed_like_any_other(tmp_path):
    ran = []

    @tool(needs_approval=True, side_effecting=True)
    async def pay(amount: int) -> str:
        """Pay an amount.

        Args:
            amount: dollars
        """
        ran.append(amount)
        return "paid"

    script = [tool_reply(("pay", {"amount": 5}), ("search", {"query": "receipt"})),
              "paid and found"]
    config = AgentConfig(checkpoint_dir=str(tmp_path))
    paused = asyncio.run(run_agent_async(ScriptedLLM(script), "go", [pay, search],
                                         config=config))
    assert paused.stop_cause is StopCause.AWAITING_APPROVAL and ran == []
    assert [e.content for e in paused.executions] == ["notes about receipt"]
    from primer.harness.durable.checkpoint import approve

    approve(paused.checkpoint, paused.pending[0]["id"])
    done = resume(paused.checkpoint, ScriptedLLM(script[1:]), [pay, search])
    assert done.final_text == "paid and found" and ran == [5]


def test_a_trace_of_the_async_loop_holds_the_same_events_as_the_sync_one(tmp_path):
    from primer.harness.tracing.trace import load_trace

    script = [tool_reply(("search", {"query": "a"})), "found"]
    run_production(ScriptedLLM(script), "go", [search], trace=tmp_path / "sync.jsonl")
    asyncio.run(run_agent_async(ScriptedLLM(script), "go", [search],
                                trace=tmp_path / "async.jsonl"))
    a, b = load_trace(tmp_path / "sync.jsonl"), load_trace(tmp_path / "async.jsonl")
    assert [e["event"] for e in b.events] == [e["event"] for e in a.events]
    assert b.rows() == a.rows()


def test_a_reply_without_usage_is_refused_the_same_way():
    def no_usage(**request):
        return Reply([{"type": "text", "text": "hi"}], "end_turn", None)

    a = run_production(no_usage, "go")
    b = asyncio.run(run_agent_async(no_usage, "go"))
    assert a.stop_cause is b.stop_cause is StopCause.MODEL_ERROR
    assert b.stop_detail == a.stop_detail and b.usage == a.usage == Usage()


def test_the_sync_loop_inside_a_running_event_loop_still_runs_an_async_tool():
    peak, in_flight = [], []
    wait = _async_waiter([0.0], peak, in_flight)

    async def notebook_cell():  # a kernel's thread runs an event loop; run_production is sync
        return run_production(ScriptedLLM([tool_reply(("wait", {"k": 0})), "ok"]), "go", [wait],
                              config=AgentConfig(tool_timeout_s=None))

    result = asyncio.run(notebook_cell())
    assert result.executions[0].content.startswith("done 0") and result.final_text == "ok"


def test_a_timeout_error_the_tool_raises_itself_is_its_own_timeout_not_the_time_limit():
    @tool(timeout_s=5, side_effecting=True)
    async def upstream() -> str:
        """Calls a service that times out on its side."""
        raise TimeoutError("the upstream service timed out")

    script = [tool_reply(("upstream", {})), "ok"]
    by_async = asyncio.run(run_agent_async(ScriptedLLM(script), "go", [upstream]))
    by_sync = run_production(ScriptedLLM(script), "go", [upstream])
    e = by_async.executions[0]
    assert e.error_kind == "timeout" and "TimeoutError: the upstream service" in e.content
    assert "outcome is unknown" in e.content and "after 5 s" not in e.content
    assert e.content == by_sync.executions[0].content
