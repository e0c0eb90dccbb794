"""Sessions: a conversation over many turns, its running totals, repairs and paused turns."""

from __future__ import annotations

import pytest

from primer.harness.durable.checkpoint import approve
from primer.harness.production import run_production
from primer.harness.request_check import messages_problems
from primer.harness.sessions.session import (
    NOT_APPROVED_RESULT,
    Session,
    SessionCapReached,
    SessionError,
    Turn,
)
from primer.loop.config import AgentConfig
from primer.loop.messages import UNANSWERED_RESULT
from primer.loop.model import ScriptedLLM, ScriptExhausted, Usage, text_reply, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import tool
from primer.scenarios import support_chat


def support_session(**kw) -> Session:
    kw.setdefault("config", support_chat.CONFIG)
    return Session(support_chat.make_llm(), support_chat.make_tools(),
                   system=support_chat.SYSTEM, **kw)


@pytest.fixture(scope="module")
def two_turns():
    session = support_session(session_id="two-turns")
    first = session.send(support_chat.QUESTIONS[0])
    second = session.send(support_chat.QUESTIONS[1])
    return session, first, second


def test_the_second_answer_uses_the_first_without_looking_the_order_up_again(two_turns):
    _, first, second = two_turns
    assert first.final_text == "Order A123 costs 5900.0 rupees in total with 18% GST."
    assert second.final_text == ("Returning one keyboard from order A123 refunds 2950.0 "
                                 "rupees: its unit price, 2500 rupees, plus 18% GST.")
    assert [e.name for e in second.executions] == ["calculator"]


def test_the_same_question_without_the_conversation_cannot_be_answered():
    alone = run_production(support_chat.make_llm(), support_chat.QUESTIONS[1],
                           support_chat.make_tools(), system=support_chat.SYSTEM)
    assert alone.final_text == "Which order is it? Please give me the order id, for example A123."
    assert alone.executions == []


def test_each_turn_reports_its_own_totals_and_the_sessions_running_totals(two_turns):
    session, first, second = two_turns
    t1, t2 = session.turns
    assert (t1.index, t1.usage, t1.cost_usd) == (1, first.usage, first.cost_usd)
    assert (t2.index, t2.usage, t2.cost_usd) == (2, second.usage, second.cost_usd)
    assert t1.session_usage == first.usage
    assert t2.session_usage == first.usage + second.usage
    assert t2.session_cost_usd == pytest.approx(first.cost_usd + second.cost_usd)
    assert session.usage == t2.session_usage and session.cost_usd == t2.session_cost_usd


def test_each_turn_resends_the_history_so_its_first_call_costs_more_than_the_last(two_turns):
    session, first, second = two_turns
    t1, t2 = session.turns
    assert t1.first_call_input_tokens == first.steps[0].usage.input_tokens
    assert t2.first_call_input_tokens == second.steps[0].usage.input_tokens
    assert t2.first_call_input_tokens > first.steps[-1].usage.input_tokens


def test_the_session_history_is_the_last_runs_messages_and_every_call_is_answered(two_turns):
    session, _, second = two_turns
    assert session.messages is second.messages
    assert session.turns[-1].messages == len(second.messages)
    assert messages_problems(session.messages) == []


def test_limits_apply_to_each_turn_not_to_the_session():
    session = support_session(config=AgentConfig(max_steps=3))
    for question in support_chat.QUESTIONS:
        session.send(question)
    assert [t.stop_cause for t in session.turns] == [StopCause.END_TURN] * 5
    assert sum(t.steps for t in session.turns) > 3


def test_a_history_left_by_a_crashed_run_is_repaired_and_the_turn_records_it():
    crashed = run_production(ScriptedLLM([tool_reply(("get_order", {"order_id": "A123"}))]),
                             support_chat.QUESTIONS[0], support_chat.make_tools(),
                             config=AgentConfig(max_steps=1)).messages[:2]
    session = support_session(messages=crashed)
    session.send("Are you still there? What does order A123 cost in total with 18% GST?")
    call_id = crashed[1]["content"][-1]["id"]
    assert session.turns[0].repaired == [call_id]
    assert session.messages[2]["content"][0] == {"type": "tool_result", "tool_use_id": call_id,
                                                 "content": UNANSWERED_RESULT, "is_error": True}
    assert messages_problems(session.messages) == []


