"""The course's Jupyter settings (jupyter_config/) and scripts/lab.py, which `make lab` and
`make lesson N=05` run."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import zmq
from traitlets.config.loader import PyFileConfigLoader

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "jupyter_config"
NOTIFICATION = "@jupyterlab/apputils-extension:notification"


def _lab():
    spec = importlib.util.spec_from_file_location("lab", ROOT / "scripts" / "lab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _server_config():
    return PyFileConfigLoader("jupyter_server_config.py", path=str(CONFIG)).load_config()


def test_kernels_started_by_the_server_get_curve_keys():
    if not zmq.has("curve"):
        pytest.skip("this libzmq has no CurveZMQ; the config leaves transport_encryption off")
    assert _server_config().KernelManager.transport_encryption == "auto"


def test_lab_reads_its_default_settings_from_the_course_folder_which_turns_news_off():
    settings_dir = Path(_server_config().LabApp.app_settings_dir)
    assert settings_dir == CONFIG / "lab_settings"
    overrides = json.loads((settings_dir / "overrides.json").read_text())
    assert overrides[NOTIFICATION] == {"fetchNews": "false", "checkForUpdates": False}


def test_the_news_override_is_valid_for_the_installed_jupyterlab():
    schema_file = (Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas" / "@jupyterlab"
                   / "apputils-extension" / "notification.json")
    if not schema_file.exists():
        pytest.skip(f"no JupyterLab schemas under {sys.prefix}")
    overrides = json.loads((CONFIG / "lab_settings" / "overrides.json").read_text())
    jsonschema.validate(overrides[NOTIFICATION], json.loads(schema_file.read_text()))


def test_make_puts_the_course_folder_first_on_the_config_path_once():
    run = subprocess.run(["make", "-s", "-p", "-n", "lint"], cwd=ROOT, capture_output=True,
                         text=True, env={"PATH": "/usr/bin:/bin",
                                         "JUPYTER_CONFIG_PATH": f"/elsewhere:{CONFIG}"})
    line = next(x for x in run.stdout.splitlines() if x.startswith("JUPYTER_CONFIG_PATH :="))
    assert line.split(":=", 1)[1].strip() == f"{CONFIG}:/elsewhere"


def test_a_lesson_is_named_by_number_or_file_and_an_unknown_one_lists_the_lessons():
    lab = _lab()
    lesson = next((ROOT / "notebooks").glob("05_*.ipynb")).name
    assert lab.lesson_file("5") == lab.lesson_file("05") == lab.lesson_file(lesson) == lesson
    assert lab.lesson_file("13b").startswith("13b_") and lab.lesson_file("13").startswith("13_")
    with pytest.raises(LookupError, match="lessons: 01, 02"):
        lab.lesson_file("99")


def test_the_lab_command_opens_the_lesson_under_notebooks_with_the_course_settings():
    lab = _lab()
    cmd = lab.lab_command("05_x.ipynb", ["--port=8899"])
    assert f"--ServerApp.root_dir={ROOT / 'notebooks'}" in cmd
    assert "--LabApp.default_url=/lab/tree/05_x.ipynb" in cmd and cmd[-1] == "--port=8899"
    env = lab.course_env({"JUPYTER_CONFIG_PATH": f"{CONFIG}:/mine"})
    assert env["JUPYTER_CONFIG_PATH"] == f"{CONFIG}:/mine"


def test_make_lesson_without_a_number_says_how_and_exits_2():
    run = subprocess.run(["make", "-s", "lesson"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 2
    assert "make lesson N=05" in run.stdout + run.stderr
