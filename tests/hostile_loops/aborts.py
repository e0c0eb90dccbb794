"""Aborts the interpreter (SIGABRT) after one model call."""

import os


def my_loop(model, task, tools, *, max_steps, token_budget):
    model([{"role": "user", "content": task}], tools.definitions)
    os.abort()
