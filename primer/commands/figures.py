"""``python -m primer figures``: draw every course figure from primer code into ``figures/``.

Writes ``figures/NN_name.svg`` for each entry of :data:`primer.views.figures.FIGURES`, byte-stable,
so running it twice (or on a fresh clone) leaves ``git status`` clean. Prints one line per
figure saying whether its file changed. ``--measure`` first measures the parallel latency of
figure 7 again (threads that really wait, about six seconds) and stores it in
``primer/data/parallel_latency.json``; without it figure 7 is drawn from the stored run.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

#: Where the figures go, relative to the project root.
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "figures"


def register(subparsers: Any) -> None:
    """Add the ``figures`` sub-command to ``subparsers`` (an argparse sub-parsers action)."""
    p = subparsers.add_parser(
        "figures", help="draw the course's figures into figures/ (byte-stable SVG)",
        description="Draw every figure of the course from primer code and write it as SVG.")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="figures to draw (default: all), e.g. 06_quadratic_tokens")
    p.add_argument("--out", type=Path, default=DEFAULT_DIR,
                   help="folder to write into (default: the project's figures/)")
    p.add_argument("--measure", action="store_true",
                   help="measure figure 7's parallel latency again before drawing (about 6 s)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Draw the figures; exit code 0, or 2 for an unknown figure name."""
    from primer.views import figures

    unknown = [n for n in args.names if n not in figures.FIGURES]
    if unknown:
        print(f"figures: unknown figure(s) {', '.join(unknown)}; known: "
              f"{', '.join(figures.FIGURES)}")
        return 2
    if args.measure:
        data = figures.write_latency_measurement()
        print(f"measured  {figures.LATENCY_DATA} (time scale {data['time_scale']:g})",
              flush=True)
    for path, changed in figures.write_all(args.out, args.names or None):
        print(f"{'wrote    ' if changed else 'unchanged'} {path}", flush=True)
    return 0
