"""The PTO world: "How many PTO days does alice have left, and what rolls over?"

Two read-only tools:

* ``search_kb(query)``: word-overlap search over a small HR knowledge base (:data:`KB`);
  document ``hr-001`` says unused PTO up to 5 days rolls over.
* ``get_pto_balance(employee, as_of)``: days of PTO left on a date, from a small leave
  ledger (20 days a calendar year minus days taken on or before ``as_of``). ``as_of`` must
  be ``YYYY-MM-DD``; anything else raises the ToolError "as_of must be YYYY-MM-DD ...".
  alice has 12 days left as of 2026-09-25.

Demo ``pto`` (the happy path, parallel): the model asks for both tools in ONE reply (two
``tool_use`` blocks, independent of each other), the harness runs them together and returns
both results in one user message, and the model answers citing ``[hr-001]``. Two model
calls, two tool calls, stop ``end_turn``.

:func:`make_llm` also takes a ``mistake`` (``"unknown_tool"``, ``"bad_args"``,
``"bad_date"``) for the errors-as-results lesson: the first balance request is broken in
that way, the model reads the error result and sends a corrected call on the next step.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from typing import Any

from primer.loop.config import AgentConfig
from primer.loop.messages import Message
from primer.loop.model import ScriptedLLM, tool_reply
from primer.loop.tools import Tool, ToolError, tool

from . import Scenario, register
from .policy import all_observations, call_number

TASK = "How many PTO days does alice have left, and what rolls over?"
SYSTEM = ("You are an HR assistant. Answer from the knowledge base and the leave records "
          "only, and cite every document you use as [doc-id].")
AS_OF = "2026-09-25"
PTO_DAYS_PER_YEAR = 20

#: The HR knowledge base: doc id → title and text.
KB: dict[str, dict[str, str]] = {
    "hr-001": {"title": "PTO rollover",
               "text": "Unused PTO up to 5 days rolls over to the next calendar year; "
                       "days above 5 lapse on 31 December."},
    "hr-002": {"title": "PTO accrual",
               "text": "Full-time employees get 20 PTO days per calendar year, credited on "
                       "1 January."},
    "hr-003": {"title": "Sick leave",
               "text": "Sick leave is separate from PTO: up to 10 days a year, with a "
                       "doctor's note after 3 days in a row."},
    "hr-004": {"title": "Public holidays",
               "text": "Public holidays are published each December and never count "
                       "against PTO."},
    "hr-005": {"title": "Parental leave",
               "text": "Parents get 26 weeks of paid leave, separate from PTO."},
}

#: Leave taken: employee → [(first day, days taken)].
LEAVE: dict[str, list[tuple[str, int]]] = {
    "alice": [("2026-03-09", 3), ("2026-07-13", 5), ("2026-12-21", 2)],
    "ravi": [("2026-05-04", 10)],
}

_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


@tool
def search_kb(query: str) -> Any:
    """Search the HR knowledge base (policies on PTO, sick leave, holidays, parental leave).
    Use it for any question about a rule; cite the ids of the documents you use.

    Args:
        query: a few keywords, e.g. "PTO rollover".
    """
    asked = _words(query)
    scored = sorted(((len(asked & _words(d["title"] + " " + d["text"])), doc_id)
                     for doc_id, d in KB.items()), key=lambda s: (-s[0], s[1]))
    hits = [{"id": doc_id, **KB[doc_id]} for score, doc_id in scored[:2] if score > 0]
    return hits or f"No documents match {query!r}. Try other keywords, e.g. 'PTO rollover'."


@tool
def get_pto_balance(employee: str, as_of: str) -> dict:
    """Days of PTO an employee has left on a given date. Use it for any question about one
    person's remaining PTO.

    Args:
        employee: the employee's login name, e.g. "alice".
        as_of: the date to compute the balance on, as YYYY-MM-DD.
    """
    try:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", as_of):
            raise ValueError
        day = dt.date.fromisoformat(as_of)
    except ValueError:
        raise ToolError(f"as_of must be YYYY-MM-DD, a real date such as '{AS_OF}' "
                        f"(got {as_of!r}).") from None
    if employee not in LEAVE:
        raise ToolError(f"No employee {employee!r}. Use the login name, e.g. 'alice'.")
    taken = sum(days for start, days in LEAVE[employee]
                if dt.date.fromisoformat(start).year == day.year
                and dt.date.fromisoformat(start) <= day)
    return {"employee": employee, "as_of": as_of, "days_left": PTO_DAYS_PER_YEAR - taken,
            "days_taken": taken}


def make_tools() -> list[Tool]:
    """The PTO world's tools: ``[search_kb, get_pto_balance]`` (read-only, stateless)."""
    return [search_kb, get_pto_balance]


#: The broken first balance request for each ``mistake`` (name, input).
MISTAKES: dict[str, tuple[str, dict[str, Any]]] = {
    "unknown_tool": ("get_balance", {"employee": "alice", "as_of": AS_OF}),
    "bad_args": ("get_pto_balance", {"employee": "alice", "date": AS_OF}),
    "bad_date": ("get_pto_balance", {"employee": "alice", "as_of": "25/09/2026"}),
}
GOOD_BALANCE_CALL = ("get_pto_balance", {"employee": "alice", "as_of": AS_OF})
KB_CALL = ("search_kb", {"query": "PTO rollover"})


def policy(mistake: str | None = None) -> Callable[[list[Message]], Any]:
    """The PTO model as a :class:`ScriptedLLM` policy.

    Call 1 asks for ``search_kb`` and the balance in one reply (two ``tool_use`` blocks);
    with a ``mistake`` (a key of :data:`MISTAKES`) the balance request is broken. While the
    last turn holds an error, it sends the corrected balance call. Once it has a balance and
    a document, it answers from them, citing the document's id.
    """
    if mistake is not None and mistake not in MISTAKES:
        raise ValueError(f"unknown mistake {mistake!r}; choose one of {', '.join(MISTAKES)}")

    def respond(messages: list[Message]) -> Any:
        if call_number(messages) == 1:
            balance = MISTAKES[mistake] if mistake else GOOD_BALANCE_CALL
            return tool_reply(KB_CALL, balance, text="The balance and the rollover rule are "
                              "independent lookups, so I ask for both at once.")
        seen = all_observations(messages)
        docs = [o for o in seen if o.name == "search_kb" and o.content.startswith("[")]
        balances = [o for o in seen if o.name == "get_pto_balance" and not o.is_error]
        if not balances:
            return tool_reply(GOOD_BALANCE_CALL, text="The balance request came back as an "
                              "error; sending the call its message asks for.")
        if not docs:
            return tool_reply(KB_CALL)
        b = json.loads(balances[-1].content)
        doc = json.loads(docs[-1].content)[0]
        return (f"{b['employee']} has {b['days_left']} PTO days left as of {b['as_of']}. "
                f"{doc['text']} [{doc['id']}]")

    return respond


def make_llm(mistake: str | None = None) -> ScriptedLLM:
    """A fresh scripted PTO model (see :func:`policy`)."""
    return ScriptedLLM(policy(mistake), name=f"PTO model ({mistake or 'no mistake'})")


register(Scenario(name="pto", description="both tools in one turn, answer cites [hr-001]",
                  task=TASK, make_tools=make_tools, make_llm=make_llm,
                  config=AgentConfig(), system=SYSTEM))
