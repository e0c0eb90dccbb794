"""How right :func:`~primer.harness.tracing.diagnosis.diagnose` is on conversations the course
did not make: the files of ``primer/data/diagnose_gallery/`` (written by
``scripts/make_diagnose_gallery.py``), each with the verdict a person gave it.

A conversation's ``expected`` is ``"healthy"`` or a failure mode's name. ``diagnose`` is
right on it when it finds nothing on a healthy one, and when the first mode it names is the
expected one on a stuck one. A conversation marked ``undetectable`` has a fault no detector
can see; ``diagnose`` must then find nothing (and say "no known failure mode found"), and
the score counts it as a miss.

Precision: of the conversations ``diagnose`` flagged, the share it named right. Recall: of
the stuck conversations, the share it named right.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .diagnosis import Diagnosis, diagnose

#: Where the gallery's conversations live inside the package.
DIAGNOSE_GALLERY_DIR = Path(__file__).resolve().parent.parent.parent / "data" / "diagnose_gallery"


@dataclass(frozen=True)
class GalleryCase:
    """One conversation of the gallery: ``name`` (its file's stem), ``expected`` verdict,
    ``source`` (how it was made), ``undetectable`` (why no detector can see its fault, or
    ``""``) and ``path``."""

    name: str
    expected: str
    source: str
    undetectable: str
    path: Path


def gallery_cases(directory: str | Path | None = None) -> list[GalleryCase]:
    """The gallery's conversations, by name (default :data:`DIAGNOSE_GALLERY_DIR`)."""
    folder = Path(directory) if directory is not None else DIAGNOSE_GALLERY_DIR
    out = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        out.append(GalleryCase(path.stem, str(data["expected"]), str(data.get("source", "")),
                               str(data.get("undetectable", "")), path))
    return out


@dataclass(frozen=True)
class CaseResult:
    """One case and what ``diagnose`` said: ``found`` (its modes, first is the primary)."""

    case: GalleryCase
    diagnosis: Diagnosis

    @property
    def found(self) -> list[str]:
        """The modes found, in order."""
        return [m.value for m in self.diagnosis.modes]

    @property
    def right(self) -> bool:
        """Nothing found on a healthy (or undetectable) case; the expected mode first on a
        stuck one."""
        if self.case.expected == "healthy" or self.case.undetectable:
            return not self.found
        return self.found[:1] == [self.case.expected]


@dataclass(frozen=True)
class GalleryScore:
    """The results on every case, and the figures: ``precision``, ``recall`` (0 to 1)."""

    results: list[CaseResult]

    @property
    def flagged(self) -> list[CaseResult]:
        """Cases where something was found."""
        return [r for r in self.results if r.found]

    @property
    def stuck(self) -> list[CaseResult]:
        """Cases a person called stuck (expected is not "healthy")."""
        return [r for r in self.results if r.case.expected != "healthy"]

    @property
    def named_right(self) -> list[CaseResult]:
        """Stuck cases whose expected mode was found first."""
        return [r for r in self.stuck if r.found[:1] == [r.case.expected]]

    @property
    def healthy_flagged(self) -> list[CaseResult]:
        """Healthy cases where something was found (should be none)."""
        return [r for r in self.results if r.case.expected == "healthy" and r.found]

    @property
    def precision(self) -> float:
        """Named right / flagged (1.0 when nothing was flagged)."""
        return len(self.named_right) / len(self.flagged) if self.flagged else 1.0

    @property
    def recall(self) -> float:
        """Named right / stuck (1.0 when nothing is stuck)."""
        return len(self.named_right) / len(self.stuck) if self.stuck else 1.0

    def report(self) -> str:
        """One line per case (expected, found, right or not), then the figures."""
        width = max((len(r.case.name) for r in self.results), default=4)
        lines = [f"{'conversation'.ljust(width)}  {'expected':<19}  found"]
        for r in self.results:
            mark = ("cannot judge" if r.case.undetectable and r.right
                    else "ok" if r.right else "WRONG")
            lines.append(f"{r.case.name.ljust(width)}  {r.case.expected:<19}  "
                         f"{', '.join(r.found) or '-'}  {mark}")
        lines.append(
            f"{len(self.results)} conversations, {len(self.stuck)} stuck: precision "
            f"{self.precision:.2f} ({len(self.named_right)} of {len(self.flagged)} flagged "
            f"named right), recall {self.recall:.2f} ({len(self.named_right)} of "
            f"{len(self.stuck)} stuck named right); healthy flagged: "
            f"{len(self.healthy_flagged)}")
        lines += [f"cannot judge: {r.case.name}: {r.case.undetectable}"
                  for r in self.results if r.case.undetectable]
        return "\n".join(lines)


def score_gallery(directory: str | Path | None = None) -> GalleryScore:
    """Diagnose every conversation of the gallery and score the verdicts."""
    return GalleryScore([CaseResult(c, diagnose(c.path)) for c in gallery_cases(directory)])


__all__ = ["DIAGNOSE_GALLERY_DIR", "CaseResult", "GalleryCase", "GalleryScore",
           "gallery_cases", "score_gallery"]
