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
``handoff_to_human``. After the refund call it answers from the result as the tool gave it:
refunded; already issued under the same key (nothing new paid); refused because the order was
already refunded; or rejected by a person (then it passes on the person's note and proposes a
replacement instead of retrying). Like a real model it gives every ``tool_use`` a new id
(a random run tag in each), so two separate requests never share an idempotency key.

Demos: ``refund`` (order R-1001, 40 USD: pauses for approval) and ``refund-handoff``
(order R-2002, 1,800 USD: above the agent's authority, hands off). :data:`ORDERS` holds a
few more orders for lessons that ask about others.

The ledger file (:func:`ledger_path`) is ``$PRIMER_REFUND_LEDGER`` if set; else, for a run
with a checkpoint directory, ``refund_ledger.sqlite`` in that directory, beside the
checkpoint, where ``python -m primer resume`` finds it again; else ``refund_ledger.sqlite``
in the working directory. It is created by the first refund paid. For crash
tests, ``$PRIMER_REFUND_DELAY_S`` (seconds) makes ``issue_refund`` wait before and after its
ledger write, widening the window in which a process can die mid-call.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from primer.loop.config import AgentConfig
from primer.loop.messages import Block, Message, text_block, text_of, tool_use_block
from primer.loop.model import Reply, ScriptedLLM, text_reply
from primer.loop.state import HANDOFF_TOOL_NAME
from primer.loop.tools import Tool, ToolError, tool

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
    "R-1005": {"order_id": "R-1005", "customer_id": "C-88", "item": "bamboo cutting board",
               "amount_usd": 30.0, "status": "delivered, reported broken"},
    "R-1006": {"order_id": "R-1006", "customer_id": "C-77", "item": "linen tablecloth",
               "amount_usd": 55.0, "status": "delivered, reported broken"},
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


def ledger_path(directory: str | Path | None = None) -> Path:
    """The ledger file: ``$PRIMER_REFUND_LEDGER`` if set; else ``refund_ledger.sqlite`` in
    ``directory`` (a run's checkpoint directory) if given; else in the working directory."""
    if os.environ.get(LEDGER_ENV):
        return Path(os.environ[LEDGER_ENV])
    return Path(directory or ".") / DEFAULT_LEDGER


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


def _run_tag(messages: list[Message]) -> str | None:
    """The run tag of the ids this run's model already gave (``toolu_R1001_<tag>_01_1``)."""
    for m in messages:
        if m["role"] == "assistant" and isinstance(m["content"], list):
            for block in m["content"]:
                found = _ID.fullmatch(str(block.get("id", ""))) if isinstance(block, dict) \
                    else None
                if found:
                    return found.group(1)
    return None


_ID = re.compile(r"toolu_R\d+_([0-9a-f]{8})_\d{2}_\d+")
_REFUNDED = re.compile(r"already been refunded ([\d.]+) of the ([\d.]+) USD paid")
_NOTE = re.compile(r"Their note: (.*)\. Do not retry", re.DOTALL)


def decide(messages: list[Message], run_tag: str | None = None, *,
           notify: bool = False) -> Reply:
    """The refund agent's next reply, from the history (a :class:`ScriptedLLM` policy).

    Tool-use ids are unique per run, as a real model's are: the order id, a run tag of 8
    hex digits, the call number and the call's place in the reply
    (``toolu_R1001_3fa85f64_02_1``). The tag is the one already in the history, else
    ``run_tag``, else a new random one, so a run resumed in a new process keeps its tag and a
    second, separate request for the same order gets new ids, and new idempotency keys.

    After the refund call it answers from the result as the tool gave it: ``issued``; a
    duplicate (``already issued``: nothing new was paid); refused because the order was
    already refunded; or rejected by a person (it passes on the person's note, not the
    harness's instructions, and offers a replacement instead of retrying).

    ``notify=True`` is an eager agent: with the refund it asks, in the same reply, to e-mail
    the customer that the refund is on its way (``email_customer``), before anyone decided.
    """
    order_id = _order_id(messages)
    n = call_number(messages)
    tag = _run_tag(messages) or run_tag or uuid.uuid4().hex[:8]

    def call(*calls: tuple[str, dict[str, Any]], thought: str) -> Reply:
        blocks: list[Block] = [text_block(thought)]
        for k, (name, args) in enumerate(calls, start=1):
            blocks.append(tool_use_block(f"toolu_{order_id.replace('-', '')}_{tag}_{n:02d}_{k}",
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
    if refund is None and notify:
        return call(("issue_refund", {"order_id": order_id, "amount_usd": amount,
                                      "reason": "arrived broken"}),
                    ("email_customer", {"customer_id": order["customer_id"], "subject": (
                        f"Your refund for order {order_id}"), "body": (
                        f"Good news: your refund of {amount:.2f} USD for the broken "
                        f"{order['item']} is on its way.")}),
                    ("lookup_customer", {"customer_id": order["customer_id"]}),
                    thought="I will refund the order and tell the customer right away.")
    if refund is None:
        return call(("issue_refund", {"order_id": order_id, "amount_usd": amount,
                                      "reason": "arrived broken"}),
                    ("lookup_customer", {"customer_id": order["customer_id"]}),
                    thought=f"The {order['item']} arrived broken; a full refund of "
                            f"{amount:.2f} USD is within my authority.")
    customer = seen.get("lookup_customer")
    name = json.loads(customer.content)["name"] if customer and not customer.is_error \
        else "the customer"
    return text_reply(_answer(order_id, order, name, refund.content, refund.is_error))


def _answer(order_id: str, order: dict[str, Any], name: str, content: str,
            is_error: bool) -> str:
    """The answer after the refund call, read honestly from its result."""
    if not is_error:
        r = json.loads(content)
        if r["status"] == "issued":
            return (f"Refunded {r['amount_usd']:.2f} USD for order {order_id} (refund "
                    f"{r['refund_id']}). {name} will get the money back to the original "
                    f"payment method.")
        return (f"Order {order_id} had already been refunded: refund {r['refund_id']} of "
                f"{r['amount_usd']:.2f} USD was issued earlier under the same idempotency key, "
                f"and nothing new was paid this time.")
    if (done := _REFUNDED.search(content)) is not None:
        return (f"I did not refund order {order_id} again: {done.group(1)} of the "
                f"{done.group(2)} USD paid for it has already been refunded, and an order is "
                f"never refunded more than was paid. Nothing new was paid.")
    if content.startswith("A person rejected"):
        note = _NOTE.search(content)
        why = f" The reviewer's note: {note.group(1)}." if note else ""
        return (f"I did not refund order {order_id}: a person reviewed the refund and "
                f"rejected it.{why} Instead I suggest offering {name} a replacement "
                f"{order['item']}.")
    return f"The refund for order {order_id} did not go through: {content}"


def make_llm(notify: bool = False) -> ScriptedLLM:
    """A fresh scripted refund agent, with a new run tag for its tool_use ids
    (``notify=True``: the eager one that e-mails the customer with the refund, see
    :func:`decide`)."""
    return ScriptedLLM(functools.partial(decide, run_tag=uuid.uuid4().hex[:8], notify=notify),
                       name="eager refund agent" if notify else "refund agent")


# ---------------------------------------------------------------- e-mail, for the eager agent

OUTBOX = "outbox.jsonl"


def email_tool(outbox: str | Path) -> Tool:
    """``email_customer(customer_id, subject, body)``: side-effecting, needs no approval (as
    shipped), appends one JSON line per e-mail to the file ``outbox``; see :func:`sent`."""
    path = Path(outbox)

    @tool(side_effecting=True)
    def email_customer(customer_id: str, subject: str, body: str) -> str:
        """Send an e-mail to a customer. It cannot be unsent.

        Args:
          customer_id: the customer id, like C-77.
          subject: the subject line.
          body: the text of the e-mail.
        """
        if customer_id not in CUSTOMERS:
            raise ToolError(f"no customer {customer_id!r}; take the customer_id from get_order")
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"to": CUSTOMERS[customer_id]["email"], "subject": subject,
                                "body": body}) + "\n")
        return f"sent to {CUSTOMERS[customer_id]['email']}"

    return email_customer


