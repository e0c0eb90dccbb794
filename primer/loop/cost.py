"""Token and dollar arithmetic for agent runs.

What this module answers, each with one function: the dollars of a call (:func:`cost_usd`)
and of a run (:func:`run_cost_usd`), the input tokens a run sends when every call re-sends
the history (:func:`cumulative_input_tokens`, both counting conventions) and what prompt
caching changes (:func:`run_usages`, :func:`cached_prefix_usages`,
:func:`cached_history_usages`). The estimates lessons and the design round build on
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
               cache: Literal["none", "prefix", "history"] = "none",
               min_cacheable: int = 0) -> list[Usage]:
    """The :class:`~primer.loop.model.Usage` of each model call of a run, with or without caching.

    The prompt of call ``n`` is :func:`call_input_tokens` (``base`` static tokens plus
    ``per_step`` tokens of history a step); each call writes ``output_per_call`` tokens.
    ``cache`` says where the request's cache breakpoints (``cache_control`` marks) are:

    - ``"none"``: no breakpoint; every prompt token is uncached input;
    - ``"prefix"``: a breakpoint after the static ``base`` (the tool definitions and system
      prompt, which is where ``ClaudeLLM(cache_prefix=True)`` puts its marks): see
      :func:`cached_prefix_usages`;
    - ``"history"``: a breakpoint at the end of each prompt (``ClaudeLLM`` sets none there):
      see :func:`cached_history_usages`.

    ``min_cacheable`` is the model's minimum cacheable prompt length (tokens; 2,048 for
    ``claude-sonnet-4-6``, :data:`primer.providers.claude.MIN_CACHEABLE_TOKENS`): a
    breakpoint with fewer tokens before it caches nothing, and those tokens are billed as
    plain input. The default 0 ignores the minimum. Cache writes and reads go to
    ``cache_creation_input_tokens`` and ``cache_read_input_tokens`` (the Anthropic ``usage``
    fields), so :func:`cost_usd` prices them at the write premium and read discount of its
    :class:`Prices`. Calls are assumed to come within the cache lifetime (5 minutes,
    refreshed on each read). Source: Anthropic, "Prompt caching" documentation
    (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching).
    Raises ``ValueError`` for negative sizes or an unknown ``cache`` mode.
    """
    if cache not in ("none", "prefix", "history"):
        raise ValueError(f"cache must be 'none', 'prefix' or 'history' (got {cache!r})")
    if output_per_call < 0:
        raise ValueError(f"output_per_call must be >= 0 tokens (got {output_per_call!r})")
    prompts = per_call_input_tokens(calls, base, per_step,
                                    history_on_first_call=history_on_first_call)
    usages = [Usage(p, output_per_call) for p in prompts]
    if cache == "history":
        return cached_history_usages(usages, min_cacheable=min_cacheable)
    if cache == "prefix":
        return cached_prefix_usages(usages, base, min_cacheable=min_cacheable)
    return usages


def _check_minimum(min_cacheable: int) -> None:
    if min_cacheable < 0:
        raise ValueError(f"min_cacheable must be >= 0 tokens (got {min_cacheable!r})")


def cached_prefix_usages(usages: Sequence[Usage], prefix: int, cold: Collection[int] = (), *,
                         min_cacheable: int = 0) -> list[Usage]:
    """Calls that were made, priced again with a cache breakpoint after their first ``prefix``
    tokens: what ``ClaudeLLM(cache_prefix=True)`` asks for.

    ``ClaudeLLM`` marks the last tool definition and the system prompt with ``cache_control``;
    the API puts the tools first, then the system prompt, then the messages, so the cached
    prefix is the tool definitions and the system prompt (``prefix`` tokens) and the whole
    message list stays uncached input. The first call (and a call whose index, from 0, is
    in ``cold``: the cache expired) writes the prefix; the others read it. A ``prefix``
    under ``min_cacheable`` tokens is not cached at all: the calls come back unchanged.
    The prompt is a call's ``input_tokens`` plus its cache fields; output is unchanged.
    Source: Anthropic, "Prompt caching"
    (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching).
    Raises ``ValueError`` for a negative size or a prompt shorter than ``prefix``.
    """
    _check_minimum(min_cacheable)
    if prefix < 0:
        raise ValueError(f"prefix must be >= 0 tokens (got {prefix!r})")
    out: list[Usage] = []
    for n, u in enumerate(usages):
        prompt = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
        if prompt < prefix:
            raise ValueError(f"call {n}'s prompt ({prompt} tokens) is shorter than the "
                             f"{prefix}-token prefix")
        if prefix == 0 or prefix < min_cacheable:
            out.append(Usage(prompt, u.output_tokens))
            continue
        write = n == 0 or n in cold
        out.append(Usage(prompt - prefix, u.output_tokens, prefix if write else 0,
                         0 if write else prefix))
    return out


def cached_history_usages(usages: Sequence[Usage], cold: Collection[int] = (), *,
                          min_cacheable: int = 0) -> list[Usage]:
    """Calls that were made, priced again as if the prompt cache held each previous prompt.

    ``usages`` are consecutive calls whose prompts each extend the one before (a run, or a
    conversation's turns one after another). With a cache breakpoint at the end of every
    prompt (``ClaudeLLM`` does not set one there; see :func:`cached_prefix_usages` for what
    it sets), call ``n`` reads call ``n - 1``'s whole prompt from the cache and writes only
    its new tail: ``cache_read_input_tokens`` = the previous prompt,
    ``cache_creation_input_tokens`` = the rest. A call whose index (from 0) is in ``cold``
    finds the cache expired (more than its lifetime, 5 minutes, since the last read: a
    customer who answers slowly) and writes its whole prompt. A prompt under
    ``min_cacheable`` tokens (the model's minimum cacheable length) is billed as plain
    input and writes nothing, so the call after it reads nothing. The prompt is a call's
    ``input_tokens`` plus its cache fields; output is unchanged. Source: Anthropic, "Prompt
    caching" (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching).
    Raises ``ValueError`` when a warm call's prompt is shorter than the one before it (not
    an extension).
    """
    _check_minimum(min_cacheable)
    out: list[Usage] = []
    previous = cached = 0
    for n, u in enumerate(usages):
        prompt = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
        if n not in cold and prompt < previous:
            raise ValueError(f"call {n}'s prompt ({prompt} tokens) is shorter than the one "
                             f"before it ({previous}): it cannot extend it")
        previous = prompt
        read = 0 if n in cold else cached
        if prompt < min_cacheable:
            out.append(Usage(prompt, u.output_tokens))
            cached = 0
            continue
        out.append(Usage(0, u.output_tokens, prompt - read, read))
        cached = prompt
    return out


def run_cost_usd(usages: Iterable[Usage], prices: Prices | None = None) -> float:
    """Dollars (USD) for a run's calls: :func:`cost_usd` of their summed usage."""
    return cost_usd(sum(usages, Usage()), prices)
