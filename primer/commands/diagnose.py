"""``python -m primer diagnose FILE``: why did this agent get stuck? Read its trace and say.

FILE is a trace (JSON Lines, from ``run_agent(..., trace=FILE)`` or ``python -m primer demo
NAME --trace FILE``) or a Messages-API conversation saved as JSON (a ``messages`` list, with
optional per-call ``usage``, ``system`` and ``tools``). Prints one line per failure mode
found (the calls, the evidence, the guard and what it would have saved) and a verdict; see
:mod:`primer.harness.tracing.diagnosis`. ``--json`` prints the same as JSON.
``python -m primer diagnose --gallery`` lists the exercise traces shipped with the package;
``diagnose --gallery NAME`` diagnoses one of them. ``diagnose --score`` diagnoses every
conversation of ``primer/data/diagnose_gallery/`` (made outside the course, each with the
verdict a person gave it) and prints each result, then precision and recall
(:mod:`primer.harness.tracing.gallery_score`); it exits 1 when a healthy one is flagged.

Exit codes: 0 nothing found; 1 something found; 2 the file (or gallery name) cannot be
used, with one line saying why.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

USAGE_ERROR = 2


def register(subparsers: Any) -> None:
    """Add the ``diagnose`` sub-command to ``subparsers``."""
    p = subparsers.add_parser(
        "diagnose", help="find why a recorded run got stuck, and the guard that stops it",
        description="Read a trace or a saved conversation; report each failure mode with "
                    "its calls, evidence and the guard that would have stopped it.")
    p.add_argument("file", nargs="?", metavar="FILE",
                   help="a trace (JSON Lines) or a conversation saved as JSON")
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    p.add_argument("--context-window", type=int, metavar="TOKENS",
                   help="the model's context window for a conversation (a trace records "
                        "its own; default 200,000)")
    p.add_argument("--gallery", nargs="?", const="", metavar="NAME",
                   help="list the exercise traces shipped with primer, or diagnose one")
    p.add_argument("--score", action="store_true",
                   help="diagnose the gallery of outside conversations and print precision "
                        "and recall")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Diagnose and print; returns the exit code (0 clean, 1 found, 2 unusable input)."""
    from primer.harness.tracing.diagnosis import diagnose
    from primer.harness.tracing.trace import TraceError
    from primer.scenarios.gallery import GALLERY, gallery_path

    if args.score:
        from primer.harness.tracing.gallery_score import score_gallery

        score = score_gallery()
        print(score.report())
        return 1 if score.healthy_flagged else 0
    if args.gallery == "" and not args.file:
        width = max(len(n) for n in GALLERY)
        for name, entry in GALLERY.items():
            print(f"{name.ljust(width)}  {entry.description}")
        return 0
    if args.context_window is not None and args.context_window < 1:
        print("diagnose: --context-window must be a positive number of tokens",
              file=sys.stderr)
        return USAGE_ERROR
    try:
        if args.gallery:
            source = gallery_path(args.gallery)
        elif args.file:
            source = args.file
        else:
            print("diagnose: give a FILE, or --gallery to list the exercise traces",
                  file=sys.stderr)
            return USAGE_ERROR
        found = diagnose(source, context_window=args.context_window)
    except (TraceError, KeyError) as e:
        print(f"diagnose: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return USAGE_ERROR
    except RecursionError:
        print(f"diagnose: {source}: nested too deeply to read", file=sys.stderr)
        return USAGE_ERROR
    if args.json:
        print(json.dumps(found.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(found.report())
    return found.exit_code
