"""Ends the process with status 0 after one model call: no result, no traceback."""

import os


def my_loop(model, task, tools, *, max_steps, token_budget):
    model([{"role": "user", "content": task}], tools.definitions)
    os._exit(0)
