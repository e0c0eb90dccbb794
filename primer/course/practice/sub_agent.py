"""Lesson 12's exercise: answer a parent's ``tool_use`` by running a sub-agent.

The learner writes ``call_sub_agent(call, parent, llm, tools, share) -> tool_result block``:

* ``call`` is the parent's ``tool_use`` block; ``call["input"]["task"]`` is the child's task;
* ``parent`` is the parent run's state, a dict ``{"messages": list, "limit": tokens,
  "spent": tokens}``: its message list (never given to the child, never changed) and its
  token budget (the child's usage is added to ``parent["spent"]``, call by call);
* ``llm`` is the child's model (``llm(system=, messages=, tools=, max_tokens=) -> Reply``),
  ``tools`` its :class:`~primer.loop.tools.ToolRegistry`;
* ``share`` is the most tokens the child may spend; it never gets more than the parent has
  left (``limit - spent``). The child stops once its spend reaches that allowance.

It returns one ``tool_result`` block for ``call["id"]``: the child's final text only, or,
when the child stopped at its share, an ``is_error`` result saying so. The child's own calls
and results stay in its own list. :func:`check_sub_agent_call` runs the learner's function
against a recording child model the learner did not write.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from primer.course.checking import Case, ExerciseReport, Problem, run_cases, short
from primer.loop.messages import (
    Message,
    assistant_message,
    text_block,
    tool_use_block,
    user_message,
)
from primer.loop.model import Reply, Usage
from primer.loop.tools import ToolRegistry, tool

#: Tokens each call of the check's child model reports (input, output).
_CALL = Usage(100, 20)
_TASK = "Count the lines of the notes that mention a refund. Report one line."
_FINAL = "FINDING: 2 lines of the notes mention a refund."
_THOUGHT = "Thought: read the notes first."
_MAX_CALLS = 60


class _KeptCalling(RuntimeError):
    """The check's child model was called far past any share."""


class _Child:
    """A child model that records every call's messages and reports :data:`_CALL` tokens.

    It asks for ``read_notes`` ``tool_calls`` times (with a thought), then answers
    :data:`_FINAL`; ``tool_calls=None`` never answers.
    """

    def __init__(self, tool_calls: int | None = 2) -> None:
        self.tool_calls = tool_calls
        self.seen: list[list[Message]] = []

    def __call__(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]],
                 max_tokens: int) -> Reply:
        self.seen.append(copy.deepcopy(list(messages)))
        n = len(self.seen)
        if n > _MAX_CALLS:
            raise _KeptCalling(f"the child was called {n} times")
        if self.tool_calls is None or n <= self.tool_calls:
            return Reply([text_block(_THOUGHT), tool_use_block(f"toolu_child_{n}", "read_notes",
                                                               {"page": n})],
                         "tool_use", _CALL, "check child")
        return Reply([text_block(_FINAL)], "end_turn", _CALL, "check child")


def _tools() -> ToolRegistry:
    @tool
    def read_notes(page: int) -> str:
        """Read one page of the case notes.

        Args:
            page: the page number, from 1.
        """
        return f"NOTES page {page}: refund asked on A123; refund sent on B104; " + "x " * 40

    return ToolRegistry([read_notes])


def _setup(*, limit: int = 10_000, spent: int = 400) -> tuple[dict[str, Any], dict[str, Any]]:
    call = tool_use_block("toolu_parent_1", "delegate", {"task": _TASK})
    parent = {"messages": [user_message("Why were two refunds asked for? Check the notes."),
                           assistant_message([text_block("Thought: hand this to a helper."),
                                              call])],
              "limit": limit, "spent": spent}
    return dict(call), parent


def _run(fn: Callable[..., Any], child: _Child, *, share: int = 5_000, limit: int = 10_000,
         spent: int = 400) -> tuple[Any, dict[str, Any], list[Message]] | str:
    call, parent = _setup(limit=limit, spent=spent)
    before = copy.deepcopy(parent["messages"])
    try:
        out = fn(call, parent, child, _tools(), share)
    except _KeptCalling:
        return (f"the child's model was called more than {_MAX_CALLS} times; stop the child "
                f"once its spend reaches its share (check it each time round the loop)")
    return out, parent, before


def _result_problem(out: Any, call_id: str = "toolu_parent_1") -> Problem:
    if not isinstance(out, dict) or out.get("type") != "tool_result":
        return (f"call_sub_agent returned {short(repr(out), 60)}; return one tool_result "
                f"block: tool_result_block(call['id'], text)")
    if out.get("tool_use_id") != call_id:
        return (f"the result answers tool_use_id {short(repr(out.get('tool_use_id')))}; use "
                f"the parent's call['id'] ({call_id!r}) so the parent can pair them")
    return None


def _probe_fresh(fn: Callable[..., Any]) -> Problem:
    child = _Child()
    ran = _run(fn, child)
    if isinstance(ran, str):
        return ran
    _, parent, before = ran
    if not child.seen:
        return "the child's model was never called; run a loop that calls llm(...)"
    first = child.seen[0]
    task_only = (len(first) == 1 and first[0].get("role") == "user"
                 and (first[0].get("content") == _TASK
                      or first[0].get("content") == [text_block(_TASK)]))
    if not task_only:
        return (f"the child's first call sent {len(first)} messages, starting "
                f"{short(repr(first[0]) if first else '[]', 60)}; start the child with a new "
                f"list holding only the task: [user_message(call['input']['task'])]")
    if parent["messages"] != before:
        return (f"the parent's message list changed ({len(before)} → "
                f"{len(parent['messages'])} messages); the child appends to its own list, "
                f"never to parent['messages']")
    return None


