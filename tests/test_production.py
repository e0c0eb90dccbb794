"""Production tools: timeouts, retries with backoff and jitter, idempotent and model retries."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from primer.harness.production import run_production
from primer.harness.retry import (
    ManualClock,
    RateLimited,
    ToolTimeout,
    TransientToolError,
    retry_after_s,
)
from primer.harness.runner import ToolRunner
from primer.harness.timeouts import call_with_timeout, in_subprocess, run_in_subprocess
from primer.loop.config import AgentConfig, RetryPolicy
from primer.loop.messages import tool_use_block
from primer.loop.model import (
    PermanentModelError,
    Prices,
    ScriptedLLM,
    TransientModelError,
    Usage,
    tool_reply,
)
from primer.loop.result import AgentResult
from primer.loop.state import StopCause
from primer.loop.tools import ToolRegistry, idempotency_key, tool
from primer.scenarios.inventory import InventoryAPI, RefundDesk, supplier_eta
from primer.scenarios.refunds import RefundLedger


def slow_tool(seconds: float, **options):
    @tool(**options)
    def slow_lookup(sku: str) -> str:
        """Look a SKU up slowly.

        Args:
            sku: the SKU.
        """
        time.sleep(seconds)
        return f"{sku}: 3 in stock"

    return slow_lookup


def one_call_then_answer(name: str, args: dict) -> ScriptedLLM:
    return ScriptedLLM([tool_reply((name, args)), "done"])


# ---------------------------------------------------------------- timeouts

def test_a_call_that_passes_its_timeout_becomes_an_error_result_and_the_run_goes_on():
    config = AgentConfig(tool_timeout_s=0.05, tool_retries=0)
    result = run_production(one_call_then_answer("slow_lookup", {"sku": "KB-100"}), "stock?",
                            [slow_tool(0.5)], config=config)
    (execution,) = result.executions
    assert result.stop_cause is StopCause.END_TURN
    assert execution.is_error and execution.error_kind == "timeout"
    assert "timed out after 0.05 s" in execution.content
    assert execution.attempts == 1


def test_a_tools_own_timeout_overrides_the_runs_default():
    runner = ToolRunner(ToolRegistry([slow_tool(0.2, timeout_s=1.0)]), timeout_s=0.01, retries=0)
    execution = runner(tool_use_block("t1", "slow_lookup", {"sku": "KB-100"}))
    assert not execution.is_error and execution.content == "KB-100: 3 in stock"


def in_a_thread(fn):
    """``fn()`` called from a thread that is not the main one; its return value."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0], t


def test_a_call_runs_in_the_callers_thread_on_the_main_thread_and_on_a_worker_elsewhere():
    here = threading.current_thread()
    assert call_with_timeout(threading.current_thread, None) is here
    assert call_with_timeout(threading.current_thread, 1.0) is here  # timed by a timer
    ran_on, caller = in_a_thread(lambda: call_with_timeout(threading.current_thread, 1.0))
    assert ran_on is not caller and ran_on.daemon
    untimed, caller = in_a_thread(lambda: call_with_timeout(threading.current_thread, None))
    assert untimed is caller


def test_timed_calls_off_the_main_thread_reuse_long_lived_daemon_workers():
    from primer.harness.timeouts import _WORKERS

    def fifty() -> list[threading.Thread]:
        call_with_timeout(lambda: None, 1.0)
        started = _WORKERS.started
        threads = [call_with_timeout(threading.current_thread, 1.0) for _ in range(50)]
        assert _WORKERS.started == started
        return threads

    threads, _ = in_a_thread(fifty)
    assert all(t.daemon for t in threads)


def test_a_call_that_succeeds_at_once_keeps_one_attempt_and_an_empty_log():
    runner = ToolRunner(ToolRegistry([InventoryAPI(fail_first=0).tool()]))
    execution = runner(tool_use_block("t1", "check_inventory", {"sku": "KB-100"}))
    assert not execution.is_error and execution.attempts == 1 and execution.attempt_log == []


def test_a_timed_call_re_raises_the_tools_own_exception():
    def boom():
        raise KeyError("nope")

    with pytest.raises(KeyError):
        call_with_timeout(boom, 1.0)


