"""Check the exit explorer in a real browser: JupyterLab + headless Chromium via Playwright.

Usage: python scripts/browser_check.py [--notebook 05_exits_and_the_production_loop.ipynb]
                                       [--chromium /usr/bin/chromium] [--out browser-artifacts]

Steps: copy the lesson into a scratch folder (so JupyterLab never saves over the committed
notebook), start JupyterLab from this interpreter's environment on a free localhost port with
a random token, open the lesson in headless Chromium (Debian's ``chromium``; Playwright only
drives it, nothing is downloaded), run all cells, wait for the explorer, then pick the
"wanders" behaviour in its dropdown and lower its max_steps slider to 3, reading the stop
cause the page shows after each change (the ``data-stop-cause`` attribute of the element
with class ``primer-stop-cause``). Screenshots go to ``browser-artifacts/`` (git-ignored).
The server and its kernels are always stopped, whatever happens.

Exit status 0 when every expected stop cause appeared; 1 otherwise (the reason is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
#: (what the check does, expected stop cause); the panel starts at its defaults.
EXPECTED = [("after Run All (panel at its defaults)", "end_turn"),
            ("behaviour -> wanders", "token_budget"),
            ("max_steps -> 3", "max_steps")]


class CheckFailed(RuntimeError):
    """The page did not show what the check expected."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(root_dir: Path, port: int, token: str, log: Path,
              home: Path) -> subprocess.Popen[bytes]:
    """Start JupyterLab in its own process group; returns the process."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "JUPYTER_PREFER_ENV_PATH": "1", "JUPYTER_CONFIG_DIR": str(home / "config"),
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


def api(port: int, token: str, path: str, method: str = "GET") -> object:
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


def stop_lab(proc: subprocess.Popen[bytes], port: int, token: str) -> None:
    """Shut down the server's kernels, then the server's process group (TERM, then KILL)."""
    try:
        for kernel in api(port, token, "/api/kernels") or []:  # type: ignore[union-attr]
            api(port, token, f"/api/kernels/{kernel['id']}", method="DELETE")
    except OSError:
        pass
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def shown_cause(page) -> str | None:  # noqa: ANN001 - a playwright Page
    """The stop cause the explorer on ``page`` shows (``data-stop-cause``), or None."""
    el = page.query_selector(".primer-explorer .primer-stop-cause")
    return el.get_attribute("data-stop-cause") if el else None


def wait_for_cause(page, expected: str, what: str, timeout_s: float = 30) -> None:  # noqa: ANN001
    """Wait until the page shows ``expected``; ``CheckFailed`` naming what it shows instead."""
    deadline = time.monotonic() + timeout_s
    seen = None
    while time.monotonic() < deadline:
        seen = shown_cause(page)
        if seen == expected:
            print(f"  {what:40} stop cause shown: {seen}")
            return
        page.wait_for_timeout(250)
    raise CheckFailed(f"{what}: expected the page to show {expected!r}, it shows {seen!r}")


def set_slider(page, css: str, value: int) -> None:  # noqa: ANN001
    """Type ``value`` into an ipywidgets slider's editable readout and press Enter."""
    readout = page.locator(f"{css} .widget-readout")
    readout.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(str(value))
    page.keyboard.press("Enter")


def drive(page, url: str, out: Path) -> None:  # noqa: ANN001
    """Open the lesson, run all cells, move the controls, check the stop causes, screenshot."""
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_function("window.jupyterapp && window.jupyterapp.shell.currentWidget "
                           "&& window.jupyterapp.shell.currentWidget.sessionContext",
                           timeout=90_000)
    page.evaluate("""async () => {
        const ctx = window.jupyterapp.shell.currentWidget.sessionContext;
        await ctx.ready;
        while (!ctx.session || !ctx.session.kernel || ctx.session.kernel.status !== 'idle') {
            await new Promise(r => setTimeout(r, 200));
        }
    }""")
    print("  kernel idle; Run All Cells")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_selector(".primer-explorer .primer-stop-cause", timeout=120_000)
    page.evaluate("""async () => {   // wait until no cell is still queued or running
        const nb = window.jupyterapp.shell.currentWidget.content;
        const busy = () => nb.widgets.some(c => c.model.type === 'code' &&
                                            (c.promptNode.textContent || '').includes('*'));
        const t0 = Date.now();
        while (busy() && Date.now() - t0 < 120000) await new Promise(r => setTimeout(r, 250));
    }""")
    errors = page.locator(".jp-OutputArea-output[data-mime-type="
                          "'application/vnd.jupyter.stderr']").count()
    if errors:
        raise CheckFailed(f"{errors} output(s) on stderr (an error or a warning) after Run All")
    explorer = page.locator(".primer-explorer").first
    explorer.scroll_into_view_if_needed()
    wait_for_cause(page, EXPECTED[0][1], EXPECTED[0][0])

    page.locator(".primer-explorer .primer-control-behaviour select").select_option(
        label="wanders")
    wait_for_cause(page, EXPECTED[1][1], EXPECTED[1][0])

    set_slider(page, ".primer-explorer .primer-control-max-steps", 3)
    wait_for_cause(page, EXPECTED[2][1], EXPECTED[2][0])

    explorer.scroll_into_view_if_needed()
    explorer.screenshot(path=str(out / "exit_explorer.png"))
    page.screenshot(path=str(out / "lab_page.png"))
    print(f"  screenshots: {out / 'exit_explorer.png'}, {out / 'lab_page.png'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebook", default="05_exits_and_the_production_loop.ipynb")
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

    args.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="primer-browser-"))
    notebooks = scratch / "notebooks"
    notebooks.mkdir()
    shutil.copy(ROOT / "notebooks" / args.notebook, notebooks / args.notebook)
    port, token = free_port(), os.urandom(16).hex()
    log = args.out / "jupyterlab.log"
    print(f"JupyterLab on 127.0.0.1:{port} (log: {log})")
    proc = start_lab(notebooks, port, token, log, scratch)
    try:
        wait_for_server(proc, port, token)
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                str(scratch / "chromium-profile"), executable_path=args.chromium,
                headless=True, args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000})
            try:
                page = context.new_page()
                try:
                    drive(page, f"http://127.0.0.1:{port}/lab/tree/{args.notebook}"
                                f"?token={token}", args.out)
                except Exception:
                    page.screenshot(path=str(args.out / "failure.png"))
                    raise
            finally:
                context.close()
    except (CheckFailed, Exception) as e:  # noqa: BLE001 - report any failure, then clean up
        print(f"FAILED: {type(e).__name__}: {e}")
        return 1
    finally:
        stop_lab(proc, port, token)
        shutil.rmtree(scratch, ignore_errors=True)
    print("browser check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
