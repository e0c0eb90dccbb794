"""A call's time limit: interrupted by a timer on the main thread, abandoned on a worker
thread elsewhere, and the program's own SIGALRM left alone."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import sys
import threading
import time
import weakref

import pytest

from primer.harness import timeouts
from primer.harness.retry import ToolTimeout
from primer.harness.timeouts import call_with_timeout, run_in_subprocess
from primer.loop.model import run_to_completion

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no SIGALRM here")


def workers_started() -> int:
    return timeouts._WORKERS.started


def test_on_the_main_thread_a_hung_call_is_interrupted_where_it_waits_and_cleans_up():
    cleaned, before = [], workers_started()

    def hangs() -> str:
        try:
            time.sleep(30)
            return "never"
        finally:
            cleaned.append("finally ran")

    start = time.monotonic()
    with pytest.raises(ToolTimeout) as caught:
        call_with_timeout(hangs, 0.05)
    assert time.monotonic() - start < 5
    assert caught.value.stopped and "it was interrupted" in str(caught.value)
    assert cleaned == ["finally ran"]  # it stopped there and then, not later in the background
    assert workers_started() == before  # no thread was involved
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_call_that_swallows_the_first_ring_is_rung_again(monkeypatch):
    monkeypatch.setattr(timeouts._Alarm, "RING_AGAIN_S", 0.05)
    swallowed = []

    def stubborn() -> None:
        while True:
            try:
                time.sleep(30)
            except BaseException:  # noqa: BLE001 - the tool under test swallows everything
                if swallowed:
                    raise
                swallowed.append("once")

    with pytest.raises(ToolTimeout):
        call_with_timeout(stubborn, 0.05)
    assert swallowed == ["once"]


class _SlowToDelete:
    def __del__(self) -> None:
        time.sleep(30)


def _del_method() -> None:
    _SlowToDelete()  # deleted at once: its __del__ runs inside the call


def _weakref_callback() -> None:
    class Target:
        pass

    target = Target()
    ref = weakref.ref(target, lambda r: time.sleep(30))  # noqa: F841 - kept alive till the end
    del target


def _weakref_finalize() -> None:
    class Target:
        pass

    weakref.finalize(Target(), time.sleep, 30)


def _generator_clean_up() -> None:
    def numbers():
        try:
            yield 1
        finally:
            time.sleep(30)

    started = numbers()
    next(started)
    del started  # closed now: its finally runs inside the call


@pytest.mark.parametrize("finalizer", [_del_method, _weakref_callback, _weakref_finalize,
                                       _generator_clean_up],
                         ids=["__del__", "weakref callback", "weakref.finalize",
                              "generator clean-up"])
def test_a_limit_that_passes_inside_a_finalizer_stops_the_call_at_once_and_prints_nothing(
        monkeypatch, finalizer):
    # Python drops an exception raised in a finalizer (to sys.unraisablehook, which prints
    # "Exception ignored in ..."): the ring ends the finalizer but not the call, which must be
    # rung again at once, not a second later, and with nothing printed.
    dropped: list[object] = []
    monkeypatch.setattr("sys.unraisablehook", dropped.append)
    order: list[str] = []

    def tool() -> None:
        finalizer()  # hangs in its finalizer, past the limit
        order.append("after the finalizer")
        time.sleep(30)

    start = time.monotonic()
    with pytest.raises(ToolTimeout) as caught:
        call_with_timeout(tool, 0.05)
    elapsed = time.monotonic() - start
    assert caught.value.stopped
    assert order == ["after the finalizer"]  # the ring ended the finalizer, then the call
    assert elapsed < timeouts._Alarm.RING_AGAIN_S / 2, elapsed  # not the ring a second later
    assert dropped == []
    assert sys.unraisablehook == dropped.append  # the program's hook is back
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_while_a_call_is_timed_other_dropped_exceptions_still_reach_the_programs_hook(
        monkeypatch):
    dropped: list[object] = []
    monkeypatch.setattr("sys.unraisablehook", dropped.append)

    class FailsOnDelete:
        def __del__(self) -> None:
            raise ValueError("from __del__")

    def tool() -> str:
        FailsOnDelete()
        return "done"

    assert call_with_timeout(tool, 5.0) == "done"
    assert [type(u.exc_value) for u in dropped] == [ValueError]


def test_a_call_that_ends_in_time_returns_and_a_ring_after_it_does_nothing():
    assert call_with_timeout(lambda: 42, 5.0) == 42
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    timeouts._ALARM.ring(signal.SIGALRM, None)  # a ring that arrives late: nothing happens


def test_a_programs_own_sigalrm_handler_is_kept_and_its_calls_go_to_a_worker():
    rang = []

    def mine(signum: int, frame: object) -> None:
        rang.append(signum)

    previous = signal.signal(signal.SIGALRM, mine)
    try:
        threads = []
        assert call_with_timeout(lambda: threads.append(threading.current_thread()), 5.0) \
            is None
        assert threads[0] is not threading.main_thread()  # handed to a worker
        assert signal.getsignal(signal.SIGALRM) is mine
        with pytest.raises(ToolTimeout) as caught:
            call_with_timeout(lambda: time.sleep(0.5), 0.05)
        assert not caught.value.stopped  # abandoned: a thread cannot be stopped
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert rang == []


def test_a_timer_the_program_armed_is_kept():
    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    try:
        signal.setitimer(signal.ITIMER_REAL, 60)
        assert call_with_timeout(threading.current_thread, 5.0) is not threading.main_thread()
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 50
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_off_the_main_thread_a_call_is_abandoned_at_its_limit():
    out: list[BaseException] = []

    def caller() -> None:
        try:
            call_with_timeout(lambda: time.sleep(0.5), 0.05)
        except ToolTimeout as e:
            out.append(e)

    t = threading.Thread(target=caller)
    t.start()
    t.join()
    assert len(out) == 1 and not out[0].stopped and "may still be running" in str(out[0])


def test_a_timed_call_inside_a_timed_call_goes_to_a_worker_and_the_outer_limit_still_holds():
    inner_threads = []

    def outer() -> None:  # e.g. a sub-agent, whose own tool calls are timed too
        call_with_timeout(lambda: inner_threads.append(threading.current_thread()), 5.0)
        time.sleep(30)

    with pytest.raises(ToolTimeout) as caught:
        call_with_timeout(outer, 0.1)
    assert caught.value.stopped
    assert inner_threads and inner_threads[0] is not threading.main_thread()
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_child_process_is_killed_when_an_outer_limit_interrupts_its_wait():
    start = time.monotonic()
    with pytest.raises(ToolTimeout) as caught:
        call_with_timeout(lambda: run_in_subprocess(time.sleep, 30, timeout_s=20), 0.5)
    assert caught.value.stopped
    assert not multiprocessing.active_children()  # killed, not left to finish
    assert time.monotonic() - start < 5  # and not waited for


def test_an_async_tool_run_from_sync_code_inside_an_event_loop_is_cancelled_at_its_limit():
    seen: list[str] = []

    async def slow() -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        seen.append("finished")
        return "late"

    async def notebook_cell() -> None:  # a notebook's cell runs inside an event loop
        with pytest.raises(ToolTimeout):
            call_with_timeout(lambda: run_to_completion(slow()), 0.2)

    asyncio.run(notebook_cell())
    deadline = time.monotonic() + 3
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == ["cancelled"]


def test_a_limit_shorter_than_setting_the_timer_still_interrupts_the_call():
    start = time.monotonic()
    with pytest.raises(ToolTimeout) as caught:
        call_with_timeout(lambda: time.sleep(3), 1e-7)  # may ring before the call begins
    assert caught.value.stopped and time.monotonic() - start < 2
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


CHILD_LEAVES_A_THREAD = '''
import os, threading, time

def answer_and_leave_a_thread():
    threading.Thread(target=time.sleep, args=(120,)).start()  # not a daemon: keeps it alive
    return os.getpid()
'''


def test_a_child_that_answers_but_would_not_exit_is_killed_not_waited_for(tmp_path,
                                                                           monkeypatch):
    (tmp_path / "leaves_a_thread.py").write_text(CHILD_LEAVES_A_THREAD)
    monkeypatch.syspath_prepend(str(tmp_path))
    from leaves_a_thread import answer_and_leave_a_thread

    start = time.monotonic()
    pid = run_in_subprocess(answer_and_leave_a_thread, timeout_s=30)
    assert time.monotonic() - start < 4  # one second's grace, not five
    assert not multiprocessing.active_children()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
