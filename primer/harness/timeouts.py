"""Timeouts: stop waiting for a call at its limit, interrupt it where Python can, or kill it.

Every tool call gets a limit in seconds, and the loop stays on the caller's thread
(thread-locals, context variables, a debugger all stay with it). :func:`call_with_timeout`
keeps the limit one of two ways:

* **On the main thread** it runs the call right there and sets a timer (``SIGALRM``): at the
  limit the timer's handler raises inside the call, which stops it where Python code runs
  next (a ``time.sleep``, a socket read, a lock, a loop in Python), and the call becomes a
  :class:`~primer.harness.retry.ToolTimeout` ("it was interrupted"). The timer rings again
  every second in case the call swallowed the first ring with a bare ``except:``. A ring
  that lands in a ``__del__`` method, a weakref callback or a dropped generator's clean-up
  ends that finalizer, but Python drops the exception there (it would print "Exception
  ignored in ..."): the harness takes it from ``sys.unraisablehook`` while the call is timed,
  prints nothing, and rings again 10 ms later. No thread
  is involved, so the call costs two system calls, and a timed-out call does not go on in
  the background. The first such call installs the harness's handler for ``SIGALRM``, which
  acts only while a call is timed; a program that uses ``SIGALRM`` itself (its own handler,
  or a timer of its own armed) keeps it, and its calls go the second way.
* **On any other thread** (a reply's parallel calls, a server's request thread, every call
  of a run given a cancel signal: :func:`~primer.loop.steps.run_watched`), and where
  there is no ``SIGALRM`` (Windows), it hands the call to a long-lived daemon worker thread
  and waits for it there, with the limit as the wait's timeout. A thread cannot be stopped:
  at the limit the call is *abandoned*, it may still finish later, side effects included.
  Handing a call over costs two thread wake-ups
  (from about ten to about a hundred microseconds, depending on the machine: ``make bench``
  shows it). The workers are reused and are daemon threads, so a tool that never returns
  can keep neither the run nor the interpreter's exit waiting. (``concurrent.futures``
  pools are not used for this: their workers are joined at interpreter exit.)

What the timer cannot help: a call that replaces the ``SIGALRM`` handler itself (with
``SIG_DFL`` the next ring ends the process, as ``SIGALRM``'s default action does), and one
that swallows every ring (a bare ``except:`` in a loop), or spends nearly all its time in
finalizers, where every ring is dropped (a ``gc.collect()`` of many objects with slow
``__del__`` methods; Ctrl-C is dropped there too): it is answered as a timeout only when it
returns. The rings after the first also cut short a call's own clean-up (a ``finally:``
that takes longer than a second). What a call returns after its limit is dropped, and so is
what an abandoned call returns: a :class:`~primer.loop.tools.ToolOutput`'s spend included,
so neither counts against the run's budgets (a sub-agent *interrupted* at its limit does
charge its spend: :meth:`~primer.harness.allowance.RunScope.charge`). And an ``async def``
call that handed blocking work to ``asyncio.to_thread`` leaves that thread running when it is
stopped; Python waits for such threads when the program exits.

What neither can interrupt: C code holding the GIL (a backtracking regular expression, a huge
integer power), and a C library that retries an interrupted system call without returning to
Python (a few database drivers). Such a call holds the run until it returns, and is then
answered as a timeout. To run a tool that may hang *somewhere it can really be stopped*, use
:func:`run_in_subprocess` (or wrap its function with :func:`in_subprocess`): the call runs in
a fresh process that is killed on timeout.
"""

from __future__ import annotations

import contextvars
import functools
import math
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from primer.loop.tools import ToolError

from .allowance import cancel_requested
from .retry import ToolTimeout
from .subprocess_child import run_and_send

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
        """Call ``fn``; keep its value or error (``done`` is released by the worker)."""
        try:
            self.value = self.fn()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            self.error = e


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
            with self._lock:  # idle again before the caller wakes, so its next call reuses it
                self._idle += 1
            job.done.release()
            del job


_WORKERS = _DaemonWorkers()
if hasattr(os, "register_at_fork"):  # a forked child has none of the parent's worker threads
    os.register_at_fork(after_in_child=lambda: _DaemonWorkers.__init__(_WORKERS))


