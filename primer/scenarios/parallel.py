"""Parallel tool calls, measured: fan out one reply's calls, fan their results back in.

Calls the model asks for in one reply cannot depend on each other, so the harness runs them
at the same time (:func:`~primer.loop.steps.execute_tools`): the turn then takes about as
long as its slowest call instead of the sum of all of them. This module makes that visible
with tools that really wait (``time.sleep`` in ordinary, synchronous functions):

- :func:`seeded_latencies` draws the latencies (seconds, seeded, so every run agrees);
- :func:`waiting_tool` is a tool ``wait(k)`` that sleeps call ``k``'s latency × a time scale;
- :func:`measure` runs the same calls one after another, then concurrently, and times both;
- :func:`sweep` does that for 1..N tools; :func:`latency_model` gives the times the
  measurements should approach (sum and max of the latencies), with no clock involved.

A time scale below 1 shrinks every wait by the same factor, so a lesson runs in seconds in
CI; the ratios it prints do not depend on it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from primer.loop.messages import ToolUseBlock, tool_use_block
from primer.loop.steps import execute_tools
from primer.loop.tools import Tool, ToolError, ToolExecution, ToolRegistry, tool

#: The seed the lessons and figures use: its first latencies climb, then the slowest call
#: arrives early enough that the concurrent time flattens within 1..8 tools.
SEED = 7


def seeded_latencies(n: int, low_s: float = 0.2, high_s: float = 1.2,
                     seed: int = SEED) -> list[float]:
    """``n`` latencies in seconds, uniform in ``[low_s, high_s]``, from ``random.Random(seed)``.

    ``ValueError`` for ``n < 0`` or ``low_s > high_s`` or a negative latency.
    """
    if n < 0 or low_s < 0 or low_s > high_s:
        raise ValueError(f"need n >= 0 and 0 <= low_s <= high_s (got n={n}, low_s={low_s}, "
                         f"high_s={high_s})")
    rng = random.Random(seed)
    return [rng.uniform(low_s, high_s) for _ in range(n)]


def waiting_tool(latencies: Sequence[float], time_scale: float = 1.0,
                 fail_on: Collection[int] = (), finished: list[int] | None = None) -> Tool:
    """A synchronous tool ``wait(k)`` that sleeps ``latencies[k] × time_scale`` seconds.

    Calls whose ``k`` is in ``fail_on`` raise :class:`ToolError` after their wait (the
    harness turns that into an error result). When ``finished`` is given, each call appends
    its ``k`` to it as it finishes, so the completion order can be compared with the order
    of the results. ``ValueError`` for a ``time_scale`` that is not positive.
    """
    if time_scale <= 0:
        raise ValueError(f"time_scale must be > 0 (got {time_scale}); 1.0 is real time")
    lock = threading.Lock()

    @tool
    def wait(k: int) -> str:
        """Wait as long as call k takes, then report it. Use it to simulate a slow lookup.

        Args:
            k: which call this is (0-based); picks its latency.
        """
        if not 0 <= k < len(latencies):
            raise ToolError(f"k must be between 0 and {len(latencies) - 1}, got {k}")
        time.sleep(latencies[k] * time_scale)
        if finished is not None:
            with lock:
                finished.append(k)
        if k in fail_on:
            raise ToolError(f"call {k} failed: the service answered 503; try again later")
        return f"call {k} done"

    return wait


def fan_out_calls(n: int) -> list[ToolUseBlock]:
    """``n`` ``tool_use`` blocks ``wait(k=0) … wait(k=n−1)`` with ids ``toolu_wait_<k>``."""
    return [tool_use_block(f"toolu_wait_{k}", "wait", {"k": k}) for k in range(n)]


@dataclass(frozen=True)
class LatencyRun:
    """One measurement of ``n`` calls (all times in seconds of real, scaled time).

    ``sequential_s`` and ``concurrent_s`` are the wall times of the two runs; ``sum_s`` and
    ``slowest_s`` what they should approach (the sum and the max of the scaled latencies).
    """

    n: int
    sequential_s: float
    concurrent_s: float
    sum_s: float
    slowest_s: float

    @property
    def sequential_ratio(self) -> float:
        """Sequential wall time ÷ the sum of the latencies (about 1)."""
        return self.sequential_s / self.sum_s

    @property
    def concurrent_ratio(self) -> float:
        """Concurrent wall time ÷ the slowest call (about 1: the turn waits only for it)."""
        return self.concurrent_s / self.slowest_s

    @property
    def speedup(self) -> float:
        """Sequential ÷ concurrent wall time."""
        return self.sequential_s / self.concurrent_s


def latency_model(latencies: Sequence[float]) -> tuple[float, float]:
    """``(sum, max)`` of ``latencies``: the sequential and concurrent times with zero overhead."""
    return (sum(latencies), max(latencies, default=0.0))


def measure(latencies: Sequence[float], time_scale: float = 1.0,
            max_workers: int = 16) -> tuple[LatencyRun, list[ToolExecution]]:
    """Run ``wait(0) … wait(n−1)`` one after another, then concurrently; time both.

    The concurrent run is :func:`~primer.loop.steps.execute_tools` (the loop's own fan-out,
    pool sized to the calls, at most ``max_workers`` threads). Returns the measurement and
    the concurrent run's executions (in request order).
    """
    registry = ToolRegistry([waiting_tool(latencies, time_scale)])
    calls = fan_out_calls(len(latencies))
    start = time.perf_counter()
    for block in calls:
        registry.run(block)
    sequential = time.perf_counter() - start
    start = time.perf_counter()
    executions = execute_tools(registry, calls, max_workers=max_workers)
    concurrent = time.perf_counter() - start
    total, slowest = latency_model([t * time_scale for t in latencies])
    return LatencyRun(len(latencies), sequential, concurrent, total, slowest), executions


def sweep(max_tools: int = 8, *, time_scale: float = 1.0, seed: int = SEED,
          low_s: float = 0.2, high_s: float = 1.2) -> list[LatencyRun]:
    """:func:`measure` for 1..``max_tools`` tools: run ``n`` uses the first ``n`` latencies.

    Real time taken: about ``time_scale × Σ_n (sum + max of the first n latencies)``.
    """
    latencies = seeded_latencies(max_tools, low_s, high_s, seed)
    return [measure(latencies[:n], time_scale)[0] for n in range(1, max_tools + 1)]
