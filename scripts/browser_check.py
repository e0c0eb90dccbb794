#!/usr/bin/env python3
"""Check every interactive panel in a real browser, and the built website: JupyterLab and
a static server, driven in headless Chromium by Playwright.

Usage: scripts/browser_check.py [--lesson 05 ...] [--site build/site] [--no-lessons]
                                [--update-site-pictures] [--chromium /usr/bin/chromium]
                                [--out browser-artifacts]

Lessons: every notebooks/NN_*.ipynb whose committed outputs hold a widget (the
``application/vnd.jupyter.widget-view+json`` output a cell that shows a panel leaves), so a
new lesson with a panel joins by itself; ``--lesson`` picks some. The lessons are copied
into a scratch folder (JupyterLab never saves over the committed notebooks) and opened one
after another in one JupyterLab started on a free localhost port with a random token and
the course's settings (jupyter_config/). Each lesson runs cell by cell, as a learner runs
it; right after a cell shows a panel, before the next cell moves it from code, the check:

1. screenshots the panel as it first appears (``panels/<lesson>-<k>.png``; ``k`` counts the
   lesson's panels from 0 in cell order; ``--update-site-pictures`` copies them to
   ``site/panels/``, the pictures the website shows);
2. moves each kind of control the panel has, one control of a kind after another until one
   changes what the panel shows (the text of its HTML parts, read from the page, not from
   the kernel): a slider to its other end, a dropdown to its next option, an unselected
   toggle button, a checkbox, and a button; then moves it back, and the panel must change
   again. Text boxes are typed into before the button is clicked, and the typed text must
   then appear. A kind no control of which changes the panel fails the check. Each kind
   gets a screenshot;
3. for lesson 05's exit explorer, back at its defaults, picks behaviours and moves
   max_steps as :data:`EXPECTED` says and reads the stop cause the page shows
   (``data-stop-cause``).

A cell that shows an error or writes to stderr fails the check, as does JupyterLab's news
prompt on the page. With ``--site DIR`` it then serves the built website (``make site``)
from a local port and checks the home page links to every lesson and that a lesson page
shows its table and a figure (screenshots of both). Everything goes to ``browser-artifacts/``
(git-ignored). The servers and kernels are always stopped, whatever happens.

Exit status 0 when every check passed; 1 otherwise (the reason is printed).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SITE_PICTURES = ROOT / "site" / "panels"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
#: Lesson 05's exit explorer, from its defaults: (what the check does, expected stop cause).
EXPECTED = [("panel at its defaults", "end_turn"),
            ("behaviour -> wanders", "token_budget"),
            ("max_steps -> 3", "max_steps")]
#: The order in which kinds of control are moved; text boxes go with the button.
KINDS = ("dropdown", "toggle", "checkbox", "slider", "button")
#: CSS selectors of the controls of each kind, inside one panel (ipywidgets 8 classes).
CONTROL_CSS = {
    "dropdown": ".widget-dropdown select",
    "toggle": ".widget-toggle-buttons",
    "checkbox": ".widget-checkbox input[type=checkbox]",
    "slider": ".widget-slider",
    "button": "button.widget-button",
    "text": ".widget-text input",
}
#: What a text box gets before the panel's button is clicked; it must then show.
TYPED = "typed in the browser check"
CELL_TIMEOUT_MS = 180_000
CHANGE_TIMEOUT_S = 20.0


class CheckFailed(RuntimeError):
    """The page did not show what the check expected."""


# ================================================================ which lessons

def is_quiz(cell: dict[str, Any]) -> bool:
    """Whether a notebook cell shows the lesson's "Test yourself" quiz (tagged ``quiz``)."""
    return "quiz" in cell.get("metadata", {}).get("tags", [])


def widget_count(path: Path) -> int:
    """How many widget outputs the committed notebook at ``path`` holds (0 when none), the
    quiz at the end of every lesson not counted (:func:`check_quiz` covers it once)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return sum(WIDGET_MIME in out.get("data", {})
               for cell in nb.get("cells", [])
               if cell.get("cell_type") == "code" and not is_quiz(cell)
               for out in cell.get("outputs", []))


def quiz_cells(path: Path) -> set[int]:
    """Indexes (all cells counted) of the notebook's quiz cells."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return {i for i, cell in enumerate(nb.get("cells", [])) if is_quiz(cell)}


