"""Context: trimming, compaction that keeps calls and results together, the hard stop."""

from __future__ import annotations

import pytest

from primer.harness.hooks import trim_text, trim_tool_results
from primer.harness.production import run_production
from primer.harness.summaries import LLMSummarizer, extractive_summary
from primer.loop.config import AgentConfig
from primer.loop.loop import SUMMARY_HEADER, compact_messages, compaction_cut, run_agent
from primer.loop.messages import (
    assistant_message,
    tool_result_block,
    unanswered_tool_uses,
    user_message,
)
from primer.loop.model import ScriptedLLM, Usage, estimate_tokens, tool_reply
from primer.loop.state import StopCause, prompt_tokens
from primer.loop.tools import tool
from primer.scenarios.dense_tokens import DenseTokens


@tool
def read_page(n: int) -> str:
    """Read page n of a long report.

    Args:
        n: page number.
    """
    return f"page {n}: " + "lorem ipsum " * 150


def reader(pages: int):
    """Reads pages 1..pages, two calls per reply on odd pages, then answers."""
    state = {"n": 0}

    def policy(messages):
        state["n"] += 1
        k = state["n"]
        if k > pages:
            return "The report is about lorem ipsum."
        return tool_reply(("read_page", {"n": k}), text=f"Reading page {k}.")

    return ScriptedLLM(policy)


def history(turns: int, calls_per_turn: int = 2):
    msgs = [user_message("the task")]
    for t in range(turns):
        uses = [{"type": "tool_use", "id": f"c{t}_{j}", "name": "read_page", "input": {"n": t}}
                for j in range(calls_per_turn)]
        msgs.append(assistant_message([{"type": "text", "text": "thinking"}, *uses]))
        msgs.append(user_message([tool_result_block(u["id"], "x" * 50) for u in uses]))
    return msgs


@pytest.mark.parametrize("turns", range(1, 8))
@pytest.mark.parametrize("keep", [1, 2, 3])
def test_compaction_never_leaves_a_tool_use_without_its_tool_result(turns, keep):
    msgs = history(turns)
    out = compact_messages(msgs, extractive_summary, keep)
    new = out[0] if out else msgs
    assert unanswered_tool_uses(new) == []
    ids_used = {b["id"] for m in new if m["role"] == "assistant" for b in m["content"]
                if b["type"] == "tool_use"}
    ids_answered = {b["tool_use_id"] for m in new if m["role"] == "user"
                    and isinstance(m["content"], list) for b in m["content"]
                    if b["type"] == "tool_result"}
    assert ids_used == ids_answered
    assert [m["role"] for m in new][:2] in (["user", "assistant"], ["user"])


def test_compaction_keeps_the_task_first_and_the_last_turns_word_for_word():
    msgs = history(5)
    new, usage = compact_messages(msgs, extractive_summary, keep_turns=2)
    assert new[0]["content"][0]["text"] == "the task"
    assert new[0]["content"][1]["text"].startswith(SUMMARY_HEADER)
    assert new[1:] == msgs[-4:]
    assert usage == Usage()


def test_compacting_twice_keeps_one_summary_and_the_task():
    msgs = history(6)
    once, _ = compact_messages(msgs, extractive_summary, keep_turns=3)
    twice, _ = compact_messages(once + history(3)[1:], extractive_summary, keep_turns=2)
    texts = [b["text"] for b in twice[0]["content"]]
    assert texts[0] == "the task" and len(texts) == 2
    assert "called read_page" in texts[1]


def test_a_second_compaction_carries_the_first_summary_forward():
    events = []
    result = run_agent(reader(12), "Summarise the report.", [read_page],
                       config=AgentConfig(context_window=4000, token_budget=None, max_steps=20,
                                          summarizer=extractive_summary, offer_handoff=False),
                       on_event=lambda k, d: events.append(k))
    assert events.count("compaction") >= 2
    summary = result.messages[0]["content"][1]["text"]
    for page in range(1, 5):
        assert f"page {page}:" in summary


def test_an_llm_summarizer_is_shown_the_earlier_summary():
    seen = []

    def policy(messages):
        seen.append(messages[0]["content"])
        return f"summary {len(seen)}: pages read"

    summariser = LLMSummarizer(ScriptedLLM(policy))
    once, _ = compact_messages(history(6), summariser, keep_turns=3)
    compact_messages(once + history(3)[1:], summariser, keep_turns=2)
    assert "summary 1: pages read" in seen[1]


