"""The support desk with two more workflow patterns: routing and orchestrator-workers.

* Routing (:func:`handle_with_routing`): one router call sends each ticket either to the
  fixed workflow (a known kind that names no order) or to the agent (a ticket that names an
  order, whose answer needs a lookup). A ticket the router cannot place goes to the agent,
  the fallback. :func:`compare_with_routing` adds the routed desk to
  :func:`~primer.scenarios.support.compare`'s table.
* Orchestrator-workers (:func:`handle_with_orchestrator`): a message with several problems
  is split at run time into one subtask per problem, each answered by a worker that sees
  only its part and the policy the orchestrator gave it, then combined into one reply.
  :func:`policies_needed` and :func:`policies_cited` say whether every problem was answered.

The scripted models read their prompts as a model would: the router answers a route name
(or, for a ticket of no known kind, a sentence that is not one); the orchestrator splits by
sentence and keeps one subtask per kind of problem (:func:`~primer.scenarios.support.classify`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from primer.harness.patterns.orchestrator import OrchestratorRun, orchestrate
from primer.harness.patterns.routing import Route, RoutingResult, route
from primer.loop.messages import Message, text_of
from primer.loop.model import ScriptedLLM

from .support import (
    AGENT_CONFIG,
    POLICIES,
    POLICY_BY_CATEGORY,
    TICKETS,
    Outcome,
    Ticket,
    classify,
    compare,
    handle_with_agent,
    handle_with_workflow,
)

# ---------------------------------------------------------------- routing

#: An order id named in a ticket ("order A123").
ORDER_ID = re.compile(r"\border [A-Z]\d+\b")
WORKFLOW_ROUTE = ("a ticket about refund timing, a late parcel, account access, a damaged "
                  "item or a return, that names no order")
AGENT_ROUTE = "a ticket that names an order (its answer needs the order's details)"


def _router_policy(messages: list[Message]) -> str:
    text = text_of(messages[-1]["content"]).rsplit("Input: ", 1)[-1]
    if ORDER_ID.search(text):
        return "agent"
    if classify(text) != "other":
        return "workflow"
    return "This ticket fits none of the routes."


def make_router_llm() -> ScriptedLLM:
    """The scripted router: ``agent`` for a ticket naming an order, ``workflow`` for a known
    kind, and a sentence that names no route for anything else."""
    return ScriptedLLM(_router_policy, name="support router")


def handle_with_routing(ticket: Ticket) -> tuple[RoutingResult, Outcome]:
    """Route one ticket (one router call), then run the workflow or the agent on it.

    Returns the routing and the ticket's :class:`~primer.scenarios.support.Outcome`, whose
    calls, tokens and dollars include the router's call.
    """
    routes = [Route("workflow", WORKFLOW_ROUTE, lambda _text: handle_with_workflow(ticket)),
              Route("agent", AGENT_ROUTE, lambda _text: handle_with_agent(ticket))]
    r = route(make_router_llm(), ticket.text, routes, fallback="agent",
              prices=AGENT_CONFIG.prices)
    o, usage = r.output, r.router_call.usage
    return r, Outcome(ticket.id, f"routed to {r.route}", o.reply, o.success,
                      o.model_calls + 1, o.input_tokens + usage.prompt_tokens,
                      o.output_tokens + usage.output_tokens, o.cost_usd + r.cost_usd)


def compare_with_routing(tickets: list[Ticket] | None = None) -> list[dict[str, Any]]:
    """:func:`~primer.scenarios.support.compare`'s rows (workflow, agent) and a third,
    ``routed``: every ticket through :func:`handle_with_routing`."""
    chosen = tickets or TICKETS
    outs = [handle_with_routing(t)[1] for t in chosen]
    return compare(chosen) + [{
        "approach": "routed", "tickets": len(outs),
        "model calls": sum(o.model_calls for o in outs),
        "input tokens": sum(o.input_tokens for o in outs),
        "output tokens": sum(o.output_tokens for o in outs),
        "cost USD": round(sum(o.cost_usd for o in outs), 6),
        "succeeded": sum(o.success for o in outs)}]


# ---------------------------------------------------------------- orchestrator-workers

#: A message with three problems of three kinds.
MULTI_TICKET = ("Hello. The mug I ordered arrived cracked. My other parcel was due on Monday "
                "and is still not here. And I cannot log in to check either of them.")
_SENTENCE = re.compile(r"(?<=[.?!])\s+")
_GREETING = "Thank you for writing to us. "


def _parts(text: str) -> dict[str, str]:
    """The first sentence of each known kind in ``text``: category → sentence."""
    parts: dict[str, str] = {}
    for sentence in _SENTENCE.split(text.strip()):
        kind = classify(sentence)
        if kind != "other":
            parts.setdefault(kind, sentence)
    return parts


def policies_needed(text: str) -> set[str]:
    """The policy ids a full answer to ``text`` must cite: one per kind of problem in it."""
    return {POLICY_BY_CATEGORY[k] for k in _parts(text)}


def policies_cited(reply: str | None) -> set[str]:
    """The policy ids ``reply`` cites in brackets (``[pol-damaged]``)."""
    return set(re.findall(r"\[(pol-[\w-]+)\]", reply or "")) & set(POLICIES)


def _orchestrator_policy(messages: list[Message]) -> str:
    prompt = text_of(messages[-1]["content"])
    if prompt.startswith("Split"):
        task = prompt.rsplit("Task: ", 1)[-1]
        return json.dumps([{"id": kind, "instruction": (
            f"Reply to this part of a customer's message, following the policy and citing "
            f"it by id in brackets.\n\nPolicy [{POLICY_BY_CATEGORY[kind]}]: "
            f"{POLICIES[POLICY_BY_CATEGORY[kind]]['text']}\n\nMessage: {sentence}")}
            for kind, sentence in _parts(task).items()])
    results = prompt.split("Results:\n", 1)[-1].splitlines()
    answers = [re.sub(r"^\[[\w-]+\] ", "", line) for line in results if line.strip()]
    return _GREETING + " ".join(answers)


def _worker_policy(messages: list[Message]) -> str:
    prompt = text_of(messages[-1]["content"])
    found = re.search(r"Policy \[([\w-]+)\]: (.*)", prompt)
    if found is None:
        return "I was given no policy to follow."
    return f"{found.group(2)} [{found.group(1)}]"


def make_orchestrator_llm() -> ScriptedLLM:
    """The scripted orchestrator: one subtask per kind of problem in the message, each with
    its policy; then one reply joining the workers' answers."""
    return ScriptedLLM(_orchestrator_policy, name="support orchestrator")


