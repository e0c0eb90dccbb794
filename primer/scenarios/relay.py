"""The relay world: a chain of n dependent tool calls, for measuring how errors compound.

The task gives a start code and a number of hops. Each hop the model must call
``next_code(code)`` with the code the previous hop returned; after the last hop it answers
with the final code. Each code is derived from the one before it (a SHA-256 digest), so one
wrong call anywhere (a wrong argument, or the decoy tool ``peek_code``) leads to a wrong
final code: the run succeeds only if every step was right.

:class:`SkilledModel` is a scripted model that gets each step right with probability ``p``
(seeded per task). Over many tasks its measured success rate approaches ``p ** n``, the
compounding formula of :func:`primer.loop.cost`'s lesson: 0.95 per step over 10 steps
gives about 60% end to end.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any, cast

from primer.harness.evals.run import EvalTask
from primer.harness.evals.scorers import AnswerContains
from primer.loop.config import AgentConfig
from primer.loop.messages import Message, ToolResultBlock
from primer.loop.model import ScriptedLLM, tool_reply
from primer.loop.tools import Tool, tool


def _digest(text: str) -> str:
    return "R" + hashlib.sha256(text.encode()).hexdigest()[:6].upper()


@tool
def next_code(code: str) -> str:
    """Return the code that follows ``code`` in the relay. Use it once per hop, passing the
    code the previous hop returned (or the start code for the first hop).

    Args:
        code: the current code, e.g. "R0001".
    """
    return _digest(code)


@tool
def peek_code(code: str) -> str:
    """Preview a code without moving along the relay (never needed to finish the task).

    Args:
        code: the code to preview.
    """
    return _digest(code + "/peek")


def make_tools(task: EvalTask | None = None) -> list[Tool]:
    """The relay's tools (stateless; ``task`` is accepted so this works as an eval factory)."""
    return [next_code, peek_code]


def start_code(seed: int) -> str:
    """The start code of task ``seed``."""
    return f"R{seed:05d}"


def final_code(start: str, hops: int) -> str:
    """The right answer: ``next_code`` applied ``hops`` times to ``start``."""
    code = start
    for _ in range(hops):
        code = _digest(code)
    return code


def relay_task(seed: int, hops: int, **meta: Any) -> EvalTask:
    """An eval task: follow the relay for ``hops`` hops from task ``seed``'s start code.

    The check is that the answer holds the right final code; the expected path is
    ``next_code`` ``hops`` times. Limits: ``hops + 1`` model calls, no token budget, no
    tool timeout (the tools are instant).
    """
    start = start_code(seed)
    limits: dict[str, Any] = {"max_steps": hops + 1, "token_budget": None}
    if "tool_timeout_s" in AgentConfig.__dataclass_fields__:
        limits["tool_timeout_s"] = None  # instant tools: run them in the loop's own thread
    return EvalTask(
        name=f"relay-{hops}-{seed}",
        input=(f"Start from code {start} and follow the relay for {hops} hops: each hop, call "
               f"next_code with the current code. Answer with the final code."),
        check=AnswerContains(final_code(start, hops)),
        expected_path=["next_code"] * hops,
        limits=limits,
        meta={"world": "relay", "seed": seed, "hops": hops, **meta})


@dataclass(frozen=True)
class SkilledModel:
    """A model factory: each step right with probability ``p``, else a wrong call.

    ``SkilledModel(p)(task)`` returns a fresh :class:`ScriptedLLM` for a relay task. Its
    choices are drawn up front from ``random.Random(task.meta["seed"])`` (so a task always
    plays out the same way), or, for a repeated trial (``task.meta["trial"]`` > 0), from a
    generator seeded by the seed and the trial, so each trial is a fresh draw, as a
    sampled model's would be: for each of the ``hops`` steps, right with probability ``p``;
    a wrong step is, with equal odds, ``next_code`` with a wrong argument (the path still
    looks right) or the decoy ``peek_code`` (the path is wrong too). The model never
    notices its mistakes, so the run succeeds only when all steps were right. Picklable, so
    it can go to a process pool. Raises ``ValueError`` for ``p`` outside [0, 1].
    """

    p: float

    def __post_init__(self) -> None:
        if not 0 <= self.p <= 1:
            raise ValueError(f"SkilledModel: p is a probability in [0, 1] (got {self.p})")

    def __call__(self, task: EvalTask) -> ScriptedLLM:
        seed, hops = int(task.meta["seed"]), int(task.meta["hops"])
        trial = int(task.meta.get("trial", 0))
        rng = random.Random(seed if trial == 0 else f"{seed}/{trial}")
        plan = [None if rng.random() < self.p else rng.choice(["argument", "tool"])
                for _ in range(hops)]
        start = start_code(seed)

        def policy(messages: list[Message]) -> Any:
            done = sum(1 for m in messages if m["role"] == "user" and isinstance(m["content"],
                                                                                    list))
            # after a call, the last message is the turn of results, led by its result
            code = (cast(list[ToolResultBlock], messages[-1]["content"])[0]["content"] if done
                    else start)
            if done >= hops:
                return f"The final code is {code}."
            mistake = plan[done]
            if mistake == "argument":
                return tool_reply(("next_code", {"code": code + "0"}))
            if mistake == "tool":
                return tool_reply(("peek_code", {"code": code}))
            return tool_reply(("next_code", {"code": code}))

        return ScriptedLLM(policy, name=f"relay model (p={self.p})")


def relay_llm(task: EvalTask) -> ScriptedLLM:
    """Eval factory: a :class:`SkilledModel` with the task's own ``meta["p"]``."""
    return SkilledModel(float(task.meta["p"]))(task)
