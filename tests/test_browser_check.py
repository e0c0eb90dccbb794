"""The browser check's expectations agree with the exit explorer, and CI runs it after the
unit and notebook tests. (The browser itself runs in `make test-browser`, not here.)"""

import importlib.util
import json
from pathlib import Path

import pytest

from primer.views.widgets import exit_explorer

ROOT = Path(__file__).resolve().parent.parent


def _browser_check():
    spec = importlib.util.spec_from_file_location("browser_check",
                                                  ROOT / "scripts" / "browser_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_stop_causes_the_browser_expects_are_what_the_panel_shows_headless():
    expected = [cause for _, cause in _browser_check().EXPECTED]
    panel = exit_explorer()
    shown = [panel.explorer.stop_cause.value]
    panel.controls["behaviour"].value = "wanders"
    shown.append(panel.explorer.stop_cause.value)
    panel.controls["max_steps"].value = 3
    shown.append(panel.explorer.stop_cause.value)
    assert shown == expected
    assert len(set(shown)) == 3  # each browser step changes what the page shows


def test_a_free_port_is_a_usable_localhost_port():
    assert 0 < _browser_check().free_port() < 65536


def test_ci_runs_the_browser_check_after_make_test():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test\n" in ci and "make test-browser" in ci
    assert ci.index("make test\n") < ci.index("make test-browser")
    assert "test-browser:" in (ROOT / "Makefile").read_text()


def test_every_lesson_that_shows_a_panel_is_checked_and_a_new_one_joins_by_itself(tmp_path):
    check = _browser_check()
    found = [p.name[:2] for p in check.widget_lessons()]
    assert {"05", "06", "07", "08"} <= set(found)
    assert "01" not in found
    new = tmp_path / "15_async.ipynb"
    new.write_text(json.dumps({"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "display_data", "data": {check.WIDGET_MIME: {"model_id": "x"}}}]}]}))
    (tmp_path / "16_plain.ipynb").write_text(json.dumps({"cells": []}))
    assert check.widget_lessons(tmp_path) == [new]


def test_the_quiz_every_lesson_ends_with_is_not_a_panel_of_its_own(tmp_path):
    check = _browser_check()
    widget = {"output_type": "display_data", "data": {check.WIDGET_MIME: {"model_id": "q"}}}
    quiz_only = tmp_path / "12_quiz.ipynb"
    quiz_only.write_text(json.dumps({"cells": [
        {"cell_type": "markdown", "source": "x"},
        {"cell_type": "code", "metadata": {"tags": ["quiz", "nbval-ignore-output"]},
         "outputs": [widget]}]}))
    assert check.widget_lessons(tmp_path) == [] and check.quiz_cells(quiz_only) == {1}


def test_a_lesson_without_a_panel_cannot_be_picked():
    check = _browser_check()
    with pytest.raises(check.CheckFailed, match="no lesson with a panel named '01'"):
        check.pick_lessons(["01"])
    assert [p.name[:2] for p in check.pick_lessons(["7", "05"])] == ["07", "05"]


def test_each_kind_of_control_the_panels_use_has_a_selector():
    assert set(_browser_check().KINDS) <= set(_browser_check().CONTROL_CSS)
