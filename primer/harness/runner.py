"""Production tools: timeouts, retries with backoff and jitter, idempotency keys.

A tool that works in a notebook fails in production in three new ways: it hangs, it is
rate-limited, or it half-succeeds. This module holds the harness's answer to each.

**Timeouts.** Every call gets a limit in seconds (the run's default, or the tool's own
``timeout_s``). A call that passes it becomes an error result ("timed out after N s") and the
run goes on. How the harness stops waiting for a call without hanging itself, and what a
thread cannot do, is in :mod:`primer.harness.timeouts`.

**Retries.** A :class:`TransientToolError` (or :class:`RateLimited`, or a timeout) may pass
on a later try. Read-only tools are retried up to a configured count, waiting ``base ×
factor^(k-1)`` seconds before retry ``k`` (1 s, 2 s, 4 s, ...) plus up to ``jitter`` of that
again at random, never more than ``max_delay_s`` in all (60 s), or the server's
``retry_after_s`` if longer; then the harness gives up with an error result that says how
many attempts failed and why. The random jitter is seeded per call (seed + ``tool_use`` id),
so runs are reproducible however the threads interleave; ``sleep`` and ``clock`` are
injectable (:class:`~primer.harness.retry.ManualClock`), so tests and lessons wait no real
time. The schedule and the error vocabulary are in :mod:`primer.harness.retry`.

**Side-effecting tools** (``Tool.side_effecting``) get an idempotency key derived from the
``tool_use`` id (see :func:`primer.loop.tools.idempotency_key`). A timeout is never retried
automatically: the first attempt may have done its work, and being abandoned rather than
stopped it may still be running, so a retry would race it; and the key protects only if the
service honours it (and the tool takes one at all). The error result tells the model to check
the state instead. Other transient errors (a 503, a 429) prove the attempt finished, so they
are retried, always with the same key: a server that already did the work answers with the
earlier result instead of doing it twice.

**Hooks.** The runner is the seam the loop hands each call to
(:class:`~primer.loop.state.RunInputs`.runner), so hooks wrap the call here: ``before_tool``
once before the first attempt, ``after_tool`` once after the last (see
:mod:`primer.harness.hooks`).

(Model calls are retried by the loop itself, :func:`primer.loop.steps.call_model`, by the
same :class:`~primer.loop.config.RetryPolicy`.)

Source of the backoff schedule: exponential backoff with jitter as described in Marc Brooker,
"Exponential Backoff And Jitter", AWS Architecture Blog (2015); the 1 s / 2 s / 4 s figures
are the course's (SYLLABUS, "Production tools").
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from primer.loop.config import AgentConfig, RetryPolicy
from primer.loop.messages import ToolUseBlock
from primer.loop.text import safe_str
from primer.loop.tools import ErrorKind, Tool, ToolExecution, ToolRegistry, idempotency_key

from .allowance import time_left_s
from .hooks import Hooks, run_hooked
from .retry import ToolTimeout, TransientToolError
from .timeouts import call_with_timeout

# ---------------------------------------------------------------- the tool runner

@dataclass
class ToolRunner:
    """Runs one ``tool_use`` block with a timeout and retries: ``runner(block) -> ToolExecution``.

    Pass it as ``execute_tools(registry, calls, run=runner)``; the production harness builds
    one from the run's :class:`~primer.loop.config.AgentConfig` (:meth:`from_config`) and
    plugs it into the loop as the run's ``runner``.

    - ``timeout_s``: default limit per attempt in seconds (a tool's own ``timeout_s`` wins);
      ``None`` runs calls in the calling thread with no limit.
    - ``retries``: retries after the first attempt for transient errors (0 = never retry).
    - ``policy``: the waits between attempts; ``sleep(seconds)`` waits (injectable).
    - ``hooks``: :class:`~primer.harness.hooks.Hooks` around every call.

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
    hooks: list[Hooks] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"ToolRunner: retries must be >= 0 (got {self.retries})")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError(f"ToolRunner: timeout_s must be > 0 seconds or None "
                             f"(got {self.timeout_s})")

    @classmethod
    def from_config(cls, registry: ToolRegistry, config: AgentConfig,
                    hooks: Iterable[Hooks] = ()) -> ToolRunner:
        """A run's runner, from ``tool_timeout_s``, ``tool_retries``, ``retry`` and ``sleep``."""
        return cls(registry, config.tool_timeout_s, config.tool_retries, config.retry,
                   config.sleep, list(hooks))

    def timeout_for(self, t: Tool) -> float | None:
        """Seconds one attempt of ``t`` may take: its own ``timeout_s``, else the default."""
        return t.timeout_s if t.timeout_s is not None else self.timeout_s

    def __call__(self, block: ToolUseBlock) -> ToolExecution:
        if self.hooks:
            return run_hooked(self.hooks, self.run_call, block, self.registry)
        return self.run_call(block)

    def run_call(self, block: ToolUseBlock) -> ToolExecution:
        """One call's attempts, without the hooks: the result the model gets."""
        t = self.registry.get(block.get("name"))
        if t is None:
            return self.registry.run(block)
        if t.timeout_s is None and self.timeout_s is None:  # an untimed first attempt, lean
            execution = self.registry.run(block, invoke=_invoke_untimed, tool=t)
            error = _caught.error  # (None between calls: it is cleared once read)
            if error is None:
                return execution  # the common case: one attempt, no transient error
            _caught.error = None
            return self._attempts(block, t, [], (execution, error))
        return self._attempts(block, t, [], None)

    def _attempts(self, block: ToolUseBlock, t: Tool, log: list[dict[str, Any]],
                  first: tuple[ToolExecution, TransientToolError] | None) -> ToolExecution:
        """Attempts of one call until one succeeds, fails for good or retries run out.

        ``log`` holds the attempts made so far; ``first``, when given, is the outcome of an
        attempt already made (an untimed first attempt) to count before any new one.
        """
        timeout = self.timeout_for(t)
        error: TransientToolError | None
        while True:
            if first is not None:
                (execution, error), first = first, None
            else:
                caught: list[TransientToolError] = []

                def invoke(tool: Tool, args: dict[str, Any], tool_use_id: str,
                           caught: list[TransientToolError] = caught) -> Any:
                    try:
                        if timeout is None:
                            return tool.invoke(args, tool_use_id)
                        return call_with_timeout(lambda: tool.invoke(args, tool_use_id),
                                                 timeout)
                    except TransientToolError as e:
                        caught.append(e)
                        raise
                    except TimeoutError as e:  # the tool's own client timed out
                        caught.append(client_timeout(e))
                        raise caught[-1] from e

                execution = self.registry.run(block, invoke=invoke)
                error = caught[0] if caught else None
                if error is None and not log:
                    return execution  # the common case: one attempt, no transient error
            outcome = self.after_attempt(block, t, execution, error, log)
            if isinstance(outcome, ToolExecution):
                return outcome
            self.sleep(outcome)

    def after_attempt(self, block: ToolUseBlock, t: Tool, execution: ToolExecution,
                      error: TransientToolError | None,
                      log: list[dict[str, Any]]) -> ToolExecution | float:
        """What follows one attempt of ``t`` (its ``execution``, and the transient ``error``
        it raised or ``None``), with ``log`` the attempts before it: the call's final
        execution, or the seconds to wait before the next attempt (the attempt is logged).

        The one retry rule of both loops (the async loop makes its attempts with asyncio and
        asks this what follows each).
        """
        if error is None and not log:
            return execution  # the common case: one attempt, no transient error
        call_id = str(block.get("id", ""))
        record: dict[str, Any] = {"attempt": len(log) + 1,
                                  "kind": "ok" if not execution.is_error
                                  else execution.error_kind,
                                  "error": execution.content if execution.is_error else None,
                                  "latency_s": execution.latency_s, "delay_s": None}
        if t.side_effecting:
            record["idempotency_key"] = idempotency_key(call_id)
        log.append(record)
        if error is None:
            return self._finish(execution, log)
        record["kind"] = error.kind
        record["error"] = str(error)
        if t.side_effecting and isinstance(error, ToolTimeout):
            return self._finish(execution, log, _side_effect_timeout_message(t, call_id, error),
                                "timeout")
        if t.side_effecting and not t.takes_idempotency_key:  # a retry could do it twice
            return self._finish(execution, log, _no_key_message(t, error), error.kind)
        if len(log) > self.retries:
            return self._finish(execution, log, _gave_up_message(t, log), error.kind
                                if len(log) == 1 else "gave_up")
        delay = self.policy.delay_at(len(log), call_id, error.retry_after_s)
        why = self.policy.why_not_wait(delay, time_left_s())
        if why:
            return self._finish(execution, log, _gave_up_message(t, log, why),
                                error.kind if len(log) == 1 else "gave_up")
        record["delay_s"] = delay
        return delay

    @staticmethod
    def _finish(execution: ToolExecution, log: list[dict[str, Any]], content: str | None = None,
                error_kind: ErrorKind | None = None) -> ToolExecution:
        # The execution is the last attempt's, fresh from registry.run: complete it in place.
        execution.content = content or execution.content
        execution.error_kind = error_kind or execution.error_kind
        execution.attempts = len(log)
        execution.latency_s = sum(r["latency_s"] for r in log)
        execution.attempt_log = log
        return execution