def _probe_own_loop(fn: Callable[..., Any]) -> Problem:
    child = _Child()
    ran = _run(fn, child)
    if isinstance(ran, str):
        return ran
    if len(child.seen) < 2:
        return (f"the child's model was called {len(child.seen)} time(s); it asked for a tool, "
                f"so run the tool and call the model again until stop_reason is not tool_use")
    last = child.seen[1][-1]
    content = last.get("content")
    answered = (last.get("role") == "user" and isinstance(content, list)
                and any(isinstance(b, dict) and b.get("type") == "tool_result"
                        and b.get("tool_use_id") == "toolu_child_1" for b in content))
    if not answered:
        return (f"the child's second call ended with {short(repr(last), 70)}; append the "
                f"reply, then one user message of tool_result blocks (tools.run(c)"
                f".result_block()) answering the child's tool_use")
    return None


def _probe_final_text(fn: Callable[..., Any]) -> Problem:
    ran = _run(fn, _Child())
    if isinstance(ran, str):
        return ran
    out = ran[0]
    problem = _result_problem(out)
    if problem:
        return problem
    if out.get("content") != _FINAL:
        where = ("it holds the child's tool results" if "NOTES" in str(out.get("content"))
                 else "it holds the child's thoughts" if _THOUGHT in str(out.get("content"))
                 else "it is not the final reply's text")
        return (f"the parent would read {short(repr(out.get('content')), 60)}: {where}; "
                f"return only the child's last reply text (reply.text)")
    if out.get("is_error"):
        return "the child answered, yet the result has is_error true; set it only on a stop"
    return None


def _probe_charged(fn: Callable[..., Any]) -> Problem:
    child = _Child()
    ran = _run(fn, child, spent=400)
    if isinstance(ran, str):
        return ran
    _, parent, _ = ran
    if not child.seen:
        return "the child's model was never called, so nothing could be charged; run its loop"
    used = len(child.seen) * _CALL.total_tokens
    charged = parent["spent"] - 400
    if charged != used:
        hint = (" (count input and output tokens: reply.usage.total_tokens)"
                if charged == len(child.seen) * _CALL.output_tokens
                else " (add every call's usage, not only the last)"
                if charged == _CALL.total_tokens else "")
        return (f"the child's {len(child.seen)} calls used {used:,} tokens but "
                f"parent['spent'] grew by {charged:,}; add each reply's usage to "
                f"parent['spent']{hint}")
    return None


def _probe_share(fn: Callable[..., Any]) -> Problem:
    child = _Child(tool_calls=None)                          # never answers
    share = 300                                              # 120 a call: stops after 3
    ran = _run(fn, child, share=share, spent=400)
    if isinstance(ran, str):
        return ran
    out, parent, _ = ran
    want = 3
    if len(child.seen) != want:
        reached = want * _CALL.total_tokens
        return (f"with a share of {share} tokens and {_CALL.total_tokens} a call, the child "
                f"should stop after {want} calls (its spend reaches {reached}); it made "
                f"{len(child.seen)}. Loop while spent < allowance, adding each reply's usage")
    problem = _result_problem(out)
    if problem:
        return problem
    if not out.get("is_error"):
        return (f"the child stopped at its share without an answer, but the result "
                f"{short(repr(out.get('content')), 50)} is not is_error; say it stopped")
    if parent["spent"] - 400 != want * _CALL.total_tokens:
        return "the child stopped, but its spend was not all added to parent['spent']"
    return None


def _probe_parent_left(fn: Callable[..., Any]) -> Problem:
    child = _Child(tool_calls=None)
    ran = _run(fn, child, share=5_000, limit=10_000, spent=9_800)   # 200 left
    if isinstance(ran, str):
        return ran
    if len(child.seen) != 2:
        return (f"the parent had 200 tokens left (limit 10,000, spent 9,800) and the share "
                f"was 5,000; the child made {len(child.seen)} calls of 120 tokens. Its "
                f"allowance is min(share, limit - spent): it should stop after 2")
    return None


_CASES = (
    Case("fresh history", _probe_fresh,
         "the child started from the task alone; the parent's list was not read or changed"),
    Case("own loop", _probe_own_loop,
         "the child ran its tool and answered its own tool_use in its own list"),
    Case("only the final text", _probe_final_text,
         "the parent's tool_result holds the child's last text, for the parent's call id"),
    Case("parent charged", _probe_charged,
         "every child call's usage was added to parent['spent']"),
    Case("stops at its share", _probe_share,
         "a child that never finished stopped when its spend reached its share: is_error"),
    Case("no more than the parent has left", _probe_parent_left,
         "the allowance was the smaller of the share and the parent's remainder"),
)


def check_sub_agent_call(fn: Callable[..., Any], *, show: bool = True) -> ExerciseReport:
    """Judge ``call_sub_agent(call, parent, llm, tools, share) -> tool_result block`` with a
    recording child model that reports 120 tokens a call (see the module docstring).

    Prints (when ``show``) and returns the :class:`~primer.course.checking.ExerciseReport`:
    one PASS/FAIL line per case and ``score: k/6``. An exception raised by ``fn`` is that
    case's failure. Raises ``TypeError`` only when ``fn`` is not callable.
    """
    return run_cases(fn, _CASES, what="call_sub_agent", show=show)
