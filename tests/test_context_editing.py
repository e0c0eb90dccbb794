"""Context editing: old tool results cleared before any summary, with a way back."""

from __future__ import annotations

import pytest

from primer.harness.context_editing import (
    CLEARED_MARK,
    ClearToolResults,
    clear_tool_results,
    placeholder,
)
from primer.harness.production import run_production
from primer.harness.summaries import extractive_summary
from primer.loop.config import AgentConfig
from primer.loop.messages import (
    assistant_message,
    tool_result_block,
    unanswered_tool_uses,
    user_message,
)
from primer.loop.model import ScriptedLLM, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import Tool, ToolRegistry
from primer.scenarios.report import read_page, reader


def history(names: list[str]) -> list:
    """The task, then one reply per name calling that tool, each answered by a long result."""
    msgs = [user_message("Read everything.")]
    for k, name in enumerate(names, 1):
        msgs.append(assistant_message([{"type": "text", "text": f"Call {k}."},
                                       {"type": "tool_use", "id": f"t{k}", "name": name,
                                        "input": {"n": k}}]))
        msgs.append(user_message([tool_result_block(f"t{k}", f"result {k} " + "x" * 400)]))
    return msgs


def results(msgs: list) -> dict[str, str]:
    return {b["tool_use_id"]: b["content"] for m in msgs if m["role"] == "user"
            and isinstance(m["content"], list) for b in m["content"]
            if b["type"] == "tool_result"}


def test_every_result_but_the_last_n_is_cleared_and_the_list_stays_valid():
    msgs = history(["read"] * 6)
    new, cleared = clear_tool_results(msgs, keep=2)
    assert cleared == ["t1", "t2", "t3", "t4"]
    kept = results(new)
    assert all(kept[i].startswith(CLEARED_MARK) for i in cleared)
    assert kept["t5"] == results(msgs)["t5"] and kept["t6"] == results(msgs)["t6"]
    assert unanswered_tool_uses(new) == [] and len(new) == len(msgs)
    assert results(msgs)["t1"].startswith("result 1")  # the input list is not changed


def test_keep_zero_clears_every_result():
    _, cleared = clear_tool_results(history(["read"] * 3), keep=0)
    assert cleared == ["t1", "t2", "t3"]


def test_results_of_excluded_tools_are_kept_and_not_counted():
    msgs = history(["read", "plan", "read", "read", "plan", "read"])
    new, cleared = clear_tool_results(msgs, keep=2, exclude={"plan"})
    assert cleared == ["t1", "t3"]
    assert not results(new)["t2"].startswith(CLEARED_MARK)
    assert not results(new)["t5"].startswith(CLEARED_MARK)


def test_the_placeholder_says_what_was_cleared_and_how_to_get_it_back():
    new, _ = clear_tool_results(history(["read"] * 3), keep=1)
    text = results(new)["t1"]
    assert text == placeholder("read", {"n": 1}, "t1", 103)
    assert text == (f"{CLEARED_MARK} The result of read({{\"n\": 1}}) (tool_use id t1, about "
                    f"103 tokens) was removed to save room. To see it again, call read again "
                    f"with the same input.")


def test_clearing_again_changes_nothing_and_a_new_result_clears_one_more():
    once, _ = clear_tool_results(history(["read"] * 4), keep=2)
    again, cleared = clear_tool_results(once, keep=2)
    assert cleared == [] and again == once
    longer = once + history(["read"] * 5)[-2:]  # one more call (t5) and its result
    _, cleared = clear_tool_results(longer, keep=2)
    assert cleared == ["t3"]


def test_the_editor_never_clears_a_side_effecting_tools_result():
    refund = Tool("refund", "Refund.", {"type": "object"}, lambda **_: "ok",
                  side_effecting=True)
    read = Tool("read", "Read.", {"type": "object"}, lambda **_: "ok")
    new = ClearToolResults(keep=0)(history(["refund", "read", "read"]),
                                   ToolRegistry([refund, read]))
    assert new is not None
    assert [v.startswith(CLEARED_MARK) for v in results(new).values()] == [False, True, True]


