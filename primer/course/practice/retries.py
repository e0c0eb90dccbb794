"""Lesson 09's exercise: a backoff schedule with full jitter, and a call run once per key.

The learner writes two functions:

* ``backoff_delays(retries, *, base_s=1.0, cap_s=60.0, seed=0) -> list[float]``: the wait
  before each of ``retries`` retries, in seconds. Before retry ``k`` (1-based) the ceiling is
  ``min(cap_s, base_s * 2 ** (k - 1))``, and the wait is drawn uniformly from
  ``[0, ceiling]`` ("full jitter", Marc Brooker, "Exponential Backoff And Jitter", AWS
  Architecture Blog, 2015) by a ``random.Random(seed)`` of its own, so the same seed gives
  the same schedule.
* ``call_once(finished, key, side_effect) -> result``: what a service does with an
  idempotency key. When ``key`` is in the dict ``finished`` it returns the stored result
  without running anything; otherwise it runs ``side_effect()``, stores its result under
  ``key`` and returns it. An attempt that raised is not finished: nothing is stored, the
  exception goes to the caller, and a retry with the same key runs it again.

:func:`check_backoff` and :func:`check_call_once` judge them on cases the learner did not
write.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from primer.course.checking import Case, ExerciseReport, Problem, run_cases, short

#: The settings the backoff cases use: a base and cap the learner's defaults do not have.
_BASE_S, _CAP_S, _RETRIES = 0.5, 4.0, 7
#: How many seeds the cases that look at the spread of the jitter draw.
_SEEDS = 200


def _ceiling(k: int, base_s: float = _BASE_S, cap_s: float = _CAP_S) -> float:
    return min(cap_s, base_s * 2 ** (k - 1))


def _schedule(fn: Callable[..., Any], retries: int, seed: int, base_s: float = _BASE_S,
              cap_s: float = _CAP_S) -> tuple[list[float] | None, Problem]:
    """The learner's schedule as a list of floats, or why it is not one."""
    got = fn(retries, base_s=base_s, cap_s=cap_s, seed=seed)
    try:
        delays = [float(d) for d in got]
    except (TypeError, ValueError):
        return None, (f"backoff_delays({retries}, ...) returned {short(repr(got))}; return a "
                      f"list of {retries} numbers of seconds")
    if len(delays) != retries:
        return None, (f"backoff_delays({retries}, ...) returned {len(delays)} waits, expected "
                      f"{retries}: one wait before each retry")
    if not all(math.isfinite(d) for d in delays):
        return None, f"backoff_delays returned {short(delays)}: every wait must be a number"
    return delays, None


def _many(fn: Callable[..., Any]) -> tuple[list[list[float]] | None, Problem]:
    """The schedules of seeds 0 .. _SEEDS-1."""
    runs = []
    for seed in range(_SEEDS):
        delays, problem = _schedule(fn, _RETRIES, seed)
        if delays is None:
            return None, problem
        runs.append(delays)
    return runs, None


def _length(fn: Callable[..., Any]) -> Problem:
    for retries in (0, 1, 5):
        _, problem = _schedule(fn, retries, seed=3)
        if problem:
            return problem
    return None


def _within_ceiling(fn: Callable[..., Any]) -> Problem:
    runs, problem = _many(fn)
    if runs is None:
        return problem
    for seed, delays in enumerate(runs):
        for k, d in enumerate(delays, start=1):
            if not 0 <= d <= _ceiling(k) + 1e-9:
                return (f"with base_s={_BASE_S}, cap_s={_CAP_S}, seed={seed}: the wait before "
                        f"retry {k} is {d:.3f} s, outside [0, {_ceiling(k):g}]; draw it from "
                        f"0 to min(cap_s, base_s * 2 ** (k - 1)), with k starting at 1")
    return None


