"""The coding round's checker with the learner's file run in a child process, judged outside it.

:func:`check_loop_file` judges a learner's file as :func:`primer.course.exercises.check_loop`
judges a function, with the file imported and run in a fresh interpreter
(:mod:`primer.course.loop_child`, started ``python -I -B``, in a process group of its own). The
child's ``model`` and ``tools`` are messengers: each call is a request on a pipe, and this
process serves the scripted model, runs the tools, and judges the run from what the model
was sent. Nothing the child sends is a verdict, and its stdout and stderr are only kept (cut
at :data:`OUTPUT_CAP_BYTES`), never read for one. So a file that patches the checker at
import, ends the process, spins, swallows every exception, floods its output, crashes or
writes on the pipes itself can only fail its own behaviours: each such run ends with one
line saying how (``timed out after 5 s without calling the model``, ``the process exited
with code 0 before the loop returned``).

Each behaviour has a wall-clock limit (``time_limit_s``; the time this process spends on a
request is not counted). One child serves the battery's behaviours in turn while they end
cleanly (returned or raised), as the in-process checker calls one function; a run that ends
any other way (a time-out, an exit, a rule the model stops the run for) has the child's
whole process group killed, and the next behaviour starts a fresh child.

It needs a POSIX system (Linux, macOS; on Windows, WSL): process groups and pipes passed by
number. What this does not stop: the child runs as the same user, so code that attacks this process
through the operating system (signals to the parent, ``/proc``, ``ptrace``) or starts a
process in a session of its own is out of reach of a process-group kill. It guards a score
against a learner's loop, not a machine against malware.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import primer
from primer.course.checking import CheckResult, short
from primer.course.exercises import (
    BEHAVIOURS,
    TASK,
    Behaviour,
    LoopReport,
    ModelCallError,
    Run,
    _CheckStopped,
    run_battery,
    verdict,
    watched,
)
from primer.course.loop_child import OPAQUE, LoadError

#: The wall-clock limit of one behaviour's run, in seconds.
DEFAULT_TIME_LIMIT_S = 5.0

#: The wall-clock limit of starting the child and importing the learner's file, in seconds
#: (an interpreter start, the checker's small child module, and whatever the file imports).
DEFAULT_IMPORT_LIMIT_S = 10.0

#: What the child printed (stdout and stderr) that is kept per behaviour; the rest is
#: read and dropped, so a flood cannot block the child or fill memory.
OUTPUT_CAP_BYTES = 16_384

#: The largest request the child may send (one JSON line), in bytes: far above any the
#: battery needs (its longest history is a few kilobytes), and small enough that checking
#: one costs this process little (its time on a request is not counted against the loop).
MESSAGE_CAP_BYTES = 2**20

#: The interpreter's code that starts the child: the course's package first on the path
#: (``-I`` leaves out the current directory and ``PYTHON*`` variables), then its entry point.
BOOT = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
        "from primer.course.loop_child import main; main(sys.argv[1:])")

__all__ = ["DEFAULT_TIME_LIMIT_S", "FileReport", "LoadError", "check_loop_file"]


@dataclass(frozen=True)
class Opaque:
    """A value the child could not send as JSON (a set, an object), named by its type."""

    type_name: str

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"

    __str__ = __repr__


def _decode(line: bytes) -> Any:
    def hook(d: dict[str, Any]) -> Any:
        if len(d) == 1 and isinstance(d.get(OPAQUE), str):
            return Opaque(d[OPAQUE])
        return d

    return json.loads(line, object_hook=hook)


@dataclass(frozen=True)
class Ended:
    """How a child stopped answering: ``kind`` is ``"timeout"``, ``"exit"`` (``why`` then says
    how the process ended: ``exited with code 0``) or ``"garbled"`` (``why`` is the whole
    line for the report)."""

    kind: str
    why: str = ""


@dataclass(frozen=True)
class FileReport(LoopReport):
    """A :class:`~primer.course.exercises.LoopReport` of a file's loop, plus what it printed.

    ``outputs`` pairs a behaviour's name with what its run wrote on stdout and stderr (at
    most :data:`OUTPUT_CAP_BYTES`, then ``…[+N bytes]``), for runs that printed anything.
    """

    outputs: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:
        return f"FileReport(score={self.score}/{self.total}, failed={self.failed})"


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` that ``/proc`` lists (Linux; elsewhere
    nothing). A process that left the session (``setsid``) is out of reach."""
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return
    for pid in pids:
        try:
            if pid != os.getpid() and os.getsid(pid) == sid:
                os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class Child:
    """One child process running the learner's file, and the parent's ends of its pipes."""

    def __init__(self, path: Path, function: str) -> None:
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_r, out_w = os.pipe()
        root = str(Path(primer.__file__).resolve().parent.parent)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-c", BOOT, root, str(path), function, str(req_w),
                 str(rep_r)],
                stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w,
                pass_fds=(req_w, rep_r), start_new_session=True)
        finally:
            for fd in (req_w, rep_r, out_w):
                os.close(fd)
        self._req, self._rep, self._out = req_r, rep_w, out_r
        for fd in (req_r, rep_w, out_r):
            os.set_blocking(fd, False)
        self._buffer = bytearray()
        self._eof = False
        self.output = bytearray()
        self.dropped = 0
        self._sel = selectors.DefaultSelector()
        self._sel.register(req_r, selectors.EVENT_READ)
        self._sel.register(out_r, selectors.EVENT_READ)
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(self.proc.pid)
            self._sel.register(self._pidfd, selectors.EVENT_READ)
        except (AttributeError, OSError):  # no pidfd: poll for the exit instead
            pass

    # -------------------------------------------------------------- reading
    def _chunk(self, fd: int) -> bytes | None:
        """The next bytes waiting on ``fd``: ``None`` when there are none yet, ``b""`` at its
        end (it is then no longer watched)."""
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return None
        except OSError:
            data = b""
        if not data and fd in self._sel.get_map():
            self._sel.unregister(fd)
        return data

    def _read_output(self) -> None:
        while data := self._chunk(self._out):
            room = max(OUTPUT_CAP_BYTES - len(self.output), 0)
            self.output += data[:room]
            self.dropped += max(len(data) - room, 0)

    def _read_requests(self) -> None:
        while not self._eof and len(self._buffer) <= MESSAGE_CAP_BYTES:
            data = self._chunk(self._req)
            if data is None:
                return
            self._eof = not data
            self._buffer += data

    def _exit_status(self) -> str | None:
        """How the process ended, without reaping it where the system allows (so its group
        id stays its own until :meth:`kill`), or ``None`` while it runs."""
        if hasattr(os, "waitid") and hasattr(os, "WNOWAIT"):
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is None:
                return None
            code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        else:  # macOS before Python 3.13: reap it; its group is killed right after
            polled = self.proc.poll()
            if polled is None:
                return None
            code = polled
        if code >= 0:
            return f"exited with code {code}"
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"

    def message(self, deadline: float) -> Any:
        """The next request, or :class:`Ended` (time-out, exit, a garbled or huge line)."""
        while True:
            if b"\n" in self._buffer:
                line, _, rest = bytes(self._buffer).partition(b"\n")
                self._buffer = bytearray(rest)
                try:
                    return _decode(line)
                except (ValueError, RecursionError) as e:
                    return Ended("garbled", f"the checker's pipe received a line that is "
                                            f"not a request ({type(e).__name__}), so the run "
                                            f"was stopped")
            if len(self._buffer) > MESSAGE_CAP_BYTES:
                return Ended("garbled", f"sent a request over {MESSAGE_CAP_BYTES // 2**20} "
                                        f"MiB, so the run was stopped")
            status = self._exit_status()
            if status is not None or self._eof:
                self._read_requests()
                if b"\n" in self._buffer:
                    continue
                status = status or self._wait_exit(deadline)
                return Ended("exit", status)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return Ended("timeout")
            tick = remaining if self._pidfd is not None else min(remaining, 0.05)
            for key, _ in self._sel.select(tick):
                if key.fd == self._out:
                    self._read_output()
                elif key.fd == self._req:
                    self._read_requests()

    def _wait_exit(self, deadline: float) -> str:
        """The exit status once the pipe closed: the process is ending (or closed the pipe
        itself and goes on, which ends the run all the same)."""
        end = min(deadline, time.monotonic() + 1.0)
        while time.monotonic() < end:
            status = self._exit_status()
            if status is not None:
                return status
            time.sleep(0.01)
        return "closed the checker's pipe"

    # -------------------------------------------------------------- writing
    def reply(self, message: Any, deadline: float) -> bool:
        """Write ``message`` as one JSON line; ``False`` when the child does not take it
        (gone, or not reading before ``deadline``)."""
        view = memoryview(json.dumps(message, default=repr).encode() + b"\n")
        while view:
            try:
                view = view[os.write(self._rep, view):]
            except BlockingIOError:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                with selectors.DefaultSelector() as sel:
                    sel.register(self._rep, selectors.EVENT_WRITE)
                    sel.select(remaining)
            except OSError:  # BrokenPipeError: the child is gone; the next read says how
                return False
        return True

    def take_output(self) -> str:
        """What the child printed since the last call (cut at the cap), and forget it."""
        if self._out in self._sel.get_map():
            self._read_output()
        text = self.output.decode(errors="replace")
        if self.dropped:
            text += f"…[+{self.dropped} bytes]"
        self.output, self.dropped = bytearray(), 0
        return text

    def kill(self) -> None:
        """Kill the child's whole process group and, where ``/proc`` lists them, every process
        left in its session (one that moved to a group of its own), reap the child and close
        the pipes."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        kill_session(self.proc.pid)
        self.proc.wait()
        self._sel.close()
        for fd in (self._req, self._rep, self._out, self._pidfd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass


def _exception_spec(e: BaseException) -> dict[str, Any]:
    args = [a if isinstance(a, str | int | float | bool | type(None)) else repr(a)
            for a in e.args]
    return {"type": type(e).__name__, "args": args}


class LoopBox:
    """The learner's file behind a child process: :meth:`check` runs one behaviour."""

    def __init__(self, path: Path, function: str, time_limit_s: float,
                 import_limit_s: float) -> None:
        self.path, self.function = path, function
        self.limit, self.import_limit = time_limit_s, import_limit_s
        self.child: Child | None = None
        self.outputs: list[tuple[str, str]] = []
        self._runs = 0
        self._asked = False  # the child has asked for its next run and waits for it

    def start(self) -> Child | str:
        """A child that has imported the file and asks for a run, or why there is none."""
        child = Child(self.path, self.function)
        message = child.message(time.monotonic() + self.import_limit)
        if isinstance(message, dict) and message.get("op") == "next":
            self.child, self._asked = child, True
            return child
        child.kill()
        if isinstance(message, dict) and message.get("op") == "load_error":
            return short(message.get("text"), 300)
        if isinstance(message, Ended) and message.kind == "timeout":
            return (f"{self.path.name} did not finish importing within "
                    f"{self.import_limit:g} s")
        if isinstance(message, Ended) and message.kind == "exit":
            return (f"{self.path.name} ended the process while being imported (it "
                    f"{message.why})")
        if isinstance(message, Ended):
            return f"{self.path.name} could not be imported: {message.why}"
        return f"{self.path.name} sent something else than a request while being imported"

    def close(self) -> None:
        """Kill the child, if one is running."""
        if self.child is not None:
            self.child.kill()
            self.child = None

    def _ready(self) -> Child | str:
        """The child, waiting for its next run (a fresh one when the old one does not ask
        for it in time)."""
        child = self.child
        if child is not None and self._asked:
            return child
        if child is not None:
            deadline = time.monotonic() + self.limit
            while True:
                message = child.message(deadline)
                if isinstance(message, dict) and message.get("op") == "next":
                    return child
                if isinstance(message, dict) and message.get("op") in ("model", "tool"):
                    child.reply({"raise": {"type": "RuntimeError", "args": [
                        "this call belongs to a run that has ended"]}}, deadline)
                    continue
                break
            self.close()
        return self.start()

    def check(self, behaviour: Behaviour) -> tuple[CheckResult, str | None]:
        """Run ``behaviour`` in the child and judge it from what the model was sent."""
        run, tools, model = watched(behaviour)
        child = self._ready()
        if isinstance(child, str):
            run.error = child
            return verdict(run, behaviour, None)
        self._runs += 1
        number, self._asked = self._runs, False
        deadline = time.monotonic() + self.limit
        child.reply({"run": number, "task": TASK, "definitions": tools.definitions,
                     "max_steps": behaviour.max_steps,
                     "token_budget": behaviour.token_budget}, deadline)
        kind, clean = None, False
        while True:
            message = child.message(deadline)
            if isinstance(message, Ended):
                run.error = self._ended(message, run)
                break
            if not isinstance(message, dict):
                run.violation = "the checker's pipe received something that is not a request"
                break
            op = message.get("op")
            if op in ("model", "tool") and message.get("run") != number:
                child.reply({"raise": {"type": "RuntimeError", "args": [
                    "this call belongs to a run that has ended"]}}, deadline)
                continue
            if op in ("model", "tool"):
                started = time.monotonic()
                answer = self._serve(message, run, model, tools)
                deadline += time.monotonic() - started  # the checker's time is not the loop's
                if answer is None:
                    break
                child.reply(answer, deadline)
            elif op == "returned" and message.get("run") == number:
                if "unsendable" in message:
                    run.error = (f"returned a value that cannot be sent as data "
                                 f"({short(message['unsendable'], 80)}); return a plain dict "
                                 f"{{'answer': str | None, 'stop_cause': str}}")
                run.result, clean = message.get("value"), True
                break
            elif op == "raised" and message.get("run") == number:
                run.error = short(message.get("text"), 2000)
                kind = message.get("kind") if message.get("kind") in ("model call",
                                                                       "signature") else None
                clean = True
                break
            else:
                run.violation = (f"the checker's pipe received {short(op, 20)!r} during the "
                                 f"run, which is not a request the loop's model or tools send")
                break
        output = child.take_output()
        if output:
            self.outputs.append((behaviour.name, output))
        if not clean:
            self.close()
        return verdict(run, behaviour, kind)

    def _ended(self, ended: Ended, run: Run) -> str:
        if ended.kind == "exit":
            hint = (" (a loop ends by returning its result, not by ending the process)"
                    if ended.why.startswith("exited") else "")
            return f"the process {ended.why} before the loop returned{hint}"
        if ended.kind != "timeout":
            return ended.why
        if run.calls == 0 and not run.tool_runs:
            return f"timed out after {self.limit:g} s without calling the model"
        return (f"timed out after {self.limit:g} s: made {run.calls} model call(s), then "
                f"neither called the model again nor returned")

    def _serve(self, message: dict[str, Any], run: Run, model: Any, tools: Any
               ) -> dict[str, Any] | None:
        """The reply to one ``model`` or ``tool`` request, or ``None`` when the run ends
        here (a rule broken, recorded in ``run``)."""
        args, kwargs = message.get("args", []), message.get("kwargs", {})
        if "unsendable" in message or not isinstance(args, list) \
                or not isinstance(kwargs, dict):
            what = "the model" if message.get("op") == "model" else "a tool"
            run.violation = (f"the loop sent {what} something that is not data "
                             f"({short(message.get('unsendable', 'malformed call'), 80)}); "
                             f"send plain dicts, lists and strings")
            return None
        try:
            if message["op"] == "model":
                if run.misuse:  # it caught the wrong call's error and went on
                    return None
                return {"value": model(*args, **kwargs)}
            name = message.get("name")
            if not isinstance(name, str) or name not in tools:
                return {"raise": {"type": "KeyError", "args": [str(name)]}}
            return {"value": tools[name](*args, **kwargs)}
        except _CheckStopped:
            return None
        except ModelCallError as e:
            return {"raise": _exception_spec(e)}
        except Exception as e:  # noqa: BLE001 - a tool's failure goes back to the loop
            if message["op"] == "model":
                run.violation = (f"the checker could not read model call {run.calls + 1} "
                                 f"({type(e).__name__}: {short(e, 80)})")
                return None
            return {"raise": _exception_spec(e)}