def start_daemon(fn: Callable[[], Any]) -> None:
    """Run ``fn()`` on a long-lived daemon worker thread and return at once (the async loop
    hands sync tools and models to these threads; a hung one never blocks exit)."""
    _WORKERS.submit(fn)


class _AlarmRang(BaseException):
    """Raised by the timer's handler inside a call past its limit: a ``BaseException``, so a
    tool's ``except Exception`` does not swallow it. ``token`` names the call it is for."""

    def __init__(self, token: object) -> None:
        super().__init__("the call's time limit passed")
        self.token = token


def _timed(fn: Callable[[], Any], timeout_s: float, again_s: float) -> Any:
    """Set the timer, then ``fn()``: the frame the timer's handler looks for to know the timed
    call still runs (the timer is set in here, so no ring can come before it)."""
    signal.setitimer(signal.ITIMER_REAL, timeout_s, again_s)
    return fn()


def _in_timed_call(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code is _timed.__code__:
            return True
        frame = frame.f_back
    return False


class _Alarm:
    """The main thread's call timer: at most one timed call at a time (a call timed inside
    another, a sub-agent's, goes to a worker thread instead)."""

    #: Seconds between the rings after the first, while the call has not ended.
    RING_AGAIN_S = 1.0
    #: A ring this soon after a call ended is that call's, arriving late (seconds).
    LATE_RING_S = 0.1
    #: A ring Python dropped (see :meth:`_hook`) comes again this soon (seconds).
    AFTER_DROPPED_S = 0.01

    def __init__(self) -> None:
        self.armed: object | None = None
        self.rang = False
        self.mine = False  # the handler is installed
        self.ended_at = -math.inf
        self.given_up = not (hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM"))

    def ring(self, signum: int, frame: FrameType | None) -> None:
        """The ``SIGALRM`` handler. It interrupts the timed call, when the call still runs
        (its frame is on the stack); a timer left armed after its call (a Ctrl-C cut the
        disarm short) is stopped here instead, and a ring that arrives just after its call
        ended is dropped. A timer of someone else's (the program's ``signal.alarm``, between
        calls) gets what ``SIGALRM``'s default action does: the process ends."""
        token = self.armed
        if token is not None:
            if _in_timed_call(frame):
                self.rang = True
                raise _AlarmRang(token)
            self.disarm()
            return
        if time.monotonic() - self.ended_at < self.LATE_RING_S:
            return
        self.mine = False
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGALRM)

    def _hook(self, token: object, previous: Callable[[sys.UnraisableHookArgs], object],
              ) -> Callable[[sys.UnraisableHookArgs], None]:
        """A ``sys.unraisablehook`` for the timed call ``token``: Python drops an exception
        raised in a ``__del__`` method, a weakref callback or a dropped generator's clean-up,
        and hands it here. The call's own interruption, dropped so, is not printed; the timer
        rings again in :attr:`AFTER_DROPPED_S` instead of a second later. Anything else goes
        to ``previous``."""

        def hook(unraisable: sys.UnraisableHookArgs) -> None:
            ring = unraisable.exc_value
            if isinstance(ring, _AlarmRang) and ring.token is token:
                if self.armed is token:  # not once disarmed: a timer set then would ring on
                    signal.setitimer(signal.ITIMER_REAL, self.AFTER_DROPPED_S,
                                     self.RING_AGAIN_S)
                return
            previous(unraisable)

        return hook

    def usable(self) -> bool:
        """Whether this call can be timed here: the main thread, no timed call under way,
        and ``SIGALRM`` free (its default action, or our handler; no timer armed)."""
        if self.given_up or threading.current_thread() is not threading.main_thread():
            return False
        if self.armed is not None:
            if _in_timed_call(sys._getframe()):
                return False  # timed inside a timed call (a sub-agent's): a worker's job
            self.disarm()  # left armed by a call a Ctrl-C cut short
        if signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0):
            return False  # someone's timer runs
        handler = signal.getsignal(signal.SIGALRM)
        if handler is signal.SIG_DFL:
            try:
                signal.signal(signal.SIGALRM, self.ring)
            except (ValueError, OSError):  # not the main interpreter
                self.given_up = True
                return False
            self.mine = True
            return True
        self.mine = handler == self.ring  # ours again once a program restores it
        return self.mine

    def call(self, fn: Callable[[], Any], timeout_s: float) -> Any:
        """``fn()`` under the timer: :class:`ToolTimeout` (``stopped``) when it rang."""
        token = object()
        start = time.monotonic()
        self.armed, self.rang = token, False
        previous = sys.unraisablehook
        hook = sys.unraisablehook = self._hook(token, previous)
        try:
            value = _timed(fn, timeout_s, self.RING_AGAIN_S)
        except _AlarmRang as ring:
            if ring.token is not token:  # pragma: no cover - one timed call at a time
                raise
            raise ToolTimeout(timeout_s, stopped=True, how="it was interrupted") from None
        finally:
            self.disarm()
            if sys.unraisablehook is hook:  # unless the call set one of its own
                sys.unraisablehook = previous
        elapsed = time.monotonic() - start
        if elapsed > timeout_s:
            raise ToolTimeout.finished_late(
                timeout_s, elapsed,
                "a call that holds the GIL or swallows the interruption cannot be stopped"
                if self.rang else "a call that holds the GIL, or stops the harness's timer "
                "(SIGALRM) for its own use, cannot be interrupted")
        return value

    def disarm(self) -> None:
        """Stop the timer, then forget the call. (Should an interruption come between the
        two, the next timed call, or the timer's next ring, finishes it.)"""
        signal.setitimer(signal.ITIMER_REAL, 0)
        self.armed = None
        self.ended_at = time.monotonic()


