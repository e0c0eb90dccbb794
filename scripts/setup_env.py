#!/usr/bin/env python3
"""Create the course's virtual environment and install the course into it, showing progress.

Usage: scripts/setup_env.py [--venv .venv] [--extras frameworks,dev] [--installer auto|uv|pip]

Run by the Makefile with the system's ``python3`` (standard library only). Steps:

1. ``python3 -m venv .venv`` when ``.venv/bin/python`` is missing (Python >= 3.10 needed).
2. The installer: ``uv`` (a fast installer from the package registry) when it is on PATH or
   already in ``.venv``; otherwise it is bootstrapped into ``.venv`` with plain ``pip``
   (a few seconds). If that fails, or ``--installer pip`` (``make lab INSTALLER=pip``), plain
   ``pip`` installs everything; it is slower (about three minutes on a 2-core machine with
   an empty cache) and prints each package as it goes.
3. ``-e '.[EXTRAS]'`` into ``.venv``; uv's per-package lines are counted, not printed.
4. ``import primer`` from outside the checkout, to prove the editable install works, and
   the environment's ``python3`` kernelspec told to start kernels with transport encryption
   (``primer/views/kernel.py``), whatever Jupyter client starts them.

Exit status 0 when the environment is ready; 1 (with one line saying what failed and what to
try) otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def say(message: str) -> None:
    """One progress line, flushed at once (make shows it while the step runs)."""
    print(f"make: {message}", flush=True)


def run_streamed(command: list[str], *, hide_prefixes: tuple[str, ...] = ()) -> int:
    """Run ``command``, echoing its output line by line except lines starting with any of
    ``hide_prefixes`` (those are counted, and the count is printed at the end). Returns the
    exit status."""
    hidden = 0
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1, cwd=ROOT) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if hide_prefixes and line.lstrip().startswith(hide_prefixes):
                hidden += 1
                continue
            print(f"  {line.rstrip()}", flush=True)
        status = process.wait()
    if hidden:
        print(f"  ({hidden} package lines not shown)", flush=True)
    return status


def make_venv(venv: Path) -> None:
    """Create ``venv`` with this interpreter's ``venv`` module (pip included when
    ``ensurepip`` exists; otherwise pip is installed into it from the package registry)."""
    if sys.version_info < (3, 10):  # noqa: UP036 - run by the system python3, any version
        sys.exit(f"Python >= 3.10 is needed; {sys.executable} is "
                 f"{sys.version.split()[0]}. Run: make lab PYTHON=python3.12 (or any >= 3.10)")
    say(f"creating the virtual environment {venv.name} ({Path(sys.executable).name} -m venv)")
    try:
        import ensurepip  # noqa: F401  (only whether it exists matters)
    except ImportError:
        say("ensurepip is missing (on Debian/Ubuntu: apt-get install python3-venv); "
            "creating the venv without pip and installing pip into it")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                        "install", "--quiet", "pip"], check=True)
        return
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)


def find_uv(venv: Path) -> str | None:
    """A working ``uv`` executable: on PATH, in the venv, or bootstrapped into the venv with
    its pip; ``None`` when none can be had."""
    for candidate in (shutil.which("uv"), venv / "bin" / "uv"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    say("bootstrapping uv, a fast installer, into the venv (pip install uv)")
    status = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                             "--disable-pip-version-check", "uv"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if status.returncode != 0:
        last = (status.stderr.strip().splitlines() or ["no output"])[-1]
        say(f"could not install uv ({last}); using pip instead")
        return None
    return str(venv / "bin" / "uv")


def install(venv: Path, extras: str, installer: str) -> bool:
    """Install ``-e .[extras]`` into ``venv``; True on success."""
    target = f".[{extras}]" if extras else "."
    python = str(venv / "bin" / "python")
    uv = find_uv(venv) if installer in ("auto", "uv") else None
    if uv is not None:
        say(f"installing the course into {venv.name} with uv (uv pip install -e '{target}')")
        status = run_streamed([uv, "pip", "install", "--python", python, "-e", target],
                              hide_prefixes=("+ ", "- ", "~ "))
        if status == 0:
            return True
        if installer == "uv":
            return False
        say("uv failed (above); trying again with pip")
    say(f"installing the course into {venv.name} with pip (pip install -e '{target}'; "
        "a few minutes the first time)")
    status = run_streamed([python, "-m", "pip", "install", "--disable-pip-version-check",
                           "--progress-bar", "off", "-e", target],
                          hide_prefixes=("Requirement already satisfied",))
    return status == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", default=".venv", help="the environment's folder")
    parser.add_argument("--extras", default="", help="comma-separated extras of pyproject.toml")
    parser.add_argument("--installer", choices=("auto", "uv", "pip"), default="auto")
    args = parser.parse_args(argv)
    venv = (ROOT / args.venv).resolve()
    started = time.monotonic()
    if not (venv / "bin" / "python").is_file():
        make_venv(venv)
    if not install(venv, args.extras, args.installer):
        print(f"make: installing the course failed (see above). Fix what it names, or start "
              f"over with: rm -rf {args.venv} && make lab INSTALLER=pip", file=sys.stderr)
        return 1
    check = subprocess.run([str(venv / "bin" / "python"), "-c", "import primer"], cwd="/",
                           capture_output=True, text=True)
    if check.returncode != 0:
        print("make: the editable install cannot import primer: is primer/__init__.py there? "
              + (check.stderr.strip().splitlines() or [""])[-1], file=sys.stderr)
        return 1
    # Kernels from any Jupyter client (jupyter execute too) get CurveZMQ keys: no warning
    # that they run over TCP without encryption (primer/views/kernel.py).
    subprocess.run([str(venv / "bin" / "python"), "-c",
                    "from primer.views.kernel import use_in_kernelspec; use_in_kernelspec()"],
                   check=True)
    say(f"{venv.name} is ready ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
