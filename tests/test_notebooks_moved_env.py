"""No committed notebook output depends on the machine: the lessons that use the checkpoint
key (kept under ``$XDG_CONFIG_HOME``, by default in the home directory), the login name or
the clock pass strict nbval with ``HOME``, ``XDG_CONFIG_HOME``, ``TZ`` and the locale moved."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from primer.harness.durable.journal import read_journal
from primer.harness.durable.keystore import KEY_ENV, KEY_FILE_ENV, CheckpointError
from primer.scenarios import get_demo

ROOT = Path(__file__).resolve().parent.parent

#: The lessons whose code touches the key (checkpoints, approvals: 08, 15), the login name
#: (approvals: 08), or dates and times (08's approvals, 16's session store).
TOUCHING = ["08", "15", "16"]


def moved_env(tmp: Path) -> dict[str, str]:
    """This process's environment with the home directory, the config folder, the time zone
    and the locale moved, and no checkpoint key given (the tests' conftest sets one), so the
    lessons create and use the key under the moved ``XDG_CONFIG_HOME``."""
    env = {k: v for k, v in os.environ.items() if k not in (KEY_ENV, KEY_FILE_ENV)}
    (tmp / "home").mkdir()
    (tmp / "config").mkdir()
    env.update(HOME=str(tmp / "home"), XDG_CONFIG_HOME=str(tmp / "config"),
               TZ="Pacific/Chatham", LC_ALL="C", LANG="C")  # UTC+12:45 or +13:45
    return env


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_lessons_that_touch_the_machine_pass_nbval_with_home_config_and_tz_moved(tmp_path):
    notebooks = [str(next((ROOT / "notebooks").glob(f"{n}_*.ipynb"))) for n in TOUCHING]
    env = moved_env(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--nbval", "--nbval-current-env",
         "--nbval-sanitize-with", "nbval_sanitize.cfg", "--nbval-cell-timeout=60",
         "-p", "no:cacheprovider", *notebooks],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=380, check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    # The key went where XDG_CONFIG_HOME says, not into the (moved) home directory.
    assert (tmp_path / "config" / "primer" / "checkpoint.key").is_file()
    assert not (tmp_path / "home" / ".config" / "primer").exists()


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
