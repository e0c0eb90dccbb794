"""``FallbackLLM``: when the provider is overloaded, the next model answers.

A provider that is overloaded answers 529; one that is failing answers 500-599; a network
that fails gives no answer at all. Each of these reaches the loop as a
:class:`~primer.loop.model.TransientModelError` (with its ``status``, or ``None`` for no
answer). ``FallbackLLM([primary, secondary, ...])`` asks the primary; on such an error it
tries the primary again up to ``retries`` times (its own retries, with a
:class:`~primer.loop.config.RetryPolicy` backoff), then asks the next model, and so on. A
rate limit (429), a 408 or 409 is not a reason to switch (the same model answers once the
wait is over): after the model's own retries it is raised, and so is the error of the last
model when every model failed; the loop's model-call retry then tries the chain again.
Any other error (a bad request, a bad key) is raised at once.

Each reply names the model that wrote it (``Reply.model``), so each step of a run records
which model answered; :attr:`~primer.loop.config.AgentConfig.model_prices` prices each
model's usage at its own prices, and :func:`usage_by_model` adds a run up per model.
:attr:`FallbackLLM.fallbacks` logs every switch.

What one model wrote that another cannot accept: a ``thinking`` block is signed by the
model (provider, deployment) that wrote it, and a ``redacted_thinking`` block is encrypted
for it; another model's API refuses them (a 400: an invalid signature), so a run whose
primary thought and then fell back would end ``model_error``. So each model is sent the
history without the thinking blocks other models wrote (:meth:`FallbackLLM.sent_to`; a block
it never saw written counts as the primary's): not converted to text, which would put
another model's reasoning in this one's mouth. Everything else goes as it is, every
``tool_use`` with its ``tool_result``: the next model reads that a side effect was done and
what it returned, and no call is sent to be made again. The run's own transcript keeps every
block, so the primary, back, gets its thinking unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from primer.loop.config import AgentConfig, RetryPolicy
from primer.loop.messages import THINKING_TYPES, Message, text_block
from primer.loop.model import (
    LLM,
    EventSink,
    Reply,
    TransientModelError,
    Usage,
    cost_usd,
    is_async_callable,
)
from primer.loop.state import Step

from .allowance import time_left_s


def falls_back(error: TransientModelError) -> bool:
    """Whether ``error`` makes :class:`FallbackLLM` ask the next model: an overload (529),
    another server error (500-599) or no answer at all (``status`` ``None``)."""
    return error.status is None or error.status >= 500


class FallbackLLM:
    """An :class:`~primer.loop.model.LLM` that asks ``models`` in order until one answers.

    - ``models``: sync LLMs, the primary first (``ValueError`` for none, ``TypeError`` for an
      ``async def`` one: wrap async models in the async loop's own way instead).
    - ``retries``: each model's own retries of a transient error before the next is asked.
    - ``policy`` / ``sleep``: the backoff between those retries (seconds; injectable).

    Streams when any of its models does (``stream``), handing ``on_delta`` to that model;
    when it switches, ``on_delta`` gets a ``model_fallback`` event (``{"from", "to",
    "error"}``), so a display can drop what the failed model had streamed. A reply whose
    model left ``Reply.model`` empty is named after the model's ``model`` attribute.
    Raises the last :class:`~primer.loop.model.TransientModelError` when no model answered.
    """

    def __init__(self, models: Sequence[LLM], *, retries: int = 1,
                 policy: RetryPolicy | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.models = list(models)
        if not self.models:
            raise ValueError("FallbackLLM needs at least one model")
        if any(is_async_callable(m) for m in self.models):
            raise TypeError("FallbackLLM takes sync models (each called as "
                            "llm(*, system, messages, tools, max_tokens) -> Reply)")
        if retries < 0:
            raise ValueError(f"FallbackLLM: retries must be >= 0 (got {retries})")
        self.retries = retries
        self.policy = policy or RetryPolicy()
        self.sleep = sleep
        self.stream = any(getattr(m, "stream", False) is True for m in self.models)
        #: The wrap-up's tools-off call (see primer.loop.steps.model_request) keeps the tool
        #: definitions and sends ``tool_choice`` none only when every model takes it.
        self.takes_tool_choice = all(getattr(m, "takes_tool_choice", False) is True
                                     for m in self.models)
        #: One record per switch: ``{"call", "from", "to", "error", "attempts"}``.
        self.fallbacks: list[dict[str, Any]] = []
        self.calls = 0
        #: Which model wrote each thinking block it returned: its signature (or a redacted
        #: block's data) → the model's index; only blocks of models after the primary.
        self.thought_by: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"FallbackLLM([{', '.join(model_name(m, k) for k, m in enumerate(self.models))}])"

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int, on_delta: EventSink | None = None,
                 tool_choice: dict[str, Any] | None = None) -> Reply:
        self.calls += 1
        request = {"system": system, "messages": messages, "tools": tools,
                   "max_tokens": max_tokens,
                   **({"tool_choice": tool_choice} if tool_choice is not None else {})}
        spent = Usage()  # what failed attempts reported: counted with the answer, or the error
        for k, model in enumerate(self.models):
            failed = 0
            while True:
                try:
                    reply = self._ask(model, k, {**request, "messages": self.sent_to(k, messages)},
                                      on_delta)
                    self._note_thinking(k, reply)
                    return with_spent(reply, spent)
                except TransientModelError as e:
                    error = e
                    spent = spent + reported(e)
                failed += 1
                if failed > self.retries:
                    break
                delay = self.policy.delay_at(failed, f"fallback-{self.calls}-{k}",
                                             error.retry_after_s)
                if self.policy.why_not_wait(delay, time_left_s()):
                    break  # too long a wait: the next model now, or the error
                self.sleep(delay)
            if not falls_back(error) or k + 1 == len(self.models):
                error.usage = spent
                raise error
            record = {"call": self.calls, "from": model_name(model, k),
                      "to": model_name(self.models[k + 1], k + 1),
                      "error": f"{type(error).__name__}: {error}", "attempts": failed}
            self.fallbacks.append(record)
            if on_delta is not None:
                on_delta("model_fallback", {k: record[k] for k in ("from", "to", "error")})
        raise AssertionError("unreachable")  # pragma: no cover

    def sent_to(self, k: int, messages: list[Message]) -> list[Message]:
        """``messages`` as model ``k`` is sent them: without the ``thinking`` and
        ``redacted_thinking`` blocks another model wrote (an assistant turn left with nothing
        gets a one-line text in their place); every other block as it is. The list itself
        when nothing is dropped (the primary, before any other model thought, is sent it
        unread: no work per call that grows with the history)."""
        if k == 0 and not self.thought_by:
            return messages
        out, dropped = [], False
        for m in messages:
            content = m.get("content")
            if m.get("role") != "assistant" or not isinstance(content, list):
                out.append(m)
                continue
            kept = [b for b in content if not (isinstance(b, dict)
                                               and b.get("type") in THINKING_TYPES
                                               and self.thought_by.get(_thought_key(b), 0) != k)]
            if len(kept) == len(content):
                out.append(m)
                continue
            dropped = True
            out.append({**m, "content": kept or [text_block(FOREIGN_THINKING_NOTE)]})
        return out if dropped else messages

    def _note_thinking(self, k: int, reply: Reply) -> None:
        """Remember the thinking blocks model ``k`` (not the primary) wrote in ``reply``."""
        if k == 0 or not isinstance(reply, Reply) or not isinstance(reply.content, list):
            return
        for b in reply.content:
            if isinstance(b, dict) and b.get("type") in THINKING_TYPES:
                self.thought_by[_thought_key(b)] = k

    @staticmethod
    def _ask(model: LLM, k: int, request: dict[str, Any],
             on_delta: EventSink | None) -> Reply:
        if getattr(model, "stream", False) is True:
            reply = model(**request, on_delta=on_delta)  # type: ignore[call-arg]
        else:
            reply = model(**request)
        if isinstance(reply, Reply) and not reply.model:
            reply = Reply(reply.content, reply.stop_reason, reply.usage, model_name(model, k))
        return reply


#: What an assistant turn made only of another model's thinking is sent as instead.
FOREIGN_THINKING_NOTE = "(another model's reasoning, not shown)"


def _thought_key(block: Mapping[str, object]) -> str:
    """What identifies a thinking block: its signature, or a redacted block's data."""
    return str(block.get("signature") if block.get("type") == "thinking" else block.get("data"))


def model_name(model: LLM, k: int) -> str:
    """A model's id for records: its ``model`` attribute, else ``"model <k+1>"``."""
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else f"model {k + 1}"


@dataclass
class ModelSpend:
    """What one model did in a run: ``calls`` it answered, their ``usage`` (tokens) and
    ``cost_usd`` (USD at that model's prices)."""

    model: str
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0


def reported(error: TransientModelError) -> Usage:
    """The usage a failed attempt reported, as a plain :class:`Usage` (zero when it reported
    none, or counts budgets cannot use)."""
    if not isinstance(error.usage, Usage):
        return Usage()
    usage = Usage(**Usage.to_dict(error.usage))
    return usage if usage.problem() is None else Usage()


def with_spent(reply: Reply, spent: Usage) -> Reply:
    """``reply`` with the usage of the failed attempts before it (``spent``) added to its
    own, so the run counts them (priced as the model that answered); a reply whose usage the
    loop will refuse anyway is returned as it is."""
    if spent == Usage() or type(reply) is not Reply or type(reply.usage) is not Usage \
            or reply.usage.problem() is not None:
        return reply
    return Reply(reply.content, reply.stop_reason, reply.usage + spent, reply.model)


def usage_by_model(steps: Sequence[Step], config: AgentConfig) -> dict[str, ModelSpend]:
    """A run's model calls added up per model (the model id each reply names), in the order
    the models first answered; each model's usage priced at
    :meth:`~primer.loop.config.AgentConfig.prices_for` that model. A :class:`FallbackLLM`'s
    failed attempts are in the reply that answered; the loop's own retries and models inside
    tools are not in it (the run's totals have them)."""
    out: dict[str, ModelSpend] = {}
    for s in steps:
        spend = out.setdefault(s.reply.model, ModelSpend(s.reply.model))
        spend.calls += 1
        spend.usage = spend.usage + s.usage
        spend.cost_usd += cost_usd(s.usage, config.prices_for(s.reply.model))
    return out
