"""Token and dollar arithmetic for agent runs.

Prices are USD per million tokens. The production lesson's prices are 5 USD per million
input tokens and 25 USD per million output tokens (``Prices()``'s defaults). Prompt-cache
writes cost ``cache_write_multiplier`` × the input price (1.25 for Anthropic's 5-minute
cache) and cache reads ``cache_read_multiplier`` × (0.1); source: Anthropic's prompt
caching documentation, "Pricing".
"""

from __future__ import annotations

from dataclasses import dataclass

from .llm import Usage


@dataclass(frozen=True)
class Prices:
    """Prices in USD per million tokens, and the prompt-cache multipliers of the input price."""

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
