"""The budget burner: a model that never stops searching, and the token budget that stops it.

The model asks ``search_notes`` a new question on every call and never answers; each search
returns a sizeable result (:data:`SNIPPETS_PER_RESULT` snippets of about
:data:`SNIPPET_CHARS` characters). Every call re-sends the whole history, so the tokens sent
per call climb step by step and the running total grows quadratically.

Demo ``burner``: a 12,000-token budget checked *after* each call (``budget_check="after"``)
with no step limit in the way (``max_steps`` 50). With the result sizes here the run stops on
``token_budget`` at call 11, the first call whose running total passes 12,000 (it is the
10-to-12-call range the course quotes as "about 11 calls"; ``tests/test_scenarios_burner.py``
pins it). :func:`per_call_tokens` gives the figures the cost lesson draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from primer.loop.config import AgentConfig
from primer.loop.messages import Message, text_of
from primer.loop.model import ScriptedLLM, tool_reply
from primer.loop.result import AgentResult
from primer.loop.steps import WRAP_UP_OPENING
from primer.loop.tools import Tool, tool

from . import Scenario, register
from .policy import call_number

TASK = "Find everything our notes say about agent loops. Be thorough."
SYSTEM = "You research questions in the team's notes with search_notes."
TOKEN_BUDGET = 12_000
SNIPPETS_PER_RESULT = 3
SNIPPET_CHARS = 140

TOPICS = ("stop reasons", "tool schemas", "retries", "budgets", "parallel calls", "traces",
          "checkpoints", "hand-offs", "loop detection", "context windows", "evals", "caching",
          "timeouts", "approval gates", "idempotency keys", "sub-agents")


@tool
def search_notes(query: str) -> list[str]:
    """Search the team's notes and return the best-matching snippets. Use it to find what
    the notes say about a topic.

    Args:
        query: what to look for, e.g. "stop reasons".
    """
    out = []
    for k in range(1, SNIPPETS_PER_RESULT + 1):
        text = f"[note {k} on {query}] " + "Meeting notes, drafts and links, " * 10
        out.append(text[:SNIPPET_CHARS])
    return out


def make_tools() -> list[Tool]:
    """The burner's one tool: ``[search_notes]``."""
    return [search_notes]


def policy(messages: list[Message]) -> Any:
    """Never satisfied: call ``n`` searches topic ``n`` (cycling with a round number). Asked
    for a wrap-up at a limit (:data:`~primer.loop.steps.WRAP_UP_OPENING`, tools off), it
    answers with the topics it searched and says the search was cut short."""
    n = call_number(messages)
    if WRAP_UP_OPENING in text_of(messages[-1]["content"]):
        found = [TOPICS[(k - 1) % len(TOPICS)] for k in range(1, n)]
        return (f"Partial answer: the notes I searched cover {', '.join(found)}. "
                f"I stopped before the other topics, so this is not everything.")
    topic = TOPICS[(n - 1) % len(TOPICS)]
    rnd = (n - 1) // len(TOPICS)
    query = topic if rnd == 0 else f"{topic} (round {rnd + 1})"
    return tool_reply(("search_notes", {"query": query}),
                      text="Not enough yet; one more search.")


def make_llm() -> ScriptedLLM:
    """A fresh scripted burner model."""
    return ScriptedLLM(policy, name="burner model")


CONFIG = AgentConfig(max_steps=50, token_budget=TOKEN_BUDGET, budget_check="after")

SCENARIO = register(Scenario(name="burner", description="keeps searching until the "
                             "12,000-token budget stops it", task=TASK, make_tools=make_tools,
                             make_llm=make_llm, config=CONFIG, system=SYSTEM))


@dataclass(frozen=True)
class CallTokens:
    """One model call of a run: ``call`` (1-based), ``sent`` (prompt tokens sent),
    ``output`` (tokens written), ``running_total`` (prompt + output tokens of the run so far).
    """

    call: int
    sent: int
    output: int
    running_total: int


def per_call_tokens(result: AgentResult | None = None) -> list[CallTokens]:
    """Tokens per call of a run (default: a fresh run of the ``burner`` demo).

    Takes the counts from each step's reported ``usage`` (estimated offline, characters / 4).
    """
    result = result if result is not None else SCENARIO.run()
    return [CallTokens(s.index, s.usage.prompt_tokens, s.usage.output_tokens,
                       s.total_usage.total_tokens) for s in result.steps]


def stop_call(rows: list[CallTokens], budget: int = TOKEN_BUDGET) -> int | None:
    """The first call whose running total passes ``budget``, or ``None`` if none does."""
    return next((r.call for r in rows if r.running_total > budget), None)

