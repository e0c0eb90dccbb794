"""Every cost figure of the syllabus, computed by primer.loop.cost and pinned here.

Each expected value is derived in the test from the closed form or the arithmetic the
syllabus states, not copied from an output.
"""

from __future__ import annotations

import pytest

from primer.course.estimates import (
    MULTI_AGENT_TOKEN_MULTIPLIER,
    Savings,
    context_budget,
    daily_cost_usd,
    end_to_end_success,
    multi_agent_cost_usd,
    per_step_success_needed,
    steps_to_fill,
    trim_savings,
)
from primer.loop.cost import (
    cached_history_usages,
    call_input_tokens,
    cumulative_input_tokens,
    per_call_input_tokens,
    run_cost_usd,
    run_usages,
)
from primer.loop.model import Prices, Usage, cost_usd

SONNET = Prices(3.0, 15.0)


def test_the_default_prices_are_the_production_lessons_5_and_25_usd_per_million():
    assert Prices() == Prices(5.0, 25.0, 1.25, 0.1)
    assert cost_usd(Usage(1_000_000, 1_000_000)) == pytest.approx(30.0)


def test_call_n_sends_the_base_plus_one_step_of_history_per_earlier_call():
    assert call_input_tokens(1, 1_600, 750) == 1_600
    assert call_input_tokens(3, 1_600, 750) == 1_600 + 2 * 750
    assert call_input_tokens(3, 1_600, 750, history_on_first_call=True) == 1_600 + 3 * 750


def test_the_closed_form_matches_the_sum_of_the_calls_under_both_conventions():
    for first in (False, True):
        for calls in range(0, 25):
            assert cumulative_input_tokens(calls, 2_000, 800, history_on_first_call=first) == \
                sum(per_call_input_tokens(calls, 2_000, 800, history_on_first_call=first))


def test_ten_steps_of_500_tokens_send_27500_not_the_flat_5000():
    assert cumulative_input_tokens(10, 0, 500, history_on_first_call=True) == 500 * 10 * 11 // 2
    assert cumulative_input_tokens(10, 0, 500, history_on_first_call=True) == 27_500
    assert 10 * 500 == 5_000


def test_twenty_steps_send_105000_about_3_8_times_ten_steps():
    twenty = cumulative_input_tokens(20, 0, 500, history_on_first_call=True)
    assert twenty == 500 * 20 * 21 // 2 == 105_000
    assert round(twenty / 27_500, 1) == 3.8


def test_the_support_run_sends_49750_input_tokens_and_costs_about_17_cents():
    usages = run_usages(10, 1_500 + 100, 150 + 600, 150)
    total = sum(usages, Usage())
    assert total.input_tokens == 10 * 1_600 + 750 * 10 * 9 // 2 == 49_750
    assert total.output_tokens == 1_500
    assert cost_usd(Usage(49_750, 0), SONNET) == pytest.approx(0.14925)
    assert cost_usd(Usage(0, 1_500), SONNET) == pytest.approx(0.0225)
    assert round(run_cost_usd(usages, SONNET), 2) == 0.17


def test_twenty_support_calls_send_174500_three_and_a_half_times_ten():
    twenty = cumulative_input_tokens(20, 1_600, 750)
    assert twenty == 20 * 1_600 + 750 * 20 * 19 // 2 == 174_500
    assert round(twenty / 49_750, 1) == 3.5


def test_trimming_tool_results_to_200_tokens_sends_31750_36_percent_fewer():
    s = trim_savings(10, 1_600, 150, 600, 200)
    assert s == Savings(49_750, 10 * 1_600 + 350 * 45)
    assert s.after == 31_750
    assert round(s.saved, 2) == 0.36


def test_trimming_that_would_grow_a_result_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="must not exceed"):
        trim_savings(10, 1_600, 150, 200, 600)


