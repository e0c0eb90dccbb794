"""Async code seen from sync code: telling an ``async def`` callable apart, running one.

A tool or a model may be an ``async def`` function. The async loop awaits it on its event
loop; the sync loop has no event loop of its own, so it runs the coroutine to completion
with :func:`run_to_completion`. :func:`is_async_callable` is how both loops tell the two
kinds apart before calling.
"""

from __future__ import annotations

import inspect
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def is_async_callable(fn: Any) -> bool:
    """Whether calling ``fn`` gives a coroutine: an ``async def`` function, or an object whose
    ``__call__`` is one (an async model class)."""
    return inspect.iscoroutinefunction(fn) or (
        callable(fn) and inspect.iscoroutinefunction(type(fn).__call__))


def run_to_completion(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coroutine`` to its end from sync code and return its value (or raise its error).

    In a thread with no running event loop it gets a fresh one (``asyncio.run``); in a thread
    that runs one (a notebook's kernel), it runs on a short-lived thread of its own, since a
    running loop cannot be re-entered.
    """
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="coroutine") as pool:
        return pool.submit(asyncio.run, coroutine).result()
