"""The support desk: tickets, policies, and scripted models for a workflow and an agent.

Five tickets, five policies. The same tickets are answered two ways:

* the **workflow** (:func:`workflow_steps`): classify the ticket (one model call) → look
  the policy up by category (code, no call) → draft the reply (one model call);
* the **agent** (:func:`make_agent_llm`): the model searches the policies, reads one, looks
  an order up when the ticket names one, and answers.

A reply succeeds when it cites the right policy id in brackets and states the one fact a
ticket may need (ticket T5 asks how much a returned keyboard refunds, which needs the unit
price from ``get_order``: 2500 rupees) and quotes no amount a ticket did not ask for. The
agent's reply uses an order's price only under the returns policy. The workflow has no step
that looks orders up, so it cannot answer T5; the agent can, at the price of more calls and
more tokens on every ticket.

The module also holds the worlds of the other lesson-11 patterns: a fulfilment desk whose
stock changes mid-run (plan-and-execute), and a drafter and reviewer (reflection).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from primer.harness.patterns.workflows import WorkflowRun, WorkflowStep, run_workflow
from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.messages import Message, text_of
from primer.loop.model import ScriptedLLM, text_reply, tool_reply
from primer.loop.tools import Tool, ToolError, tool

from . import Scenario, register
from .orders import get_order
from .policy import all_observations

POLICIES: dict[str, dict[str, str]] = {
    "pol-refund": {"title": "Refund timing", "category": "refund",
                   "text": "Approved refunds go back to the original payment method within 5 to "
                           "7 working days."},
    "pol-shipping": {"title": "Late deliveries", "category": "shipping",
                     "text": "If a parcel is more than 3 days late we send the tracking link "
                             "and offer to re-send it or refund the shipping fee."},
    "pol-account": {"title": "Account access", "category": "account",
                    "text": "Reset a password with the Forgot password link on the sign-in "
                            "page; staff never ask for a password."},
    "pol-damaged": {"title": "Damaged items", "category": "damaged",
                    "text": "Ask for a photo, then send a replacement at no cost; the customer "
                            "keeps the damaged item."},
    "pol-returns": {"title": "Returns", "category": "returns",
                    "text": "Unused items can be returned within 30 days; the refund is the "
                            "unit price paid for each item returned."},
}
POLICY_BY_CATEGORY = {p["category"]: pid for pid, p in POLICIES.items()}
CATEGORIES = tuple(POLICY_BY_CATEGORY)

#: Keywords per category, checked in this order (the first match wins).
KEYWORDS: dict[str, tuple[str, ...]] = {
    "damaged": ("cracked", "broken", "damaged"),
    "account": ("log in", "password"),
    "shipping": ("parcel", "delivery", "late"),
    "refund": ("refund", "money"),
    "returns": ("return",),
}


@dataclass(frozen=True)
class Ticket:
    """A support ticket, the policy a good reply cites, and a fact it must state (or None)."""

    id: str
    text: str
    policy_id: str
    needs: str | None = None


TICKETS: list[Ticket] = [
    Ticket("T1", "I sent my headphones back two weeks ago and the refund has still not "
                 "arrived. When will I get my money?", "pol-refund"),
    Ticket("T2", "My parcel was due on Monday and it is Friday now. Where is it?",
           "pol-shipping"),
    Ticket("T3", "I cannot log in and I have forgotten my password.", "pol-account"),
    Ticket("T4", "The mug I ordered arrived cracked.", "pol-damaged"),
    Ticket("T5", "I want to return one of the two keyboards from order A123. How much will I "
                 "get back?", "pol-returns", needs="2500"),
]


def classify(text: str) -> str:
    """The category a ticket's text belongs to, by the :data:`KEYWORDS` rules ("other" if
    none match). The scripted models answer with it, as a real model would from reading."""
    low = text.lower()
    for category, words in KEYWORDS.items():
        if any(w in low for w in words):
            return category
    return "other"


#: A money amount in a reply, e.g. "2500 rupees".
AMOUNT = re.compile(r"\b\d[\d,]*(?:\.\d+)? rupees\b")


def reply_succeeds(ticket: Ticket, reply: str | None) -> bool:
    """True when ``reply`` cites ``[policy_id]``, contains the fact the ticket needs, and
    quotes no money amount the ticket did not ask for (an unasked-for amount, such as a
    refund quoted on a damaged-item ticket whose policy is a replacement, is a wrong
    promise)."""
    if not reply or f"[{ticket.policy_id}]" not in reply:
        return False
    if ticket.needs is None:
        return AMOUNT.search(reply) is None
    return ticket.needs in reply


def _draft(policy_id: str, order: dict[str, Any] | None) -> str:
    """The reply: the policy, its id, and the order's facts where the policy uses them (the
    refund per returned item is the unit price; other policies only name the order)."""
    p = POLICIES[policy_id]
    text = f"Thank you for writing to us. {p['text']} [{policy_id}]"
    if order is not None and policy_id == "pol-returns":
        text += (f" Each {order['item']} on order {order['order_id']} cost "
                 f"{order['unit_price']} rupees, so that is what you get back.")
    elif order is not None:
        text += f" This is about the {order['item']} on order {order['order_id']}."
    return text


# ---------------------------------------------------------------- the workflow

CLASSIFY_PROMPT = ("Classify this support ticket as one of: {categories}. Answer with the "
                   "one word.\n\nTicket: {ticket}")
DRAFT_PROMPT = ("Draft a short reply to the customer that follows the policy and cites it by "
                "id in brackets.\n\nPolicy [{policy_id}]: {policy}\n\nTicket: {ticket}")


def _classify_step(run: WorkflowRun) -> str:
    answer = run.ask(CLASSIFY_PROMPT.format(categories=", ".join(CATEGORIES),
                                            ticket=run.inputs["ticket"]), label="classify")
    category = answer.strip().lower().rstrip(".")
    if category not in POLICY_BY_CATEGORY:
        raise ValueError(f"the classifier answered {answer!r}, not one of {CATEGORIES}")
    return category


def _retrieve_step(run: WorkflowRun) -> str:
    return POLICY_BY_CATEGORY[run.outputs["classify"]]  # code, not a model call


def _draft_step(run: WorkflowRun) -> str:
    pid = run.outputs["retrieve"]
    return run.ask(DRAFT_PROMPT.format(policy_id=pid, policy=POLICIES[pid]["text"],
                                       ticket=run.inputs["ticket"]), label="draft")


def workflow_steps() -> list[WorkflowStep]:
    """classify (model) → retrieve (code) → draft (model)."""
    return [("classify", _classify_step), ("retrieve", _retrieve_step), ("draft", _draft_step)]


def _workflow_policy(messages: list[Message]) -> str:
    prompt = text_of(messages[-1]["content"])
    ticket = prompt.rsplit("Ticket: ", 1)[-1]
    if prompt.startswith("Classify"):
        return classify(ticket)
    pid = re.search(r"Policy \[([\w-]+)\]", prompt)
    return _draft(pid.group(1) if pid else "pol-refund", None)


def make_workflow_llm() -> ScriptedLLM:
    """The scripted model behind the workflow's two model steps."""
    return ScriptedLLM(_workflow_policy, name="support workflow model")