def check_loop_file(path: str | Path, function: str = "my_loop", *,
                    behaviours: tuple[Behaviour, ...] = BEHAVIOURS,
                    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
                    import_limit_s: float = DEFAULT_IMPORT_LIMIT_S,
                    show: bool = False) -> FileReport:
    """Judge the loop ``function`` of the Python file ``path`` with its code in a child process.

    Returns a :class:`FileReport` (printed when ``show``): one verdict per behaviour as
    :func:`~primer.course.exercises.check_loop` gives it, and what each run printed. Each
    behaviour may take ``time_limit_s`` seconds of wall-clock time; starting the child and
    importing the file, ``import_limit_s`` (each time a child is started).
    Raises :class:`LoadError` (a ``ValueError``) when the file is missing, cannot be
    imported (it raised, exited or hung on import) or has no such function; never raises
    because of what the loop does.
    """
    path = Path(path)
    if not path.is_file():
        raise LoadError(f"no file {str(path)!r}; give the path of the .py file holding "
                        f"your loop")
    box = LoopBox(path.resolve(), function, time_limit_s, import_limit_s)
    try:
        first = box.start()
        if isinstance(first, str):
            raise LoadError(first)
        report = run_battery(box.check, behaviours, show=False)
    finally:
        box.close()
    result = FileReport(report.results, report.interface_problem, tuple(box.outputs))
    if show:
        print(result)
    return result
