"""The PTO world: search_kb, get_pto_balance and the parallel happy path."""

from __future__ import annotations

import json

import pytest

from primer.harness.production import run_production
from primer.loop.state import StopCause
from primer.loop.tools import ToolError
from primer.scenarios import get_demo, hr


def test_searching_for_pto_rollover_finds_hr_001_first():
    hits = hr.search_kb(query="PTO rollover")
    assert hits[0]["id"] == "hr-001" and "5 days rolls over" in hits[0]["text"]


def test_a_search_with_no_match_says_so_and_suggests_keywords():
    assert "No documents match" in hr.search_kb(query="xyzzy")


def test_alice_has_12_pto_days_left_as_of_2026_09_25():
    balance = hr.get_pto_balance(employee="alice", as_of="2026-09-25")
    taken = sum(d for start, d in hr.LEAVE["alice"] if start <= "2026-09-25")
    assert balance["days_left"] == hr.PTO_DAYS_PER_YEAR - taken == 12


@pytest.mark.parametrize("as_of", ["25/09/2026", "2026-9-25", "2026-02-30", "tomorrow"])
def test_a_date_not_in_yyyy_mm_dd_form_is_a_tool_error_saying_so(as_of):
    with pytest.raises(ToolError, match="as_of must be YYYY-MM-DD"):
        hr.get_pto_balance(employee="alice", as_of=as_of)


def test_an_unknown_employee_is_a_tool_error_with_an_example_name():
    with pytest.raises(ToolError, match="alice"):
        hr.get_pto_balance(employee="mallory", as_of="2026-09-25")


def test_the_pto_demo_asks_for_both_tools_in_one_reply_and_answers_in_two_calls():
    result = get_demo("pto").run()
    assert result.stop_cause is StopCause.END_TURN
    assert len(result.steps) == 2
    first = result.steps[0]
    assert [e.name for e in first.executions] == ["search_kb", "get_pto_balance"]
    assert len(result.executions) == 2 and not any(e.is_error for e in result.executions)


def test_both_results_come_back_in_one_user_message_in_request_order():
    result = get_demo("pto").run()
    calls = [b["id"] for b in result.messages[1]["content"] if b["type"] == "tool_use"]
    results = result.messages[2]
    assert results["role"] == "user"
    assert [b["tool_use_id"] for b in results["content"]] == calls


def test_the_answer_states_12_days_and_cites_hr_001():
    result = get_demo("pto").run()
    assert "12 PTO days" in result.final_text and "[hr-001]" in result.final_text


@pytest.mark.parametrize("mistake, error_kind", [("unknown_tool", "unknown_tool"),
                                                 ("bad_args", "invalid_input"),
                                                 ("bad_date", "tool_error")])
def test_a_broken_balance_call_comes_back_as_an_error_and_is_fixed_next_step(mistake,
                                                                          error_kind):
    result = run_production(hr.make_llm(mistake), hr.TASK, hr.make_tools(), system=hr.SYSTEM)
    failed = result.steps[0].executions[1]
    assert failed.is_error and failed.error_kind == error_kind
    fixed = result.steps[1].executions[0]
    assert (fixed.name, fixed.is_error) == ("get_pto_balance", False)
    assert json.loads(fixed.content)["days_left"] == 12
    assert result.stop_cause is StopCause.END_TURN and "[hr-001]" in result.final_text


def test_an_unknown_mistake_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown_tool, bad_args, bad_date"):
        hr.make_llm("typo")
