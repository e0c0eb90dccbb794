"""The built-in eval suite: the course's scenarios as eval tasks, plus relay tasks.

Each scenario demo becomes one task (its task text, system prompt and limits), with the
check a person would apply to its answer and the tool path a good run takes:

* the order demos must answer 5900 rupees via ``get_order``, ``get_order`` (the first call
  has a wrong argument name, read and fixed), ``calculator``; the demos whose models
  repeat, wander or run out of budget fail this, which is the point;
* ``pto`` must give alice's 12 days and cite ``[hr-001]``, calling ``search_kb`` and
  ``get_pto_balance`` in any order (they run in parallel).

Relay tasks (:mod:`primer.scenarios.relay`) add a chain whose models are right each step
with probability ``p``. :func:`suite_llm` and :func:`suite_tools` are module-level
factories, so the suite runs on a process pool too.
"""

from __future__ import annotations

from primer.agents import LLM, AnswerContains, EvalTask, Tool

from . import all_demos, get_demo
from .relay import make_tools as relay_tools
from .relay import relay_llm, relay_task

#: demo name → (check, expected tool path) for the demos the suite knows how to judge.
DEMO_CHECKS = {
    "orders": (AnswerContains("5900"), ["get_order", "get_order", "calculator"]),
    "orders-repeat": (AnswerContains("5900"), ["get_order", "get_order", "calculator"]),
    "orders-wander": (AnswerContains("5900"), ["get_order", "get_order", "calculator"]),
    "orders-budget": (AnswerContains("5900"), ["get_order", "get_order", "calculator"]),
    "pto": (AnswerContains("12", "[hr-001]"), frozenset({"search_kb", "get_pto_balance"})),
}


def demo_task(name: str) -> EvalTask:
    """The eval task for demo ``name`` (``KeyError`` when the suite has no check for it)."""
    check, path = DEMO_CHECKS[name]
    demo = get_demo(name)
    return EvalTask(name=name, input=demo.task, check=check, expected_path=path,
                    limits=demo.config.to_dict(), system=demo.system,
                    meta={"world": "demo", "demo": name})


def builtin_suite(relay_tasks: int = 20, hops: int = 5, p: float = 0.9) -> list[EvalTask]:
    """Every registered demo with a check, then ``relay_tasks`` relay tasks of ``hops`` hops."""
    demos = all_demos()
    tasks = [demo_task(n) for n in DEMO_CHECKS if n in demos]
    tasks += [relay_task(seed, hops, p=p) for seed in range(relay_tasks)]
    return tasks


def suite_llm(task: EvalTask) -> LLM:
    """A fresh model for a suite task: the demo's scripted model, or a relay model."""
    if task.meta.get("world") == "relay":
        return relay_llm(task)
    return get_demo(task.meta["demo"]).make_llm()


def suite_tools(task: EvalTask) -> list[Tool]:
    """Fresh tools for a suite task."""
    if task.meta.get("world") == "relay":
        return relay_tools(task)
    return get_demo(task.meta["demo"]).make_tools()
