"""Lesson 09's checks: backoff_delays and call_once, judged on a gallery of broken solutions."""

from __future__ import annotations

import random

import pytest
from notebook_cells import solution

from primer.course.practice.retries import check_backoff, check_call_once


def ok_backoff(retries, *, base_s=1.0, cap_s=60.0, seed=0):
    rng = random.Random(seed)
    return [rng.uniform(0, min(cap_s, base_s * 2 ** (k - 1))) for k in range(1, retries + 1)]


def no_jitter(retries, *, base_s=1.0, cap_s=60.0, seed=0):
    return [min(cap_s, base_s * 2 ** (k - 1)) for k in range(1, retries + 1)]


def proportional_jitter(retries, *, base_s=1.0, cap_s=60.0, seed=0):
    rng = random.Random(seed)  # "up to 10% longer": a small jitter, not full jitter
    return [min(cap_s, base_s * 2 ** (k - 1) * (1 + 0.1 * rng.random()))
            for k in range(1, retries + 1)]


def off_by_one(retries, *, base_s=1.0, cap_s=60.0, seed=0):
    rng = random.Random(seed)
    return [rng.uniform(0, min(cap_s, base_s * 2 ** k)) for k in range(1, retries + 1)]


def no_cap(retries, *, base_s=1.0, cap_s=60.0, seed=0):
    rng = random.Random(seed)
    return [rng.uniform(0, base_s * 2 ** (k - 1)) for k in range(1, retries + 1)]


def shared_generator(retries, *, base_s=1.0, cap_s=60.0, seed=0):
    return [random.uniform(0, min(cap_s, base_s * 2 ** (k - 1))) for k in range(1, retries + 1)]


def ignores_seed(retries, *, base_s=1.0, cap_s=60.0, seed=0):
    rng = random.Random(0)
    return [rng.uniform(0, min(cap_s, base_s * 2 ** (k - 1))) for k in range(1, retries + 1)]


def one_too_many(retries, *, base_s=1.0, cap_s=60.0, seed=0):
    rng = random.Random(seed)
    return [rng.uniform(0, min(cap_s, base_s * 2 ** (k - 1))) for k in range(retries + 1)]


def test_the_notebooks_reference_solutions_pass():
    assert check_backoff(solution("09", "backoff_delays"), show=False).ok
    assert check_call_once(solution("09", "call_once"), show=False).ok
    assert check_backoff(ok_backoff, show=False).ok


@pytest.mark.parametrize("fn, case, words", [
    (no_jitter, "full jitter", "not spread over"),
    (proportional_jitter, "full jitter", "uniformly between 0 and the ceiling"),
    (proportional_jitter, "within the ceiling", "outside [0"),
    (off_by_one, "within the ceiling", "k starting at 1"),
    (no_cap, "grows, then capped", "cap the ceiling"),
    (no_cap, "within the ceiling", "outside [0, 4]"),
    (shared_generator, "seeded", "random.Random(seed)"),
    (ignores_seed, "seeded", "seeds 7 and 8 give the same waits"),
    (one_too_many, "one wait per retry", "returned 1 waits, expected 0"),
])
def test_a_broken_backoff_fails_the_right_case(fn, case, words):
    report = check_backoff(fn, show=False)
    assert case in report.failed, report
    assert words in report.detail(case)


def forgets(finished, key, side_effect):
    return side_effect()


def truthy_test(finished, key, side_effect):
    if finished.get(key):
        return finished[key]
    finished[key] = result = side_effect()
    return result


def marks_before_running(finished, key, side_effect):
    if key in finished:
        return finished[key]
    finished[key] = None  # claims the key before the side effect has returned
    finished[key] = result = side_effect()
    return result


def answers_none_on_repeat(finished, key, side_effect):
    if key in finished:
        return None
    finished[key] = result = side_effect()
    return result


def one_flag_for_all_keys(finished, key, side_effect):
    if finished:
        return next(iter(finished.values()))
    finished[key] = result = side_effect()
    return result


def swallows_errors(finished, key, side_effect):
    if key in finished:
        return finished[key]
    try:
        result = side_effect()
    except Exception:  # noqa: BLE001 - the mistake this gallery entry makes
        return None
    finished[key] = result
    return result


@pytest.mark.parametrize("fn, case, words", [
    (forgets, "same key again", "paid 2 refunds"),
    (forgets, "first call", "store the result under its key"),
    (truthy_test, "a result of None", "key in finished"),
    (marks_before_running, "an attempt that raised", "store the key only once"),
    (answers_none_on_repeat, "same key again", "return the first call's result"),
    (one_flag_for_all_keys, "another key", "a different key is a different call"),
    (swallows_errors, "an attempt that raised", "swallowed it"),
])
def test_a_broken_call_once_fails_the_right_case(fn, case, words):
    report = check_call_once(fn, show=False)
    assert case in report.failed, report
    assert words in report.detail(case)


def raises(*args, **kwargs):
    raise RuntimeError("boom")


def returns_none(*args, **kwargs):
    return None


def returns_text(*args, **kwargs):
    return "soon"


@pytest.mark.parametrize("junk", [raises, returns_none, returns_text, lambda: 1])
def test_the_checks_never_raise_on_junk(junk):
    for check in (check_backoff, check_call_once):
        report = check(junk, show=False)
        assert not report.ok and report.total == 5


def test_a_value_that_is_not_a_function_is_refused():
    with pytest.raises(TypeError):
        check_backoff(3)


def test_the_check_leaves_the_learners_random_module_as_it_found_it():
    random.seed(2024)
    check_backoff(ok_backoff, show=False)
    after = random.random()
    random.seed(2024)
    assert after == random.random()


class _YesStr(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


def test_a_str_that_equals_everything_is_not_the_side_effects_result():
    def liar(finished, key, side_effect):
        finished[key] = side_effect()
        return _YesStr("anything")

    report = check_call_once(liar, show=False)
    assert {"first call", "another key"} <= set(report.failed), report
