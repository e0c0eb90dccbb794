"""Crash test: SIGKILL an approve-and-resume run at 200 random moments; count refunds.

Runs in ``make test`` (about 20-40 s on two cores). It prints the figures: kill points
tried, kills that hit a running process, double refunds, lost approvals, and where the
kills landed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KILL_POINTS = 200
SEED = 8


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (Linux or macOS)")
@pytest.mark.timeout(300)
def test_killing_approve_and_resume_at_200_random_moments_never_pays_twice_or_loses_a_yes():
    done = subprocess.run([sys.executable, "-m", "primer.scenarios.refund_crash",
                           "--kill-points", str(KILL_POINTS), "--seed", str(SEED)],
                          cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert done.stdout.strip(), done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"\ncrash test: {report['kill_points']} kill points tried, {report['killed']} hit "
          f"a running process; double refunds: {report['double_refunds']}; lost approvals: "
          f"{report['lost_approvals']}; unreadable checkpoints: {report['unreadable']}")
    print("kills landed:", report["phases"])
    assert report["kill_points"] == KILL_POINTS
    assert report["double_refunds"] == 0
    assert report["lost_approvals"] == 0
    assert report["unreadable"] == 0, report["errors"]
    risky = (report["phases"]["refund started, not in the ledger"]
             + report["phases"]["refund in the ledger, not recorded"])
    assert risky > 0, "no kill landed inside the refund call; widen the window"
    assert done.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (Linux or macOS)")
@pytest.mark.timeout(300)
def test_the_crash_test_catches_a_refund_tool_that_ignores_its_idempotency_key():
    # The same kills with a tool that makes up a new key per call: a kill between the
    # ledger write and the recorded result then pays twice on resume, and the test shows it.
    # Longer waits around the ledger write put more kills in that window.
    done = subprocess.run([sys.executable, "-m", "primer.scenarios.refund_crash", "--broken",
                           "--kill-points", "30", "--seed", str(SEED), "--delay-s", "0.05"],
                          cwd=ROOT, capture_output=True, text=True, timeout=280)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"\nbroken variant: {report['double_refunds']} double refunds in "
          f"{report['kill_points']} kill points; kills landed: {report['phases']}")
    assert report["double_refunds"] > 0
    assert report["unreadable"] == 0, report["errors"]
    assert done.returncode == 1
