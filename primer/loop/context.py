"""Context management: trim long tool results, summarise older turns, stop near the window.

Every call re-sends the whole message list, so a long run fills the model's context window.
Three guards, cheapest first:

1. **Trim** each tool result to a size (:func:`trim_tool_results`, an ``after_tool`` hook):
   a 20,000-character file listing rarely needs to reach the model whole.
2. **Compact**: once the prompt passes ``AgentConfig.compact_share`` of the window (default
   0.6), replace older turns by a summary (:func:`compact_messages`). The task stays first,
   the latest user text (in a conversation, the current question) is never summarised,
   the system prompt is not touched (it travels beside the list), and the last
   ``compact_keep_turns`` replies stay word for word. The cut always falls just before an
   assistant message, so a ``tool_use`` and its ``tool_result`` are summarised together or
   kept together, never split. The summariser is injectable: an LLM call
   (:class:`LLMSummarizer`) or the deterministic offline :func:`extractive_summary`.
3. **Stop** with ``context_window`` before a call past ``context_stop_share`` (default 0.8):
   the loop's own check (:func:`primer.loop.checks.check_context`).

Both shares are compared with :func:`prompt_tokens`: the prompt the last call *reported*
(its usage) plus the characters/4 estimate of what was added since, not the estimate of
everything, which drifts from the real tokenizer (code, JSON and non-English text run
well above characters/4).

Source of the 60% / 80% shares: the course syllabus ("context rot": compress past ~60% of the
window, stop early past ~80%).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from primer.harness.hooks import Hooks

from .config import Summarizer
from .history import unanswered_tool_uses  # noqa: F401 - lesson 12 imports it from here
from .messages import Block, Message, blocks_of, text_block, user_message
from .model import LLM, Usage, estimate_tokens
from .state import RunState
from .tools import ToolExecution

#: The text that opens the summary block in the first user message.
SUMMARY_HEADER = "Summary of earlier turns (older messages were compacted):"


# ---------------------------------------------------------------- trimming

def trim_text(text: str, max_tokens: int) -> str:
    """``text`` cut to about ``max_tokens`` tokens (characters/4) with a note of the cut.

    The note says how much was kept, so the model knows the result is partial. Text already
    within the limit is returned unchanged. ``ValueError`` for ``max_tokens < 1``.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1 (got {max_tokens})")
    total = estimate_tokens(text)
    if total <= max_tokens:
        return text
    return (text[: max_tokens * 4]
            + f" …[trimmed: first {max_tokens:,} of about {total:,} tokens shown]")


def trim_tool_results(max_tokens: int) -> Hooks:
    """An ``after_tool`` hook that trims every tool result to about ``max_tokens`` tokens."""
    trim_text("", max_tokens)  # validate now

    def after_tool(call: Any, execution: ToolExecution) -> ToolExecution:
        return replace(execution, content=trim_text(execution.content, max_tokens))

    return Hooks(after_tool=after_tool, name=f"trim_tool_results({max_tokens})")


# ---------------------------------------------------------------- summarisers

def render_lines(messages: Sequence[Message], result_chars: int = 120) -> list[str]:
    """One line per text, call and result of ``messages``, texts and results cut to
    ``result_chars``: ``user: ...``, ``called get_order({...})``, ``  result: ...`` (or
    ``  error: ...``). What the summarisers read, and a transcript for a person."""
    lines: list[str] = []
    for m in messages:
        for b in blocks_of(m.get("content", "")):
            kind = b.get("type")
            if kind == "text":
                raw = str(b.get("text", ""))
                text = " ".join(raw.split())
                if raw.startswith(SUMMARY_HEADER):
                    lines.extend(raw.splitlines()[1:])  # fold an earlier summary in, whole
                elif text:
                    lines.append(f"{m.get('role')}: {text[:result_chars]}")
            elif kind == "tool_use":
                args = json.dumps(b.get("input"), ensure_ascii=False, separators=(",", ":"))
                lines.append(f"called {b.get('name')}({args})")
            elif kind == "tool_result":
                content = " ".join(str(b.get("content", "")).split())
                mark = "error" if b.get("is_error") else "result"
                cut = content[:result_chars] + ("…" if len(content) > result_chars else "")
                lines.append(f"  {mark}: {cut}")
    return lines


