"""Production tools: timeouts, retries with backoff and jitter, idempotency keys.

A tool that works in a notebook fails in production in three new ways: it hangs, it is
rate-limited, or it half-succeeds. This module holds the harness's answer to each.

**Timeouts.** Every call gets a limit in seconds (the run's default, or the tool's own
``timeout_s``). A call that passes it becomes an error result ("timed out after N s") and the
run goes on. The call runs on a worker thread so the harness can stop *waiting* for it; the
workers are daemon threads, so a tool that never returns can keep neither the run nor the
interpreter's exit waiting. (``concurrent.futures`` pools are not used for this: since
Python 3.9 their workers are joined at interpreter exit, so one hung call would hang exit.)

What a thread cannot do: Python has no way to stop another thread. A timed-out call is
*abandoned*, not stopped; it keeps running in the background and its side effect (a refund,
an email) may still happen after the harness reported a timeout. To run a tool that may hang
somewhere it can really be stopped, use :func:`run_in_subprocess` (or wrap its function with
:func:`in_subprocess`): the call runs in a fresh process that is killed on timeout.

**Retries.** A :class:`TransientToolError` (or :class:`RateLimited`, or a timeout) may pass
on a later try. Read-only tools are retried up to a configured count, waiting ``base ×
factor^(k-1)`` seconds before retry ``k`` (1 s, 2 s, 4 s, ...) plus up to ``jitter`` of that
again at random, never more than ``max_delay_s`` in all (60 s), or the server's
``retry_after_s`` if longer; then the harness gives up with an error result that says how
many attempts failed and why. The random jitter is seeded per call (seed + ``tool_use`` id),
so runs are reproducible however the threads interleave; ``sleep`` and ``clock`` are
injectable (:class:`ManualClock`), so tests and lessons wait no real time.

**Side-effecting tools** (``Tool.side_effecting``) get an idempotency key derived from the
``tool_use`` id (see :func:`primer.agents.tools.idempotency_key`). A timeout is never retried
automatically: the first attempt may have done its work, and being abandoned rather than
stopped it may still be running, so a retry would race it; and the key protects only if the
service honours it (and the tool takes one at all). The error result tells the model to check
the state instead. Other transient errors (a 503, a 429) prove the attempt finished, so they
are retried, always with the same key: a server that already did the work answers with the
earlier result instead of doing it twice.

**Model calls.** :func:`call_model_with_retries` retries a
:class:`~primer.agents.llm.TransientModelError` for that one call (no tool runs again) and
counts the usage of failed attempts when the provider reported one.

Source of the backoff schedule: exponential backoff with jitter as described in Marc Brooker,
"Exponential Backoff And Jitter", AWS Architecture Blog (2015); the 1 s / 2 s / 4 s figures
are the course's (SYLLABUS, "Production tools").
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import pickle
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .._subprocess_child import run_and_send
from .llm import Reply, TransientModelError, Usage
from .messages import Block
from .tools import Tool, ToolError, ToolExecution, ToolRegistry, idempotency_key

if TYPE_CHECKING:
    from .agent_loop import AgentConfig


# ---------------------------------------------------------------- the error vocabulary

class TransientToolError(ToolError):
    """Raise inside a tool for a failure a later try may not have (a 503, a dropped link).

    ``retry_after_s`` is how long the service asked the caller to wait (seconds), or
    ``None``. The harness retries read-only tools that raise it; without a retry policy it is
    an ordinary :class:`~primer.agents.tools.ToolError` and its message goes to the model.
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

    ``stopped`` is true when the work itself was stopped (a killed subprocess), false when
    it was only abandoned (a thread, which Python cannot stop).
    """

    kind = "timeout"

    def __init__(self, timeout_s: float, *, stopped: bool = False) -> None:
        how = "its process was stopped" if stopped else "it may still be running"
        super().__init__(f"timed out after {timeout_s:g} s ({how})")
        self.timeout_s = timeout_s
        self.stopped = stopped


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

    Pass ``clock=c, sleep=c.sleep`` to :class:`~primer.agents.AgentConfig` (or to
    :class:`ToolRunner`) and backoff waits take no real time, while the wall-clock limit and
    the attempt records still see them. ``slept`` lists every wait (seconds). Thread-safe.
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
    :class:`~primer.agents.AgentConfig`).

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


# ---------------------------------------------------------------- timeouts on daemon threads

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


def call_with_timeout(fn: Callable[[], Any], timeout_s: float | None) -> Any:
    """``fn()``, but raise :class:`ToolTimeout` if it has not returned after ``timeout_s`` s.

    With ``timeout_s=None`` the call runs in the calling thread (no thread hand-off). Else it
    runs on a long-lived daemon worker thread; on timeout the worker is abandoned (Python
    cannot stop a thread), so the call may still finish later, side effects included.
    Exceptions raised by ``fn`` are re-raised in the caller.
    """
    if timeout_s is None:
        return fn()
    job = _WORKERS.submit(fn)
    if not job.done.acquire(timeout=timeout_s):
        raise ToolTimeout(timeout_s)
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
    not for every call.

    Raises ``fn``'s own exception if it raised one, :class:`ToolTimeout` on timeout,
    :class:`~primer.agents.tools.ToolError` if the process died without answering, and
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


# ---------------------------------------------------------------- the tool runner

@dataclass
class ToolRunner:
    """Runs one ``tool_use`` block with a timeout and retries: ``runner(block) -> ToolExecution``.

    Pass it as ``execute_tools(registry, calls, run=runner)``; the agent loop builds one from
    its :class:`~primer.agents.AgentConfig` (:meth:`from_config`).

    - ``timeout_s``: default limit per attempt in seconds (a tool's own ``timeout_s`` wins);
      ``None`` runs calls in the calling thread with no limit.
    - ``retries``: retries after the first attempt for transient errors (0 = never retry).
    - ``policy``: the waits between attempts; ``sleep(seconds)`` waits (injectable).

    Read-only tools retry every transient error. Side-effecting tools never retry a timeout
    (the result says to check state first) and retry other transient errors with the same
    idempotency key. When a call meets a transient error, every attempt is recorded in
    ``ToolExecution.attempt_log`` as ``{"attempt", "kind", "error", "latency_s",
    "delay_s"}`` (``delay_s`` is the wait after it, ``None`` if there was none), plus
    ``"idempotency_key"`` for side-effecting tools; a call whose first attempt ends without
    one keeps ``attempts == 1`` and an empty log (the fast path adds almost nothing to
    :meth:`ToolRegistry.run`). Never raises for a failing tool: every failure is an error
    result.
    """

    registry: ToolRegistry
    timeout_s: float | None = 30.0
    retries: int = 2
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"ToolRunner: retries must be >= 0 (got {self.retries})")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError(f"ToolRunner: timeout_s must be > 0 seconds or None "
                             f"(got {self.timeout_s})")

    @classmethod
    def from_config(cls, registry: ToolRegistry, config: AgentConfig) -> ToolRunner:
        """A run's runner, from ``tool_timeout_s``, ``tool_retries``, ``retry`` and ``sleep``."""
        return cls(registry, config.tool_timeout_s, config.tool_retries, config.retry,
                   config.sleep)

    def timeout_for(self, t: Tool) -> float | None:
        """Seconds one attempt of ``t`` may take: its own ``timeout_s``, else the default."""
        return t.timeout_s if t.timeout_s is not None else self.timeout_s

    def __call__(self, block: Block) -> ToolExecution:
        t = self.registry.get(block.get("name"))
        if t is None:
            return self.registry.run(block)
        timeout = self.timeout_for(t)
        call_id = str(block.get("id", ""))
        log: list[dict[str, Any]] = []
        rng: random.Random | None = None
        while True:
            caught: list[TransientToolError] = []

            def invoke(tool: Tool, args: dict[str, Any], tool_use_id: str,
                       caught: list[TransientToolError] = caught) -> Any:
                try:
                    return call_with_timeout(lambda: tool.invoke(args, tool_use_id), timeout)
                except TransientToolError as e:
                    caught.append(e)
                    raise

            execution = self.registry.run(block, invoke=invoke)
            if not caught and not log:
                return execution  # the common case: one attempt, no transient error
            record: dict[str, Any] = {"attempt": len(log) + 1,
                                      "kind": "ok" if not execution.is_error
                                      else execution.error_kind,
                                      "error": execution.content if execution.is_error else None,
                                      "latency_s": execution.latency_s, "delay_s": None}
            if t.side_effecting:
                record["idempotency_key"] = idempotency_key(call_id)
            log.append(record)
            if not caught:
                return self._finish(execution, log)
            error = caught[0]
            record["kind"] = error.kind
            record["error"] = str(error)
            if t.side_effecting and isinstance(error, ToolTimeout):
                return self._finish(execution, log, _side_effect_timeout_message(t, call_id, error),
                                    "timeout")
            if len(log) > self.retries:
                return self._finish(execution, log, _gave_up_message(t, log), error.kind
                                    if len(log) == 1 else "gave_up")
            rng = rng or self.policy.rng(call_id)
            record["delay_s"] = self.policy.delay_s(len(log), rng, error.retry_after_s)
            self.sleep(record["delay_s"])

    @staticmethod
    def _finish(execution: ToolExecution, log: list[dict[str, Any]], content: str | None = None,
                error_kind: str | None = None) -> ToolExecution:
        # The execution is the last attempt's, fresh from registry.run: complete it in place.
        execution.content = content or execution.content
        execution.error_kind = error_kind or execution.error_kind
        execution.attempts = len(log)
        execution.latency_s = sum(r["latency_s"] for r in log)
        execution.attempt_log = log
        return execution


def _side_effect_timeout_message(t: Tool, call_id: str, error: ToolTimeout) -> str:
    done = ("its process was stopped, possibly part-way" if error.stopped
            else "the call was abandoned, not stopped, so it may still complete")
    return (f"{t.name} timed out after {error.timeout_s:g} s; {done}. It changes state, so it "
            f"was not retried automatically: the first attempt may already have taken effect. "
            f"Check the current state (look the result up) before calling {t.name} again. "
            f"Idempotency key of this call: {idempotency_key(call_id)}.")


def _gave_up_message(t: Tool, log: list[dict[str, Any]]) -> str:
    if len(log) == 1:
        return (f"{t.name} failed: {log[0]['error']}. It was not retried; it may work if "
                f"called again later. If it keeps failing, tell the user the service is "
                f"unavailable.")
    waited = sum(r["delay_s"] or 0.0 for r in log)
    counts = Counter(r["error"] for r in log)  # in order of first appearance
    reasons = "; ".join(f"{error} ×{n}" if n > 1 else error for error, n in counts.items())
    return (f"{t.name} failed {len(log)} attempts ({reasons}), with {waited:.1f} s of backoff "
            f"between them; gave up. The service is not answering now: do not call {t.name} "
            f"again in this task; tell the user it is unavailable and to try later.")


# ---------------------------------------------------------------- model calls

def call_model_with_retries(call: Callable[[], Reply], *, retries: int, policy: RetryPolicy,
                            sleep: Callable[[float], None], key: str,
                            failed: list[dict[str, Any]]) -> Reply:
    """``call()``, retried up to ``retries`` times on a transient model error.

    A transient error is a :class:`~primer.agents.llm.TransientModelError` (rate limit,
    overload, connection). Only this one model call is repeated: the message list it sends
    is the same, so no tool that already ran runs again. Each failed attempt is appended to
    ``failed`` as ``{"attempt", "error", "retry_after_s", "delay_s", "usage"}`` (``usage``
    when the provider reported the failed call's tokens, else ``None``), so the caller can
    count what failed attempts cost. ``key`` seeds the jitter.

    Raises :class:`ModelRetriesExhausted` when every attempt failed transiently; any other
    exception from ``call`` propagates at once (it is not transient).
    """
    rng: random.Random | None = None
    while True:
        try:
            return call()
        except TransientModelError as e:
            usage = e.usage if isinstance(e.usage, Usage) else None
            record = {"attempt": len(failed) + 1, "error": f"{type(e).__name__}: {e}",
                      "retry_after_s": e.retry_after_s, "delay_s": None,
                      "usage": usage.to_dict() if usage else None}
            failed.append(record)
            if len(failed) > retries:
                raise ModelRetriesExhausted(failed) from e
            rng = rng or policy.rng(key)
            record["delay_s"] = policy.delay_s(len(failed), rng, e.retry_after_s)
            sleep(record["delay_s"])


def failed_usage(failed: list[dict[str, Any]]) -> Usage:
    """The summed usage of failed attempts recorded by :func:`call_model_with_retries`."""
    total = Usage()
    for record in failed:
        if record.get("usage"):
            total = total + Usage.from_dict(record["usage"])
    return total