# ---------------------------------------------------------------- the agent

@tool
def search_policies(query: str) -> list:
    """Search the support policies. Use it first on every ticket; it returns the id and title
    of each matching policy (read one with get_policy).

    Args:
        query: a few words naming the kind of problem, e.g. "late parcel".
    """
    q = query.strip().lower()
    category = q if q in POLICY_BY_CATEGORY else classify(q)
    hits = [{"id": pid, "title": p["title"]} for pid, p in POLICIES.items()
            if p["category"] == category or query.lower() in p["title"].lower()]
    return hits or [{"id": pid, "title": p["title"]} for pid, p in POLICIES.items()]


@tool
def get_policy(policy_id: str) -> str:
    """Read one policy in full. Use it before answering, with an id from search_policies.

    Args:
        policy_id: a policy id such as "pol-refund".
    """
    if policy_id not in POLICIES:
        raise ToolError(f"No policy {policy_id!r}. Known ids: {', '.join(POLICIES)}.")
    return POLICIES[policy_id]["text"]


AGENT_SYSTEM = ("You answer customer support tickets. Search the policies, read the one that "
                "applies, look up any order the ticket names, then reply briefly, citing the "
                "policy id in brackets.")


def agent_tools() -> list[Tool]:
    """The agent's tools: ``search_policies``, ``get_policy`` and the order world's
    ``get_order``."""
    return [search_policies, get_policy, get_order]


