#!/usr/bin/env python3
"""Run commands in the background, one after another, beside a command in the foreground.

Usage: scripts/beside.py --log FILE --background CMD [--background CMD ...] -- FOREGROUND...

``make test`` runs the unit tests in the foreground and nbval, mypy and the website's build
in the background; CI runs ``make notebooks`` beside the browser check. The foreground's
output goes to the terminal as it comes; the background's goes to ``FILE`` and is printed
when both are done. Every background command runs, even after one failed. Then one line
names each command that failed, with its exit status.

Each command runs in a process group of its own, so a signal reaches all of it, whatever it
started (a recipe's shell, pytest's workers, a server): Ctrl-C (``SIGINT``) is passed on to
every command as a terminal would give it, ``SIGTERM`` and ``SIGHUP`` too; no background
command starts after one of them. POSIX only (process groups).

Exit status: 0 when every command succeeded; otherwise the foreground's status when it
failed, else the first failed background command's; 128 + N after signal N.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Beside:
    """The running commands, and the signal that stopped them (None while none came)."""

    def __init__(self) -> None:
        self.running: list[subprocess.Popen[bytes]] = []
        self.lock = threading.RLock()  # a handler may run while the main thread holds it
        self.stopped_by: int | None = None

    def start(self, command: list[str],
              out: IO[bytes] | None = None) -> subprocess.Popen[bytes] | None:
        """Start ``command`` in a session (so a process group) of its own, reading nothing from the
        terminal (None once a signal came). Its output goes to ``out``, else to ours."""
        with self.lock:
            if self.stopped_by is not None:
                return None
            child = subprocess.Popen(command, stdout=out,
                                     stderr=subprocess.STDOUT if out else None,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
            self.running.append(child)
            return child

    def pass_on(self, signum: int, frame: object = None) -> None:
        """A signal handler: give ``signum`` to every running command's process group."""
        with self.lock:
            self.stopped_by = self.stopped_by or signum
            for child in self.running:
                try:
                    os.killpg(child.pid, signum)
                except (ProcessLookupError, PermissionError):
                    pass  # already ended


def status(code: int) -> int:
    """An exit status as a shell gives it (128 + N for a process ended by signal N)."""
    return 128 - code if code < 0 else code


def run(foreground: list[str], background: list[list[str]], log: Path) -> int:
    """Run ``background`` one after another (output to ``log``) beside ``foreground``;
    print the log and one line per failure; return the exit status (module docstring)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    names = [shlex.join(c) for c in background]
    print(f"in the background, one after another: {'; '.join(names)} "
          f"(their output follows {shlex.join(foreground)}'s)", flush=True)
    beside = Beside()
    results: list[tuple[str, int]] = []

    def in_background(out: IO[bytes]) -> None:
        for name, command in zip(names, background, strict=True):
            if beside.stopped_by is not None:
                break
            out.write(f"$ {name}\n".encode())
            out.flush()
            child = beside.start(command, out)
            if child is None:
                break
            results.append((name, status(child.wait())))

    before = {sig: signal.signal(sig, beside.pass_on) for sig in FORWARDED}
    try:
        with log.open("wb") as out:
            worker = threading.Thread(target=in_background, args=(out,))
            worker.start()
            child = beside.start(foreground)
            fg = status(child.wait()) if child else 128 + (beside.stopped_by or 0)
            worker.join()
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    sys.stdout.flush()
    with log.open("rb") as shown:
        sys.stdout.buffer.write(shown.read())
    failed = [(shlex.join(foreground), fg)] if fg else []
    failed += [(name, code) for name, code in results if code]
    for name, code in failed:
        print(f"{name} failed (exit {code})")
    if beside.stopped_by is not None:
        print(f"stopped by {signal.Signals(beside.stopped_by).name}")
        return 128 + beside.stopped_by
    return failed[0][1] if failed else 0


def main(argv: list[str]) -> int:
    """Parse ``argv`` (module docstring) and :func:`run`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, required=True,
                        help="where the background's output goes (printed at the end)")
    parser.add_argument("--background", action="append", default=[], metavar="CMD",
                        help="a command line to run in the background (repeat for more)")
    parser.add_argument("foreground", nargs=argparse.REMAINDER,
                        help="-- then the command to run in the foreground")
    args = parser.parse_args(argv)
    foreground = args.foreground[1:] if args.foreground[:1] == ["--"] else args.foreground
    if not foreground or not args.background:
        parser.error("give at least one --background CMD and, after --, the foreground command")
    return run(foreground, [shlex.split(c) for c in args.background], args.log)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
