"""Lesson 07's worked sums, recomputed: each hand formula its cells print equals the library's
figure (the figures themselves are pinned in test_cost.py)."""

from __future__ import annotations

import pytest

from primer.course.estimates import end_to_end_success, multi_agent_cost_usd, staged_success
from primer.loop.cost import cumulative_input_tokens, run_cost_usd, run_usages
from primer.loop.model import Prices, Usage, cost_usd
from primer.scenarios import burner


@pytest.mark.parametrize(("n", "base", "t", "own_step", "expected"), [
    (10, 0, 500, True, 27_500), (20, 0, 500, True, 105_000),
    (10, 1_600, 750, False, 49_750), (20, 1_600, 750, False, 174_500),
    (10, 1_600, 350, False, 31_750),
    (10, 2_000, 800, True, 64_000), (10, 2_000, 800, False, 56_000)])
def test_the_closed_form_printed_in_the_lesson_is_the_librarys_total(n, base, t, own_step,
                                                                      expected):
    by_hand = n * base + t * n * (n + 1 if own_step else n - 1) // 2
    assert by_hand == expected
    assert cumulative_input_tokens(n, base, t, history_on_first_call=own_step) == expected


def test_the_support_runs_dollars_are_tokens_times_price_per_million():
    sonnet = Prices(3.0, 15.0)
    by_hand = (49_750 * 3 + 1_500 * 15) / 1e6
    assert round(by_hand, 4) == 0.1718
    assert run_cost_usd(run_usages(10, 1_600, 750, 150), sonnet) == pytest.approx(by_hand)


def test_the_multi_agent_task_at_one_price_each_reference_or_sonnet():
    turn = Usage(5_000, 1_000)
    reference, sonnet = cost_usd(turn, Prices(5.0, 25.0)), cost_usd(turn, Prices(3.0, 15.0))
    assert (round(reference, 3), round(sonnet, 3)) == (0.05, 0.03)
    assert [round(multi_agent_cost_usd(sonnet, x), 2) for x in (14, 16)] == [0.42, 0.48]


def test_the_chains_comparison_from_one_function():
    assert round(staged_success(0.85, 10), 3) == round(end_to_end_success(0.85, 10), 3) == 0.197
    one, checked = staged_success(0.85, 15), staged_success(0.85, 15, 3)
    rerun, staged = staged_success(0.85, 15, 1, 1), staged_success(0.85, 15, 3, 1)
    assert (round(one, 3), round(checked, 3)) == (0.087, 0.087)  # a check alone changes nothing
    assert (round(rerun, 3), round(staged, 3)) == (0.167, 0.329)
    assert round(staged, 2) == 0.33  # the quiz's "about 0.33"


def test_staged_success_refuses_stages_that_do_not_divide_the_steps():
    for bad in ({"steps": 10, "stages": 3}, {"steps": 0, "stages": 1},
                {"steps": 6, "stages": 3, "retries": -1}):
        with pytest.raises(ValueError):
            staged_success(0.9, **bad)
    with pytest.raises(ValueError, match="probability"):
        staged_success(85, 15)


def test_the_budget_checked_before_and_after_on_the_burner():
    after = burner.SCENARIO.run()
    before = burner.SCENARIO.run(budget_check="before")
    assert (after.usage.total_tokens, before.usage.total_tokens) == (12_987, 10_892)
    assert (len(after.steps), len(before.steps)) == (11, 10)
    assert "could take the run to 13,974 tokens (prompt about 2,058 + up to 1,024" in before.summary
    assert 10_892 + 2_058 + 1_024 == 13_974


def test_the_quizs_numbers():
    assert cumulative_input_tokens(10, 0, 500, history_on_first_call=True) == 27_500
    assert cumulative_input_tokens(10, 0, 500, history_on_first_call=False) == 22_500
    assert 10_500 + 1_800 + 400 > 12_000 > 10_500


def test_the_burner_with_a_wrap_up_answers_within_its_budget():
    wrapped = burner.SCENARIO.run(budget_check="before", wrap_up=True)
    wrap = wrapped.steps[-1]
    assert wrapped.stop_cause.value == "token_budget" and wrapped.wrapped_up
    assert wrapped.final_text.startswith("Partial answer: the notes I searched cover")
    assert (len(wrapped.steps) - 1, wrap.usage.total_tokens) == (8, 1_657)
    assert wrapped.usage.total_tokens == 8_907 <= burner.TOKEN_BUDGET
    assert round(wrapped.cost_usd, 4) == 0.0517
