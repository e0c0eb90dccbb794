"""Trying again: which failures a later try may fix, how long to wait, a clock for tests.

The vocabulary: a tool raises :class:`TransientToolError` (or :class:`RateLimited`) for a
failure a later try may not have; :class:`ToolTimeout` is a call that passed its time
limit; :class:`ModelRetriesExhausted` says every attempt of one model call failed.

:class:`RetryPolicy` is the harness's backoff: before retry ``k`` it waits ``base ×
factor^(k-1)`` seconds (1 s, 2 s, 4 s, ...) plus up to ``jitter`` of that again at random,
never more than ``max_delay_s``, or the server's ``retry_after_s`` if that is longer. The
jitter is seeded per call (seed + the call's key), so runs are reproducible however threads
interleave. :class:`ManualClock` is a clock that moves only when told, so backoff waits in
tests and lessons take no real time.

It sits below :mod:`primer.loop.config` (every run's config holds a ``RetryPolicy``),
:mod:`primer.harness.timeouts` and :mod:`primer.harness.runner` (which runs the retries).

Source of the schedule: exponential backoff with jitter as described in Marc Brooker,
"Exponential Backoff And Jitter", AWS Architecture Blog (2015); the 1 s / 2 s / 4 s figures
are the course's (SYLLABUS, "Production tools").
"""

from __future__ import annotations

import random
import threading
from dataclasses import asdict, dataclass
from typing import Any

from primer.loop.tools import ToolError

# ---------------------------------------------------------------- the error vocabulary

class TransientToolError(ToolError):
    """Raise inside a tool for a failure a later try may not have (a 503, a dropped link).

    ``retry_after_s`` is how long the service asked the caller to wait (seconds), or
    ``None``. The harness retries read-only tools that raise it; without a retry policy it is
    an ordinary :class:`~primer.loop.tools.ToolError` and its message goes to the model.
    """

    kind = "transient"

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
    def finished_late(cls, timeout_s: float, elapsed_s: float) -> ToolTimeout:
        """A call that returned only after ``elapsed_s`` seconds, past its limit of
        ``timeout_s``: no one could interrupt it (it held the GIL in C code, or an ``async
        def`` tool blocked the event loop), so its result is discarded and the call is
        answered as a timeout, never as a late success."""
        return cls(timeout_s, stopped=True,
                   how=f"it returned only after {elapsed_s:.3g} s and its result was "
                       f"discarded; a tool that holds the GIL or blocks the event loop cannot "
                       f"be interrupted: run it with run_in_subprocess")


class ModelRetriesExhausted(RuntimeError):
    """Every attempt of one model call failed with a transient error; the harness gave up.

    ``attempts`` holds one record per failed attempt (see :func:`call_model_with_retries`).
    """

    def __init__(self, attempts: list[dict[str, Any]]) -> None:
        reasons = "; ".join(f"attempt {a['attempt']}: {a['error']}" for a in attempts)
        super().__init__(f"gave up after {len(attempts)} failed attempts ({reasons})")
        self.attempts = attempts


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


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait before each retry: exponential backoff with seeded jitter.

    Before retry ``k`` (1 for the first retry) the wait is ``min(base_s × factor^(k-1) ×
    (1 + jitter × u), max_delay_s)`` seconds, with ``u`` uniform in [0, 1) from a generator
    seeded with ``seed`` and the call's key: the cap applies after the jitter, so the
    backoff never waits longer than ``max_delay_s``. If the service sent a ``retry_after_s``
    that is longer, the wait is that instead, even above the cap (the server's word wins).
    Defaults: 1 s, 2 s, 4 s, ... each up to 10 % longer, never more than 60 s. How *many*
    retries is the caller's setting (``tool_retries``, ``model_retries`` of
    :class:`~primer.loop.config.AgentConfig`).

    Raises ``ValueError`` for a negative base or jitter, a factor below 1 or a cap below
    the base.
    """

    base_s: float = 1.0
    factor: float = 2.0
    jitter: float = 0.1
    max_delay_s: float = 60.0
    seed: int = 0

    def __post_init__(self) -> None:
        problems = []
        if self.base_s < 0:
            problems.append(f"base_s must be >= 0 seconds (got {self.base_s})")
        if self.factor < 1:
            problems.append(f"factor must be >= 1 (got {self.factor})")
        if self.jitter < 0:
            problems.append(f"jitter must be a fraction >= 0 (got {self.jitter})")
        if self.max_delay_s < self.base_s:
            problems.append(f"max_delay_s ({self.max_delay_s}) must be >= base_s "
                            f"({self.base_s})")
        if problems:
            raise ValueError("RetryPolicy: " + "; ".join(problems))

    def rng(self, key: str) -> random.Random:
        """The jitter generator for one call: seeded with ``seed`` and the call's ``key``."""
        return random.Random(f"{self.seed}:{key}")

    def backoff_s(self, retry: int) -> float:
        """The wait before retry ``retry`` (1-based) without jitter, in seconds (capped)."""
        if retry < 1:
            raise ValueError(f"retry numbers start at 1 (got {retry})")
        return min(self.base_s * self.factor ** (retry - 1), self.max_delay_s)

    def delay_s(self, retry: int, rng: random.Random,
                retry_after_s: float | None = None) -> float:
        """The wait before retry ``retry`` (seconds): the backoff with jitter from ``rng``,
        capped at ``max_delay_s``, or ``retry_after_s`` when the service asked for longer."""
        delay = min(self.backoff_s(retry) * (1 + self.jitter * rng.random()), self.max_delay_s)
        return max(delay, retry_after_s) if retry_after_s is not None else delay

    def delays(self, retries: int, key: str = "") -> list[float]:
        """The first ``retries`` waits (seconds) of a call with ``key``, as its retries see them."""
        rng = self.rng(key)
        return [self.delay_s(k, rng) for k in range(1, retries + 1)]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)
