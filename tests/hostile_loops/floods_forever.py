"""Writes to stdout without end and never returns."""

import sys


def my_loop(model, task, tools, *, max_steps, token_budget):
    block = "x" * 65536
    while True:
        sys.stdout.write(block)
