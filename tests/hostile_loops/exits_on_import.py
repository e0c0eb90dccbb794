"""Ends the process with status 0 while it is being imported."""

import os

os._exit(0)


def my_loop(model, task, tools, *, max_steps, token_budget):
    return {"answer": None, "stop_cause": "max_steps"}
