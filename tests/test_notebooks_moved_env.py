"""No committed notebook output depends on the machine: ``make nbval`` runs every lesson with
``HOME``, ``XDG_CONFIG_HOME``, ``TZ`` and the locale moved (scripts/run_nbval.py), and a message
that names the checkpoint key reads the same on every machine."""

from __future__ import annotations

import importlib.util
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from primer.harness.durable.journal import read_journal
from primer.harness.durable.keystore import KEY_ENV, KEY_FILE_ENV, CheckpointError, key_file_path
from primer.scenarios import get_demo

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("nbval_script", ROOT / "scripts" / "run_nbval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nbval = _script()


def test_make_nbval_runs_the_notebooks_through_the_moving_script():
    recipe = re.search(r"^nbval:.*?(?=^\S)", (ROOT / "Makefile").read_text(), re.M | re.S)
    assert recipe and "scripts/run_nbval.py" in recipe.group(0) and "notebooks" in recipe.group(0)


def test_the_moved_environment_moves_home_config_time_zone_and_locale_and_drops_the_key(
        tmp_path):
    original = {"HOME": "/home/learner", "XDG_CONFIG_HOME": "/home/learner/.cfg",
                "TZ": "Europe/Paris", "LANG": "fr_FR.UTF-8", KEY_ENV: "ab" * 32,
                KEY_FILE_ENV: "/keys/k", "PATH": "/usr/bin"}
    env = nbval.moved_env(tmp_path, original)
    assert env["HOME"] == str(tmp_path / "home") and (tmp_path / "home").is_dir()
    assert env["XDG_CONFIG_HOME"] == str(tmp_path / "config") and (tmp_path / "config").is_dir()
    assert env["TZ"] != "Europe/Paris" and env["LC_ALL"] == env["LANG"] == "C"
    assert KEY_ENV not in env and KEY_FILE_ENV not in env
    assert env["PATH"] == "/usr/bin"
    assert env["XDG_CACHE_HOME"] == "/home/learner/.cache"  # caches are not moved
    assert set(nbval.KEY_VARIABLES) == {KEY_ENV, KEY_FILE_ENV}


def test_the_learners_own_settings_folders_do_not_reach_the_kernels(tmp_path):
    own = {name: f"/home/learner/{name.lower()}" for name in nbval.OWN_SETTINGS}
    env = nbval.moved_env(tmp_path, {"HOME": "relative/home", **own})
    assert not set(nbval.OWN_SETTINGS) & set(env)
    assert "XDG_CACHE_HOME" not in env  # a relative home names no cache to keep


def test_the_script_gives_pytests_exit_status_and_passes_a_stop_signal_on(tmp_path):
    assert nbval.run([sys.executable, "-c", "import sys; sys.exit(3)"], {}) == 3
    child = ("import os, signal, sys, time\n"
             "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
             "print('ready', flush=True)\n"
             "time.sleep(30)\n")
    script = tmp_path / "wrapper.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'scripts')!r})\n"
                      "import run_nbval\n"
                      f"sys.exit(run_nbval.run([sys.executable, '-c', {child!r}], None))\n")
    wrapper = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert wrapper.stdout.readline().strip() == "ready"
    wrapper.send_signal(signal.SIGTERM)  # to the wrapper alone: the child must hear it
    assert wrapper.wait(timeout=20) == 7


def test_in_the_moved_environment_the_lessons_key_goes_under_the_moved_config(
        tmp_path, monkeypatch):
    env = nbval.moved_env(tmp_path, {"HOME": "/home/learner", KEY_ENV: "ab" * 32})
    for name in (KEY_ENV, KEY_FILE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", env["HOME"])
    monkeypatch.setenv("XDG_CONFIG_HOME", env["XDG_CONFIG_HOME"])
    assert key_file_path() == tmp_path / "config" / "primer" / "checkpoint.key"


def test_a_wrong_key_message_names_the_key_the_same_way_on_every_machine(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv(KEY_FILE_ENV, str(tmp_path / "keys" / "checkpoint.key"))
    paused = get_demo("refund").run(checkpoint_dir=str(tmp_path / "ck"))
    messages = []
    for home, config in [("/home/a", None), ("/srv/b", str(tmp_path / "elsewhere"))]:
        monkeypatch.setenv("HOME", home)
        if config:
            monkeypatch.setenv("XDG_CONFIG_HOME", config)
        else:
            monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
        with pytest.raises(CheckpointError) as caught:
            read_journal(Path(paused.checkpoint), key=b"not the key that signed it")
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert "$XDG_CONFIG_HOME/primer/checkpoint.key" in messages[0]
    assert "/home/a" not in messages[0] and str(tmp_path) not in messages[0].split(": ", 1)[1]
