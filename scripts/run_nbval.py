#!/usr/bin/env python3
"""Run ``pytest --nbval`` (the arguments given) on a machine that is not this one.

``make nbval`` calls this. The home directory, ``XDG_CONFIG_HOME``, the time zone and the
locale are moved to a temporary folder, Pacific/Chatham (UTC+12:45 or +13:45) and ``C``, and
no checkpoint key is handed down, so the lessons make their own key under the moved config
folder. A committed output that shows a path, a login name, a local time or a locale-bound
format would then differ from what the kernel prints, and nbval fails on it. Caches
(``XDG_CACHE_HOME``, default ``~/.cache``) stay where they were: nothing a lesson prints comes
from them, and matplotlib would rebuild its font list in every kernel otherwise. The
learner's own settings folders (IPython's, matplotlib's, Jupyter's) are not handed down.

Exit status: pytest's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from primer.harness.durable.keystore import KEY_ENV, KEY_FILE_ENV

#: The variables that name a checkpoint key.
KEY_VARIABLES = (KEY_ENV, KEY_FILE_ENV)
#: The learner's own settings folders, which would otherwise reach the kernels past the moved
#: home directory (IPython's profile, matplotlib's matplotlibrc, Jupyter's config and data).
OWN_SETTINGS = ("IPYTHONDIR", "MPLCONFIGDIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR",
                "XDG_DATA_HOME")
TIME_ZONE = "Pacific/Chatham"


def moved_env(base: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with ``HOME`` and ``XDG_CONFIG_HOME`` under ``base`` (created), the time
    zone and locale moved, no checkpoint key variables or own settings folders
    (:data:`OWN_SETTINGS`), and caches kept where they were (when the home directory is an
    absolute path)."""
    env = {k: v for k, v in environ.items() if k not in KEY_VARIABLES + OWN_SETTINGS}
    home = environ.get("HOME", "")
    if os.path.isabs(home):
        env.setdefault("XDG_CACHE_HOME", str(Path(home) / ".cache"))
    for name in ("home", "config"):
        (base / name).mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(base / "home"), XDG_CONFIG_HOME=str(base / "config"),
               TZ=TIME_ZONE, LC_ALL="C", LANG="C")
    return env


def run(command: list[str], env: dict[str, str]) -> int:
    """Run ``command`` and wait for it to end, whatever signal comes: Ctrl-C reaches pytest
    from the terminal, so it is left to end its own way (its summary, exit status 2); a stop
    signal sent to this script alone (TERM, HUP) is passed on. Returns the exit status, as a
    shell gives it (128 + N for a child ended by signal N)."""
    child = subprocess.Popen(command, env=env)

    def pass_on(signum: int, frame: object) -> None:
        child.send_signal(signum)

    before = {sig: signal.signal(sig, pass_on) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        while True:
            try:
                code = child.wait()
            except KeyboardInterrupt:
                continue
            return 128 - code if code < 0 else code
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def main(argv: list[str]) -> int:
    """Run pytest with ``argv`` in the moved environment; return its exit status."""
    with tempfile.TemporaryDirectory(prefix="primer-nbval-") as tmp:
        env = moved_env(Path(tmp), os.environ)
        print(f"nbval: HOME and XDG_CONFIG_HOME moved to a temporary folder, TZ={TIME_ZONE}, "
              "LC_ALL=C, no checkpoint key given: no committed output may depend on them",
              flush=True)
        return run([sys.executable, "-m", "pytest", *argv], env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
