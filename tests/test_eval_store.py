"""Results files: rows streamed as trials finish, a stopped or killed run resumed without
redoing finished trials, and every unusable file refused with its reason, untouched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from primer.harness.durable.journal import signed_lines
from primer.harness.durable.keystore import checkpoint_key
from primer.harness.evals.results import EvalRow
from primer.harness.evals.run import run_evals
from primer.harness.evals.store import EvalResultsError, ResultsFile
from primer.scenarios.relay import SkilledModel, make_tools, relay_task

ROOT = Path(__file__).resolve().parent.parent


def row(task, trial=0, success=True):
    return EvalRow(task, success, None, [], 1, 10, 5, 0.001, 0.01, "end_turn", trial=trial)


def unsigned(line: str) -> dict:
    """A line of a results file as the dict it holds, its signature left out."""
    record = json.loads(line)
    record.pop("mac")
    return record


def write_signed(path: Path, records: list[dict]) -> None:
    """Write ``records`` as a results file signed with this machine's key: what only a
    process holding the key can do (a bug in a writer)."""
    data, _ = signed_lines(records, checkpoint_key(path.parent), b"primer-evals")
    path.write_bytes(data)


def test_each_row_is_on_disk_as_soon_as_it_is_appended(tmp_path):
    store = ResultsFile(tmp_path / "r.jsonl")
    store.start(["a", "b"], 1)
    store.append(row("a"))
    lines = (tmp_path / "r.jsonl").read_text().splitlines()  # read while still open
    assert json.loads(lines[0])["format"] == "primer-evals"
    assert EvalRow.from_dict(unsigned(lines[1])) == row("a")
    store.close()


def test_resuming_returns_the_trials_already_done_and_appends_after_them(tmp_path):
    path = tmp_path / "r.jsonl"
    first = ResultsFile(path)
    first.start(["a", "b"], 2)
    first.append(row("a", 0))
    first.append(row("b", 1))
    first.close()
    again = ResultsFile(path)
    assert again.start(["a", "b"], 2) == {("a", 0), ("b", 1)}
    again.append(row("a", 1))
    again.close()
    assert [(r.task, r.trial) for r in ResultsFile(path).rows()] == [("a", 0), ("b", 1),
                                                                       ("a", 1)]


def test_a_torn_last_line_is_dropped_noted_and_cut_before_appending(tmp_path):
    path = tmp_path / "r.jsonl"
    store = ResultsFile(path)
    store.start(["a", "b"], 1)
    store.append(row("a"))
    store.close()
    with path.open("a") as f:
        f.write(json.dumps(row("b").to_dict())[:25])  # killed mid-write
    again = ResultsFile(path)
    assert again.start(["a", "b"], 1) == {("a", 0)}
    assert "line 3 is torn" in again.notes[0]
    again.append(row("b"))
    again.close()
    assert [r.task for r in ResultsFile(path).rows()] == ["a", "b"]


def test_a_file_of_another_suite_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "r.jsonl"
    store = ResultsFile(path)
    store.start(["a", "b"], 1)
    store.append(row("a"))
    store.close()
    before = path.read_bytes()
    with pytest.raises(EvalResultsError, match="written for another suite"):
        ResultsFile(path).start(["a", "c"], 1)
    assert path.read_bytes() == before


@pytest.mark.parametrize("content, message", [
    ("not json\n", "not a primer eval results file"),
    ('{"format": "primer-evals", "version": 99, "suite": "x"}\n', "version 99"),
])
def test_a_file_that_is_not_a_results_file_is_refused_and_not_overwritten(tmp_path, content,
                                                                          message):
    path = tmp_path / "notes.jsonl"
    path.write_text(content)
    with pytest.raises(EvalResultsError, match=message):
        ResultsFile(path).start(["a"], 1)
    assert path.read_text() == content


def test_a_bad_line_in_the_middle_is_an_error_naming_it(tmp_path):
    path = tmp_path / "r.jsonl"
    store = ResultsFile(path)
    store.start(["a", "b"], 1)
    store.close()
    header = unsigned(path.read_text())
    write_signed(path, [header, {"task": "a"}, row("b").to_dict()])
    with pytest.raises(EvalResultsError, match="line 2 is not an eval row"):
        list(ResultsFile(path).rows())


def test_the_same_trial_twice_is_reported_not_counted_twice(tmp_path):
    path = tmp_path / "r.jsonl"
    store = ResultsFile(path)
    store.start(["a"], 1)
    store.append(row("a"))
    store.append(row("a"))
    store.close()
    with pytest.raises(EvalResultsError, match="line 3 repeats task 'a' trial 0"):
        ResultsFile(path).summary()


def test_resume_false_starts_the_file_over(tmp_path):
    path = tmp_path / "r.jsonl"
    store = ResultsFile(path)
    store.start(["a"], 1)
    store.append(row("a"))
    store.close()
    assert ResultsFile(path).start(["a"], 1, resume=False) == set()
    assert len(path.read_text().splitlines()) == 1


class CountingModel(SkilledModel):
    """A SkilledModel that appends the name of each trial it plays to a file."""

    def __init__(self, p: float, log: Path) -> None:
        super().__init__(p)
        object.__setattr__(self, "log", log)

    def __call__(self, task):
        with self.log.open("a") as f:
            f.write(f"{task.name}/{task.meta.get('trial', 0)}\n")
        return super().__call__(task)


class InterruptAt:
    """A model factory that raises KeyboardInterrupt (as Ctrl-C would) at its nth call."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def __call__(self, task):
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt
        return SkilledModel(0.8)(task)