def test_a_turn_whose_run_raises_leaves_the_session_as_it_was(two_turns):
    session, _, _ = two_turns
    broken = Session(ScriptedLLM([]), messages=session.messages, turns=session.turns)
    before = (list(broken.messages), list(broken.turns))
    with pytest.raises(ScriptExhausted):
        broken.send("Hello?")
    assert (broken.messages, broken.turns) == before


def test_a_turn_needs_text_and_a_session_needs_a_real_history():
    with pytest.raises(ValueError, match="needs some text"):
        support_session().send("  ")
    with pytest.raises(ValueError, match=r"Session\(messages=\.\.\.\): message 0"):
        support_session(messages=[{"role": "robot", "content": "hi"}])


def test_a_turn_round_trips_through_its_dict(two_turns):
    session, _, _ = two_turns
    for turn in session.turns:
        assert Turn.from_dict(turn.to_dict()) == turn


def test_the_table_has_a_row_per_turn_and_the_sessions_totals(two_turns):
    session, _, _ = two_turns
    lines = session.table().splitlines()
    assert lines[0].split()[:2] == ["turn", "steps"]
    assert len(lines) == 4
    assert lines[-1] == (f"session two-turns: 2 turns, {session.usage.total_tokens:,} tokens, "
                         f"{session.cost_usd:.4f} USD")
    assert "user: I want to return one of the keyboards." in session.transcript()


def test_a_new_session_has_no_turns_and_zero_totals():
    session = support_session()
    assert (session.turns, session.usage, session.cost_usd) == ([], Usage(), 0.0)
    assert session.id.startswith("session-")


@tool(needs_approval=True)
def refund(order_id: str) -> str:
    """Refund an order in full.

    Args:
        order_id: the order to refund.
    """
    return f"refunded {order_id}"


def refund_llm() -> ScriptedLLM:
    return ScriptedLLM([tool_reply(("refund", {"order_id": "A123"})), text_reply("Refunded."),
                        text_reply("You are welcome.")])


def test_a_paused_turn_without_a_checkpoint_ran_nothing_and_the_next_turn_says_so():
    session = Session(refund_llm(), [refund])
    paused = session.send("Refund A123, please.")
    assert paused.stop_cause is StopCause.AWAITING_APPROVAL
    session.send("Never mind.")
    results = session.messages[2]["content"]
    assert results[0] == {"type": "tool_result", "tool_use_id": paused.pending[0]["id"],
                          "content": NOT_APPROVED_RESULT, "is_error": True}
    assert session.turns[1].repaired == [paused.pending[0]["id"]]


def test_a_paused_turn_with_a_checkpoint_must_be_resumed_before_the_next(tmp_path):
    session = Session(refund_llm(), [refund], config=AgentConfig(checkpoint_dir=str(tmp_path)))
    paused = session.send("Refund A123, please.")
    with pytest.raises(SessionError, match=r"turn 1 is paused awaiting approval of refund"):
        session.send("Hello?")
    assert len(session.turns) == 1
    approve(paused.checkpoint, paused.pending[0]["id"])
    done = session.resume()
    assert done.stop_cause is StopCause.END_TURN and done.final_text == "Refunded."
    assert len(session.turns) == 1 and session.turns[0].stop_cause is StopCause.END_TURN
    assert session.turns[0].usage == done.usage
    assert session.send("Thanks!").final_text == "You are welcome."
    assert messages_problems(session.messages) == []


def test_resume_without_a_paused_turn_is_a_clear_error(two_turns):
    session, _, _ = two_turns
    with pytest.raises(SessionError, match="nothing to resume"):
        session.resume()


def test_a_cap_on_the_conversation_gives_each_turn_what_is_left_then_refuses_the_next():
    session = support_session(max_cost_usd=0.02)
    for q in support_chat.QUESTIONS[:2]:
        session.send(q)
    spent = session.cost_usd
    assert [t.stop_cause for t in session.turns] == [StopCause.END_TURN] * 2 and spent < 0.02
    third = session.send(support_chat.QUESTIONS[2])      # what is left is its budget
    assert third.stop_cause is StopCause.COST_BUDGET
    assert session.cost_usd >= 0.02
    before = len(session.messages)
    with pytest.raises(SessionError, match=r"spent 0\.0\d+ USD, its max_cost_usd is 0\.02; "
                                           r"nothing was sent"):
        session.send(support_chat.QUESTIONS[3])
    assert len(session.messages) == before and len(session.turns) == 3


