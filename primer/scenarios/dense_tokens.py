"""A model whose tokenizer counts more tokens than the characters/4 estimate.

Real tokenizers drift from characters/4: code, JSON, numbers and most non-English text run
well above it. :class:`DenseTokens` wraps any offline model and reports ``ratio`` times the
input tokens it would have reported (its replies are unchanged), so a lesson can show the
context checks reading the *reported* prompt rather than the estimate.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from primer.loop.messages import Message
from primer.loop.model import LLM, Reply, Usage


class DenseTokens:
    """``llm`` reporting ``ratio`` × its ``input_tokens`` (``ratio`` > 0; ``ValueError``
    else). ``output_tokens`` and cache fields are unchanged. An :class:`LLM`."""

    def __init__(self, llm: LLM, ratio: float) -> None:
        if not ratio > 0:
            raise ValueError(f"ratio must be above 0 (got {ratio!r})")
        self.llm, self.ratio = llm, ratio

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int) -> Reply:
        reply = self.llm(system=system, messages=messages, tools=tools, max_tokens=max_tokens)
        u = reply.usage
        return replace(reply, usage=Usage(round(u.input_tokens * self.ratio), u.output_tokens,
                                          u.cache_creation_input_tokens,
                                          u.cache_read_input_tokens))
