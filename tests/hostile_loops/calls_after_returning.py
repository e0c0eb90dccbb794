"""Leaves a thread that keeps calling the model after the loop has returned."""

import threading


def _keep_calling(model, task, tools):
    while True:
        try:
            model([{"role": "user", "content": task}], tools.definitions)
        except Exception:  # noqa: BLE001, S112 - the point of this file
            continue


def my_loop(model, task, tools, *, max_steps, token_budget):
    threading.Thread(target=_keep_calling, args=(model, task, tools), daemon=True).start()
    return {"answer": None, "stop_cause": "max_steps"}