def _full_jitter(fn: Callable[..., Any]) -> Problem:
    runs, problem = _many(fn)
    if runs is None:
        return problem
    k = 3
    ceiling = _ceiling(k)
    seen = [delays[k - 1] for delays in runs]
    low, high = min(seen), max(seen)
    if low > 0.25 * ceiling or high < 0.75 * ceiling:
        return (f"over {_SEEDS} seeds the wait before retry {k} stays within "
                f"{low:.3f}..{high:.3f} s, not spread over 0..{ceiling:g} s; full jitter draws "
                f"it uniformly between 0 and the ceiling (rng.uniform(0, ceiling))")
    return None


def _grows_and_capped(fn: Callable[..., Any]) -> Problem:
    runs, problem = _many(fn)
    if runs is None:
        return problem
    for k in range(1, _RETRIES + 1):
        largest = max(delays[k - 1] for delays in runs)
        if largest < 0.75 * _ceiling(k):
            return (f"over {_SEEDS} seeds the longest wait before retry {k} is {largest:.3f} s; "
                    f"its ceiling is {_ceiling(k):g} s (base_s={_BASE_S} doubled each retry, "
                    f"at most cap_s={_CAP_S}): let the ceiling grow, and apply the cap to it")
        if largest > _CAP_S + 1e-9:
            return (f"a wait of {largest:.3f} s before retry {k} passes cap_s={_CAP_S}; cap "
                    f"the ceiling with min(cap_s, ...)")
    return None


def _seeded(fn: Callable[..., Any]) -> Problem:
    first, problem = _schedule(fn, 5, seed=7)
    if first is None:
        return problem
    state = random.getstate()  # the learner's random module is left as it was found
    try:
        random.seed(12345)  # a learner's generator must not be the module's shared one
        random.random()
        again, problem = _schedule(fn, 5, seed=7)
    finally:
        random.setstate(state)
    if again is None:
        return problem
    if first != again:
        return (f"seed=7 gave {short([round(d, 3) for d in first])} then "
                f"{short([round(d, 3) for d in again])}; draw from rng = random.Random(seed), "
                f"not from the random module's shared generator")
    other, problem = _schedule(fn, 5, seed=8)
    if other is None:
        return problem
    if other == first:
        return ("seeds 7 and 8 give the same waits: seed the generator with seed, so that "
                "clients with different seeds spread out")
    return None


def check_backoff(fn: Callable[..., Any], *, show: bool = True) -> ExerciseReport:
    """Judge ``backoff_delays(retries, *, base_s, cap_s, seed) -> list[float]`` (seconds).

    Cases: one wait per retry (0, 1 and 5 retries); every wait within ``[0, min(cap_s,
    base_s · 2^(k-1))]``; the jitter spread over that whole range (full jitter); the longest
    wait seen over 200 seeds near each retry's ceiling, which doubles and stops at the cap;
    the same seed gives the same waits whatever the ``random`` module's state, another
    seed other waits. Prints the report when ``show``; raises ``TypeError`` only when
    ``fn`` is not callable.
    """
    cases = [
        Case("one wait per retry", _length, "0, 1 and 5 retries give 0, 1 and 5 waits"),
        Case("within the ceiling", _within_ceiling,
             "every wait is between 0 and min(cap_s, base_s · 2^(k-1))"),
        Case("full jitter", _full_jitter,
             "the waits spread over the whole range from 0 to the ceiling"),
        Case("grows, then capped", _grows_and_capped,
             "the longest waits double each retry and stop at cap_s"),
        Case("seeded", _seeded,
             "the same seed gives the same waits, another seed other waits"),
    ]
    return run_cases(fn, cases, what="backoff_delays", show=show)


class _Refunds:
    """A side effect that counts its runs and returns a new receipt each time."""

    def __init__(self, *, returns_none: bool = False) -> None:
        self.paid = 0
        self.returns_none = returns_none

    def __call__(self) -> Any:
        self.paid += 1
        return None if self.returns_none else f"refund {self.paid}"


def _first_call(fn: Callable[..., Any]) -> Problem:
    finished: dict[str, Any] = {}
    refund = _Refunds()
    got = fn(finished, "run-7:toolu_01", refund)
    if refund.paid != 1:
        return (f"a key seen for the first time ran the side effect {refund.paid} times; "
                f"run it once")
    if type(got) is not str or got != "refund 1":
        return f"returned {short(repr(got))}; return what the side effect returned ('refund 1')"
    if finished.get("run-7:toolu_01") != "refund 1":
        return (f"after the call, finished is {short(repr(finished))}; store the result "
                f"under its key: finished[key] = result")
    return None


