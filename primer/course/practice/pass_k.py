"""Lesson 10's exercise: pass^k, the chance that all k tries of a task pass.

The learner writes ``pass_hat(n, c, k) -> float``: from ``c`` passes in ``n`` recorded
trials, the chance that ``k`` trials drawn from them (without replacement) all pass,
``C(c, k) / C(n, k)`` (the estimator of tau-bench, Yao et al. 2024; the same as
:func:`primer.harness.evals.results.pass_hat_k`). It is unbiased, unlike the naive
``(c / n) ** k``, and it refuses what the trials cannot answer: ``k`` outside ``1..n`` or
``c`` outside ``0..n`` raise ``ValueError``. :func:`check_pass_hat` judges it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from primer.course.checking import (
    Case,
    ExerciseReport,
    Problem,
    describe_exception,
    run_cases,
    short,
)
from primer.harness.evals.results import pass_hat_k


def _value(fn: Callable[..., Any], n: int, c: int, k: int) -> tuple[float | None, Problem]:
    got = fn(n, c, k)
    if isinstance(got, bool) or not isinstance(got, int | float) or not math.isfinite(got):
        return None, (f"pass_hat({n}, {c}, {k}) returned {short(repr(got))}; return a number "
                      f"between 0 and 1")
    return float(got), None


def _expect(fn: Callable[..., Any], n: int, c: int, k: int, hint: str) -> Problem:
    got, problem = _value(fn, n, c, k)
    if got is None:
        return problem
    want = pass_hat_k(n, c, k)
    if abs(got - want) > 1e-9:
        return f"pass_hat({n}, {c}, {k}) returned {got:.4g}, expected {want:.4g}: {hint}"
    return None


def _all_pass(fn: Callable[..., Any]) -> Problem:
    return _expect(fn, 10, 10, 3, "when every trial passed, every k of them pass")


def _none_pass(fn: Callable[..., Any]) -> Problem:
    return _expect(fn, 10, 0, 1, "when no trial passed, no k of them all pass")


def _unbiased(fn: Callable[..., Any]) -> Problem:
    got, problem = _value(fn, 10, 5, 3)
    if got is None:
        return problem
    if abs(got - (5 / 10) ** 3) < 1e-9:
        return (f"pass_hat(10, 5, 3) returned {got:.4g}, which is (c/n)^k, the naive estimate; "
                f"count the sets of k trials that all passed: C(c, k) / C(n, k) = "
                f"{pass_hat_k(10, 5, 3):.4g}")
    return _expect(fn, 10, 5, 3, "C(c, k) / C(n, k), e.g. with math.comb")


def _fewer_passes_than_k(fn: Callable[..., Any]) -> Problem:
    return _expect(fn, 10, 2, 3, "with fewer passes than k, no k trials can all pass")


def _k_is_n(fn: Callable[..., Any]) -> Problem:
    return (_expect(fn, 4, 3, 4, "k = n uses every trial: all must have passed")
            or _expect(fn, 4, 4, 4, "k = n uses every trial: all passed"))


def _refused(fn: Callable[..., Any]) -> Problem:
    for n, c, k, why in ((3, 2, 5, "k larger than the trials recorded"),
                         (3, 2, 0, "k = 0"),
                         (3, 4, 2, "more passes than trials")):
        try:
            got = fn(n, c, k)
        except ValueError:
            continue
        except Exception as e:  # noqa: BLE001 - the learner's exception is the verdict
            return (f"pass_hat({n}, {c}, {k}) ({why}) {describe_exception(e, fn)}; raise "
                    f"ValueError saying what is wrong")
        shown = f"{got:.4g}" if isinstance(got, float) else short(repr(got))
        return (f"pass_hat({n}, {c}, {k}) ({why}) returned {shown}; raise "
                f"ValueError: {n} trials cannot answer it")
    return None


def _matches_library(fn: Callable[..., Any]) -> Problem:
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                problem = _expect(fn, n, c, k, "C(c, k) / C(n, k)")
                if problem:
                    return problem
    return None


def check_pass_hat(fn: Callable[..., Any], *, show: bool = True) -> ExerciseReport:
    """Judge ``pass_hat(n, c, k) -> float``: the chance that k of n trials, c of which
    passed, all pass.

    Cases: all trials passed (1.0); none passed (0.0); 5 of 10 passed, k = 3 (the unbiased
    1/12, not the naive 1/8); fewer passes than k (0.0); k = n; ``ValueError`` for k > n,
    k = 0 and c > n; every n up to 8 against
    :func:`primer.harness.evals.results.pass_hat_k`. Prints the report when ``show``;
    raises ``TypeError`` only when ``fn`` is not callable.
    """
    cases = [
        Case("all pass", _all_pass, "10 passes of 10 give 1.0 for any k"),
        Case("none pass", _none_pass, "0 passes of 10 give 0.0"),
        Case("unbiased", _unbiased, "5 of 10, k = 3 gives C(5,3)/C(10,3) = 1/12, not (1/2)^3"),
        Case("fewer passes than k", _fewer_passes_than_k, "2 passes of 10 give 0.0 for k = 3"),
        Case("k = n", _k_is_n, "k = n is 1.0 only when every trial passed"),
        Case("refused", _refused, "k > n, k = 0 and c > n raise ValueError"),
        Case("every small case", _matches_library,
             "agrees with primer's pass_hat_k for every n up to 8"),
    ]
    return run_cases(fn, cases, what="pass_hat", show=show)
