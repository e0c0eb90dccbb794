"""Request options of the Messages API that SDK 2.x sends, as the local server applies them.

:class:`~primer.providers.fake_server.FakeModelServer` reads three of them here:

- ``output_config.effort``: one of ``low``, ``medium``, ``high``, ``xhigh``, ``max``
  (:func:`output_config`; a scripted model answers the same at every effort);
- ``output_config.format``: ``{"type": "json_schema", "schema": {...}}``, API-native
  structured output. The real API constrains the model to the schema; a scripted model
  cannot be constrained, so :func:`format_problem` checks its answer against the schema
  and the server fails the call (a broken script, never a reply) when it does not match;
- server-side compaction: the beta ``context_management`` edit ``compact_20260112``
  (:func:`requested_compaction`). When the prompt passes the edit's trigger (input tokens,
  150,000 by default, as the SDK documents), the reply starts with a ``compaction``
  block that summarises the conversation; with ``pause_after_compaction`` the reply is that
  block alone, with ``stop_reason`` ``compaction``. In later requests the messages before
  the last ``compaction`` block are dropped (:func:`after_compaction`), as the API drops
  them, and the block's summary stands in for them: the prompt is billed from there. A
  scripted model cannot read a summary, so it is handed the whole conversation without the
  compaction blocks (:func:`without_compaction`), as if the summary had kept every fact.

Every malformed option is a :class:`ValueError` whose message the server sends as the API's
400. Sources: the SDK's request types (``OutputConfigParam``, ``JSONOutputFormatParam``,
``BetaCompact20260112EditParam``, ``BetaCompactionBlockParam``) and their docstrings.
"""

from __future__ import annotations

import json
from typing import Any

from primer.loop.messages import Message, blocks_of, text_block

#: ``output_config.effort`` values (the SDK's ``OutputConfigParam``).
EFFORTS = ("low", "medium", "high", "xhigh", "max")
#: The edit type of server-side compaction, and its default trigger (input tokens).
COMPACTION_EDIT = "compact_20260112"
DEFAULT_TRIGGER_TOKENS = 150_000


def output_config(body: dict[str, Any]) -> dict[str, Any] | None:
    """The request's ``output_config.format`` schema (``None`` when it sets none), after
    checking the whole ``output_config``; ``ValueError`` naming the field when malformed."""
    config = body.get("output_config")
    if config is None:
        return None
    if not isinstance(config, dict):
        raise ValueError("output_config: Input should be an object")
    extra = set(config) - {"effort", "format", "task_budget"}
    if extra:
        raise ValueError(f"output_config.{sorted(extra)[0]}: Extra inputs are not permitted")
    effort = config.get("effort")
    if effort is not None and effort not in EFFORTS:
        raise ValueError(f"output_config.effort: Input should be {', '.join(map(repr, EFFORTS))}")
    fmt = config.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" \
            or not isinstance(fmt.get("schema"), dict):
        raise ValueError("output_config.format: Input should be {\"type\": \"json_schema\", "
                         "\"schema\": {...}}")
    schema: dict[str, Any] = fmt["schema"]
    return schema


def format_problem(text: str, schema: dict[str, Any]) -> str | None:
    """Why ``text`` is not JSON matching ``schema`` (``None`` when it is)."""
    import jsonschema

    try:
        value = json.loads(text)
    except ValueError as e:
        return f"the answer is not JSON ({e})"
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema)
                                             .iter_errors(value))
    return None if error is None else f"{'/'.join(map(str, error.path)) or '(answer)'}: " \
                                      f"{error.message}"


def requested_compaction(body: dict[str, Any]) -> dict[str, Any] | None:
    """The request's ``compact_20260112`` edit (``None`` when it has none), after checking
    ``context_management``; ``ValueError`` naming the field when malformed."""
    cm = body.get("context_management")
    if cm is None:
        return None
    edits = cm.get("edits") if isinstance(cm, dict) else None
    if not isinstance(edits, list) or not all(isinstance(e, dict) for e in edits):
        raise ValueError("context_management.edits: Input should be a list of edits")
    found = None
    for k, edit in enumerate(edits):
        if edit.get("type") != COMPACTION_EDIT:
            continue  # (other edits, such as clearing tool results, are not applied here)
        trigger = edit.get("trigger")
        if trigger is not None and not (isinstance(trigger, dict)
                                        and trigger.get("type") == "input_tokens"
                                        and type(trigger.get("value")) is int
                                        and trigger["value"] >= 1):
            raise ValueError(f"context_management.edits.{k}.trigger: Input should be "
                             f"{{\"type\": \"input_tokens\", \"value\": n}} with n >= 1")
        found = edit
    return found


def trigger_tokens(edit: dict[str, Any]) -> int:
    """The input tokens past which ``edit`` compacts (its trigger, else 150,000)."""
    trigger = edit.get("trigger") or {}
    return int(trigger.get("value", DEFAULT_TRIGGER_TOKENS))


def after_compaction(messages: list[Message]) -> list[Message]:
    """The messages as the model reads them: from the last ``compaction`` block on, with
    that block's summary as a user turn in place of everything before it (the API drops
    those messages). ``messages`` unchanged when none holds a compaction block."""
    for i in range(len(messages) - 1, -1, -1):
        blocks = blocks_of(messages[i].get("content", ""))
        at = next((j for j in range(len(blocks) - 1, -1, -1)
                   if blocks[j].get("type") == "compaction"), None)
        if at is None:
            continue
        summary = str(blocks[at].get("content") or "(the earlier conversation could not be "
                                                    "summarised)")
        rest = blocks[at + 1:]
        head: list[Message] = [{"role": "user", "content": [text_block(summary)]}]
        if rest:
            head.append({"role": "assistant", "content": rest})
        return [*head, *messages[i + 1:]]
    return messages


def without_compaction(messages: list[Message]) -> list[Message]:
    """``messages`` without their ``compaction`` blocks (a message left empty is dropped):
    what a scripted model reads. ``messages`` itself when none holds one."""
    if not any(b.get("type") == "compaction" for m in messages
               for b in blocks_of(m.get("content", ""))):
        return messages
    out: list[Message] = []
    for m in messages:
        kept = [b for b in blocks_of(m.get("content", "")) if b.get("type") != "compaction"]
        if kept:
            out.append({**m, "content": kept})
    return out


def summary_of(messages: list[Message]) -> str:
    """A deterministic stand-in for the API's summary: the first user text (the task), the
    tools called and how many messages it replaces."""
    task = next((b.get("text", "") for m in messages if m.get("role") == "user"
                 for b in blocks_of(m.get("content", "")) if b.get("type") == "text"), "")
    tools = list(dict.fromkeys(b.get("name") for m in messages
                               for b in blocks_of(m.get("content", ""))
                               if b.get("type") == "tool_use"))
    return (f"Summary of {len(messages)} earlier messages. The task: {task}"
            + (f" Tools called so far: {', '.join(map(str, tools))}." if tools else ""))
