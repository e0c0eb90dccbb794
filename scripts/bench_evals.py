"""Measure the eval engine on Dask: rows per second and the driver's peak memory, 1 vs 2 workers.

Usage: python scripts/bench_evals.py [--tasks 2000] [--hops 2]

Two layouts, each with 1 and then 2 worker processes (one thread each):

* ``scheduler process``: a scheduler and workers started as their own processes on this
  machine (``python -m distributed.cli.dask_scheduler`` / ``dask_worker``, loopback only),
  as on a real cluster; the driver (this process) runs only ``run_evals`` and the client.
* ``LocalCluster``: ``distributed.LocalCluster``, whose scheduler runs inside the driver
  process, as in the tests.
* ``scheduler process, message log off``: the first layout with Dask's log of the client's
  last 1,000 message batches (``distributed.admin.low-level-log-length``, kept for
  debugging, and holding every submitted trial of those batches) set to 0.

For each, after a warm-up, ``--tasks`` short relay tasks (``--hops`` tool calls each, a
scripted model) run with rows streamed to a results file: rows per second from one run, and
the driver's peak Python memory (``tracemalloc``) from a second run of the same size, since
tracemalloc slows the driver. A run of a tenth of the tasks shows how the peak grows with the
number of tasks. The load average is printed before and after: on a busy machine every figure
moves. The scheduler and workers it starts are stopped when it ends.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import dask
import distributed

from primer.harness.evals.run import run_evals
from primer.scenarios.relay import SkilledModel, make_tools, relay_task


def one_run(client: distributed.Client, tasks: int, hops: int, out: Path, *,
            memory: bool) -> tuple[float, int]:
    """Seconds for one run of ``tasks`` tasks, and the driver's peak bytes (0 unless
    ``memory``); the task list is built before measuring (it is the input)."""
    suite = [relay_task(seed, hops) for seed in range(tasks)]
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


@contextlib.contextmanager
def separate_processes(workers: int, folder: Path) -> Iterator[distributed.Client]:
    """A scheduler and ``workers`` worker processes of their own, and a client to them."""
    address_file = folder / "scheduler.json"
    address_file.unlink(missing_ok=True)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", "0", "--no-dashboard", "--scheduler-file", str(address_file)], **quiet)
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
         str(address_file), "--host", "127.0.0.1", "--nworkers", str(workers),
         "--nthreads", "1", "--no-dashboard"], **quiet)
    try:
        deadline = time.monotonic() + 60
        while not address_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        with distributed.Client(scheduler_file=str(address_file), timeout="30s") as client:
            client.wait_for_workers(workers, timeout=60)
            yield client
    finally:
        for proc in (worker, scheduler):
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def local_cluster(workers: int, folder: Path) -> Iterator[distributed.Client]:
    """A LocalCluster (its scheduler in this process) and a client to it."""
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        yield client


def main() -> None:
    """Run the measurement and print one line per layout and worker count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--hops", type=int, default=2)
    args = parser.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min): {load}; {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        out = folder / "results.jsonl"
        no_log = {"distributed.admin.low-level-log-length": 0}
        for layout, start, config in (("scheduler process", separate_processes, {}),
                                      ("LocalCluster", local_cluster, {}),
                                      ("scheduler process, message log off",
                                       separate_processes, no_log)):
            for workers in (1, 2):
                with dask.config.set(config), start(workers, folder) as client:
                    one_run(client, 50, args.hops, out, memory=False)  # warm up imports
                    seconds, _ = one_run(client, args.tasks, args.hops, out, memory=False)
                    _, peak = one_run(client, args.tasks, args.hops, out, memory=True)
                    _, small = one_run(client, args.tasks // 10, args.hops, out, memory=True)
                print(f"{layout}, {workers} worker(s): {args.tasks} tasks in {seconds:.1f} s "
                      f"= {args.tasks / seconds:.0f} rows/s; driver peak "
                      f"{peak / 2**20:.1f} MiB ({args.tasks // 10} tasks: "
                      f"{small / 2**20:.1f} MiB)", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
