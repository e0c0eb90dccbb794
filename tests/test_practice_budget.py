"""Lesson 07's check (budget_stop) fails each realistic mistake on the right case with the
right words, agrees with the library's before-the-call check, passes the notebook's folded
solution, and never raises on junk."""

from __future__ import annotations

import pytest
from notebook_cells import solution

from primer.course.practice.budget import CASES, check_budget_stop
from primer.loop.config import AgentConfig
from primer.scenarios import burner


def reference(used, next_input, max_output, budget):
    return "token_budget" if used + next_input + max_output > budget else None


def at_or_over(used, next_input, max_output, budget):
    return "token_budget" if used + next_input + max_output >= budget else None


def after_the_call(used, next_input, max_output, budget):
    return "token_budget" if used > budget else None


def forgets_the_reply(used, next_input, max_output, budget):
    return "token_budget" if used + next_input > budget else None


def per_call_only(used, next_input, max_output, budget):
    return "token_budget" if next_input + max_output > budget else None


def returns_a_bool(used, next_input, max_output, budget):
    return used + next_input + max_output <= budget


def wrong_cause(used, next_input, max_output, budget):
    return "max_tokens" if used + next_input + max_output > budget else None


@pytest.mark.parametrize(("broken", "case", "words"), [
    (at_or_over, "exact boundary", "not >="),
    (after_the_call, "estimate crosses", "add next_input before comparing"),
    (after_the_call, "one token over", "expected 'token_budget'"),
    (forgets_the_reply, "output counted", "count it too"),
    (per_call_only, "already over", "not the next call alone"),
    (returns_a_bool, "well within", "not a bool"),
    (wrong_cause, "one token over", "the only stop cause it returns is 'token_budget'"),
])
def test_each_mistake_fails_the_case_that_names_it(broken, case, words):
    report = check_budget_stop(broken, show=False)
    assert case in report.failed, report
    assert words in report.detail(case)


def test_the_reference_here_and_the_notebooks_folded_solution_score_full_marks():
    assert check_budget_stop(reference, show=False).ok
    assert check_budget_stop(solution("07", "budget_stop"), show=False).ok


def test_the_rule_is_the_librarys_before_the_call_check_on_the_burner():
    run = burner.SCENARIO.run(budget_check="before")
    spent = run.usage.total_tokens
    # the library stopped before call 11, whose prompt plus max_tokens would pass the budget
    assert run.stop_cause == "token_budget" and len(run.steps) == 10
    assert "prompt about 2,058" in run.summary
    assert reference(spent, 2_058, AgentConfig().max_tokens, burner.TOKEN_BUDGET) == "token_budget"


@pytest.mark.parametrize("junk", [
    lambda used, next_input, max_output, budget: 1 / 0,
    lambda used, next_input, max_output, budget: "stop",
    lambda used, next_input, max_output, budget: [None],
    lambda used: None,
])
def test_the_check_never_raises_on_junk(junk):
    report = check_budget_stop(junk, show=False)
    assert report.total == len(CASES) and not report.ok


class _AlwaysEqual:
    """== answers with an object that is truthy: equal to anything, as far as `if` sees."""

    def __eq__(self, other):
        return _AlwaysEqual()

    def __ne__(self, other):
        return False

    def __bool__(self):
        return True


class _YesStr(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


@pytest.mark.parametrize("liar", [_AlwaysEqual, lambda: _YesStr("token_budget")])
def test_a_value_that_lies_about_equality_scores_nothing(liar):
    report = check_budget_stop(lambda *a: liar(), show=False)
    assert report.score == 0, report
    assert "as a plain str, or None" in report.detail("well within")


def test_a_stop_cause_enum_counts_as_its_value():
    from primer.loop.state import StopCause

    def as_enum(*args):
        cause = reference(*args)
        return None if cause is None else StopCause(cause)

    assert check_budget_stop(as_enum, show=False).ok
