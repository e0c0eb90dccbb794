#!/usr/bin/env python3
"""Build the course website from the committed, executed notebooks, then check it.

Usage: scripts/build_site.py [--out build/site] [--check-only]        (``make site``)

Sphinx with myst-nb renders the notebooks as they are committed (``nb_execution_mode =
"off"``: nothing is re-executed), offline, with the sphinx-book-theme. The sources are
staged in ``build/site-src/`` from:

- ``site/`` (``conf.py``, ``index.md``, ``_static/``, ``panels/``): the home page template
  gets the README's opening paragraphs and its "Who it is for" section, and a lesson table
  built from the notebooks themselves (number, first heading, page), so it never drifts;
- every ``notebooks/NN_*.ipynb`` (found by glob: new lessons join by themselves), as
  ``lessons/NN_*.ipynb`` with three changes: a cell whose metadata has ``"jupyter":
  {"source_hidden": true}``, or whose only outputs are Markdown it displays (the prose
  cells that print computed numbers), gets myst-nb's ``remove-input`` tag, so the page
  shows the text and not its f-string; each widget output is replaced by the picture of
  the panel in ``site/panels/<lesson>-<k>.png`` (``k`` counts the lesson's widget outputs
  from 0; taken by ``make site-pictures``) and a note on how to run it live; nothing else
  (``<details>`` answers stay folded, as the HTML says);
- ``figures/*.svg``, on a figures page with each figure's caption from the docstring of
  the function in :data:`primer.views.figures.FIGURES` that draws it.

The checks, on the built HTML: one page per lesson, every internal link and picture
resolves to a file (and every ``#fragment`` to an id on its page), no page loads a script,
style sheet or picture from another host (the site works offline), every figure of
``figures/`` is on the figures page byte for byte, each lesson page has as many panel
pictures as the notebook has widget outputs and as many ``<details>`` as its Markdown, none
of them open. Sphinx runs with warnings as errors.

Exit status: 0 built and checked; 1 a check failed or Sphinx failed (each problem is
printed); 2 a panel picture is missing (the line says how to take it).
"""

from __future__ import annotations

import argparse
import copy
import html.parser
import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SITE = ROOT / "site"
FIGURES = ROOT / "figures"
STAGE = ROOT / "build" / "site-src"
OUT = ROOT / "build" / "site"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
HIDE_TAG = "remove-input"
#: The alt text of every panel picture (the site check and the style sheet find them by it).
PANEL_ALT = "The interactive panel, as it first appears in JupyterLab"
_DETAILS = re.compile(r"<details(\s[^>]*)?>", re.IGNORECASE)


class SiteError(RuntimeError):
    """The sources cannot be staged (``missing_pictures`` lists absent panel pictures)."""

    def __init__(self, message: str, missing_pictures: list[str] | None = None) -> None:
        super().__init__(message)
        self.missing_pictures = missing_pictures or []


# ================================================================ staging

def lessons(folder: Path | None = None) -> list[Path]:
    """The lesson notebooks, ``NN_name.ipynb`` (a split lesson's second part
    ``NNb_name.ipynb``), in ``folder`` (default: notebooks/), in lesson order."""
    return sorted(p for p in (folder or NOTEBOOKS).glob("[0-9][0-9]*_*.ipynb")
                  if re.fullmatch(r"\d\d[a-z]?", p.name.split("_")[0]))