def test_nothing_is_compacted_when_only_the_kept_turns_exist():
    assert compaction_cut(history(2), keep_turns=2) is None
    assert compact_messages(history(2), extractive_summary, 2) is None


def test_a_long_run_compacts_and_sends_fewer_tokens_per_call():
    base = dict(token_budget=None, max_steps=20, offer_handoff=False)
    plain = run_agent(reader(12), "Summarise the report.", [read_page],
                      config=AgentConfig(**base, context_window=1_000_000))
    compacted = run_agent(reader(12), "Summarise the report.", [read_page],
                          config=AgentConfig(**base, context_window=4000,
                                             summarizer=extractive_summary))
    assert plain.stop_cause is compacted.stop_cause is StopCause.END_TURN
    assert max(s.usage.prompt_tokens for s in compacted.steps) < \
        max(s.usage.prompt_tokens for s in plain.steps)
    assert compacted.usage.input_tokens < plain.usage.input_tokens
    assert unanswered_tool_uses(compacted.messages) == []
    assert compacted.messages[0]["content"][0]["text"] == "Summarise the report."


def test_without_compaction_the_run_stops_on_the_context_window_at_its_hard_share():
    result = run_agent(reader(12), "Summarise the report.", [read_page],
                       config=AgentConfig(context_window=4000, token_budget=None, max_steps=20,
                                          offer_handoff=False))
    assert result.stop_cause is StopCause.CONTEXT_WINDOW
    assert "80%" in result.stop_detail


def test_compaction_event_reports_the_prompt_before_and_after():
    events = []
    run_agent(reader(12), "Summarise the report.", [read_page],
              config=AgentConfig(context_window=4000, token_budget=None, max_steps=20,
                                 summarizer=extractive_summary, offer_handoff=False),
              on_event=lambda k, d: events.append((k, d)))
    done = [d for k, d in events if k == "compaction"]
    assert done and all(d["after_tokens"] < d["before_tokens"] for d in done)
    assert all(d["before_tokens"] > 4000 * 0.6 for d in done)


def test_an_llm_summarizers_usage_counts_in_the_run():
    summariser = LLMSummarizer(ScriptedLLM(lambda m: "pages read; lorem ipsum throughout"))
    result = run_agent(reader(12), "Summarise the report.", [read_page],
                       config=AgentConfig(context_window=4000, token_budget=None, max_steps=20,
                                          summarizer=summariser, offer_handoff=False))
    own = Usage()
    for s in result.steps:
        own = own + s.usage
    assert result.usage.total_tokens > own.total_tokens


def test_a_summarizer_that_raises_does_not_crash_the_run():
    def broken(messages):
        raise RuntimeError("summary service down")

    result = run_agent(reader(12), "Summarise the report.", [read_page],
                       config=AgentConfig(context_window=4000, token_budget=None, max_steps=20,
                                          summarizer=broken, offer_handoff=False))
    assert result.stop_cause is StopCause.CONTEXT_WINDOW


def test_trimming_cuts_long_results_and_says_so():
    assert trim_text("short", 10) == "short"
    cut = trim_text("y" * 4000, 100)
    assert cut.startswith("y" * 400) and "trimmed" in cut and "1,000" in cut
    result = run_production(reader(1), "t", [read_page], hooks=trim_tool_results(50),
                            config=AgentConfig(offer_handoff=False))
    assert estimate_tokens(result.executions[0].content) < 70
    with pytest.raises(ValueError):
        trim_tool_results(0)


def test_compact_share_must_lie_inside_the_window():
    with pytest.raises(ValueError, match="compact_share"):
        AgentConfig(compact_share=1.2)


# ---------------------------------------------------------------- the prompt's size


def _window_run(llm, **extra):
    return run_agent(llm, "Summarise the report.", [read_page],
                     config=AgentConfig(context_window=4000, token_budget=None, max_steps=20,
                                        offer_handoff=False, **extra))


def test_a_scripted_model_reports_exactly_the_estimate_so_the_two_agree():
    result = _window_run(reader(12))
    assert all(s.usage.input_tokens == s.prompt_estimate for s in result.steps)


