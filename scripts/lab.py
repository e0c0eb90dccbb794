#!/usr/bin/env python3
"""Start JupyterLab on the course's notebooks and print the address to open.

Usage: scripts/lab.py [--lesson 05] [JUPYTERLAB OPTION ...]   (``make lab``, ``make lesson N=05``)

Runs ``jupyter lab`` from this interpreter's environment with ``notebooks/`` as its root,
opening the lesson given by number or file name (default: lesson 01), and with the course's
settings folder ``jupyter_config/`` on ``JUPYTER_CONFIG_PATH`` (news prompt off, kernels
without the unencrypted-TCP warning). Once the server answers, prints one block with the
URL to open, token included. Other options go to ``jupyter lab`` unchanged, e.g.
``--port=8899`` or ``--no-browser``. One Ctrl-C stops the server (it does not ask to confirm).
SIGTERM or SIGHUP to this script (and SIGINT when it has no terminal) stops the JupyterLab
it started, and its kernels, before it exits; so does stopping ``make lab`` (make does not
pass SIGTERM on, so when make started this script, it stops JupyterLab once make is gone).

Exit status: JupyterLab's own; 128 + the signal's number when a signal or make's end stopped
it; 2 when ``--lesson`` names no lesson (one line says which exist).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
CONFIG_DIR = ROOT / "jupyter_config"


def lesson_file(arg: str) -> str:
    """The notebook file name (inside notebooks/) that ``arg`` names: a lesson number such as
    ``5``, ``05`` or ``13b``, or a file name; ``LookupError`` with a one-line message otherwise."""
    if (NOTEBOOKS / arg).is_file():
        return arg
    number = re.fullmatch(r"(\d+)([a-z]?)", arg)
    if number:       # 5, 05, or a split lesson's part such as 13b
        matches = sorted(NOTEBOOKS.glob(f"{int(number[1]):02d}{number[2]}_*.ipynb"))
        if matches:
            return matches[0].name
    known = ", ".join(p.name.split("_")[0] for p in sorted(NOTEBOOKS.glob("*.ipynb")))
    raise LookupError(f"no lesson {arg!r} in {NOTEBOOKS}; lessons: {known}")


def course_env(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` with the course's config folder first on ``JUPYTER_CONFIG_PATH`` (kept
    once) and ``JUPYTER_PREFER_ENV_PATH=1``, so this environment's kernelspecs win."""
    paths = [str(CONFIG_DIR), *[p for p in environ.get("JUPYTER_CONFIG_PATH", "").split(
        os.pathsep) if p and Path(p).resolve() != CONFIG_DIR]]
    return {**environ, "JUPYTER_CONFIG_PATH": os.pathsep.join(paths),
            "JUPYTER_PREFER_ENV_PATH": "1"}


def lab_command(lesson: str, extra: list[str]) -> list[str]:
    """The ``jupyter lab`` command line for ``lesson`` (a file name in notebooks/)."""
    # answer_yes: one Ctrl-C stops the server; without it JupyterLab asks "Shut down this
    # Jupyter server (y/[n])?" and, unanswered, carries on after 5 s
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={NOTEBOOKS}",
           f"--LabApp.default_url=/lab/tree/{lesson}", "--ServerApp.answer_yes=True"]
    if hasattr(os, "getuid") and os.getuid() == 0 and "--allow-root" not in extra:
        cmd.append("--allow-root")
    return [*cmd, *extra]


def server_url(pid: int, lesson: str, timeout_s: float = 120,
               stop: list[int] | None = None) -> str | None:
    """The URL (with its token) of the Jupyter server running as process ``pid``, opening
    ``lesson``; None if it has not written its runtime file within ``timeout_s`` seconds, or
    as soon as ``stop`` is not empty (a signal asked this script to stop)."""
    from jupyter_core.paths import jupyter_runtime_dir
    from jupyter_server.serverapp import list_running_servers

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not stop:
        for info in list_running_servers(jupyter_runtime_dir()):
            if info.get("pid") == pid:
                token = f"?token={info['token']}" if info.get("token") else ""
                return f"{info['url'].rstrip('/')}/lab/tree/{lesson}{token}"
        time.sleep(0.5)
    return None


#: How long JupyterLab gets to shut down (kernels included) after SIGTERM before it is killed.
STOP_GRACE_S = 20.0


def wait_and_stop(proc: subprocess.Popen[bytes], stop: list[int],
                  parent: int | None = None, poll_s: float = 0.5) -> int:
    """Wait for ``proc`` (JupyterLab) to end; return its exit status.

    When a signal number lands in ``stop`` (the signal handlers append it), or when
    ``parent`` is given and this process's parent is no longer that process (make was
    stopped), sends ``proc`` SIGTERM, waits up to :data:`STOP_GRACE_S` seconds for it to shut
    down, kills it if it has not, and returns 128 + the signal's number (SIGTERM for a
    parent that went away)."""
    while True:
        try:
            code = proc.wait(timeout=poll_s)
        except subprocess.TimeoutExpired:
            pass
        else:
            return 128 + stop[0] if stop else code
        if not stop and parent is not None and os.getppid() != parent:
            stop.append(signal.SIGTERM)
        if stop:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            return 128 + stop[0]


def main(argv: list[str] | None = None) -> int:
    """Start JupyterLab, print its URL, wait for it to stop; returns its exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", default="01", help="lesson number or notebook file name")
    args, extra = parser.parse_known_args(argv)
    try:
        lesson = lesson_file(args.lesson)
    except LookupError as e:
        print(f"lab: {e}", file=sys.stderr)
        return 2
    print(f"Starting JupyterLab on {lesson} (from {sys.prefix}); the address to open follows "
          f"once it is up.", flush=True)
    stop: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda signum, frame: stop.append(signum))
    # Ctrl-C in the terminal reaches JupyterLab too (same process group); it stops, and this
    # process waits for it. Without a terminal, SIGINT stops it as TERM.
    signal.signal(signal.SIGINT, signal.SIG_IGN if sys.stdin.isatty()
                  else lambda signum, frame: stop.append(signum))
    parent = os.getppid() if os.environ.get("MAKELEVEL") else None  # started by make
    proc = subprocess.Popen(lab_command(lesson, extra), env=course_env(dict(os.environ)))
    url = server_url(proc.pid, lesson, stop=stop)
    if url and proc.poll() is None and not stop:
        rule = "=" * 72
        print(f"\n{rule}\nJupyterLab is running. Open this address in your browser:\n\n"
              f"    {url}\n\nCtrl-C here stops it.\n{rule}\n", flush=True)
    return wait_and_stop(proc, stop, parent)


if __name__ == "__main__":
    sys.exit(main())
