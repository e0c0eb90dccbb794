"""Which AgentDojo tasks a config would stop: the suite's ground truth run under its limits.

Every task of a suite runs with :func:`~.world.suite_limits`, made from the suite's own
longest ground truth. :func:`would_stop` runs the ground-truth replay of each task under a
config of your own instead (``AgentConfig()`` by default) and names the tasks it stops and
why: the replay takes the fewest model calls a task needs, so a config that stops it will
stop a real model sooner. Token figures are the course's estimate (characters / 4), not a
tokenizer's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from primer.harness.production import run_production
from primer.loop.config import AgentConfig

from .replay import replay_llm
from .world import (
    DEFAULT_VERSION,
    DojoWorld,
    agentdojo_system_prompt,
    get_suite,
    longest_ground_truth,
    suite_limits,
    user_tasks,
)


def would_stop(name: str, version: str = DEFAULT_VERSION, config: AgentConfig | None = None,
               *, mode: str = "sequential", only: Sequence[str] | None = None
               ) -> list[tuple[str, str, str]]:
    """``(task id, stop cause, detail)`` for each task of suite ``name`` whose ground-truth
    replay (in ``mode``) does not end with ``end_turn`` under ``config`` (default a plain
    ``AgentConfig()``, without the ``handoff_to_human`` tool AgentDojo's models lack).
    ``only``: these task ids."""
    config = config or replace(AgentConfig(), offer_handoff=False)
    suite = get_suite(name, version)
    stopped = []
    for tid in user_tasks(suite):
        if only is not None and tid not in only:
            continue
        world = DojoWorld.new(suite, tid)
        result = run_production(replay_llm(world, mode), world.task.PROMPT, world.tools(),
                                system=agentdojo_system_prompt(), config=config)
        if result.stop_cause.value != "end_turn":
            stopped.append((tid, result.stop_cause.value, result.summary))
    return stopped


def limits_report(name: str, version: str = DEFAULT_VERSION,
                  only: Sequence[str] | None = None) -> str:
    """A few lines: the limits suite ``name``'s tasks ran with and where they come from, and
    which tasks a plain ``AgentConfig()`` would stop (:func:`would_stop`)."""
    suite = get_suite(name, version)
    longest, calls = longest_ground_truth(suite)
    limits = suite_limits(suite)
    lines = [f"limits: every {name} task ran with max_steps={limits['max_steps']} (twice the "
             f"{calls + 1} model calls of the suite's longest ground truth, {name}/{longest}: "
             f"{calls} calls and the answer), no token budget, no handoff_to_human tool"]
    plain = AgentConfig()
    stopped = would_stop(name, version, only=only)
    head = (f"a plain AgentConfig() (max_steps={plain.max_steps}, token_budget="
            f"{plain.token_budget:,})")
    if not stopped:
        lines.append(f"{head} stops none of these tasks' ground truth")
    else:
        lines.append(f"{head} would stop the ground truth, replayed one call a reply, of "
                     f"{_tasks(len(stopped))}:")
        lines += [f"  {name}/{tid}: {cause}" for tid, cause, _ in stopped]
    lifted = replace(plain, offer_handoff=False, max_steps=10_000)
    budget = would_stop(name, version, lifted, only=only)
    if budget:
        lines.append(f"with max_steps out of the way, its token_budget alone (by the course's "
                     f"estimate) would stop {_tasks(len(budget))}: "
                     + ", ".join(f"{name}/{tid} ({cause})" for tid, cause, _ in budget))
    return "\n".join(lines)


def _tasks(n: int) -> str:
    return f"{n} task{'s' if n != 1 else ''}"