def test_an_interrupted_run_keeps_its_rows_and_resuming_runs_only_the_rest(tmp_path):
    tasks = [relay_task(seed, 3) for seed in range(6)]
    path = tmp_path / "r.jsonl"
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool, pytest.raises(KeyboardInterrupt):
        run_evals(tasks, InterruptAt(7), make_tools, executor=pool, repeats=2, results=path,
                  max_in_flight=1)
    kept = {(r.task, r.trial) for r in ResultsFile(path).rows()}
    assert len(kept) == 6  # the first trial of every task, then Ctrl-C
    log = tmp_path / "calls.log"
    report = run_evals(tasks, CountingModel(0.8, log), make_tools, repeats=2, results=path)
    ran = set(log.read_text().split())
    assert ran == {f"{t.name}/1" for t in tasks}  # nothing finished ran again
    assert report.summary.trials == 12 and len(report.rows) == 12
    clean = run_evals(tasks, SkilledModel(0.8), make_tools, repeats=2)
    assert [(r.task, r.trial, r.success) for r in report.rows] == [
        (r.task, r.trial, r.success) for r in clean.rows]


KILLED_RUN = textwrap.dedent("""
    import sys, time
    from primer import run_evals, tool
    from primer.scenarios.relay import SkilledModel, relay_task
    from primer.scenarios.relay import make_tools as relay_tools

    def slow_tools(task):
        time.sleep(0.05)
        return relay_tools(task)

    tasks = [relay_task(seed, 2) for seed in range(40)]
    run_evals(tasks, SkilledModel(0.9), slow_tools, results=sys.argv[1], progress=False)
""")


def test_a_killed_run_resumes_from_its_file_and_ends_with_every_trial_once(tmp_path):
    path = tmp_path / "r.jsonl"
    script = tmp_path / "run.py"
    script.write_text(KILLED_RUN)
    proc = subprocess.Popen([sys.executable, str(script), str(path)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and len(path.read_bytes().splitlines()) > 8:
            break
        time.sleep(0.02)
    assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    proc.stderr.close()
    done_before = {(r.task, r.trial) for r in ResultsFile(path).rows()}
    assert 8 <= len(done_before) < 40
    tasks = [relay_task(seed, 2) for seed in range(40)]
    log = tmp_path / "calls.log"
    report = run_evals(tasks, CountingModel(0.9, log), make_tools, results=path)
    ran = {(line.split("/")[0], 0) for line in log.read_text().split()}
    assert ran.isdisjoint(done_before) and len(ran) + len(done_before) == 40
    assert sorted(r.task for r in report.rows) == sorted(t.name for t in tasks)


@pytest.mark.parametrize("field, value", [
    ("cost_usd", "x"), ("input_tokens", "x"), ("output_tokens", 1.5), ("steps", True),
    ("latency_s", None), ("stop_cause", 5), ("task", ["a"]), ("path", ["a", 1]),
    ("scores", {"a": "yes"}), ("steps", -1), ("extra", 1)])
def test_a_wrong_typed_field_is_one_line_naming_the_row_and_field(tmp_path, capsys, field,
                                                                   value):
    from primer.__main__ import main

    path = tmp_path / "r.jsonl"
    argv = ["eval", "--relay-tasks", "1", "--results", str(path), "--summary-only",
            "--no-progress"]
    assert main(argv) == 0
    lines = path.read_text().splitlines()
    bad = unsigned(lines[1]) | {field: value}
    write_signed(path, [unsigned(lines[0]), bad, *map(unsigned, lines[2:])])
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "line 2 is not an eval row" in err and field in err
