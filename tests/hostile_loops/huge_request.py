"""Sends the model a 6 MB message."""


def my_loop(model, task, tools, *, max_steps, token_budget):
    model([{"role": "user", "content": task + " " + "x" * 6_000_000}], tools.definitions)
    return {"answer": None, "stop_cause": "max_steps"}