def lesson_title(nb: dict) -> str:
    """The lesson's title: its first Markdown heading without the ``NN ·`` prefix."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for line in _source(cell).splitlines():
                if line.startswith("#"):
                    return re.sub(r"^\d+[a-z]?\s*[·:.-]\s*", "", line.lstrip("#").strip())
    return "(untitled)"


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def is_prose(cell: dict) -> bool:
    """True for a code cell shown as text only: ``source_hidden`` in its metadata, or every
    output is Markdown it displays (``display(Markdown(f"..."))``)."""
    if cell.get("cell_type") != "code":
        return False
    if cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"):
        return True
    outputs = cell.get("outputs", [])
    return bool(outputs) and all(
        o.get("output_type") == "display_data"
        and set(o.get("data", {})) <= {"text/markdown", "text/plain"}
        and "text/markdown" in o.get("data", {}) for o in outputs)


def panel_note(picture: str, number: str) -> str:
    """The Markdown that stands for a widget output: the picture and how to run it live."""
    return (f"![{PANEL_ALT}](../panels/{picture})"
            f"\n\n*A picture of the interactive panel. To move its controls, run the lesson "
            f"yourself: `make lesson N={number}` opens it in JupyterLab (see the "
            f"[home page](../index.md) for setting up); run its cells from the top.*")


def is_quiz(cell: dict) -> bool:
    """Whether a code cell shows the lesson's "Test yourself" quiz (tagged ``quiz``): its
    widget has no picture; the written questions with folded answers follow it."""
    return "quiz" in cell.get("metadata", {}).get("tags", [])


QUIZ_NOTE = ("*The quiz is interactive in the notebook (run the lesson yourself); here are "
             "its questions, each answer folded.*")


def lesson_page(nb: dict, stem: str) -> tuple[dict, list[str]]:
    """The notebook as the site shows it, and the panel pictures it needs (file names in
    ``site/panels/``, in order). ``nb`` is not changed."""
    page = copy.deepcopy(nb)
    cells, pictures = [], []
    for cell in page.get("cells", []):
        cells.append(cell)
        if cell.get("cell_type") != "code":
            continue
        if is_prose(cell):
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            if HIDE_TAG not in tags:
                tags.append(HIDE_TAG)
        kept = []
        if is_quiz(cell):
            cell["outputs"] = []
            cell.setdefault("metadata", {}).setdefault("tags", []).append("remove-cell")
            cells.append({"cell_type": "markdown", "id": "quiz-note", "metadata": {},
                          "source": QUIZ_NOTE})
            continue
        for out in cell.get("outputs", []):
            if WIDGET_MIME in out.get("data", {}):
                picture = f"{stem}-{len(pictures)}.png"
                pictures.append(picture)
                cells.append({"cell_type": "markdown", "id": f"panel-{len(pictures) - 1}",
                              "metadata": {}, "source": panel_note(picture, stem.split("_")[0])})
            else:
                kept.append(out)
        cell["outputs"] = kept
    page["cells"] = cells
    page.get("metadata", {}).pop("widgets", None)
    return page, pictures


def readme_sections(readme: str) -> tuple[str, str]:
    """The README's paragraphs before its first ``##`` section, and its "Who it is for"
    section (both without headings); ``SiteError`` when either is missing."""
    body = readme.split("\n", 1)[1] if readme.startswith("# ") else readme
    intro = body.split("\n## ", 1)[0].strip()
    match = re.search(r"^## Who it is for\n(.*?)(?=^## |\Z)", readme, re.MULTILINE | re.DOTALL)
    if not intro or not match:
        raise SiteError("README.md needs opening paragraphs and a '## Who it is for' section")
    return intro, match.group(1).strip()


def lesson_table(paths: list[Path]) -> str:
    """The home page's lesson table (Markdown), one row per notebook."""
    rows = ["| # | Lesson | Notebook |", "|---|--------|----------|"]
    for path in paths:
        title = lesson_title(json.loads(path.read_text(encoding="utf-8")))
        rows.append(f"| {path.name.split('_')[0]} | [{title}](lessons/{path.name}) | "
                    f"`notebooks/{path.name}` |")
    return "\n".join(rows)


def figure_captions() -> dict[str, str]:
    """Figure name -> the first sentence of the docstring of the function that draws it
    (reST ````code```` and ``:func:`~a.b``` roles as Markdown ```code``` and ```b```)."""
    from primer.views import figures

    captions = {}
    for name, fn in figures.FIGURES.items():
        paragraph = " ".join((fn.__doc__ or name).strip().split("\n\n")[0].split())
        sentence = re.split(r"(?<=\.)\s", paragraph, maxsplit=1)[0].rstrip(".")
        sentence = re.sub(r":\w+:`~?(?:[\w.]*\.)?(\w+)`", r"`\1`", sentence)
        captions[name] = sentence.replace("``", "`")
    return captions


