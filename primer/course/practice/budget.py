"""Lesson 07's exercise: check the token budget BEFORE a model call, not after it.

The learner writes ``budget_stop(used, next_input, max_output, budget)``, all in tokens:
``used`` is what the run has spent so far (input + output of every call), ``next_input`` an
estimate of what the next call sends (the whole history, re-sent), ``max_output`` the most
the call may write (its ``max_tokens``), ``budget`` the run's token budget. It returns the
stop cause ``"token_budget"`` when the call could take the run past the budget
(``used + next_input + max_output > budget``) and ``None`` when the call may go ahead. A
budget checked this way is never overspent; the same rule is the library's
:func:`~primer.loop.checks.check_budgets_before_call` (``AgentConfig(budget_check="before")``).

:func:`check_budget_stop` judges it on cases the learner did not write: well within, the
exact boundary, one token over, an estimate that crosses while the spend is still under,
the output counted, a run already over its budget.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

from primer.course.checking import Case, ExerciseReport, Problem, run_cases

#: The stop cause ``budget_stop`` returns to stop before the call.
_STOP = "token_budget"


def _expect(used: int, next_input: int, max_output: int, budget: int, stop: bool,
            why: str) -> Callable[[Callable[..., Any]], Problem]:
    """A probe: call ``fn`` with these numbers; the verdict must be ``stop``; ``why`` says
    how to fix a wrong one."""
    def probe(fn: Callable[..., Any]) -> Problem:
        got = fn(used, next_input, max_output, budget)
        if isinstance(got, Enum):  # StopCause.TOKEN_BUDGET counts as its value
            got = got.value
        worst = used + next_input + max_output
        plain = got is None or type(got) in (str, bool, int, float)
        call = (f"budget_stop({used:,}, {next_input:,}, {max_output:,}, {budget:,}) "
                f"returned {repr(got) if plain else 'a ' + type(got).__name__}")
        if isinstance(got, bool):
            return (f"{call}; return the stop cause {_STOP!r} to stop and None to make "
                    f"the call, not a bool")
        if got is not None and type(got) is not str:  # its == could say anything
            return (f"{call}; return the stop cause {_STOP!r} as a plain str, or None to "
                    f"make the call")
        if got is not None and got != _STOP:
            return f"{call}; the only stop cause it returns is {_STOP!r} (else None)"
        if (got == _STOP) == stop:
            return None
        verdict = f"{_STOP!r}" if stop else "None"
        return (f"{call}, expected {verdict}: {used:,} + {next_input:,} + {max_output:,} = "
                f"{worst:,} against a budget of {budget:,}; {why}")
    return probe


CASES = (
    Case("well within", _expect(1_000, 2_000, 500, 12_000, False,
                                "stop only when the call could pass the budget"),
         "3,500 of 12,000 at most: the call goes ahead"),
    Case("exact boundary", _expect(9_000, 2_500, 500, 12_000, False,
                                   "a call that can reach the budget exactly cannot pass it, "
                                   "so make it: stop when the total is > budget, not >="),
         "at most exactly 12,000 of 12,000: the call goes ahead"),
    Case("one token over", _expect(9_001, 2_500, 500, 12_000, True,
                                   "one token past the budget is past it"),
         "at most 12,001 of 12,000: stopped before the call"),
    Case("estimate crosses", _expect(10_500, 1_800, 0, 12_000, True,
                                     "the spend so far is under the budget, but the next call "
                                     "re-sends the history; add next_input before comparing "
                                     "(checking only `used` is the after-the-call check)"),
         "10,500 spent is under 12,000, but the re-sent history would cross it: stopped"),
    Case("output counted", _expect(10_000, 1_800, 400, 12_000, True,
                                   "the reply may be up to max_output tokens long; count it "
                                   "too, or the call can overspend by its reply"),
         "prompt fits, prompt plus the longest reply does not: stopped"),
    Case("already over", _expect(12_500, 300, 100, 12_000, True,
                                 "the run is already past its budget; compare the running "
                                 "total plus the next call, not the next call alone"),
         "12,500 already spent of 12,000: stopped"),
)


def check_budget_stop(fn: Callable[..., Any], *, show: bool = True) -> ExerciseReport:
    """Judge lesson 07's ``budget_stop(used, next_input, max_output, budget)`` (tokens).

    ``fn`` must return ``"token_budget"`` when ``used + next_input + max_output > budget``
    and ``None`` otherwise. Six cases: well within, exact boundary (equal is allowed), one
    token over, estimate crosses, output counted, already over. Prints (when ``show``) and
    returns the :class:`ExerciseReport`; raises ``TypeError`` only when ``fn`` is not
    callable.
    """
    return run_cases(fn, CASES, what="budget_stop", show=show)