class _Caught(threading.local):
    """The transient error this thread's last untimed attempt raised (read, then cleared)."""

    error: TransientToolError | None = None


_caught = _Caught()


def _invoke_untimed(tool: Tool, args: dict[str, Any], tool_use_id: str) -> Any:
    """``tool.invoke``, noting a transient error for :class:`ToolRunner` (no closure per call)."""
    try:
        return tool.invoke(args, tool_use_id)
    except TransientToolError as e:
        _caught.error = e
        raise
    except TimeoutError as e:  # the tool's own client timed out
        _caught.error = client_timeout(e)
        raise _caught.error from e


def client_timeout(error: TimeoutError) -> ToolTimeout:
    """A plain ``TimeoutError`` raised by a tool (its HTTP client, a lock) as a
    :class:`ToolTimeout`: transient for a read-only tool, outcome unknown for a side effect."""
    detail = safe_str(error, 300) or "no detail"
    return ToolTimeout(None, reason=f"{type(error).__name__}: {detail}")


def _no_key_message(t: Tool, error: TransientToolError) -> str:
    return (f"{t.name} failed: {error}. It changes state and takes no idempotency key, so it "
            f"was not retried: the failed attempt may still have taken effect, and a retry "
            f"could do it twice. Check the current state (look the result up) before calling "
            f"{t.name} again.")


