"""An event loop on a daemon thread: work started from sync code, cancelled, stopped."""

from __future__ import annotations

import concurrent.futures
import threading

import anyio
import pytest

from primer.providers.event_loop_thread import EventLoopThread


async def add(a: int, b: int) -> int:
    await anyio.sleep(0)
    return a + b


def test_a_coroutine_started_from_another_thread_returns_its_value():
    loop = EventLoopThread("test-loop")
    try:
        assert loop.thread.daemon and loop.thread.is_alive()
        assert loop.portal.start_task_soon(add, 2, 3).result(timeout=5) == 5
    finally:
        loop.stop()
    assert not loop.thread.is_alive()


def test_cancelling_the_future_cancels_the_task_on_the_loop():
    loop, cancelled = EventLoopThread("test-loop"), threading.Event()

    async def forever() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    try:
        future = loop.portal.start_task_soon(forever)
        with pytest.raises(concurrent.futures.TimeoutError):
            future.result(timeout=0.1)
        future.cancel()
        assert cancelled.wait(5)
    finally:
        loop.stop()


def test_stop_cancels_what_still_runs_and_can_be_called_twice():
    loop = EventLoopThread("test-loop")
    future = loop.portal.start_task_soon(anyio.sleep_forever)
    loop.stop()
    loop.stop()
    assert not loop.thread.is_alive()
    assert future.cancelled()
    with pytest.raises(RuntimeError, match="not running"):
        loop.portal.start_task_soon(add, 1, 1)
