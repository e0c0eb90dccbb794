"""Lesson 11's plan-executor check: the reference passes, each realistic mistake fails the
right case with a message that says what to fix, and junk never breaks the check."""

from __future__ import annotations

import pytest
from notebook_cells import solution

from primer.course.practice.plans import check_execute_plan


def judge(fn):
    return check_execute_plan(fn, show=False)


def test_the_notebooks_reference_solution_scores_full_marks():
    report = judge(solution("11", "execute_plan"))
    assert report.ok, str(report)
    assert report.total == 7


def make(*, stop=True, catch=True, lookup=True, check="use", start=1, keep_failed=False,
         vague=False):
    """An executor with one deliberate mistake (the defaults make it right)."""

    def execute_plan(plan, tools):
        results, failure = [], None
        for k, step in enumerate(plan, start=start):
            name = step["tool"]
            if lookup and name not in tools:
                return results, (k, f"no tool {name}")
            try:
                result = tools[name](**step["input"])
            except Exception as e:
                if not catch:
                    raise
                failure = failure or (k, "failed" if vague else str(e))
                if stop:
                    return results, failure
                continue
            if keep_failed:
                results.append(result)
            verdict = step["check"](result) if "check" in step and check != "ignore" else True
            if check == "inverted" and "check" in step:
                verdict = not verdict
            if not verdict:
                return results, (k, "failed" if vague else "check failed")
            if not keep_failed:
                results.append(result)
        return results, failure

    return execute_plan


def test_the_gallery_helper_without_a_mistake_passes():
    assert judge(make()).ok


@pytest.mark.parametrize("mistake, case, words", [
    (dict(stop=False), "a later step raises", "ship (step 3) ran after step 2 had failed"),
    (dict(stop=False), "a step raises", "stop at the first failure"),
    (dict(catch=False), "a step raises", "raised RuntimeError: KB-1 is out of stock at north"),
    (dict(lookup=False, catch=False), "unknown tool", "raised KeyError: 'issue_refund'"),
    (dict(check="ignore"), "a check fails", "call step['check'](result)"),
    (dict(start=0), "a step raises", "count steps from 1"),
    (dict(keep_failed=True), "a check fails", "step 1 failed its check"),
    (dict(vague=True), "a step raises", "does not say 'out of stock at north'"),
    (dict(vague=True), "a check fails", "does not say 'check'"),
    (dict(check="inverted"), "a check passes",
     "a step fails only when its check returns something false"),
])
def test_each_mistake_fails_the_right_case_with_a_message_that_says_what_to_fix(
        mistake, case, words):
    report = judge(make(**mistake))
    assert case in report.failed, str(report)
    assert words in report.detail(case), report.detail(case)


def test_a_starter_that_returns_nothing_fails_every_case_but_the_check_never_raises():
    report = judge(lambda plan, tools: None)
    assert report.score == 0
    assert "return a pair (results, failure)" in report.detail("in order")


@pytest.mark.parametrize("junk", [
    lambda plan, tools: 1 / 0,
    lambda plan, tools: "done",
    lambda plan, tools: ("results", None),
    lambda plan, tools: ([], "failed"),
    lambda: None,
])
def test_junk_is_judged_not_raised(junk):
    report = judge(junk)
    assert not report.ok


def test_a_non_callable_is_a_type_error_naming_the_function():
    with pytest.raises(TypeError, match="execute_plan"):
        check_execute_plan("execute_plan")
