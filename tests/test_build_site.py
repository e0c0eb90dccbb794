"""scripts/build_site.py: lesson pages without prose sources, panels as pictures, answers
folded, the home page's lesson table from the notebooks, and a check that catches broken
links, missing pages and figures. One test builds a two-lesson site with Sphinx."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module():
    spec = importlib.util.spec_from_file_location("build_site", ROOT / "scripts" / "build_site.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


bs = _module()
PNG = (ROOT / "site" / "panels").glob("*.png")


def _lesson(title="# 05 · Exits", widget=True):
    nb = nbformat.v4.new_notebook()
    nb.metadata["language_info"] = {"name": "python"}
    prose = nbformat.v4.new_code_cell('display(Markdown(f"{n} calls"))', execution_count=1)
    prose.outputs = [nbformat.v4.new_output("display_data", data={
        "text/markdown": "4 calls", "text/plain": "<IPython.core.display.Markdown object>"})]
    hidden = nbformat.v4.new_code_cell("print(secret_fstring)", execution_count=2,
                                       metadata={"jupyter": {"source_hidden": True}})
    hidden.outputs = [nbformat.v4.new_output("stream", name="stdout", text="shown text\n")]
    code = nbformat.v4.new_code_cell("panel.widget", execution_count=3)
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="before\n")]
    if widget:
        code.outputs.append(nbformat.v4.new_output("display_data", data={
            bs.WIDGET_MIME: {"model_id": "abc", "version_major": 2, "version_minor": 0},
            "text/plain": "VBox()"}))
    answers = nbformat.v4.new_markdown_cell(
        "## Test yourself\n\n1. Why?\n\n<details><summary>Answer</summary>\n\nBecause.\n\n"
        "</details>")
    nb.cells = [nbformat.v4.new_markdown_cell(f"{title}\n\nIntro."), prose, hidden, code,
                answers]
    return nb


def test_prose_cells_lose_their_source_and_plain_code_keeps_it():
    page, _ = bs.lesson_page(_lesson(), "05_exits")
    tagged = [bs.HIDE_TAG in c.get("metadata", {}).get("tags", []) for c in page["cells"]
              if c["cell_type"] == "code"]
    assert tagged == [True, True, False]


def test_a_widget_output_becomes_its_picture_and_a_note_on_running_it_live():
    page, pictures = bs.lesson_page(_lesson(), "05_exits")
    assert pictures == ["05_exits-0.png"]
    code = page["cells"][3]
    assert [o["output_type"] for o in code["outputs"]] == ["stream"]
    note = page["cells"][4]
    assert note["cell_type"] == "markdown"
    assert "](../panels/05_exits-0.png)" in note["source"]
    assert "`make lesson N=05`" in note["source"]


def test_the_lesson_table_comes_from_the_notebooks_titles(tmp_path):
    for name, title in (("01_a.ipynb", "# 01 · The model is stateless"),
                        ("13b_s.ipynb", "# 13b · Streams"),
                        ("15_async.ipynb", "# 15 · Async and streaming")):
        nbformat.write(_lesson(title, widget=False), tmp_path / name)
    table = bs.lesson_table(bs.lessons(tmp_path))
    assert "| 13b | [Streams](lessons/13b_s.ipynb) |" in table
    assert "| 01 | [The model is stateless](lessons/01_a.ipynb) |" in table
    assert "| 15 | [Async and streaming](lessons/15_async.ipynb) |" in table


def test_the_home_page_text_is_read_from_the_readme():
    intro, who = bs.readme_sections((ROOT / "README.md").read_text())
    assert intro.startswith("An interactive Jupyter notebook course")
    assert who.startswith("- Engineers preparing")
    with pytest.raises(bs.SiteError, match="Who it is for"):
        bs.readme_sections("# x\n\nIntro.\n\n## Set up\n")


def test_every_panel_of_the_committed_lessons_has_a_picture():
    needed = []
    for path in bs.lessons():
        needed += bs.lesson_page(json.loads(path.read_text()), path.stem)[1]
    missing = [p for p in needed if not (ROOT / "site" / "panels" / p).is_file()]
    assert needed and not missing, f"take {missing} with `make site-pictures`"


@pytest.fixture
def tiny_course(tmp_path, monkeypatch):
    """A two-lesson course: the real site/ sources, one figure, a panel picture."""
    root = tmp_path / "course"
    (root / "notebooks").mkdir(parents=True)
    shutil.copytree(ROOT / "site", root / "site", ignore=shutil.ignore_patterns("*.png"))
    shutil.copy(next(PNG), root / "site" / "panels" / "05_exits-0.png")
    (root / "figures").mkdir()
    shutil.copy(ROOT / "figures" / "01_loop_cycle.svg", root / "figures")
    shutil.copy(ROOT / "README.md", root)
    nbformat.write(_lesson(), root / "notebooks" / "05_exits.ipynb")
    nbformat.write(_lesson("# 06 · Parallel", widget=False), root / "notebooks" / "06_par.ipynb")
    for name, value in (("ROOT", root), ("NOTEBOOKS", root / "notebooks"),
                        ("SITE", root / "site"), ("FIGURES", root / "figures"),
                        ("STAGE", root / "build" / "site-src"), ("OUT", root / "build" / "site")):
        monkeypatch.setattr(bs, name, value)
    return root


@pytest.mark.filterwarnings("ignore:.*is deprecated. Check CHANGES for Sphinx API")  # themes
def test_a_built_site_passes_its_checks_and_the_checks_catch_what_breaks(tiny_course):
    assert bs.main([]) == 0
    out = tiny_course / "build" / "site"
    page = (out / "lessons" / "05_exits.html").read_text()
    assert "secret_fstring" not in page and "shown text" in page
    assert "Display(Markdown" not in page and "4 calls" in page
    assert "<details>" in page and "<details open" not in page
    assert bs.PANEL_ALT in page

    (out / "lessons" / "06_par.html").unlink()
    (out / "figures.html").write_text((out / "figures.html").read_text().replace(
        "01_loop_cycle.svg", "gone.svg"))
    problems = "\n".join(bs.check(out, bs.lessons(), sorted(bs.FIGURES.glob("*.svg"))))
    assert "no page for 06_par.ipynb" in problems
    assert "broken link" in problems and "06_par.html" in problems
    assert "figure 01_loop_cycle.svg is not on the figures page" in problems


def test_a_missing_panel_picture_names_the_command_that_takes_it(tiny_course, capsys):
    (tiny_course / "site" / "panels" / "05_exits-0.png").unlink()
    assert bs.main([]) == 2
    assert "05_exits-0.png" in capsys.readouterr().err


def test_the_quiz_widget_has_no_picture_its_written_questions_stand_for_it():
    widget = {"output_type": "display_data", "data": {bs.WIDGET_MIME: {"model_id": "q"},
                                                      "text/plain": "VBox()"}}
    written = {"output_type": "display_data",
               "data": {"text/markdown": "**1. Why?**\n\n<details><summary>Answer</summary>"
                                         "\n\nBecause.\n\n</details>"}}
    nb = {"cells": [
        {"cell_type": "code", "metadata": {"tags": ["quiz", "nbval-ignore-output"]},
         "source": "quiz_widget(quiz)", "outputs": [widget]},
        {"cell_type": "code", "metadata": {"jupyter": {"source_hidden": True}},
         "source": "quiz", "outputs": [written]}]}
    page, pictures = bs.lesson_page(nb, "15_async")
    assert pictures == []
    quiz_cell, note, answers = page["cells"]
    assert quiz_cell["outputs"] == [] and "remove-cell" in quiz_cell["metadata"]["tags"]
    assert note["source"] == bs.QUIZ_NOTE
    assert bs.HIDE_TAG in answers["metadata"]["tags"]


def test_make_test_browser_builds_the_site_at_most_and_never_reruns_the_lessons():
    # a prerequisite spelled `notebooks` named the phony target that re-executes every lesson
    run = subprocess.run(["make", "-n", "--no-print-directory", "test-browser"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "browser_check.py" in run.stdout
    assert "run_notebooks.py" not in run.stdout