def _agent_policy(messages: list[Message]) -> Any:
    ticket = text_of(messages[0]["content"])
    seen = all_observations(messages)
    if not seen:
        calls: list[tuple[str, Any]] = [("search_policies", {"query": classify(ticket)})]
        order = re.search(r"\border ([A-Z]\d{3})\b", ticket)
        if order:
            calls.append(("get_order", {"order_id": order.group(1)}))
        return tool_reply(*calls, text="Thought: find the policy for this kind of ticket"
                                       + (" and look the order up." if order else "."))
    read = [o for o in seen if o.name == "get_policy" and not o.is_error]
    orders = [json.loads(o.content) for o in seen if o.name == "get_order" and not o.is_error]
    if not read:
        hits = json.loads(next(o.content for o in seen if o.name == "search_policies"))
        return tool_reply(("get_policy", {"policy_id": hits[0]["id"]}),
                          text="Thought: read the matching policy before answering.")
    return text_reply(_draft(read[-1].input["policy_id"], orders[0] if orders else None))


def make_agent_llm() -> ScriptedLLM:
    """The scripted support agent: search, read the policy (and the order), answer."""
    return ScriptedLLM(_agent_policy, name="support agent model")


AGENT_CONFIG = AgentConfig(max_steps=6, token_budget=10_000)


# ---------------------------------------------------------------- the comparison

@dataclass
class Outcome:
    """One ticket handled one way: the reply, whether it succeeded, calls, tokens, dollars."""

    ticket: str
    approach: str
    reply: str | None
    success: bool
    model_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


def handle_with_workflow(ticket: Ticket) -> Outcome:
    """Run the fixed workflow on one ticket."""
    r = run_workflow(make_workflow_llm(), workflow_steps(), {"ticket": ticket.text},
                     prices=AGENT_CONFIG.prices)
    return Outcome(ticket.id, "workflow", r.final, reply_succeeds(ticket, r.final),
                   r.model_calls, r.usage.prompt_tokens, r.usage.output_tokens, r.cost_usd)


def handle_with_agent(ticket: Ticket) -> Outcome:
    """Run the support agent on one ticket."""
    r = run_production(make_agent_llm(), ticket.text, agent_tools(), system=AGENT_SYSTEM,
                       config=AGENT_CONFIG)
    return Outcome(ticket.id, "agent", r.final_text, reply_succeeds(ticket, r.final_text),
                   len(r.steps), r.usage.prompt_tokens, r.usage.output_tokens, r.cost_usd)


def compare(tickets: list[Ticket] | None = None) -> list[dict[str, Any]]:
    """One row per approach over ``tickets`` (default all five): model calls, input and
    output tokens, cost in USD (at the course's default prices, ``Prices()``: 5 / 25 USD per
    million input / output tokens) and successes."""
    rows = []
    for approach, handle in (("workflow", handle_with_workflow), ("agent", handle_with_agent)):
        outs = [handle(t) for t in tickets or TICKETS]
        rows.append({"approach": approach, "tickets": len(outs),
                     "model calls": sum(o.model_calls for o in outs),
                     "input tokens": sum(o.input_tokens for o in outs),
                     "output tokens": sum(o.output_tokens for o in outs),
                     "cost USD": round(sum(o.cost_usd for o in outs), 6),
                     "succeeded": sum(o.success for o in outs)})
    return rows


register(Scenario(name="support-agent", description="answers ticket T5 with search_policies, "
                  "get_policy and get_order; cites [pol-returns] and 2500 rupees",
                  task=TICKETS[4].text, make_tools=agent_tools, make_llm=make_agent_llm,
                  config=AGENT_CONFIG, system=AGENT_SYSTEM))


