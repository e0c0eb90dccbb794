"""A history made safe to send again: the one repair, the shape check, the next user turn."""

from __future__ import annotations

import copy

import pytest

from primer.harness.request_check import InvalidRequest, check_messages
from primer.loop.messages import (
    UNANSWERED_RESULT,
    assistant_message,
    history_problem,
    repair_history,
    text_block,
    tool_result_block,
    tool_use_block,
    tool_use_ids,
    unanswered_tool_uses,
    user_message,
    with_new_turn,
)

ASK = user_message("What does order A123 cost?")
CALL_1 = tool_use_block("toolu_1", "get_order", {"order_id": "A123"})
CALL_2 = tool_use_block("toolu_2", "calculator", {"expression": "2 * 2"})
TWO_CALLS = assistant_message([text_block("Looking both up."), CALL_1, CALL_2])
RESULT_1 = tool_result_block("toolu_1", '{"unit_price": 2500}')
RESULT_2 = tool_result_block("toolu_2", "4")
ANSWER = assistant_message([text_block("It costs 5900.0 rupees.")])


def crashed() -> list[dict]:
    """A run that died while its two calls were running: the reply, and no results."""
    return [ASK, TWO_CALLS]


def test_a_history_ending_in_unanswered_calls_gets_one_error_result_per_call_in_order():
    repaired = repair_history(crashed())
    *kept, results = repaired.messages
    assert kept == crashed()
    assert results == user_message([tool_result_block("toolu_1", UNANSWERED_RESULT, True),
                                    tool_result_block("toolu_2", UNANSWERED_RESULT, True)])
    assert repaired.repaired == [CALL_1, CALL_2]
    assert repaired.repaired_ids == ["toolu_1", "toolu_2"]


def test_the_repair_text_says_the_outcome_is_unknown_not_that_the_call_did_not_run():
    assert "unknown" in UNANSWERED_RESULT and "did not run" not in UNANSWERED_RESULT


def test_the_provider_refuses_the_crashed_history_and_accepts_the_repaired_one():
    follow_up = user_message("Are you there?")
    with pytest.raises(InvalidRequest, match="toolu_1, toolu_2"):
        check_messages([*crashed(), follow_up])
    check_messages(with_new_turn(repair_history(crashed()).messages, "Are you there?"))


def test_a_partly_answered_reply_gets_only_the_missing_result_results_first_then_text():
    half = user_message([RESULT_2, text_block("and one more thing")])
    repaired = repair_history([ASK, TWO_CALLS, half, ANSWER])
    assert repaired.messages[2]["content"] == [
        tool_result_block("toolu_1", UNANSWERED_RESULT, True), RESULT_2,
        text_block("and one more thing")]
    assert repaired.repaired == [CALL_1]
    assert repaired.messages[3] is ANSWER


def test_an_unanswered_reply_in_the_middle_gets_a_results_message_before_the_next_reply():
    history = [ASK, TWO_CALLS, ANSWER]
    repaired = repair_history(history)
    assert [m["role"] for m in repaired.messages] == ["user", "assistant", "user", "assistant"]
    assert unanswered_tool_uses(repaired.messages) == []
    check_messages(repaired.messages)


def test_a_reason_can_be_given_for_the_error_results():
    repaired = repair_history(crashed(), "Not run: cancelled by the user.")
    assert {b["content"] for b in repaired.messages[-1]["content"]} == {
        "Not run: cancelled by the user."}


def test_a_history_that_needs_nothing_comes_back_with_the_same_message_objects():
    history = [ASK, TWO_CALLS, user_message([RESULT_1, RESULT_2]), ANSWER]
    repaired = repair_history(history)
    assert repaired.repaired == []
    assert repaired.messages is not history
    assert all(a is b for a, b in zip(repaired.messages, history, strict=True))


def test_repairing_never_changes_the_callers_list_and_repairing_twice_changes_nothing():
    history = [ASK, TWO_CALLS, user_message([RESULT_2, text_block("more")])]
    before = copy.deepcopy(history)
    once = repair_history(history)
    assert history == before
    twice = repair_history(once.messages)
    assert twice.messages == once.messages and twice.repaired == []


def test_unanswered_tool_uses_names_every_call_without_a_result_in_the_next_message():
    assert unanswered_tool_uses(crashed()) == ["toolu_1", "toolu_2"]
    assert unanswered_tool_uses([ASK, TWO_CALLS, user_message([RESULT_1])]) == ["toolu_2"]
    assert unanswered_tool_uses([ASK, TWO_CALLS, user_message([RESULT_1, RESULT_2])]) == []


@pytest.mark.parametrize(("history", "says"), [
    ("hello", "a list of messages, not a str"),
    ({"role": "user"}, "not a dict"),
    ([ASK, "hi"], "message 1: a str, not a message dict"),
    ([{"role": "system", "content": "x"}], "message 0: role 'system'"),
    ([{"role": "user", "content": 7}], "message 0: content of type int"),
    ([{"role": "user", "content": [{"text": "no type"}]}], "block 0 is not a dict with a"),
    ([ASK, assistant_message([{"type": "tool_use", "name": "x", "input": {}}])],
     "message 1: block 0: a tool_use needs a non-empty string id"),
    ([user_message([{"type": "tool_result", "content": "x"}])],
     "a tool_result needs a string tool_use_id"),
])
def test_history_problem_names_the_first_bad_message(history, says):
    assert says in history_problem(history)


def test_a_well_formed_history_has_no_problem():
    assert history_problem([]) is None
    assert history_problem([ASK, TWO_CALLS, user_message([RESULT_1, RESULT_2]), ANSWER]) is None


def test_the_next_turn_after_an_answer_is_a_new_user_message():
    history = [ASK, ANSWER]
    assert with_new_turn(history, "And B456?") == [ASK, ANSWER, user_message("And B456?")]
    assert history == [ASK, ANSWER]


def test_the_next_turn_after_results_joins_them_so_roles_alternate_and_results_stay_first():
    results = user_message([RESULT_1, RESULT_2])
    history = [ASK, TWO_CALLS, results]
    new = with_new_turn(history, "Still there?")
    assert new[-1] == user_message([RESULT_1, RESULT_2, text_block("Still there?")])
    assert results == user_message([RESULT_1, RESULT_2])  # the caller's message is not changed
    assert with_new_turn([ASK], "Hello?")[-1]["content"] == [
        text_block("What does order A123 cost?"), text_block("Hello?")]


def test_tool_use_ids_collects_every_id_the_history_used():
    assert tool_use_ids([ASK, TWO_CALLS, user_message([RESULT_1, RESULT_2]), ANSWER]) == {
        "toolu_1", "toolu_2"}
