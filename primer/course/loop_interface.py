"""How the coding round calls a learner's loop, and how a failure of that call is described.

Kept apart from :mod:`primer.course.exercises` (the battery, its scripted models and judges)
because the child process that runs a learner's file (:mod:`primer.course.loop_child`)
needs these few names and nothing heavier: it starts in an interpreter start, not the
battery's imports.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from primer.course.checking import describe_exception

LoopFn = Callable[..., Any]

#: How the checker calls the learner's loop, and how the loop calls the model.
LOOP_SIGNATURE = "my_loop(model, task, tools, *, max_steps, token_budget)"
MODEL_SIGNATURE = "model(messages, tool_definitions)"


class Toolbox(dict):
    """The ``tools`` argument: a dict name → function, plus ``definitions`` for the model.

    ``definitions`` is a list of ``{"name", "description", "input_schema"}`` dicts, the tool
    definitions to pass to ``model(messages, tools.definitions)``.
    """

    def __init__(self, functions: Mapping[str, Callable[..., Any]],
                 definitions: list[dict[str, Any]]) -> None:
        super().__init__(functions)
        self.definitions = definitions


class ModelCallError(TypeError):
    """The loop called the checker's model other than as ``model(messages, tool_definitions)``.

    A ``TypeError`` (as Python raises for a call with the wrong arguments) whose message says
    how the model was called and how this exercise calls it.
    """


def binds(fn: LoopFn) -> bool:
    """Whether ``fn`` accepts the checker's call ``fn(model, task, tools, *, max_steps,
    token_budget)`` (``True`` when its signature cannot be read)."""
    try:
        inspect.signature(fn).bind(None, "task", {}, max_steps=1, token_budget=1)
    except TypeError:
        return False
    except ValueError:
        return True
    return True


def interface_kind(e: BaseException, fn: LoopFn) -> str | None:
    """What an exception the loop raised says about how it is called: ``"model call"`` (it
    called the model another way, :class:`ModelCallError`), ``"signature"`` (a
    ``TypeError`` and ``fn`` cannot be called as :data:`LOOP_SIGNATURE`), else ``None``."""
    if isinstance(e, ModelCallError):
        return "model call"
    if isinstance(e, TypeError) and not binds(fn):
        return "signature"
    return None


def describe_loop_exception(e: BaseException, fn: LoopFn) -> str:
    """:func:`~primer.course.checking.describe_exception`, never cutting a
    :class:`ModelCallError` (its text says how to call the model), plus how to write the
    loop's signature when ``fn`` cannot be called as the checker calls it."""
    line = describe_exception(e, fn, limit=0 if isinstance(e, ModelCallError) else 120)
    if " at line " not in line and isinstance(e, TypeError) and not binds(fn):
        line += f"; write it as def {LOOP_SIGNATURE}"
    return line