def test_the_editor_returns_none_when_nothing_is_left_to_clear():
    assert ClearToolResults(keep=5)(history(["read"] * 3), ToolRegistry([])) is None


def test_the_editor_refuses_settings_that_cannot_work():
    with pytest.raises(ValueError, match="keep must be an integer >= 0"):
        ClearToolResults(keep=-1)
    with pytest.raises(ValueError, match=r"write exclude_tools=\['plan'\]"):
        ClearToolResults(exclude_tools="plan")


LIMITS = dict(token_budget=None, max_steps=20, offer_handoff=False, context_window=4_000)


def test_in_the_loop_clearing_lets_the_reader_finish_and_sends_fewer_tokens():
    events = []
    cleared = run_production(reader(), "Read the report.", [read_page],
                             config=AgentConfig(**LIMITS, context_editor=ClearToolResults(2)),
                             on_event=lambda k, d: events.append((k, d)))
    plain = run_production(reader(), "Read the report.", [read_page],
                           config=AgentConfig(**LIMITS))
    unlimited = run_production(reader(), "Read the report.", [read_page],
                               config=AgentConfig(**{**LIMITS, "context_window": 1_000_000}))
    assert plain.stop_cause is StopCause.CONTEXT_WINDOW
    assert cleared.stop_cause is StopCause.END_TURN and len(cleared.steps) == 13
    assert cleared.usage.input_tokens == 19_988 < unlimited.usage.input_tokens == 33_364
    edits = [d for k, d in events if k == "context_edited"]
    assert [d["step"] for d in edits] == [7, 10, 12]
    assert all(d["after_tokens"] < d["before_tokens"] for d in edits)
    assert unanswered_tool_uses(cleared.messages) == []


def test_clearing_comes_first_and_the_summary_only_if_still_needed():
    events = []
    run_production(reader(), "Read the report.", [read_page],
                   config=AgentConfig(**LIMITS, context_editor=ClearToolResults(2),
                                      summarizer=extractive_summary),
                   on_event=lambda k, d: events.append(k))
    assert "context_edited" in events and "compaction" not in events
    events.clear()
    run_production(reader(), "Read the report.", [read_page],
                   config=AgentConfig(**LIMITS, context_editor=ClearToolResults(4),
                                      summarizer=extractive_summary),
                   on_event=lambda k, d: events.append(k))
    assert events.index("context_edited") < events.index("compaction")


def test_the_scripted_model_reports_the_cleared_prompt():
    cleared = run_production(reader(), "Read the report.", [read_page],
                             config=AgentConfig(**LIMITS, context_editor=ClearToolResults(2)))
    step = cleared.steps[6]  # the first call after the first edit
    assert step.usage.input_tokens < cleared.steps[5].usage.input_tokens


@pytest.mark.parametrize("editor", [
    lambda msgs, tools: 1 / 0,
    lambda msgs, tools: msgs[:-1],  # drops a tool_result: not a valid history
])
def test_an_editor_that_fails_changes_nothing_and_the_run_goes_on(editor):
    events = []
    result = run_production(reader(), "Read the report.", [read_page],
                            config=AgentConfig(**LIMITS, context_editor=editor),
                            on_event=lambda k, d: events.append(k))
    assert "context_edit_failed" in events and "context_edited" not in events
    assert result.stop_cause is StopCause.CONTEXT_WINDOW


def test_a_short_run_is_never_edited():
    model = ScriptedLLM([tool_reply(("read_page", {"n": 1})), "done"])
    result = run_production(model, "Read page 1.", [read_page],
                            config=AgentConfig(context_editor=ClearToolResults(0)))
    assert not any(str(b.get("content", "")).startswith(CLEARED_MARK)
                   for m in result.messages if isinstance(m["content"], list)
                   for b in m["content"])
