"""The figures lesson 14 states, computed again: the starter's score, the reference
solution's, the design's cost with and without caching, where its failed run stops, its day
(at least, expected, at most), its window, its operations, what the review cannot judge, the
checklist, and the quiz's number."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import nbformat
from notebook_cells import solution

from primer.course.exercises import BEHAVIOURS, check_loop
from primer.course.interview_checklist import checklist
from primer.course.quiz import load_quiz
from primer.course.support_design import Operations, Safeguards, SupportDesign, ToolPlan
from primer.loop.config import AgentConfig
from primer.loop.cost import run_usages
from primer.providers.claude import DEFAULT_MODEL, MIN_CACHEABLE_TOKENS

ROOT = Path(__file__).resolve().parent.parent
LESSON = ROOT / "notebooks" / "14_the_interview_rounds.ipynb"

DESIGN = SupportDesign(
    tools=(ToolPlan("get_order", "look up an order by id", personal_data=True),
           ToolPlan("search_policy", "find the refund and returns policy"),
           ToolPlan("issue_refund", "refund an order", side_effecting=True,
                    needs_approval=True, idempotency_key=True,
                    approval_reason="money leaves the company; a person checks the order"),
           ToolPlan("handoff_to_human", "hand the ticket to a person, with the reason")),
    good_run_steps=6, max_steps=12, token_budget=60_000, per_step_success=0.97,
    static_tokens=2_000, tool_definition_tokens=800, tokens_per_step=800,
    output_tokens_per_call=150, tasks_per_day=10_000,
    reasons={"max_steps": "about twice a good run", "token_budget": "a good run with headroom",
             "refund_limit": "larger orders go to a person"},
    safeguards=Safeguards(customer_text_is_data=True, identity_from_session=True,
                          refund_limit=5_000, largest_order=60_000, redact_personal_data=True,
                          trace_retention_days=30, retention_policy_days=90,
                          alerts=("tokens_per_task", "stop_causes", "cost_per_day"),
                          on_call_sees=("trace", "stop_cause", "tokens_per_step",
                                        "tool_errors")),
    operations=Operations(latency_target_s=30, seconds_per_call=4, tool_timeout_s=5,
                          session_max_turns=20, session_max_usd=1.50, approval_share=0.03,
                          approvers=2, eval_tasks=250,
                          regression_gate="no release whose eval success drops below the last",
                          rollout=("shadow", "canary"),
                          kill_switch="one flag sends every chat to the human queue"))


def cells():
    return nbformat.read(LESSON, as_version=4).cells


def lesson_loop():
    source = next(c.source for c in cells() if "exercise-starter" in c.metadata.get("tags", []))
    namespace: dict = {}
    exec(compile(source, "<lesson 14>", "exec"), namespace)  # noqa: S102
    return namespace["my_loop"]


def outputs() -> str:
    return "\n".join(o.get("text", "") or o.get("data", {}).get("text/markdown", "")
                     for c in cells() if c.cell_type == "code" for o in c.outputs)


def test_the_starter_passes_one_of_eleven_behaviours():
    report = check_loop(lesson_loop(), show=False)
    assert (report.score, report.total, len(BEHAVIOURS)) == (1, 11, 11)
    assert "The starter passes **1 of 11** behaviours." in outputs()


def test_the_folded_reference_solution_passes_every_behaviour():
    report = check_loop(solution("14", "my_loop"), show=False)
    assert report.failed == [] and report.total == 11


def test_the_lessons_design_is_the_one_pinned_here():
    source = next(c.source for c in cells() if c.source.startswith("design = SupportDesign("))
    for text in ("good_run_steps=6", "max_steps=12", "token_budget=60_000",
                 "per_step_success=0.97", "refund_limit=5_000", "tasks_per_day=10_000",
                 "largest_order=60_000", "trace_retention_days=30", "retention_policy_days=90",
                 "latency_target_s=30, seconds_per_call=4, tool_timeout_s=5",
                 "session_max_turns=20, session_max_usd=1.50",
                 "approval_share=0.03, approvers=2", "eval_tasks=250", "idempotency_key=True",
                 'rollout=("shadow", "canary")', "personal_data=True"):
        assert text in source


def test_the_design_round_figures():
    n = DESIGN.numbers()
    assert (round(n.cost_per_task_usd, 2), n.tokens_per_task) == (0.10, 29_700)
    assert round(n.cached_cost_per_task_usd, 3) == 0.064            # the prefix, cached
    assert (DESIGN.base_tokens, DESIGN.min_cacheable_tokens) == (2_800, 2_048)
    assert (round(n.end_to_end_success, 2), round(n.per_step_needed, 3)) == (0.83, 0.983)
    assert (n.failed_run_stop_cause, n.failed_run_calls, n.failed_run_tokens) == \
        ("token_budget", 10, 65_500)
    assert round(n.failed_run_cost_usd, 2) == 0.21
    assert (round(n.cached_daily_cost_usd), round(n.cached_upper_daily_cost_usd),
            round(n.upper_daily_cost_usd)) == (642, 783, 1_190)
    assert (DESIGN.runaway_share, round(n.cached_expected_daily_cost_usd)) == (0.25, 677)
    assert (n.approvals_per_day, n.good_run_seconds, n.eval_tasks_needed) == (300, 24, 214)
    assert round(1 - n.end_to_end_success, 2) == 0.17
    assert round(n.context_share_at_cap, 3) == 0.059
    assert DESIGN.context_window == AgentConfig().context_window == 200_000
    notes = DESIGN.review()
    assert len(notes) == 1 and notes[0].startswith("Only 83% of tasks succeed end to end")


def test_the_lessons_prose_states_those_figures():
    text = outputs()
    for phrase in ("a good run costs about **0.10 USD** (29,700 tokens)",
                   "the 2,800-token prefix of tool definitions", "about **0.064 USD**",
                   "the model's 2,048-token minimum would cache nothing",
                   "on **token_budget** at call **10**, after 65,500 tokens, 0.21 USD",
                   "at least **642 USD**",
                   "it would cost **783 USD** cached, or 1,190 USD if the cache never hits: "
                   "the upper bound",
                   "if 25% of them run away and the rest cost a good run, expect about "
                   "**677 USD** cached",
                   "fills 5.9% of the 200,000-token window",
                   "approval queue: 300 a day for 2 people (240 each at most)",
                   "evals before launch: 250 tasks (214 needed)"):
        assert phrase in text, phrase


def test_the_lessons_checklist_ticks_the_marked_answer_and_not_the_wordy_one():
    text = outputs()
    assert "[x] 1. What does the model return when it wants a tool?" in text
    assert "[ ] 2. Who runs the tool, and what decides whether it may run?" in text
    assert checklist({1: "TFTF"}).splitlines()[0].startswith("[x] 1.")


def test_the_quiz_number_a_prefix_under_the_minimum_reads_nothing_from_the_cache():
    minimum = MIN_CACHEABLE_TOKENS[DEFAULT_MODEL]
    assert minimum == 2_048
    read = sum(u.cache_read_input_tokens
               for u in run_usages(6, 1_800, 800, 150, cache="prefix", min_cacheable=minimum))
    assert read == 0 == load_quiz("14").questions[2].number
    below = run_usages(6, 1_800, 800, 150, cache="prefix", min_cacheable=1_024)
    assert sum(u.cache_read_input_tokens for u in below) == 9_000       # a wrong answer's why
    assert sum(u.cache_creation_input_tokens + u.cache_read_input_tokens for u in below) \
        == 10_800


def test_display_only_prose_cells_hide_their_source():
    for c in cells():
        if c.cell_type == "code" and "display(Markdown(" in c.source:
            assert c.metadata.get("jupyter", {}).get("source_hidden") is True, c.source[:60]


def test_the_design_the_review_cannot_judge_gets_no_new_note():
    source = next(c.source for c in cells() if c.source.startswith("plausible = replace("))
    assert "needs_approval" not in source and "idempotency_key=True" in source
    assert "new notes: none" in outputs()
    namespace = {"replace": replace, "ToolPlan": ToolPlan, "design": DESIGN}
    exec(compile(source.replace("print(", "(", 1), "<lesson 14>", "exec"),  # noqa: S102
         namespace)
    assert namespace["new"] == []
