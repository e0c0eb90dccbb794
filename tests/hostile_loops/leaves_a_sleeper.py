"""Starts a background `sleep` that would outlive the run, notes its pid beside this file,
and returns at once."""

import subprocess
from pathlib import Path


def my_loop(model, task, tools, *, max_steps, token_budget):
    sleeper = subprocess.Popen(["sleep", "120"])
    with open(Path(__file__).with_suffix(".pids"), "a") as f:
        f.write(f"{sleeper.pid}\n")
    return {"answer": None, "stop_cause": "max_steps"}
