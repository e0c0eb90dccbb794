"""Calls the model once, then waits forever, ignoring every exception."""

import time


def my_loop(model, task, tools, *, max_steps, token_budget):
    model([{"role": "user", "content": task}], tools.definitions)
    while True:
        try:
            time.sleep(3600)
        except BaseException:  # noqa: BLE001, S110 - the point of this file
            pass
