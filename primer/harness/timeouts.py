"""Timeouts: run a call so the harness can stop waiting for it, or kill it in a process.

Every tool call gets a limit in seconds. :func:`call_with_timeout` runs a call on a
long-lived daemon worker thread and stops *waiting* for it at the limit
(:class:`~primer.harness.retry.ToolTimeout`); the workers are daemon threads, so a tool that
never returns can keep neither the run nor the interpreter's exit waiting.
(``concurrent.futures`` pools are not used for this: since Python 3.9 their workers are
joined at interpreter exit, so one hung call would hang exit.)

Handing a call to another thread and back costs two thread wake-ups (tens of microseconds on
a virtual machine), more than the rest of a step. So the agent loop turns the roles around
(:func:`run_watched`): the loop itself runs on a daemon worker thread and the caller's thread
is the *watchdog*. A reply's single call then runs inline in the loop's thread with no
hand-off; the watchdog sleeps until that call's deadline, and if the call is still running
then, it answers it with a timeout (:class:`HungCall`) and carries the run on from the state
on a fresh thread, while the stuck thread is abandoned: whatever its tool returns later is
discarded. A reply's several calls still fan out on a pool, each waited for with its own
limit.

What a thread cannot do: Python has no way to stop another thread. A timed-out call is
*abandoned*, not stopped; it keeps running in the background and its side effect (a refund,
an email) may still happen after the harness reported a timeout. To run a tool that may hang
somewhere it can really be stopped, use :func:`run_in_subprocess` (or wrap its function with
:func:`in_subprocess`): the call runs in a fresh process that is killed on timeout.
"""

from __future__ import annotations

import contextvars
import functools
import multiprocessing
import os
import pickle
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from primer.loop.messages import Block
from primer.loop.tools import ToolError

from .retry import ToolTimeout
from .subprocess_child import run_and_send

R = TypeVar("R")


# ---------------------------------------------------------------- daemon worker threads

class _Job:
    """One timed call. ``done`` is a lock held until the call finishes (a bare lock is the
    cheapest thing one thread can wait on with a timeout while another releases it)."""

    __slots__ = ("fn", "done", "value", "error")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Lock()
        self.done.acquire()
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.value = self.fn()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            self.error = e
        finally:
            self.done.release()


class _DaemonWorkers:
    """Long-lived daemon threads that run timed calls; grows when every worker is busy.

    A worker stuck in a hung call stays busy forever; the next call gets a new worker.
    Daemon threads do not keep the interpreter from exiting.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self.started = 0

    def submit(self, fn: Callable[[], Any]) -> _Job:
        job = _Job(fn)
        with self._lock:
            if self._idle:
                self._idle -= 1      # reserve an idle worker for this job
            else:
                self.started += 1
                threading.Thread(target=self._work, name=f"tool-timeout-{self.started}",
                                 daemon=True).start()
        self._jobs.put(job)
        return job

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            job.run()
            del job
            with self._lock:
                self._idle += 1


_WORKERS = _DaemonWorkers()
if hasattr(os, "register_at_fork"):  # a forked child has none of the parent's worker threads
    os.register_at_fork(after_in_child=_WORKERS.__init__)


def start_daemon(fn: Callable[[], Any]) -> None:
    """Run ``fn()`` on a long-lived daemon worker thread and return at once (the async loop
    hands sync tools and models to these threads; a hung one never blocks exit)."""
    _WORKERS.submit(fn)


def call_with_timeout(fn: Callable[[], Any], timeout_s: float | None, *,
                      block: Block | None = None,
                      attempts: list[dict[str, Any]] | None = None) -> Any:
    """``fn()``, but raise :class:`ToolTimeout` if it has not returned after ``timeout_s`` s.

    With ``timeout_s=None`` the call runs in the calling thread (no thread hand-off). On a
    watched loop thread, inside :class:`inline_calls`, it runs inline too, and the watchdog
    answers it if it passes ``timeout_s`` (``block`` and ``attempts`` are the call and its
    attempt log so far, for the thread that carries the run on; see :func:`run_watched`).
    Else it runs on a long-lived daemon worker thread; on timeout the worker is abandoned
    (Python cannot stop a thread), so the call may still finish later, side effects
    included. Exceptions raised by ``fn`` are re-raised in the caller.
    """
    if timeout_s is None:
        return fn()
    watch = _local.watch
    if (watch is not None and watch.section is not None and watch.armed is None
            and block is not None):
        return _run_inline(watch, fn, _Armed(time.monotonic() + timeout_s, block,
                                             attempts if attempts is not None else [],
                                             timeout_s))
    context = contextvars.copy_context()  # the caller's context (its current run) goes along
    start = time.monotonic()
    job = _WORKERS.submit(lambda: context.run(fn))
    if not job.done.acquire(timeout=timeout_s):
        raise ToolTimeout(timeout_s)
    if time.monotonic() - start > timeout_s:  # the waiter could not wake in time (the GIL)
        raise ToolTimeout.finished_late(timeout_s, time.monotonic() - start)
    if job.error is not None:
        raise job.error
    return job.value


# ---------------------------------------------------------------- the watched loop thread


class Abandoned(BaseException):
    """Raised in a loop thread whose run another thread carried on (never seen by callers).

    A ``BaseException`` so that no ``except Exception`` between the tool and the thread's
    top turns it into a result: the abandoned thread unwinds and touches the run no more.
    """


@dataclass
class HungCall:
    """A call that passed its time limit inline on a watched loop thread.

    ``section`` is what the loop was doing (what it gave :class:`inline_calls`), ``block``
    the ``tool_use`` block as the runner got it, ``attempts`` its attempt log before the hung
    attempt (a list the thread carrying the run on may extend), ``timeout_s`` the limit it
    passed (seconds).
    """

    section: Any
    block: Block
    attempts: list[dict[str, Any]]
    timeout_s: float


class _Armed:
    """The inline attempt a watched thread is running: its deadline (monotonic seconds)."""

    __slots__ = ("deadline", "block", "attempts", "timeout_s")

    def __init__(self, deadline: float, block: Block, attempts: list[dict[str, Any]],
                 timeout_s: float) -> None:
        self.deadline, self.block, self.attempts, self.timeout_s = (deadline, block, attempts,
                                                                    timeout_s)


class _Watch:
    """One watched loop thread: the section it is in, its armed attempt, whether it was taken
    over. ``lock`` decides the race between a call returning and the watchdog's deadline."""

    __slots__ = ("lock", "section", "armed", "taken")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.section: Any = None
        self.armed: _Armed | None = None
        self.taken = False


