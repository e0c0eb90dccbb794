"""The chat world of lesson 01: a model that knows only the list it is sent.

:func:`name_model` is a :class:`~primer.loop.model.ScriptedLLM` policy that answers from the
user turns of the message list and from nothing else, so it "remembers" a name only when the
harness sends the turn that gave it. :func:`one_shot` and :func:`with_memory` are two harnesses
around the same model: one sends each question on its own, the other keeps the conversation
and re-sends all of it on every call. :data:`QUESTIONS` is the lesson's six-question chat.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from primer.loop.messages import Message, assistant_message, text_of, user_message
from primer.loop.model import LLM, Reply

SYSTEM = "You are a friendly assistant."

#: Lesson 01's chat: the name comes first, the question about it fourth.
QUESTIONS = (
    "Hi, my name is Asha. I run a small shop that sells keyboards and monitors online.",
    "Customers keep asking when their orders will arrive. What should I tell them?",
    "Some orders are shipped in two parts. How do I explain that without confusing people?",
    "What is my name?",
    "Please draft a short reply to a customer whose keyboard arrived without its cable.",
    "Thanks! Summarise what we discussed in one sentence.",
)


def name_model(messages: list[Message]) -> str:
    """Answers from the user turns of the list it is sent, and from nothing else."""
    said = " ".join(text_of(m["content"]) for m in messages if m["role"] == "user")
    question = text_of(messages[-1]["content"]).lower()
    name = re.search(r"my name is (\w+)", said, re.IGNORECASE)
    if "what is my name" in question:
        if name is None:
            return "I don't know: nobody told me your name."
        return f"Your name is {name.group(1)}."
    if name is None:
        return "Noted."
    if "my name is" in question:
        return f"Nice to meet you, {name.group(1)}."
    return f"Noted, {name.group(1)}."


def one_shot(model: LLM, turns: Sequence[str]) -> list[Reply]:
    """Sends each question on its own: cheap, forgetful. One reply per turn."""
    return [model(system=SYSTEM, messages=[user_message(q)], tools=[], max_tokens=200)
            for q in turns]


def with_memory(model: LLM, turns: Sequence[str]) -> list[Reply]:
    """Keeps the whole conversation and re-sends it on every call. One reply per turn."""
    messages, replies = [], []
    for q in turns:
        messages.append(user_message(q))
        reply = model(system=SYSTEM, messages=messages, tools=[], max_tokens=200)
        messages.append(assistant_message(reply.content))
        replies.append(reply)
    return replies
