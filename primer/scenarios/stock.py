"""Stock across warehouses: the async world of lesson 15.

Task: how many KB-100 keyboards are in stock across the eight warehouses? The one tool,
``check_stock(warehouse)``, is an ``async def`` function that waits its warehouse's
latency (seeded, :data:`LATENCIES`, times a time scale) with ``asyncio.sleep`` and returns
the count. The scripted model asks for every warehouse it has no count for, all in one
reply (a fan-out), then answers with the total, so a run continued after a cancel asks
again only for the warehouses whose calls did not finish. Its replies carry a short
extended-thinking block when made with ``thinking=True``.

:func:`make_tools` can also make a person press stop: ``press_stop`` (an event with
``set()``) is set when the call for ``stop_at`` starts, so the stop comes while it runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from primer.harness.streaming import StreamingScriptedLLM
from primer.loop.config import AgentConfig
from primer.loop.messages import Message
from primer.loop.model import Reply, ScriptedLLM, text_reply, tool_reply
from primer.loop.tools import Tool, ToolError, tool
from primer.scenarios import Scenario
from primer.scenarios.parallel import SEED, seeded_latencies
from primer.scenarios.policy import all_observations

SKU = "KB-100"
TASK = f"How many {SKU} keyboards do we have in stock across all our warehouses?"
SYSTEM = ("You answer stock questions. Check every warehouse with check_stock, all at once, "
          "and add the counts up.")
#: Units of KB-100 in each warehouse, in the order the model asks for them.
STOCK = {"Pune": 12, "Chennai": 7, "Delhi": 0, "Kolkata": 15, "Mumbai": 9, "Hyderabad": 4,
         "Jaipur": 11, "Lucknow": 6}
WAREHOUSES = tuple(STOCK)
#: Seconds each warehouse takes to answer at time scale 1 (seeded: lesson 06's seed).
LATENCIES = dict(zip(WAREHOUSES, seeded_latencies(len(STOCK), 0.2, 1.2, seed=SEED),
                     strict=True))
#: The time scale the demo and the lesson run at (every wait times this).
TIME_SCALE = 0.05

FAN_OUT_THOUGHT = "I need every warehouse's count; they do not depend on each other."
ANSWER_THOUGHT = "All counts are in; add them up."


def make_tools(time_scale: float = TIME_SCALE, *, press_stop: Any = None,
               stop_at: str | None = None, finished: list[str] | None = None) -> list[Tool]:
    """The world's one tool, ``check_stock``, an ``async def`` function.

    Each call waits ``LATENCIES[warehouse] × time_scale`` seconds. ``finished``, if given,
    collects the warehouses in the order their calls finished. ``press_stop.set()`` is
    called when the call for ``stop_at`` starts (a person pressing stop while it runs).
    """

    @tool
    async def check_stock(warehouse: str) -> dict:
        """Count the KB-100 keyboards in stock in one warehouse.

        Args:
            warehouse: the warehouse's city, e.g. Pune
        """
        if warehouse not in STOCK:
            raise ToolError(f"no warehouse {warehouse!r}; the warehouses are "
                            f"{', '.join(WAREHOUSES)}")
        if press_stop is not None and warehouse == stop_at:
            press_stop.set()
        await asyncio.sleep(LATENCIES[warehouse] * time_scale)
        if finished is not None:
            finished.append(warehouse)
        return {"warehouse": warehouse, "sku": SKU, "units": STOCK[warehouse]}

    return [check_stock]


def counted(messages: list[Message]) -> dict[str, int]:
    """The counts the history holds so far, by warehouse (the calls that succeeded)."""
    out: dict[str, int] = {}
    for o in all_observations(messages):
        if o.name == "check_stock" and not o.is_error and isinstance(o.input, dict):
            out[str(o.input.get("warehouse"))] = STOCK[str(o.input.get("warehouse"))]
    return out


def policy(messages: list[Message], thinking: bool = False) -> Reply:
    """Ask for every warehouse without a count, in one reply; once all are in, answer."""
    have = counted(messages)
    missing = [w for w in WAREHOUSES if w not in have]
    if missing:
        return tool_reply(*[("check_stock", {"warehouse": w}) for w in missing],
                          text=f"Checking {len(missing)} warehouses at once.",
                          thinking=FAN_OUT_THOUGHT if thinking else None)
    return text_reply(answer(), thinking=ANSWER_THOUGHT if thinking else None)


def answer() -> str:
    """The model's final answer."""
    return (f"We have {sum(STOCK.values())} {SKU} keyboards in stock across "
            f"{len(STOCK)} warehouses.")


def make_llm(*, stream: bool = False, thinking: bool = False,
             model: str = "scripted") -> ScriptedLLM:
    """A fresh scripted model for the world (streaming, thinking as asked)."""
    kind = StreamingScriptedLLM if stream else ScriptedLLM
    return kind(lambda messages: policy(messages, thinking), name="stock model", model=model)


#: The world as a :class:`~primer.scenarios.Scenario` (not a registered demo: its model adds
#: the counts up itself, the kind of unchecked arithmetic ``diagnose`` rightly flags).
SCENARIO = Scenario(name="stock", description="counts stock in eight warehouses at once with "
                    "an async def tool (lesson 15)", task=TASK, make_tools=make_tools,
                    make_llm=make_llm, system=SYSTEM, config=AgentConfig())