def _two_calls(fn: Callable[..., Any], first: str, second: str) -> tuple[int, Any]:
    """Refunds paid and the second call's result, after calls with keys first, second."""
    finished: dict[str, Any] = {}
    refund = _Refunds()
    fn(finished, first, refund)
    got = fn(finished, second, refund)
    return refund.paid, got


def _same_key(fn: Callable[..., Any]) -> Problem:
    paid, again = _two_calls(fn, "run-7:toolu_01", "run-7:toolu_01")
    if paid != 1:
        return (f"the same key twice paid {paid} refunds; when the key is in finished, "
                f"return finished[key] without running the side effect")
    if type(again) is not str or again != "refund 1":
        return (f"the second call returned {short(repr(again))}; return the first call's "
                f"result, 'refund 1', so the caller learns what already happened")
    return None


def _other_key(fn: Callable[..., Any]) -> Problem:
    paid, got = _two_calls(fn, "run-7:toolu_01", "run-8:toolu_01")
    if paid != 2:
        return (f"keys run-7:toolu_01 and run-8:toolu_01 paid {paid} refund(s); a "
                f"different key is a different call: run it")
    if type(got) is not str or got != "refund 2":
        return f"the second key returned {short(repr(got))}, expected its own 'refund 2'"
    return None


def _falsy_result(fn: Callable[..., Any]) -> Problem:
    finished: dict[str, Any] = {}
    refund = _Refunds(returns_none=True)
    fn(finished, "run-7:toolu_02", refund)
    fn(finished, "run-7:toolu_02", refund)
    if refund.paid != 1:
        return (f"a side effect that returned None ran {refund.paid} times with one key; test "
                f"`key in finished`, not the stored value (None, 0 and '' are results too)")
    return None


class _Declined(Exception):
    pass


def _failed_attempt(fn: Callable[..., Any]) -> Problem:
    finished: dict[str, Any] = {}
    attempts = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise _Declined("card network down")
        return "refund 1"

    try:
        fn(finished, "run-7:toolu_03", flaky)
    except _Declined:
        pass
    else:
        return ("the side effect raised, and call_once swallowed it; let the exception reach "
                "the caller, who decides whether to retry")
    if "run-7:toolu_03" in finished:
        return (f"after an attempt that raised, finished is {short(repr(finished))}; store "
                f"the key only once the side effect has returned")
    got = fn(finished, "run-7:toolu_03", flaky)
    if len(attempts) != 2 or type(got) is not str or got != "refund 1":
        return (f"the retry after a failed attempt ran it {len(attempts) - 1} more time(s) and "
                f"returned {short(repr(got))}; a key whose attempt raised is not finished")
    return None


def check_call_once(fn: Callable[..., Any], *, show: bool = True) -> ExerciseReport:
    """Judge ``call_once(finished, key, side_effect)``: run a side effect once per key.

    ``finished`` is a dict of key → result, ``side_effect`` a function of no arguments.
    Cases: a new key runs the side effect once, returns and stores its result; the same key
    again returns the stored result without running it; another key runs it; a result of
    ``None`` still counts as finished; an attempt that raised lets the exception through,
    stores nothing, and a retry runs it. Prints the report when ``show``; raises
    ``TypeError`` only when ``fn`` is not callable.
    """
    cases = [
        Case("first call", _first_call,
             "a new key runs the side effect once and stores its result"),
        Case("same key again", _same_key,
             "the same key returns the first result without paying again"),
        Case("another key", _other_key, "a different key runs the side effect"),
        Case("a result of None", _falsy_result, "a result of None still marks the key finished"),
        Case("an attempt that raised", _failed_attempt,
             "a failed attempt stores nothing, so its retry runs"),
    ]
    return run_cases(fn, cases, what="call_once", show=show)