# ---------------------------------------------------------------- plan-and-execute world

@dataclass
class Fulfilment:
    """A stock room with two warehouses; ``tools()`` checks stock, reserves and ships.

    ``stock`` maps warehouse → units of the replacement keyboard (SKU ``KB-1``). Reserving
    takes a unit; shipping needs a reservation at that warehouse. ``sell_out(warehouse)``
    is another customer buying the last units: the fact a plan was made on changes.
    """

    stock: dict[str, int] = field(default_factory=lambda: {"north": 1, "south": 4})
    reserved: dict[str, int] = field(default_factory=dict)
    shipped: list[str] = field(default_factory=list)

    def sell_out(self, warehouse: str) -> None:
        """Another order takes every unit at ``warehouse``."""
        self.stock[warehouse] = 0

    def tools(self) -> list[Tool]:
        """``check_stock``, ``reserve`` and ``ship``, bound to this stock room."""
        world = self

        def where(warehouse: str) -> None:
            if warehouse not in world.stock:
                raise ToolError(f"No warehouse {warehouse!r}; use one of "
                                f"{', '.join(world.stock)}.")

        @tool
        def check_stock(sku: str, warehouse: str) -> dict:
            """Units of a SKU in stock at a warehouse.

            Args:
                sku: e.g. "KB-1".
                warehouse: "north" or "south".
            """
            where(warehouse)
            return {"sku": sku, "warehouse": warehouse, "units": world.stock[warehouse]}

        @tool
        def reserve(sku: str, warehouse: str) -> str:
            """Reserve one unit of a SKU at a warehouse (needed before ship).

            Args:
                sku: e.g. "KB-1".
                warehouse: "north" or "south".
            """
            where(warehouse)
            if world.stock[warehouse] < 1:
                raise ToolError(f"{sku} is out of stock at {warehouse} (0 units); check "
                                f"another warehouse.")
            world.stock[warehouse] -= 1
            world.reserved[warehouse] = world.reserved.get(warehouse, 0) + 1
            return f"reserved 1 × {sku} at {warehouse}"

        @tool
        def ship(order_id: str, warehouse: str) -> str:
            """Ship a reserved unit from a warehouse to the customer of an order.

            Args:
                order_id: e.g. "A123".
                warehouse: where the unit is reserved.
            """
            where(warehouse)
            if world.reserved.get(warehouse, 0) < 1:
                raise ToolError(f"Nothing is reserved at {warehouse}; reserve first.")
            world.reserved[warehouse] -= 1
            world.shipped.append(f"{order_id} from {warehouse}")
            return f"shipped the replacement for {order_id} from {warehouse}"

        return [check_stock, reserve, ship]


PLAN_TASK = ("Order A123 arrived with a broken keyboard. Send one replacement keyboard "
             "(SKU KB-1) from the nearest warehouse with stock; north is nearest.")


def _plan(warehouse: str, check: bool = True) -> str:
    steps = ([{"tool": "check_stock", "input": {"sku": "KB-1", "warehouse": warehouse},
               "why": f"make sure {warehouse} has one"}] if check else [])
    steps += [{"tool": "reserve", "input": {"sku": "KB-1", "warehouse": warehouse},
               "why": "hold the unit"},
              {"tool": "ship", "input": {"order_id": "A123", "warehouse": warehouse},
               "why": "send it to the customer"}]
    return json.dumps(steps)


def _planner_policy(messages: list[Message]) -> str:
    prompt = text_of(messages[-1]["content"])
    if prompt.endswith("Write the answer for the user."):
        shipped = re.findall(r"shipped the replacement for A123 from (\w+)", prompt)
        return (f"A replacement keyboard is on its way from the {shipped[-1]} warehouse."
                if shipped else "I could not send a replacement.")
    if "out of stock at north" in prompt:
        return _plan("south")
    return _plan("north")


def make_planner_llm() -> ScriptedLLM:
    """The scripted planner: plans from north (nearest); after north sells out, from south."""
    return ScriptedLLM(_planner_policy, name="planner model")


