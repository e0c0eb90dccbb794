"""Routing: one model call classifies the input, and code sends it down the path for its kind.

The workflow pattern Anthropic's "Building effective agents" (2024) calls *routing*: each
kind of input gets its own specialised handler (a fixed workflow, a cheaper model, an agent,
a person), and a single classification call picks which. The path after the choice is fixed
in code, so every route can be built and tested on its own; the router's one call is the
only extra cost. An answer that names no route goes to the ``fallback`` route, never
nowhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from primer.loop.model import LLM, Prices

from .workflows import ModelCalls, PatternCall

#: The router's prompt: the routes (name and description), then the input.
ROUTER_PROMPT = ("Pick the route that fits the input. Answer with the route's name only.\n\n"
                 "Routes:\n{routes}\n\nInput: {text}")


@dataclass(frozen=True)
class Route:
    """One path: ``name`` (what the router answers), ``description`` (what the router reads
    to choose) and ``handle(text)``, the code that runs for inputs sent here (its return
    value is the routing's ``output``)."""

    name: str
    description: str
    handle: Callable[[str], Any]


@dataclass
class RoutingResult:
    """Where one input went: the ``route`` taken, the router's raw ``answer``, whether it
    named no route (``fell_back``, then ``route`` is the fallback), the handler's ``output``
    and the router's one model call (``router_call``; ``cost_usd`` its dollars)."""

    route: str
    answer: str
    fell_back: bool
    output: Any
    router_call: PatternCall
    cost_usd: float


def route(llm: LLM, text: str, routes: Sequence[Route], *, fallback: str,
          system: str = "", prices: Prices | None = None) -> RoutingResult:
    """Ask ``llm`` once which of ``routes`` fits ``text``, then run that route's handler.

    The answer is matched to a route name ignoring case, blanks and a final full stop; an
    answer that matches none sends the input to the route named ``fallback``. Costs one
    model call (priced at ``prices``) plus whatever the handler spends. Raises
    ``ValueError`` for no routes, two routes with one name or a ``fallback`` that is not a
    route's name; :class:`~primer.harness.patterns.workflows.PatternError` when the router's
    reply is
    cut off or refused; a handler's own exception propagates.
    """
    names = [r.name for r in routes]
    if not routes or len(set(names)) != len(names):
        raise ValueError(f"routes need distinct names, got {names}")
    by_name = {r.name.lower(): r for r in routes}
    if fallback.lower() not in by_name:
        raise ValueError(f"fallback {fallback!r} is not a route; routes: {', '.join(names)}")
    calls = ModelCalls(llm, prices)
    listing = "\n".join(f"- {r.name}: {r.description}" for r in routes)
    answer = calls.ask(ROUTER_PROMPT.format(routes=listing, text=text), system=system,
                       label="route")
    chosen = by_name.get(answer.strip().rstrip(".").strip().lower())
    taken = chosen or by_name[fallback.lower()]
    return RoutingResult(taken.name, answer, chosen is None, taken.handle(text),
                         calls.records[0], calls.cost_usd)