def test_the_known_inconsistency_is_two_conventions_of_one_series():
    with_history = cumulative_input_tokens(10, 2_000, 800, history_on_first_call=True)
    without = cumulative_input_tokens(10, 2_000, 800)
    assert with_history == sum(2_000 + 800 * k for k in range(1, 11)) == 64_000
    assert without == sum(2_000 + 800 * k for k in range(0, 10)) == 56_000


def test_the_uncached_run_of_2000_plus_800_a_step_costs_about_19_cents():
    cost = run_cost_usd(run_usages(10, 2_000, 800, 150), SONNET)
    assert cost == pytest.approx((56_000 * 3 + 1_500 * 15) / 1e6)
    assert round(cost, 2) == 0.19


def test_caching_the_history_brings_the_run_to_between_6_and_7_cents():
    usages = run_usages(10, 2_000, 800, 150, cache="history")
    total = sum(usages, Usage())
    reads = sum(2_000 + 800 * k for k in range(0, 9))   # call n reads call n-1's prompt
    writes = 2_000 + 9 * 800                              # each token is written once
    assert (total.cache_read_input_tokens, total.cache_creation_input_tokens) == (reads, writes)
    assert total.input_tokens == 0 and total.prompt_tokens == 56_000
    premium = run_cost_usd(usages, SONNET)
    plain_writes = run_cost_usd(usages, Prices(3.0, 15.0, cache_write_multiplier=1.0))
    assert premium == pytest.approx((reads * 0.3 + writes * 3.75 + 1_500 * 15) / 1e6)
    assert round(plain_writes, 3) == 0.064 and round(premium, 3) == 0.071
    assert 0.06 <= plain_writes < premium < 0.075


def test_caching_only_the_static_prefix_saves_far_less_than_caching_the_history():
    usages = run_usages(10, 2_000, 800, 150, cache="prefix")
    assert usages[0] == Usage(0, 150, 2_000, 0)
    assert usages[1] == Usage(800, 150, 0, 2_000)
    assert round(run_cost_usd(usages, SONNET), 3) == 0.143


def test_an_unknown_cache_mode_is_named_in_the_error():
    with pytest.raises(ValueError, match="'none', 'prefix' or 'history'"):
        run_usages(3, 100, 10, cache="everything")  # type: ignore[arg-type]


def test_a_multi_agent_task_costs_15_times_a_chat_turn_70_to_80_cents():
    chat_turn = cost_usd(Usage(5_000, 1_000))   # 5,000 in + 1,000 out at 5 / 25 USD
    assert chat_turn == pytest.approx(0.05)
    assert MULTI_AGENT_TOKEN_MULTIPLIER == 15
    low, high = multi_agent_cost_usd(chat_turn, 14), multi_agent_cost_usd(chat_turn, 16)
    assert (round(low, 2), round(high, 2)) == (0.70, 0.80)
    assert round(multi_agent_cost_usd(chat_turn), 2) == 0.75
    assert round(daily_cost_usd(low, 100_000)) == 70_000
    assert round(daily_cost_usd(high, 100_000)) == 80_000


@pytest.mark.parametrize(("p", "steps", "expected"),
                         [(0.95, 10, 0.60), (0.95, 20, 0.36), (0.99, 10, 0.90)])
def test_end_to_end_success_is_the_per_step_success_to_the_power_of_the_steps(p, steps,
                                                                             expected):
    assert round(end_to_end_success(p, steps), 2) == expected


def test_85_percent_steps_over_ten_steps_succeed_about_one_run_in_five():
    assert round(end_to_end_success(0.85, 10), 3) == 0.197


def test_ninety_percent_over_ten_steps_needs_about_99_percent_a_step():
    needed = per_step_success_needed(0.9, 10)
    assert end_to_end_success(needed, 10) == pytest.approx(0.9)
    assert round(needed, 2) == 0.99


def test_a_percentage_written_as_95_is_refused_with_a_hint():
    with pytest.raises(ValueError, match="write 95% as 0.95"):
        end_to_end_success(95, 10)


