"""scripts/beside.py: the background's output after the foreground's, every failure named,
and a signal reaching everything either side started (make test and CI run through it)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "beside.py"

pytestmark = pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")


def beside(tmp_path: Path, foreground: str, *background: str) -> list[str]:
    args = [sys.executable, str(SCRIPT), "--log", str(tmp_path / "bg.log")]
    for command in background:
        args += ["--background", f"sh -c {shlex.quote(command)}"]
    return args + ["--", "sh", "-c", foreground]


def test_the_background_runs_one_after_another_and_its_output_follows_the_foregrounds(
        tmp_path):
    done = subprocess.run(beside(tmp_path, "sleep 0.3; echo fg", "echo bg1", "echo bg2"),
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines.index("fg") < lines.index("bg1") < lines.index("bg2")
    assert "failed" not in done.stdout


def test_each_failure_is_named_and_a_failed_background_command_does_not_stop_the_next(
        tmp_path):
    done = subprocess.run(beside(tmp_path, "exit 2", "exit 3", "echo still ran"),
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2  # the foreground's status first
    assert "still ran" in done.stdout
    assert "sh -c 'exit 2' failed (exit 2)" in done.stdout
    assert "sh -c 'exit 3' failed (exit 3)" in done.stdout
    only_bg = subprocess.run(beside(tmp_path, "true", "exit 3"), capture_output=True,
                             text=True, timeout=30)
    assert only_bg.returncode == 3
    assert "sh -c 'exit 3' failed (exit 3)" in only_bg.stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie no one has reaped yet counts as ended
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return True


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_everything_either_side_started_and_nothing_more_starts(tmp_path,
                                                                               signum):
    # each side runs a grandchild under a shell, as a make recipe's `if ... fi` does
    fg_pid, bg_pid = tmp_path / "fg.pid", tmp_path / "bg.pid"
    grandchild = 'if true; then sh -c "echo \\$\\$ > {}; exec sleep 60"; fi'
    proc = subprocess.Popen(
        beside(tmp_path, grandchild.format(fg_pid), grandchild.format(bg_pid),
               f"touch {tmp_path / 'started'}"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 20
    while not (fg_pid.exists() and bg_pid.exists() and fg_pid.read_text().strip()
               and bg_pid.read_text().strip()):
        assert time.monotonic() < deadline, "the commands did not start"
        time.sleep(0.05)
    pids = [int(fg_pid.read_text()), int(bg_pid.read_text())]
    proc.send_signal(signum)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signum, out
    assert f"stopped by {signal.Signals(signum).name}" in out
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)], "a grandchild outlived the signal"
    assert not (tmp_path / "started").exists()  # the next background command never started


def test_without_a_foreground_or_a_background_command_it_says_how_to_call_it(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--log", str(tmp_path / "l"), "--",
                           "true"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "--background CMD" in done.stderr