def make_worker_llm() -> ScriptedLLM:
    """The scripted worker: answers its one part from the policy in its instruction."""
    return ScriptedLLM(_worker_policy, name="support worker")


def handle_with_orchestrator(text: str = MULTI_TICKET, *, max_subtasks: int = 5
                             ) -> OrchestratorRun:
    """Answer a message with orchestrator-workers (see
    :func:`~primer.harness.patterns.orchestrator.orchestrate`), priced like the agent's runs."""
    return orchestrate(make_orchestrator_llm(), make_worker_llm(), text,
                       max_subtasks=max_subtasks, prices=AGENT_CONFIG.prices)


def multi_ticket_rows(text: str = MULTI_TICKET) -> list[dict[str, Any]]:
    """The fixed workflow and orchestrator-workers on one message with several problems:
    model calls, tokens, dollars and how many of the needed policies each reply cites."""
    needed = policies_needed(text)
    wf = handle_with_workflow(Ticket("multi", text, ""))
    orch = handle_with_orchestrator(text)
    return [{"approach": "workflow", "model calls": wf.model_calls,
             "tokens": wf.input_tokens + wf.output_tokens, "cost USD": round(wf.cost_usd, 6),
             "policies cited": f"{len(policies_cited(wf.reply) & needed)} of {len(needed)}"},
            {"approach": "orchestrator-workers", "model calls": orch.model_calls,
             "tokens": orch.usage.total_tokens, "cost USD": round(orch.cost_usd, 6),
             "policies cited": f"{len(policies_cited(orch.final_text) & needed)} of "
                               f"{len(needed)}"}]


__all__ = ["AGENT_ROUTE", "MULTI_TICKET", "WORKFLOW_ROUTE", "compare_with_routing",
           "handle_with_orchestrator", "handle_with_routing", "make_orchestrator_llm",
           "make_router_llm", "make_worker_llm", "multi_ticket_rows", "policies_cited",
           "policies_needed"]
