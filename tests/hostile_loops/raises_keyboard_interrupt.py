"""Raises KeyboardInterrupt itself, as if the person at the keyboard had pressed Ctrl-C."""


def my_loop(model, task, tools, *, max_steps, token_budget):
    raise KeyboardInterrupt
