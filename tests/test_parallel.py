"""Fan-out / fan-in with tools that really wait (at a small time scale)."""

from __future__ import annotations

import pytest

from primer.loop.steps import execute_tools
from primer.loop.tools import ToolRegistry
from primer.scenarios.parallel import (
    fan_out_calls,
    latency_model,
    measure,
    seeded_latencies,
    waiting_tool,
)

SCALE = 0.1


def test_seeded_latencies_repeat_exactly_and_stay_in_their_range():
    a, b = seeded_latencies(8, seed=3), seeded_latencies(8, seed=3)
    assert a == b and all(0.2 <= t <= 1.2 for t in a)
    assert seeded_latencies(8, seed=4) != a


def test_the_latency_model_is_the_sum_one_after_another_and_the_max_concurrently():
    assert latency_model([0.5, 0.25, 1.0]) == (1.75, 1.0)


def test_results_come_back_in_request_order_even_when_the_first_call_is_slowest():
    finished: list[int] = []
    registry = ToolRegistry([waiting_tool([1.2, 0.2, 0.6], 0.05, finished=finished)])
    results = execute_tools(registry, fan_out_calls(3))
    assert [r.tool_use_id for r in results] == ["toolu_wait_0", "toolu_wait_1", "toolu_wait_2"]
    assert finished == [1, 2, 0]


def test_one_failing_call_does_not_lose_its_siblings_results():
    registry = ToolRegistry([waiting_tool([0.3, 0.2, 0.4], SCALE, fail_on={1})])
    results = execute_tools(registry, fan_out_calls(3))
    assert [r.is_error for r in results] == [False, True, False]
    assert results[0].content == "call 0 done" and results[2].content == "call 2 done"
    assert "503" in results[1].content


def test_concurrent_calls_take_about_the_slowest_call_and_sequential_ones_the_sum():
    latencies = seeded_latencies(8)
    run, executions = measure(latencies, SCALE)
    assert len(executions) == 8 and not any(e.is_error for e in executions)
    assert run.sequential_s >= run.sum_s          # sleeps never end early
    assert run.concurrent_s >= run.slowest_s
    assert run.concurrent_s < run.sum_s / 2       # the sum is over 4x the slowest call here
    assert run.sum_s == pytest.approx(sum(latencies) * SCALE)


def test_a_time_scale_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match="time_scale must be > 0"):
        waiting_tool([0.1], 0)


def test_eight_seeded_tools_run_five_times_faster_concurrently_in_the_model():
    latencies = seeded_latencies(8)
    total, slowest = latency_model(latencies)
    assert slowest == latencies[2]                  # the third call is the slowest of eight
    assert (round(total, 2), round(slowest, 2)) == (4.27, 0.85)
    assert round(total / slowest, 1) == 5.0