# ---------------------------------------------------------------- reflection world

REFLECT_TASK = f"Draft a reply to this ticket: {TICKETS[3].text}"
CRITERIA = ("apologises for the problem",
            "cites the policy id in brackets",
            "says what happens next (a replacement)")


def review_draft(draft: str) -> dict[str, Any]:
    """The scripted reviewer's judgement of a draft against :data:`CRITERIA`, as JSON data."""
    problems = []
    if "sorry" not in draft.lower():
        problems.append("it does not apologise")
    if not re.search(r"\[pol-[a-z]+\]", draft):
        problems.append("it cites no policy id in brackets")
    if "replacement" not in draft.lower():
        problems.append("it does not say a replacement is coming")
    return {"pass": not problems, "problems": problems}


def _reviewer_policy(messages: list[Message]) -> str:
    prompt = text_of(messages[-1]["content"])
    draft = prompt.split("Draft:\n", 1)[-1].rsplit("\n\nDoes the draft", 1)[0]
    return json.dumps(review_draft(draft))


FIRST_DRAFT = "Thanks for your message. Please send us a photo of the mug."


def _drafter_policy(learns: bool) -> Any:
    def respond(messages: list[Message]) -> str:
        prompt = text_of(messages[-1]["content"])
        if learns and "problems:" in prompt:
            return ("We are sorry the mug arrived cracked. Please send a photo and we will "
                    "send a replacement at no cost; keep the damaged one. [pol-damaged]")
        return FIRST_DRAFT
    return respond


def make_drafter_llm(learns: bool = True) -> ScriptedLLM:
    """A drafter whose first draft misses the criteria; with ``learns`` it fixes every problem
    the reviewer names, without it it sends the same draft again (to show the cap)."""
    return ScriptedLLM(_drafter_policy(learns), name="drafter model")


def make_reviewer_llm() -> ScriptedLLM:
    """The scripted reviewer (:func:`review_draft`)."""
    return ScriptedLLM(_reviewer_policy, name="reviewer model")


# ---------------------------------------------------------------- skills (lesson 12)

def _procedure(*steps: str) -> str:
    return "\n".join(f"{k}. {s}" for k, s in enumerate(steps, start=1))


#: Saved procedures for four kinds of ticket (the skills of lesson 12).
SKILL_TEXTS: dict[str, tuple[str, str]] = {
    "damaged-items": ("Use for an item that arrived broken, cracked or damaged.", _procedure(
        "Apologise in one sentence; do not argue about how the damage happened.",
        "Read policy pol-damaged with get_policy and follow it exactly.",
        "Ask for one photo of the damage and of the parcel label, if the ticket has none.",
        "Promise a replacement at no cost; say the customer keeps the damaged item.",
        "If the same customer reported damage twice in 30 days, hand off to a person.",
        "Never offer cash compensation; only the replacement or a refund of the item.",
        "Close with the policy id in brackets and the expected dispatch time.")),
    "late-delivery": ("Use for a parcel that is late or lost.", _procedure(
        "Look the order up with get_order to find the dispatch date.",
        "Read policy pol-shipping with get_policy.",
        "Under 3 days late: send the tracking link and ask the customer to wait.",
        "Over 3 days late: offer to re-send the parcel or refund the shipping fee.",
        "If the carrier marked it delivered, ask the customer to check with neighbours first.",
        "Never promise a delivery date the carrier has not given.",
        "Close with the policy id in brackets.")),
    "refund-status": ("Use when a customer asks where their refund is.", _procedure(
        "Look the order up with get_order and find the refund approval date.",
        "Read policy pol-refund with get_policy.",
        "Within 7 working days of approval: explain the timing and give the date it is due.",
        "Past 7 working days: apologise and hand off to a person with the order id.",
        "Never issue a second refund yourself; duplicates are the most common loss.",
        "Close with the policy id in brackets.")),
    "account-access": ("Use for login problems and password resets.", _procedure(
        "Never ask for, or accept, a password or a one-time code in the ticket.",
        "Read policy pol-account with get_policy.",
        "Send the Forgot password link steps; mention the link expires after one hour.",
        "If the customer says their email changed, hand off to a person to verify identity.",
        "Close with the policy id in brackets.")),
}