def test_a_tool_that_never_returns_neither_hangs_the_run_nor_the_interpreter_exit():
    script = textwrap.dedent("""
        import threading
        from primer import AgentConfig, ScriptedLLM, run_production, tool, tool_reply

        @tool
        def hang(sku: str) -> str:
            '''Never returns.

            Args:
                sku: the SKU.
            '''
            threading.Event().wait()

        llm = ScriptedLLM([tool_reply(("hang", {"sku": "KB-100"})), "done"])
        result = run_production(llm, "go", [hang], config=AgentConfig(tool_timeout_s=0.1,
                                                                 tool_retries=0))
        print(result.stop_cause.value, result.executions[0].error_kind)
    """)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["end_turn", "timeout"]
    assert time.monotonic() - start < 30


# ---------------------------------------------------------------- the watched loop thread


def test_a_timed_run_keeps_its_loop_on_the_callers_thread_and_its_calls_where_they_can_be_timed():
    import contextvars

    threads: dict[str, list[threading.Thread]] = {"model": [], "tool": []}
    seen = contextvars.ContextVar("seen", default="unset")

    @tool
    def where(n: int) -> str:
        """Note the thread.

        Args:
            n: a number.
        """
        threads["tool"].append(threading.current_thread())
        return seen.get()

    script = ScriptedLLM([tool_reply(("where", {"n": 1})), tool_reply(("where", {"n": 2})),
                          "done"])

    def model(**request):
        threads["model"].append(threading.current_thread())
        return script(**request)

    def run() -> AgentResult:
        seen.set("the caller's")
        return run_production(model, "go", [where], config=AgentConfig(tool_timeout_s=5.0))

    here = threading.current_thread()  # the main thread: calls are timed where they are
    result = run()
    assert result.stop_cause is StopCause.END_TURN
    assert threads["model"] == threads["tool"] + [here] == [here] * 3
    threads["model"].clear()
    threads["tool"].clear()
    script.calls = 0
    result, caller = in_a_thread(run)  # any other thread: each call goes to a worker
    assert result.stop_cause is StopCause.END_TURN
    assert threads["model"] == [caller] * 3  # the loop ran on the caller's thread
    assert all(t is not caller and t.daemon for t in threads["tool"])
    assert [e.content for e in result.executions] == ["the caller's"] * 2  # its context too


def hanging_lookup(hangs: int):
    """A read-only tool whose first ``hangs`` calls block until released; and the release."""
    release, calls = threading.Event(), []

    @tool(timeout_s=0.05)
    def lookup(sku: str) -> str:
        """Look a SKU up.

        Args:
            sku: the SKU.
        """
        calls.append(sku)
        if len(calls) <= hangs:
            release.wait(30)
            return "late answer"
        return "7 in stock"

    return lookup, release, calls


def test_a_hung_inline_call_is_answered_by_the_watchdog_and_a_read_only_one_is_retried():
    lookup, release, calls = hanging_lookup(hangs=1)
    llm = ScriptedLLM([tool_reply(("lookup", {"sku": "KB-100"})), "done"])
    result = run_production(llm, "go", [lookup], config=AgentConfig(tool_retries=1,
                                                               sleep=lambda s: None))
    [e] = result.executions
    assert (e.content, e.attempts) == ("7 in stock", 2)
    assert [r["kind"] for r in e.attempt_log] == ["timeout", "ok"]
    messages = list(result.messages)
    release.set()  # the abandoned thread's call now returns: it must not touch the run
    time.sleep(0.2)
    assert result.messages == messages and len(calls) == 2


def test_a_hung_side_effect_is_answered_once_with_check_the_state_and_recorded_done(tmp_path):
    release = threading.Event()

    @tool(side_effecting=True, timeout_s=0.05)
    def refund(order: str, idempotency_key: str) -> str:
        """Refund an order.

        Args:
            order: the order id.
        """
        release.wait(30)
        return "refunded"

    llm = ScriptedLLM([tool_reply(("refund", {"order": "R-1"})), "done"])
    result = run_production(llm, "go", [refund], config=AgentConfig(checkpoint_dir=str(tmp_path)))
    release.set()
    [e] = result.executions
    assert e.error_kind == "timeout" and "Check the current state" in e.content
    kinds = [json.loads(line)["type"]
             for line in Path(result.checkpoint).read_text().splitlines()]
    assert kinds.count("started") == kinds.count("done") == 1


