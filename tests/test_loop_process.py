"""The checker with the learner's file in a child process: hostile files fail, cleanly.

Each file in ``hostile_loops/`` tries one way to fool or stall the checker (patching it at
import, ending the process, spinning, swallowing every exception, flooding its output,
crashing, leaving a process behind, writing on or reading the checker's pipes). Each fails
its behaviours with one line saying what happened, within its time limit; a working loop
still passes, and a broken one fails exactly as it does in-process.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest
from test_check_loop_learner import HURRIED, LEARNER_LOOP

from primer.__main__ import main
from primer.course.exercises import BEHAVIOURS, check_loop
from primer.course.loop_process import OUTPUT_CAP_BYTES, LoadError, check_loop_file

HOSTILE = Path(__file__).parent / "hostile_loops"
LEARNER_FILE = Path(__file__).parent / "learner_loop.py"

#: Three behaviours of the battery: one with tools and an answer, one with a failing tool,
#: one that must stop at once. Enough to show a file failing each; the CLI tests run all 11.
SAMPLE = tuple(b for b in BEHAVIOURS
               if b.name in ("happy path", "tool that raises", "cut-off reply"))

#: The limit for files that must time out (short, so the gallery is quick); the others get
#: the default, which a run that does not hang never comes near.
SHORT_S = 0.5

#: hostile file -> (time limit, what every FAIL line of the sample says, as a pattern)
GALLERY = {
    "patches_checker.py": (None, r"^returned stop_cause 'end_turn' without calling the model"),
    "exits_with_os_exit.py": (None, r"^the process exited with code 0 before the loop "
                                    r"returned \(a loop ends by returning its result"),
    "exits_with_sys_exit.py": (None, r"^raised SystemExit: 0 at line 5 of my_loop"),
    "raises_keyboard_interrupt.py": (None, r"^raised KeyboardInterrupt at line 2 of my_loop"),
    "spins.py": (SHORT_S, r"^timed out after 0\.5 s without calling the model$"),
    "floods_forever.py": (SHORT_S, r"^timed out after 0\.5 s without calling the model$"),
    "sleeps_after_a_call.py": (SHORT_S, r"^timed out after 0\.5 s: made 1 model call\(s\), "
                                        r"then neither called the model again nor returned$"),
    "swallows_everything.py": (None, r"reply 1 and the user message answering it are "
                                     r"missing|the model was called again after reply 1"),
    "aborts.py": (None, r"^the process was killed by SIGABRT before the loop returned$"),
    "segfaults.py": (None, r"^the process was killed by SIGSEGV before the loop returned$"),
    "huge_request.py": (None, r"^sent a request over 1 MiB, so the run was stopped$"),
    "forges_on_the_pipes.py": (None, r"without calling the model|is not a request the "
                                     r"loop's model or tools send"),
    "finds_the_checker_in_memory.py": (None, r"^returned stop_cause 'end_turn' without "
                                             r"calling the model"),
    "mutates_definitions.py": (None, r"pass tools\.definitions, unchanged"),
    "retries_a_wrong_model_call.py": (None, r"in this exercise the model is called as "
                                            r"model\(messages, tool_definitions\)|not run: "
                                            r"fix how the loop is called first"),
    # which thread is first to the pipe is a race, so which failure is too
    "steals_replies.py": (SHORT_S, r"."),
    "calls_after_returning.py": (None, r"."),
}


def test_every_hostile_file_is_in_the_gallery():
    on_disk = {p.name for p in HOSTILE.glob("*.py")}
    assert on_disk - {"floods_output.py", "leaves_a_sleeper.py", "hangs_on_import.py",
                      "exits_on_import.py", "leaves_a_sleeper_in_its_own_group.py"} == set(GALLERY)


@pytest.mark.parametrize("name", sorted(GALLERY))
def test_each_hostile_file_fails_every_behaviour_with_one_line_saying_how(name):
    limit, says = GALLERY[name]
    report = check_loop_file(HOSTILE / name, behaviours=SAMPLE,
                             **({"time_limit_s": limit} if limit else {}))
    assert report.score == 0 and report.total == len(SAMPLE), str(report)
    for result in report.results:
        assert "\n" not in result.detail and re.search(says, result.detail), result.line()


def test_a_flood_of_output_changes_nothing_and_only_the_first_part_is_kept():
    report = check_loop_file(HOSTILE / "floods_output.py", behaviours=SAMPLE)
    assert report.ok, str(report)
    assert [name for name, _ in report.outputs] == [b.name for b in SAMPLE]
    for _, text in report.outputs:
        kept, _, dropped = text.partition("…[+")
        assert len(kept) == OUTPUT_CAP_BYTES and int(dropped.rstrip("bytes]")) > 3_900_000


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie left for init to reap counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("name", ["leaves_a_sleeper.py", "leaves_a_sleeper_in_its_own_group.py"])
def test_a_process_the_loop_leaves_running_is_killed_with_the_child(tmp_path, name):
    loop = tmp_path / name
    shutil.copy(HOSTILE / loop.name, loop)
    report = check_loop_file(loop, behaviours=SAMPLE)
    assert report.score == 0
    pids = [int(line) for line in loop.with_suffix(".pids").read_text().split()]
    assert len(pids) == len(SAMPLE)
    for _ in range(200):  # SIGKILL is delivered asynchronously; no timing is asserted
        if all(_gone(pid) for pid in pids):
            break
        time.sleep(0.01)
    assert all(_gone(pid) for pid in pids), [p for p in pids if not _gone(p)]


@pytest.mark.parametrize("name, limit, says", [
    ("hangs_on_import.py", SHORT_S, "hangs_on_import.py did not finish importing within 0.5 s"),
    ("exits_on_import.py", None, "exits_on_import.py ended the process while being imported "
                                 "(it exited with code 0)"),
])
def test_a_file_that_hangs_or_exits_while_imported_is_a_load_error(name, limit, says):
    with pytest.raises(LoadError) as caught:
        check_loop_file(HOSTILE / name, **({"import_limit_s": limit} if limit else {}))
    assert str(caught.value) == says


@pytest.mark.parametrize("name", ["patches_checker.py", "exits_with_os_exit.py",
                                  "forges_on_the_pipes.py"])
def test_through_the_command_a_file_that_fooled_the_old_checker_scores_0_and_exits_1(
        name, capsys):
    assert main(["check-loop", str(HOSTILE / name)]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[-1] == "score: 0/11" and len(lines) == 12, lines
    assert all(line.startswith("FAIL  ") for line in lines[:-1])
    assert "Traceback" not in captured.err and "score: 11/11" not in captured.out


@pytest.mark.slow  # eleven time-outs, each with a fresh child after it
def test_through_the_command_a_spinning_loop_fails_each_behaviour_at_the_limit(capsys):
    assert main(["check-loop", "--time-limit", "0.2", str(HOSTILE / "spins.py")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "score: 0/11"
    assert all(line.endswith("timed out after 0.2 s without calling the model")
               for line in lines[:-1])


def test_the_command_says_what_the_loop_printed_only_when_asked(capsys):
    flood = str(HOSTILE / "floods_output.py")
    assert main(["check-loop", flood]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1] == "score: 11/11"
    assert "add --show-output to see it" in captured.err and "xxx" not in captured.err
    assert main(["check-loop", "--show-output", flood]) == 0
    assert "--- what your loop printed in 'happy path':\nxxx" in capsys.readouterr().err


def test_a_time_limit_that_is_not_positive_is_a_usage_error(capsys):
    assert main(["check-loop", "--time-limit", "0", str(LEARNER_FILE)]) == 2
    assert "--time-limit must be a positive number" in capsys.readouterr().err


def _in_process(source: str) -> str:
    namespace: dict = {}
    exec(compile(source, "loop.py", "exec"), namespace)  # noqa: S102 - the test's own loop
    return str(check_loop(namespace["my_loop"], show=False))


@pytest.mark.parametrize("change", [None, "drops failed calls", "runs a cut-off call",
                                    "sends the raw output", "has no step limit"])
def test_a_file_gets_the_same_report_as_the_same_loop_checked_in_process(tmp_path, change):
    source = LEARNER_LOOP
    if change:
        old, new, _ = HURRIED[change]
        source = source.replace(old, new)
    loop = tmp_path / "loop.py"
    loop.write_text(source)
    assert str(check_loop_file(loop)) == _in_process(source)


def _our_children() -> list[int]:
    """Live processes whose parent is this one and that run the checker's child."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            if ppid == os.getpid() and not _gone(int(entry.name)) \
                    and b"primer.course.loop_child" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (ValueError, OSError):  # not a process, or one that just ended
            continue
    return found


def test_no_child_outlives_a_check():
    check_loop_file(HOSTILE / "spins.py", behaviours=SAMPLE[:1], time_limit_s=SHORT_S)
    assert _our_children() == []


@pytest.mark.parametrize("name, says", [
    ("aborts.py", "the process was killed by SIGABRT before the loop returned"),
    ("exits_with_os_exit.py", "the process exited with code 0 before the loop returned"),
])
def test_without_waitid_an_exit_or_a_crash_is_still_named(monkeypatch, name, says):
    monkeypatch.delattr(os, "WNOWAIT")  # as on macOS before Python 3.13
    report = check_loop_file(HOSTILE / name, behaviours=SAMPLE[:1])
    assert report.results[0].detail.startswith(says)