def test_after_ten_steps_a_run_holds_about_11000_tokens_of_a_128k_window():
    b = context_budget(10)
    assert b.used == 2_000 + 800 + 800 * 10 == 10_800
    assert round(b.used, -3) == 11_000
    assert b.fits and b.share < 0.1


def test_a_32k_window_with_verbose_results_fills_in_under_20_steps():
    k = steps_to_fill(32_000, per_step=1_500)
    assert k == 19
    assert not context_budget(k, per_step=1_500, window=32_000).fits
    assert context_budget(k - 1, per_step=1_500, window=32_000).fits
    assert steps_to_fill(128_000) > 100


def test_a_step_that_adds_nothing_never_fills_the_window_and_says_so():
    with pytest.raises(ValueError, match="never fill|for the window to fill"):
        steps_to_fill(32_000, per_step=0)


def test_negative_sizes_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="per_step must be >= 0"):
        cumulative_input_tokens(10, 0, -5)
    with pytest.raises(ValueError, match="window must be >= 1"):
        context_budget(3, window=0)


def test_with_the_output_reserve_ten_steps_fill_about_9_percent_of_128k():
    b = context_budget(10)
    assert b.needed == 10_800 + 1_000
    assert round(b.share, 2) == 0.09


def test_past_60_percent_of_a_32k_window_comes_at_step_11_with_verbose_results():
    k = steps_to_fill(32_000, per_step=1_500, share=0.6)
    assert 3_800 + 1_500 * (k - 1) <= 0.6 * 32_000 < 3_800 + 1_500 * k
    assert k == 11


def test_the_budget_burner_costs_its_reported_usage_at_the_production_prices():
    from primer.scenarios import burner

    result = burner.SCENARIO.run()
    rows = burner.per_call_tokens(result)
    expected = (sum(r.sent for r in rows) * 5 + sum(r.output for r in rows) * 25) / 1e6
    assert result.cost_usd == pytest.approx(expected)
    assert burner.stop_call(rows) == len(rows) == 11
    assert round(result.cost_usd, 4) == round(expected, 4) == 0.0733


def test_cached_history_reads_each_previous_prompt_and_writes_only_the_new_tail():
    calls = [Usage(1000, 50), Usage(1400, 60), Usage(2000, 70)]
    assert cached_history_usages(calls) == [
        Usage(0, 50, 1000, 0), Usage(0, 60, 400, 1000), Usage(0, 70, 600, 1400)]


def test_a_cold_call_finds_the_cache_expired_and_writes_its_whole_prompt():
    calls = [Usage(1000, 50), Usage(1400, 60), Usage(2000, 70)]
    assert cached_history_usages(calls, cold={2})[2] == Usage(0, 70, 2000, 0)


def test_cached_history_is_the_same_model_as_run_usages_history_mode():
    plain = run_usages(10, 2_000, 800, 150)
    assert cached_history_usages(plain) == run_usages(10, 2_000, 800, 150, cache="history")


def test_a_prompt_that_does_not_extend_the_one_before_is_refused():
    with pytest.raises(ValueError, match="shorter than the one before"):
        cached_history_usages([Usage(1000, 1), Usage(900, 1)])


def test_a_prompt_under_the_minimum_is_not_cached_so_the_next_call_reads_nothing():
    calls = [Usage(1000, 50), Usage(2100, 60), Usage(2600, 70)]
    assert cached_history_usages(calls, min_cacheable=2048) == [
        Usage(1000, 50), Usage(0, 60, 2100, 0), Usage(0, 70, 500, 2100)]


def test_a_static_prefix_under_the_minimum_is_billed_as_plain_input():
    assert run_usages(3, 2_000, 800, 150, cache="prefix", min_cacheable=2_048) == \
        run_usages(3, 2_000, 800, 150)
    assert run_usages(3, 2_000, 800, 150, cache="prefix", min_cacheable=1_024)[1] == \
        Usage(800, 150, 0, 2_000)
    with pytest.raises(ValueError, match="min_cacheable must be >= 0"):
        run_usages(3, 2_000, 800, cache="prefix", min_cacheable=-1)
