"""The design worksheet: numbers follow from the learner's choices; the review and checklist
say what an interviewer would question."""

from __future__ import annotations

from dataclasses import replace

import pytest

from primer.agents.cost import Prices
from primer.support_design import QUESTIONS, SupportDesign, ToolPlan, checklist

SAFE_TOOLS = (ToolPlan("get_order", "look up an order"),
              ToolPlan("issue_refund", "refund", side_effecting=True, needs_approval=True),
              ToolPlan("handoff_to_human", "hand over"))
REASONS = {"max_steps": "twice a good run", "token_budget": "a good run plus headroom"}


def design(**changes) -> SupportDesign:
    base = SupportDesign(tools=SAFE_TOOLS, good_run_steps=6, max_steps=12,
                         token_budget=60_000, per_step_success=0.99, static_tokens=2_000,
                         tool_definition_tokens=800, tokens_per_step=800,
                         output_tokens_per_call=150, prices=Prices(3.0, 15.0),
                         context_window=128_000, tasks_per_day=10_000, reasons=REASONS)
    return replace(base, **changes)


def test_a_good_runs_tokens_and_dollars_follow_the_re_sent_history():
    n = design().numbers()
    calls, base, step, out = 6, 2_000 + 800, 800, 150
    input_tokens = sum(base + step * (k - 1) for k in range(1, calls + 1))
    assert n.tokens_per_task == input_tokens + calls * out
    assert n.cost_per_task_usd == pytest.approx(
        (input_tokens * 3.0 + calls * out * 15.0) / 1_000_000)
    assert n.daily_cost_usd == pytest.approx(10_000 * n.cost_per_task_usd)


def test_a_run_at_the_cap_costs_more_than_twice_a_good_run_for_twice_the_steps():
    n = design().numbers()
    assert n.input_tokens_at_cap == sum(2_800 + 800 * (k - 1) for k in range(1, 13))
    assert n.tokens_at_cap == n.input_tokens_at_cap + 12 * 150
    assert n.cost_at_cap_usd > 2 * n.cost_per_task_usd


def test_the_expected_daily_cost_prices_each_failed_run_at_the_step_cap():
    n = design(per_step_success=0.97).numbers()
    failed = 1 - 0.97 ** 6
    assert n.expected_cost_per_task_usd == pytest.approx(
        (1 - failed) * n.cost_per_task_usd + failed * n.cost_at_cap_usd)
    assert n.expected_daily_cost_usd == pytest.approx(10_000 * n.expected_cost_per_task_usd)
    assert n.expected_daily_cost_usd > n.daily_cost_usd


def test_a_design_that_never_fails_expects_only_good_runs():
    n = design(per_step_success=1.0).numbers()
    assert n.expected_daily_cost_usd == pytest.approx(n.daily_cost_usd)


def test_the_worksheet_prints_its_prices_and_both_daily_costs():
    sheet = design(prices=Prices(5.0, 25.0)).worksheet()
    assert "prices: 5 USD in / 25 USD out per million tokens" in sheet
    assert "good runs" in sheet and "(a lower bound)" in sheet
    assert "each failed run at the cap" in sheet


def test_success_compounds_over_the_good_runs_steps():
    n = design(per_step_success=0.95).numbers()
    assert n.end_to_end_success == pytest.approx(0.95 ** 6)
    assert n.per_step_needed ** 6 == pytest.approx(0.9)


def test_the_context_share_is_the_last_capped_calls_prompt_plus_its_output():
    n = design().numbers()
    assert n.context_share_at_cap == pytest.approx((2_800 + 800 * 11 + 150) / 128_000)


def test_a_careful_design_has_nothing_to_question():
    assert design().review() == []
    assert design().worksheet().endswith("REVIEW\n  nothing to question")


@pytest.mark.parametrize("changes, phrase", [
    ({"tools": (ToolPlan("issue_refund", "refund", side_effecting=True),
                *SAFE_TOOLS[2:])}, "issue_refund changes the world and runs without approval"),
    ({"tools": (ToolPlan("get_order", "read", needs_approval=True), *SAFE_TOOLS[1:])},
     "get_order only reads, yet needs approval"),
    ({"tools": SAFE_TOOLS[:2]}, "No handoff_to_human tool"),
    ({"max_steps": 4}, "max_steps 4 is below the 6 steps a good run needs"),
    ({"max_steps": 19}, "max_steps 19 is more than three times a good run"),
    ({"token_budget": 1_000}, "token_budget 1,000 is below a good run's"),
    ({"token_budget": 10_000_000}, "is above the"),
    ({"per_step_success": 0.95}, "Only 74% of tasks succeed end to end"),
    ({"reasons": {"max_steps": "why not"}}, "Give a reason for token_budget"),
    ({"context_window": 16_000, "token_budget": 90_000}, "plan to compress older turns"),
    ({"context_window": 12_000, "token_budget": 90_000}, "would stop on the context"),
])
def test_the_review_flags_each_questionable_choice(changes, phrase):
    notes = design(**changes).review()
    assert any(phrase in note for note in notes), notes


@pytest.mark.parametrize("changes, message", [
    ({"max_steps": 0}, "max_steps must be >= 1"),
    ({"tokens_per_step": -5}, "tokens_per_step must be >= 0"),
    ({"per_step_success": 97}, "write 97% as 0.97"),
    ({"tools": (ToolPlan("a", "x"), ToolPlan("a", "y"))}, "tool names must be unique"),
])
def test_impossible_choices_are_refused_with_what_to_fix(changes, message):
    with pytest.raises(ValueError, match=message):
        design(**changes)


def test_a_blank_checklist_shows_what_each_strong_answer_mentions():
    lines = checklist().splitlines()
    assert len(lines) == len(QUESTIONS)
    assert all(line.startswith("[ ]") and "a strong answer mentions" in line for line in lines)


def test_a_partial_answer_names_the_terms_it_misses():
    line = checklist({1: "It sends tool_use blocks with an ID."}).splitlines()[0]
    assert line.startswith("[~] 1.") and line.endswith("(not yet mentioned: input, stop_reason)")


def test_a_complete_answer_is_ticked_keyed_by_number_or_text():
    answer = "tool_use blocks, each with an id and input; stop_reason is tool_use"
    assert checklist({"1": answer}).splitlines()[0] == f"[x] 1. {QUESTIONS[0].text}"
    assert checklist({QUESTIONS[0].text: answer}) == checklist({1: answer})


def test_terms_match_only_at_the_start_of_a_word():
    line = checklist({1: "provide tool_use input stop_reason"}).splitlines()[0]
    assert "not yet mentioned: id" in line


def test_an_answer_to_no_question_is_refused():
    with pytest.raises(KeyError, match="no interview question 9"):
        checklist({9: "?"})
