"""Measure the eval engine on a Dask LocalCluster: rows per second and the driver's peak memory.

Usage: python scripts/bench_evals.py [--tasks 2000] [--hops 2]

For 1 and then 2 worker processes (one thread each), it starts a LocalCluster, warms it up,
runs ``--tasks`` short relay tasks (``--hops`` tool calls each, scripted model) with rows
streamed to a results file, and prints rows per second. A second pass of the same run under
``tracemalloc`` gives the driver's peak Python memory (the driver is this process: it runs
``run_evals``, the Dask client and, on a LocalCluster, the scheduler); tracemalloc slows the
driver, so the two figures come from separate passes. A last pass with a tenth of the tasks
shows whether the peak grows with the number of tasks. The load average is printed first:
on a busy machine every figure moves.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import tracemalloc
from pathlib import Path

import distributed

from primer.agents import run_evals
from primer.scenarios.relay import SkilledModel, make_tools, relay_task


def one_run(client: distributed.Client, tasks: int, hops: int, out: Path, *,
            memory: bool) -> tuple[float, int]:
    """Seconds for one run of ``tasks`` tasks, and the driver's peak bytes (0 unless
    ``memory``)."""
    suite = [relay_task(seed, hops) for seed in range(tasks)]  # the input, not counted
    if memory:
        tracemalloc.start()
    start = time.perf_counter()
    report = run_evals(suite, SkilledModel(0.9), make_tools, executor=client, results=out,
                       resume=False, progress=False)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] if memory else 0
    if memory:
        tracemalloc.stop()
    assert report.summary.trials == tasks
    return seconds, peak


def main() -> None:
    """Run the measurement and print one line per setting."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--hops", type=int, default=2)
    args = parser.parse_args()
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.jsonl"
        for workers in (1, 2):
            with distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                          processes=True, dashboard_address=None) as cluster, \
                    distributed.Client(cluster) as client:
                one_run(client, 50, args.hops, out, memory=False)  # warm up imports
                seconds, _ = one_run(client, args.tasks, args.hops, out, memory=False)
                _, peak = one_run(client, args.tasks, args.hops, out, memory=True)
                _, small_peak = one_run(client, args.tasks // 10, args.hops, out, memory=True)
                print(f"{workers} worker(s): {args.tasks} tasks in {seconds:.1f} s = "
                      f"{args.tasks / seconds:.0f} rows/s; driver peak "
                      f"{peak / 2**20:.1f} MiB ({args.tasks // 10} tasks: "
                      f"{small_peak / 2**20:.1f} MiB)")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
