"""The crash test of approve-and-resume: kill the process at random moments, count refunds.

Each trial starts the ``refund`` demo with a checkpoint directory and a fresh ledger; the
run pauses before ``issue_refund``. A forked child process then approves the call and
resumes the run, and the parent kills it with ``SIGKILL`` after a random (seeded) delay
spread over the child's whole run. Then the parent does what a person would do the next
morning: approves again (a no-op if the decision was already recorded) and resumes to the
end. It counts the refunds in the ledger: exactly one is right; two is a double refund,
none a lost approval. It also reads the checkpoint right after the kill to record where the
kill landed (before the decision, inside the refund call, after it, ...).

``$PRIMER_REFUND_DELAY_S`` is set for the child, so ``issue_refund`` waits a little before
and after its ledger write and kills land inside that risky window too. The refund tool's
business check (never refund more than was paid) is turned off here, so the only thing
that can stop a second payment is the idempotency key: the test checks the key mechanism
alone.

``--broken`` runs the same trials with a refund tool that ignores the harness's key and
makes up a new one for each call, as a careless integration would: then a kill between the
ledger write and the recorded result pays twice on resume, and the figures show it (the
test suite runs it to prove the crash test can fail).

Run it: ``python -m primer.scenarios.refund_crash --kill-points 200 --seed 8``. POSIX only
(``os.fork``). Used by ``tests/test_refund_crash.py`` and lesson 08.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from primer.harness.durable.checkpoint import CheckpointError, approve, read_checkpoint, resume
from primer.loop.tools import Tool

from . import get_demo
from .refunds import DELAY_ENV, LEDGER_ENV, RefundLedger, refund_tools

#: Unkilled trials run first; the median of their durations (seconds) sets the kill window.
WARMUPS = 3

#: Where a kill can land, in run order (read from the checkpoint and ledger after the kill).
PHASES = ("before the decision", "approved, refund not started",
          "refund started, not in the ledger", "refund in the ledger, not recorded",
          "refund recorded, run not finished", "run finished")


@dataclass
class CrashReport:
    """The figures of a crash test.

    ``kill_points``: trials run; ``killed``: trials whose child was still running when the
    kill came (the rest had finished); ``double_refunds``: trials that ended with two or more
    refunds for the order; ``lost_approvals``: trials that ended with none;
    ``unreadable``: trials whose checkpoint could not be read after the kill (a torn write);
    ``phases``: how many kills landed in each phase of :data:`PHASES`; ``errors``: the
    messages of unreadable checkpoints.
    """

    kill_points: int = 0
    killed: int = 0
    double_refunds: int = 0
    lost_approvals: int = 0
    unreadable: int = 0
    phases: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return asdict(self)


def _phase(checkpoint: Path, ledger: RefundLedger, order_id: str) -> str:
    data = read_checkpoint(checkpoint)
    if data["status"] == "finished":
        return PHASES[5]
    call = next((c for c in data["calls"] if c["name"] == "issue_refund"), None)
    if call is None:
        return PHASES[4]
    if call["decision"] is None:
        return PHASES[0]
    if call["state"] == "waiting":
        return PHASES[1]
    if call["state"] == "done":
        return PHASES[4]
    return PHASES[3] if ledger.refunds(order_id) else PHASES[2]


def _tools(broken: bool = False) -> list[Tool]:
    tools = refund_tools(check_total=False)
    if broken:  # a refund tool that throws the harness's key away: retries pay again
        tools = [_keyless(t) if t.name == "issue_refund" else t for t in tools]
    return tools


def _keyless(t: Tool) -> Tool:
    @functools.wraps(t.fn)  # same signature: the harness still passes a key, which is ignored
    def issue_refund(**kwargs: object) -> object:
        return t.fn(**{**kwargs, "idempotency_key": f"fresh-{uuid.uuid4().hex}"})

    return Tool(t.name, t.description, t.input_schema, issue_refund,
                side_effecting=t.side_effecting, needs_approval=t.needs_approval)


def _child(checkpoint: Path, tool_use_id: str, broken: bool) -> None:
    """Approve and resume, then exit without running any parent clean-up."""
    code = 0
    try:
        scenario = get_demo("refund")
        approve(checkpoint, tool_use_id, note="crash test")
        resume(checkpoint, scenario.make_llm(), _tools(broken))
    except BaseException:  # noqa: BLE001 - the parent counts the outcome from the ledger
        code = 1
    os._exit(code)


def _fork_child(checkpoint: Path, tool_use_id: str, broken: bool) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(checkpoint, tool_use_id, broken)
    return pid


def run_trials(kill_points: int, seed: int, workdir: str | Path,
               delay_s: float = 0.004, broken: bool = False) -> CrashReport:
    """Run ``kill_points`` trials in ``workdir`` (one sub-directory each); returns the figures.

    ``seed`` fixes the kill delays. ``delay_s`` (seconds) is the refund tool's wait before and
    after its ledger write. ``broken`` uses a refund tool that ignores its idempotency key
    (see the module docstring). Raises ``OSError`` where ``os.fork`` is unavailable.
    """
    if not hasattr(os, "fork"):
        raise OSError("the crash test needs os.fork (Linux or macOS)")
    rng = random.Random(seed)
    scenario = get_demo("refund")
    order_id = "R-1001"
    report = CrashReport()
    phases: Counter[str] = Counter()
    old_env = {k: os.environ.get(k) for k in (LEDGER_ENV, DELAY_ENV)}
    os.environ[DELAY_ENV] = str(delay_s)
    warmups: list[float] = []
    try:
        for i in range(kill_points + WARMUPS):  # warm-up trials time an unkilled child
            trial = Path(workdir) / f"trial-{i:03d}"
            trial.mkdir(parents=True)
            os.environ[LEDGER_ENV] = str(trial / "ledger.sqlite")
            ledger = RefundLedger(trial / "ledger.sqlite")
            # A run of its own per trial, paused before the refund: a copy of one paused
            # journal would be refused (a journal resumes only as its own run, once).
            paused = scenario.run(checkpoint_dir=str(trial))
            tool_use_id = paused.pending[0]["id"]
            checkpoint = Path(paused.checkpoint or "")
            start = time.perf_counter()
            pid = _fork_child(checkpoint, tool_use_id, broken)
            if len(warmups) < WARMUPS:
                os.waitpid(pid, 0)
                warmups.append(time.perf_counter() - start)
                continue
            time.sleep(rng.uniform(0, 1.1 * sorted(warmups)[WARMUPS // 2]))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status = os.waitpid(pid, 0)
            report.kill_points += 1
            report.killed += os.WIFSIGNALED(status)
            try:
                phase = _phase(checkpoint, ledger, order_id)
                phases[phase] += 1
                if phase == PHASES[0]:  # the person approves again if the yes was lost
                    approve(checkpoint, tool_use_id, note="final resume")
                resume(checkpoint, scenario.make_llm(), _tools(broken))
            except CheckpointError as e:
                report.unreadable += 1
                report.errors.append(str(e))
            paid = len(ledger.refunds(order_id))
            report.double_refunds += paid > 1
            report.lost_approvals += paid == 0
    finally:
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    report.phases = {p: phases[p] for p in PHASES}
    return report


def main(argv: list[str] | None = None) -> int:
    """Command line: run the trials in a temporary directory and print the report as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kill-points", type=int, default=200)
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--delay-s", type=float, default=0.004)
    parser.add_argument("--broken", action="store_true",
                        help="use a refund tool that ignores its idempotency key")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="refund-crash-") as d:
        report = run_trials(args.kill_points, args.seed, d, args.delay_s, args.broken)
    print(json.dumps(report.to_dict()))
    return 0 if report.double_refunds == report.lost_approvals == report.unreadable == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
