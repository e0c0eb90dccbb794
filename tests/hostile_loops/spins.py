"""Spins forever without calling the model."""


def my_loop(model, task, tools, *, max_steps, token_budget):
    while True:
        pass
