"""Back-of-the-envelope estimates: what lesson 07 and the design round compute from the costs.

Built on the core's token and dollar arithmetic (:mod:`primer.loop.cost`): what trimming
tool results saves (:func:`trim_savings`), what a multi-agent system and a day of
tasks cost (:func:`multi_agent_cost_usd`, :func:`daily_cost_usd`), how per-step success
compounds (:func:`end_to_end_success`), what checks between stages buy
(:func:`staged_success`) and how much of a context window a run fills
(:func:`context_budget`, :func:`steps_to_fill`). Prices are USD per million tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from primer.loop.cost import cumulative_input_tokens


@dataclass(frozen=True)
class Savings:
    """Input tokens before and after a change, and the share saved (``saved`` in 0..1)."""

    before: int
    after: int

    @property
    def saved(self) -> float:
        """``1 − after / before``: the fraction of input tokens the change removed."""
        return 1 - self.after / self.before if self.before else 0.0


def trim_savings(calls: int, base: int, model_per_step: int, tool_per_step: int,
                 trimmed_tool_per_step: int, *, history_on_first_call: bool = False) -> Savings:
    """Input tokens of a run before and after trimming each tool result (tokens).

    A step adds ``model_per_step + tool_per_step`` tokens of history; trimming cuts each tool
    result to ``trimmed_tool_per_step``. Both totals come from
    :func:`cumulative_input_tokens`. Raises ``ValueError`` when the trim would grow a result.
    """
    if trimmed_tool_per_step > tool_per_step:
        raise ValueError(f"trimmed_tool_per_step ({trimmed_tool_per_step}) must not exceed "
                         f"tool_per_step ({tool_per_step}): trimming makes results shorter")
    kw = {"history_on_first_call": history_on_first_call}
    return Savings(
        cumulative_input_tokens(calls, base, model_per_step + tool_per_step, **kw),
        cumulative_input_tokens(calls, base, model_per_step + trimmed_tool_per_step, **kw))


#: Tokens a multi-agent system (an orchestrator and sub-agents) uses per task, as a multiple
#: of a chat turn. Source: Anthropic engineering, "How we built our multi-agent research
#: system" (2025): "multi-agent systems use about 15× more tokens than chats".
MULTI_AGENT_TOKEN_MULTIPLIER = 15.0


def multi_agent_cost_usd(chat_turn_usd: float,
                         multiplier: float = MULTI_AGENT_TOKEN_MULTIPLIER) -> float:
    """Dollars per task of a multi-agent run: ``multiplier × chat_turn_usd`` (USD).

    Tokens scale by ``multiplier`` (about 15, see :data:`MULTI_AGENT_TOKEN_MULTIPLIER`) and,
    at the same mix of input and output, so do dollars. ``ValueError`` for negative inputs.
    """
    if chat_turn_usd < 0 or multiplier < 0:
        raise ValueError("chat_turn_usd and multiplier must be >= 0")
    return multiplier * chat_turn_usd


def daily_cost_usd(per_task_usd: float, tasks_per_day: int) -> float:
    """Dollars a day (USD) for ``tasks_per_day`` tasks at ``per_task_usd`` each."""
    if per_task_usd < 0 or tasks_per_day < 0:
        raise ValueError("per_task_usd and tasks_per_day must be >= 0")
    return per_task_usd * tasks_per_day


# ---------------------------------------------------------------- compounding

def _check_probability(p: float, name: str) -> None:
    if not 0 <= p <= 1:
        raise ValueError(f"{name} must be a probability between 0 and 1 (got {p!r}); "
                         f"write 95% as 0.95")


def end_to_end_success(per_step: float, steps: int) -> float:
    """Probability a run of ``steps`` steps succeeds when each step succeeds with ``per_step``.

    A run succeeds only if every step does; with independent steps that is
    ``per_step ** steps`` (e.g. ``0.95 ** 10 ≈ 0.60``). Source: the product rule for
    independent events; the course syllabus, "Compounding". ``ValueError`` for a
    probability outside 0..1 or negative ``steps``.
    """
    _check_probability(per_step, "per_step")
    if steps < 0:
        raise ValueError(f"steps must be >= 0 (got {steps})")
    return per_step ** steps


def per_step_success_needed(target: float, steps: int) -> float:
    """Per-step success needed for end-to-end success ``target`` over ``steps`` steps.

    The inverse of :func:`end_to_end_success`: ``target ** (1 / steps)`` (for 90% over 10
    steps, about 0.9895). ``ValueError`` for a probability outside 0..1 or ``steps < 1``.
    """
    _check_probability(target, "target")
    if steps < 1:
        raise ValueError(f"steps must be >= 1 (got {steps})")
    return target ** (1 / steps)



def staged_success(per_step: float, steps: int, stages: int = 1, retries: int = 0) -> float:
    """Probability that ``steps`` steps, split into ``stages`` equal stages, all succeed.

    Each step succeeds with ``per_step``, independently; a stage of ``steps / stages`` steps
    succeeds with ``s = per_step ** (steps / stages)``. The assumption that makes checks help:
    a check at each stage's boundary detects a failed stage, which is run again up to
    ``retries`` times, so a stage succeeds with ``1 − (1 − s) ** (retries + 1)``; the run
    needs every stage, so the result is that to the power ``stages``. With ``retries=0`` the
    split changes nothing (``per_step ** steps`` either way): a check that only detects a
    failure does not undo it. ``stages=1`` is one long chain (``retries`` then reruns all of
    it). E.g. at 0.85 a step, 15 steps as one chain ≈ 0.087, as three checked 5-step stages
    each retried once ≈ 0.329. Source: the product rule for independent events; the course
    syllabus, "Chains". ``ValueError`` for a probability outside 0..1, ``steps`` not a
    positive multiple of ``stages``, or negative ``retries``.
    """
    _check_probability(per_step, "per_step")
    if stages < 1 or steps < 1 or steps % stages:
        raise ValueError(f"steps must be a positive multiple of stages (got steps={steps}, "
                         f"stages={stages})")
    if retries < 0:
        raise ValueError(f"retries must be >= 0 (got {retries})")
    stage = per_step ** (steps // stages)
    return float((1 - (1 - stage) ** (retries + 1)) ** stages)

# ---------------------------------------------------------------- context budget

@dataclass(frozen=True)
class ContextBudget:
    """What a prompt holds after some steps, against a context window (all in tokens).

    ``used`` = ``static + tool_definitions + history``; ``needed`` adds the
    ``output_reserve`` kept free for the reply. ``share`` is ``needed / window``;
    ``fits`` says whether ``needed <= window``.
    """

    steps: int
    static: int
    tool_definitions: int
    history: int
    output_reserve: int
    window: int

    @property
    def used(self) -> int:
        """Prompt tokens: static + tool definitions + history."""
        return self.static + self.tool_definitions + self.history

    @property
    def needed(self) -> int:
        """Prompt tokens plus the output reserve."""
        return self.used + self.output_reserve

    @property
    def share(self) -> float:
        """``needed / window`` (0..1 while it fits)."""
        return self.needed / self.window

    @property
    def fits(self) -> bool:
        """Whether the prompt and the output reserve fit in the window."""
        return self.needed <= self.window


def context_budget(steps: int, *, static: int = 2_000, tool_definitions: int = 800,
                   per_step: int = 800, output_reserve: int = 1_000,
                   window: int = 128_000) -> ContextBudget:
    """The context a run holds after ``steps`` steps, against a ``window`` (tokens).

    History is ``per_step × steps`` (each step re-sent every call). Defaults are the upper
    ends of the syllabus's typical sizes (static 500–2,000, tool definitions 290–800, about
    800 a step, an output reserve of 1,000–4,096, a 128k window). Source: the course
    syllabus, "Context budget". ``ValueError`` for negative sizes or a window < 1.
    """
    sizes = {"steps": steps, "static": static, "tool_definitions": tool_definitions,
             "per_step": per_step, "output_reserve": output_reserve}
    bad = [f"{k} must be >= 0 (got {v})" for k, v in sizes.items() if v < 0]
    if window < 1:
        bad.append(f"window must be >= 1 token (got {window})")
    if bad:
        raise ValueError("; ".join(bad))
    return ContextBudget(steps, static, tool_definitions, per_step * steps, output_reserve,
                         window)


def steps_to_fill(window: int, *, static: int = 2_000, tool_definitions: int = 800,
                  per_step: int = 800, output_reserve: int = 1_000,
                  share: float = 1.0) -> int:
    """The first step count whose context passes ``share`` of ``window`` (a count of steps).

    Solves ``static + tool_definitions + per_step·k + output_reserve > share·window`` for the
    smallest whole ``k`` (see :func:`context_budget`). Use ``share=0.6`` for the point to
    start compressing history, ``0.8`` to stop. ``ValueError`` when ``per_step`` is not
    positive (the context would never fill) or ``share`` is outside (0, 1].
    """
    if per_step <= 0:
        raise ValueError(f"per_step must be > 0 tokens for the window to fill (got {per_step})")
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1] (got {share})")
    fixed = static + tool_definitions + output_reserve
    limit = share * window
    k = max(0, math.floor((limit - fixed) / per_step) + 1)
    return k
