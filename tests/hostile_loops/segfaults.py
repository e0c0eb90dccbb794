"""Reads address 0 through ctypes: a segmentation fault."""

import ctypes


def my_loop(model, task, tools, *, max_steps, token_budget):
    return ctypes.string_at(0)
