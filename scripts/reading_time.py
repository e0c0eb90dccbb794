#!/usr/bin/env python3
"""Reading time of each lesson notebook, and the course's limit for it.

The rule: prose at 200 words a minute (Markdown cells, and the text/markdown outputs that
code cells display), 6 s per non-blank line of visible code (a cell whose source is folded,
``"jupyter": {"source_hidden": true}``, counts none), 1.5 s per output line (stream and
text/plain outputs; a picture counts as one line). The limit is 25 minutes for lessons
01–08 and 30 for 09–16 (``shared`` course rules).

Usage: scripts/reading_time.py [NOTEBOOK ...]   (default: every notebooks/NN_*.ipynb)
Prints one row per notebook; exits 1 when any is over its limit.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS_PER_MINUTE = 200
SECONDS_PER_CODE_LINE = 6
SECONDS_PER_OUTPUT_LINE = 1.5
_WORD = re.compile(r"\w+")


def limit_minutes(path: Path) -> int:
    """The reading-time limit of a lesson, from the number its file name starts with."""
    number = int(re.match(r"\d+", path.name).group())  # type: ignore[union-attr]
    return 25 if number <= 8 else 30


def reading_minutes(path: Path) -> tuple[float, int, int, int]:
    """(minutes, words, visible code lines, output lines) of the notebook at ``path``."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    words = code = out = 0
    for cell in nb["cells"]:
        src = "".join(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            words += len(_WORD.findall(src))
            continue
        if cell["cell_type"] != "code":
            continue
        if not cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"):
            code += sum(1 for line in src.splitlines() if line.strip())
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if "text/markdown" in data:
                words += len(_WORD.findall("".join(data["text/markdown"])))
            elif "image/png" in data or "image/svg+xml" in data:
                out += 1
            else:
                text = "".join(o.get("text", "")) + "".join(data.get("text/plain", ""))
                out += len(text.splitlines())
    minutes = (words / WORDS_PER_MINUTE + code * SECONDS_PER_CODE_LINE / 60
               + out * SECONDS_PER_OUTPUT_LINE / 60)
    return minutes, words, code, out


def lessons() -> list[Path]:
    """Every lesson notebook, in lesson order."""
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]*.ipynb"))


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or lessons()
    over = 0
    for p in paths:
        minutes, words, code, out = reading_minutes(p)
        limit = limit_minutes(p)
        flag = f"  OVER {limit}" if minutes > limit else ""
        over += bool(flag)
        print(f"{p.name[:44]:44} {minutes:5.1f} min  ({words} words, {code} code lines, "
              f"{out} output lines){flag}")
    print(f"{len(paths)} notebooks, {over} over their limit")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