def skill_book() -> Any:
    """A fresh :class:`~primer.harness.skills.SkillBook` of :data:`SKILL_TEXTS`."""
    from primer.harness.skills import Skill, SkillBook

    return SkillBook(Skill(n, d, text) for n, (d, text) in SKILL_TEXTS.items())


def make_skills_llm(load_skill: bool) -> ScriptedLLM:
    """The support model on ticket T4: with ``load_skill`` it first loads
    ``damaged-items``; then it reads ``pol-damaged`` and answers (same reply both ways)."""
    def respond(messages: list[Message]) -> Any:
        seen = all_observations(messages)
        if load_skill and not seen:
            return tool_reply(("load_skill", {"name": "damaged-items"}),
                              text="Thought: a damaged item; load that procedure first.")
        if not any(o.name == "get_policy" for o in seen):
            return tool_reply(("get_policy", {"policy_id": "pol-damaged"}),
                              text="Thought: the procedure says to read pol-damaged.")
        return text_reply("We are sorry the mug arrived cracked. Please send a photo; a "
                          "replacement is on its way at no cost and you keep the damaged one. "
                          "[pol-damaged]")
    return ScriptedLLM(respond, name="skills model")


# ---------------------------------------------------------------- sub-agent world (lesson 12)

LOG_DAYS = ("2026-03-01", "2026-03-02", "2026-03-03")
DOUBLE_CHARGE_TASK = "Why was the customer of order A123 charged twice? Check the payment logs."
LOG_FINDING = ("A123 was charged twice on 2026-03-02: the gateway timed out on the first "
               "charge and the retry sent a new charge without an idempotency key.")


@tool
def read_payment_log(day: str) -> str:
    """Read one day of the payment service's log (long). Use it to investigate charges.

    Args:
        day: the day as YYYY-MM-DD, e.g. "2026-03-02".
    """
    if day not in LOG_DAYS:
        raise ToolError(f"No log for {day!r}; logs exist for {', '.join(LOG_DAYS)}.")
    lines = [f"{day} 09:{m:02d} charge ok order=B{100 + m} amount=1200 key=idem-{m}"
             for m in range(30)]
    if day == "2026-03-02":
        lines[12] = f"{day} 09:12 charge TIMEOUT order=A123 amount=5900 key=none"
        lines[13] = f"{day} 09:13 charge ok order=A123 amount=5900 key=none (retry)"
        lines[14] = f"{day} 09:14 settle order=A123 charges=2 amount=11800"
    return "\n".join(lines)


def _investigator(messages: list[Message]) -> Any:
    read = [o.input.get("day") for o in all_observations(messages) if o.name == "read_payment_log"]
    todo = [d for d in LOG_DAYS if d not in read]
    if todo:
        return tool_reply(("read_payment_log", {"day": todo[0]}),
                          text=f"Thought: read the log of {todo[0]}.")
    return text_reply(LOG_FINDING)


def make_investigator_llm() -> ScriptedLLM:
    """Reads the three days of logs one by one, then reports :data:`LOG_FINDING`. Used both
    as a single agent and as the child of a sub-agent tool."""
    return ScriptedLLM(_investigator, name="investigator model")


def _delegating_parent(messages: list[Message]) -> Any:
    seen = all_observations(messages)
    if not seen:
        return tool_reply(("investigate", {"task": "Find in the payment logs of "
                                                   f"{', '.join(LOG_DAYS)} why order A123 "
                                                   "was charged twice. Report in two lines."}),
                          text="Thought: hand the log reading to a helper.")
    result = seen[-1]
    if result.is_error:
        return text_reply(f"I could not find out why: {result.content}")
    return text_reply(f"{result.content} We will refund the second charge.")


def make_parent_llm() -> ScriptedLLM:
    """A parent that delegates the log reading to an ``investigate`` sub-agent tool."""
    return ScriptedLLM(_delegating_parent, name="parent model")
