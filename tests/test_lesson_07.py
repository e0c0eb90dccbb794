"""Lesson 07's worked sums, recomputed: each hand formula its cells print equals the library's
figure (the figures themselves are pinned in test_cost.py)."""

from __future__ import annotations

import pytest

from primer.course.estimates import multi_agent_cost_usd
from primer.loop.cost import cumulative_input_tokens, run_cost_usd, run_usages
from primer.loop.model import Prices, Usage, cost_usd


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
