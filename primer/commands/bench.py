"""``python -m primer bench``: what the harness itself costs, measured on this machine.

Three measurements, one printed line each as it finishes:

1. **Overhead per step** (µs/step, median of repeated runs) of :func:`run_agent` driven by a
   zero-latency model (:class:`ZeroLatencyLLM`: a prebuilt reply, fixed usage, no token
   estimate) asking for one trivial tool call per step, at 200 and at 1,000 steps, with loop
   detection off and no budget or step limit in the way. Target: at most 100 µs/step, and
   flat: the 1,000-step figure at most 1.2× the 200-step one (the harness keeps its token
   estimate, usage totals and repeat counts incrementally). The same runs with the real
   :class:`~primer.agents.ScriptedLLM` show that its incremental token estimate is flat too.
2. **Fan-out efficiency**: wall time of one turn of N concurrent calls to ordinary
   (synchronous, sleeping) tools of 50–300 ms, seeded, divided by the slowest call, for N in
   1, 2, 4, 8, 16, 32. Target: at most 1.05× at 8 calls. The pool is sized to the calls of
   the turn under ``AgentConfig.max_parallel_tools`` (set to 32 here, so no call waits for a
   thread).
3. **Peak memory** of a 1,000-step run (``tracemalloc``, MiB): the message list, the steps
   and the trace the run keeps.

Each overhead figure is given twice: wall-clock µs/step and the process's CPU µs/step. With
the default config (a 30 s tool timeout) every call is handed to a worker thread and back,
so the wall figure includes that round trip; a second pair of lines runs with
``tool_timeout_s=None``, where the call runs in the loop's own thread.

What limits these figures: the overhead includes the tool's argument validation (a compiled
fastjsonschema check, jsonschema only for rejected input), building the reply and result
blocks, the characters/4 token estimate of each new message and the garbage collector; it
excludes any real model time. On a busy machine the wall figures include time spent waiting
for a CPU (the load average is printed first) and the thread hand-off gets much slower; the
CPU figures are the steadier measure of the harness's own work. Medians of repeats.
Fan-out includes thread start-up and the sleep's own overshoot (a few hundred µs per call).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from primer.agents import (
    LLM,
    AgentConfig,
    Reply,
    ScriptedLLM,
    Usage,
    run_agent,
    text_reply,
    tool,
    tool_reply,
)
from primer.agents.messages import Message, text_block, tool_use_block
from primer.agents.parallel import seeded_latencies, waiting_tool

#: Targets the benchmark checks (see the module docstring).
OVERHEAD_TARGET_US = 100.0
FLATNESS_TARGET = 1.2
FANOUT_TARGET = 1.05
FANOUT_SIZES = (1, 2, 4, 8, 16, 32)


@tool
def noop(i: int) -> str:
    """Return ok (a trivial tool for measuring the harness).

    Args:
        i: the step number
    """
    return "ok"


class ZeroLatencyLLM:
    """A model that costs nothing: ``steps − 1`` tool calls to ``noop``, then an answer.

    Each reply is built from constants with a fixed :class:`Usage` (no token estimate, no look
    at the message list), so timing a run measures the harness alone.
    """

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.calls = 0
        self._usage = Usage(100, 10)

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int) -> Reply:
        self.calls += 1
        if self.calls >= self.steps:
            return Reply([text_block("done")], "end_turn", self._usage, "zero")
        return Reply([tool_use_block(f"toolu_{self.calls}", "noop", {"i": self.calls})],
                     "tool_use", self._usage, "zero")


def scripted_llm(steps: int) -> ScriptedLLM:
    """The real :class:`ScriptedLLM` with the same script as :class:`ZeroLatencyLLM`."""

    def policy(messages: list[Message]) -> Reply:
        n = (len(messages) + 1) // 2
        return text_reply("done") if n >= steps else tool_reply(("noop", {"i": n}))

    return ScriptedLLM(policy, name="bench model")


def bench_config(steps: int, **overrides: Any) -> AgentConfig:
    """A config that lets a run take ``steps`` steps: no loop detection, no budget."""
    return AgentConfig(max_steps=steps, token_budget=None, repeat_threshold=None,
                       context_window=10**12, **overrides)


@dataclass(frozen=True)
class Overhead:
    """Median time per step of repeated runs: ``wall_us`` (wall clock) and ``cpu_us`` (CPU
    time of this process, all threads), both µs/step."""

    steps: int
    wall_us: float
    cpu_us: float


def overhead_us_per_step(steps: int, *, repeats: int = 7,
                         make_llm: Callable[[int], LLM] = ZeroLatencyLLM,
                         **config: Any) -> Overhead:
    """Median wall and CPU time per step (µs) of ``repeats`` runs of ``steps`` steps each.

    ``config`` overrides settings of :func:`bench_config` (e.g. ``tool_timeout_s=None``).
    Raises ``RuntimeError`` if a run does not take exactly ``steps`` steps (the figure would
    then measure something else).
    """
    walls, cpus = [], []
    for _ in range(repeats):
        llm, cfg = make_llm(steps), bench_config(steps, **config)
        wall, cpu = time.perf_counter(), time.process_time()
        result = run_agent(llm, "benchmark", [noop], config=cfg)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        if len(result.steps) != steps or result.stop_cause.value != "end_turn":
            raise RuntimeError(f"benchmark run took {len(result.steps)} steps and stopped "
                               f"with {result.stop_cause.value}, expected {steps} and end_turn")
    return Overhead(steps, statistics.median(walls) / steps * 1e6,
                    statistics.median(cpus) / steps * 1e6)


@dataclass(frozen=True)
class FanOut:
    """One fan-out measurement: ``calls`` calls, wall and slowest call (seconds), ratio."""

    calls: int
    wall_s: float
    slowest_s: float

    @property
    def efficiency(self) -> float:
        """Wall time ÷ slowest call (1.0 is perfect concurrency)."""
        return self.wall_s / self.slowest_s


def fan_out(calls: int, *, seed: int = 0, repeats: int = 3) -> FanOut:
    """Median wall time of a run whose one tool turn asks for ``calls`` concurrent calls.

    The model (zero latency) asks for ``wait(0) … wait(calls − 1)`` in one reply, then
    answers; the whole ``run_agent`` call is timed, harness included.
    """
    latencies = seeded_latencies(calls, 0.05, 0.3, seed=seed)
    wait = waiting_tool(latencies)
    script = [tool_reply(*[("wait", {"k": k}) for k in range(calls)]), text_reply("done")]
    walls = []
    for _ in range(repeats):
        config = bench_config(2, max_parallel_tools=max(FANOUT_SIZES))
        start = time.perf_counter()
        run_agent(ScriptedLLM(script), "fan out", [wait], config=config)
        walls.append(time.perf_counter() - start)
    return FanOut(calls, statistics.median(walls), max(latencies))


def peak_memory_mib(steps: int = 1_000) -> float:
    """Peak traced memory (MiB) of one run of ``steps`` steps with the zero-latency model."""
    tracemalloc.start()
    try:
        run_agent(ZeroLatencyLLM(steps), "benchmark", [noop], config=bench_config(steps))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 2**20


def register(subparsers: Any) -> None:
    """Add the ``bench`` sub-command to ``subparsers`` (an argparse sub-parsers action)."""
    p = subparsers.add_parser(
        "bench", help="measure the harness's overhead, fan-out efficiency and memory",
        description="Measure the loop's own overhead per step, the efficiency of concurrent "
                    "tool calls and the peak memory of a long run; one line per figure.")
    p.add_argument("--repeats", type=int, default=7,
                   help="runs per overhead figure; the median is reported (default 7)")
    p.add_argument("--quick", action="store_true",
                   help="fewer repeats and fan-out sizes up to 8 (a smoke test)")
    p.add_argument("--strict", action="store_true",
                   help="exit with code 1 when a target is missed")
    p.set_defaults(func=run)


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def _repeats_for(steps: int, repeats: int) -> int:
    """Runs for a figure: ``repeats`` at 1,000 steps, proportionally more for shorter runs,
    so each median is taken over about the same number of steps."""
    return max(repeats, repeats * 1_000 // steps)


def _overhead_lines(label: str, repeats: int, **config: Any) -> tuple[bool, list[Overhead]]:
    print(f"  {label}:", flush=True)
    ok, rows = True, []
    for steps in (200, 1_000):
        o = overhead_us_per_step(steps, repeats=_repeats_for(steps, repeats), **config)
        rows.append(o)
        good = o.wall_us <= OVERHEAD_TARGET_US
        ok &= good
        print(f"    {steps:>5,} steps: {o.wall_us:7.1f} µs/step wall, {o.cpu_us:6.1f} µs/step CPU"
              f"  (target <= {OVERHEAD_TARGET_US:.0f} wall)  {_verdict(good)}", flush=True)
    wall_growth = rows[1].wall_us / rows[0].wall_us
    cpu_growth = rows[1].cpu_us / rows[0].cpu_us
    flat = wall_growth <= FLATNESS_TARGET
    print(f"    growth 200 -> 1,000 steps: {wall_growth:.2f}x wall, {cpu_growth:.2f}x CPU  "
          f"(target <= {FLATNESS_TARGET})  {_verdict(flat)}", flush=True)
    return ok and flat, rows


def run(args: argparse.Namespace) -> int:
    """Run every measurement, printing one line each; exit code 0 (with ``--strict``, 1 if a
    target is missed; 2 for bad arguments)."""
    if args.repeats < 1:
        print("bench: --repeats must be at least 1")
        return 2
    repeats = 2 if args.quick else args.repeats
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f} over the last minute "
          f"(wall figures include waiting for a CPU; CPU figures do not)", flush=True)
    print(f"harness overhead (zero-latency model, one tool call a step; median of "
          f"{_repeats_for(200, repeats)} runs of 200 steps, {repeats} of 1,000):", flush=True)
    ok, _ = _overhead_lines("default config (30 s tool timeout: each call handed to a worker "
                            "thread)", repeats)
    _overhead_lines("no tool timeout (the call runs in the loop's thread)", repeats,
                    tool_timeout_s=None)
    scripted = [overhead_us_per_step(n, repeats=_repeats_for(n, repeats),
                                     make_llm=scripted_llm, tool_timeout_s=None)
                for n in (200, 1_000)]
    print(f"  ScriptedLLM instead (its incremental token estimate included), no tool timeout: "
          f"{scripted[0].cpu_us:.1f} -> {scripted[1].cpu_us:.1f} µs/step CPU, growth "
          f"{scripted[1].cpu_us / scripted[0].cpu_us:.2f}x", flush=True)

    print("fan-out (one turn of N synchronous 50-300 ms calls; wall / slowest call):",
          flush=True)
    sizes = [n for n in FANOUT_SIZES if n <= 8] if args.quick else list(FANOUT_SIZES)
    for n in sizes:
        f = fan_out(n, repeats=1 if args.quick else 3)
        line = f"  {n:>2} calls: {f.efficiency:.3f}x the slowest call"
        if n == 8:
            good = f.efficiency <= FANOUT_TARGET
            ok &= good
            line += f"  (target <= {FANOUT_TARGET})  {_verdict(good)}"
        print(line, flush=True)

    print(f"peak memory of a 1,000-step run: {peak_memory_mib(1_000):.1f} MiB", flush=True)
    return 1 if args.strict and not ok else 0
