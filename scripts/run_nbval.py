#!/usr/bin/env python3
"""Run ``pytest --nbval`` (the arguments given) on a machine that is not this one.

``make nbval`` calls this. The home directory, ``XDG_CONFIG_HOME``, the time zone and the
locale are moved to a temporary folder, Pacific/Chatham (UTC+12:45 or +13:45) and ``C``, and
no checkpoint key is handed down, so the lessons make their own key under the moved config
folder. A committed output that shows a path, a login name, a local time or a locale-bound
format would then differ from what the kernel prints, and nbval fails on it. Caches
(``XDG_CACHE_HOME``, default ``~/.cache``) stay where they were: nothing a lesson prints comes
from them, and matplotlib would rebuild its font list in every kernel otherwise.

Exit status: pytest's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

#: The variables that name a checkpoint key (primer.harness.durable.keystore KEY_ENV,
#: KEY_FILE_ENV); spelled here so the script runs before the course is importable.
KEY_VARIABLES = ("PRIMER_CHECKPOINT_KEY", "PRIMER_CHECKPOINT_KEY_FILE")
TIME_ZONE = "Pacific/Chatham"


def moved_env(base: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with ``HOME`` and ``XDG_CONFIG_HOME`` under ``base`` (created), the time
    zone and locale moved, no checkpoint key variables, and caches kept where they were."""
    env = {k: v for k, v in environ.items() if k not in KEY_VARIABLES}
    home = Path(environ.get("HOME") or Path.home())
    env.setdefault("XDG_CACHE_HOME", str(home / ".cache"))
    for name in ("home", "config"):
        (base / name).mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(base / "home"), XDG_CONFIG_HOME=str(base / "config"),
               TZ=TIME_ZONE, LC_ALL="C", LANG="C")
    return env


def main(argv: list[str]) -> int:
    """Run pytest with ``argv`` in the moved environment; return its exit status."""
    with tempfile.TemporaryDirectory(prefix="primer-nbval-") as tmp:
        env = moved_env(Path(tmp), os.environ)
        print(f"nbval: HOME and XDG_CONFIG_HOME moved to a temporary folder, TZ={TIME_ZONE}, "
              "LC_ALL=C, no checkpoint key given: no committed output may depend on them",
              flush=True)
        return subprocess.call([sys.executable, "-m", "pytest", *argv], env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
