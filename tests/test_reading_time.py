"""Every lesson stays within its reading time (scripts/reading_time.py states the rule)."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("reading_time", ROOT / "scripts" / "reading_time.py")
reading_time = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reading_time)


@pytest.mark.parametrize("path", reading_time.lessons(), ids=lambda p: p.name.split("_")[0])
def test_each_lesson_is_within_its_reading_time(path):
    minutes = reading_time.reading_minutes(path)[0]
    assert minutes <= reading_time.limit_minutes(path), f"{path.name}: {minutes:.1f} min"


def test_the_rule_counts_prose_visible_code_and_output(tmp_path):
    nb = {"cells": [
        {"cell_type": "markdown", "source": ["word " * 200]},                  # 1 min
        {"cell_type": "code", "source": "a = 1\n\nb = 2\n", "metadata": {},   # 2 lines: 12 s
         "outputs": [{"output_type": "stream", "text": "x\ny\n"}]},           # 2 lines: 3 s
        {"cell_type": "code", "source": "hidden = 1\n",                        # folded: 0
         "metadata": {"jupyter": {"source_hidden": True}},
         "outputs": [{"output_type": "display_data",
                      "data": {"text/markdown": "two words"}}]}]}
    path = tmp_path / "03_x.ipynb"
    path.write_text(json.dumps(nb))
    minutes, words, code, out = reading_time.reading_minutes(path)
    assert (words, code, out) == (202, 2, 2)
    assert minutes == pytest.approx(202 / 200 + 12 / 60 + 3 / 60)


def test_limits_are_25_minutes_to_lesson_08_and_30_after():
    assert reading_time.limit_minutes(Path("08_x.ipynb")) == 25
    assert reading_time.limit_minutes(Path("09_x.ipynb")) == 30
    assert reading_time.limit_minutes(Path("13b_x.ipynb")) == 30
