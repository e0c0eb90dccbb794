"""The benchmark's pieces measure what they say (no timing targets are asserted here)."""

from __future__ import annotations

from primer.__main__ import main
from primer.agents import run_agent
from primer.commands.bench import (
    ZeroLatencyLLM,
    bench_config,
    fan_out,
    noop,
    overhead_us_per_step,
    peak_memory_mib,
    scripted_llm,
)


def test_the_zero_latency_model_runs_exactly_the_steps_asked_for_with_one_call_each():
    result = run_agent(ZeroLatencyLLM(50), "b", [noop], config=bench_config(50))
    assert len(result.steps) == 50 and result.stop_cause.value == "end_turn"
    assert [len(s.executions) for s in result.steps] == [1] * 49 + [0]


def test_the_scripted_model_follows_the_same_script():
    result = run_agent(scripted_llm(30), "b", [noop], config=bench_config(30))
    assert len(result.steps) == 30 and len(result.executions) == 29


def test_overhead_is_a_positive_wall_and_cpu_time_per_step_with_or_without_a_timeout():
    for config in ({}, {"tool_timeout_s": None}):
        o = overhead_us_per_step(20, repeats=1, **config)
        assert o.steps == 20 and o.wall_us > 0 and o.cpu_us > 0


def test_fan_out_efficiency_is_wall_time_over_the_slowest_call_and_at_least_one():
    f = fan_out(4, repeats=1)
    assert f.efficiency == f.wall_s / f.slowest_s >= 1.0


def test_peak_memory_of_a_short_run_is_reported_in_mib():
    assert 0 < peak_memory_mib(50) < 50


def test_bench_quick_prints_one_line_per_figure(capsys):
    main(["bench", "--quick"])
    out = capsys.readouterr().out
    assert out.count("      200 steps:") == 2 and out.count("    1,000 steps:") == 2
    assert out.count("x the slowest call") == 4
    assert "peak memory of a 1,000-step run" in out