def sent(outbox: str | Path) -> list[dict[str, str]]:
    """The e-mails in ``outbox`` (``to``, ``subject``, ``body``), oldest first; none if the
    file does not exist yet."""
    path = Path(outbox)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def notify_tools_in(directory: Path) -> list[Tool]:
    """The refund tools plus ``email_customer``, both keeping their files in ``directory``."""
    return [*refund_tools_in(directory), email_tool(Path(directory) / OUTBOX)]


CONFIG = AgentConfig(max_steps=6, token_budget=20_000)


def refund_tools_in(directory: Path) -> list[Tool]:
    """The refund tools for a run with a checkpoint directory: the ledger lives there
    (``directory/refund_ledger.sqlite``, unless ``$PRIMER_REFUND_LEDGER`` is set), so
    ``python -m primer resume`` finds the same ledger beside the checkpoint."""
    return refund_tools(ledger_path(directory))


_WORLD: dict[str, Any] = dict(make_tools=refund_tools, make_tools_in=refund_tools_in,
                              make_llm=make_llm, config=CONFIG, system=SYSTEM)
register(Scenario(name="refund", description="refund of 40 USD: pauses for a person's approval",
                  task="Order R-1001 arrived broken. Please refund the customer in full.",
                  **_WORLD))
register(Scenario(name="refund-notify",
                  description="refund of 65 USD with an e-mail to the customer in the same reply: "
                              "the e-mail goes out before a person decides",
                  task="Order R-1003 arrived broken. Please refund the customer in full.",
                  make_tools=lambda: notify_tools_in(Path.cwd()),
                  make_tools_in=notify_tools_in,
                  make_llm=functools.partial(make_llm, notify=True), config=CONFIG,
                  system=SYSTEM))
register(Scenario(name="refund-handoff",
                  description="refund of 1,800 USD: above the agent's authority, hands off",
                  task="Order R-2002 arrived broken. Please refund the customer in full.",
                  **_WORLD))
