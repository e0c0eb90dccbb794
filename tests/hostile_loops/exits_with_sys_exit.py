"""Calls sys.exit(0) from inside its loop after the first model call."""

import sys


def my_loop(model, task, tools, *, max_steps, token_budget):
    messages = [{"role": "user", "content": task}]
    for _ in range(max_steps):
        model(messages, tools.definitions)
        sys.exit(0)
