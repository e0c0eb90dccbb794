"""The README's code: its python example runs and prints what the README says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from primer.__main__ import build_parser

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end != -1 else None]


def test_the_five_line_example_prints_exactly_the_output_shown_under_it():
    blocks = BLOCK.findall(section("The library at a glance"))
    (lang, code), (shown_lang, shown) = blocks[0], blocks[1]
    assert (lang, shown_lang) == ("python", "text")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})  # noqa: S102
    assert out.getvalue() == shown


@pytest.mark.parametrize("command", ["demo", "trace show", "replay", "eval", "check-loop",
                                     "approvals list", "approve", "resume", "diagnose"])
def test_each_command_the_readme_lists_exists(command):
    assert f"python -m primer {command}" in section("Other commands")
    words = command.split()
    args = build_parser().parse_args(words + _required(words[0]))
    assert callable(args.func)


def _required(command: str) -> list[str]:
    """Enough arguments for ``command`` to parse (nothing is run)."""
    return {"trace": ["f.jsonl"], "replay": ["f.jsonl"], "approvals": ["dir"],
            "approve": ["ck.json", "toolu_1", "--yes"], "resume": ["ck.json"],
            "check-loop": ["loop.py"], "demo": ["orders"], "diagnose": ["f.jsonl"]}.get(command, [])
