"""The harness's own time on AgentDojo's tasks, beside AgentDojo's own tool loop.

Both sides replay the same ground truth, one call a reply, on fresh copies of the same
environments, and run the same tools (AgentDojo's runtime and its YAML formatting):
:func:`primer_side` through :func:`~primer.harness.production.run_production` with the
suite's limits (the default 30 s limit on each tool call included), :func:`agentdojo_side`
through AgentDojo's ``ToolsExecutionLoop`` and ``ToolsExecutor`` with a pipeline element that
plays the same replies. What differs is each loop's own work per model call: ours checks
each input against its ``input_schema``, estimates tokens, checks budgets, stop reasons,
repeats and approval, and times each call. The environments are copied before the clock
starts. ``make bench`` prints the ratio (:mod:`primer.commands.bench`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.messages import Block, Message
from primer.loop.model import Reply, Usage

from .replay import answer_text, replay_llm
from .world import DojoWorld, agentdojo_system_prompt, get_suite, suite_limits, user_tasks

#: The suites the benchmark replays (workspace's environment alone takes half a second to
#: load and tens of ms to copy per task, which neither loop's figure includes anyway).
BENCH_SUITES = ("banking", "slack", "travel", "workspace")


def worlds(suites: Sequence[str] = BENCH_SUITES) -> list[DojoWorld]:
    """A fresh world for every user task of ``suites``."""
    made = []
    for name in suites:
        suite = get_suite(name)
        made += [DojoWorld.new(suite, tid) for tid in user_tasks(suite)]
    return made


def primer_side(batch: Sequence[DojoWorld]) -> tuple[float, int]:
    """Seconds (CPU time of this process) and model calls of replaying each world's ground
    truth through ``run_production``."""
    runs = [(w, PrebuiltReplay(w), w.tools(), AgentConfig(**suite_limits(w.suite)))
            for w in batch]
    system = agentdojo_system_prompt()
    calls = 0
    start = time.process_time()
    for w, llm, tools, config in runs:
        result = run_production(llm, w.task.PROMPT, tools, system=system, config=config)
        calls += len(result.steps)
    return time.process_time() - start, calls


def agentdojo_side(batch: Sequence[DojoWorld]) -> tuple[float, int]:
    """Seconds (CPU time) and model calls of replaying each world's ground truth through
    AgentDojo's own pipeline: its system message, the query, then its ``ToolsExecutionLoop``
    of ``ToolsExecutor`` and the replaying element."""
    from agentdojo.agent_pipeline.agent_pipeline import AgentPipeline
    from agentdojo.agent_pipeline.basic_elements import InitQuery, SystemMessage
    from agentdojo.agent_pipeline.tool_execution import ToolsExecutionLoop, ToolsExecutor
    from agentdojo.functions_runtime import FunctionsRuntime

    system = agentdojo_system_prompt()
    runs = []
    for w in batch:
        element = _replaying_element(w)
        pipeline = AgentPipeline([SystemMessage(system), InitQuery(), element,
                                  ToolsExecutionLoop([ToolsExecutor(), element], max_iters=64)])
        runs.append((w, pipeline, element))
    start = time.process_time()
    for w, pipeline, _ in runs:
        pipeline.query(w.task.PROMPT, FunctionsRuntime(w.suite.tools), w.env)
    seconds = time.process_time() - start
    return seconds, sum(element.calls for _, _, element in runs)


class PrebuiltReplay:
    """:func:`~.replay.replay_llm`'s replies (one call a reply), built before the run, each
    with a fixed :class:`Usage`: a model that costs as little as the replaying element on
    AgentDojo's side, so the figure is the loop's own (the scripted model's token estimate
    of each request is model work, not the harness's)."""

    def __init__(self, world: DojoWorld) -> None:
        script = replay_llm(world).script
        assert isinstance(script, list)  # replay_llm scripts a list of replies
        usage = Usage(1_000, 50)
        self.replies = [Reply([cast(Block, {**b, "id": b.get("id") or f"toolu_{n}"})
                               for b in r.content], r.stop_reason, usage, "replay")
                        for n, r in enumerate(script, start=1)]
        self.calls = 0

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int) -> Reply:
        self.calls += 1
        return self.replies[self.calls - 1]


def _replaying_element(world: DojoWorld) -> Any:
    """An AgentDojo pipeline element that plays ``world``'s ground truth, one call a reply,
    then the answer (AgentDojo's own ``GroundTruthPipeline`` runs the tools itself, so it is
    no loop to measure)."""
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.types import ChatAssistantMessage, text_content_block_from_string

    class Replaying(BasePipelineElement):
        def __init__(self) -> None:
            self.todo = list(world.ground_truth)
            self.calls = 0

        def query(self, query: str, runtime: Any, env: Any = None,
                  messages: Sequence[Any] = (), extra_args: dict[str, Any] | None = None
                  ) -> tuple[Any, ...]:
            self.calls += 1
            if self.todo:
                call = self.todo.pop(0)
                reply = ChatAssistantMessage(role="assistant", tool_calls=[call],
                                             content=[text_content_block_from_string("")])
            else:
                text = answer_text(world.task.GROUND_TRUTH_OUTPUT)
                reply = ChatAssistantMessage(role="assistant", tool_calls=None,
                                             content=[text_content_block_from_string(text)])
            return query, runtime, env, [*messages, reply], extra_args or {}

    return Replaying()


def tools_side(batch: Sequence[DojoWorld]) -> tuple[float, int]:
    """Seconds (CPU time) of the tools' own work alone (AgentDojo's runtime and its YAML),
    each world's ground-truth calls made directly, and the model calls a loop would make."""
    start = time.process_time()
    for w in batch:
        for call in w.ground_truth:
            w.call(call.function, dict(call.args))
    return time.process_time() - start, sum(len(w.ground_truth) + 1 for w in batch)


#: The sides :func:`loops_side_by_side` measures, in the order they run in each round.
SIDES = {"primer": primer_side, "agentdojo": agentdojo_side, "tools": tools_side}


def loops_side_by_side(rounds: int = 3, suites: Sequence[str] = BENCH_SUITES
                 ) -> dict[str, list[float]]:
    """µs per model call (CPU) of each of :data:`SIDES` in each of ``rounds`` rounds, the
    sides in turn (A B C A B C ...), each on fresh worlds: ``{"primer": [...], ...}``."""
    figures: dict[str, list[float]] = {name: [] for name in SIDES}
    for _ in range(rounds):
        for name, side in SIDES.items():
            seconds, calls = side(worlds(suites))
            figures[name].append(seconds / calls * 1e6)
    return figures
