#!/usr/bin/env python3
"""Re-execute lesson notebooks in place, each from a fresh kernel.

Usage: scripts/run_notebooks.py [--fresh] [-j JOBS] [NOTEBOOK ...]

A NOTEBOOK is a path (``notebooks/05_exits_and_the_production_loop.ipynb``, from the current
directory or from the project's root) or a lesson number (``05``). With none, every
notebooks/*.ipynb runs, sorted by name (so by lesson number), then the reference solutions in
notebooks/solutions/; ``-j`` of them at a time (default: one per CPU), each in a process of
its own, a line printed as each ends. Run from any directory, with any Python: when the
project has a ``.venv`` the script re-runs itself with that interpreter, so the kernel is the
course's.

Each notebook runs with nbclient on the kernel named ``python3``, resolved to the interpreter
running this script, with the notebook's own folder as the working directory and a 120 s
limit per cell. Kernels get CurveZMQ keys (``transport_encryption = "auto"``), so ipykernel
does not warn that it runs over TCP without encryption. The kernel runs offline: API keys
(``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``) are removed from its environment, so cells tagged
``nbval-skip`` (those that use a real key) run too and record what a learner without a key
sees; nbval then skips them.

Before writing, widget state is stripped from the metadata, the kernelspec is set to
``python3``, consecutive stream outputs are merged (nbconvert's CoalesceStreamsPreprocessor)
and widget model ids are derived from the notebook's name and the output's place, so they
are the same on every run. A notebook whose fresh outputs differ from the file's only in
run-to-run values is left as it is on disk (``unchanged``), so a re-execution with no code
change leaves ``git status`` clean. Run-to-run values are what ``nbval_sanitize.cfg`` masks
(durations, addresses, temporary paths, the refund world's run tags) and, in cells tagged
``nbval-ignore-output`` (whose output nbval does not compare: measured timings, kill counts,
widgets), every number (with the blanks before it) and every picture. Any other difference
writes the whole notebook from the fresh run; ``--fresh`` always writes. One line per
notebook reports its wall time.

Exit status: 0 when every notebook ran cleanly; 1 when a cell raised (that notebook is left
unchanged on disk) or wrote to stderr (the notebook is written, the cell is named); 2 when a
NOTEBOOK argument names no notebook, or the modules it needs are missing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"


def use_project_venv(argv: list[str]) -> None:
    """Re-run this script with ``.venv/bin/python`` when another interpreter started it.

    Does nothing when the project has no ``.venv`` (a conda environment, say) or when this
    interpreter already is the venv's. Never returns when it re-runs (``os.execv``).
    """
    venv_python = VENV / "bin" / "python"
    if not venv_python.exists() or Path(sys.prefix).resolve() == VENV.resolve():
        return
    os.execv(str(venv_python), [str(venv_python), str(Path(__file__).resolve()), *argv])


if __name__ == "__main__":
    use_project_venv(sys.argv[1:])

import argparse  # noqa: E402 - after the re-exec, so only the venv's interpreter imports
import concurrent.futures  # noqa: E402
import copy  # noqa: E402
import functools  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from typing import Any  # noqa: E402

try:  # jsonschema first, without its format modules: nbformat's import of it would build
    # rfc3987_syntax's grammar (about 3 s; see primer.course.pytest_plugin)
    from primer.loop.schema_safety import import_jsonschema

    import_jsonschema()
except ModuleNotFoundError:  # pragma: no cover - the course is not installed here
    pass

try:
    import nbformat
    import zmq
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor
    from nbval.plugin import coalesce_streams, get_sanitize_patterns
    from traitlets import default
except ModuleNotFoundError as _missing:  # pragma: no cover - depends on the interpreter
    sys.exit(f"run_notebooks.py: the module {_missing.name!r} is missing from {sys.executable}; "
             f"run `make dev` in {ROOT} first (it creates .venv with the test tools, which this "
             f"script then uses)")

KERNEL_NAME = "python3"
KERNELSPEC = {"name": KERNEL_NAME, "display_name": "Python 3 (ipykernel)", "language": "python"}
#: Environment variables removed before the kernels start, so lessons run offline.
OFFLINE_UNSET = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
CELL_TIMEOUT_S = 120
SANITIZE_FILE = ROOT / "nbval_sanitize.cfg"
#: The cell tag that tells nbval not to compare a cell's output.
RUN_DEPENDENT_TAG = "nbval-ignore-output"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
#: Namespace of the widget model ids written into outputs (uuid5 of notebook name and place).
MODEL_ID_NAMESPACE = uuid.UUID("6f1e4a52-3c1d-4c8e-9a57-0b5e2f7d4c11")
#: A number with the blanks before it (column padding changes with the number of digits).
_NUMBER = re.compile(r"[ \t]*\d+(?:[.,]\d+)*")


class CurrentEnvKernelManager(KernelManager):
    """A kernel manager whose ``python3`` kernel always runs ``sys.executable``.

    An empty kernel_dirs list makes jupyter_client fall back to ipykernel's built-in spec,
    which it launches with the running interpreter. A ``python3`` kernelspec elsewhere on
    the machine (for example in ~/.local/share/jupyter) is ignored. That spec declares
    CurveZMQ support, and ``transport_encryption = "auto"`` hands the kernel its keys.
    """

    @default("kernel_spec_manager")
    def _default_kernel_spec_manager(self) -> KernelSpecManager:
        return KernelSpecManager(kernel_dirs=[])

    @default("transport_encryption")
    def _default_transport_encryption(self) -> str:
        return "auto" if zmq.has("curve") else "disabled"


def stderr_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Indexes of code cells that have a stream output to stderr."""
    return [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        and any(o.get("name") == "stderr" for o in cell.outputs if o.output_type == "stream")
    ]