class _Local(threading.local):
    """This thread's watch, if it is a watched loop thread (a class default: reading it
    when unset costs no exception)."""

    watch: _Watch | None = None


_local = _Local()


def _run_inline(watch: _Watch, fn: Callable[[], Any], armed: _Armed) -> Any:
    watch.armed = armed
    try:
        value = fn()
    finally:
        with watch.lock:
            watch.armed = None
            if watch.taken:  # the watchdog answered this call and another thread carries on
                raise Abandoned  # noqa: B012 - discards the late result, by design
    now = time.monotonic()
    if now > armed.deadline:  # the watchdog could not wake in time (the call held the GIL)
        raise ToolTimeout.finished_late(armed.timeout_s,
                                        now - armed.deadline + armed.timeout_s)
    return value


class inline_calls:  # noqa: N801 - used as a statement: ``with inline_calls(section):``
    """Inside this block, a timed call made by this watched loop thread runs inline.

    ``section`` is whatever the loop needs to carry the run on if that call hangs (it comes
    back as :attr:`HungCall.section`). Outside a watched thread this does nothing.
    """

    __slots__ = ("watch", "section")

    def __init__(self, section: Any) -> None:
        self.watch: _Watch | None = _local.watch
        self.section = section

    def __enter__(self) -> None:
        if self.watch is not None:
            self.watch.section = self.section

    def __exit__(self, *exc: object) -> None:
        if self.watch is not None:
            self.watch.section = None


def watched() -> bool:
    """Whether this thread is a watched loop thread (see :func:`run_watched`)."""
    return _local.watch is not None


def raise_if_abandoned() -> None:
    """Raise :class:`Abandoned` in a loop thread whose run was given up (the caller was
    interrupted); a no-op anywhere else. Called before each model call."""
    watch = _local.watch
    if watch is not None and watch.taken:
        raise Abandoned


class _WatchedRun(Generic[R]):
    """One run on watched worker threads: the current thread's watch and the outcome."""

    def __init__(self, carry_on: Callable[[HungCall], R]) -> None:
        self.carry_on = carry_on
        self.context = contextvars.copy_context()  # the caller's context, in every thread
        self.finished = threading.Lock()
        self.finished.acquire()
        self.watch = _Watch()
        self.value: R | None = None
        self.error: BaseException | None = None

    def start(self, fn: Callable[[], R]) -> None:
        watch = self.watch = _Watch()
        context = self.context.copy()
        _WORKERS.submit(lambda: context.run(self._main, watch, fn))

    def _main(self, watch: _Watch, fn: Callable[[], R]) -> None:
        _local.watch = watch
        try:
            self.value = fn()
        except Abandoned:
            return  # another thread carries the run on (or the caller gave it up)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            self.error = e
        finally:
            _local.watch = None
        self.finished.release()

    def wait(self, poll_s: float) -> R:
        while True:
            watch, armed = self.watch, self.watch.armed
            wait = poll_s if armed is None else min(poll_s, armed.deadline - time.monotonic())
            try:
                if self.finished.acquire(timeout=max(wait, 0.0)):
                    break
            except BaseException:  # interrupted (Ctrl-C): give the run up, then re-raise
                with watch.lock:
                    watch.taken = True
                raise
            if armed is not None and time.monotonic() >= armed.deadline:
                with watch.lock:
                    hung = watch.armed is armed and not watch.taken
                    watch.taken = hung
                if hung:
                    call = HungCall(watch.section, armed.block, armed.attempts, armed.timeout_s)
                    self.start(lambda call=call: self.carry_on(call))
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


