"""Lesson 10's figures, recomputed with the library: the numbers its prose cells display."""

from __future__ import annotations

import json

import pytest

from primer.harness.evals.run import run_evals
from primer.harness.evals.scorers import ModelGraded
from primer.harness.tracing.otel import otlp_json
from primer.scenarios import get_demo
from primer.scenarios.relay import SkilledModel, make_tools, relay_task
from primer.scenarios.suite import builtin_suite, scripted_judge, suite_llm, suite_tools


def test_the_builtin_suite_with_8_relay_tasks_measures_62_percent_of_a_mix_of_models():
    report = run_evals(builtin_suite(relay_tasks=8), suite_llm, suite_tools, progress=False)
    s = report.summary
    assert (s.tasks, round(s.success_rate, 2), round(s.path_accuracy, 2)) == (13, 0.62, 0.77)
    assert (round(s.ci_low, 2), round(s.ci_high, 2)) == (0.36, 0.82)
    failed_demos = [r.task for r in report.rows if not r.task.startswith("relay-")
                    and not r.success]
    assert failed_demos == ["orders-repeat", "orders-wander", "orders-budget"]


@pytest.fixture(scope="module")
def twenty_tasks():
    tasks = [relay_task(seed, 1 + seed % 8) for seed in range(20)]
    once = run_evals(tasks, SkilledModel(0.9), make_tools, progress=False).summary
    ten = run_evals(tasks, SkilledModel(0.9), make_tools, repeats=10, progress=False).summary
    truth = sum(0.9 ** t.meta["hops"] for t in tasks) / len(tasks)
    return once, ten, truth


def test_measured_once_the_twenty_tasks_give_75_percent_with_a_36_point_interval(twenty_tasks):
    once, _, truth = twenty_tasks
    assert (once.trials, round(once.success_rate, 2)) == (20, 0.75)
    assert (round(once.ci_low, 2), round(once.ci_high, 2)) == (0.53, 0.89)
    assert once.ci_low <= truth <= once.ci_high and round(truth, 2) == 0.67


def test_measured_ten_times_they_give_66_percent_with_a_17_point_interval(twenty_tasks):
    once, ten, truth = twenty_tasks
    assert (ten.trials, round(ten.success_rate, 2)) == (200, 0.66)
    assert (round(ten.ci_low, 2), round(ten.ci_high, 2)) == (0.57, 0.74)
    assert ten.ci_low <= truth <= ten.ci_high
    narrower = (once.ci_high - once.ci_low) / (ten.ci_high - ten.ci_low)
    assert round(narrower, 1) == 2.1


def test_over_three_tries_pass_at_3_is_94_and_pass_hat_3_is_32_percent(twenty_tasks):
    _, ten, _ = twenty_tasks
    at3 = sum(t.pass_at(3) for t in ten.per_task) / ten.tasks
    all3 = sum(t.pass_hat(3) for t in ten.per_task) / ten.tasks
    assert (round(at3, 2), round(all3, 2)) == (0.94, 0.32)
    assert (round(ten.pass_at_k, 2), round(ten.pass_hat_k, 2)) == (1.0, 0.05)
    assert [(t.passed, t.trials) for t in ten.per_task[:8]] == [
        (7, 10), (8, 10), (7, 10), (4, 10), (8, 10), (4, 10), (6, 10), (2, 10)]


def test_the_scripted_judge_passes_the_pto_answer_and_fails_a_wrong_balance():
    result = get_demo("pto").run()
    judge = scripted_judge()
    assert ModelGraded(judge, "Gives alice's balance of 12 days and cites [hr-001].")(result)
    verdict = ModelGraded(judge, "Says alice has 15 days left.")(result)
    assert not verdict and verdict.reason == "The answer does not state 15"


def test_the_orders_trace_becomes_eight_spans_with_the_first_tool_call_an_error(tmp_path):
    path = tmp_path / "orders.jsonl"
    get_demo("orders").run(trace=path)
    spans = json.loads(otlp_json([path]))["resourceSpans"][0]["scopeSpans"][0]["spans"]
    ordered = sorted(spans, key=lambda s: ("parentSpanId" in s, int(s["startTimeUnixNano"])))
    assert [s["name"] for s in ordered] == [
        "invoke_agent agent", "chat scripted", "execute_tool get_order", "chat scripted",
        "execute_tool get_order", "chat scripted", "execute_tool calculator", "chat scripted"]
    errors = [s["name"] for s in ordered if s.get("status", {}).get("code") == 2]
    assert errors == ["execute_tool get_order"]


def test_the_gallery_diagnosis_the_lesson_shows_names_each_mode_and_what_stops_no_progress():
    from primer.harness.tracing.diagnosis import diagnose
    from primer.scenarios.gallery import GALLERY, gallery_path

    modes = {n: [m.value for m in diagnose(gallery_path(n)).modes] for n in GALLERY}
    assert modes["healthy-orders"] == modes["healthy-pto"] == []
    assert modes["no-progress"] == ["no_progress"] and modes["repeats"] == ["repeats"]
    assert modes["unanswered-tool-use-conversation"] == ["unanswered_tool_use"]
    e = diagnose(gallery_path("no-progress")).findings[0].effect
    assert (e.setting, e.stops_at, e.calls_saved) == ("no_progress_window=3", 3, 5)
    assert (e.input_tokens_saved, e.input_tokens_total) == (4_342, 5_737)


def test_the_quiz_pass_hat_3_of_5_in_10_is_one_twelfth_and_the_naive_figure_is_wrong():
    from primer.course.quiz import load_quiz
    from primer.harness.evals.results import pass_at_k, pass_hat_k

    quiz = load_quiz("10")
    assert round(pass_hat_k(10, 5, 3), 4) == 0.0833 and quiz.answer(1, 0.0833).right
    assert (5 / 10) ** 3 == 0.125 and not quiz.answer(1, 0.125).right
    assert round(pass_at_k(10, 5, 3), 4) == 0.9167 and not quiz.answer(1, 0.9167).right
    assert quiz.answer(2, "c").right and quiz.answer(3, "b").right and quiz.answer(4, "b").right