def test_a_cap_keeps_a_smaller_budget_of_the_config_and_must_be_positive():
    session = support_session(max_cost_usd=1.0,
                              config=AgentConfig(max_steps=4, cost_budget_usd=0.001))
    assert session._turn_config().cost_budget_usd == 0.001
    assert support_session()._turn_config() is support_chat.CONFIG
    for bad in (0, -1.0, "1", True):
        with pytest.raises(ValueError, match="max_cost_usd"):
            support_session(max_cost_usd=bad)


def test_a_stored_session_loaded_with_a_cap_counts_what_it_spent_before(tmp_path):
    from primer.harness.sessions.store import SessionStore
    store = SessionStore(tmp_path)
    chat = store.new(support_chat.make_llm(), support_chat.make_tools(), session_id="s",
                     system=support_chat.SYSTEM, config=support_chat.CONFIG)
    chat.send(support_chat.QUESTIONS[0])
    later = store.load("s", support_chat.make_llm(), support_chat.make_tools(),
                       config=support_chat.CONFIG, max_cost_usd=chat.cost_usd)
    with pytest.raises(SessionError, match="nothing was sent"):
        later.send(support_chat.QUESTIONS[1])


class CountingLLM:
    """The support chat's model, counting the calls that reach it."""

    def __init__(self) -> None:
        self.llm, self.calls = support_chat.make_llm(), 0

    def __call__(self, **request):
        self.calls += 1
        return self.llm(**request)


def counted_session(**kw) -> tuple[Session, CountingLLM]:
    llm = CountingLLM()
    return Session(llm, support_chat.make_tools(), system=support_chat.SYSTEM,
                   config=kw.pop("config", support_chat.CONFIG), **kw), llm


def refused(session: Session, llm: CountingLLM, cap: str) -> SessionCapReached:
    """Send the next question, which the cap ``cap`` must refuse before anything is sent."""
    before = (len(session.messages), len(session.turns), llm.calls)
    with pytest.raises(SessionCapReached) as e:
        session.send(support_chat.QUESTIONS[len(session.turns)])
    assert (len(session.messages), len(session.turns), llm.calls) == before
    assert e.value.cap == cap and session.cap_reached == cap
    assert "nothing was sent. Start a new session" in str(e.value)
    assert "or raise the cap" in str(e.value)
    return e.value


def test_max_turns_refuses_the_turn_after_the_last_one_and_names_the_cap():
    session, llm = counted_session(max_turns=2)
    for question in support_chat.QUESTIONS[:2]:
        assert session.cap_reached is None
        assert session.send(question).stop_cause is StopCause.END_TURN
    e = refused(session, llm, "max_turns")
    assert (e.limit, e.spent) == (2, 2)
    assert str(e).startswith("session " + session.id + " has had 2 turns, its max_turns is 2;")
    session.max_turns = 3                                  # raising the cap lets it go on
    assert session.send(support_chat.QUESTIONS[2]).stop_cause is StopCause.END_TURN


def totals(n: int) -> list[int]:
    """The session's tokens after each of the first ``n`` support questions, uncapped."""
    session = support_session()
    return [session.send(q) and session.usage.total_tokens for q in support_chat.QUESTIONS[:n]]


def test_max_tokens_total_reached_exactly_lets_the_turn_finish_and_refuses_the_next():
    first, second = totals(2)
    session, llm = counted_session(max_tokens_total=second)
    assert session._turn_config().token_budget == second    # smaller than the config's
    session.send(support_chat.QUESTIONS[0])
    assert session._turn_config().token_budget == second - first   # what is left
    session.send(support_chat.QUESTIONS[1])
    assert [(t.stop_cause, t.cap) for t in session.turns] == [(StopCause.END_TURN, None)] * 2
    e = refused(session, llm, "max_tokens_total")
    assert (e.limit, e.spent) == (second, second)
    assert f"has used {second:,} tokens, its max_tokens_total is {second:,};" in str(e)


def test_max_tokens_total_can_be_passed_by_one_call_and_the_turn_names_the_cap():
    first, _ = totals(2)
    session, llm = counted_session(max_tokens_total=first + 100)
    session.send(support_chat.QUESTIONS[0])
    turn = session.send(support_chat.QUESTIONS[1])         # a budget of 100 tokens left
    assert turn.stop_cause is StopCause.TOKEN_BUDGET and len(turn.steps) == 1
    assert session.turns[-1].cap == "max_tokens_total"
    assert session.usage.total_tokens > first + 100        # one call's overshoot
    e = refused(session, llm, "max_tokens_total")
    assert e.spent == session.usage.total_tokens


