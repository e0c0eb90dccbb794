"""The course's Jupyter settings (jupyter_config/) and scripts/lab.py, which `make lab` and
`make lesson N=05` run."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
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
    assert "--ServerApp.answer_yes=True" in cmd  # one Ctrl-C stops it, no y/n question
    env = lab.course_env({"JUPYTER_CONFIG_PATH": f"{CONFIG}:/mine"})
    assert env["JUPYTER_CONFIG_PATH"] == f"{CONFIG}:/mine"


def test_make_lesson_without_a_number_says_how_and_exits_2():
    run = subprocess.run(["make", "-s", "lesson"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 2
    assert "make lesson N=05" in run.stdout + run.stderr


# ---------------------------------------------------------------- stopping make lab


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_a_stop_signal_terminates_jupyterlab_and_waits_for_it():
    lab, child = _lab(), _sleeper()
    assert lab.wait_and_stop(child, [signal.SIGTERM], poll_s=0.05) == 128 + signal.SIGTERM
    assert child.poll() is not None


def test_when_make_is_gone_jupyterlab_is_stopped():
    lab, child = _lab(), _sleeper()
    not_my_parent = os.getppid() + 1
    assert lab.wait_and_stop(child, [], parent=not_my_parent, poll_s=0.05) == 143
    assert child.poll() is not None


def test_jupyterlab_ending_by_itself_gives_its_own_exit_status():
    lab = _lab()
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert lab.wait_and_stop(child, [], parent=os.getppid(), poll_s=0.05) == 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    found = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                           text=True, check=False).stdout.split()
    return [int(p) for p in found]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(not Path("/proc").is_dir() or shutil.which("make") is None,
                    reason="needs make and /proc")
@pytest.mark.parametrize("target", ["lab.py", "make"])
def test_term_to_make_lab_or_lab_py_stops_the_jupyterlab_it_started(tmp_path, target):
    command = [sys.executable, str(ROOT / "scripts" / "lab.py"), "--lesson", "01",
               "--no-browser", f"--port={_free_port()}"]
    if target == "make":  # the recipe make lab runs, without make lab's install step
        (tmp_path / "Makefile").write_text("lab:\n\t@" + " ".join(command) + "\n")
        command = ["make", "-s", "-C", str(tmp_path), "lab"]
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    jupyter = []
    try:
        for line in proc.stdout:
            if "Open this address" in line:
                break
        lab_pid = proc.pid if target == "lab.py" else _children(proc.pid)[0]
        jupyter = _children(lab_pid)
        assert jupyter and all(_alive(p) for p in jupyter)
        proc.terminate()
        proc.wait(timeout=60)
        deadline = time.monotonic() + 60
        while any(_alive(p) for p in jupyter) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(p) for p in jupyter), "JupyterLab is still running"
    finally:
        for pid in [proc.pid, *jupyter]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()


# ---------------------------------------------------------------- lessons run outside JupyterLab

WARNING = "without encryption"


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["nbconvert", "--to", "notebook", "--execute", "--stdout"],
    ["execute", "--output", "{out}"],
], ids=["nbconvert", "execute"])
def test_jupyter_commands_run_a_lesson_without_the_tcp_warning_and_with_no_settings(
        tmp_path, command):
    if not zmq.has("curve"):
        pytest.skip("this libzmq has no CurveZMQ; kernels cannot be encrypted")
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, tmp_path / "lesson.ipynb")
    out = tmp_path / "out.ipynb"
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_CONFIG_PATH"}
    env["JUPYTER_PREFER_ENV_PATH"] = "1"
    argv = [a.format(out=out) for a in command]
    done = subprocess.run([sys.executable, "-m", "jupyter", *argv, str(tmp_path / "lesson.ipynb")],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert WARNING not in done.stderr
    text = done.stdout if command[0] == "nbconvert" else out.read_text(encoding="utf-8")
    assert nbformat.reads(text, as_version=4).cells[0].outputs[0].text == "42\n"


def test_the_readme_says_every_jupyter_command_runs_lessons_without_the_warning():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    for command in ("`jupyter nbconvert`", "`jupyter execute`", "`make notebooks N=05`"):
        assert command in readme
