"""The flaky inventory: the 429 story under each guard, its unguarded price, the refund desk."""

from __future__ import annotations

import json

import pytest

from primer.harness.production import run_production
from primer.loop.config import RetryPolicy
from primer.loop.model import cost_usd
from primer.loop.state import StopCause
from primer.scenarios import get_demo
from primer.scenarios import inventory as inv
from primer.scenarios.refunds import RefundLedger


@pytest.fixture(scope="module")
def runs():
    return {g: inv.run_guarded(g) for g in inv.GUARDS}


def test_each_guard_alone_stops_the_endless_retries_with_its_own_cause(runs):
    causes = {g: r.result.stop_cause for g, r in runs.items()}
    assert causes == {
        "step cap (10 calls)": StopCause.MAX_STEPS,
        "token budget (50,000)": StopCause.TOKEN_BUDGET,
        "dollar budget (task value)": StopCause.COST_BUDGET,
        "backoff, give up after 3 retries": StopCause.END_TURN,
        "no-progress window (3 errors)": StopCause.NO_PROGRESS,
        "loop detection (3 repeats)": StopCause.LOOP_DETECTED,
    }


def test_the_step_cap_allows_ten_model_calls_and_runs_no_tool_on_the_last(runs):
    r = runs["step cap (10 calls)"]
    assert len(r.result.steps) == 10 and r.api_calls == 9
    assert r.result.steps[-1].executions[0].error_kind == "not_run"


def test_the_budgets_stop_at_the_first_call_that_crosses_them(runs):
    tokens = runs["token budget (50,000)"].result
    assert tokens.steps[-1].total_usage.total_tokens > 50_000
    assert tokens.steps[-2].total_usage.total_tokens <= 50_000
    dollars = runs["dollar budget (task value)"].result
    assert dollars.steps[-1].cost_usd > inv.TASK_VALUE_USD >= dollars.steps[-2].cost_usd


def test_backoff_retries_the_lookup_inside_one_call_then_the_model_reads_the_give_up(runs):
    r = runs["backoff, give up after 3 retries"]
    (execution,) = r.result.executions
    assert len(r.result.steps) == 2 and r.api_calls == 4 and execution.attempts == 4
    assert execution.error_kind == "gave_up"
    waits = RetryPolicy().delays(3, key=execution.tool_use_id)
    assert r.simulated_s == pytest.approx(2 * inv.SECONDS_PER_CALL + sum(waits))
    assert "not answering" in r.result.final_text


def test_the_no_progress_window_stops_after_three_errors_in_a_row(runs):
    r = runs["no-progress window (3 errors)"]
    assert len(r.result.steps) == 3 and r.api_calls == 3


def test_the_guard_table_has_one_row_per_guard_with_its_figures(runs):
    rows = inv.guard_table()
    assert [row["guard"] for row in rows] == list(inv.GUARDS)
    step_cap = rows[0]
    result = runs["step cap (10 calls)"].result
    assert step_cap["model calls"] == 10 and step_cap["tokens"] == result.usage.total_tokens
    assert step_cap["USD"] == round(result.cost_usd, 4)


def test_three_unguarded_days_cost_about_the_4200_usd_of_the_story():
    p = inv.unguarded_projection()
    assert p.calls == 3 * 86_400
    assert p.usd == pytest.approx(p.calls * cost_usd(p.per_call))
    assert p.tokens == p.calls * p.per_call.total_tokens
    assert 3_800 < p.usd < 4_600
    assert p.times_task_value == pytest.approx(p.usd / 0.20)


def test_an_unknown_guard_names_the_known_ones():
    with pytest.raises(KeyError, match="known guards: step cap"):
        inv.run_guarded("prayer")


def test_the_registered_demos_stop_on_the_step_cap_and_on_the_give_up():
    assert get_demo("inventory-429").run().stop_cause is StopCause.MAX_STEPS
    backoff = get_demo("inventory-backoff").run()
    assert backoff.stop_cause is StopCause.END_TURN and backoff.executions[0].attempts == 4


@pytest.mark.parametrize("check_first, refunds", [(True, 1), (False, 2)])
def test_after_a_refund_times_out_checking_state_pays_once_and_asking_again_pays_twice(
        tmp_path, check_first, refunds):
    ledger = RefundLedger(tmp_path / "ledger.sqlite")
    desk = inv.RefundDesk(ledger, confirm_delay_s=1.0, timeout_s=0.2)
    result = run_production(inv.refund_llm(check_first=check_first), inv.REFUND_TASK, desk.tools(),
                            config=inv.story_config(inv.ManualClock(), max_steps=4))
    assert result.executions[0].error_kind == "timeout"
    assert len(ledger.refunds("R-1001")) == refunds
    if check_first:
        assert [e.name for e in result.executions] == ["issue_refund", "get_refunds"]
        assert json.loads(result.executions[1].content)[0]["amount_usd"] == 40.0


@pytest.fixture(scope="module")
def stubborn():
    return inv.stubborn_table()


def test_a_model_that_ignores_the_give_up_is_stopped_only_by_the_context_window(stubborn):
    alone = stubborn[0]
    assert (alone["guard"], alone["stop cause"]) == ("backoff alone", "context_window")
    # every lookup is four requests: the first try and three retries
    assert alone["API requests"] == 4 * alone["tool calls"]
    assert alone["model calls"] == 1265 and alone["USD"] == pytest.approx(514.9295)
    assert (alone["API requests"], round(alone["simulated s"] / 3600, 1)) == (5060, 2.9)
    assert alone["USD"] > 10_000 * inv.run_guarded(inv.BACKOFF).row()["USD"]


def test_with_a_stubborn_model_the_detectors_stop_first_and_the_step_cap_later(stubborn):
    rows = {r["guard"].removeprefix("backoff + "): r for r in stubborn[1:]}
    fewest = min(r["model calls"] for r in rows.values())
    assert {g for g, r in rows.items() if r["model calls"] == fewest} == {
        "no-progress window (3 errors)", "loop detection (3 repeats)"}
    assert fewest == 3 and rows["no-progress window (3 errors)"]["stop cause"] == "no_progress"
    assert rows["loop detection (3 repeats)"]["stop cause"] == "loop_detected"
    assert (rows["step cap (10 calls)"]["model calls"],
            rows["step cap (10 calls)"]["stop cause"]) == (10, "max_steps")
    assert (rows["step cap (10 calls)"]["USD"], rows["loop detection (3 repeats)"]["USD"]) == \
        (0.1832, 0.0485)
    assert all(r["stop cause"] != "end_turn" for r in rows.values())  # nobody tells the customer


def test_the_obedient_model_ends_on_the_give_up_with_backoff_alone():
    assert inv.run_guarded(inv.BACKOFF).row()["stop cause"] == "end_turn"