def figures_page(svgs: list[Path], captions: dict[str, str]) -> str:
    """The figures page (Markdown): each SVG under its caption."""
    parts = ["# Figures", "",
             "Every diagram of the course, drawn from the library's code by `make figures` "
             "(a test fails when a committed figure differs from what the code draws).", ""]
    for svg in svgs:
        caption = captions.get(svg.stem, svg.stem.replace("_", " "))
        parts += [f"## {caption}", "", f"![{caption.replace('`', '')}](figures/{svg.name})",
                  ""]
    return "\n".join(parts)


def stage(stage_dir: Path | None = None) -> dict[str, list[str]]:
    """Write the Sphinx sources into ``stage_dir`` (default: build/site-src/, emptied first);
    returns each lesson's panel pictures. ``SiteError`` when a picture is missing or the
    README lacks a section."""
    stage_dir = stage_dir or STAGE
    if stage_dir.exists():
        shutil.rmtree(stage_dir)
    (stage_dir / "lessons").mkdir(parents=True)
    shutil.copy(SITE / "conf.py", stage_dir / "conf.py")
    for folder in ("_static", "panels"):
        if (SITE / folder).is_dir():
            shutil.copytree(SITE / folder, stage_dir / folder)
    shutil.copytree(FIGURES, stage_dir / "figures")
    paths = lessons()
    intro, who = readme_sections((ROOT / "README.md").read_text(encoding="utf-8"))
    index = (SITE / "index.md").read_text(encoding="utf-8")
    for token, text in (("{{ intro }}", intro), ("{{ who }}", who),
                        ("{{ lessons }}", lesson_table(paths))):
        index = index.replace(token, text)
    (stage_dir / "index.md").write_text(index, encoding="utf-8")
    (stage_dir / "figures.md").write_text(
        figures_page(sorted(FIGURES.glob("*.svg")), figure_captions()), encoding="utf-8")
    needed, missing = {}, []
    for path in paths:
        page, pictures = lesson_page(json.loads(path.read_text(encoding="utf-8")), path.stem)
        (stage_dir / "lessons" / path.name).write_text(json.dumps(page, indent=1,
                                                                  ensure_ascii=False))
        needed[path.stem] = pictures
        missing += [p for p in pictures if not (SITE / "panels" / p).is_file()]
    if missing:
        raise SiteError(f"no picture of {len(missing)} panel(s) in site/panels/ "
                        f"({', '.join(missing)}): take them with `make site-pictures`",
                        missing)
    return needed


def build(stage_dir: Path, out: Path) -> int:
    """Run Sphinx (HTML builder, warnings as errors) from ``stage_dir`` into ``out``;
    returns Sphinx's exit status."""
    from sphinx.cmd.build import build_main

    from primer.loop.schema_safety import import_jsonschema

    import_jsonschema()  # before myst-nb imports nbformat (see primer.course.pytest_plugin)
    if out.exists():
        shutil.rmtree(out)
    return build_main(["-b", "html", "-W", "--keep-going", "-q", "-d",
                       str(stage_dir.parent / "site-doctrees"), str(stage_dir), str(out)])


# ================================================================ checks

@dataclass
class Page:
    """What the checks need from one HTML page."""

    ids: set[str] = field(default_factory=set)
    links: list[str] = field(default_factory=list)      # <a href>
    loads: list[str] = field(default_factory=list)      # script src, link href, img src
    images: list[tuple[str, str]] = field(default_factory=list)  # img (src, alt)
    details: list[bool] = field(default_factory=list)   # one per <details>: is it open?


