"""What every exercise that returns ``tool_result`` blocks is held to (lessons 02, 04, 06).

A ``tool_result`` is ``{"type": "tool_result", "tool_use_id": <the call's id>, "content":
<a string, or a list of text blocks>, "is_error": <bool, optional>}``: the shape the
Messages API takes, checked the same way by each lesson's check.
"""

from __future__ import annotations

from typing import Any

from primer.course.checking import Problem, short


def content_text(content: Any) -> str | None:
    """A result's content as text: a string, or a list of text blocks joined; ``None`` for
    anything the API would not take as a result's content."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text"
                                         and isinstance(b.get("text"), str) for b in content):
        return "".join(b["text"] for b in content)
    return None


def tool_result_problem(block: Any, call_id: str) -> Problem:
    """What is wrong with ``block`` as the ``tool_result`` answering the call ``call_id``
    (its shape only: whether it should be an error is each exercise's own question), or
    ``None``."""
    if not isinstance(block, dict):
        return (f"returned {type(block).__name__} {short(block)}; return a dict "
                f"{{'type': 'tool_result', 'tool_use_id': call['id'], 'content': str, "
                f"'is_error': bool}}")
    if block.get("type") != "tool_result":
        return f"the block's type is {short(block.get('type'))!r}; it must be 'tool_result'"
    if block.get("tool_use_id") != call_id:
        return (f"tool_use_id is {short(block.get('tool_use_id'))!r}, not the call's id "
                f"{call_id!r}; copy call['id'] so the API can pair the result with its call")
    if content_text(block.get("content")) is None:
        return (f"content is a {type(block.get('content')).__name__}; the API takes a string "
                f"(or text blocks): send json.dumps of a result, the message of an error")
    if "is_error" in block and type(block["is_error"]) is not bool:
        return f"is_error is {short(block['is_error'])!r}; it must be True or False"
    return None
