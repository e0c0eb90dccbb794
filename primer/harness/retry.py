"""Trying again: which failures a later try may fix, how long to wait, a clock for tests.

The vocabulary: a tool raises :class:`TransientToolError` (or :class:`RateLimited`) for a
failure a later try may not have; :class:`ToolTimeout` is a call that passed its time
limit.

:class:`ManualClock` is a clock that moves only when told, so backoff waits in tests and
lessons take no real time; :func:`retry_after_s` reads how long a server asked to wait.

The backoff itself, :class:`~primer.loop.config.RetryPolicy`, is part of every run's
config; the loop's model call and the harness's :mod:`primer.harness.runner` retry by it.

Source of the schedule: exponential backoff with jitter as described in Marc Brooker,
"Exponential Backoff And Jitter", AWS Architecture Blog (2015); the 1 s / 2 s / 4 s figures
are the course's (SYLLABUS, "Production tools").
"""

from __future__ import annotations

import math
import threading
from typing import Any

from primer.loop.tools import ErrorKind, ToolError

# ---------------------------------------------------------------- the error vocabulary

class TransientToolError(ToolError):
    """Raise inside a tool for a failure a later try may not have (a 503, a dropped link).

    ``retry_after_s`` is how long the service asked the caller to wait (seconds), or
    ``None``. The harness retries read-only tools that raise it; without a retry policy it is
    an ordinary :class:`~primer.loop.tools.ToolError` and its message goes to the model.
    """

    kind: ErrorKind = "transient"

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RateLimited(TransientToolError):
    """The service answered HTTP 429 Too Many Requests (optionally with a Retry-After)."""

    kind = "rate_limited"

    def __init__(self, message: str = "429 Too Many Requests",
                 retry_after_s: float | None = None) -> None:
        super().__init__(message, retry_after_s)


class ToolTimeout(TransientToolError):
    """A call passed its time limit of ``timeout_s`` seconds.

    ``stopped`` is true when the work itself was stopped (a killed subprocess, a cancelled
    ``async def`` tool), false when it was only abandoned (a thread, which Python cannot
    stop). ``how`` says how it was stopped (default: "its process was stopped").
    ``timeout_s`` is ``None`` when the tool itself raised a plain ``TimeoutError`` (its own
    client gave up waiting); ``reason`` then says what it raised.
    """

    kind = "timeout"

    def __init__(self, timeout_s: float | None, *, stopped: bool = False,
                 how: str = "its process was stopped", reason: str | None = None) -> None:
        self.how = how if stopped else "it may still be running"
        super().__init__(f"timed out ({reason})" if timeout_s is None
                         else f"timed out after {timeout_s:g} s ({self.how})")
        self.timeout_s = timeout_s
        self.stopped = stopped
        self.reason = reason

    @classmethod
    def finished_late(cls, timeout_s: float, elapsed_s: float,
                      why: str = "a tool that holds the GIL or blocks the event loop cannot be "
                                 "interrupted") -> ToolTimeout:
        """A call that returned only after ``elapsed_s`` seconds, past its limit of
        ``timeout_s``: nothing could interrupt it (``why``: it held the GIL in C code, an
        ``async def`` tool blocked the event loop, it swallowed the interruption), so its
        result is discarded and the call is answered as a timeout, never as a late
        success."""
        return cls(timeout_s, stopped=True,
                   how=f"it returned only after {elapsed_s:.3g} s and its result was "
                       f"discarded; {why}: run it with run_in_subprocess")


# ---------------------------------------------------------------- time and backoff

class ManualClock:
    """A clock that moves only when told: ``clock()`` reads it, ``clock.sleep(s)`` advances it.

    Pass ``clock=c, sleep=c.sleep`` to :class:`~primer.loop.config.AgentConfig` (or to
    :class:`~primer.harness.runner.ToolRunner`) and backoff waits take no real time,
    while the wall-clock limit and the attempt records still see them. ``slept`` lists every
    wait (seconds). Thread-safe.
    """

    def __init__(self, start: float = 0.0) -> None:
        self.now = float(start)
        self.slept: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        """Advance the clock by ``seconds`` (``ValueError`` if negative)."""
        if seconds < 0:
            raise ValueError(f"cannot sleep a negative time ({seconds} s)")
        with self._lock:
            self.now += seconds
            self.slept.append(seconds)

    advance = sleep


def retry_after_s(headers: Any) -> float | None:
    """Seconds to wait from HTTP response ``headers``: ``retry-after-ms`` (milliseconds,
    non-standard but sent by Anthropic and OpenAI) or ``retry-after`` (seconds, RFC 9110);
    ``None`` when neither is there as a finite number >= 0 (``inf``, ``-5`` and ``nan`` are
    not read)."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            seconds = float(headers[name]) / scale
        except (KeyError, TypeError, ValueError):
            continue
        if 0 <= seconds < math.inf:
            return seconds
    return None
