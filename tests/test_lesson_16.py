"""Lesson 16's figures, recomputed with the library: the numbers its prose cells display."""

from __future__ import annotations

import dataclasses
import sys
from itertools import accumulate

import pytest
from notebook_cells import solution

from primer.course.practice.session_store import TABLE
from primer.harness.production import run_production
from primer.harness.request_check import InvalidRequest, check_messages
from primer.harness.sessions.session import Session, SessionError
from primer.loop.config import AgentConfig
from primer.loop.cost import cached_history_usages, cached_prefix_usages, run_cost_usd
from primer.loop.messages import repair_history, with_new_turn
from primer.loop.model import estimate_tokens
from primer.loop.state import StopCause
from primer.loop.tools import ToolRegistry
from primer.providers.claude import DEFAULT_MODEL, MIN_CACHEABLE_TOKENS
from primer.providers.mcp import MCPConnection, mcp_inprocess_tools
from primer.providers.mcp_server import mcp_server
from primer.scenarios import orders, support_chat

NO_RETRIES = AgentConfig(max_steps=4, tool_retries=0)


def ask(llm, question, messages=None, tools=None):
    return run_production(llm, question, tools or support_chat.make_tools(),
                          system=support_chat.SYSTEM, config=support_chat.CONFIG, messages=messages)


def test_over_mcp_the_order_task_takes_the_same_path_and_the_bad_call_is_never_sent():
    reached = []
    served = [dataclasses.replace(orders.get_order,
                                  fn=lambda order_id: reached.append(order_id)
                                  or orders.get_order.fn(order_id)), orders.calculator]
    local = run_production(orders.make_llm(), orders.TASK, orders.make_tools(),
                           system=orders.SYSTEM,
                           config=orders.RECOVER_CONFIG)
    with mcp_inprocess_tools(mcp_server(served, name="primer-orders"), timeout_s=5) as tools:
        assert [t.input_schema for t in tools] == [t.input_schema for t in orders.make_tools()]
        remote = run_production(orders.make_llm(), orders.TASK, tools, system=orders.SYSTEM,
                                config=orders.RECOVER_CONFIG)
    assert (len(remote.steps), len(remote.executions)) == (4, 3)
    assert remote.executions[0].error_kind == "invalid_input" and reached == ["A123"]
    differ = [k for k, (a, b) in enumerate(zip(local.messages, remote.messages, strict=True))
              if a != b]
    assert (differ, len(remote.messages)) == ([2], 8)


def test_a_hung_call_is_a_timeout_the_support_model_reports_to_the_customer():
    server = mcp_server(orders.make_tools(), name="primer-orders", faults={"get_order": "hang"})
    with MCPConnection.inprocess(server, timeout_s=0.5) as conn:
        hung = run_production(support_chat.make_llm(), support_chat.QUESTIONS[0], conn.tools,
                              system=support_chat.SYSTEM, config=NO_RETRIES)
    (call,) = hung.executions
    assert (call.error_kind, hung.stop_cause) == ("timeout", StopCause.END_TURN)
    assert hung.final_text.startswith("I could not finish that: get_order failed: timed out")


def test_a_crashed_server_ends_the_run_with_end_turn_after_two_model_calls():
    serve = [sys.executable, "-m", "primer", "mcp-serve", "orders", "--crash", "get_order"]
    with MCPConnection.stdio(serve[0], serve[1:], timeout_s=5) as conn:
        crashed = run_production(support_chat.make_llm(), support_chat.QUESTIONS[0], conn.tools,
                                 system=support_chat.SYSTEM, config=NO_RETRIES)
    assert (crashed.stop_cause, len(crashed.steps)) == (StopCause.END_TURN, 2)
    assert "is gone" in crashed.executions[0].content


def test_the_second_turn_uses_the_first_and_resends_its_six_messages():
    desk = support_chat.make_llm()
    first = ask(desk, support_chat.QUESTIONS[0])
    second = ask(desk, support_chat.QUESTIONS[1], messages=first.messages)
    alone = ask(support_chat.make_llm(), support_chat.QUESTIONS[1])
    assert [e.name for e in second.executions] == ["calculator"]
    assert "order A123 refunds 2950.0 rupees" in second.final_text
    assert alone.final_text.startswith("Which order is it?") and alone.executions == []
    assert (len(first.messages), len(second.steps)) == (6, 2)
    assert [r.steps[0].usage.input_tokens for r in (first, second, alone)] == [368, 599, 372]


@pytest.fixture(scope="module")
def five_turns():
    chat = Session(support_chat.make_llm(), support_chat.make_tools(),
                   system=support_chat.SYSTEM, config=support_chat.CONFIG)
    for q in support_chat.QUESTIONS:
        chat.send(q)
    return chat