class _Reader(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.page.ids.add(a["id"])
        if tag == "a" and "name" in a:
            self.page.ids.add(a["name"])
        if tag == "a" and "href" in a:
            self.page.links.append(a["href"])
        elif tag in ("script", "img") and "src" in a:
            self.page.loads.append(a["src"])
            if tag == "img":
                self.page.images.append((a["src"], a.get("alt", "")))
        elif tag == "link" and "href" in a:
            self.page.loads.append(a["href"])
        if tag == "details":
            self.page.details.append("open" in a)


def read_page(path: Path) -> Page:
    """Parse one built HTML page."""
    reader = _Reader()
    reader.feed(path.read_text(encoding="utf-8"))
    return reader.page


def _external(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.scheme or parts.netloc) and parts.scheme not in ("", "file")


def check(out: Path, notebooks: list[Path] | None = None,
          figures: list[Path] | None = None) -> list[str]:
    """The problems of the built site in ``out`` (an empty list when it passes), against the
    lessons and figures (default: notebooks/ and figures/)."""
    notebooks = lessons() if notebooks is None else notebooks
    figures = sorted(FIGURES.glob("*.svg")) if figures is None else figures
    problems: list[str] = []
    # _static/ holds the theme's template fragments, not pages
    pages = {p: read_page(p) for p in out.rglob("*.html")
             if "_static" not in p.relative_to(out).parts}
    if not (out / "index.html").exists():
        return [f"no home page: {out / 'index.html'}"]
    for path, page in pages.items():
        where = path.relative_to(out)
        for url in page.loads:
            if _external(url):
                problems.append(f"{where} loads {url} from another host (the site must work "
                                f"offline)")
        for url in [*page.links, *page.loads]:
            parts = urlsplit(url)
            if _external(url) or parts.scheme in ("mailto", "javascript"):
                continue
            target = (path if not parts.path else
                      (path.parent / unquote(parts.path)).resolve())
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                problems.append(f"{where}: broken link {url}")
            elif parts.fragment and target.suffix == ".html":
                ids = pages.get(target, Page()).ids if target in pages else read_page(target).ids
                if parts.fragment not in ids:
                    problems.append(f"{where}: no id {parts.fragment!r} in {url}")
    for nb_path in notebooks:
        html_path = out / "lessons" / f"{nb_path.stem}.html"
        if html_path not in pages:
            problems.append(f"no page for {nb_path.name} ({html_path.relative_to(out)})")
            continue
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
        page = pages[html_path]
        widgets = sum(WIDGET_MIME in o.get("data", {}) for c in nb.get("cells", [])
                      if not is_quiz(c) for o in c.get("outputs", []))
        pictures = [src for src, alt in page.images if alt == PANEL_ALT]
        if len(pictures) != widgets:
            problems.append(f"{html_path.name}: {len(pictures)} panel picture(s) for "
                            f"{widgets} widget output(s)")
        folded = sum(len(_DETAILS.findall(_source(c))) for c in nb.get("cells", [])
                     if c.get("cell_type") == "markdown") + sum(
            len(_DETAILS.findall("".join(o.get("data", {}).get("text/markdown", ""))))
            for c in nb.get("cells", []) if c.get("cell_type") == "code"
            for o in c.get("outputs", []))
        if len(page.details) != folded or any(page.details):
            problems.append(f"{html_path.name}: {len(page.details)} <details> "
                            f"({sum(page.details)} open) for {folded} in the notebook")
    figures_html = out / "figures.html"
    shown = {} if figures_html not in pages else {
        Path(unquote(urlsplit(u).path)).name: (figures_html.parent / unquote(urlsplit(u).path))
        for u, _ in pages[figures_html].images}
    for svg in figures:
        target = shown.get(svg.name)
        if target is None or not target.exists():
            problems.append(f"figure {svg.name} is not on the figures page")
        elif target.read_bytes() != svg.read_bytes():
            problems.append(f"figure {svg.name} on the site differs from figures/{svg.name}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Stage, build and check (or only check); returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="default: build/site")
    parser.add_argument("--check-only", action="store_true",
                        help="check an existing build without building")
    args = parser.parse_args(argv)
    if not args.check_only:
        try:
            stage()
        except SiteError as e:
            print(f"site: {e}", file=sys.stderr)
            return 2
        status = build(STAGE, args.out)
        if status:
            print(f"site: Sphinx failed (exit status {status}); see its messages above",
                  file=sys.stderr)
            return 1
    problems = check(args.out)
    for problem in problems:
        print(f"site: {problem}", file=sys.stderr)
    if problems:
        return 1
    n = len(lessons())
    print(f"site: {n} lesson pages, the home page and the figures page in {args.out}; "
          f"links, pictures and figures checked (open {args.out / 'index.html'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
