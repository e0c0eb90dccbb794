"""The explorers: every exit fires from the exit explorer's controls; the other explorers follow
their formulas; the widgets only wire controls to the plain objects."""

import re
import subprocess
import sys

import ipywidgets
import pytest

from primer.loop.state import StopCause
from primer.scenarios.parallel import seeded_latencies
from primer.views.widgets import (
    BEHAVIOURS,
    EXIT_RECIPES,
    SLOW_TOOL_S,
    CompoundingExplorer,
    CostExplorer,
    ExitExplorer,
    LatencyExplorer,
    Panel,
    compounding_explorer,
    cost_explorer,
    exit_explorer,
    latency_explorer,
    recipe_table,
    render_compounding,
)

# Control settings, written out here independently of EXIT_RECIPES, for every stop cause the
# explorer can reach (all but the approval pause, which needs a person, not a control).
FIRES = {
    StopCause.END_TURN: dict(behaviour="recovers"),
    StopCause.MAX_TOKENS: dict(behaviour="cut-off reply"),
    StopCause.REFUSAL: dict(behaviour="refusal"),
    StopCause.TOKEN_BUDGET: dict(behaviour="budget burner", token_budget=2_000),
    StopCause.COST_BUDGET: dict(behaviour="budget burner", token_budget=None,
                                cost_budget_usd=0.01),
    StopCause.HANDOFF: dict(behaviour="asks for a hand-off"),
    StopCause.LOOP_DETECTED: dict(behaviour="repeats itself", repeat_threshold=2),
    StopCause.MAX_STEPS: dict(behaviour="wanders", max_steps=3),
    StopCause.WALL_CLOCK: dict(behaviour="slow tool", wall_clock_s=30),
    StopCause.NO_PROGRESS: dict(behaviour="tool always fails", no_progress_window=1),
    StopCause.CONTEXT_WINDOW: dict(behaviour="budget burner", token_budget=None,
                                   max_steps=20, context_window=2_000),
    StopCause.MODEL_ERROR: dict(behaviour="model service down"),
    StopCause.INVALID_OUTPUT: dict(behaviour="recovers", check_answer=True,
                                   corrective_turns=0),
    StopCause.CANCELLED: dict(behaviour="stopped by a person"),
}


def test_every_stop_cause_but_the_approval_pause_has_settings_that_fire_it():
    assert set(FIRES) == set(StopCause) - {StopCause.AWAITING_APPROVAL}
    assert set(EXIT_RECIPES) == {c.value for c in FIRES}


@pytest.mark.parametrize("cause", list(FIRES), ids=lambda c: c.value)
def test_the_exit_explorer_fires_each_stop_cause_from_its_controls(cause):
    explorer = ExitExplorer(**FIRES[cause])
    result = explorer.run()
    assert result.stop_cause is cause
    assert explorer.result is result and result.summary and result.stop_detail
    assert (result.final_text is not None) == (cause is StopCause.END_TURN)


@pytest.mark.parametrize("cause", list(EXIT_RECIPES))
def test_each_recipe_of_the_lesson_table_fires_the_cause_it_is_listed_under(cause):
    assert ExitExplorer(**EXIT_RECIPES[cause]).run().stop_cause.value == cause


def test_the_recipe_table_reports_the_cause_that_fired_with_the_settings_used():
    rows = recipe_table()
    assert [r["stop cause"] for r in rows] == list(EXIT_RECIPES)
    assert all("behaviour=" in r["settings"] for r in rows)


def test_the_same_controls_give_the_same_run_every_time():
    a, b = ExitExplorer(behaviour="wanders").run(), ExitExplorer(behaviour="wanders").run()
    assert (a.stop_cause, a.usage, a.rows()) == (b.stop_cause, b.usage, b.rows())


