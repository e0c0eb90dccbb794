"""Lesson 10's check: pass_hat (pass^k), judged on a gallery of broken solutions."""

from __future__ import annotations

import math

import pytest
from notebook_cells import solution

from primer.course.practice.pass_k import check_pass_hat
from primer.harness.evals.results import pass_hat_k


def test_the_notebooks_reference_solution_passes():
    assert check_pass_hat(solution("10", "pass_hat"), show=False).ok
    assert check_pass_hat(pass_hat_k, show=False).ok


def naive(n, c, k):
    return (c / n) ** k


def factorials(n, c, k):
    if not 1 <= k <= n or not 0 <= c <= n:
        raise ValueError("out of range")
    falling = math.factorial(c) // math.factorial(c - k)
    return falling / (math.factorial(n) // math.factorial(n - k))


def no_refusal(n, c, k):
    return math.comb(c, k) / math.comb(n, k) if k <= n else 0.0


def pass_at_instead(n, c, k):
    if not 1 <= k <= n or not 0 <= c <= n:
        raise ValueError("out of range")
    return 1 - math.comb(n - c, k) / math.comb(n, k)


def swapped(n, c, k):
    if not 1 <= k <= n or not 0 <= c <= n:
        raise ValueError("out of range")
    return math.comb(n, k) / math.comb(c, k) if c >= k else 0.0


def clamps_k(n, c, k):
    k = min(max(k, 1), n)
    if not 0 <= c <= n:
        raise ValueError("out of range")
    return math.comb(c, k) / math.comb(n, k)


def wrong_exception(n, c, k):
    if not 1 <= k <= n or not 0 <= c <= n:
        raise AssertionError("out of range")
    return math.comb(c, k) / math.comb(n, k)


@pytest.mark.parametrize("fn, case, words", [
    (naive, "unbiased", "the naive estimate"),
    (naive, "fewer passes than k", "returned 0.008, expected 0"),
    (factorials, "fewer passes than k", "factorial() not defined for negative values"),
    (no_refusal, "refused", "returned 0; raise ValueError"),
    (pass_at_instead, "unbiased", "returned 0.9167, expected 0.08333"),
    (swapped, "unbiased", "returned 12, expected 0.08333"),
    (clamps_k, "refused", "(k larger than the trials recorded)"),
    (wrong_exception, "refused", "raised AssertionError"),
])
def test_a_broken_pass_hat_fails_the_right_case(fn, case, words):
    report = check_pass_hat(fn, show=False)
    assert case in report.failed, report
    assert words in report.detail(case)


@pytest.mark.parametrize("junk", [
    lambda n, c, k: None, lambda n, c, k: "0.5", lambda n, c, k: 1 / 0,
    lambda n, c, k: float("nan"), lambda n, c, k: True, lambda: 0.5])
def test_the_check_never_raises_on_junk(junk):
    report = check_pass_hat(junk, show=False)
    assert not report.ok and report.total == 7


def test_a_value_that_is_not_a_function_is_refused():
    with pytest.raises(TypeError):
        check_pass_hat(0.5)