def _history(messages: list[Message]) -> list[Message]:
    """``messages`` without the task: any earlier summary block of ``messages[0]``, then the rest.

    The first message holds the task (which stays in place after compaction, so it is not
    summarised) and, after an earlier compaction, the summary of older turns; that summary
    is kept so :func:`render_lines` folds it into the new one instead of losing it.
    """
    if not messages:
        return []
    first = messages[0]
    earlier = [b for b in blocks_of(first.get("content", ""))
               if b.get("type") == "text" and str(b.get("text", "")).startswith(SUMMARY_HEADER)]
    head = [{"role": first.get("role", "user"), "content": earlier}] if earlier else []
    return [*head, *messages[1:]]


def extractive_summary(messages: list[Message]) -> str:
    """A deterministic offline summary: one line per thought, call and (shortened) result.

    No model call, so it costs no tokens to make and gives the same text every run; a real
    harness would use :class:`LLMSummarizer`. ``messages`` are the turns being compacted
    (the first may hold the task and an earlier summary, which is folded in).
    """
    return "\n".join(render_lines(_history(messages)) or ["(nothing to summarise)"])


class LLMSummarizer:
    """Summarise older turns with one model call; returns ``(text, usage)``.

    ``llm`` is any :class:`~primer.loop.model.LLM`; ``max_tokens`` caps the summary's length
    (tokens). The turns are rendered as text (calls, shortened results) in one user message,
    so the call carries no tools. The usage is added to the run's totals by the loop.
    """

    INSTRUCTIONS = ("You compress an agent's working history. Keep every fact the task still "
                    "needs: ids, numbers, decisions, errors and what was already done. Drop "
                    "chatter. Write short lines.")

    def __init__(self, llm: LLM, max_tokens: int = 512) -> None:
        self.llm, self.max_tokens = llm, max_tokens

    def __call__(self, messages: list[Message]) -> tuple[str, Usage]:
        history = "\n".join(render_lines(_history(messages), result_chars=400))
        reply = self.llm(system=self.INSTRUCTIONS, tools=[], max_tokens=self.max_tokens,
                         messages=[user_message(f"Summarise this history:\n{history}")])
        return reply.text, reply.usage


# ---------------------------------------------------------------- the prompt's size

def reported_prompt(usage: Usage) -> int:
    """The prompt a call was billed for (tokens): input plus cache writes plus cache reads.

    Anthropic reports the three apart; their sum is the whole prompt as the model saw it.
    """
    return usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens


def prompt_tokens(state: RunState) -> int:
    """The size of the next request's prompt (tokens), as the context checks read it.

    After a call: what that call reported for its prompt (:func:`reported_prompt`) plus the
    characters/4 estimate of what the list gained since (the reply, the tool results, any
    new user text), i.e. ``reported + (prompt_estimate - step.prompt_estimate)``. When a
    compaction has since shrunk the list below what that call sent, the estimate of what is
    left, scaled by that call's reported/estimated ratio. Before the first call, or when the
    last call reported no prompt (a model that reports no usage), the estimate alone.
    O(1): no re-count of the list.
    """
    if not state.steps:
        return state.prompt_estimate
    last = state.steps[-1]
    reported = reported_prompt(last.usage)
    if reported <= 0 or last.prompt_estimate <= 0:
        return state.prompt_estimate
    if state.prompt_estimate >= last.prompt_estimate:
        return reported + state.prompt_estimate - last.prompt_estimate
    return round(state.prompt_estimate * reported / last.prompt_estimate)


def prompt_size_text(state: RunState) -> str:
    """How :func:`prompt_tokens` got its figure, for a stop's detail: ``"12,345 tokens
    (call 3 reported 11,000; about 1,345 added since)"``, or ``"about 12,345 tokens"``."""
    tokens = prompt_tokens(state)
    last = state.steps[-1] if state.steps else None
    if last is None or reported_prompt(last.usage) <= 0 or last.prompt_estimate <= 0:
        return f"about {tokens:,} tokens"
    added = state.prompt_estimate - last.prompt_estimate
    if added < 0:
        return (f"{tokens:,} tokens (after compaction; call {last.index} reported "
                f"{reported_prompt(last.usage):,})")
    return (f"{tokens:,} tokens (call {last.index} reported {reported_prompt(last.usage):,}; "
            f"about {added:,} added since)")


# ---------------------------------------------------------------- compaction

