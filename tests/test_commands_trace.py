"""``python -m primer trace``: with no action it names the one there is; ``demo --trace FILE``
says where it wrote the trace."""

from __future__ import annotations

import json

from primer.__main__ import main


def test_trace_without_an_action_names_show_in_one_line_and_exits_2(capsys):
    assert main(["trace"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert "show FILE" in lines[0] and "trace show run.jsonl" in lines[0]


def test_demo_trace_says_which_file_it_wrote_and_how_to_read_it(tmp_path, capsys):
    path = tmp_path / "pto.jsonl"
    assert main(["demo", "pto", "--trace", str(path)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert path.exists()
    assert last.startswith(f"trace written to {path};")
    assert last.endswith(f"-m primer trace show {path}")


def test_demo_json_with_a_trace_keeps_stdout_json_and_names_the_file_on_stderr(tmp_path,
                                                                                 capsys):
    path = tmp_path / "pto.jsonl"
    assert main(["demo", "pto", "--json", "--trace", str(path)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["stop_cause"] == "end_turn"
    assert f"trace written to {path};" in captured.err