def test_five_turns_make_12_calls_and_9828_tokens_and_turn_5_resends_3_times_turn_1(five_turns):
    chat = five_turns
    assert [t.stop_cause for t in chat.turns] == [StopCause.END_TURN] * 5
    assert max(t.steps for t in chat.turns) <= support_chat.CONFIG.max_steps == 4
    assert sum(t.steps for t in chat.turns) == 12
    assert (chat.usage.total_tokens, round(chat.cost_usd, 4)) == (9_828, 0.0575)
    t1, t5 = chat.turns[0], chat.turns[-1]
    assert (t5.first_call_input_tokens, round(t5.first_call_input_tokens
                                              / t1.first_call_input_tokens, 1)) == (1_095, 3.0)
    assert len(chat.messages) == 24


def test_an_interrupted_runs_history_is_refused_until_repaired():
    llm = support_chat.make_llm()
    left = ask(llm, support_chat.QUESTIONS[0]).messages[:2]  # the reply whose call never returned
    with pytest.raises(InvalidRequest, match="toolu_01_2"):
        check_messages(with_new_turn(left, "Hello? Are you still there?"))
    repaired = repair_history(left)
    assert repaired.repaired_ids == ["toolu_01_2"]
    check_messages(with_new_turn(repaired.messages, "Hello? Are you still there?"))


@pytest.fixture(scope="module")
def twenty_turns():
    chat = Session(support_chat.make_llm(), support_chat.make_tools(),
                   system=support_chat.SYSTEM, config=support_chat.CONFIG)
    for k in range(20):
        chat.send(support_chat.QUESTIONS[k % 5])
    return chat.turns


def test_twenty_turns_send_74908_input_tokens_three_times_what_ten_send(twenty_turns):
    turns = twenty_turns
    assert turns[19].first_call_input_tokens == 3_063
    assert round(turns[19].first_call_input_tokens / turns[0].first_call_input_tokens, 1) == 8.3
    ten, twenty = turns[9].session_usage.input_tokens, turns[19].session_usage.input_tokens
    assert (twenty, round(twenty / ten, 1)) == (74_908, 3.0)


def test_caching_the_twenty_turns_041_usd_with_claude_llms_marks_0229_warm_0346_cold(twenty_turns):
    turns = twenty_turns
    calls = [u for t in turns for u in t.call_usages]
    starts = set(accumulate([0, *(t.steps for t in turns[:-1])]))
    assert len(starts) == 20
    minimum = MIN_CACHEABLE_TOKENS[DEFAULT_MODEL]
    assert minimum == 2048
    prefix = (estimate_tokens(ToolRegistry(support_chat.make_tools()).definitions())
              + estimate_tokens(support_chat.SYSTEM))
    assert prefix < minimum
    uncached = run_cost_usd(calls)
    marked = run_cost_usd(cached_prefix_usages(calls, prefix, min_cacheable=minimum))
    warm = run_cost_usd(cached_history_usages(calls, min_cacheable=minimum))
    cold = run_cost_usd(cached_history_usages(calls, cold=starts, min_cacheable=minimum))
    assert (round(uncached, 3), round(marked, 3), round(warm, 3), round(cold, 3)) == \
        (0.41, 0.41, 0.229, 0.346)


def test_the_notebooks_conversation_by_hand_in_sqlite_round_trips(tmp_path):
    import json
    import sqlite3

    first = ask(support_chat.make_llm(), support_chat.QUESTIONS[0])
    db = sqlite3.connect(tmp_path / "chat.sqlite3")
    db.execute(TABLE)
    with db:
        db.executemany("INSERT INTO messages VALUES (?, ?, ?)",
                       [("s", k, json.dumps(m)) for k, m in enumerate(first.messages)])
    add_user_turn = solution("16", "add_user_turn")
    history = add_user_turn(db, "s", support_chat.QUESTIONS[1])
    assert history == [*first.messages, {"role": "user", "content": support_chat.QUESTIONS[1]}]
    db.close()


def test_a_capped_session_stops_the_third_turn_and_refuses_the_fourth():
    capped = Session(support_chat.make_llm(), support_chat.make_tools(),
                     system=support_chat.SYSTEM, config=support_chat.CONFIG, max_cost_usd=0.02)
    causes = [capped.send(q).stop_cause for q in support_chat.QUESTIONS[:3]]
    assert causes == [StopCause.END_TURN, StopCause.END_TURN, StopCause.COST_BUDGET]
    with pytest.raises(SessionError, match="nothing was sent"):
        capped.send(support_chat.QUESTIONS[3])
