"""``python -m primer diagnose``: one line per finding and a verdict, exit 0 clean / 1 found,
and one clear line with exit 2 for any file it cannot use (never a traceback)."""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from primer.__main__ import main
from primer.scenarios.gallery import GALLERY, gallery_path


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["diagnose", *argv])
    return code, out.getvalue(), err.getvalue()


def test_a_healthy_trace_exits_0_saying_no_known_failure_mode_was_found():
    code, out, _ = run(str(gallery_path("healthy-pto")))
    assert code == 0
    assert out.splitlines()[-1].startswith("verdict: no known failure mode found")


def test_a_stuck_trace_exits_1_with_one_line_per_finding_then_the_verdict():
    code, out, _ = run(str(gallery_path("no-progress")))
    lines = out.splitlines()
    assert code == 1
    assert lines[1].startswith("no_progress") and "Guard: no_progress_window=3 stops" in lines[1]
    assert lines[2].startswith("verdict: 1 problem (no_progress)")


def test_json_output_parses_and_says_what_was_found():
    code, out, _ = run(str(gallery_path("cut-off")), "--json")
    data = json.loads(out)
    assert code == 1 and data["found"] and data["findings"][0]["mode"] == "cut_off"


def test_gallery_lists_every_exercise_trace_and_diagnoses_one_by_name():
    code, out, _ = run("--gallery")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == list(GALLERY)
    code, out, _ = run("--gallery", "repeats")
    assert code == 1 and "\nrepeats " in out


def _hostile(tmp: Path) -> dict[str, Path]:
    files = {
        "missing": tmp / "nope.jsonl",
        "empty": tmp / "empty.jsonl",
        "not json": tmp / "junk.json",
        "binary": tmp / "bin.jsonl",
        "wrong header": tmp / "header.jsonl",
        "deep nesting": tmp / "deep.json",
        "infinite usage": tmp / "inf.json",
        "huge integer": tmp / "huge.json",
        "text that is a number": tmp / "badtext.json",
        "messages not a list": tmp / "nolist.json",
        "first message not the user": tmp / "first.json",
        "bad reply in a trace": tmp / "badreply.jsonl",
        "bad config in a trace": tmp / "badconfig.jsonl",
    }
    files["empty"].write_text("")
    files["not json"].write_text('{"messages": [')
    files["binary"].write_bytes(b"\xff\xfe\x00garbage")
    files["wrong header"].write_text('{"event": "model_call"}\n')
    files["deep nesting"].write_text('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}")
    user = {"role": "user", "content": "hi"}
    files["infinite usage"].write_text(
        '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": '
        '"ok", "usage": {"input_tokens": 1e400}}]}')
    files["huge integer"].write_text(
        '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": '
        '"ok", "usage": {"input_tokens": ' + "9" * 5000 + "}}]}")
    files["text that is a number"].write_text(json.dumps({"messages": [
        user, {"role": "assistant", "content": [{"type": "text", "text": 5}]}]}))
    files["messages not a list"].write_text(json.dumps({"messages": "hi"}))
    files["first message not the user"].write_text(json.dumps(
        [{"role": "assistant", "content": "hi"}]))
    good = gallery_path("healthy-orders").read_text().splitlines()
    start = json.loads(good[0])
    files["bad reply in a trace"].write_text(good[0] + "\n" + json.dumps(
        {"event": "model_call", "seq": 1, "t": 0, "step": 1, "reply": 5}) + "\n")
    start["config"] = {"max_steps": -1}
    files["bad config in a trace"].write_text(json.dumps(start) + "\n")
    return files




@pytest.mark.parametrize("kind", ["missing", "empty", "not json", "binary", "wrong header",
                                  "deep nesting", "infinite usage", "huge integer",
                                  "text that is a number", "messages not a list",
                                  "first message not the user", "bad reply in a trace",
                                  "bad config in a trace"])
def test_a_file_it_cannot_use_gets_one_clear_line_and_exit_2(kind, tmp_path):
    path = _hostile(tmp_path)[kind]
    code, out, err = run(str(path))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("diagnose: ")
    assert str(path) in err and "Traceback" not in err


def test_a_directory_and_a_fifo_are_refused_without_reading(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # reading it would block forever
    for path in (tmp_path, fifo):
        code, _, err = run(str(path))
        assert code == 2 and "diagnose: " in err and len(err.strip().splitlines()) == 1


def test_a_tool_input_nested_too_deeply_for_loop_detection_is_one_line(tmp_path):
    lines = gallery_path("repeats").read_text().splitlines()
    deep = '{"a":' * 5_000 + '"x"' + "}" * 5_000  # too deep to encode, let alone key
    call = lines[1].replace('{"order_id":"A123"}', '{"order_id":' + deep + "}", 1)
    assert call != lines[1]
    path = tmp_path / "deep.jsonl"
    path.write_text("\n".join([lines[0], call, *lines[2:]]) + "\n")
    code, out, err = run(str(path))
    assert code == 2 and out == "" and err.startswith("diagnose: ")
    assert len(err.strip().splitlines()) == 1


def test_a_bad_context_window_and_an_unknown_gallery_name_exit_2():
    assert run(str(gallery_path("repeats")), "--context-window", "0")[0] == 2
    code, _, err = run("--gallery", "nope")
    assert code == 2 and "known: healthy-orders" in err
