"""Token and dollar arithmetic for agent runs.

What this module answers, each with one function: the dollars of a call (:func:`cost_usd`)
and of a run (:func:`run_cost_usd`), the input tokens a run sends when every call re-sends
the history (:func:`cumulative_input_tokens`, both counting conventions) and what prompt
caching changes (:func:`run_usages`). The estimates lessons and the design round build on
them (trimming, compounding success, a context budget) are :mod:`primer.course.estimates`.

Prices are USD per million tokens. The production lesson's prices are 5 USD per million
input tokens and 25 USD per million output tokens (``Prices()``'s defaults). Prompt-cache
writes cost ``cache_write_multiplier`` × the input price (1.25 for Anthropic's 5-minute
cache) and cache reads ``cache_read_multiplier`` × (0.1); source: Anthropic's prompt
caching documentation, "Pricing".
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Literal

from .model import Prices, Usage, cost_usd

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
