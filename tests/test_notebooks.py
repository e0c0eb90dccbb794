"""Every lesson notebook is committed executed, from a fresh kernel, with clean output.

`make notebooks` produces notebooks that pass these checks; nbval (in `make test`) then
re-executes them and compares the outputs.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
# Lessons, then their reference solutions (notebooks/solutions/), which nbval runs too.
NOTEBOOKS = [*sorted((ROOT / "notebooks").glob("*.ipynb")),
             *sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb"))]

pytestmark = pytest.mark.parametrize(
    "path", NOTEBOOKS, ids=[p.relative_to(ROOT / "notebooks").as_posix() for p in NOTEBOOKS])


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def test_code_cells_are_numbered_1_to_n_in_order_from_a_fresh_kernel(path):
    # Every code cell, nbval-skip ones included: `make notebooks` runs those offline too, so
    # they record what a learner without an API key sees.
    counts = [c.execution_count for c in read(path).cells if c.cell_type == "code"]
    expected = list(range(1, len(counts) + 1))
    assert counts == expected, f"execution counts {counts}: run make notebooks"


def test_notebook_metadata_holds_no_widget_state(path):
    assert "widgets" not in read(path).metadata


def test_kernelspec_is_python3(path):
    assert read(path).metadata.get("kernelspec", {}).get("name") == "python3"


def test_no_output_is_stderr_or_an_error(path):
    bad = []
    for i, cell in enumerate(read(path).cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" or output.get("name") == "stderr":
                bad.append((i, output.get("output_type"), output.get("name", output.get("ename"))))
    assert not bad, f"cells with stderr or error output (index, type, name): {bad}"