def run_watched(fn: Callable[[], R], carry_on: Callable[[HungCall], R], poll_s: float) -> R:
    """``fn()`` run on a daemon worker thread, its result returned in this thread.

    While it runs this thread is its watchdog: it sleeps until the deadline of the call the
    worker runs inline (see :func:`call_with_timeout`), waking at least every ``poll_s``
    seconds (the shortest time limit of any call, so a new call is never noticed late). If
    that call is still running at its deadline, the worker is abandoned and
    ``carry_on(hung_call)`` runs on a fresh worker thread (watched the same way) to finish
    the run; its result is returned. Exceptions from ``fn`` or ``carry_on`` are re-raised
    here; the caller's ``contextvars`` context is visible in the worker threads. If this
    thread is interrupted while it waits, the run is given up (the worker stops at its next
    model call or call return) and the interruption is re-raised.
    """
    run: _WatchedRun[R] = _WatchedRun(carry_on)
    run.start(fn)
    return run.wait(poll_s)


# ---------------------------------------------------------------- tools that may hang

def run_in_subprocess(fn: Callable[..., Any], /, *args: Any, timeout_s: float,
                      **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` in a fresh process and kill it after ``timeout_s`` seconds.

    Unlike a thread, a process can be stopped: on timeout it is killed and
    :class:`ToolTimeout` (``stopped=True``) is raised. ``fn``, its arguments and its result
    must be picklable, and ``fn`` must be importable by name (a module-level function, not a
    lambda or a function defined in a notebook), because the child starts with the ``spawn``
    method (a clean interpreter, safe with threads). As with any ``spawn`` child, a script
    that calls this must keep its top-level work under ``if __name__ == "__main__":`` (the
    child re-imports the main module; notebooks and ``python -m`` entry points are fine).
    Starting a process costs a fraction of a second, so use this for tools that may hang,
    not for every call. Which tools need it: a sync tool that holds the GIL in C code (a
    backtracking regular expression, a huge integer power, a C extension's long loop) and an
    ``async def`` tool that blocks the event loop (``time.sleep``, a loop that never reaches
    an ``await``). In-process nothing can interrupt them: the limit is noticed only when the
    call returns, which is then answered as a timeout (its result discarded; outcome unknown
    for a side effect), and until then the run, both loops alike, waits. A sync tool that
    hangs while it *waits* (I/O, a lock) releases the GIL and is abandoned at its limit, but
    it may still finish later; run it here if it must really stop.

    Raises ``fn``'s own exception if it raised one, :class:`ToolTimeout` on timeout,
    :class:`~primer.loop.tools.ToolError` if the process died without answering, and
    ``TypeError`` if ``fn`` or its arguments cannot be sent to the child.
    """
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=run_and_send, args=(sender, fn, args, kwargs),
                          daemon=True)
    try:
        process.start()
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        receiver.close()
        sender.close()
        raise TypeError(f"run_in_subprocess cannot send {getattr(fn, '__qualname__', fn)!r} "
                        f"or its arguments to a child process ({e}). Use a function defined "
                        f"at the top level of an importable module (not a lambda, a nested "
                        f"function or one defined in a notebook) and picklable "
                        f"arguments.") from None
    sender.close()
    try:
        if not receiver.poll(timeout_s):
            process.kill()
            raise ToolTimeout(timeout_s, stopped=True)
        try:
            ok, value = receiver.recv()
        except EOFError:
            process.join(5)
            raise ToolError(f"{getattr(fn, '__name__', 'the tool')} crashed: its process "
                            f"exited with code {process.exitcode} without a result") from None
    finally:
        receiver.close()
        process.join(5)
    if not ok:
        raise value
    return value


def in_subprocess(fn: Callable[..., Any], timeout_s: float) -> Callable[..., Any]:
    """``fn`` wrapped to run through :func:`run_in_subprocess` with ``timeout_s`` seconds.

    The wrapper keeps ``fn``'s name, docstring and signature, so ``tool(in_subprocess(f,
    5))`` builds the same ``input_schema`` as ``tool(f)``. Use it on a module-level ``fn``
    without replacing that name (``fn`` must stay importable for the child process).
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return run_in_subprocess(fn, *args, timeout_s=timeout_s, **kwargs)

    return wrapper
