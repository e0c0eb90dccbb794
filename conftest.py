"""pytest settings for the whole project: the reason nbval gives for a skipped cell.

nbval skips a cell tagged ``nbval-skip`` with a bare ``pytest.skip()``, so ``-ra`` printed
``SKIPPED [1] .../nbval/plugin.py:592: Skipped``: neither the cell nor why. Here each such
cell gets a skip marker before it runs, whose reason names the cell (nbval's 0-based count of
code cells, as in its test ids), its first line, and why: the course tags only cells that
need a real API key (a first line that is a comment is taken as the reason instead). pytest
prints the notebook's path before it.
"""

from __future__ import annotations

import pytest

SKIP_TAG = "nbval-skip"
DEFAULT_REASON = ("it needs a real API key, so the offline tests do not run it (set "
                  "ANTHROPIC_API_KEY and run the lesson to see it)")


def skip_reason(cell_num: int, source: str) -> str:
    """The skip line's text for code cell ``cell_num`` whose source is ``source``."""
    lines = [line.strip() for line in source.splitlines() if line.strip()]
    first = lines[0] if lines else "(empty cell)"
    why = first.lstrip("#").strip() if first.startswith("#") else DEFAULT_REASON
    return f"Cell {cell_num} `{first[:60]}` is tagged {SKIP_TAG}: {why}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give each nbval cell tagged ``nbval-skip`` a skip marker with a reason."""
    for item in items:
        cell = getattr(item, "cell", None)
        options = getattr(item, "options", None)
        if cell is None or not options or not options.get("skip"):
            continue
        item.add_marker(pytest.mark.skip(reason=skip_reason(item.cell_num, cell.source)))