def _side_effect_timeout_message(t: Tool, call_id: str, error: ToolTimeout) -> str:
    if error.timeout_s is None:  # the tool's own client timed out
        head = f"{t.name} timed out ({error.reason}); its outcome is unknown"
    else:
        done = (f"{error.how}, possibly part-way" if error.stopped
                else "the call was abandoned, not stopped, so it may still complete")
        head = f"{t.name} timed out after {error.timeout_s:g} s; {done}: its outcome is unknown"
    return (f"{head}. It changes state, so it was not retried automatically: the first attempt "
            f"may already have taken effect. Check the current state (look the result up) "
            f"before calling {t.name} again. Idempotency key of this call: "
            f"{idempotency_key(call_id)}.")


def _gave_up_message(t: Tool, log: list[dict[str, Any]], why: str | None = None) -> str:
    if len(log) == 1:
        return (f"{t.name} failed: {log[0]['error']}. It was not retried"
                f"{f' ({why})' if why else ''}; it may work if called again later. If it "
                f"keeps failing, tell the user the service is unavailable.")
    waited = sum(r["delay_s"] or 0.0 for r in log)
    counts = Counter(r["error"] for r in log)  # in order of first appearance
    reasons = "; ".join(f"{error} ×{n}" if n > 1 else error for error, n in counts.items())
    return (f"{t.name} failed {len(log)} attempts ({reasons}), with {waited:.1f} s of backoff "
            f"between them; gave up{f' ({why})' if why else ''}. The service is not answering "
            f"now: do not call {t.name} again in this task; tell the user it is unavailable "
            f"and to try later.")