def test_after_a_hung_call_the_hooks_see_its_result_once_and_the_run_goes_on():
    from primer.harness.hooks import CallLog

    lookup, release, _ = hanging_lookup(hangs=1)
    log = CallLog()
    llm = ScriptedLLM([tool_reply(("lookup", {"sku": "A"})), tool_reply(("lookup", {"sku": "B"})),
                       "done"])
    result = run_production(llm, "go", [lookup], hooks=log,
                            config=AgentConfig(tool_retries=0, sleep=lambda s: None))
    release.set()
    assert result.stop_cause is StopCause.END_TURN and len(result.steps) == 3
    assert [(x["input"]["sku"], x["error_kind"]) for x in log.log] == [("A", "timeout"),
                                                                         ("B", None)]


def test_run_in_subprocess_kills_a_call_that_sleeps_forever_and_returns_a_finished_one():
    # Builtins keep the child process cheap: it imports nothing of primer to run them.
    start = time.monotonic()
    with pytest.raises(ToolTimeout) as caught:
        run_in_subprocess(time.sleep, 3600, timeout_s=1.0)
    assert caught.value.stopped
    assert time.monotonic() - start < 30
    assert run_in_subprocess(sum, [1, 2, 3], timeout_s=30) == 6


def test_a_function_a_child_process_cannot_import_is_refused_with_a_clear_error():
    with pytest.raises(TypeError, match="top level of an importable module"):
        run_in_subprocess(lambda: 1, timeout_s=5)


def test_a_function_wrapped_to_run_in_a_subprocess_keeps_its_input_schema():
    wrapped = tool(in_subprocess(supplier_eta, timeout_s=5))
    assert wrapped.input_schema == tool(supplier_eta).input_schema
    assert wrapped.name == "supplier_eta"


# ---------------------------------------------------------------- backoff

def test_backoff_waits_double_from_one_second_each_with_up_to_a_tenth_of_seeded_jitter():
    policy = RetryPolicy(seed=7)
    delays = policy.delays(3, key="toolu_1")
    rng = random.Random("7:toolu_1")
    assert delays == [base * (1 + 0.1 * rng.random()) for base in (1.0, 2.0, 4.0)]
    assert all(base <= d < base * 1.1 for d, base in zip(delays, (1, 2, 4), strict=True))
    assert policy.delays(3, key="toolu_1") == delays
    assert RetryPolicy(seed=8).delays(3, key="toolu_1") != delays