def all_lessons(folder: Path = NOTEBOOKS) -> list[Path]:
    """The lessons in ``folder``, ``NN_name.ipynb`` and a split lesson's ``NNb_name.ipynb``,
    in lesson order."""
    return [p for p in sorted(folder.glob("[0-9][0-9]*_*.ipynb"))
            if re.fullmatch(r"\d\d[a-z]?", p.name.split("_")[0])]


def widget_lessons(folder: Path = NOTEBOOKS) -> list[Path]:
    """The lessons in ``folder`` that show at least one panel, in lesson order."""
    return [p for p in all_lessons(folder) if widget_count(p)]


def pick_lessons(args: list[str], folder: Path = NOTEBOOKS) -> list[Path]:
    """The widget lessons named by number or file name in ``args`` (all when empty);
    ``CheckFailed`` for a name that is not a lesson with a panel."""
    lessons = widget_lessons(folder)
    if not args:
        return lessons
    picked = []
    for arg in args:
        number = re.fullmatch(r"(\d+)([a-z]?)", arg)
        match = [p for p in lessons if p.name == arg or (
            number and p.name.split("_")[0] == f"{int(number[1]):02d}{number[2]}")]
        if not match:
            names = ", ".join(p.name.split("_")[0] for p in lessons)
            raise CheckFailed(f"no lesson with a panel named {arg!r}; lessons with panels: "
                              f"{names}")
        picked.extend(match)
    return picked


# ================================================================ servers

