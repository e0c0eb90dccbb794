"""Lesson 05's figures, recomputed with the library: the numbers its prose cells display."""

from __future__ import annotations

import json

from notebook_cells import run_cell, solution

from primer.course.exercises import check_loop
from primer.course.practice.exits import check_exits
from primer.course.quiz import load_quiz
from primer.loop.checks import AFTER_REPLY, check_stop_reason
from primer.loop.config import AgentConfig
from primer.loop.loop import run_agent
from primer.loop.mini import run_mini
from primer.loop.model import Prices, ScriptedLLM, cost_usd, estimate_tokens, text_reply, tool_reply
from primer.loop.state import HANDOFF_TOOL_DEF, StopCause
from primer.loop.tools import ToolRegistry
from primer.scenarios import get_demo, orders
from primer.views.widgets import EXIT_RECIPES, ExitExplorer, recipe_table


def test_the_order_run_answers_in_4_calls_and_2408_tokens_at_0_0149_usd_or_0_0089_at_list():
    run = get_demo("orders").run()
    assert (run.stop_cause, len(run.steps), run.usage.total_tokens) == (StopCause.END_TURN, 4,
                                                                        2408)
    assert round(run.cost_usd, 4) == 0.0149
    assert round(cost_usd(run.usage, Prices(3, 15)), 4) == 0.0089
    assert (AgentConfig().prices.input_per_mtok, AgentConfig().prices.output_per_mtok) == (5, 25)


SEVEN = ["end_turn", "max_tokens", "refusal", "token_budget", "handoff", "loop_detected",
         "max_steps"]


def test_each_of_the_seven_exits_fires_its_own_cause_and_only_end_turn_answers():
    runs = {c: ExitExplorer(**EXIT_RECIPES[c]).run() for c in SEVEN}
    assert [r.stop_cause.value for r in runs.values()] == SEVEN
    assert [(len(r.steps), r.usage.total_tokens) for r in runs.values()] == [
        (4, 2408), (2, 910), (1, 385), (5, 3161), (2, 907), (3, 1719), (4, 2218)]
    assert {r.final_text for r in list(runs.values())[1:]} == {None}
    assert "3 times (threshold 3)" in runs["loop_detected"].stop_detail


def test_the_seven_exits_are_the_after_reply_checks_in_the_printed_order():
    assert [c.__name__ for c in AFTER_REPLY] == [
        "check_stop_reason", "check_budgets", "check_handoff", "check_repeats",
        "check_step_limit", "check_approval"]
    assert {c.value for c in check_stop_reason.causes} >= {"end_turn", "max_tokens", "refusal"}


def test_every_recipe_still_fires_its_own_cause():
    rows = recipe_table()
    assert [r["stop cause"] for r in rows] == list(EXIT_RECIPES)
    assert {c.value for c in StopCause} - {r["stop cause"] for r in rows} == {"awaiting_approval"}


def test_lesson_05_costs_1066_tokens_more_than_lesson_03_and_the_definitions_explain_804():
    mini = run_mini(orders.mini_model("recover"), orders.TASK, orders.mini_tools(), max_steps=6,
                    token_budget=3000)
    run = get_demo("orders").run()
    definitions = estimate_tokens([*ToolRegistry(orders.make_tools()).definitions(),
                                   HANDOFF_TOOL_DEF])
    per_call = definitions + estimate_tokens(orders.SYSTEM) - estimate_tokens(mini.system)
    assert (len(mini.rows), mini.total_tokens, run.usage.total_tokens) == (4, 1342, 2408)
    assert (definitions, estimate_tokens(mini.system), estimate_tokens(orders.SYSTEM)) == (
        313, 148, 36)
    assert (per_call, 4 * per_call, 2408 - 1342 - 4 * per_call) == (201, 804, 262)
    # the first call's input is exactly system + definitions + the task
    assert run.steps[0].reply.usage.input_tokens == 36 + 313 + estimate_tokens(
        {"role": "user", "content": orders.TASK})


def test_a_confident_wrong_end_turn_and_a_stop_sequence_both_end_with_end_turn():
    guess = run_agent(ScriptedLLM([text_reply("About 6000 rupees, I think.")]), orders.TASK,
                      orders.make_tools(), system=orders.SYSTEM)
    assert guess.stop_cause is StopCause.END_TURN and "5900" not in guess.final_text
    ended = run_agent(ScriptedLLM([text_reply("Total: 5900.0 rupees",
                                              stop_reason="stop_sequence")]),
                      orders.TASK, orders.make_tools(), system=orders.SYSTEM)
    assert (ended.stop_cause, ended.final_text) == (StopCause.END_TURN, "Total: 5900.0 rupees")


def test_quiz_4_loop_detection_fires_on_call_4():
    replies = [tool_reply(("get_order", {"order_id": "A123"})),
               tool_reply(("get_order", {"order_id": "A124"})),
               tool_reply(("get_order", {"order_id": "A123"}),
                          ("calculator", {"expression": "2 * 2"})),
               tool_reply(("get_order", {"order_id": "A123"})),
               text_reply("done")]
    run = run_agent(ScriptedLLM(replies), orders.TASK, orders.make_tools(),
                    config=AgentConfig(repeat_threshold=3))
    assert (run.stop_cause, len(run.steps)) == (StopCause.LOOP_DETECTED, 4)
    quiz = load_quiz("05")
    assert quiz.answer(4, 4).right and not quiz.answer(4, 3).right
    assert quiz.answer(1, "b").right and quiz.answer(2, "b").right and quiz.answer(3, "c").right


def test_the_starter_loop_scores_5_of_11_and_the_reference_11():
    starter, _ = run_cell("05", "exercise-starter", 1)
    starter["json"] = json  # the lesson's import cell provides it
    assert check_loop(starter["my_loop"], show=False).score == 5
    report = check_loop(solution("05", "my_loop", 1), show=False)
    assert report.score == report.total == 11
    first, _ = run_cell("05", "exercise-starter", 0)
    assert check_exits(first["stop_cause_after"], show=False).score == 6


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