def test_backoff_is_capped_and_a_longer_retry_after_wins():
    policy = RetryPolicy(jitter=0.0, max_delay_s=5.0)
    assert [policy.backoff_s(k) for k in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert policy.delay_s(1, random.Random(0), retry_after_s=30.0) == 30.0
    assert policy.delay_s(3, random.Random(0), retry_after_s=0.5) == 4.0


def test_the_cap_applies_after_the_jitter_so_no_backoff_wait_exceeds_max_delay():
    policy = RetryPolicy()  # 1 s doubling, 10 % jitter, 60 s cap
    delays = policy.delays(10, key="toolu_demo")
    assert max(delays) <= policy.max_delay_s
    # retries 7..10 back off 64 s or more before jitter, so each is exactly the cap
    assert delays[6:] == [policy.max_delay_s] * 4
    # below the cap the jitter still stretches the wait
    assert 16.0 < delays[4] < 16.0 * 1.1
    # a longer Retry-After from the server still wins, even above the cap
    assert policy.delay_s(10, random.Random(0), retry_after_s=90.0) == 90.0


@pytest.mark.parametrize("asked", [float("nan"), float("inf"), -5.0, "30", True, None,
                                   pytest.param(10**400, id="10**400")])
def test_a_retry_after_that_is_not_a_number_of_seconds_is_ignored(asked):
    policy = RetryPolicy(jitter=0.0)
    assert policy.delay_s(2, random.Random(0), retry_after_s=asked) == 2.0


@pytest.mark.parametrize("header, seconds", [
    ({"retry-after": "inf"}, None), ({"retry-after": "nan"}, None),
    ({"retry-after": "-5"}, None), ({"retry-after": "1e400"}, None),
    ({"retry-after-ms": "inf", "retry-after": "7"}, 7.0), ({"retry-after-ms": "250"}, 0.25),
])
def test_a_retry_after_header_is_read_only_as_a_finite_number_of_seconds(header, seconds):
    assert retry_after_s(header) == seconds


def test_a_wait_longer_than_max_wait_or_the_time_left_gives_up_and_says_why():
    policy = RetryPolicy()  # waits up to 300 s
    assert policy.why_not_wait(299.0) is None
    assert "more than max_wait_s (300 s)" in policy.why_not_wait(1e9)
    assert "wall-clock limit (2 s left)" in policy.why_not_wait(5.0, time_left_s=2.0)
    with pytest.raises(ValueError, match="max_wait_s"):
        RetryPolicy(max_delay_s=60.0, max_wait_s=30.0)


def test_a_model_asking_to_wait_for_ages_ends_the_run_at_once_with_model_error():
    clock = ManualClock()

    def overloaded(**kw):
        raise TransientModelError("529 overloaded", retry_after_s=1e9, status=529)

    result = run_production(overloaded, "go", config=AgentConfig(sleep=clock.sleep))
    assert result.stop_cause == StopCause.MODEL_ERROR and clock.slept == []
    assert "gave up after 1 failed attempt: the service asked to wait 1e+09 s" \
        in result.stop_detail


def test_a_model_retry_that_would_pass_the_wall_clock_limit_is_not_waited():
    clock = ManualClock()

    def overloaded(**kw):
        raise TransientModelError("529 overloaded", retry_after_s=30.0, status=529)

    config = AgentConfig(sleep=clock.sleep, clock=clock, wall_clock_s=10.0)
    result = run_production(overloaded, "go", config=config)
    assert result.stop_cause == StopCause.MODEL_ERROR and clock.slept == []
    assert "would pass the run's wall-clock limit" in result.stop_detail


def test_a_tool_asked_to_wait_for_ages_is_not_retried_and_the_model_is_told_why():
    clock = ManualClock()

    @tool
    def lookup() -> str:
        """Look something up."""
        raise RateLimited(retry_after_s=86_400.0)

    runner = ToolRunner(ToolRegistry([lookup]), retries=2, sleep=clock.sleep)
    execution = runner(tool_use_block("toolu_1", "lookup", {}))
    assert execution.is_error and execution.attempts == 1 and clock.slept == []
    assert "not retried (the service asked to wait 8.64e+04 s" in execution.content


def test_a_configs_model_prices_cannot_change_after_it_is_made_and_survive_pickling():
    import pickle

    config = AgentConfig(model_prices={"m": Prices(1, 2)})
    with pytest.raises(TypeError):
        config.model_prices["m"] = Prices(-1e6, -1e6)  # type: ignore[index]
    assert pickle.loads(pickle.dumps(config)) == config
    assert AgentConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_bad_retry_settings_are_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="factor must be >= 1"):
        RetryPolicy(factor=0.5)
    with pytest.raises(ValueError, match="tool_retries must be an integer >= 0"):
        AgentConfig(tool_retries=-1)
    with pytest.raises(ValueError, match="tool_timeout_s must be a number > 0"):
        AgentConfig(tool_timeout_s=0)


def test_a_config_with_an_injected_clock_and_retry_policy_round_trips_through_json():
    clock = ManualClock()
    config = AgentConfig(retry=RetryPolicy(seed=7, jitter=0.2), clock=clock, sleep=clock.sleep)
    data = json.loads(json.dumps(config.to_dict()))
    assert "sleep" not in data and "clock" not in data
    assert AgentConfig.from_dict(data).retry == config.retry


# ---------------------------------------------------------------- retries of read-only tools

def test_a_rate_limited_read_only_tool_is_retried_after_each_backoff_wait_and_succeeds():
    api, clock = InventoryAPI(fail_first=2), ManualClock()
    runner = ToolRunner(ToolRegistry([api.tool()]), retries=2, sleep=clock.sleep)
    execution = runner(tool_use_block("toolu_9", "check_inventory", {"sku": "KB-100"}))
    assert not execution.is_error and json.loads(execution.content)["in_stock"] == 7
    assert execution.attempts == 3 and api.calls == 3
    assert [r["kind"] for r in execution.attempt_log] == ["rate_limited", "rate_limited", "ok"]
    assert clock.slept == RetryPolicy().delays(2, key="toolu_9")
    assert [r["delay_s"] for r in execution.attempt_log] == [*clock.slept, None]


