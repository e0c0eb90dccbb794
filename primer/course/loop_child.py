"""The child side of :mod:`primer.course.loop_process`: run a learner's loop file in this process.

Started in a fresh interpreter as ``python -I -B -c BOOT ROOT FILE FUNCTION REQUESTS_FD
REPLIES_FD`` (``BOOT`` puts ``ROOT``, where the package is, first on the path).
It imports the file, then asks the parent for each run in turn and calls the loop with a
``model`` and ``tools`` that are only messengers: every model call and every tool call is
a request written to ``REQUESTS_FD`` (one JSON object per line), answered by the parent on
``REPLIES_FD``. The parent serves the scripted model, runs the tools and judges the run
from what it was sent, so nothing here (nor anything the learner's file does to it) decides
a verdict. Messages, child to parent: ``load_error``, ``next`` (asks for the next run),
``model``, ``tool``, ``returned``, ``raised``; parent to child, one reply per request:
``{"value": ...}``, ``{"raise": {"type", "args"}}`` or, for ``next``, the run's order.

Imports only :mod:`primer.course.loop_interface` (and what it imports), so starting costs
an interpreter start, not the battery's imports.
"""

from __future__ import annotations

import builtins
import importlib.util
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from primer.course.loop_interface import (
    LoopFn,
    ModelCallError,
    Toolbox,
    describe_loop_exception,
    interface_kind,
)

#: The key that marks a value JSON cannot hold (a set, an object): ``{OPAQUE: type name}``.
OPAQUE = "$python_object"


class LoadError(ValueError):
    """The learner's file cannot be loaded, or has no such function; the text says why."""


def load_loop(path: Path, name: str) -> LoopFn:
    """Import ``path`` and return its function ``name``; :class:`LoadError` saying what is
    wrong (not Python, failed or exited on import, no such function)."""
    spec = importlib.util.spec_from_file_location(f"_learner_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise LoadError(f"cannot load {str(path)!r} as Python; is it a .py file?")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except BaseException as e:  # noqa: BLE001 - a file that fails (or exits) on import
        raise LoadError(f"{path.name} failed to import: {type(e).__name__}: {e}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(n for n, v in vars(module).items()
                       if callable(v) and getattr(v, "__module__", None) == module.__name__)
        raise LoadError(f"{path.name} has no function {name!r}; functions in it: "
                        f"{', '.join(found) or '(none)'}. Use FILE:FUNCTION to pick one.")
    return fn


def encode(message: dict[str, Any]) -> bytes:
    """``message`` as one JSON line. A value JSON cannot hold becomes ``{OPAQUE: type name}``;
    a message that cannot be written at all (a cycle, nesting too deep, a key that is not a
    string) keeps only its ``op`` and ``run`` and says why under ``unsendable``."""
    def opaque(value: Any) -> dict[str, str]:
        return {OPAQUE: type(value).__name__}

    try:
        text = json.dumps(message, default=opaque)
    except (TypeError, ValueError, RecursionError) as e:
        text = json.dumps({"op": message.get("op"), "run": message.get("run"),
                           "unsendable": f"{type(e).__name__}: {e}"})
    return text.encode() + b"\n"


class Channel:
    """The two pipes to the parent. ``ask`` writes a request and reads its reply under one
    lock, so threads of the learner's loop each get the reply to their own request."""

    def __init__(self, requests_fd: int, replies_fd: int) -> None:
        self._out = requests_fd
        self._in = os.fdopen(replies_fd, "rb")
        self._lock = threading.Lock()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._out, view):]

    def send(self, message: dict[str, Any]) -> None:
        """Write ``message``; no reply is expected."""
        with self._lock:
            self._write(encode(message))

    def ask(self, message: dict[str, Any]) -> Any:
        """Write ``message`` and return the parent's reply (``None`` once the parent has
        closed the pipe)."""
        with self._lock:
            self._write(encode(message))
            line = self._in.readline()
        return json.loads(line) if line else None


_NAMED: dict[str, type[Exception]] = {}


def rebuilt(spec: Any) -> Exception:
    """The exception the parent described as ``{"type", "args"}``: the builtin of that name,
    :class:`ModelCallError`, or an ``Exception`` subclass carrying the name (a tool's own
    error class), so ``type(e).__name__`` and ``str(e)`` read as in the parent."""
    name = str(spec.get("type", "RuntimeError")) if isinstance(spec, dict) else "RuntimeError"
    args = spec.get("args", []) if isinstance(spec, dict) else []
    cls: Any = ModelCallError if name == "ModelCallError" else getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        safe = name if name.isidentifier() else "ToolError"
        cls = _NAMED.setdefault(safe, type(safe, (Exception,), {}))
    try:
        return cls(*args)
    except Exception:  # noqa: BLE001 - a builtin that wants other arguments
        return RuntimeError(f"{name}: {' '.join(map(str, args))}")


def as_child_value(reply: Any) -> Any:
    """The value of a reply, or raise the exception it carries."""
    if not isinstance(reply, dict):
        raise RuntimeError("the checker closed the run (no reply to this call)")
    if "raise" in reply:
        raise rebuilt(reply["raise"])
    return reply.get("value")


def messenger(channel: Channel, run: int, op: str, name: str = "model"
              ) -> Callable[..., Any]:
    """A function that sends each call ``(*args, **kwargs)`` as an ``op`` request for
    ``run`` and returns (or raises) what the parent answers."""
    def call(*args: Any, **kwargs: Any) -> Any:
        request = {"op": op, "run": run, "args": list(args), "kwargs": kwargs}
        if op == "tool":
            request["name"] = name
        return as_child_value(channel.ask(request))

    call.__name__ = call.__qualname__ = name
    return call


def run_once(fn: LoopFn, order: dict[str, Any], channel: Channel) -> None:
    """Call the loop for one run (``order`` from the parent) and send what it returned or
    raised."""
    run = order["run"]
    tools = Toolbox({d["name"]: messenger(channel, run, "tool", d["name"])
                     for d in order["definitions"]}, order["definitions"])
    try:
        value = fn(messenger(channel, run, "model"), order["task"], tools,
                   max_steps=order["max_steps"], token_budget=order["token_budget"])
    except BaseException as e:  # noqa: BLE001 - the learner's failure is the report
        try:
            text, kind = describe_loop_exception(e, fn), interface_kind(e, fn)
        except Exception:  # noqa: BLE001 - an exception that cannot even be described
            text, kind = f"raised {type(e).__name__}", None
        channel.send({"op": "raised", "run": run, "text": text, "kind": kind})
    else:
        channel.send({"op": "returned", "run": run, "value": value})


def main(argv: list[str]) -> None:
    """Load ``argv = [FILE, FUNCTION, REQUESTS_FD, REPLIES_FD]`` and serve runs until the
    parent stops answering."""
    file, name, requests_fd, replies_fd = argv
    channel = Channel(int(requests_fd), int(replies_fd))
    try:
        fn = load_loop(Path(file), name)
    except LoadError as e:
        channel.send({"op": "load_error", "text": str(e)})
        return
    while True:
        order = channel.ask({"op": "next"})
        if not isinstance(order, dict) or "run" not in order:
            return
        run_once(fn, order, channel)

