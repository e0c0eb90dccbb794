"""The ten-line loop: the agent loop over the Messages API, with no harness around it.

This is the loop an interviewer asks for when they say "write an agent loop without a
framework": call the model with the whole list, append its reply, and while its
``stop_reason`` is ``"tool_use"`` run every ``tool_use`` block and answer them all in one user
message of ``tool_result`` blocks, in the order asked, each carrying its ``tool_use_id``.
Tools run through a :class:`~primer.loop.tools.ToolRegistry`, so an unknown name, bad input
or a raising tool comes back as an error result (lesson 04) rather than a crash.

It has one exit, the model's own ``stop_reason``, and that is the point of showing it: no
step limit, no budget, no loop detection, no wall clock, a ``max_tokens`` reply treated like
an answer. Every one of those is the harness's job, and :func:`primer.loop.loop.run_agent`
(lesson 05) adds each as a named check. The course's lessons print this function with
``inspect.getsource`` beside the production loop; it is not used by the library.
"""

from __future__ import annotations

from .messages import Message, assistant_message, user_message
from .model import LLM, Reply
from .tools import ToolRegistry


def ten_line_loop(llm: LLM, task: str, registry: ToolRegistry, *, system: str = "",
                  max_tokens: int = 1024) -> tuple[list[Message], list[Reply]]:
    """Run ``task`` until the model's ``stop_reason`` is not ``"tool_use"``.

    ``llm`` is any :class:`~primer.loop.model.LLM`; ``registry`` the tools (rendered into
    the definitions sent on every call, and the allow-list); ``system`` the system prompt,
    sent beside the list; ``max_tokens`` caps each reply (tokens). Returns the message list
    and the model's replies, one per call (their ``usage`` counts tokens). Never stops on
    its own: a model that keeps asking for tools keeps it running (a
    :class:`~primer.loop.model.ScriptedLLM` raises ``ScriptExhausted`` when its script ends).
    """
    messages, replies = [user_message(task)], []
    while True:
        reply = llm(system=system, messages=messages, tools=registry.definitions(),
                    max_tokens=max_tokens)
        replies.append(reply)
        messages.append(assistant_message(reply.content))
        if reply.stop_reason != "tool_use":                 # the model's field, the one exit
            return messages, replies
        results = [registry.run(call).result_block() for call in reply.tool_uses]
        messages.append(user_message(results))              # one user turn, in request order
