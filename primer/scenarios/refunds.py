"""The refund world: a refund needs a person's approval, and runs exactly once.

A support agent is asked to refund a broken order. Three tools, built with ``@tool``:

* ``get_order(order_id)``: the order (item, amount in USD, customer id). Read-only.
* ``lookup_customer(customer_id)``: the customer's name and e-mail. Read-only.
* ``issue_refund(order_id, amount_usd, reason)``: side-effecting and gated
  (``needs_approval``). It takes an ``idempotency_key`` (filled in by the harness, derived
  from the ``tool_use`` id, never seen by the model) and writes the refund to a durable
  :class:`RefundLedger` (an SQLite file) that deduplicates by that key: the same key twice
  returns the first refund instead of paying again. It also refuses to refund an order
  more in total than was paid (a business check; exactly-once for one call comes from the
  key, which the ledger enforces atomically).

The scripted model (:func:`decide`) looks the order up; if the amount is within its authority
(:data:`REFUND_AUTHORITY_USD`) it asks for the refund and, in the same reply, for the
customer's contact details; if the amount is above it, it hands the task to a person with
``handoff_to_human``. After the refund call it answers from the result: refunded, or a person
rejected it (then it says so and proposes a replacement instead of retrying).

Demos: ``refund`` (order R-1001, 40 USD: pauses for approval) and ``refund-handoff``
(order R-2002, 1,800 USD: above the agent's authority, hands off).

The ledger file is ``$PRIMER_REFUND_LEDGER`` if set, else ``refund_ledger.sqlite`` in the
working directory, so a run and its resume in another process share one ledger. For crash
tests, ``$PRIMER_REFUND_DELAY_S`` (seconds) makes ``issue_refund`` wait before and after its
ledger write, widening the window in which a process can die mid-call.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from primer.agents import (
    HANDOFF_TOOL_NAME,
    AgentConfig,
    Reply,
    ScriptedLLM,
    Tool,
    ToolError,
    text_block,
    text_reply,
    tool,
)
from primer.agents.messages import Message, text_of, tool_use_block

from . import Scenario, register
from .policy import all_observations, call_number

#: The largest refund the agent may ask for (USD); above it the model hands off.
REFUND_AUTHORITY_USD = 500.0

LEDGER_ENV = "PRIMER_REFUND_LEDGER"
DELAY_ENV = "PRIMER_REFUND_DELAY_S"
DEFAULT_LEDGER = "refund_ledger.sqlite"

SYSTEM = (f"You are a support agent for an online shop. Look orders up with get_order before "
          f"acting. You may refund up to {REFUND_AUTHORITY_USD:,.2f} USD with issue_refund; a "
          f"person approves each refund. Above that amount, hand the case to a person with "
          f"{HANDOFF_TOOL_NAME}.")

ORDERS: dict[str, dict[str, Any]] = {
    "R-1001": {"order_id": "R-1001", "customer_id": "C-77", "item": "ceramic mug set",
               "amount_usd": 40.0, "status": "delivered, reported broken"},
    "R-2002": {"order_id": "R-2002", "customer_id": "C-88", "item": "espresso machine",
               "amount_usd": 1800.0, "status": "delivered, reported broken"},
    "R-1003": {"order_id": "R-1003", "customer_id": "C-88", "item": "glass teapot",
               "amount_usd": 65.0, "status": "delivered, reported broken"},
    "R-1004": {"order_id": "R-1004", "customer_id": "C-77", "item": "desk lamp",
               "amount_usd": 120.0, "status": "delivered, reported broken"},
}
CUSTOMERS: dict[str, dict[str, str]] = {
    "C-77": {"customer_id": "C-77", "name": "Priya Nair", "email": "priya@example.com"},
    "C-88": {"customer_id": "C-88", "name": "Tom Berg", "email": "tom@example.com"},
}


@dataclass(frozen=True)
class Refund:
    """One row of the ledger: ``refund_id``, the ``idempotency_key`` it was issued under,
    the order, the amount (USD) and the reason."""

    refund_id: str
    idempotency_key: str
    order_id: str
    amount_usd: float
    reason: str


class RefundLedger:
    """The shop's durable record of refunds: an SQLite file, one row per refund.

    :meth:`issue` deduplicates by idempotency key (a ``PRIMARY KEY`` column): a second
    request with a key already present pays nothing and returns the first refund. SQLite
    commits are atomic and durable, and it locks the file across processes, so two
    processes issuing with the same key still make one row. ``path`` is created by the first
    refund, so a run that never pays leaves no file behind. Each operation opens and closes its
    own connection, so no connection is ever shared between threads or inherited by a forked
    process.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection for one transaction (the table is created if missing): committed on
        success, rolled back on error, closed either way."""
        db = sqlite3.connect(self.path, timeout=30, isolation_level="IMMEDIATE")
        try:
            with db:
                db.execute("CREATE TABLE IF NOT EXISTS refunds (n INTEGER PRIMARY KEY "
                           "AUTOINCREMENT, idempotency_key TEXT NOT NULL UNIQUE, order_id TEXT "
                           "NOT NULL, amount_usd REAL NOT NULL, reason TEXT NOT NULL)")
                yield db
        finally:
            db.close()

    def issue(self, idempotency_key: str, order_id: str, amount_usd: float,
              reason: str) -> tuple[Refund, bool]:
        """Pay a refund once per key: returns ``(refund, duplicate)``.

        ``duplicate`` is ``True`` when the key was already in the ledger (nothing new paid).
        Raises ``ValueError`` for an empty key: without one a retry could pay twice.
        """
        if not idempotency_key:
            raise ValueError("issue_refund needs an idempotency key; the harness passes one")
        with self._connect() as db:
            cur = db.execute("INSERT OR IGNORE INTO refunds (idempotency_key, order_id, "
                             "amount_usd, reason) VALUES (?, ?, ?, ?)",
                             (idempotency_key, order_id, amount_usd, reason))
            duplicate = cur.rowcount == 0
            row = db.execute("SELECT n, idempotency_key, order_id, amount_usd, reason FROM "
                             "refunds WHERE idempotency_key = ?", (idempotency_key,)).fetchone()
        return _refund(row), duplicate

    def refunds(self, order_id: str | None = None) -> list[Refund]:
        """Every refund paid (for ``order_id`` only, if given), oldest first."""
        if not self.path.exists():
            return []
        query = "SELECT n, idempotency_key, order_id, amount_usd, reason FROM refunds"
        params: tuple[str, ...] = ()
        if order_id is not None:
            query, params = query + " WHERE order_id = ?", (order_id,)
        with self._connect() as db:
            rows = db.execute(query + " ORDER BY n", params).fetchall()
        return [_refund(r) for r in rows]


def _refund(row: tuple[Any, ...]) -> Refund:
    return Refund(f"rf-{row[0]:04d}", row[1], row[2], row[3], row[4])


def ledger_path() -> Path:
    """The ledger file: ``$PRIMER_REFUND_LEDGER``, else ``./refund_ledger.sqlite``."""
    return Path(os.environ.get(LEDGER_ENV) or DEFAULT_LEDGER)


def _delay() -> None:
    try:
        seconds = float(os.environ.get(DELAY_ENV) or 0)
    except ValueError:
        raise ToolError(f"{DELAY_ENV} must be a number of seconds") from None
    if seconds > 0:
        time.sleep(seconds)


def refund_tools(ledger: RefundLedger | str | Path | None = None, *,
                 check_total: bool = True) -> list[Tool]:
    """The refund world's tools, writing refunds to ``ledger`` (default :func:`ledger_path`).

    ``check_total=False`` turns off the business check that an order is never refunded more
    than was paid, so that only the idempotency key stands between a retried call and a
    second payment (the crash test does this, to test the key alone).
    """
    book = ledger if isinstance(ledger, RefundLedger) else RefundLedger(ledger or ledger_path())

    @tool
    def get_order(order_id: str) -> dict:
        """Look up a customer order by id: item, amount paid in USD, customer id, status.
        Use it before any refund.

        Args:
          order_id: the order id, like R-1001.
        """
        if order_id not in ORDERS:
            raise ToolError(f"no order {order_id!r}; order ids look like R-1001")
        return ORDERS[order_id]

    @tool
    def lookup_customer(customer_id: str) -> dict:
        """Look up a customer's name and e-mail by customer id (from get_order).

        Args:
          customer_id: the customer id, like C-77.
        """
        if customer_id not in CUSTOMERS:
            raise ToolError(f"no customer {customer_id!r}; take the customer_id from "
                            f"get_order")
        return CUSTOMERS[customer_id]

    @tool(side_effecting=True, needs_approval=True)
    def issue_refund(order_id: str, amount_usd: float, reason: str,
                     idempotency_key: str) -> dict:
        """Refund money to the customer of an order. It pays out real money and cannot be
        undone, so a person approves each call. Use it only after get_order, for at most the
        amount paid and at most your refund authority.

        Args:
          order_id: the order to refund, like R-1001.
          amount_usd: the amount to refund in USD.
          reason: why the refund is due, in a few words.
        """
        order = ORDERS.get(order_id)
        if order is None:
            raise ToolError(f"no order {order_id!r}; order ids look like R-1001")
        if not 0 < amount_usd <= order["amount_usd"]:
            raise ToolError(f"amount_usd must be more than 0 and at most the "
                            f"{order['amount_usd']:.2f} USD paid for {order_id}")
        if amount_usd > REFUND_AUTHORITY_USD:
            raise ToolError(f"{amount_usd:.2f} USD is above your refund authority of "
                            f"{REFUND_AUTHORITY_USD:.2f} USD; use {HANDOFF_TOOL_NAME}")
        earlier = sum(r.amount_usd for r in book.refunds(order_id)
                      if r.idempotency_key != idempotency_key) if check_total else 0.0
        if earlier + amount_usd > order["amount_usd"]:
            raise ToolError(f"order {order_id} has already been refunded {earlier:.2f} of the "
                            f"{order['amount_usd']:.2f} USD paid; at most "
                            f"{order['amount_usd'] - earlier:.2f} USD can still be refunded")
        _delay()
        refund, duplicate = book.issue(idempotency_key, order_id, amount_usd, reason)
        _delay()
        return {"refund_id": refund.refund_id, "order_id": order_id,
                "amount_usd": refund.amount_usd,
                "status": "already issued (same idempotency key)" if duplicate else "issued"}

    return [get_order, lookup_customer, issue_refund]


# ---------------------------------------------------------------- the scripted model


def _order_id(messages: list[Message]) -> str:
    m = re.search(r"\bR-\d+\b", text_of(messages[0]["content"]))
    return m.group(0) if m else "R-0000"


def decide(messages: list[Message]) -> Reply:
    """The refund agent's next reply, from the history (a :class:`ScriptedLLM` policy).

    Tool-use ids are built from the order id and the call number (``toolu_R1001_02_1``),
    so a run resumed in a new process, with a new model object, never reuses an id.
    """
    order_id = _order_id(messages)
    n = call_number(messages)

    def call(*calls: tuple[str, dict[str, Any]], thought: str) -> Reply:
        blocks = [text_block(thought)]
        for k, (name, args) in enumerate(calls, start=1):
            blocks.append(tool_use_block(f"toolu_{order_id.replace('-', '')}_{n:02d}_{k}",
                                         name, args))
        return Reply(blocks, "tool_use")

    seen = {o.name: o for o in all_observations(messages)}
    if "get_order" not in seen or seen["get_order"].is_error:
        return call(("get_order", {"order_id": order_id}),
                    thought="I will look the order up first.")
    order = json.loads(seen["get_order"].content)
    amount = order["amount_usd"]
    if amount > REFUND_AUTHORITY_USD:
        return call((HANDOFF_TOOL_NAME, {"reason": (
            f"A full refund of order {order_id} is {amount:,.2f} USD, above my refund "
            f"authority of {REFUND_AUTHORITY_USD:,.2f} USD.")}),
            thought="This refund is above what I may approve, so a person must decide.")
    refund = seen.get("issue_refund")
    if refund is None:
        return call(("issue_refund", {"order_id": order_id, "amount_usd": amount,
                                      "reason": "arrived broken"}),
                    ("lookup_customer", {"customer_id": order["customer_id"]}),
                    thought=f"The {order['item']} arrived broken; a full refund of "
                            f"{amount:.2f} USD is within my authority.")
    customer = seen.get("lookup_customer")
    name = json.loads(customer.content)["name"] if customer and not customer.is_error \
        else "the customer"
    if not refund.is_error:
        r = json.loads(refund.content)
        return text_reply(f"Refunded {r['amount_usd']:.2f} USD for order {order_id} "
                          f"(refund {r['refund_id']}). {name} will get the money back to the "
                          f"original payment method.")
    if "rejected" in refund.content:
        return text_reply(f"I did not refund order {order_id}: a person reviewed the refund "
                          f"and rejected it. Instead I suggest offering {name} a replacement "
                          f"{order['item']}. ({refund.content})")
    return text_reply(f"The refund for order {order_id} did not go through: {refund.content}")


def make_llm() -> ScriptedLLM:
    """A fresh scripted refund agent."""
    return ScriptedLLM(decide, name="refund agent")


CONFIG = AgentConfig(max_steps=6, token_budget=20_000)

register(Scenario(name="refund", description="refund of 40 USD: pauses for a person's approval",
                  task="Order R-1001 arrived broken. Please refund the customer in full.",
                  make_tools=refund_tools, make_llm=make_llm, config=CONFIG, system=SYSTEM))
register(Scenario(name="refund-handoff",
                  description="refund of 1,800 USD: above the agent's authority, hands off",
                  task="Order R-2002 arrived broken. Please refund the customer in full.",
                  make_tools=refund_tools, make_llm=make_llm, config=CONFIG, system=SYSTEM))