def tidy(nb: nbformat.NotebookNode, name: str) -> None:
    """Put an executed notebook in its committed form, in place.

    Drops widget state from the metadata, sets the kernelspec, merges consecutive stream
    outputs and gives each widget output a model id derived from ``name`` (the notebook's
    file name), the cell's index and the output's index, so it is the same on every run.
    """
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    CoalesceStreamsPreprocessor().preprocess(nb, {})
    for i, cell in enumerate(nb.cells):
        for k, out in enumerate(cell.get("outputs", [])):
            view = out.get("data", {}).get(WIDGET_MIME)
            if isinstance(view, dict) and "model_id" in view:
                view["model_id"] = uuid.uuid5(MODEL_ID_NAMESPACE, f"{name}:{i}:{k}").hex


def sanitize_patterns(path: Path = SANITIZE_FILE) -> list[tuple[str, str]]:
    """The (regex, replacement) pairs nbval applies before comparing, read as nbval reads
    them (``nbval.plugin.get_sanitize_patterns``); none when the file is absent."""
    return get_sanitize_patterns(path.read_text(encoding="utf-8")) if path.exists() else []


def _masked(value: Any, patterns: list[tuple[str, str]], numbers: bool) -> Any:
    if not isinstance(value, str):
        return value
    for regex, replacement in patterns:
        value = re.sub(regex, replacement, value)
    return _NUMBER.sub("N", value) if numbers else value


def comparable(nb: nbformat.NotebookNode, patterns: list[tuple[str, str]]) -> dict[str, Any]:
    """The notebook with run-to-run values masked, as plain data to compare with ``==``.

    Streams are merged as nbval merges them; every string in an output goes through
    ``patterns``; widget model ids are dropped. In a cell tagged ``nbval-ignore-output``
    every number is masked too and pictures (``image/*``) and output metadata are dropped.
    Sources, cell metadata, execution counts and notebook metadata are kept as they are.
    """
    cells = []
    for cell in nb.cells:
        entry = {k: v for k, v in cell.items() if k != "outputs"}
        if cell.cell_type == "code":
            run_dependent = RUN_DEPENDENT_TAG in cell.metadata.get("tags", [])
            outputs = []
            for out in coalesce_streams(copy.deepcopy(cell.outputs)):
                out = dict(out)
                if run_dependent:
                    out.pop("metadata", None)
                if "text" in out:
                    out["text"] = _masked(out["text"], patterns, run_dependent)
                data = {}
                for mime, value in out.get("data", {}).items():
                    if mime == WIDGET_MIME and isinstance(value, dict):
                        value = {k: v for k, v in value.items() if k != "model_id"}
                    elif run_dependent and mime.startswith("image/"):
                        value = "(picture)"
                    data[mime] = _masked(value, patterns, run_dependent)
                if "data" in out:
                    out["data"] = data
                outputs.append(out)
            entry["outputs"] = outputs
        cells.append(entry)
    return {"metadata": nb.metadata, "nbformat": (nb.nbformat, nb.nbformat_minor),
            "cells": cells}


