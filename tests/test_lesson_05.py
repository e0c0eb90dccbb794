"""Lesson 05's figures, recomputed with the library: the numbers its prose cells display."""

from __future__ import annotations

from primer.loop.config import AgentConfig
from primer.loop.model import Prices, cost_usd
from primer.loop.state import StopCause
from primer.scenarios import get_demo
from primer.views.widgets import EXIT_RECIPES, ExitExplorer, recipe_table


def test_the_order_run_answers_in_4_calls_and_2408_tokens_at_0_0149_usd_or_0_0089_at_list():
    run = get_demo("orders").run()
    assert (run.stop_cause, len(run.steps), run.usage.total_tokens) == (StopCause.END_TURN, 4,
                                                                        2408)
    assert round(run.cost_usd, 4) == 0.0149
    assert round(cost_usd(run.usage, Prices(3, 15)), 4) == 0.0089
    assert (AgentConfig().prices.input_per_mtok, AgentConfig().prices.output_per_mtok) == (5, 25)


def test_every_recipe_fires_its_own_cause_14_of_the_15():
    rows = recipe_table()
    assert [r["stop cause"] for r in rows] == list(EXIT_RECIPES)
    assert (len(rows), len(StopCause)) == (14, 15)
    assert {c.value for c in StopCause} - {r["stop cause"] for r in rows} == {"awaiting_approval"}
    assert [(r["calls"], r["tokens"]) for r in rows] == [
        (4, 2408), (2, 910), (1, 385), (5, 3161), (6, 4341), (2, 907), (3, 1719), (4, 2218),
        (3, 1668), (2, 949), (4, 2163), (0, 0), (4, 2408), (2, 985)]


def test_the_right_answer_in_prose_fails_the_shape_and_one_corrective_turn_fixes_it():
    strict = ExitExplorer(**EXIT_RECIPES["invalid_output"]).run()
    assert strict.stop_cause is StopCause.INVALID_OUTPUT and strict.final_text is None
    assert "5900.0" in strict.steps[-1].reply.text and "Invalid JSON" in strict.stop_detail
    fixed = ExitExplorer(behaviour="recovers", check_answer=True).run()
    assert (fixed.stop_cause, len(fixed.steps), fixed.output.total_inr) == (StopCause.END_TURN, 5,
                                                                           5900.0)


def test_after_overspends_the_400_budget_by_6_and_before_stops_a_2408_run_at_3000():
    got = {(b, m): (r.stop_cause.value, len(r.steps), r.usage.total_tokens)
           for b in (400, 3000, 5000) for m in ("after", "before")
           for r in [get_demo("orders").run(token_budget=b, budget_check=m)]}
    assert got == {(400, "after"): ("token_budget", 1, 406),
                   (400, "before"): ("token_budget", 0, 0),
                   (3000, "after"): ("end_turn", 4, 2408),
                   (3000, "before"): ("token_budget", 3, 1668),
                   (5000, "after"): ("end_turn", 4, 2408), (5000, "before"): ("end_turn", 4, 2408)}
    assert AgentConfig().max_tokens == 1024  # reserved for every call in "before" mode
    assert 2 * get_demo("orders").run().usage.total_tokens == 4816  # the suggested budget


def test_the_step_caps_and_the_defaults_the_lesson_states():
    good = [len(get_demo(n).run().steps) for n in ("orders", "pto")]
    assert good == [4, 2] and 2 * max(good) == 8
    c = AgentConfig()
    assert (c.max_steps, c.token_budget, c.repeat_threshold, c.context_stop_share) == (10, 50_000,
                                                                                      3, 0.8)


def test_the_panel_moves_fire_these_exits_in_turn():
    e = ExitExplorer()
    seen = []
    for change in (dict(behaviour="wanders"), dict(max_steps=3), dict(behaviour="repeats itself")):
        for k, v in change.items():
            setattr(e, k, v)
        r = e.run()
        seen.append((r.stop_cause.value, len(r.steps), r.usage.total_tokens))
    assert seen == [("token_budget", 5, 3026), ("max_steps", 3, 1512), ("loop_detected", 3, 1719)]
