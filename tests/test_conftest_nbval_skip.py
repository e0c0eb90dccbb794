"""The project's conftest.py makes nbval's skip line say which cell was skipped and why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_a_skipped_cell_is_named_with_its_first_line_and_the_reason(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print(1)", execution_count=1),
                nbformat.v4.new_code_cell("if has_key():\n    call_the_api()",
                                          metadata={"tags": ["nbval-skip"]}),
                nbformat.v4.new_code_cell("# needs the lab's GPU\nrun_on_gpu()",
                                          metadata={"tags": ["nbval-skip"]})]
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    nbformat.write(nb, tmp_path / "lesson.ipynb")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-ra", "--nbval", "--nbval-current-env",
                          "-p", "no:cacheprovider", "-p", "conftest", "--rootdir", str(tmp_path),
                          "-c", os.devnull, "lesson.ipynb"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    skipped = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    assert run.returncode == 0, run.stdout + run.stderr
    assert len(skipped) == 2, run.stdout
    assert "Cell 1 `if has_key():` is tagged nbval-skip: it needs a real API key" in skipped[0]
    assert "Cell 2 `# needs the lab's GPU` is tagged nbval-skip: needs the lab's GPU" in skipped[1]
    assert "plugin.py" not in run.stdout
