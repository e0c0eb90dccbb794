"""Read a lesson notebook's tagged cells from tests (exercise starters and solutions).

Exercise cells carry tags: ``exercise-starter`` (the code the learner completes),
``exercise-check`` (the cell that judges it) and ``exercise-solution`` (the folded
reference: self-contained, its own imports at the top, then the solution and its check).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parent.parent


def lesson_path(lesson: str) -> Path:
    """The notebook of lesson ``lesson`` (``"03"``, ``"13b"``)."""
    found = sorted((ROOT / "notebooks").glob(f"{lesson}_*.ipynb"))
    assert len(found) == 1, f"lesson {lesson}: {found}"
    return found[0]


def tagged_cells(lesson: str, tag: str) -> list[nbformat.NotebookNode]:
    """The code cells of lesson ``lesson`` that carry ``tag``, in order."""
    nb = nbformat.read(lesson_path(lesson), as_version=4)
    return [c for c in nb.cells
            if c.cell_type == "code" and tag in c.get("metadata", {}).get("tags", [])]


def run_cell(lesson: str, tag: str, index: int = 0) -> tuple[dict[str, Any], str]:
    """Execute the ``index``-th cell of lesson ``lesson`` tagged ``tag`` in a fresh
    namespace; return the namespace and what it printed."""
    cell = tagged_cells(lesson, tag)[index]
    namespace: dict[str, Any] = {"__name__": f"lesson_{lesson}_{tag}"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(cell.source, f"<lesson {lesson} {tag} {index}>", "exec"), namespace)
    return namespace, out.getvalue()


def solution(lesson: str, name: str, index: int = 0) -> Any:
    """The object ``name`` defined by lesson ``lesson``'s ``index``-th folded solution."""
    namespace, _ = run_cell(lesson, "exercise-solution", index)
    return namespace[name]
