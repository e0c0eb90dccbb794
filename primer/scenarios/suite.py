"""The built-in eval suite: the course's scenarios as eval tasks, plus relay tasks.

The scenario tasks live in ``builtin_suite.yaml`` beside this file, in the suite-file format
of :mod:`primer.harness.evals.suite`; a task that names a demo in ``meta`` (``world: demo``,
``demo: NAME``) takes its input, system prompt and limits from that demo
(:func:`complete_from_demo`). Each is judged the way a person would:

* the order demos must answer 5900 rupees via ``get_order``, ``get_order`` (the first call
  has a wrong argument name, read and fixed), ``calculator``; the demos whose models
  repeat, wander or run out of budget fail this, which is the point;
* ``pto`` must give alice's 12 days and cite ``[hr-001]``, calling ``search_kb`` and
  ``get_pto_balance`` in any order (they run in parallel).

Relay tasks (:mod:`primer.scenarios.relay`) add a chain whose models are right each step
with probability ``p``. :func:`suite_llm` and :func:`suite_tools` are module-level
factories, so the suite runs on a process pool too. :func:`scripted_judge` is an offline
stand-in for a judge model, for :class:`~primer.harness.evals.scorers.ModelGraded` checks.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from primer.harness.evals.run import EvalTask
from primer.harness.evals.suite import load_suite
from primer.loop.messages import Message, text_of
from primer.loop.model import LLM, Reply, ScriptedLLM, Usage, estimate_tokens
from primer.loop.tools import Tool

from . import get_demo
from .relay import make_tools as relay_tools
from .relay import relay_llm, relay_task

#: The scenario tasks of the built-in suite.
BUILTIN_SUITE = Path(__file__).with_name("builtin_suite.yaml")


def complete_from_demo(raw: dict[str, Any]) -> dict[str, Any]:
    """Fill a suite-file task that names a demo (``meta: {world: demo, demo: NAME}``) with
    the demo's input and system prompt (when the task has none) and its limits (the task's
    own limits win). Other tasks are returned as they are. ``ValueError`` for an unknown
    demo."""
    meta = raw.get("meta") or {}
    if not isinstance(meta, dict) or meta.get("world") != "demo":
        return raw
    try:
        demo = get_demo(str(meta.get("demo")))
    except KeyError as e:
        raise ValueError(f"meta.demo: {e.args[0] if e.args else e}") from None
    return {"input": demo.task, "system": demo.system, **raw,
            "limits": {**demo.config.to_dict(), **(raw.get("limits") or {})}}


def load_suite_file(path: str | os.PathLike[str], *, judge: LLM | None = None
                    ) -> list[EvalTask]:
    """:func:`~primer.harness.evals.suite.load_suite` with demo tasks completed from their
    demo (so a suite file may name a demo instead of repeating its task text)."""
    return load_suite(path, judge=judge, complete=complete_from_demo)


def demo_task(name: str) -> EvalTask:
    """The built-in task for demo ``name`` (``KeyError`` when the suite has none for it)."""
    for task in load_suite_file(BUILTIN_SUITE):
        if task.name == name:
            return task
    raise KeyError(f"the built-in suite has no task for demo {name!r}")


def builtin_suite(relay_tasks: int = 20, hops: int = 5, p: float = 0.9) -> list[EvalTask]:
    """Every built-in demo task, then ``relay_tasks`` relay tasks of ``hops`` hops."""
    tasks = load_suite_file(BUILTIN_SUITE)
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


#: What the scripted judge requires of an answer: numbers and [bracketed ids] in the criteria.
_REQUIRED = re.compile(r"\[[^\]\s]+\]|\d[\d,.]*\d|\d")


def _judge_policy(messages: list[Message]) -> Reply:
    prompt = text_of(messages[-1]["content"])
    answer = prompt.split("\n\nAnswer:\n", 1)[-1].split("\n\nCriteria:\n", 1)[0]
    criteria = prompt.rsplit("\n\nCriteria:\n", 1)[-1]
    if answer.startswith("(no answer"):
        text = "FAIL. The run gave no answer."
    else:
        missing = [t for t in _REQUIRED.findall(criteria) if t not in answer]
        text = (f"FAIL. The answer does not state {', '.join(missing)}." if missing else
                "PASS. The answer states every figure and source the criteria name.")
    return Reply([{"type": "text", "text": text}], "end_turn",
                 Usage(estimate_tokens(prompt), estimate_tokens(text)), "scripted-judge")


def scripted_judge() -> ScriptedLLM:
    """An offline judge for :class:`~primer.harness.evals.scorers.ModelGraded`: a rule, not a model.

    It answers PASS when the answer holds every number and every ``[bracketed id]`` the
    criteria name, FAIL (naming what is missing) otherwise, and FAIL when the run gave no
    answer. It shows the judge's plumbing (prompt, PASS/FAIL, reason) offline; it cannot
    judge what a rule cannot see (tone, whether the reasoning holds), which is what a real
    judge model is for. Stateless, so one judge may serve many tasks at once.
    """
    return ScriptedLLM(_judge_policy, model="scripted-judge", name="scripted judge")
