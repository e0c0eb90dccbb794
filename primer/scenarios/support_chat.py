"""The order desk as a conversation: a customer's questions that build on earlier answers.

The tools are the order world's (:mod:`primer.scenarios.orders`: ``get_order``,
``calculator``). The scripted support model reads the whole conversation, as a real model
does: the question is the latest user text, and what it may use is everything before it,
its own earlier answers included. It understands three kinds of question:

* a total: "What does order A123 cost in total with 18% GST?" It looks the order up
  (unless an earlier turn already did), computes unit price × quantity × 1.18 and answers
  "Order A123 costs 5900.0 rupees in total with 18% GST.";
* a return: "I want to return one of the keyboards. How much do I get back?" It names no
  order, so the model takes the looked-up order whose item the question names, else the
  order its last answer was about, computes one unit with GST from that order's price, and
  answers. With no order in the conversation (a fresh run) it asks which order is meant;
* both together: "What do both orders come to together?" It adds the totals of its earlier
  answers with the calculator.

Anything else gets a short answer saying what it can help with. :data:`QUESTIONS` is a
conversation of five turns; lesson 16 runs it as a
:class:`~primer.harness.sessions.session.Session`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from primer.loop.config import AgentConfig
from primer.loop.messages import Message, text_of
from primer.loop.model import ScriptedLLM

from .orders import GST_RATE, SYSTEM, make_tools
from .policy import Action, Observation, action_reply, all_observations

__all__ = ["CONFIG", "QUESTIONS", "SYSTEM", "decide", "make_llm", "make_tools"]

#: A customer's five questions, each answerable only with what came before it.
QUESTIONS = (
    "What does order A123 cost in total with 18% GST?",
    "I want to return one of the keyboards. How much do I get back?",
    "What does order B456 cost in total with 18% GST?",
    "And if I return that one instead?",
    "What do both orders come to together?",
)

#: Limits per turn: each turn is one run of the loop.
CONFIG = AgentConfig(max_steps=4, token_budget=20_000)

_ORDER_ID = re.compile(r"\border ([A-Z]\d{3})\b")
_ANSWERED_TOTAL = re.compile(r"Order ([A-Z]\d{3}) costs ([\d.]+) rupees in total")


def _question(messages: list[Message]) -> tuple[int, str]:
    """The index and text of the latest user message that holds text: the question."""
    for k in range(len(messages) - 1, -1, -1):
        m = messages[k]
        if m.get("role") == "user":
            text = text_of(m.get("content", "")).strip()
            if text:
                return k, text
    return 0, ""


def _known_orders(messages: list[Message]) -> dict[str, dict[str, Any]]:
    """Orders the conversation has looked up so far: id -> the ``get_order`` result."""
    orders: dict[str, dict[str, Any]] = {}
    for o in all_observations(messages):
        if o.name == "get_order" and not o.is_error:
            order = json.loads(o.content)
            orders[order["order_id"]] = order
    return orders


def _answers(messages: list[Message]) -> list[str]:
    """The text of every assistant message, in order (the model's earlier answers)."""
    return [text_of(m.get("content", "")) for m in messages if m.get("role") == "assistant"]


def decide(messages: list[Message]) -> Action:
    """The support model's next action, from the whole conversation ``messages``.

    The question is the latest user text (:func:`_question`); the tool results after it are
    this turn's work so far; everything before it is the conversation's memory. Returns an
    action dict (``{"tool", "input", "thought"}`` or ``{"answer"}``).
    """
    k, question = _question(messages)
    earlier, now = messages[:k], all_observations(messages[k:])
    last = now[-1] if now else None
    if last is not None and last.is_error:
        return {"answer": f"I could not finish that: {last.content}"}
    asked = _ORDER_ID.search(question)
    if asked:
        return _total(asked.group(1), {**_known_orders(earlier), **_known_orders(messages)},
                      last)
    lowered = question.lower()
    if "return" in lowered or "refund" in lowered:
        return _refund(lowered, earlier, _known_orders(messages), last)
    if "together" in lowered or "both" in lowered:
        return _together(earlier, last)
    return {"answer": "I can look up an order's total with GST and work out what a return "
                      "refunds. Which order is it about?"}


def _total(order_id: str, orders: dict[str, dict[str, Any]], last: Observation | None) -> Action:
    if last is not None and last.name == "calculator":
        return {"answer": f"Order {order_id} costs {last.content} rupees in total with 18% GST."}
    if order_id not in orders:
        return {"thought": f"I need order {order_id}'s price and quantity.",
                "tool": "get_order", "input": {"order_id": order_id}}
    o = orders[order_id]
    return {"thought": "Total = unit price × quantity × (1 + GST).", "tool": "calculator",
            "input": {"expression": f"{o['unit_price']} * {o['quantity']} * {1 + GST_RATE}"}}


def _refund(question: str, earlier: list[Message], orders: dict[str, dict[str, Any]],
            last: Observation | None) -> Action:
    named = [o for o in orders.values() if o["item"] in question.lower()]
    about = [m.group(1) for text in _answers(earlier) for m in _ANSWERED_TOTAL.finditer(text)]
    if len(named) == 1:
        o = named[0]
    elif about and about[-1] in orders:
        o = orders[about[-1]]
    else:
        return {"answer": "Which order is it? Please give me the order id, for example A123."}
    if last is not None and last.name == "calculator":
        return {"answer": f"Returning one {o['item']} from order {o['order_id']} refunds "
                          f"{last.content} rupees: its unit price, {o['unit_price']} rupees, "
                          f"plus 18% GST."}
    return {"thought": f"One {o['item']} of order {o['order_id']}, with GST.",
            "tool": "calculator", "input": {"expression": f"{o['unit_price']} * {1 + GST_RATE}"}}


def _together(earlier: list[Message], last: Observation | None) -> Action:
    totals: dict[str, str] = {}
    for text in _answers(earlier):
        totals.update(_ANSWERED_TOTAL.findall(text))
    if len(totals) < 2:
        return {"answer": "So far we have talked about one order; which other one should I add?"}
    if last is not None and last.name == "calculator":
        parts = " and ".join(f"{k} {v}" for k, v in totals.items())
        return {"answer": f"Your orders come to {last.content} rupees together with GST "
                          f"({parts})."}
    return {"thought": "Add the totals I gave earlier.", "tool": "calculator",
            "input": {"expression": " + ".join(totals.values())}}


def make_llm() -> ScriptedLLM:
    """A fresh scripted support model (see :func:`decide`); one per conversation, so its
    ``tool_use`` ids (``toolu_<call>_<k>``) stay unique across the turns."""
    return ScriptedLLM(lambda messages: action_reply(decide(messages)), name="support model")
