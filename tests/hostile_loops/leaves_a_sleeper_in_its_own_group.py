"""Starts a background `sleep` in a process group of its own (so killing the checker's child
group misses it), notes its pid beside this file, and returns at once."""

import os
import subprocess
from pathlib import Path


def my_loop(model, task, tools, *, max_steps, token_budget):
    sleeper = subprocess.Popen(["sleep", "120"], preexec_fn=os.setpgrp)
    with open(Path(__file__).with_suffix(".pids"), "a") as f:
        f.write(f"{sleeper.pid}\n")
    return {"answer": None, "stop_cause": "max_steps"}
