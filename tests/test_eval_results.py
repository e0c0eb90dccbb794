"""Eval figures: pass@k and pass^k against counting subsets, the Wilson interval against its
published values and by simulation, the clustered sample size, and the summary of rows."""

from __future__ import annotations

import random
from itertools import combinations

import pytest

from primer.harness.evals.results import (
    EvalRow,
    EvalSummary,
    effective_sample_size,
    pass_at_k,
    pass_hat_k,
    suite_interval,
    wilson_interval,
)


def subsets_share(n: int, c: int, k: int, need_all: bool) -> float:
    """The share of k-subsets of n trials (c of them passes) with at least one / all passes."""
    trials = [True] * c + [False] * (n - c)
    subsets = list(combinations(trials, k))
    hits = sum((all(s) if need_all else any(s)) for s in subsets)
    return hits / len(subsets)


@pytest.mark.parametrize("n, c, k", [(5, 0, 1), (5, 2, 2), (6, 3, 4), (10, 1, 3), (10, 7, 10),
                                     (8, 8, 5)])
def test_pass_at_k_is_the_share_of_k_subsets_of_the_trials_with_at_least_one_pass(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(subsets_share(n, c, k, need_all=False))


@pytest.mark.parametrize("n, c, k", [(5, 0, 1), (5, 2, 2), (6, 3, 4), (10, 9, 3), (10, 10, 10),
                                     (8, 5, 5)])
def test_pass_hat_k_is_the_share_of_k_subsets_of_the_trials_that_all_pass(n, c, k):
    assert pass_hat_k(n, c, k) == pytest.approx(subsets_share(n, c, k, need_all=True))


def test_with_k_equal_to_one_both_are_the_pass_rate():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3) == pass_hat_k(10, 3, 1)


@pytest.mark.parametrize("n, c, k", [(5, 6, 1), (5, -1, 1), (5, 2, 6), (5, 2, 0)])
def test_impossible_counts_are_a_clear_error(n, c, k):
    with pytest.raises(ValueError, match="need"):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError, match="need"):
        pass_hat_k(n, c, k)


@pytest.mark.parametrize("passed, n, published", [
    (81, 263, (0.2553, 0.3662)), (15, 148, (0.0624, 0.1605)), (0, 20, (0.0, 0.1611)),
    (1, 29, (0.0061, 0.1718))])
def test_wilson_interval_matches_the_published_95_percent_limits(passed, n, published):
    # Newcombe 1998, "Two-sided confidence intervals for the single proportion", Stat Med
    # 17:857-872: its four worked examples, method 3 (score, no continuity correction)
    assert wilson_interval(passed / n, n) == pytest.approx(published, abs=1e-4)


def test_wilson_interval_covers_the_true_rate_about_95_percent_of_the_time():
    rng = random.Random(7)
    p, n, runs = 0.3, 40, 2000
    covered = 0
    for _ in range(runs):
        passed = sum(rng.random() < p for _ in range(n))
        lo, hi = wilson_interval(passed / n, n)
        covered += lo <= p <= hi
    assert 0.93 <= covered / runs <= 0.97


def test_wilson_interval_refuses_a_proportion_outside_0_1_or_no_observations():
    with pytest.raises(ValueError, match="proportion"):
        wilson_interval(1.2, 10)
    with pytest.raises(ValueError, match="observation"):
        wilson_interval(0.5, 0)


def test_repeats_count_fully_when_tasks_are_alike_and_not_at_all_when_each_is_fixed():
    alike = [0.6, 0.6, 0.6, 0.6]                      # 4 tasks x 10 trials, equally hard
    fixed = [1.0, 0.0, 1.0, 1.0]                      # each task always passes or fails
    assert effective_sample_size(alike, 40) == 40
    assert effective_sample_size(fixed, 40) == pytest.approx(4)
    one_trial_each = [1.0, 0.0, 1.0, 0.0, 1.0]
    assert effective_sample_size(one_trial_each, 5) == pytest.approx(5)
    assert suite_interval(one_trial_each, 5) == wilson_interval(0.6, 5)


def test_the_suite_interval_covers_the_mean_of_tasks_drawn_at_random_about_95_percent():
    rng = random.Random(11)
    tasks, k, runs, covered = 30, 10, 1000, 0
    for _ in range(runs):
        rates = [sum(rng.random() < p for _ in range(k)) / k
                 for p in (rng.random() for _ in range(tasks))]
        lo, hi = suite_interval(rates, tasks * k)
        covered += lo <= 0.5 <= hi  # the mean difficulty of a uniform draw
    assert 0.92 <= covered / runs <= 0.98


def row(task, success, trial=0, latency=0.01, path_ok=None, stop="end_turn"):
    return EvalRow(task, success, path_ok, [], 2, 100, 10, 0.01, latency, stop, trial=trial)


def test_the_summary_of_repeated_trials_gives_pass_at_k_and_pass_hat_k_per_task_and_mean():
    rows = [row("a", ok, t) for t, ok in enumerate([True, True, False, True])]
    rows += [row("b", ok, t) for t, ok in enumerate([False, False, False, True])]
    s = EvalSummary.of(rows)
    assert (s.tasks, s.trials, s.repeats) == (2, 8, 4)
    assert s.success_rate == pytest.approx((0.75 + 0.25) / 2)
    assert s.pass_at_k == pytest.approx((pass_at_k(4, 3, 4) + pass_at_k(4, 1, 4)) / 2)
    assert s.pass_hat_k == pytest.approx((pass_hat_k(4, 3, 4) + pass_hat_k(4, 1, 4)) / 2)
    assert s.ci_low < s.success_rate < s.ci_high
    assert "pass@4: 100%  pass^4: 0%" in s.text()
    assert [d["pass rate"] for d in s.task_rows()] == ["75%", "25%"]


def test_the_summary_counts_rows_that_raised_or_timed_out_and_says_so():
    s = EvalSummary.of([row("a", False, stop="error"), row("b", False, stop="timeout"),
                        row("c", True)])
    assert s.failed_to_run == 2
    assert "trials that raised or timed out: 2 of 3" in s.text()


def test_a_row_survives_the_round_trip_through_its_dict():
    r = EvalRow("a", True, True, ["x"], 1, 5, 6, 0.5, 0.1, "end_turn", None, "t.jsonl", 3,
                {"answer_contains": True}, {"cost_under": "cost 0.5 USD"})
    assert EvalRow.from_dict(r.to_dict()) == r