def test_raising_a_limit_lets_the_next_exit_fire_instead():
    # the wanderer stops at 3 steps; with more steps its token use crosses the budget first
    assert ExitExplorer(behaviour="wanders", max_steps=3).run().stop_cause is StopCause.MAX_STEPS
    longer = ExitExplorer(behaviour="wanders", max_steps=20).run()
    assert longer.stop_cause is StopCause.TOKEN_BUDGET and len(longer.steps) > 3


def test_a_corrective_turn_lets_the_recovering_model_fix_its_answer():
    result = ExitExplorer(behaviour="recovers", check_answer=True, corrective_turns=1).run()
    assert result.stop_cause is StopCause.END_TURN
    assert result.output.total_inr == pytest.approx(2500 * 2 * 1.18)


def test_the_before_check_never_overspends_the_token_budget_and_after_can():
    after = ExitExplorer(behaviour="budget burner", token_budget=2_000).run()
    before = ExitExplorer(behaviour="budget burner", token_budget=2_000,
                          budget_check="before").run()
    assert after.usage.total_tokens > 2_000 >= before.usage.total_tokens
    assert before.stop_cause is after.stop_cause is StopCause.TOKEN_BUDGET


def test_the_slow_tool_spends_simulated_time_not_real_time():
    explorer = ExitExplorer(behaviour="slow tool")
    result = explorer.run()
    tool_calls = sum(1 for e in result.executions if not e.is_error)
    assert result.stop_cause is StopCause.END_TURN
    assert explorer.elapsed_s >= tool_calls * SLOW_TOOL_S


def test_the_running_totals_are_the_runs_token_use_after_each_call():
    explorer = ExitExplorer(behaviour="budget burner")
    result = explorer.run()
    totals = explorer.running_totals()
    assert len(totals) == len(result.steps) and totals[-1] == result.usage.total_tokens
    assert totals == sorted(totals)


def test_an_unknown_behaviour_is_refused_with_the_known_ones_listed():
    with pytest.raises(ValueError, match="recovers"):
        ExitExplorer(behaviour="sulks").run()


def test_a_limit_that_cannot_work_is_refused_by_name():
    with pytest.raises(ValueError, match="max_steps"):
        ExitExplorer(max_steps=0).run()


# ---------------------------------------------------------------- the widgets only wire

def _shown_cause(panel: Panel) -> str:
    return re.search(r'data-stop-cause=.(\w+)', panel.output.value).group(1)


def test_moving_the_widget_controls_reruns_the_explorer_and_shows_the_new_stop_cause():
    panel = exit_explorer()
    assert isinstance(panel.widget, ipywidgets.VBox)
    assert _shown_cause(panel) == "end_turn"
    panel.controls["behaviour"].value = "wanders"
    panel.controls["max_steps"].value = 3
    assert panel.explorer.max_steps == 3
    assert _shown_cause(panel) == "max_steps" == panel.explorer.stop_cause.value
    assert panel.explorer.result.summary.split(".")[0] in panel.output.value


def test_every_behaviour_is_offered_in_the_dropdown():
    assert list(exit_explorer().controls["behaviour"].options) == list(BEHAVIOURS)


def test_zero_on_a_budget_slider_turns_that_budget_off():
    panel = exit_explorer()
    panel.set(behaviour="budget burner", token_budget=0, max_steps=8)
    assert panel.explorer.token_budget is None
    assert _shown_cause(panel) == "max_steps"
    panel.set(cost_budget_usd=0.01)
    assert _shown_cause(panel) == "cost_budget"


def test_set_names_an_unknown_control():
    with pytest.raises(KeyError, match="behaviour"):
        exit_explorer().set(speed=3)


def test_a_setting_the_explorer_refuses_shows_a_message_not_a_traceback():
    panel = Panel(CompoundingExplorer(), {"per_step": ipywidgets.FloatText(value=1.5)},
                  render_compounding)
    assert "Cannot run with these settings" in panel.output.value
    assert "probability" in panel.output.value


def test_importing_the_agent_library_does_not_import_ipywidgets():
    code = "import sys, primer, primer.loop.loop; print('ipywidgets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