def test_the_context_stop_reads_the_reported_prompt_plus_what_was_added_since():
    plain = _window_run(reader(12))
    dense = _window_run(DenseTokens(reader(12), 1.5))
    assert dense.stop_cause is StopCause.CONTEXT_WINDOW
    assert len(dense.steps) < len(plain.steps)  # the estimate alone would have gone on
    limit = int(4000 * 0.8)
    # every call made passed the check
    for before, after in zip(dense.steps, dense.steps[1:], strict=False):
        assert before.usage.input_tokens + after.prompt_estimate - before.prompt_estimate <= limit
        assert after.prompt_estimate <= limit  # and the estimate alone was under it too
    last = dense.steps[-1]
    assert f"call {last.index} reported {last.usage.input_tokens:,}" in dense.stop_detail
    assert last.usage.input_tokens == round(1.5 * last.prompt_estimate)


def test_compaction_starts_on_the_reported_prompt_where_the_estimate_is_still_under():
    events = []
    dense = run_agent(DenseTokens(reader(12), 1.5), "Summarise the report.", [read_page],
                      config=AgentConfig(context_window=4000, token_budget=None, max_steps=20,
                                         offer_handoff=False, summarizer=extractive_summary),
                      on_event=lambda k, d: events.append((k, d)))
    first = next(d for k, d in events if k == "compaction")
    before = dense.steps[first["step"] - 2]  # the call whose reported prompt it read
    assert first["before_tokens"] > 4000 * 0.6
    assert before.prompt_estimate < 4000 * 0.6 < before.usage.input_tokens


def test_prompt_tokens_is_the_estimate_before_the_first_call_and_the_count_after():
    from primer.loop.loop import start_run

    state = start_run(ScriptedLLM([]), "hello there")
    assert prompt_tokens(state) == state.prompt_estimate
    result = run_agent(DenseTokens(ScriptedLLM(["hi"]), 2.0), "hello there")
    step = result.steps[0]
    assert step.usage.prompt_tokens == 2 * step.prompt_estimate
    assert Usage(10, 5, 20, 30).prompt_tokens == 60  # input + cache writes + cache reads


def _conversation(question_calls: int):
    """An earlier exchange, then a new question whose turn makes ``question_calls`` calls."""
    msgs = [user_message("first question"), assistant_message("first answer"),
            user_message("the current question: sum pages 1 to 9")]
    for t in range(question_calls):
        uses = [{"type": "tool_use", "id": f"q{t}", "name": "read_page", "input": {"n": t}}]
        msgs.append(assistant_message([{"type": "text", "text": "reading"}, *uses]))
        msgs.append(user_message([tool_result_block(u["id"], "x" * 50) for u in uses]))
    return msgs


@pytest.mark.parametrize("calls", [3, 5, 8])
def test_compaction_in_a_conversation_never_summarises_the_current_question_away(calls):
    msgs = _conversation(calls)
    new, _ = compact_messages(msgs, extractive_summary, keep_turns=2)
    texts = [b["text"] for m in new if m["role"] == "user"
             for b in (m["content"] if isinstance(m["content"], list) else [])
             if b.get("type") == "text"]
    assert "the current question: sum pages 1 to 9" in texts  # word for word, its own block
    assert sum("the current question" in t for t in texts) == 1  # once, not also summarised
    assert new[0]["content"][1]["text"] == "the current question: sum pages 1 to 9"
    assert new[0]["content"][2]["text"].startswith(SUMMARY_HEADER)
    assert unanswered_tool_uses(new) == []


def test_the_current_question_reaches_every_request_of_a_long_conversation_turn():
    earlier = run_agent(ScriptedLLM(["first answer"]), "first question")
    seen = []

    def policy(messages):
        seen.append(str(messages))  # the request as sent (the list changes later)
        return reader_policy(messages)

    reader_policy = reader(12).script
    later = run_agent(ScriptedLLM(policy), "the current question: summarise the report",
                      [read_page], messages=earlier.messages,
                      config=AgentConfig(context_window=4000, token_budget=None, max_steps=20,
                                         offer_handoff=False, summarizer=extractive_summary))
    assert later.stop_cause is StopCause.END_TURN
    assert any(SUMMARY_HEADER in request for request in seen)  # it did compact
    for request in seen:
        assert "the current question: summarise the report" in request
