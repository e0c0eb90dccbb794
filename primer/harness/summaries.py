"""Summarisers for compaction, and a transcript of turns for a person to read.

``AgentConfig(summarizer=...)`` takes any function of the older messages that returns the
summary's text (or ``(text, usage)``); the loop's compaction step
(:func:`primer.loop.loop.compact_if_needed`) calls it. Two come with the course:
:func:`extractive_summary`, deterministic and offline (no model call, the same text every
run), and :class:`LLMSummarizer`, one model call. Both read the turns as
:func:`render_lines` writes them, and fold an earlier summary into the new one. Both start
with :func:`kept_facts`, built without a model: what the user asked for and ruled out, the
answers already given, and the calls still open, word for word, so no summary can drop the
goal or a constraint however long ago it was stated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from primer.loop.loop import SUMMARY_HEADER
from primer.loop.messages import (
    Block,
    Message,
    blocks_of,
    text_block,
    text_of,
    tool_uses_of,
    user_message,
)
from primer.loop.model import LLM, Usage


def render_lines(messages: Sequence[Message], result_chars: int | None = 120, *,
                 mark_cuts: bool = False) -> list[str]:
    """One line per text, call and result of ``messages``, texts and results cut to
    ``result_chars`` (``None``: never cut): ``user: ...``, ``called get_order({...})``,
    ``  result: ...`` (or ``  error: ...``). What the summarisers read, and a transcript for
    a person.

    A cut result ends in ``…``; a cut text is cut without a mark (what the summarisers read).
    With ``mark_cuts`` every cut ends in ``…[+N chars]``, N the characters left out (after
    runs of blanks are folded into one), so a reader can tell a cut from a short answer."""
    def cut(text: str, always_mark: bool) -> str:
        if result_chars is None or len(text) <= result_chars:
            return text
        if mark_cuts:
            return f"{text[:result_chars]}…[+{len(text) - result_chars} chars]"
        return text[:result_chars] + ("…" if always_mark else "")

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
                    lines.append(f"{m.get('role')}: {cut(text, False)}")
            elif kind == "tool_use":
                args = json.dumps(b.get("input"), ensure_ascii=False, separators=(",", ":"))
                lines.append(f"called {b.get('name')}({args})")
            elif kind == "tool_result":
                content = " ".join(str(b.get("content", "")).split())
                mark = "error" if b.get("is_error") else "result"
                lines.append(f"  {mark}: {cut(content, True)}")
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
    earlier: list[Block] = [
        text_block("\n".join(_turn_lines(str(b.get("text", "")))))
        for b in blocks_of(first.get("content", ""))
        if b.get("type") == "text" and str(b.get("text", "")).startswith(SUMMARY_HEADER)]
    head: list[Message] = ([{"role": first.get("role", "user"), "content": earlier}]
                           if earlier else [])
    return [*head, *messages[1:]]


# ---------------------------------------------------------------- what a summary keeps

#: Opens the lines every summary keeps word for word (:func:`kept_facts`).
KEPT_HEADER = "Kept word for word:"


def _split(summary: str) -> tuple[list[str], list[str]]:
    """An earlier summary block's kept lines and its other lines (header line dropped)."""
    lines = summary.splitlines()[1:]
    if not lines or lines[0] != KEPT_HEADER:
        return [], lines
    end = next((k for k, line in enumerate(lines[1:], 1) if not line.startswith("- ")),
               len(lines))
    return lines[1:end], lines[end:]


def _turn_lines(summary: str) -> list[str]:
    """An earlier summary block without its kept lines (they are carried by kept_facts)."""
    return [SUMMARY_HEADER, *_split(summary)[1]]


def _call_key(block: dict[str, object]) -> str:
    args = json.dumps(block.get("input"), ensure_ascii=False, separators=(",", ":"))
    return f"{block.get('name')}({args})"


def kept_facts(messages: list[Message]) -> list[str]:
    """The lines a summary of ``messages`` keeps word for word (each run of blanks one space),
    whatever else it drops: ``- user: ...``, every text the user wrote (the goal, each
    constraint); ``- answered: ...``, every answer the model gave (a reply with text and no
    tool call: a decision the user saw); ``- open: name(input) -> error: ...``, each call whose
    last result was an error, not since made again with the same input and answered. An
    earlier summary's kept lines (in ``messages[0]``) come first and stay, but for an open
    call since answered. ``messages[0]``'s own text (the task) is not repeated: compaction
    keeps it in place."""
    carried: list[str] = []
    for b in blocks_of(messages[0].get("content", "")) if messages else []:
        text = str(b.get("text", "")) if b.get("type") == "text" else ""
        if text.startswith(SUMMARY_HEADER):
            carried.extend(_split(text)[0])
    said: list[str] = []
    calls: dict[object, str] = {}
    open_calls: dict[str, str] = {}
    closed: set[str] = set()
    for m in messages[1:]:
        content = m.get("content", "")
        if m.get("role") == "user":
            for b in blocks_of(content):
                if b.get("type") == "text" and str(b.get("text", "")).strip():
                    said.append(f"- user: {' '.join(str(b.get('text', '')).split())}")
                elif b.get("type") == "tool_result" and b.get("tool_use_id") in calls:
                    key = calls[b.get("tool_use_id")]
                    if b.get("is_error"):
                        result = " ".join(str(b.get("content", "")).split())
                        open_calls[key] = f"- open: {key} -> error: {result}"
                    else:
                        open_calls.pop(key, None)
                        closed.add(key)
        else:
            uses = tool_uses_of(content)
            calls.update((u.get("id"), _call_key(dict(u))) for u in uses)
            if not uses and text_of(content).strip():
                said.append(f"- answered: {' '.join(text_of(content).split())}")
    still_open = [line for line in carried if not (
        line.startswith("- open: ") and line[8:].split(" -> ", 1)[0] in closed)]
    return [*still_open, *said, *open_calls.values()]


def _with_kept(messages: list[Message], body: list[str]) -> str:
    facts = kept_facts(messages)
    return "\n".join([KEPT_HEADER, *facts, *body] if facts else body)


def extractive_summary(messages: list[Message]) -> str:
    """A deterministic offline summary: one line per thought, call and (shortened) result.

    No model call, so it costs no tokens to make and gives the same text every run; a real
    harness would use :class:`LLMSummarizer`. ``messages`` are the turns being compacted
    (the first may hold the task and an earlier summary, which is folded in).
    """
    return _with_kept(messages, render_lines(_history(messages)) or ["(nothing to summarise)"])


class LLMSummarizer:
    """Summarise older turns with one model call; returns ``(text, usage)``.

    ``llm`` is any :class:`~primer.loop.model.LLM`; ``max_tokens`` caps the summary's length
    (tokens). The turns are rendered as text (calls, shortened results) in one user message,
    so the call carries no tools. The usage is added to the run's totals by the loop.
    """

    INSTRUCTIONS = ("You compress an agent's working history. Keep every fact the task still "
                    "needs: the goal and every constraint, ids, numbers, decisions, errors, "
                    "calls still open and what was already done. Drop chatter. Write short "
                    "lines.")

    def __init__(self, llm: LLM, max_tokens: int = 512) -> None:
        self.llm, self.max_tokens = llm, max_tokens

    def __call__(self, messages: list[Message]) -> tuple[str, Usage]:
        history = "\n".join(render_lines(_history(messages), result_chars=400))
        reply = self.llm(system=self.INSTRUCTIONS, tools=[], max_tokens=self.max_tokens,
                         messages=[user_message(f"Summarise this history:\n{history}")])
        return _with_kept(messages, [reply.text]), reply.usage