# ---------------------------------------------------------------- the other explorers

def test_the_latency_model_is_the_sum_sequentially_and_the_slowest_concurrently():
    for n in (1, 3, 8):
        lat = seeded_latencies(n)
        e = LatencyExplorer(n_tools=n)
        assert e.model_s("sequential") == pytest.approx(sum(lat))
        assert e.model_s("concurrent") == pytest.approx(max(lat))


def test_more_tools_add_to_the_sequential_time_but_never_past_the_slowest_concurrently():
    seq = [LatencyExplorer(n_tools=n, mode="sequential").model_s() for n in range(1, 9)]
    conc = [LatencyExplorer(n_tools=n).model_s() for n in range(1, 9)]
    assert all(b > a for a, b in zip(seq, seq[1:], strict=False))
    assert conc == [max(seeded_latencies(8)[:n]) for n in range(1, 9)]


def test_the_latency_panel_measures_real_waits_at_the_chosen_scale():
    panel = latency_explorer(LatencyExplorer(n_tools=3, time_scale=0.02))
    run = panel.explorer.result
    scale = panel.explorer.time_scale
    assert run.sequential_s >= sum(seeded_latencies(3)) * scale
    assert run.concurrent_s >= max(seeded_latencies(3)) * scale
    panel.set(mode="sequential")
    assert "<b>sequential</b>" in panel.output.value


def test_the_cost_explorer_sends_n_base_plus_the_triangular_history():
    e = CostExplorer(base=1_000, model_per_step=100, tool_per_step=400, steps=8,
                     output_per_call=50, input_price=2.0, output_price=10.0)
    n, t = 8, 500
    prompt = n * 1_000 + t * n * (n - 1) // 2
    assert e.prompt_tokens == prompt
    assert e.cost_usd == pytest.approx((prompt * 2.0 + n * 50 * 10.0) / 1e6)


def test_trimming_tool_results_shrinks_each_step_and_caching_cuts_the_bill():
    plain = CostExplorer()
    trimmed = CostExplorer(trim_results=True, trim_to=200)
    assert plain.per_step - trimmed.per_step == plain.tool_per_step - 200
    assert trimmed.prompt_tokens < plain.prompt_tokens
    assert CostExplorer(cache="history").cost_usd < plain.cost_usd


def test_the_cost_panel_follows_its_controls():
    panel = cost_explorer()
    before = panel.explorer.cost_usd
    panel.set(steps=20)
    assert panel.explorer.cost_usd > 2 * before  # twice the steps, more than twice the cost
    assert f"{panel.explorer.prompt_tokens:,}" in panel.output.value


def test_compounding_is_the_per_step_success_to_the_power_of_the_steps():
    panel = compounding_explorer()
    panel.set(per_step=0.9, steps=7)
    assert panel.explorer.run() == pytest.approx(0.9 ** 7)
    assert panel.explorer.curve() == pytest.approx([0.9 ** k for k in range(1, 8)])
    assert f"{0.9 ** 7:.1%}" in panel.output.value


def test_reset_puts_every_control_back_and_reruns():
    panel = exit_explorer()
    panel.set(behaviour="refusal", max_steps=2, token_budget=0)
    assert _shown_cause(panel) == "refusal"
    panel.reset()
    assert (panel.explorer.behaviour, panel.explorer.max_steps, panel.explorer.token_budget) == (
        "recovers", 6, 3_000)
    assert _shown_cause(panel) == "end_turn"


def test_a_limit_switched_off_shows_off_in_its_dropdown_and_is_none_on_the_explorer():
    panel = exit_explorer()
    assert panel.controls["wall_clock_s"].label == "off"
    assert panel.explorer.wall_clock_s is None
    panel.set(repeat_threshold=0, behaviour="repeats itself", max_steps=4)
    assert panel.controls["repeat_threshold"].label == "off"
    assert panel.explorer.repeat_threshold is None and _shown_cause(panel) == "max_steps"
