"""Token and dollar arithmetic for agent runs.

What this module answers, each with one function: the input tokens a run sends when every
call re-sends the history (:func:`cumulative_input_tokens`, both counting conventions), its
dollars (:func:`cost_usd`, :func:`run_cost_usd`), what trimming tool results saves
(:func:`trim_savings`), what prompt caching changes (:func:`run_usages`), how per-step
success compounds (:func:`end_to_end_success`) and how much of a context window a run fills
(:func:`context_budget`, :func:`steps_to_fill`).

Prices are USD per million tokens. The production lesson's prices are 5 USD per million
input tokens and 25 USD per million output tokens (``Prices()``'s defaults). Prompt-cache
writes cost ``cache_write_multiplier`` × the input price (1.25 for Anthropic's 5-minute
cache) and cache reads ``cache_read_multiplier`` × (0.1); source: Anthropic's prompt
caching documentation, "Pricing".
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from .model import Usage


@dataclass(frozen=True)
class Prices:
    """Prices in USD per million tokens, and the prompt-cache multipliers of the input price.

    The defaults, 5 USD per million input and 25 USD per million output tokens, are the
    course's reference prices: every run in the lessons is priced at them, whichever model
    it names. Real prices depend on the model; set them per run, e.g.
    ``AgentConfig(prices=Prices(3, 15))`` for ``claude-sonnet-4-6`` (the default model of
    :class:`~primer.providers.claude.ClaudeLLM`) at its list price. Check the provider's price
    list: prices change.
    """

    input_per_mtok: float = 5.0
    output_per_mtok: float = 25.0
    cache_write_multiplier: float = 1.25
    cache_read_multiplier: float = 0.1


def cost_usd(usage: Usage, prices: Prices | None = None) -> float:
    """Dollars (USD) for ``usage`` at ``prices`` (default: ``Prices()``, 5 / 25 USD per MTok).

    ``input × p_in + output × p_out + cache_write × p_in × w + cache_read × p_in × r``, all
    divided by one million, where ``w`` and ``r`` are the cache multipliers.
    """
    p = prices or Prices()
    return (usage.input_tokens * p.input_per_mtok
            + usage.output_tokens * p.output_per_mtok
            + usage.cache_creation_input_tokens * p.input_per_mtok * p.cache_write_multiplier
            + usage.cache_read_input_tokens * p.input_per_mtok * p.cache_read_multiplier
            ) / 1_000_000


# ---------------------------------------------------------------- quadratic input cost

def _check_shape(calls: int, base: int, per_step: int) -> None:
    problems = []
    if not isinstance(calls, int) or calls < 0:
        problems.append(f"calls must be a whole number >= 0 (got {calls!r})")
    if base < 0:
        problems.append(f"base must be >= 0 tokens (got {base!r})")
    if per_step < 0:
        problems.append(f"per_step must be >= 0 tokens (got {per_step!r})")
    if problems:
        raise ValueError("; ".join(problems))


def call_input_tokens(n: int, base: int, per_step: int, *,
                      history_on_first_call: bool = False) -> int:
    """Input tokens sent on model call ``n`` (counted from 1) of a run that re-sends its history.

    Each call re-sends the static ``base`` (system prompt, tool definitions, task) plus every
    step of history so far, each step adding ``per_step`` tokens (the model's reply plus the
    tool result). Two counting conventions, chosen by ``history_on_first_call``:

    - ``False`` (default): the first call carries no history, so call ``n`` sends
      ``base + per_step·(n − 1)``;
    - ``True``: call ``n`` already counts its own step, so it sends ``base + per_step·n``.

    Tokens in, tokens out. Raises ``ValueError`` for ``n < 1`` or negative sizes.
    Source: the course syllabus, "Numbers" (quadratic input cost).
    """
    _check_shape(n, base, per_step)
    if n < 1:
        raise ValueError(f"calls are counted from 1 (got n={n})")
    return base + per_step * (n if history_on_first_call else n - 1)


def per_call_input_tokens(calls: int, base: int, per_step: int, *,
                          history_on_first_call: bool = False) -> list[int]:
    """Input tokens of each of ``calls`` model calls, in order (see :func:`call_input_tokens`)."""
    _check_shape(calls, base, per_step)
    return [call_input_tokens(n, base, per_step, history_on_first_call=history_on_first_call)
            for n in range(1, calls + 1)]


def cumulative_input_tokens(calls: int, base: int = 0, per_step: int = 500, *,
                            history_on_first_call: bool = False) -> int:
    """Input tokens a run of ``calls`` model calls sends in total (tokens).

    Summing :func:`call_input_tokens` over ``n = 1..calls`` gives, in closed form,

    - ``history_on_first_call=False``: ``calls·base + per_step·calls(calls − 1)/2``;
    - ``history_on_first_call=True``: ``calls·base + per_step·calls(calls + 1)/2``.

    The history term grows with the square of the number of calls: twice the steps costs
    about four times the tokens. Source: the course syllabus, "Numbers"; the two conventions
    are the two readings of the same series (see its "Known inconsistency").
    Raises ``ValueError`` for negative inputs.
    """
    _check_shape(calls, base, per_step)
    k = calls + 1 if history_on_first_call else calls - 1
    return calls * base + per_step * calls * k // 2


# ---------------------------------------------------------------- dollars, trimming, caching

def run_usages(calls: int, base: int, per_step: int, output_per_call: int = 0, *,
               history_on_first_call: bool = False,
               cache: Literal["none", "prefix", "history"] = "none") -> list[Usage]:
    """The :class:`~primer.loop.model.Usage` of each model call of a run, with or without caching.

    The prompt of call ``n`` is :func:`call_input_tokens` (``base`` static tokens plus
    ``per_step`` tokens of history a step); each call writes ``output_per_call`` tokens.
    ``cache`` says what the prompt cache holds:

    - ``"none"``: every prompt token is uncached input;
    - ``"prefix"``: a cache breakpoint after the static ``base``: call 1 writes it to the
      cache, later calls read it; the history is uncached input;
    - ``"history"``: a breakpoint at the end of each prompt: call 1 writes its whole prompt,
      call ``n > 1`` reads call ``n − 1``'s prompt from the cache and writes only the new
      tail (the last step). Every token is written once and then read on every later call.

    Cache writes and reads go to ``cache_creation_input_tokens`` and
    ``cache_read_input_tokens`` (the Anthropic ``usage`` fields), so :func:`cost_usd` prices
    them at the write premium and read discount of its :class:`Prices`. The model assumes
    calls come within the cache lifetime (5 minutes, refreshed on each read) and ignores
    the minimum cacheable prompt length. Source: Anthropic, "Prompt caching" documentation
    (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching).
    Raises ``ValueError`` for negative sizes or an unknown ``cache`` mode.
    """
    if cache not in ("none", "prefix", "history"):
        raise ValueError(f"cache must be 'none', 'prefix' or 'history' (got {cache!r})")
    if output_per_call < 0:
        raise ValueError(f"output_per_call must be >= 0 tokens (got {output_per_call!r})")
    prompts = per_call_input_tokens(calls, base, per_step,
                                    history_on_first_call=history_on_first_call)
    if cache == "history":
        return cached_history_usages([Usage(p, output_per_call) for p in prompts])
    usages = []
    for n, prompt in enumerate(prompts, start=1):
        if cache == "none":
            usages.append(Usage(prompt, output_per_call))
        else:
            write, read = (base, 0) if n == 1 else (0, base)
            usages.append(Usage(prompt - base, output_per_call, write, read))
    return usages


def cached_history_usages(usages: Sequence[Usage], cold: Collection[int] = ()) -> list[Usage]:
    """Calls that were made, priced again as if the prompt cache held each previous prompt.

    ``usages`` are consecutive calls whose prompts each extend the one before (a run, or a
    conversation's turns one after another). With a cache breakpoint at the end of every
    prompt, call ``n`` reads call ``n - 1``'s whole prompt from the cache and writes only its
    new tail: ``cache_read_input_tokens`` = the previous prompt, ``cache_creation_input_tokens``
    = the rest. A call whose index (from 0) is in ``cold`` finds the cache expired (more
    than its lifetime, 5 minutes, since the last read: a customer who answers slowly) and
    writes its whole prompt. The prompt is a call's ``input_tokens`` plus its cache fields;
    output is unchanged. Ignores the minimum cacheable length. Source: Anthropic, "Prompt
    caching" (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching).
    Raises ``ValueError`` when a prompt is shorter than the one before it (not an extension).
    """
    out: list[Usage] = []
    previous = 0
    for n, u in enumerate(usages):
        prompt = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
        read = 0 if n in cold else previous
        if prompt < read:
            raise ValueError(f"call {n}'s prompt ({prompt} tokens) is shorter than the one "
                             f"before it ({previous}): it cannot extend it")
        out.append(Usage(0, u.output_tokens, prompt - read, read))
        previous = prompt
    return out


def run_cost_usd(usages: Iterable[Usage], prices: Prices | None = None) -> float:
    """Dollars (USD) for a run's calls: :func:`cost_usd` of their summed usage."""
    return cost_usd(sum(usages, Usage()), prices)


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
