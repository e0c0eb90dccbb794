"""``python -m primer check-loop FILE[:FUNCTION]``: run the coding round's checker on a file.

Loads ``FUNCTION`` (default ``my_loop``) from the Python file ``FILE`` and runs
:func:`primer.course.exercises.check_loop` on it: one line per behaviour and the score. A loop that
cannot be called the way the checker calls it (:data:`INTERFACE`), or that calls the model
another way, gets one message saying so instead. Exit status 0 on full marks, 1 when a
behaviour failed or the interface is wrong, 2 when the file or function cannot be loaded.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

USAGE_ERROR = 2

#: The interface the checker expects (as in :mod:`primer.course.exercises`; shown by ``--help``).
INTERFACE = """\
Your function is called as
  my_loop(model, task, tools, *, max_steps, token_budget)
and returns {"answer": str | None, "stop_cause": str}:
  the answer (the text of every text block of the last reply, joined) and "end_turn", or
  None and the stop cause: max_tokens, refusal, token_budget, loop_detected, max_steps.
  (stop_reason is the model's field in each reply; the loop's reason to stop is its stop
  cause.)

  model(messages, tool_definitions) -> reply dict
      one model call: messages is the whole history (Anthropic-shape dicts, starting with
      {"role": "user", "content": task}); tool_definitions is tools.definitions, on every
      call. Each call is checked as the Messages API checks a request: one that the API
      would refuse (a tool_result whose content is not a string or text blocks, a tool_use
      left unanswered, an empty message, a role other than user and assistant) fails. The
      reply is {"content": [text and tool_use blocks], "stop_reason": "end_turn" |
      "tool_use" | "max_tokens" | "refusal", "usage": {"input_tokens": int,
      "output_tokens": int}}.
      (Not the LLM protocol model(system=..., messages=..., tools=..., max_tokens=...).)
  task        the user's request, a string
  tools       a dict name -> function: call tools[name](**tool_use_input)
  max_steps   the most model calls the run may make
  token_budget  the most input + output tokens it may use, summed over every reply's usage
"""


def register(subparsers: Any) -> None:
    """Add the ``check-loop`` sub-command to ``subparsers``."""
    p = subparsers.add_parser(
        "check-loop", help="check your own agent loop against the lesson 14 battery",
        description="Run your loop function against scripted models that misbehave, and "
                    "print what passed and what did not.",
        epilog=INTERFACE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="FILE[:FUNCTION]",
                   help="a Python file and the loop function in it (default my_loop)")
    p.set_defaults(func=run)


def load_function(target: str) -> Any:
    """The function named in ``FILE[:FUNCTION]``; ``ValueError`` saying what is missing."""
    file, name = target, "my_loop"
    if ":" in target and not Path(target).exists():
        file, name = target.rsplit(":", 1)
    path = Path(file)
    if not path.is_file():
        raise ValueError(f"no file {file!r}; give the path of the .py file holding your loop")
    spec = importlib.util.spec_from_file_location(f"_learner_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot load {file!r} as Python; is it a .py file?")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - a file that fails (or exits) on import
        raise ValueError(f"{path.name} failed to import: {type(e).__name__}: {e}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(n for n, v in vars(module).items()
                       if callable(v) and getattr(v, "__module__", None) == module.__name__)
        raise ValueError(f"{path.name} has no function {name!r}; functions in it: "
                         f"{', '.join(found) or '(none)'}. Use FILE:FUNCTION to pick one.")
    return fn


def run(args: argparse.Namespace) -> int:
    """Check the loop; returns the exit code."""
    try:
        fn = load_function(args.target)
    except ValueError as e:
        print(f"check-loop: {e}", file=sys.stderr)
        return USAGE_ERROR
    from primer.course.exercises import check_loop  # imports the order scenario: only when used

    report = check_loop(fn, show=False)
    if report.interface_problem:
        print(f"check-loop: {getattr(fn, '__name__', 'your loop')} cannot be checked: "
              f"{report.interface_problem}\n\n{INTERFACE}",
              file=sys.stderr)
        return 1
    print(report)
    return 0 if report.score == report.total else 1
