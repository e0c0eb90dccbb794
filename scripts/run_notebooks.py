"""Re-execute lesson notebooks in place, each from a fresh kernel, in order.

Usage: python scripts/run_notebooks.py [notebooks/NN_name.ipynb ...]

With no arguments every notebooks/*.ipynb runs, sorted by name (so by lesson number), then
the reference solutions in notebooks/solutions/.
Each notebook runs with nbclient on the kernel named ``python3``, resolved to the
interpreter running this script, with the notebook's own folder as the working directory
and a 120 s limit per cell. The kernel runs offline by default: API keys
(``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``) are removed from its environment, so cells tagged
``nbval-skip`` (those that use a real key) run too and record what a learner without a key
sees; nbval then skips them.
Widget state is stripped from the metadata, the kernelspec is set to ``python3``, and the
notebook is written back with nbformat. One line per notebook reports its wall time.

Exit status: 0 when every notebook ran cleanly; 1 when a cell raised (that notebook is left
unchanged on disk) or wrote to stderr (the notebook is written, the cell is named).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from traitlets import default

ROOT = Path(__file__).resolve().parent.parent
KERNEL_NAME = "python3"
KERNELSPEC = {"name": KERNEL_NAME, "display_name": "Python 3 (ipykernel)", "language": "python"}
#: Environment variables removed before the kernels start, so lessons run offline.
OFFLINE_UNSET = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
CELL_TIMEOUT_S = 120


class CurrentEnvKernelManager(KernelManager):
    """A kernel manager whose ``python3`` kernel always runs ``sys.executable``.

    An empty kernel_dirs list makes jupyter_client fall back to ipykernel's built-in spec,
    which it launches with the running interpreter. A ``python3`` kernelspec elsewhere on
    the machine (for example in ~/.local/share/jupyter) is ignored.
    """

    @default("kernel_spec_manager")
    def _default_kernel_spec_manager(self) -> KernelSpecManager:
        return KernelSpecManager(kernel_dirs=[])


def stderr_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Indexes of code cells that have a stream output to stderr."""
    return [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        and any(o.get("name") == "stderr" for o in cell.outputs if o.output_type == "stream")
    ]


def run_one(path: Path) -> bool:
    """Execute one notebook in place; return True when it ran without errors or stderr."""
    nb = nbformat.read(path, as_version=4)
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
        print(f"FAILED {path}  {elapsed:6.1f} s  (left unchanged)")
        print(str(exc), file=sys.stderr)
        return False
    elapsed = time.perf_counter() - start

    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nbformat.validate(nb)
    nbformat.write(nb, path)

    noisy = stderr_cells(nb)
    status = "ok    " if not noisy else "STDERR"
    print(f"{status} {path}  {elapsed:6.1f} s")
    if noisy:
        print(f"  stderr output in cell(s) {noisy}: fix the warning at its source", file=sys.stderr)
    return not noisy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="default: notebooks/*.ipynb, then notebooks/solutions/*.ipynb")
    args = parser.parse_args(argv)
    paths = args.notebooks or [*sorted((ROOT / "notebooks").glob("*.ipynb")),
                               *sorted((ROOT / "notebooks" / "solutions").glob("*.ipynb"))]
    if not paths:
        print("no notebooks to run")
        return 0
    os.environ.setdefault("PYTHONHASHSEED", "0")
    for key in OFFLINE_UNSET:
        os.environ.pop(key, None)
    results = [run_one(Path(p)) for p in paths]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