_ALARM = _Alarm()


def call_with_timeout(fn: Callable[[], Any], timeout_s: float | None) -> Any:
    """``fn()``, but raise :class:`ToolTimeout` if it has not returned after ``timeout_s`` s.

    With ``timeout_s=None`` the call runs in the calling thread, unwatched. On the main
    thread it runs there under a timer that interrupts it at the limit (``stopped=True``);
    on another thread, or when the program uses ``SIGALRM`` itself, it runs on a long-lived
    daemon worker thread with the caller's ``contextvars`` and is abandoned at the limit (see
    the module docstring). A call that returns only after its limit is a timeout too, never
    a late success. Exceptions raised by ``fn`` are re-raised in the caller.
    """
    if timeout_s is None:
        return fn()
    if _ALARM.usable():
        return _ALARM.call(fn, timeout_s)
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

    While it waits it reads the current run's cancel signal
    (:func:`~primer.harness.allowance.cancel_requested`): a cancel kills the process at once.
    Raises ``fn``'s own exception if it raised one, :class:`ToolTimeout` on timeout,
    :class:`~primer.loop.tools.ToolError` if the process died without answering or was
    killed for a cancel, and
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
        if not _answered(receiver, timeout_s):
            process.kill()
            if cancel_requested():
                raise ToolError("the run was cancelled: the tool's process was killed")
            raise ToolTimeout(timeout_s, stopped=True)
        try:
            ok, value = receiver.recv()
        except EOFError:
            process.join(5)
            raise ToolError(f"{getattr(fn, '__name__', 'the tool')} crashed: its process "
                            f"exited with code {process.exitcode} without a result") from None
    except BaseException:  # a timeout, or the wait interrupted (Ctrl-C, an outer time limit)
        process.kill()
        raise
    finally:
        receiver.close()
        try:
            process.join(1)  # the answer is in: a child that does not exit (a thread left
        finally:            # running in it) is not waited for, even if the wait is cut
            if process.is_alive():
                process.kill()
                process.join()
    if not ok:
        raise value
    return value


#: Seconds between two looks at the current run's cancel signal while a child works.
CANCEL_POLL_S = 0.02


def _answered(receiver: Any, timeout_s: float) -> bool:
    """Whether the child answered within ``timeout_s`` seconds; ``False`` at once when the
    current run is cancelled (read every :data:`CANCEL_POLL_S`), so a cancel kills it."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if receiver.poll(max(0.0, min(left, CANCEL_POLL_S))):
            return True
        if left <= 0 or cancel_requested():
            return False


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
