"""Sub-commands of ``python -m primer``: one module each, each with ``register(subparsers)``.

A module's ``register`` adds its parser(s) and sets ``func`` (called with the parsed
arguments; returns the exit code). ``primer/__main__.py`` lists the modules.
"""