def same_but_for_run_values(before: nbformat.NotebookNode, after: nbformat.NotebookNode,
                            patterns: list[tuple[str, str]]) -> bool:
    """True when the two notebooks differ only in run-to-run values (see :func:`comparable`)."""
    return comparable(before, patterns) == comparable(after, patterns)


def resolve(arg: str) -> Path:
    """The notebook a command-line argument names: a path from the current directory or from
    the project's root, or a lesson number (``5`` or ``05``); ``FileNotFoundError`` with a
    one-line message otherwise."""
    given = Path(arg).expanduser()
    for candidate in (given, ROOT / given):
        if candidate.is_file():
            return candidate.resolve()
    number = re.fullmatch(r"(\d+)([a-z]?)", arg)
    if number:       # a lesson number: 5, 05, or a split lesson's part such as 13b
        matches = sorted((ROOT / "notebooks").glob(
            f"{int(number[1]):02d}{number[2]}_*.ipynb"))
        if matches:
            return matches[0]
    lessons = ", ".join(p.name.split("_")[0] for p in sorted((ROOT / "notebooks").glob("*.ipynb")))
    raise FileNotFoundError(f"no notebook {arg!r} (looked in {Path.cwd()} and {ROOT}); give a "
                            f"path or a lesson number: {lessons}")


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def run_one(path: Path, *, fresh: bool = False,
            patterns: list[tuple[str, str]] | None = None) -> bool:
    """Execute one notebook and write it back unless only run-to-run values changed (always
    with ``fresh``); return True when it ran without errors or stderr."""
    on_disk = nbformat.read(path, as_version=4)
    nb = copy.deepcopy(on_disk)
    client = NotebookClient(
        nb,
        kernel_manager_class=CurrentEnvKernelManager,
        timeout=CELL_TIMEOUT_S,
        kernel_name=KERNEL_NAME,
        record_timing=False,
        resources={"metadata": {"path": str(path.resolve().parent)}},
    )
    start = time.perf_counter()
    try:
        client.execute()
    except CellExecutionError as exc:
        elapsed = time.perf_counter() - start
        print(f"FAILED {_shown(path)}  {elapsed:6.1f} s  (left unchanged)")
        print(str(exc), file=sys.stderr)
        return False
    elapsed = time.perf_counter() - start

    tidy(nb, path.name)
    nbformat.validate(nb)
    if nb == on_disk and not fresh:
        written = "unchanged"
    elif fresh or not same_but_for_run_values(
            on_disk, nb, sanitize_patterns() if patterns is None else patterns):
        nbformat.write(nb, path)
        written = "written"
    else:
        written = "unchanged (only run-to-run values differ)"

    noisy = stderr_cells(nb)
    status = "ok    " if not noisy else "STDERR"
    print(f"{status} {_shown(path)}  {elapsed:6.1f} s  {written}")
    if noisy:
        print(f"  stderr output in cell(s) {noisy}: fix the warning at its source", file=sys.stderr)
    return not noisy


def main(argv: list[str] | None = None) -> int:
    """Run the notebooks the arguments name (default: all); returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                        help="a path or a lesson number (default: notebooks/*.ipynb, then "
                             "notebooks/solutions/*.ipynb)")
    parser.add_argument("--fresh", action="store_true",
                        help="write every notebook, even one that differs only in run-to-run "
                             "values")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                        help="notebooks run at the same time, each in its own process and "
                             "kernel (default: the machine's CPUs)")
    args = parser.parse_args(argv)
    try:
        paths = [resolve(a) for a in args.notebooks]
    except FileNotFoundError as e:
        print(f"run_notebooks.py: {e}", file=sys.stderr)
        return 2
    paths = paths or [*sorted((ROOT / "notebooks").glob("*.ipynb")),
                      *sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb"))]
    if not paths:
        print("no notebooks to run")
        return 0
    os.environ.setdefault("PYTHONHASHSEED", "0")
    for key in OFFLINE_UNSET:
        os.environ.pop(key, None)
    patterns = sanitize_patterns()
    jobs = max(1, min(args.jobs, len(paths)))
    if jobs == 1:
        results = [run_one(p, fresh=args.fresh, patterns=patterns) for p in paths]
    else:  # one process per notebook at a time; each line is printed as a notebook ends
        with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
            results = list(pool.map(functools.partial(run_one, fresh=args.fresh,
                                                      patterns=patterns), paths))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