def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(root_dir: Path, port: int, token: str, log: Path,
              home: Path) -> subprocess.Popen[bytes]:
    """Start JupyterLab in its own process group with the course's settings; returns it.

    ``home`` holds a private config, runtime, workspaces and settings folder, so nothing of
    the user's JupyterLab setup (or state from an earlier check) applies.
    """
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "JUPYTER_PREFER_ENV_PATH": "1", "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTER_CONFIG_PATH": str(ROOT / "jupyter_config"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "PYTHONHASHSEED": "0"}
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser",
           "--ServerApp.open_browser=False", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--ServerApp.token={token}", f"--ServerApp.root_dir={root_dir}",
           "--LabApp.expose_app_in_browser=True",
           f"--LabApp.workspaces_dir={home / 'workspaces'}",
           f"--LabApp.user_settings_dir={home / 'settings'}"]
    if hasattr(os, "getuid") and os.getuid() == 0:
        cmd.append("--allow-root")
    return subprocess.Popen(cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def api(port: int, token: str, path: str, method: str = "GET") -> Any:
    """Call the Jupyter server's REST API; returns the decoded JSON (or None)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        body = r.read()
    return json.loads(body) if body else None


def wait_for_server(proc: subprocess.Popen[bytes], port: int, token: str,
                    timeout_s: float = 90) -> None:
    """Poll ``/api/status`` until the server answers; ``CheckFailed`` if it exits or times out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise CheckFailed(f"JupyterLab exited with status {proc.returncode} at startup")
        try:
            api(port, token, "/api/status")
            return
        except OSError:
            time.sleep(0.5)
    raise CheckFailed(f"JupyterLab did not answer on port {port} within {timeout_s:g} s")


def shut_down_kernels(port: int, token: str) -> None:
    """Stop every kernel the server runs (errors ignored: the server may be gone)."""
    try:
        for kernel in api(port, token, "/api/kernels") or []:
            api(port, token, f"/api/kernels/{kernel['id']}", method="DELETE")
    except OSError:
        pass


def stop_lab(proc: subprocess.Popen[bytes], port: int, token: str) -> None:
    """Shut down the server's kernels, then the server's process group (TERM, then KILL)."""
    shut_down_kernels(port, token)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@contextmanager
def static_server(folder: Path) -> Iterator[str]:
    """Serve ``folder`` over HTTP on a free localhost port; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


# ================================================================ driving a lesson

def open_notebook(page: Any, url: str, name: str) -> None:
    """Open notebook ``name`` in JupyterLab at ``url``, wait until it is the current tab and
    its kernel is idle, then clear every output."""
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_function("""(name) => { const w = window.jupyterapp
        && window.jupyterapp.shell.currentWidget;
        return w && w.sessionContext && w.context && w.context.path === name; }""",
                           arg=name, timeout=90_000)
    page.evaluate("""async () => {
        const ctx = window.jupyterapp.shell.currentWidget.sessionContext;
        await ctx.ready;
        while (!ctx.session || !ctx.session.kernel || ctx.session.kernel.status !== 'idle') {
            await new Promise(r => setTimeout(r, 200));
        }
        await window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs');
    }""")


def code_cells(page: Any) -> list[int]:
    """Indexes (in the notebook, all cells counted) of the open notebook's code cells."""
    return page.evaluate("""() => window.jupyterapp.shell.currentWidget.content.widgets
        .map((c, i) => [c.model.type, i]).filter(([t]) => t === 'code').map(([, i]) => i)""")


def run_cell(page: Any, index: int) -> None:
    """Run cell ``index`` of the open notebook and wait for it to finish; ``CheckFailed``
    when it shows an error or writes to stderr."""
    ok = page.evaluate("""async (i) => {
        const panel = window.jupyterapp.shell.currentWidget, nb = panel.content;
        nb.activeCellIndex = i;
        nb.deselectAll();
        nb.widgets[i].node.setAttribute('data-check-cell', String(i));
        return await window.jupyterapp.commands.execute('notebook:run-cell');
    }""", index)
    cell = page.locator(f"[data-check-cell='{index}']")
    errors = cell.locator(".jp-OutputArea-output[data-mime-type="
                          "'application/vnd.jupyter.stderr']")
    if ok is False or errors.count():
        text = errors.first.inner_text()[:600] if errors.count() else "(no output)"
        raise CheckFailed(f"cell {index} failed or wrote to stderr:\n{text}")


def panels_of(page: Any, index: int) -> list[Any]:
    """Locators of the widget outputs (panels) cell ``index`` shows: the root widget element
    of each (JupyterLab gives a widget output no mime-type attribute)."""
    outputs = page.locator(f"[data-check-cell='{index}'] .jp-OutputArea-output > .jupyter-widgets")
    return [outputs.nth(k) for k in range(outputs.count())]


def shown_text(panel: Any) -> str:
    """What the panel shows, read from the page: the text of its HTML widgets."""
    return panel.evaluate("""(el) => Array.from(el.querySelectorAll('.widget-html-content'))
        .map(e => e.innerText).join('\\n')""")


def wait_for_change(panel: Any, before: str, timeout_s: float = CHANGE_TIMEOUT_S) -> str | None:
    """The panel's new text once it differs from ``before``; None after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = shown_text(panel)
        if now != before and now.strip():
            return now
        panel.page.wait_for_timeout(200)
    return None


def shown_cause(panel: Any) -> str | None:
    """The stop cause the exit explorer in ``panel`` shows (``data-stop-cause``), or None."""
    el = panel.locator(".primer-stop-cause")
    return el.first.get_attribute("data-stop-cause") if el.count() else None


def wait_for_cause(panel: Any, expected: str, what: str, timeout_s: float = 30) -> None:
    """Wait until the panel shows ``expected``; ``CheckFailed`` naming what it shows instead."""
    deadline = time.monotonic() + timeout_s
    seen = None
    while time.monotonic() < deadline:
        seen = shown_cause(panel)
        if seen == expected:
            print(f"    {what:36} stop cause shown: {seen}")
            return
        panel.page.wait_for_timeout(250)
    raise CheckFailed(f"{what}: expected the page to show {expected!r}, it shows {seen!r}")


def set_slider(slider: Any, value: str) -> None:
    """Type ``value`` into an ipywidgets slider's editable readout and press Enter."""
    slider.locator(".widget-readout").click()
    slider.page.keyboard.press("Control+A")
    slider.page.keyboard.type(value)
    slider.page.keyboard.press("Enter")


def exit_explorer_script(panel: Any) -> None:
    """Lesson 05: the stop causes of :data:`EXPECTED`, from the panel's defaults."""
    wait_for_cause(panel, EXPECTED[0][1], EXPECTED[0][0])
    panel.locator(".primer-control-behaviour select").select_option(label="wanders")
    wait_for_cause(panel, EXPECTED[1][1], EXPECTED[1][0])
    set_slider(panel.locator(".primer-control-max-steps"), "3")
    wait_for_cause(panel, EXPECTED[2][1], EXPECTED[2][0])


def move(kind: str, control: Any) -> tuple[str, Callable[[], None] | None]:
    """Move one control of ``kind``; returns what was done (for the log) and how to move it
    back (None for a button: a click cannot be taken back)."""
    if kind == "dropdown":
        index, n = control.evaluate("(s) => [s.selectedIndex, s.options.length]")
        control.select_option(index=(index + 1) % n)
        return (f"option {(index + 1) % n + 1} of {n}",
                lambda: control.select_option(index=index))
    if kind == "toggle":
        active = control.locator("button.mod-active").first
        was = active.inner_text() if active.count() else None
        button = control.locator("button:not(.mod-active)").first
        label = button.inner_text()
        button.click()
        back = control.locator("button", has_text=was).first if was else None
        return f"'{label}'", (back.click if back is not None else None)
    if kind == "checkbox":
        control.click()
        return "clicked", control.click
    if kind == "slider":
        handle = control.locator(".noUi-handle").first
        low, high, now = (float(handle.get_attribute(a)) for a in
                          ("aria-valuemin", "aria-valuemax", "aria-valuenow"))
        target = high if now < high else low
        set_slider(control, f"{target:g}")
        return f"to {target:g}", lambda: set_slider(control, f"{now:g}")
    label = control.inner_text().strip()
    control.click()
    return f"'{label}' clicked", None


def check_panel(panel: Any, name: str, out: Path) -> list[str]:
    """Move each kind of control of ``panel`` and back; returns the kinds moved.

    For each kind, controls are tried in page order until one changes what the panel shows;
    then it is moved back and the panel must change again (so each kind starts from the
    panel's first state). ``CheckFailed`` when no control of a kind changes the panel.
    Buttons are all clicked, in order (:func:`check_buttons`), after text boxes are typed
    into. Screenshots ``name``-<kind>.png, taken after the move.
    """
    moved = []
    texts = panel.locator(CONTROL_CSS["text"])
    for kind in KINDS:
        controls = panel.locator(CONTROL_CSS[kind])
        if not controls.count():
            continue
        if kind == "button":
            for t in range(texts.count()):
                texts.nth(t).fill(TYPED)
        if kind == "button":
            check_buttons(panel, controls, name, out, typed=bool(texts.count()))
            moved.append(kind)
            continue
        tried = []
        for c in range(controls.count()):
            before = shown_text(panel)
            what, undo = move(kind, controls.nth(c))
            tried.append(what)
            after = wait_for_change(panel, before)
            if after is None:
                if undo is not None:
                    undo()
                    panel.page.wait_for_timeout(300)
                continue
            panel.screenshot(path=str(out / f"{name}-{kind}.png"))
            if undo is not None:
                undo()
                if wait_for_change(panel, after) is None:
                    raise CheckFailed(f"{name}: moving the {kind} back ({what}) did not change "
                                      f"the panel again")
            print(f"    {kind:9} {what:32} the panel changed, and changed back")
            moved.append(kind)
            break
        else:
            raise CheckFailed(f"{name}: no {kind} changed what the panel shows "
                              f"(tried: {'; '.join(tried)})")
    if texts.count() and "button" not in moved:
        raise CheckFailed(f"{name}: it has a text box but no button to send it with")
    return moved


def check_buttons(panel: Any, buttons: Any, name: str, out: Path, typed: bool) -> None:
    """Click every button of ``panel`` in turn; each click must change what it shows, and
    with ``typed`` the text typed into its text boxes must show after the first click.
    Screenshots ``name``-button-<i>.png after each click."""
    for b in range(buttons.count()):
        before = shown_text(panel)
        what, _ = move("button", buttons.nth(b))
        after = wait_for_change(panel, before)
        if after is None:
            raise CheckFailed(f"{name}: clicking {what.removesuffix(' clicked')} did not change "
                              f"what the panel shows")
        if typed and b == 0 and TYPED not in after:
            raise CheckFailed(f"{name}: after typing in its text box and clicking, the panel "
                              f"does not show the typed text; it shows:\n{after}")
        panel.screenshot(path=str(out / f"{name}-button-{b}.png"))
        status = after.strip().splitlines()[-1][:70]
        print(f"    button    {what:32} the panel shows: {status}")


def check_quiz(panel: Any, name: str, out: Path) -> None:
    """The quiz's first question: pick its first choice, press Check, and the verdict with
    its explanation must appear."""
    first = panel.locator(".widget-vbox").first
    first.locator("input[type=radio]").first.check()
    before = shown_text(panel)
    first.locator("button").first.click()
    after = wait_for_change(panel, before)
    if after is None or not any(v in after for v in ("Right:", "Not quite:")):
        raise CheckFailed(f"{name}: the quiz showed no verdict after Check")
    panel.screenshot(path=str(out / f"{name}-quiz.png"))
    verdict = next(v for v in ("Right:", "Not quite:") if v in after)
    print(f"    quiz      choice (a), Check            the verdict shows: {verdict} ...")


def check_lesson(page: Any, url: str, lesson: str, out: Path) -> list[Path]:
    """Run one lesson cell by cell and check each panel as it appears; returns the pictures
    of the panels as they first appeared. The quiz at the end is checked once, in lesson
    05 (:func:`check_quiz`), and is not one of the lesson's panels."""
    quizzes = quiz_cells(NOTEBOOKS / lesson)
    open_notebook(page, url, lesson)
    if page.get_by_text("official Jupyter news").count():
        raise CheckFailed("JupyterLab's news prompt is on the page (jupyter_config/ not used?)")
    stem = lesson.removesuffix(".ipynb")
    pictures = []
    for index in code_cells(page):
        run_cell(page, index)
        if index in quizzes:
            if lesson.startswith("05_"):
                for panel in panels_of(page, index):
                    check_quiz(panel, f"{stem}-quiz", out)
            continue
        for panel in panels_of(page, index):
            name = f"{stem}-{len(pictures)}"
            panel.scroll_into_view_if_needed()
            page.wait_for_timeout(300)
            picture = out / "panels" / f"{name}.png"
            panel.screenshot(path=str(picture))
            pictures.append(picture)
            print(f"  cell {index}: panel {name}")
            check_panel(panel, name, out)
            if lesson.startswith("05_") and panel.locator(".primer-stop-cause").count():
                exit_explorer_script(panel)
                panel.screenshot(path=str(out / f"{name}-stop-causes.png"))
    page.screenshot(path=str(out / f"{stem}-page.png"))
    return pictures


# ================================================================ the website

def check_site(page: Any, site: Path, lessons: list[Path], out: Path) -> None:
    """The built website: the home page links to a page per lesson, every one loads with all
    its pictures, and a lesson page shows a table and a figure. Screenshots: the home page,
    that lesson's table and the page at its figure, and the first panel picture."""
    if not (site / "index.html").exists():
        raise CheckFailed(f"no website in {site}: run `make site` first")
    with static_server(site) as base:
        page.goto(f"{base}/index.html", wait_until="load")
        links = page.evaluate("""() => Array.from(document.querySelectorAll(
            'table a[href]')).map(a => a.getAttribute('href'))""")
        for lesson in lessons:
            href = f"lessons/{lesson.stem}.html"
            if href not in links:
                raise CheckFailed(f"the home page's lesson table has no link to {href}")
        page.screenshot(path=str(out / "site-home.png"), full_page=True)
        print(f"  home page: lesson table links {len(lessons)} lessons")
        shown = panel_shown = None
        for lesson in lessons:
            page.goto(f"{base}/lessons/{lesson.stem}.html", wait_until="load")
            if page.locator("h1").count() == 0:
                raise CheckFailed(f"{lesson.stem}.html has no title")
            broken = page.evaluate("""() => Array.from(document.images)
                .filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)""")
            if broken:
                raise CheckFailed(f"{lesson.stem}.html: pictures that do not load: {broken}")
            table = page.locator("article table").first
            figure = page.locator("article img").first
            if shown is None and table.count() and figure.count() and table.is_visible():
                table.screenshot(path=str(out / f"site-{lesson.stem}-table.png"))
                figure.scroll_into_view_if_needed()
                page.screenshot(path=str(out / f"site-{lesson.stem}.png"))
                shown = lesson.stem
            panel = page.locator("article img[alt^='The interactive panel']").first
            if panel_shown is None and panel.count():
                panel.scroll_into_view_if_needed()
                page.screenshot(path=str(out / f"site-{lesson.stem}-panel.png"))
                panel_shown = lesson.stem
        if shown is None:
            raise CheckFailed("no lesson page shows both a table and a figure")
        print(f"  every lesson page loads with its pictures; {shown} shows a table and a "
              f"figure")


# ================================================================ main

def _leave(signum: int, frame: object) -> None:
    """``SIGTERM`` or ``SIGHUP``: leave through the clean-up, which stops the servers."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Run the checks the arguments ask for; returns the exit status."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _leave)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", action="append", default=[],
                        help="a lesson with a panel, by number or file name (repeatable; "
                             "default: every one)")
    parser.add_argument("--no-lessons", action="store_true", help="check only the website")
    parser.add_argument("--site", type=Path, help="the built website to check (make site)")
    parser.add_argument("--update-site-pictures", action="store_true",
                        help=f"copy the panels' first pictures to {SITE_PICTURES}")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--out", type=Path, default=ROOT / "browser-artifacts")
    args = parser.parse_args(argv)
    if not Path(args.chromium).exists():
        print(f"no browser at {args.chromium}; on Debian: apt-get install -y chromium")
        return 1
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("playwright is missing: pip install playwright (no browser download needed)")
        return 1
    try:
        lessons = [] if args.no_lessons else pick_lessons(args.lesson)
    except CheckFailed as e:
        print(f"FAILED: {e}")
        return 1

    (args.out / "panels").mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="primer-browser-"))
    proc = port = token = None
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                str(scratch / "chromium-profile"), executable_path=args.chromium,
                headless=True, args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            try:
                if lessons:
                    notebooks = scratch / "notebooks"
                    notebooks.mkdir()
                    for lesson in lessons:
                        shutil.copy(lesson, notebooks / lesson.name)
                    port, token = free_port(), os.urandom(16).hex()
                    log = args.out / "jupyterlab.log"
                    print(f"JupyterLab on 127.0.0.1:{port} (log: {log}); lessons with "
                          f"panels: {', '.join(p.name.split('_')[0] for p in lessons)}")
                    proc = start_lab(notebooks, port, token, log, scratch)
                    wait_for_server(proc, port, token)
                    pictures = []
                    for lesson in lessons:
                        print(f"{lesson.name}")
                        # a workspace of its own, so no tab of an earlier lesson is restored
                        pictures += check_lesson(
                            page, f"http://127.0.0.1:{port}/lab/workspaces/check-"
                                  f"{lesson.name.split('_')[0]}/tree/{lesson.name}?token={token}",
                            lesson.name, args.out)
                        shut_down_kernels(port, token)
                    if args.update_site_pictures:
                        SITE_PICTURES.mkdir(parents=True, exist_ok=True)
                        for picture in pictures:
                            shutil.copy(picture, SITE_PICTURES / picture.name)
                        print(f"copied {len(pictures)} panel pictures to {SITE_PICTURES}")
                if args.site:
                    print(f"website in {args.site}")
                    check_site(page, args.site, all_lessons(),
                               args.out)
            except Exception:
                page.screenshot(path=str(args.out / "failure.png"))
                raise
            finally:
                context.close()
    except Exception as e:  # noqa: BLE001 - report any failure in one place, then clean up
        print(f"FAILED: {type(e).__name__}: {e}")
        return 1
    finally:
        if proc is not None:
            stop_lab(proc, port, token)
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"browser check passed; screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