def test_parallel_calls_draw_their_jitter_from_their_own_ids_however_threads_interleave():
    refused: set[str] = set()

    @tool
    def check_stock(sku: str) -> str:
        """Stock for a SKU; refuses the first request for each SKU with a 429.

        Args:
            sku: the SKU.
        """
        if sku not in refused:
            refused.add(sku)
            raise RateLimited()
        return f"{sku}: 7"

    clock = ManualClock()
    config = AgentConfig(tool_retries=2, clock=clock, sleep=clock.sleep)
    llm = ScriptedLLM([tool_reply(("check_stock", {"sku": "KB-100"}, "toolu_a"),
                                  ("check_stock", {"sku": "MS-100"}, "toolu_b")), "done"])
    result = run_production(llm, "stock?", [check_stock], config=config)
    assert all(not e.is_error and e.attempts == 2 for e in result.executions)
    expected = {RetryPolicy().delays(1, key=k)[0] for k in ("toolu_a", "toolu_b")}
    assert set(clock.slept) == expected


def test_a_retry_after_header_sets_the_wait_when_it_is_longer():
    api, clock = InventoryAPI(fail_first=1, retry_after_s=30.0), ManualClock()
    runner = ToolRunner(ToolRegistry([api.tool()]), retries=2, sleep=clock.sleep)
    runner(tool_use_block("toolu_9", "check_inventory", {"sku": "KB-100"}))
    assert clock.slept == [30.0]


def test_after_the_last_retry_the_harness_gives_up_with_an_error_counting_the_failures():
    api, clock = InventoryAPI(), ManualClock()
    runner = ToolRunner(ToolRegistry([api.tool()]), retries=3, sleep=clock.sleep)
    execution = runner(tool_use_block("toolu_9", "check_inventory", {"sku": "KB-100"}))
    assert execution.is_error and execution.error_kind == "gave_up"
    assert api.calls == 4 and execution.attempts == 4 and len(clock.slept) == 3
    assert "failed 4 attempts" in execution.content
    assert "429 Too Many Requests ×4" in execution.content
    assert f"{sum(clock.slept):.1f} s of backoff" in execution.content


def test_errors_that_are_not_transient_are_not_retried():
    api, clock = InventoryAPI(fail_first=0), ManualClock()
    runner = ToolRunner(ToolRegistry([api.tool()]), retries=3, sleep=clock.sleep)
    execution = runner(tool_use_block("toolu_9", "check_inventory", {"sku": "XX-1"}))
    assert execution.error_kind == "tool_error" and "unknown SKU" in execution.content
    assert api.calls == 1 and clock.slept == []


def test_every_attempt_is_recorded_in_the_steps_json():
    clock = ManualClock()
    config = AgentConfig(tool_retries=1, clock=clock, sleep=clock.sleep)
    result = run_production(one_call_then_answer("check_inventory", {"sku": "KB-100"}), "stock?",
                            [InventoryAPI(fail_first=1).tool()], config=config)
    record = json.loads(json.dumps(result.to_dict()))["steps"][0]["executions"][0]
    assert record["attempts"] == 2
    assert [a["kind"] for a in record["attempt_log"]] == ["rate_limited", "ok"]


# ---------------------------------------------------------------- side-effecting tools

@pytest.fixture
def ledger(tmp_path):
    return RefundLedger(tmp_path / "ledger.sqlite")


REFUND = {"order_id": "R-1001", "amount_usd": 40.0, "reason": "arrived broken"}


def test_a_side_effecting_timeout_is_never_retried_and_tells_the_model_to_check_state(ledger):
    desk = RefundDesk(ledger, confirm_delay_s=1.5, timeout_s=0.3)
    clock = ManualClock()
    runner = ToolRunner(ToolRegistry(desk.tools()), retries=3, sleep=clock.sleep)
    execution = runner(tool_use_block("toolu_r1", "issue_refund", REFUND))
    assert execution.error_kind == "timeout" and execution.attempts == 1
    assert desk.requests == 1 and clock.slept == []
    assert "not retried automatically" in execution.content
    assert "Check the current state" in execution.content
    assert len(ledger.refunds("R-1001")) == 1  # the side effect happened before the timeout


def test_other_transient_errors_of_a_side_effecting_tool_are_retried_with_the_same_key(ledger):
    desk = RefundDesk(ledger, flaky_writes=1)
    runner = ToolRunner(ToolRegistry(desk.tools()), retries=2, sleep=ManualClock().sleep)
    execution = runner(tool_use_block("toolu_r1", "issue_refund", REFUND))
    assert not execution.is_error and execution.attempts == 2 and desk.requests == 2
    assert json.loads(execution.content)["status"] == "already issued (same idempotency key)"
    assert {r["idempotency_key"] for r in execution.attempt_log} == {idempotency_key("toolu_r1")}
    assert len(ledger.refunds("R-1001")) == 1


