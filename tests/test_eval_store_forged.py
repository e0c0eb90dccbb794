"""Results files a resume must not believe: rows added, edited or made by hand, files signed
with another key, and files of another suite or config. Each is refused with one line, the
file is left as it was, and none of its rows is counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primer.harness.durable.journal import signed_lines
from primer.harness.durable.keystore import checkpoint_key
from primer.harness.evals.run import run_evals
from primer.harness.evals.store import EvalResultsError, ResultsFile
from primer.loop.config import AgentConfig
from primer.scenarios.relay import SkilledModel, make_tools, relay_task

TASKS = [relay_task(seed, 2) for seed in range(6)]


@pytest.fixture
def honest(tmp_path) -> Path:
    """A results file of a run where some tasks failed."""
    path = tmp_path / "r.jsonl"
    report = run_evals(TASKS, SkilledModel(0.5), make_tools, results=path, progress=False)
    assert 0 < report.summary.success_rate < 1
    return path


def records(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        r.pop("mac")
        out.append(r)
    return out


def resign(path: Path, rows: list[dict], key: bytes | None = None) -> None:
    data, _ = signed_lines(rows, key or checkpoint_key(path.parent), b"primer-evals")
    path.write_bytes(data)


def all_passed(rows: list[dict]) -> list[dict]:
    return [rows[0], *({**r, "success": True, "scores": {k: True for k in r["scores"]}}
                       for r in rows[1:])]


def forge_edit(path):  # flip every failure to a pass, signatures left as they were
    lines = path.read_text().splitlines()
    edited = [lines[0]] + [line.replace('"success": false', '"success": true')
                           for line in lines[1:]]
    path.write_text("\n".join(edited) + "\n")


def forge_by_hand(path):  # the whole file written without the key
    path.write_text("".join(json.dumps(r) + "\n" for r in all_passed(records(path))))


def forge_other_key(path):
    resign(path, all_passed(records(path)), key=b"someone else's key")


def forge_appended_row(path):
    rows = records(path)
    with path.open("a") as f:
        f.write(json.dumps({**rows[1], "trial": 1, "success": True}) + "\n")


def forge_unsigned_v1(path):
    rows = all_passed(records(path))
    rows[0] = {**rows[0], "version": 1}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def foreign_suite(path):  # signed here, by a run of another suite
    path.unlink()
    run_evals([relay_task(seed, 2) for seed in range(6, 12)], SkilledModel(1.0), make_tools,
              results=path, progress=False)


def foreign_config(path):  # signed here, by a run of this suite with other limits
    path.unlink()
    run_evals(TASKS, SkilledModel(1.0), make_tools, AgentConfig(max_steps=9), results=path,
              progress=False)


def foreign_task(path):  # a signed row of a task this suite does not have
    rows = records(path)
    resign(path, [*all_passed(rows), {**rows[1], "task": "not-in-the-suite", "success": True}])


def past_the_repeats(path):  # a signed row of a trial this run does not have
    rows = records(path)
    resign(path, [*rows, {**rows[1], "trial": 3, "success": True}])


FORGERIES = {forge_edit: "does not match its signature",
             forge_by_hand: "does not match its signature",
             forge_other_key: "does not match its signature",
             forge_appended_row: "does not match its signature",
             forge_unsigned_v1: "version 1 \\(unsigned",
             foreign_suite: "written for another suite",
             foreign_config: "written with another config",
             foreign_task: "which this suite does not have",
             past_the_repeats: "past this run's 1 repeats"}


@pytest.mark.parametrize("forge", list(FORGERIES), ids=lambda f: f.__name__)
def test_a_forged_or_foreign_results_file_is_refused_with_one_line_and_never_counted(
        honest, forge):
    forge(honest)
    before = honest.read_bytes()
    model = SkilledModel(0.5)
    with pytest.raises(EvalResultsError, match=FORGERIES[forge]) as refused:
        run_evals(TASKS, model, make_tools, results=honest, progress=False)
    assert len(str(refused.value).splitlines()) == 1
    assert honest.read_bytes() == before


def test_the_honest_file_resumes_and_counts_its_rows(honest):
    before = ResultsFile(honest).summary().success_rate
    again = run_evals(TASKS, SkilledModel(1.0), make_tools, results=honest, progress=False)
    assert again.summary.success_rate == before  # nothing ran again: every row was kept
