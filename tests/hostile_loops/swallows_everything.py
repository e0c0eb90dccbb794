"""Ignores SIGINT, SIGTERM and SIGHUP, and calls the model forever with a bare except that
swallows every exception, SystemExit and KeyboardInterrupt included."""

import signal

for _sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(_sig, signal.SIG_IGN)


def my_loop(model, task, tools, *, max_steps, token_budget):
    messages = [{"role": "user", "content": task}]
    while True:
        try:
            model(messages, tools.definitions)
        except:  # noqa: E722, S110 - the point of this file
            pass
