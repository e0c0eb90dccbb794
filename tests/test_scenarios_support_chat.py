"""The order desk as a conversation: each question answered from what came before it."""

from __future__ import annotations

from primer.harness.production import run_production
from primer.harness.sessions.session import Session
from primer.loop.config import AgentConfig
from primer.loop.messages import user_message
from primer.loop.state import StopCause
from primer.scenarios import support_chat
from primer.scenarios.support_chat import QUESTIONS, decide


def conversation(questions) -> Session:
    session = Session(support_chat.make_llm(), support_chat.make_tools(),
                      system=support_chat.SYSTEM, config=support_chat.CONFIG)
    for q in questions:
        session.send(q)
    return session


def test_the_five_questions_are_answered_each_from_the_turns_before_it():
    session = conversation(QUESTIONS)
    assert [t.final_text for t in session.turns] == [
        "Order A123 costs 5900.0 rupees in total with 18% GST.",
        "Returning one keyboard from order A123 refunds 2950.0 rupees: its unit price, "
        "2500 rupees, plus 18% GST.",
        "Order B456 costs 12980.0 rupees in total with 18% GST.",
        "Returning one monitor from order B456 refunds 12980.0 rupees: its unit price, "
        "11000 rupees, plus 18% GST.",
        "Your orders come to 18880.0 rupees together with GST (A123 5900.0 and B456 12980.0)."]
    assert [t.stop_cause for t in session.turns] == [StopCause.END_TURN] * 5


def test_an_order_already_looked_up_is_not_looked_up_again():
    session = conversation([QUESTIONS[0], QUESTIONS[0]])
    assert [e.name for e in session.last_result.executions] == ["calculator"]
    assert session.turns[1].final_text == session.turns[0].final_text


def test_a_return_that_names_the_item_takes_that_order_not_the_last_one_discussed():
    session = conversation([QUESTIONS[0], QUESTIONS[2], QUESTIONS[1]])
    assert session.turns[-1].final_text.startswith(
        "Returning one keyboard from order A123 refunds 2950.0 rupees")


def test_a_return_with_no_order_in_the_conversation_gets_a_question_back():
    action = decide([user_message(QUESTIONS[3])])
    assert action == {"answer": "Which order is it? Please give me the order id, for "
                                "example A123."}


def test_both_together_with_one_order_known_asks_for_the_other():
    session = conversation([QUESTIONS[0], QUESTIONS[4]])
    assert session.turns[-1].final_text.startswith("So far we have talked about one order")


def test_a_failed_tool_is_reported_to_the_customer_with_its_error():
    result = run_production(support_chat.make_llm(), "What does order Z999 cost in total?",
                            support_chat.make_tools(), config=AgentConfig(max_steps=3))
    assert result.final_text.startswith("I could not finish that: No order with id 'Z999'")


def test_a_question_it_does_not_know_gets_what_it_can_help_with():
    assert decide([user_message("Hello!")])["answer"].startswith("I can look up an order's")
