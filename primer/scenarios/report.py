"""Lesson 12's long report: a reader that fills the context window one page at a time.

:data:`read_page` returns about 350 tokens per page; :func:`reader` is a scripted model that
reads pages 1..``pages`` one call at a time (a short thought before each call), then answers.
"""

from __future__ import annotations

from primer.loop.messages import Message
from primer.loop.model import Reply, ScriptedLLM, tool_reply
from primer.loop.tools import tool

#: The window the lesson's reader runs in (tokens), small so that it fills in a few calls.
WINDOW = 4_000


@tool
def read_page(n: int) -> str:
    """Read page n of the quarterly report.

    Args:
        n: the page number, from 1.
    """
    return f"page {n}: revenue notes " + "figures and commentary " * 60


def reader(pages: int = 12) -> ScriptedLLM:
    """A model that reads pages 1..``pages`` one per call, then says the report is read."""
    calls = {"n": 0}

    def policy(messages: list[Message]) -> Reply | str:
        calls["n"] += 1
        if calls["n"] > pages:
            return "The report is read; revenue notes on every page."
        n = calls["n"]
        return tool_reply(("read_page", {"n": n}), text=f"Thought: read page {n}.")

    return ScriptedLLM(policy)
