"""The course's working loop, printing 2 MB on stdout and 2 MB on stderr in every run."""

import sys
from pathlib import Path

_source = (Path(__file__).resolve().parent.parent / "learner_loop.py").read_text()
_namespace: dict = {}
exec(compile(_source, "learner_loop.py", "exec"), _namespace)  # noqa: S102


def my_loop(model, task, tools, *, max_steps, token_budget):
    sys.stdout.write("x" * 2_000_000)
    sys.stderr.write("y" * 2_000_000)
    return _namespace["my_loop"](model, task, tools, max_steps=max_steps,
                                 token_budget=token_budget)
