"""An anyio event loop on a daemon thread of its own, for calling an async SDK from sync code.

Our tools are plain functions; SDKs such as ``mcp`` are async. :class:`EventLoopThread` runs
one event loop for the lifetime of a connection and lets any thread start work on it through
an ``anyio`` ``BlockingPortal``: ``thread.portal.start_task_soon(fn, *args)`` returns a
``concurrent.futures.Future`` to wait on with a timeout, and cancelling that future cancels
the task. The thread is a daemon, so a loop that is never stopped cannot block interpreter
exit; whoever owns it should still call :meth:`EventLoopThread.stop`, since work still on
a daemon thread at exit simply stops (its ``finally`` blocks do not run).

Imported only when used (it imports ``anyio``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading

import anyio
from anyio.from_thread import BlockingPortal


class EventLoopThread:
    """Start an anyio event loop on a daemon thread called ``name``; ``portal`` reaches it.

    ``timeout_s`` (seconds) bounds the wait for the loop to start and, in :meth:`stop`, for
    it to finish. Raises ``TimeoutError`` if the loop does not start in time, or the
    exception that stopped it from starting.
    """

    def __init__(self, name: str, *, timeout_s: float = 10.0) -> None:
        self.timeout_s = timeout_s
        started: concurrent.futures.Future[BlockingPortal] = concurrent.futures.Future()

        async def serve() -> None:
            async with BlockingPortal() as portal:
                started.set_result(portal)
                await portal.sleep_until_stopped()

        def main() -> None:
            try:
                anyio.run(serve)
            except BaseException as e:  # noqa: BLE001 - handed to the thread that waits
                if not started.done():
                    started.set_exception(e)

        self.thread = threading.Thread(target=main, name=name, daemon=True)
        self.thread.start()
        self.portal: BlockingPortal = started.result(timeout=timeout_s)

    def stop(self) -> None:
        """Cancel the tasks still on the loop, then wait (at most ``timeout_s`` seconds) for
        them to finish their cleanup and the thread to end. Safe to call twice."""
        with contextlib.suppress(Exception):  # already stopped, or its stop task cancelled
            self.portal.start_task_soon(self.portal.stop, True).result(timeout=self.timeout_s)
        self.thread.join(self.timeout_s)
