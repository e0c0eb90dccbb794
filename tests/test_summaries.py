"""What a summary must keep: the task, the constraints, the open calls and the decisions."""

from __future__ import annotations

import pytest

from primer.harness.summaries import KEPT_HEADER, LLMSummarizer, extractive_summary, kept_facts
from primer.loop.config import AgentConfig
from primer.loop.loop import SUMMARY_HEADER, compact_messages, run_agent
from primer.loop.messages import (
    assistant_message,
    tool_result_block,
    unanswered_tool_uses,
    user_message,
)
from primer.loop.model import ScriptedLLM, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import tool

GOAL = ("Goal: reconcile every March invoice against the ledger. Constraints: never change an "
        "invoice dated before March 3; flag any amount over 10,000 rupees for a person "
        "instead of fixing it; report the result as a table with one row per invoice.")
DECISION = "Decision: invoice 7 is dated March 1, so I leave it as it is and only report it."
FAILED = "timeout: the ledger did not answer in 30 s; call again"


def conversation(turns: int = 12) -> list:
    """Small talk, the goal stated once (early, not first), a decision, then ``turns``
    replies reading invoices; invoice 4's read failed and was never made again."""
    msgs = [user_message("Hi, can you help with our invoices?"),
            assistant_message("Sure. What should I do?"),
            user_message(GOAL),
            assistant_message(DECISION),
            user_message("Go ahead.")]
    for n in range(1, turns + 1):
        msgs.append(assistant_message([{"type": "text", "text": f"Reading invoice {n}."},
                                       {"type": "tool_use", "id": f"r{n}",
                                        "name": "read_invoice", "input": {"n": n}}]))
        result = FAILED if n == 4 else f"invoice {n}: " + "line items and totals " * 30
        msgs.append(user_message([tool_result_block(f"r{n}", result, is_error=n == 4)]))
    return msgs


def summary_of(msgs: list) -> str:
    return next(b["text"] for b in msgs[0]["content"] if b["text"].startswith(SUMMARY_HEADER))


def forgetful(messages):
    """A summariser model that keeps nothing but the gist."""
    return "Several invoices were read."


SUMMARISERS = {"extractive": extractive_summary,
               "a model that drops details": LLMSummarizer(ScriptedLLM(forgetful))}


@pytest.mark.parametrize("name", sorted(SUMMARISERS))
def test_a_summary_keeps_the_goal_and_constraints_stated_once_early(name):
    new, _ = compact_messages(conversation(), SUMMARISERS[name], keep_turns=2)
    summary = summary_of(new)
    assert f"- user: {GOAL}" in summary.splitlines()  # word for word, not cut
    assert new[0]["content"][0]["text"] == "Hi, can you help with our invoices?"
    assert unanswered_tool_uses(new) == []


@pytest.mark.parametrize("name", sorted(SUMMARISERS))
def test_a_summary_keeps_the_decisions_and_the_calls_still_open(name):
    new, _ = compact_messages(conversation(), SUMMARISERS[name], keep_turns=2)
    lines = summary_of(new).splitlines()
    assert f"- answered: {DECISION}" in lines
    assert f'- open: read_invoice({{"n":4}}) -> error: {FAILED}' in lines
    assert lines[1] == KEPT_HEADER


@pytest.mark.parametrize("name", sorted(SUMMARISERS))
def test_the_kept_facts_survive_a_second_compaction(name):
    once, _ = compact_messages(conversation(), SUMMARISERS[name], keep_turns=2)
    more = conversation(20)[len(conversation()):]  # eight more turns
    twice, _ = compact_messages(once + more, SUMMARISERS[name], keep_turns=2)
    lines = summary_of(twice).splitlines()
    assert f"- user: {GOAL}" in lines and f"- answered: {DECISION}" in lines
    assert sum(line.startswith("- open: read_invoice") for line in lines) == 1
    assert lines.count(KEPT_HEADER) == 1


def test_an_open_call_made_again_and_answered_is_no_longer_open():
    msgs = conversation()
    msgs += [assistant_message([{"type": "tool_use", "id": "again", "name": "read_invoice",
                                 "input": {"n": 4}}]),
             user_message([tool_result_block("again", "invoice 4: 900 rupees")])]
    assert not any(line.startswith("- open:") for line in kept_facts(msgs))


def test_an_open_call_carried_from_an_earlier_summary_closes_when_answered():
    once, _ = compact_messages(conversation(), extractive_summary, keep_turns=2)
    fixed = once + [assistant_message([{"type": "tool_use", "id": "again",
                                        "name": "read_invoice", "input": {"n": 4}}]),
                    user_message([tool_result_block("again", "invoice 4: 900 rupees")])]
    assert not any(line.startswith("- open:") for line in kept_facts(fixed))


@tool
def read_invoice(n: int) -> str:
    """Read invoice n.

    Args:
        n: the invoice number.
    """
    return f"invoice {n}: " + "line items and totals " * 30


def test_a_run_that_compacts_many_times_still_carries_the_goal():
    calls = []

    def policy(messages):
        calls.append(1)
        return "Done." if len(calls) > 16 else tool_reply(("read_invoice", {"n": len(calls)}))

    history = conversation(0)[:-1]  # the small talk, the goal and the decision
    result = run_agent(ScriptedLLM(policy), "Go ahead.", [read_invoice], messages=history,
                       config=AgentConfig(context_window=3_000, token_budget=None,
                                          max_steps=30, offer_handoff=False,
                                          summarizer=extractive_summary))
    assert result.stop_cause is StopCause.END_TURN and len(calls) == 17
    assert result.messages[0]["content"][-1]["text"].count(SUMMARY_HEADER) == 1
    assert f"- user: {GOAL}" in summary_of(result.messages).splitlines()
    assert "Go ahead." in [b["text"] for b in result.messages[0]["content"]]


def test_without_facts_to_keep_the_summary_is_the_turns_alone():
    msgs = [user_message("the task")] + conversation(3)[5:]
    msgs[6] = user_message([tool_result_block("r3", "fine")])
    assert extractive_summary(msgs).splitlines()[0] == "assistant: Reading invoice 1."
