"""Offline models for AgentDojo's tasks: the ground truth replayed, and an attacked model.

:func:`replay_llm` plays a task's ground-truth calls, then its ``GROUND_TRUTH_OUTPUT`` as
the answer, in one of three :data:`MODES`: ``"sequential"`` (one call a reply, as
AgentDojo's own ground-truth pipeline plays them), ``"batched"`` (each run of consecutive
read-only calls in one reply, run concurrently; a side-effecting call in a reply of its own,
so nothing that changes the environment runs beside a call that reads it) and ``"all"``
(every call in one reply). Each is a :class:`~primer.loop.model.ScriptedLLM`: usage by the
course's token estimate, deterministic, and it fails loudly if asked for more replies.

:class:`AttackedModel` is the scripted stand-in for a model that falls for a prompt
injection: it plays the user task's ground truth one call a reply, and as soon as a tool
result holds the planted instruction (:data:`MARKER`) it plays the injection task's own
ground-truth calls, then goes back to the user's task. A real model may resist or follow
only in part; this one always follows, so what a guard stops is the guard's doing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from primer.loop.messages import Message
from primer.loop.model import LLM, Reply, ScriptedLLM, text_reply, tool_reply

from ..run import EvalTask
from .world import SIDE_EFFECTING, DojoWorld, trial_world

if TYPE_CHECKING:
    from agentdojo.functions_runtime import FunctionCall

#: How the replay groups the ground-truth calls into replies.
MODES = ("sequential", "batched", "all")
#: The tag AgentDojo's "important instructions" attack wraps its instruction in; a tool
#: result holding it carries the planted instruction.
MARKER = "<INFORMATION>"
#: The answer when a task's ``GROUND_TRUTH_OUTPUT`` is empty (an empty text block is not a
#: valid reply for the Messages API).
EMPTY_ANSWER = "Done."


def batches(calls: Sequence[FunctionCall], mode: str = "sequential") -> list[list[FunctionCall]]:
    """``calls`` grouped into replies for ``mode`` (see :data:`MODES`); ``ValueError`` for an
    unknown mode."""
    if mode not in MODES:
        raise ValueError(f"unknown replay mode {mode!r}; choose one of {', '.join(MODES)}")
    if mode == "sequential":
        return [[c] for c in calls]
    if mode == "all":
        return [list(calls)] if calls else []
    groups: list[list[FunctionCall]] = []
    for c in calls:
        if c.function in SIDE_EFFECTING or not groups or groups[-1][-1].function in SIDE_EFFECTING:
            groups.append([c])
        else:
            groups[-1].append(c)
    return groups


def answer_text(text: str) -> str:
    """A task's ground-truth answer, or :data:`EMPTY_ANSWER` for an empty one."""
    return text if text.strip() else EMPTY_ANSWER


def call_reply(calls: Sequence[FunctionCall]) -> Reply:
    """One reply asking for ``calls`` (ids filled in by the scripted model)."""
    return tool_reply(*[(c.function, dict(c.args)) for c in calls])


def replay_llm(world: DojoWorld, mode: str = "sequential") -> ScriptedLLM:
    """A model that plays ``world``'s ground truth in ``mode``, then its answer."""
    script: list[Reply] = [call_reply(b) for b in batches(world.ground_truth, mode)]
    script.append(text_reply(answer_text(world.task.GROUND_TRUTH_OUTPUT)))
    return ScriptedLLM(script, name=f"ground-truth replay ({mode})")


class ReplayModels:
    """The model factory for :func:`~.world.eval_tasks`' tasks: a fresh ground-truth replay
    of the trial's world, in ``mode``. Picklable (a process pool's trials)."""

    def __init__(self, mode: str = "sequential") -> None:
        batches([], mode)  # ValueError for an unknown mode, now rather than per trial
        self.mode = mode

    def __call__(self, task: EvalTask) -> LLM:
        return replay_llm(trial_world(task), self.mode)


def _result_texts(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("content", "")) for b in content or ()
                     if isinstance(b, dict) and b.get("type") == "tool_result")


class AttackedModel:
    """A scripted model that follows a planted instruction (see the module docstring).

    ``world`` must carry an injection task. ``followed``: whether it has read the marker and
    played the attacker's calls. A :class:`~primer.loop.model.ScriptedLLM` underneath gives
    the usage; call it as any :class:`~primer.loop.model.LLM`.
    """

    def __init__(self, world: DojoWorld) -> None:
        if world.injection is None:
            raise ValueError("AttackedModel needs a world with an injection task")
        self.todo: list[FunctionCall] = list(world.ground_truth)
        self.attack = list(world.injection.ground_truth(world.pre_env.model_copy(deep=True)))
        self.answer = answer_text(world.task.GROUND_TRUTH_OUTPUT)
        self.followed = False
        self.llm = ScriptedLLM(self._next, name="attacked model (scripted)")

    def _next(self, messages: list[Message]) -> Reply:
        last = messages[-1] if messages else None
        if (not self.followed and last is not None and last.get("role") == "user"
                and MARKER in _result_texts(last)):
            self.followed = True
            self.todo = self.attack + self.todo
        if not self.todo:
            return text_reply(self.answer)
        return call_reply([self.todo.pop(0)])

    def __call__(self, **request: Any) -> Reply:
        return self.llm(**request)

