"""Where eval trials run: one small interface over a ``concurrent.futures`` executor and a
Dask client, so :func:`~primer.harness.evals.run.run_evals` has one driver loop for both.

A pool takes trials (``submit``), hands back the rows of those that finished
(``wait_some``, blocking until at least one has) and says how many are in flight
(``len``). The driver submits only up to a window, so neither the driver nor the scheduler
ever holds every trial at once; a Dask future is released as soon as its row is read, so
the cluster does not keep finished results either. (Dask's client keeps its last 1,000
message batches for debugging, submitted trials included: a few MiB on a long run. Set
``distributed.admin.low-level-log-length`` to 0 before creating the client for a driver
whose memory stays flat; ``scripts/bench_evals.py`` measures both.)
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from typing import TYPE_CHECKING, Any, Protocol

from .results import EvalRow

if TYPE_CHECKING:
    import distributed

#: One trial's work: a picklable ``work(task) -> EvalRow`` (``run_task`` with its arguments).
Work = Callable[[Any], EvalRow]


class Pool(Protocol):
    """What the driver needs of a place to run trials."""

    def submit(self, work: Work, task: Any) -> None:
        """Start ``work(task)``."""

    def wait_some(self) -> list[EvalRow]:
        """Block until at least one trial in flight finished; return the finished rows."""

    def __len__(self) -> int:
        """Trials in flight."""

    def cancel(self) -> None:
        """Cancel every trial not finished yet (those running may still finish)."""

    def default_window(self) -> int:
        """How many trials to keep in flight when the caller does not say."""


class ExecutorPool:
    """A :class:`concurrent.futures.Executor` (threads, processes, anything alike)."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.inflight: set[Future[EvalRow]] = set()

    def submit(self, work: Work, task: Any) -> None:
        """Start ``work(task)`` on the executor."""
        self.inflight.add(self.executor.submit(work, task))

    def wait_some(self) -> list[EvalRow]:
        """The rows of the trials that finished, waiting for at least one."""
        finished, running = wait(self.inflight, return_when=FIRST_COMPLETED)
        self.inflight = set(running)
        return [f.result() for f in finished]

    def __len__(self) -> int:
        """Trials in flight."""
        return len(self.inflight)

    def cancel(self) -> None:
        """Cancel the trials not started yet."""
        for f in self.inflight:
            f.cancel()

    def default_window(self) -> int:
        """Twice the executor's workers when it says how many (thread and process pools
        do), else 16: enough to keep every worker busy while the driver writes rows."""
        workers = getattr(self.executor, "_max_workers", None)
        return max(2, 2 * workers) if isinstance(workers, int) else 16


class DaskPool:
    """A ``distributed.Client``: trials are submitted with ``pure=False`` (equal arguments
    are still separate trials) and each future is released once its row is read."""

    def __init__(self, client: distributed.Client) -> None:
        import distributed

        self.client = client
        # with_results: the client fetches each row in the background as its trial ends, so
        # the driver never waits for one round trip to a worker per row
        self.finished = distributed.as_completed(with_results=True)
        self.pending: set[Any] = set()

    def submit(self, work: Work, task: Any) -> None:
        """Submit ``work(task)`` to the cluster."""
        future = self.client.submit(work, task, pure=False)
        self.pending.add(future)
        self.finished.add(future)

    def wait_some(self) -> list[EvalRow]:
        """The rows of the trials that finished (fetched already), waiting for at least one;
        their futures are released."""
        rows = []
        for future, row in self.finished.next_batch(block=True):
            self.pending.discard(future)
            future.release()
            rows.append(row)
        return rows

    def __len__(self) -> int:
        """Trials in flight."""
        return len(self.pending)

    def cancel(self) -> None:
        """Cancel every trial not finished yet."""
        if self.pending:
            self.client.cancel(list(self.pending))
            self.pending.clear()

    def default_window(self) -> int:
        """32 trials per worker thread, at least 64: a trial's round trip through the
        scheduler takes longer than a short trial, so more must wait in line (measured on
        a LocalCluster: see scripts/bench_evals.py)."""
        threads = sum(self.client.nthreads().values())
        return max(64, 32 * threads)


def as_pool(executor: Executor | distributed.Client) -> Pool:
    """The pool for ``executor``: a ``distributed.Client``, or the Dask executor of one
    (``client.get_executor()``), becomes a :class:`DaskPool`; any other
    :class:`concurrent.futures.Executor` an :class:`ExecutorPool`. ``TypeError`` otherwise."""
    module = type(executor).__module__
    if module.startswith("distributed"):
        client = getattr(executor, "_client", None) if isinstance(executor, Executor) else (
            executor)
        if client is not None and hasattr(client, "submit") and hasattr(client, "nthreads"):
            return DaskPool(client)
    if isinstance(executor, Executor):
        return ExecutorPool(executor)
    raise TypeError(f"executor must be a concurrent.futures.Executor or a distributed.Client "
                    f"(got {type(executor).__name__})")

