"""The flaky inventory (the expensive pager story) and a refund that times out after it happened.

**The 429 story.** A support agent is asked whether the keyboard of order A123 is in stock.
Its only tool, ``check_inventory(sku)``, calls an inventory API that answers
``429 Too Many Requests`` to every call. The scripted support model does what a model with
no harness guard does: it reads the error and tries again, forever, unless an error result
tells it that the harness has already retried and given up. :func:`run_guarded` runs the
story under one guard at a time (:data:`GUARDS`) on a :class:`~primer.harness.retry.ManualClock`
that advances :data:`SECONDS_PER_CALL` per model call, so even the backoff waits take no
real time; :func:`guard_table` puts the runs side by side and :func:`unguarded_projection`
prices the run with no guard at all over :data:`STORY_DAYS` days.

The system prompt carries the shop's catalogue (:data:`CATALOGUE`), as a real support prompt
would; it is what makes each call cost what it does.

**The refund.** ``issue_refund`` is side-effecting and takes an idempotency key; the refund
world's :class:`~primer.scenarios.refunds.RefundLedger` records each refund once per key.
:class:`RefundDesk` can make the refund slow to confirm (it records the refund, then
waits: a timeout *after* the side effect) or flaky after the write (a transient error once
the refund is recorded), which is what lesson 9 uses to show why a side-effecting timeout
is never retried blindly and why a retry must carry the same key. ``get_refunds`` is the
read-only way to check the state.

Demos: ``inventory-429`` (the step cap stops it) and ``inventory-backoff`` (backoff, then
give-up, then the model tells the customer).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from primer.harness.production import run_production
from primer.harness.retry import ManualClock, RateLimited, TransientToolError
from primer.loop.config import AgentConfig
from primer.loop.messages import Message
from primer.loop.model import LLM, Policy, Reply, ScriptedLLM, Usage, cost_usd
from primer.loop.result import AgentResult
from primer.loop.tools import Tool, ToolError, tool

from . import Scenario, register
from .policy import action_reply, last_observations
from .refunds import ORDERS, RefundLedger

TASK = "Is the keyboard of order A123 (SKU KB-100) in stock? The customer wants a second one."
SKU = "KB-100"

#: What the task is worth to the business (USD): one support answer (SYLLABUS).
TASK_VALUE_USD = 0.20
#: Length of the story's unguarded run (days).
STORY_DAYS = 3
#: What the story reports the unguarded run spent (USD, "about"; SYLLABUS).
STORY_REPORTED_USD = 4_200
#: Assumed pace of the unguarded run: one model call per second (seconds per call). The 429
#: comes back at once, so the model's own latency (about a second) sets the pace.
SECONDS_PER_CALL = 1.0

_KINDS = {"keyboard": "KB", "mouse": "MS", "monitor": "MN", "dock": "DK", "headset": "HS",
          "webcam": "WC", "cable": "CB", "stand": "ST"}
_WAREHOUSES = ["Pune", "Chennai", "Delhi", "Kolkata"]

#: The shop's catalogue (SKU, item, price in rupees, warehouse), carried in the system prompt.
CATALOGUE: list[tuple[str, str, int, str]] = [
    (f"{prefix}-{100 + n}", f"{kind} model {n}", 500 + 250 * ((n * 7 + i) % 40),
     _WAREHOUSES[(n + i) % len(_WAREHOUSES)])
    for i, (kind, prefix) in enumerate(_KINDS.items()) for n in range(34)
]

SYSTEM = (
    "You are the support agent of a computer-accessories shop. Answer stock questions with "
    "check_inventory; never guess stock. Be brief and polite. Catalogue (SKU | item | price "
    "in rupees | warehouse):\n"
    + "\n".join(f"{sku} | {item} | {price} | {wh}" for sku, item, price, wh in CATALOGUE)
)


# ---------------------------------------------------------------- the inventory API

class InventoryAPI:
    """A stock API that rate-limits: the first ``fail_first`` calls answer 429.

    ``fail_first=None`` makes every call answer 429 (the story). ``retry_after_s`` is the
    Retry-After the 429 carries (seconds) or ``None``. ``calls`` counts requests. Stock is
    ``stock[sku]`` units (default 7 for every catalogue SKU).
    """

    def __init__(self, fail_first: int | None = None, retry_after_s: float | None = None,
                 stock: dict[str, int] | None = None) -> None:
        self.fail_first = fail_first
        self.retry_after_s = retry_after_s
        self.stock = stock if stock is not None else {row[0]: 7 for row in CATALOGUE}
        self.calls = 0
        self._lock = threading.Lock()

    def lookup(self, sku: str) -> dict[str, Any]:
        """Units in stock for ``sku``; raises :class:`RateLimited` while failing."""
        with self._lock:
            self.calls += 1
            n = self.calls
        if self.fail_first is None or n <= self.fail_first:
            raise RateLimited("the inventory API answered 429 Too Many Requests",
                              self.retry_after_s)
        if sku not in self.stock:
            raise ToolError(f"unknown SKU {sku!r}; SKUs look like 'KB-100' (see the catalogue)")
        return {"sku": sku, "in_stock": self.stock[sku]}

    def tool(self) -> Tool:
        """The read-only ``check_inventory`` tool over this API."""

        def check_inventory(sku: str) -> dict[str, Any]:
            """Units in stock for one SKU. Use it for every stock question.

            Args:
                sku: the catalogue SKU, e.g. "KB-100".
            """
            return self.lookup(sku)

        return tool(check_inventory)


def story_policy(messages: list[Message]) -> Reply:
    """The support model of the story: look the SKU up; after a failure, look it up again.

    It stops only when a result answers the question or says the harness gave up (then it
    tells the customer the service is down). A model with no guard around it does this.
    """
    seen = last_observations(messages)
    if seen and not seen[-1].is_error:
        return action_reply({"answer": f"Yes: {seen[-1].content}. I have told the customer."})
    if seen and "gave up" in seen[-1].content:
        return action_reply({"answer": "The inventory service is not answering. I have told "
                                       "the customer we will confirm the stock by email."})
    return action_reply({"tool": "check_inventory", "input": {"sku": SKU}})


def stubborn_policy(messages: list[Message]) -> Reply:
    """The story's model without the one behaviour backoff relies on: it ignores the
    harness's give-up ("do not call check_inventory again") and looks the SKU up again after
    every failure, as a real model may. It stops only when a lookup succeeds."""
    seen = last_observations(messages)
    if seen and not seen[-1].is_error:
        return action_reply({"answer": f"Yes: {seen[-1].content}. I have told the customer."})
    return action_reply({"tool": "check_inventory", "input": {"sku": SKU}})


class PacedLLM:
    """Wraps a model so each call advances a :class:`ManualClock` by ``seconds_per_call``.

    Lets a run's simulated time (model latency plus backoff waits) be read off the clock.
    """

    def __init__(self, llm: LLM, clock: ManualClock,
                 seconds_per_call: float = SECONDS_PER_CALL) -> None:
        self.llm = llm
        self.clock = clock
        self.seconds_per_call = seconds_per_call

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int) -> Reply:
        self.clock.advance(self.seconds_per_call)
        return self.llm(system=system, messages=messages, tools=tools, max_tokens=max_tokens)


# ---------------------------------------------------------------- the guards

#: Every guard off: no step cap to speak of, no budgets, no loop or no-progress detector,
#: no tool retries. Each guard of :data:`GUARDS` turns one of them on.
UNGUARDED = dict(max_steps=1_000_000, token_budget=None, cost_budget_usd=None,
                 repeat_threshold=None, no_progress_window=None, tool_retries=0,
                 model_retries=0, tool_timeout_s=None)

#: One guard at a time: name → the AgentConfig settings it changes from :data:`UNGUARDED`.
#: Values are the production lesson's defaults (10 steps, 50,000 tokens, repeat threshold 3),
#: a dollar budget equal to what the task is worth, 3 retries with backoff, and a
#: no-progress window of 3 results.
GUARDS: dict[str, dict[str, Any]] = {
    "step cap (10 calls)": {"max_steps": 10},
    "token budget (50,000)": {"token_budget": 50_000},
    "dollar budget (task value)": {"cost_budget_usd": TASK_VALUE_USD},
    "backoff, give up after 3 retries": {"tool_retries": 3},
    "no-progress window (3 errors)": {"no_progress_window": 3},
    "loop detection (3 repeats)": {"repeat_threshold": 3},
}


@dataclass
class GuardRun:
    """One guarded run of the story and its figures.

    ``tool_attempts`` counts every attempt (retries included); ``simulated_s`` is the
    :class:`ManualClock` time at the end (seconds of model calls and backoff waits);
    ``api_calls`` the requests the inventory API received.
    """

    guard: str
    result: AgentResult
    simulated_s: float
    api_calls: int
    tool_attempts: int = field(init=False)

    def __post_init__(self) -> None:
        self.tool_attempts = sum(e.attempts for e in self.result.executions
                                 if e.error_kind != "not_run")

    def row(self) -> dict[str, Any]:
        """The run as one table row."""
        r = self.result
        return {"guard": self.guard, "model calls": len(r.steps),
                "tool calls": sum(1 for e in r.executions if e.error_kind != "not_run"),
                "API requests": self.api_calls, "tokens": r.usage.total_tokens,
                "USD": round(r.cost_usd, 4), "simulated s": round(self.simulated_s, 1),
                "stop cause": r.stop_cause.value}


def story_config(clock: ManualClock, **settings: Any) -> AgentConfig:
    """An unguarded config on ``clock`` (its ``sleep`` too), with ``settings`` applied."""
    return AgentConfig(**{**UNGUARDED, **settings}, clock=clock, sleep=clock.sleep)


def run_guarded(guard: str, *, seed: int = 0, policy: Policy = story_policy) -> GuardRun:
    """Run the 429 story with only ``guard`` (a key of :data:`GUARDS`) switched on, the
    model following ``policy`` (default :func:`story_policy`, which obeys the give-up).

    Raises ``KeyError`` naming the known guards for an unknown one.
    """
    if guard not in GUARDS:
        raise KeyError(f"no guard named {guard!r}; known guards: {', '.join(GUARDS)}")
    return _run(guard, GUARDS[guard], policy, seed)


def _run(name: str, settings: dict[str, Any], policy: Policy, seed: int) -> GuardRun:
    clock = ManualClock()
    api = InventoryAPI()
    config = story_config(clock, **settings)
    config = replace(config, retry=replace(config.retry, seed=seed))
    llm = PacedLLM(ScriptedLLM(policy, name="support model"), clock)
    result = run_production(llm, TASK, [api.tool()], system=SYSTEM, config=config)
    return GuardRun(name, result, clock(), api.calls)


def guard_table(seed: int = 0) -> list[dict[str, Any]]:
    """One row per guard of :data:`GUARDS` (see :meth:`GuardRun.row`)."""
    return [run_guarded(g, seed=seed).row() for g in GUARDS]


#: The guard that relies on the model obeying its give-up.
BACKOFF = "backoff, give up after 3 retries"


def stubborn_table(seed: int = 0) -> list[dict[str, Any]]:
    """The story with :func:`stubborn_policy`, a model that ignores the give-up: backoff
    alone (nothing but the context window, which is always on, ends such a run: about 1,300
    model calls, about a second to compute), then backoff stacked with each other guard of
    :data:`GUARDS`. Rows as :meth:`GuardRun.row`."""
    rows = [_run("backoff alone", GUARDS[BACKOFF], stubborn_policy, seed).row()]
    rows += [_run(f"backoff + {g}", {**GUARDS[BACKOFF], **settings}, stubborn_policy,
                  seed).row() for g, settings in GUARDS.items() if g != BACKOFF]
    return rows


@dataclass(frozen=True)
class Projection:
    """What the unguarded run costs at a steady pace (see :func:`unguarded_projection`).

    ``per_call`` is the usage of one call (tokens), ``per_call_usd`` its price (USD),
    ``calls`` the model calls in ``days`` days, ``tokens`` and ``usd`` the totals, and
    ``times_task_value`` the total over :data:`TASK_VALUE_USD`.
    """

    days: float
    seconds_per_call: float
    per_call: Usage
    per_call_usd: float
    calls: int
    tokens: int
    usd: float
    times_task_value: float


def unguarded_projection(days: float = STORY_DAYS,
                         seconds_per_call: float = SECONDS_PER_CALL) -> Projection:
    """Price ``days`` of the unguarded story at one model call every ``seconds_per_call`` s.

    Assumption (stated, not measured): every call costs what the story's second call costs,
    i.e. the system prompt with the catalogue, the task and one failed lookup. That is a
    harness that keeps only the latest exchange (a memory window); with the whole history
    each call would cost more and the context window would end the run within hours. The
    per-call usage is measured from a two-call run of the story's own scripted model, at the
    course's default prices (``Prices()``: 5 / 25 USD per million input / output tokens).
    """
    clock = ManualClock()
    run = run_production(ScriptedLLM(story_policy), TASK, [InventoryAPI().tool()], system=SYSTEM,
                         config=story_config(clock, max_steps=2))
    per_call = run.steps[1].usage
    prices = AgentConfig().prices
    calls = int(days * 86_400 / seconds_per_call)
    usd = calls * cost_usd(per_call, prices)
    return Projection(days, seconds_per_call, per_call, cost_usd(per_call, prices), calls,
                      calls * per_call.total_tokens, usd, usd / TASK_VALUE_USD)


# ---------------------------------------------------------------- a tool that hangs

def supplier_eta(sku: str, hang: bool = True) -> str:
    """The supplier's delivery estimate for ``sku``; with ``hang`` it never returns.

    A stand-in for a call into a library that blocks forever (a socket with no timeout).
    Module-level so :func:`primer.harness.timeouts.run_in_subprocess` can run it in a child process.
    """
    while hang:
        time.sleep(3600)
    return f"{sku}: the supplier ships in 3 days"


# ---------------------------------------------------------------- refunds

class RefundDesk:
    """Refund tools over the refund world's :class:`~primer.scenarios.refunds.RefundLedger`,
    with the failures lesson 9 needs (no approval gate here: lesson 8 covers that).

    ``confirm_delay_s``: seconds the payment system takes to confirm *after* the ledger has
    recorded the refund, on the first ``slow_calls`` requests (longer than the tool's
    ``timeout_s`` gives a timeout after the side effect). ``flaky_writes``: how many calls
    raise a transient "payment gateway 503" after recording the refund. ``requests`` counts
    calls that reached the desk.
    """

    def __init__(self, ledger: RefundLedger, *, confirm_delay_s: float = 0.0,
                 slow_calls: int = 1, flaky_writes: int = 0,
                 timeout_s: float | None = None) -> None:
        self.ledger = ledger
        self.confirm_delay_s = confirm_delay_s
        self.slow_calls = slow_calls
        self.flaky_writes = flaky_writes
        self.timeout_s = timeout_s
        self.requests = 0

    def tools(self) -> list[Tool]:
        """``issue_refund`` (side-effecting, keyed) and ``get_refunds`` (read-only)."""
        desk = self

        def issue_refund(order_id: str, amount_usd: float, reason: str,
                         idempotency_key: str) -> Any:
            """Refund money to the customer of an order. It pays out: one call per refund.

            Args:
                order_id: the order, e.g. "R-1001".
                amount_usd: the amount to refund in USD.
                reason: why the refund is due, in a few words.
            """
            desk.requests += 1
            refund, duplicate = desk.ledger.issue(idempotency_key, order_id, amount_usd,
                                                  reason)
            if desk.flaky_writes > 0:
                desk.flaky_writes -= 1
                raise TransientToolError("payment gateway 503 Service Unavailable")
            if desk.requests <= desk.slow_calls:
                time.sleep(desk.confirm_delay_s)
            return {"refund_id": refund.refund_id, "amount_usd": refund.amount_usd,
                    "status": "already issued (same idempotency key)" if duplicate
                    else "issued"}

        def get_refunds(order_id: str) -> Any:
            """Refunds already paid on an order. Use it to check before refunding again.

            Args:
                order_id: the order, e.g. "R-1001".
            """
            return [{"refund_id": r.refund_id, "amount_usd": r.amount_usd}
                    for r in desk.ledger.refunds(order_id)]

        return [tool(issue_refund, side_effecting=True, timeout_s=self.timeout_s),
                tool(get_refunds)]


REFUND_TASK = "Order R-1001 arrived broken. Please refund the customer in full."


def refund_policy(messages: list[Message], *, check_first: bool = True) -> Reply:
    """The refund model: refund order R-1001's 40.00 USD, then confirm.

    After an error from ``issue_refund`` it looks the refunds up (``check_first``, what the
    error result asks for) or, with ``check_first=False``, asks for the refund again at
    once (a new ``tool_use`` id, so a new idempotency key). A refund found or made ends it.
    """
    seen = last_observations(messages)
    last = seen[-1] if seen else None
    order = ORDERS["R-1001"]
    refund = {"tool": "issue_refund", "input": {"order_id": "R-1001",
                                                "amount_usd": order["amount_usd"],
                                                "reason": "arrived broken"}}
    if last is None:
        return action_reply(refund)
    if last.name == "get_refunds":
        return action_reply({"answer": f"The refund is on record: {last.content}"}
                            if last.content != "[]" else refund)
    if last.is_error:
        return action_reply({"tool": "get_refunds", "input": {"order_id": "R-1001"}}
                            if check_first else refund)
    return action_reply({"answer": f"Refund issued: {last.content}"})


def refund_llm(check_first: bool = True) -> ScriptedLLM:
    """A fresh scripted refund model (see :func:`refund_policy`)."""

    def policy(messages: list[Message]) -> Reply:
        return refund_policy(messages, check_first=check_first)

    return ScriptedLLM(policy, name="refund model")


# ---------------------------------------------------------------- demos

def _story_demo(name: str, description: str, guard: str) -> Scenario:
    clock = ManualClock()
    return register(Scenario(
        name=name, description=description, task=TASK,
        make_tools=lambda: [InventoryAPI().tool()],
        make_llm=lambda: ScriptedLLM(story_policy, name="support model"),
        config=story_config(clock, **GUARDS[guard]), system=SYSTEM))


_story_demo("inventory-429", "an API that always answers 429; the step cap stops the retries",
            "step cap (10 calls)")
_story_demo("inventory-backoff", "the same API with backoff (simulated time) and a give-up the "
            "model reads", "backoff, give up after 3 retries")