# ---------------------------------------------------------------- model-call retries

class FlakyModel:
    """Raises ``errors`` (in order) on the given call number, then behaves like ``llm``."""

    def __init__(self, llm, on_call: int, errors: list[Exception]) -> None:
        self.llm, self.on_call, self.errors, self.calls = llm, on_call, list(errors), 0

    def __call__(self, **kwargs):
        self.calls += 1
        if self.llm.calls + 1 == self.on_call and self.errors:
            raise self.errors.pop(0)
        return self.llm(**kwargs)


def counted_lookup():
    runs = []

    @tool
    def lookup(sku: str) -> str:
        """Look a SKU up.

        Args:
            sku: the SKU.
        """
        runs.append(sku)
        return f"{sku}: 3 in stock"

    return lookup, runs


def test_a_transient_model_error_is_retried_for_that_call_alone_and_no_tool_runs_again():
    lookup, runs = counted_lookup()
    clock = ManualClock()
    failed_usage = Usage(1200, 0)
    llm = FlakyModel(one_call_then_answer("lookup", {"sku": "KB-100"}), on_call=2,
                     errors=[TransientModelError("529 overloaded", usage=failed_usage)])
    result = run_production(llm, "stock?", [lookup],
                            config=AgentConfig(clock=clock, sleep=clock.sleep, model_retries=2))
    assert result.stop_cause is StopCause.END_TURN and result.final_text == "done"
    assert runs == ["KB-100"] and llm.calls == 3
    (record,) = result.steps[1].model_retries
    assert record["usage"] == failed_usage.to_dict() and clock.slept == [record["delay_s"]]
    reported = sum((s.usage for s in result.steps), Usage())
    assert result.usage == reported + failed_usage


def test_a_model_that_keeps_failing_ends_the_run_with_model_error_and_the_work_kept():
    lookup, runs = counted_lookup()
    clock = ManualClock()
    llm = FlakyModel(one_call_then_answer("lookup", {"sku": "KB-100"}), on_call=2,
                     errors=[TransientModelError("429 rate limited", retry_after_s=5.0)] * 3)
    result = run_production(llm, "stock?", [lookup],
                            config=AgentConfig(clock=clock, sleep=clock.sleep, model_retries=2))
    assert result.stop_cause is StopCause.MODEL_ERROR
    assert "gave up after 3 failed attempts" in result.stop_detail
    assert runs == ["KB-100"] and len(result.steps) == 1
    assert result.messages[-1]["content"][0]["type"] == "tool_result"
    assert len(clock.slept) == 2 and min(clock.slept) >= 5.0


def test_a_permanent_model_error_ends_the_run_at_once_without_waiting():
    clock = ManualClock()
    llm = FlakyModel(ScriptedLLM(["done"]), on_call=1,
                     errors=[PermanentModelError("400 invalid request: bad tool schema")])
    result = run_production(llm, "hi", config=AgentConfig(clock=clock, sleep=clock.sleep))
    assert result.stop_cause is StopCause.MODEL_ERROR and "400 invalid request" in \
        result.stop_detail
    assert clock.slept == [] and llm.calls == 1


def test_transient_tool_errors_are_tool_errors_so_a_plain_registry_still_reports_them():
    assert issubclass(RateLimited, TransientToolError)
    assert issubclass(ToolTimeout, TransientToolError)
    execution = ToolRegistry([InventoryAPI().tool()]).run(
        tool_use_block("t", "check_inventory", {"sku": "KB-100"}))
    assert execution.error_kind == "tool_error" and "429" in execution.content


def test_a_tool_retry_that_would_pass_the_runs_wall_clock_gives_up_instead_of_waiting():
    clock = ManualClock()

    @tool
    def lookup() -> str:
        """Look something up."""
        raise RateLimited(retry_after_s=250.0)

    config = AgentConfig(wall_clock_s=10, tool_retries=2, clock=clock, sleep=clock.sleep)
    result = run_production(ScriptedLLM([tool_reply(("lookup", {})), "done"]), "go", [lookup],
                            config=config)
    execution = result.executions[0]
    assert clock.slept == [] and execution.attempts == 1
    assert "would pass the run's wall-clock limit" in execution.content
