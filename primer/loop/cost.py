"""Token and dollar arithmetic for agent runs.

The dollars of a call (:func:`cost_usd`) and of a run (:func:`run_cost_usd`), the input
tokens a run sends when every call re-sends the history (:func:`cumulative_input_tokens`)
and what prompt caching changes (:func:`run_usages`, :func:`cached_prefix_usages`,
:func:`cached_history_usages`). Estimates built on them: :mod:`primer.course.estimates`.

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

    Call ``n`` sends :func:`call_input_tokens` and writes ``output_per_call`` tokens.
    ``cache`` says where the cache breakpoints are: ``"none"``, none; ``"prefix"``, after
    the static ``base``, where ``ClaudeLLM(cache_prefix=True)`` marks it
    (:func:`cached_prefix_usages`); ``"history"``, at the end of each prompt, which
    ``ClaudeLLM`` does not mark (:func:`cached_history_usages`). ``min_cacheable``: the
    model's minimum cacheable length (tokens; 0 ignores it). ``ValueError`` for negative
    sizes or an unknown ``cache`` mode.
    """
    if cache not in ("none", "prefix", "history"):
        raise ValueError(f"cache must be 'none', 'prefix' or 'history' (got {cache!r})")
    if output_per_call < 0:
        raise ValueError(f"output_per_call must be >= 0 tokens (got {output_per_call!r})")
    usages = [Usage(p, output_per_call) for p in per_call_input_tokens(
        calls, base, per_step, history_on_first_call=history_on_first_call)]
    if cache == "none":
        return usages
    return cached_prefix_usages(usages, base, min_cacheable=min_cacheable) \
        if cache == "prefix" else cached_history_usages(usages, min_cacheable=min_cacheable)


def cached_prefix_usages(usages: Sequence[Usage], prefix: int, cold: Collection[int] = (), *,
                         min_cacheable: int = 0) -> list[Usage]:
    """Calls that were made, priced again with a cache breakpoint after their first ``prefix``
    tokens, as ``ClaudeLLM(cache_prefix=True)`` marks them (the last tool definition and the
    system prompt; the API reads tools, then system, then messages, so no message is cached).

    Call 0, and a call whose index is in ``cold`` (the cache expired), writes the prefix;
    the others read it. A ``prefix`` under ``min_cacheable`` tokens (the model's minimum
    cacheable length) is not cached: the calls come back unchanged. ``ValueError`` for a
    prompt (``prompt_tokens``) shorter than ``prefix``.
    """
    return _cached(usages, cold, min_cacheable, prefix)


def cached_history_usages(usages: Sequence[Usage], cold: Collection[int] = (), *,
                          min_cacheable: int = 0) -> list[Usage]:
    """Calls that were made, priced again as if the prompt cache held each previous prompt:
    ``usages`` are consecutive calls whose prompts each extend the one before. With a
    breakpoint at the end of every prompt (``ClaudeLLM`` sets none there), call ``n`` reads
    call ``n - 1``'s prompt and writes the rest; a call whose index is in ``cold`` finds the
    cache expired (5 minutes since the last read) and writes its whole prompt. A prompt under
    ``min_cacheable`` tokens is plain input and writes nothing. ``ValueError``: a warm call's
    prompt shorter than the one before it.
    """
    return _cached(usages, cold, min_cacheable, None)


def _cached(usages: Sequence[Usage], cold: Collection[int], min_cacheable: int,
            prefix: int | None) -> list[Usage]:
    # Anthropic, "Prompt caching": a breakpoint caches what is before it, from the minimum on
    if min_cacheable < 0 or (prefix or 0) < 0:
        raise ValueError(f"min_cacheable must be >= 0, prefix too ({min_cacheable}, {prefix})")
    out, previous, cached = [], 0, 0
    for n, u in enumerate(usages):
        prompt, mark = u.prompt_tokens, u.prompt_tokens if prefix is None else prefix
        if prompt < (mark if prefix is not None else 0 if n in cold else previous):
            raise ValueError(f"call {n}'s prompt ({prompt} tokens) is shorter than the one "
                             f"before it ({previous})" if prefix is None else
                             f"call {n}'s prompt ({prompt} tokens) is shorter than the prefix")
        previous, read = prompt, 0 if n in cold else cached
        cached = mark if mark >= max(min_cacheable, 1) else 0    # under the minimum: none
        read = read if cached else 0
        out.append(Usage(prompt - cached, u.output_tokens, cached - read, read))
    return out


def thinking_cost_usd(usage: Usage, prices: Prices | None = None) -> float:
    """Dollars (USD) of the output the model spent thinking: ``thinking_tokens`` × the output
    price (``Prices()``: 25 USD per million). A share of :func:`cost_usd`, never added to it:
    thinking tokens are billed as output tokens and ``output_tokens`` already counts them.
    Sources: Anthropic's extended-thinking documentation ("Pricing": thinking is billed as
    output tokens, the full thinking and not its summary) and the SDK's
    ``OutputTokensDetails`` ("output_tokens remains the inclusive, authoritative total used
    for billing")."""
    p = prices or Prices()
    return usage.thinking_tokens * p.output_per_mtok / 1_000_000


def run_cost_usd(usages: Iterable[Usage], prices: Prices | None = None) -> float:
    """Dollars (USD) for a run's calls: :func:`cost_usd` of their summed usage."""
    return cost_usd(sum(usages, Usage()), prices)
