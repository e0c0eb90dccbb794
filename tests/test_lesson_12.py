"""The figures lesson 12 states about sub-agent budgets and the context checks, computed again."""

from __future__ import annotations

from primer.harness.context_editing import CLEARED_MARK, ClearToolResults
from primer.harness.production import run_production
from primer.harness.sub_agents import sub_agent_tool
from primer.harness.summaries import extractive_summary
from primer.loop.config import AgentConfig
from primer.loop.loop import SUMMARY_HEADER
from primer.loop.model import ScriptedLLM, estimate_tokens
from primer.loop.state import StopCause
from primer.scenarios import support
from primer.scenarios.dense_tokens import DenseTokens
from primer.scenarios.report import WINDOW, read_page, reader

LIMITS = dict(token_budget=None, max_steps=20, offer_handoff=False, context_window=WINDOW)


def investigate_tool(config=None):
    return sub_agent_tool("investigate", "Hand a log investigation to a helper; it returns "
                          "a short finding.",
                          support.make_investigator_llm, [support.read_payment_log],
                          config=config or AgentConfig(max_steps=6, offer_handoff=False))


def test_the_child_gets_the_parents_remaining_1939_of_2220_tokens_and_the_run_stays_within():
    free = investigate_tool()
    parent = run_production(support.make_parent_llm(), support.DOUBLE_CHARGE_TASK, [free])
    child = free.fn.runs[0]
    budget = parent.steps[0].usage.total_tokens + child.usage.total_tokens // 2
    assert (budget, child.usage.total_tokens) == (2_220, 3_879)
    capped = investigate_tool()
    tight = run_production(support.make_parent_llm(), support.DOUBLE_CHARGE_TASK, [capped],
                           config=AgentConfig(token_budget=budget))
    given, capped_child = capped.fn.configs[0], capped.fn.runs[0]
    assert given.token_budget == budget - tight.steps[0].usage.total_tokens == 1_939
    assert given.budget_check == "before"
    assert capped_child.stop_cause is StopCause.TOKEN_BUDGET
    assert capped_child.usage.total_tokens == 850
    assert tight.stop_cause is StopCause.END_TURN
    assert tight.usage.total_tokens == 1_586 <= budget
    # what the uncapped child would have taken the run to
    assert tight.steps[0].usage.total_tokens + child.usage.total_tokens == 4_160


def test_with_a_denser_tokenizer_the_stop_comes_after_6_calls_not_8_on_the_reported_count():
    plain = run_production(reader(), "Read the report.", [read_page], config=AgentConfig(**LIMITS))
    dense = run_production(DenseTokens(reader(), 1.5), "Read the report.", [read_page],
                           config=AgentConfig(**LIMITS))
    assert plain.stop_cause is dense.stop_cause is StopCause.CONTEXT_WINDOW
    assert (len(plain.steps), len(dense.steps)) == (8, 6)
    last = dense.steps[-1]
    estimate_then = last.prompt_estimate + estimate_tokens(dense.messages[-2:])
    assert last.usage.input_tokens == 3_225 and estimate_then == 2_566
    assert estimate_then < int(WINDOW * 0.8) == 3_200 < last.usage.input_tokens
    assert "3,641 tokens (call 6 reported 3,225; about 416 added since)" in dense.stop_detail


def test_the_compaction_numbers_of_the_reader_run():
    plain = run_production(reader(), "Read the report.", [read_page], config=AgentConfig(**LIMITS))
    compacted = run_production(reader(), "Read the report.", [read_page],
                               config=AgentConfig(**LIMITS, summarizer=extractive_summary))
    unlimited = run_production(reader(), "Read the report.", [read_page],
                               config=AgentConfig(**{**LIMITS, "context_window": 1_000_000}))
    assert (plain.usage.input_tokens, compacted.usage.input_tokens,
            unlimited.usage.input_tokens) == (12_208, 18_873, 33_364)
    assert max(s.usage.input_tokens for s in compacted.steps) == 2_373
    assert unlimited.steps[-1].usage.input_tokens == 5_065


def test_in_a_conversation_the_current_question_is_kept_next_to_the_task_before_the_summary():
    earlier = run_production(ScriptedLLM(["Hello; ask me about the report."]), "Hello.")
    followup = run_production(reader(), "Now read the whole report, page by page.", [read_page],
                              messages=earlier.messages,
                              config=AgentConfig(**LIMITS, summarizer=extractive_summary))
    texts = [b["text"] for b in followup.messages[0]["content"]]
    assert followup.stop_cause is StopCause.END_TURN and len(followup.steps) == 13
    assert texts[:2] == ["Hello.", "Now read the whole report, page by page."]
    assert texts[2].startswith(SUMMARY_HEADER)


def test_the_quiz_takes_the_childs_tokens_from_the_parents_total_as_the_library_counts_them():
    from primer.course.quiz import load_quiz
    helper = investigate_tool()
    parent = run_production(support.make_parent_llm(), support.DOUBLE_CHARGE_TASK, [helper])
    child = helper.fn.runs[0]
    q = load_quiz("12").questions[2]
    assert (child.usage.total_tokens, parent.usage.total_tokens) == (3_879, 4_560)
    assert q.number == parent.usage.total_tokens - child.usage.total_tokens == 681
    assert {w.value for w in q.wrong} == {parent.usage.total_tokens,
                                          parent.usage.total_tokens + child.usage.total_tokens}
    assert sum(s.usage.total_tokens for s in parent.steps) == 681


def test_clearing_old_results_saves_13376_of_the_33364_input_tokens_and_the_run_finishes():
    cleared = run_production(reader(), "Read the report.", [read_page],
                             config=AgentConfig(**LIMITS, context_editor=ClearToolResults(2)))
    assert cleared.stop_cause is StopCause.END_TURN
    assert cleared.usage.input_tokens == 19_988 and 33_364 - 19_988 == 13_376
    assert round(13_376 / 33_364, 2) == 0.40
    assert cleared.messages[2]["content"][0]["content"].startswith(
        f"{CLEARED_MARK} The result of read_page({{\"n\": 1}}) (tool_use id toolu_01_2")
