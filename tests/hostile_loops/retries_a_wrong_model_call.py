"""Calls the model the early lessons' way, swallows the error that says how to call it, and
tries again forever."""


def my_loop(model, task, tools, *, max_steps, token_budget):
    messages = [{"role": "user", "content": task}]
    while True:
        try:
            model(system="", messages=messages, tools=tools.definitions, max_tokens=1024)
        except BaseException:  # noqa: BLE001, S112 - the point of this file
            continue