def compaction_cut(messages: list[Message], keep_turns: int) -> int | None:
    """The index where the kept tail starts, or ``None`` when there is nothing to compact.

    The tail starts at the ``keep_turns``-th assistant message from the end, so it begins
    with a model reply and every ``tool_result`` in it answers a ``tool_use`` also in it; the
    head ``messages[1:cut]`` holds whole turns. Needs at least one assistant message before
    the tail.
    """
    assistants = [k for k, m in enumerate(messages) if m.get("role") == "assistant" and k > 0]
    if len(assistants) <= keep_turns:
        return None
    cut = assistants[-keep_turns]
    return cut if cut > 1 else None


def latest_user_text(messages: Sequence[Message]) -> int | None:
    """The index of the last user message holding text (not only ``tool_result`` blocks, not
    only a compaction summary): in a conversation (``run_agent(messages=...)``) the current
    question, else the task or a corrective turn. ``None`` when there is none."""
    for k in range(len(messages) - 1, -1, -1):
        m = messages[k]
        if m.get("role") == "user" and _texts(m):
            return k
    return None


def _texts(message: Message) -> list[Block]:
    """The text blocks of ``message`` that are not a compaction summary."""
    return [b for b in blocks_of(message.get("content", ""))
            if b.get("type") == "text" and not str(b.get("text", "")).startswith(SUMMARY_HEADER)]


def compact_messages(messages: list[Message], summarizer: Summarizer,
                     keep_turns: int = 2) -> tuple[list[Message], Usage] | None:
    """Older turns replaced by a summary: ``(new_messages, usage)``, or ``None`` if too short.

    ``new_messages[0]`` is the task (the text of ``messages[0]``), then the text of the
    latest user text message (:func:`latest_user_text`) when the cut would have passed it,
    word for word (in a conversation whose current turn made more calls than ``keep_turns``,
    the current question is never summarised away), then one text block holding
    :data:`SUMMARY_HEADER` and the summary of the rest of ``messages[0:cut]``. Then the kept
    tail, unchanged. An earlier
    summary block is replaced, not lost: the summariser receives it inside ``messages[0]``
    and both built-in summarisers fold it into the new summary. ``usage`` is what the
    summariser reported (zero for an offline one).
    """
    cut = compaction_cut(messages, keep_turns)
    if cut is None:
        return None
    head = list(messages[:cut])
    latest = latest_user_text(messages)
    pinned: list[Block] = []
    if latest is not None and 0 < latest < cut:  # the cut passes the latest user text
        pinned = _texts(messages[latest])
        rest = [b for b in blocks_of(messages[latest].get("content", "")) if b not in pinned]
        head[latest] = {**messages[latest], "content": rest}  # summarise only its results
    out = summarizer(head)
    text, usage = out if isinstance(out, tuple) else (out, Usage())
    first = user_message([*_texts(messages[0]), *pinned,
                          text_block(f"{SUMMARY_HEADER}\n{text}")])
    return [first, *messages[cut:]], usage


def compact_if_needed(state: RunState) -> None:
    """The loop's compaction step, before each model call.

    When ``config.summarizer`` is set and the prompt (:func:`prompt_tokens`: the last call's
    reported prompt plus the estimate of what was added since) passes
    ``compact_share × context_window``, compacts ``state.messages`` in place, recomputes the
    prompt estimate once (a rare event), adds the summariser's usage to the run's totals and
    emits a ``compaction`` event with the prompt's size before and after (tokens). A summariser
    that raises is reported as a ``compaction_failed`` event; the run goes on uncompacted
    and the context-window stop still guards it.
    """
    c = state.config
    if c.summarizer is None or c.compact_share is None:
        return
    limit = int(c.context_window * c.compact_share)
    before = prompt_tokens(state)
    if before <= limit:
        return
    try:
        done = compact_messages(state.messages, c.summarizer, c.compact_keep_turns)
    except Exception as e:  # noqa: BLE001 - a failed summary must not end the run
        state.emit("compaction_failed", step=state.model_calls + 1,
                   error=f"{type(e).__name__}: {e}")
        return
    if done is None:
        return
    new, usage = done
    if not isinstance(usage, Usage) or not isinstance(new, list):
        state.emit("compaction_failed", step=state.model_calls + 1,
                   error=f"the summariser returned usage of type {type(usage).__name__}; "
                         f"it must return a Usage")
        return
    state.messages[:] = new
    state.recount_prompt_estimate()
    state.add_usage(usage)
    state.compactions += 1
    state.emit("compaction", step=state.model_calls + 1, before_tokens=before,
               after_tokens=prompt_tokens(state), messages=len(state.messages))