def test_a_turn_stopped_by_its_own_smaller_budget_names_no_cap():
    session, _ = counted_session(max_tokens_total=100_000, max_cost_usd=10.0,
                                 config=AgentConfig(token_budget=600, cost_budget_usd=0.001))
    assert session.send(support_chat.QUESTIONS[0]).stop_cause in (StopCause.TOKEN_BUDGET,
                                                                  StopCause.COST_BUDGET)
    assert session.turns[0].cap is None and session.cap_reached is None


def test_max_cost_usd_names_its_cap_limit_and_spend():
    session, llm = counted_session(max_cost_usd=0.02)
    for question in support_chat.QUESTIONS[:3]:
        session.send(question)
    assert [t.cap for t in session.turns] == [None, None, "max_cost_usd"]
    e = refused(session, llm, "max_cost_usd")
    assert (e.limit, e.spent) == (0.02, session.cost_usd)


def test_the_turns_cap_is_named_first_when_several_are_used_up():
    session, llm = counted_session(max_turns=1, max_tokens_total=100, max_cost_usd=0.0001)
    session.send(support_chat.QUESTIONS[0])
    assert refused(session, llm, "max_turns").limit == 1


@pytest.mark.parametrize("cap, bad", [("max_turns", 0), ("max_turns", 1.5), ("max_turns", "2"),
                                      ("max_turns", True), ("max_tokens_total", -1),
                                      ("max_tokens_total", 10.0), ("max_cost_usd", 0),
                                      ("max_cost_usd", float("inf")),
                                      ("max_cost_usd", float("nan"))])
def test_a_cap_that_cannot_be_one_is_refused_by_name(cap, bad):
    with pytest.raises(ValueError, match=f"Session: {cap} is a "):
        support_session(**{cap: bad})


@pytest.mark.parametrize("cap, bad", [("max_turns", float("nan")), ("max_turns", "3"),
                                      ("max_turns", -1), ("max_tokens_total", float("nan")),
                                      ("max_tokens_total", -5), ("max_cost_usd", float("nan")),
                                      ("max_cost_usd", float("inf")), ("max_cost_usd", "1"),
                                      ("max_cost_usd", -1.0)])
def test_a_cap_set_after_the_session_was_made_is_checked_like_one_given_to_it(cap, bad):
    session = support_session(max_turns=2, max_tokens_total=10**6, max_cost_usd=10.0)
    session.send(support_chat.QUESTIONS[0])
    with pytest.raises(ValueError, match=f"Session: {cap} is a .* above 0, or None, not "):
        setattr(session, cap, bad)
    assert session.caps == {"max_turns": 2, "max_tokens_total": 10**6, "max_cost_usd": 10.0}
    session.max_turns = 1  # a good value is taken, and holds
    with pytest.raises(SessionCapReached, match="max_turns is 1"):
        session.send(support_chat.QUESTIONS[1])


def test_a_turn_keeps_the_cap_that_ended_it_through_its_dict():
    session, _ = counted_session(max_cost_usd=0.02)
    for question in support_chat.QUESTIONS[:3]:
        session.send(question)
    turn = session.turns[-1]
    assert Turn.from_dict(turn.to_dict()) == turn and turn.cap == "max_cost_usd"
    older = {k: v for k, v in turn.to_dict().items() if k != "cap"}   # a record from before
    assert Turn.from_dict(older).cap is None
    with pytest.raises(ValueError, match="not one of max_turns"):
        Turn.from_dict({**turn.to_dict(), "cap": "max_fun"})


def test_a_resumed_turn_runs_with_the_budget_it_started_with_and_names_the_cap(tmp_path):
    llm = ScriptedLLM([tool_reply(("refund", {"order_id": "A123"})),
                       tool_reply(("refund", {"order_id": "B456"})), text_reply("Refunded.")])
    session = Session(llm, [refund], config=AgentConfig(checkpoint_dir=str(tmp_path)),
                      max_turns=1, max_tokens_total=300)
    paused = session.send("Refund A123, please.")
    assert paused.usage.total_tokens < 300
    approve(paused.checkpoint, paused.pending[0]["id"])
    done = session.resume()                               # not a second turn for max_turns
    assert done.stop_cause is StopCause.TOKEN_BUDGET and done.usage.total_tokens > 300
    assert len(session.turns) == 1 and session.turns[0].cap == "max_tokens_total"
    with pytest.raises(SessionCapReached, match="max_turns is 1"):
        session.send("Thanks!")
