"""scripts/run_notebooks.py: runs as the README writes it, from any directory and with any
Python; a re-execution that changes only run-to-run values leaves the file as it was."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import zmq

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "run_notebooks.py"
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


def _module():
    spec = importlib.util.spec_from_file_location("run_notebooks", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rn = _module()
PATTERNS = rn.sanitize_patterns()


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"  # new_code_cell draws random ids; a notebook on disk keeps its own
    return nb


def _code(text_out, tags=(), source="print(x)", **data):
    cell = nbformat.v4.new_code_cell(source, execution_count=1,
                                     metadata={"tags": list(tags)} if tags else {})
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text_out)]
    if data:
        cell.outputs.append(nbformat.v4.new_output("display_data", data=data))
    return cell


def test_the_script_is_executable_with_a_python3_shebang():
    assert os.access(SCRIPT, os.X_OK)
    assert SCRIPT.read_text().splitlines()[0] == "#!/usr/bin/env python3"


def test_run_with_the_system_python_from_another_directory_errors_in_one_line(tmp_path):
    run = subprocess.run([SYSTEM_PYTHON, str(SCRIPT), "99"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert "no notebook '99'" in run.stderr and "05" in run.stderr


def test_a_path_from_the_root_or_a_lesson_number_names_the_notebook_from_anywhere(tmp_path,
                                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    lesson = next((ROOT / "notebooks").glob("05_*.ipynb"))
    assert rn.resolve(f"notebooks/{lesson.name}") == lesson
    assert rn.resolve("5") == rn.resolve("05") == lesson
    assert rn.resolve("13b").name.startswith("13b_") and rn.resolve("13").name.startswith("13_")
    with pytest.raises(FileNotFoundError, match="no notebook 'nope.ipynb'"):
        rn.resolve("nope.ipynb")


def test_kernels_get_curve_keys_so_ipykernel_does_not_warn_about_plain_tcp():
    expected = "auto" if zmq.has("curve") else "disabled"
    assert rn.CurrentEnvKernelManager().transport_encryption == expected


def test_widget_model_ids_and_split_streams_come_out_the_same_on_every_run():
    def executed(model_id):
        cell = nbformat.v4.new_code_cell("panel", execution_count=1)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="a\n"),
                        nbformat.v4.new_output("stream", name="stdout", text="b\n"),
                        nbformat.v4.new_output("display_data", data={
                            rn.WIDGET_MIME: {"model_id": model_id, "version_major": 2,
                                             "version_minor": 0},
                            "text/plain": "VBox()"})]
        nb = _nb(cell)
        nb.metadata["widgets"] = {"state": {}}
        rn.tidy(nb, "05_x.ipynb")
        return nb

    one, two = executed("e5cab53e"), executed("bd9773d7")
    assert one == two
    assert "widgets" not in one.metadata and one.metadata["kernelspec"]["name"] == "python3"
    assert [o.output_type for o in one.cells[0].outputs] == ["stream", "display_data"]
    assert one.cells[0].outputs[0].text == "a\nb\n"


def test_values_nbval_masks_do_not_count_as_a_change():
    before = _nb(_code("paid idem-toolu_R1001_a8a96ae4_02_1 in 0.42 s, see /tmp/abc/x.json\n"))
    after = _nb(_code("paid idem-toolu_R1001_03e7922f_02_1 in 0.57 s, see /tmp/def/x.json\n"))
    assert rn.same_but_for_run_values(before, after, PATTERNS)


def test_a_new_number_in_a_compared_cell_is_a_change():
    assert not rn.same_but_for_run_values(_nb(_code("12 tokens\n")), _nb(_code("13 tokens\n")),
                                          PATTERNS)


def test_numbers_and_pictures_of_a_cell_nbval_ignores_are_run_to_run_values():
    tag = [rn.RUN_DEPENDENT_TAG]
    before = _nb(_code("  2  before the decision\n 10  approved\n", tag,
                       **{"image/png": "AAAA", "text/plain": "<Figure size 800x450>"}))
    after = _nb(_code("  4  before the decision\n  8  approved\n", tag,
                      **{"image/png": "BBBB", "text/plain": "<Figure size 800x450>"}))
    assert rn.same_but_for_run_values(before, after, PATTERNS)
    reworded = _nb(_code("  4  before deciding\n  8  approved\n", tag))
    assert not rn.same_but_for_run_values(_nb(_code("  2  before the decision\n 10  approved\n",
                                                    tag)), reworded, PATTERNS)


def test_a_new_picture_in_a_compared_cell_or_a_new_source_is_a_change():
    assert not rn.same_but_for_run_values(_nb(_code("", **{"image/png": "AAAA"})),
                                          _nb(_code("", **{"image/png": "BBBB"})), PATTERNS)
    assert not rn.same_but_for_run_values(_nb(_code("1\n")), _nb(_code("1\n", source="print(y)")),
                                          PATTERNS)


@pytest.mark.slow
def test_a_rerun_with_no_change_leaves_the_file_untouched_and_prints_no_kernel_warning(
        tmp_path):
    nb = _nb(nbformat.v4.new_code_cell("import time, uuid\n"
                                       "print(f'took {time.perf_counter() % 1:.3f} s')"))
    path = tmp_path / "lesson.ipynb"
    nbformat.write(nb, path)
    first = subprocess.run([SYSTEM_PYTHON, str(SCRIPT), str(path)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "written" in first.stdout
    assert "without encryption" not in first.stderr
    written = path.read_bytes()
    second = subprocess.run([SYSTEM_PYTHON, str(SCRIPT), str(path)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 0 and "unchanged" in second.stdout
    assert path.read_bytes() == written
