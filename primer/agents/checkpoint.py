"""Checkpoints: pause a run for a person's approval, survive the process ending, resume.

When the model asks for a tool marked ``needs_approval``, the loop does not run it. With
``AgentConfig.checkpoint_dir`` set it writes a *checkpoint*: one versioned JSON file per run
(``run-001.json``, ...) holding everything needed to continue in another process, hours
later:

* the message list, the system prompt and the config;
* every call of the paused reply (``tool_use`` id, name, exact ``input``), whether it needs
  approval or changes the world, its state (``waiting`` → ``started`` → ``done``), the
  idempotency key it was given, its result once it has one, and the person's decision;
* usage and cost so far, the loop-detection counts, and the steps taken;
* optionally ``scenario``, the name of the demo that started the run
  (:meth:`primer.scenarios.Scenario.run` records it), so ``python -m primer resume`` can
  rebuild the run's model and tools without being told.

Calls of that reply that need no approval run first, once; their results are recorded.
:func:`approve` / :func:`reject` record a decision keyed by ``tool_use`` id (from any
process); :func:`resume` continues the run:

* an approved call runs with exactly the arguments the person saw (a SHA-256 of the input is
  stored with the decision and checked again before the call runs);
* a rejected call gets an error ``tool_result`` saying a person rejected it, with the note,
  and the model picks another path;
* a call with no decision never runs (fail closed): the run stays paused;
* nothing that already ran runs again, and resuming a finished checkpoint runs nothing.

Crash safety. Every write goes to a temporary file in the same directory, is flushed and
fsynced, then renamed over the old file with ``os.replace`` (atomic on POSIX and Windows),
so a crash leaves the old file or the new one, never a torn one. Before a side-effecting
call runs, the checkpoint records ``started`` and the call's idempotency key (derived from
its ``tool_use`` id by :func:`primer.agents.tools.idempotency_key`). A call found ``started``
with no result on resume is not re-run blind: a tool that takes an ``idempotency_key``
receives the same key again, so the world deduplicates it; a side-effecting tool that takes
no key is not re-run at all, and the model gets an error saying the outcome is unknown and
the state must be checked. Approvals and resumes of one checkpoint are serialised with an
advisory file lock (``fcntl.flock``, released by the OS if the process dies).

Bad input gets a :class:`CheckpointError` naming the problem, and nothing runs: a file that
is not JSON (truncated, corrupt), one that fails :data:`CHECKPOINT_SCHEMA`, one whose
content no longer matches its SHA-256 digest (edited by hand), one written by a newer format
version, or a decision for a ``tool_use`` id the checkpoint does not hold.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from .agent_loop import (
    AgentConfig,
    AgentResult,
    EventSink,
    RunState,
    Step,
    Stop,
    StopCause,
    _registry_for_run,
    account_executions,
    check_budgets_after_tools,
    check_no_progress,
    continue_run,
    finish,
    tool_runner,
)
from .hooks import as_hook_list
from .llm import LLM, Reply, Usage
from .messages import Block, tool_use_block, user_message
from .tools import Tool, ToolExecution, ToolRegistry, execute_tools, idempotency_key

try:  # POSIX: serialise approve/resume of one checkpoint across processes
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process lock, still atomic
    fcntl = None  # type: ignore[assignment]

#: The format this module writes. A file with a larger version is refused, not guessed at.
FORMAT_VERSION = 1
FORMAT_NAME = "primer-checkpoint"

_CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["tool_use_id", "name", "input", "needs_approval", "side_effecting", "state",
                 "idempotency_key", "decision", "result"],
    "additionalProperties": False,
    "properties": {
        "tool_use_id": {"type": "string", "minLength": 1},
        "name": {"type": "string"},
        "input": {},
        "needs_approval": {"type": "boolean"},
        "side_effecting": {"type": "boolean"},
        "state": {"enum": ["waiting", "started", "done"]},
        "idempotency_key": {"type": ["string", "null"]},
        "decision": {"oneOf": [
            {"type": "null"},
            {"type": "object", "required": ["approved", "note", "input_sha256"],
             "additionalProperties": False,
             "properties": {"approved": {"type": "boolean"}, "note": {"type": "string"},
                            "input_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}},
        ]},
        "result": {"oneOf": [
            {"type": "null"},
            {"type": "object", "required": ["content", "is_error"],
             "properties": {"content": {"type": "string"}, "is_error": {"type": "boolean"},
                            "error_kind": {"type": ["string", "null"]},
                            "latency_s": {"type": "number"},
                            "attempts": {"type": "integer"}}},
        ]},
    },
}

#: The JSON Schema of a checkpoint file (format version 1). ``version`` is checked before
#: the rest, so a newer file gets a clear "newer version" error rather than a schema error.
CHECKPOINT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["format", "version", "run_id", "status", "system", "config", "messages",
                 "steps", "usage", "cost_usd", "prompt_estimate", "repeat_counts",
                 "recent_errors", "calls", "result", "digest"],
    "additionalProperties": False,
    "properties": {
        "format": {"const": FORMAT_NAME},
        "version": {"const": FORMAT_VERSION},
        "run_id": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$"},
        "status": {"enum": ["running", "awaiting_approval", "finished"]},
        "system": {"type": "string"},
        "config": {"type": "object"},
        "messages": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["role", "content"],
            "properties": {"role": {"enum": ["user", "assistant"]},
                           "content": {"type": ["string", "array"]}}}},
        "steps": {"type": "array", "items": {"type": "object"}},
        "usage": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
        "cost_usd": {"type": "number", "minimum": 0},
        "prompt_estimate": {"type": "integer", "minimum": 0},
        "repeat_counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "recent_errors": {"type": "array", "items": {"type": "boolean"}},
        "calls": {"type": "array", "items": _CALL_SCHEMA},
        "result": {"oneOf": [
            {"type": "null"},
            {"type": "object", "required": ["stop_cause", "stop_detail", "summary", "final_text"],
             "properties": {"stop_cause": {"type": "string"}, "stop_detail": {"type": "string"},
                            "summary": {"type": "string"},
                            "final_text": {"type": ["string", "null"]}}},
        ]},
        "digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
        "scenario": {"type": "string", "minLength": 1},
    },
}


class CheckpointError(ValueError):
    """A checkpoint cannot be used as it is; the message says what is wrong and what to do.

    Raised before anything runs: nothing is executed on a checkpoint that fails a check.
    """


def input_sha256(value: Any) -> str:
    """SHA-256 (hex) of a call's input as canonical JSON (sorted keys, no spaces).

    Stored with a decision, so the arguments that run are provably the ones approved.
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _digest(body: dict[str, Any]) -> str:
    content = {k: v for k, v in body.items() if k != "digest"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` so that a crash leaves the old or the new file.

    The text goes to a temporary file in the same directory (same file system, so the
    rename is atomic), is flushed and ``fsync``-ed, then ``os.replace``-d over ``path``; the
    directory is fsynced too (POSIX) so the rename itself survives a power cut.
    Raises ``OSError`` when the directory is not writable.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if hasattr(os, "O_DIRECTORY"):
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read and check a checkpoint file; returns its content as a dict.

    Raises :class:`CheckpointError` when the file is missing, is not JSON (truncated or
    corrupt), is not a checkpoint, has a newer format version, fails
    :data:`CHECKPOINT_SCHEMA`, does not match its digest (edited by hand), or contradicts
    itself (a recorded call that is not in the paused reply, or a decision whose input hash
    differs from the call's input).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint file. List the checkpoints of a "
                              f"directory with `python -m primer approvals list DIR`.") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: cannot read the checkpoint ({e})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise CheckpointError(
            f"{path}: not valid JSON ({e.msg}: line {e.lineno}, column {e.colno}); the "
            f"file is truncated or corrupt. Nothing was run. Restore it from a copy, or "
            f"start the task again.") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise CheckpointError(f"{path}: not a primer checkpoint (its 'format' field is not "
                              f"{FORMAT_NAME!r}). Nothing was run.")
    version = data.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: written in checkpoint format version {version}, but this primer reads "
            f"versions up to {FORMAT_VERSION}. Upgrade primer to resume it. Nothing was run.")
    errors = sorted(jsonschema.Draft202012Validator(CHECKPOINT_SCHEMA).iter_errors(data),
                    key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        where = "/".join(map(str, errors[0].absolute_path)) or "(top level)"
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise CheckpointError(f"{path}: not a valid checkpoint: at '{where}': "
                              f"{errors[0].message}{more}. Nothing was run.")
    if data["digest"] != _digest(data):
        raise CheckpointError(
            f"{path}: the content does not match its digest: the file was edited by hand or "
            f"damaged after it was written. A checkpoint is not edited by hand; record "
            f"decisions with `python -m primer approve`. Nothing was run.")
    _check_calls_match_reply(path, data)
    return data


def _check_calls_match_reply(path: Path, data: dict[str, Any]) -> None:
    if not data["calls"]:
        return
    last = data["messages"][-1]
    asked = {b.get("id"): b for b in (last["content"] if isinstance(last["content"], list)
                                      else []) if isinstance(b, dict)
             and b.get("type") == "tool_use"}
    for call in data["calls"]:
        block = asked.get(call["tool_use_id"])
        if last["role"] != "assistant" or block is None:
            raise CheckpointError(f"{path}: call {call['tool_use_id']} is not in the reply the "
                                  f"run paused on. Nothing was run.")
        if block.get("name") != call["name"] or input_sha256(block.get("input")) != \
                input_sha256(call["input"]):
            raise CheckpointError(f"{path}: call {call['tool_use_id']} differs from what the "
                                  f"model asked for. Nothing was run.")
        d = call["decision"]
        if d is not None and d["input_sha256"] != input_sha256(call["input"]):
            raise CheckpointError(
                f"{path}: the input of call {call['tool_use_id']} ({call['name']}) is not the "
                f"input the person approved or rejected. Nothing was run.")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock for one checkpoint (no-op without ``fcntl``).

    The lock lives on a hidden side file (``.run-001.json.lock``), because the checkpoint
    itself is replaced on every write. The OS drops it when the process dies.
    """
    if fcntl is None:  # pragma: no cover
        yield
        return
    lock = path.with_name(f".{path.name}.lock")
    with open(lock, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _claim_path(directory: Path) -> Path:
    """Create and return the next free ``run-NNN.json`` in ``directory`` (never reused)."""
    directory.mkdir(parents=True, exist_ok=True)
    n = len(list(directory.glob("run-*.json"))) + 1
    while True:
        path = directory / f"run-{n:03d}.json"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return path
        except FileExistsError:
            n += 1


# ---------------------------------------------------------------- the recorder


def _call_record(block: Block, tool: Tool | None) -> dict[str, Any]:
    return {"tool_use_id": str(block.get("id")), "name": str(block.get("name")),
            "input": block.get("input"),
            "needs_approval": bool(tool is not None and tool.needs_approval),
            "side_effecting": bool(tool is not None and tool.side_effecting),
            "state": "waiting", "idempotency_key": None, "decision": None, "result": None}


_IDENTITY = ("tool_use_id", "name", "input")


def _execution(call: dict[str, Any]) -> ToolExecution:
    return ToolExecution(call["tool_use_id"], call["name"], call["input"], **call["result"])


def _block(call: dict[str, Any]) -> Block:
    return tool_use_block(call["tool_use_id"], call["name"], call["input"])


@dataclass
class Checkpoint:
    """One run's checkpoint file and its content, kept by the loop while the run goes on.

    ``path`` is ``None`` until the first save (a run that never pauses and never calls a
    side-effecting tool writes no file). ``data`` is the content last written. Methods are
    thread-safe: the calls of one reply run concurrently and each records its own progress.
    """

    directory: Path
    path: Path | None = None
    data: dict[str, Any] = field(default_factory=dict)
    scenario: str | None = None  #: the demo that started the run, recorded in the file
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _held: int = field(default=0, repr=False)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the file lock of this checkpoint (re-entrant within this object)."""
        if self.path is None:
            self.path = _claim_path(self.directory)
        if self._held:
            self._held += 1
            try:
                yield
            finally:
                self._held -= 1
            return
        with _locked(self.path):
            self._held = 1
            try:
                yield
            finally:
                self._held = 0

    # -- writing

    def save(self, state: RunState, status: str, result: AgentResult | None = None) -> Path:
        """Write the run's state with ``status``; returns the file's path."""
        with self._lock:
            return self._save(state, status, result)

    def _save(self, state: RunState, status: str, result: AgentResult | None = None) -> Path:
        if self.path is None:
            self.path = _claim_path(self.directory)
        body = {
            "format": FORMAT_NAME, "version": FORMAT_VERSION, "run_id": self.path.stem,
            "status": status, "system": state.system, "config": state.config.to_dict(),
            "messages": state.messages, "steps": [s.to_dict() for s in state.steps],
            "usage": state.usage.to_dict(), "cost_usd": state.cost_usd,
            "prompt_estimate": state.prompt_estimate,
            "repeat_counts": dict(state.repeat_counts),
            "recent_errors": list(state.recent_errors),
            "calls": self.data.get("calls", []) if status != "finished" else [],
            "result": None if result is None else {
                "stop_cause": result.stop_cause.value, "stop_detail": result.stop_detail,
                "summary": result.summary, "final_text": result.final_text},
        }
        if self.scenario:
            body["scenario"] = self.scenario
        body["digest"] = _digest(body)
        write_json_atomic(self.path, body)
        self.data = body
        state.emit("checkpoint", path=str(self.path), status=status)
        return self.path

    # -- the loop's hooks

    def pause(self, registry: ToolRegistry, state: RunState, stop: Stop,
              reply: Reply) -> AgentResult:
        """The approval gate fired: record every call, run those needing no approval, finish.

        The file is written before any call runs, so a crash while they run leaves a
        checkpoint that knows about them. The file lock is held until the pause is saved,
        so a decision recorded meanwhile by another process waits rather than being lost.
        """
        with self.held():
            self.data["calls"] = [_call_record(b, registry.get(b.get("name")))
                                  for b in reply.tool_uses]
            self.save(state, "awaiting_approval")
            ready = [c for c in self.data["calls"] if not c["needs_approval"]]
            ran = self.run_calls(registry, state, ready)
            state.steps[-1].executions.extend(ran)
            account_executions(state, ran)
            return finish(state, stop, reply)

    def run_reply(self, registry: ToolRegistry, state: RunState,
                  tool_uses: list[Block]) -> list[ToolExecution]:
        """Run one reply's calls with durable progress (used when a call has side effects).

        The reply's calls are on disk before any runs; each side-effecting one is marked
        ``started`` with its idempotency key first, so a resume after a crash re-sends the
        same key instead of running it blind.
        """
        with self.held():
            self.data["calls"] = [_call_record(b, registry.get(b.get("name")))
                                  for b in tool_uses]
            self.save(state, "running")
            executions = self.run_calls(registry, state, self.data["calls"])
            self.data["calls"] = []
            return executions

    def record_stop(self, state: RunState, result: AgentResult) -> str | None:
        """Save the run's end (or its pause); returns the path, or ``None`` if never saved."""
        if result.stop_cause is StopCause.AWAITING_APPROVAL:
            return str(self.save(state, "awaiting_approval", result))
        if self.path is None:
            return None
        return str(self.save(state, "finished", result))

    def pending_blocks(self) -> list[Block]:
        """The ``tool_use`` blocks still waiting for a decision or a result."""
        return [_block(c) for c in self.data.get("calls", [])
                if c["needs_approval"] and c["state"] != "done"]

    # -- running calls

    def run_calls(self, registry: ToolRegistry, state: RunState,
                  calls: list[dict[str, Any]]) -> list[ToolExecution]:
        """Run ``calls`` (records of this reply) concurrently; record each; results in order.

        A ``done`` call is not run again (its recorded result is returned). A rejected call
        gets the rejection as its result. A side-effecting call is marked ``started`` with its
        idempotency key before it runs and ``done`` with its result after.
        """
        todo = [c for c in calls if c["state"] != "done"]
        by_id = {c["tool_use_id"]: c for c in todo}
        runner = tool_runner(registry, state)  # the loop's own: timeouts, retries, hooks
        if todo:
            execute_tools(registry, [_block(c) for c in todo],
                          max_workers=state.config.max_parallel_tools,
                          run=lambda b: self._run_one(registry, runner, state,
                                                      by_id[b["id"]]))
        return [_execution(c) for c in calls]

    def _run_one(self, registry: ToolRegistry, runner: Any, state: RunState,
                 call: dict[str, Any]) -> ToolExecution:
        tool = registry.get(call["name"])
        d = call["decision"]
        if d is not None and not d["approved"]:
            note = f" Their note: {d['note'].rstrip('.')}." if d["note"] else ""
            e = ToolExecution(call["tool_use_id"], call["name"], call["input"],
                              f"A person rejected this call to {call['name']}; it did not run."
                              f"{note} Do not retry it; choose another way to help, or "
                              f"explain to the user what happens next.", True, "rejected")
        elif call["state"] == "started" and tool is not None and \
                not tool.takes_idempotency_key:
            e = ToolExecution(call["tool_use_id"], call["name"], call["input"],
                              f"{call['name']} started before the process stopped and its "
                              f"outcome is unknown; it was not run again, because it takes no "
                              f"idempotency key. Check the current state before any retry.",
                              True, "unknown_outcome")
        else:
            if call["side_effecting"]:
                with self._lock:
                    call["state"] = "started"
                    call["idempotency_key"] = idempotency_key(call["tool_use_id"])
                    self._save(state, self.data.get("status", "running"))
            e = runner(_block(call))
        with self._lock:
            call["state"] = "done"
            call["result"] = {k: v for k, v in e.to_dict().items() if k not in _IDENTITY}
            self._save(state, self.data.get("status", "running"))
        return e


# ---------------------------------------------------------------- decisions and resume


def _decide(path: str | Path, tool_use_id: str, approved: bool, note: str) -> dict[str, Any]:
    path = Path(path)
    with _locked(path):
        data = read_checkpoint(path)
        if data["status"] == "finished":
            raise CheckpointError(f"{path}: the run has already finished; there is nothing "
                                  f"to {'approve' if approved else 'reject'}.")
        gated = [c for c in data["calls"] if c["needs_approval"]]
        call = next((c for c in gated if c["tool_use_id"] == tool_use_id), None)
        if call is None:
            known = ", ".join(f"{c['tool_use_id']} ({c['name']})" for c in gated) or "none"
            raise CheckpointError(f"{path}: no call with tool_use_id {tool_use_id!r} awaits a "
                                  f"decision. Calls awaiting approval here: {known}.")
        decision = {"approved": approved, "note": note,
                    "input_sha256": input_sha256(call["input"])}
        old = call["decision"]
        if old is not None:
            if old["approved"] == approved:
                return call  # the same answer twice is a no-op
            raise CheckpointError(
                f"{path}: call {tool_use_id} ({call['name']}) was already "
                f"{'approved' if old['approved'] else 'rejected'}; a decision cannot be "
                f"changed. Start a new run to ask again.")
        call["decision"] = decision
        data["digest"] = _digest(data)
        write_json_atomic(path, data)
        return call


def approve(path: str | Path, tool_use_id: str, note: str = "") -> dict[str, Any]:
    """Record a person's yes for the call ``tool_use_id`` of the checkpoint at ``path``.

    The decision stores a SHA-256 of the call's input, so only those exact arguments can
    run. Approving twice is a no-op; approving a rejected call raises. Returns the call's
    record (``tool_use_id``, ``name``, ``input``, ``decision``, ...). Nothing runs until
    :func:`resume`. Raises :class:`CheckpointError` for an unknown ``tool_use_id``, a
    finished run or a bad file.
    """
    return _decide(path, tool_use_id, True, note)


def reject(path: str | Path, tool_use_id: str, note: str = "") -> dict[str, Any]:
    """Record a person's no for the call ``tool_use_id``; the ``note`` reaches the model.

    Same checks and return value as :func:`approve`.
    """
    return _decide(path, tool_use_id, False, note)


def _step_from_dict(d: dict[str, Any]) -> Step:
    return Step(d["index"], Reply.from_dict(d["reply"]), Usage.from_dict(d["usage"]),
                Usage.from_dict(d["total_usage"]), d["cost_usd"], d["prompt_estimate"],
                d.get("model_latency_s", 0.0),
                [ToolExecution(**e) for e in d.get("executions", [])],
                model_retries=d.get("model_retries", []))


def _state_from(data: dict[str, Any], ckpt: Checkpoint, config: AgentConfig,
                tool_defs: list[dict[str, Any]], on_event: EventSink | None) -> RunState:
    state = RunState(config=config, system=data["system"], messages=data["messages"],
                     tool_defs=tool_defs,
                     prompt_estimate=data["prompt_estimate"],
                     usage=Usage.from_dict(data["usage"]), cost_usd=data["cost_usd"],
                     steps=[_step_from_dict(s) for s in data["steps"]],
                     repeat_counts=Counter(data["repeat_counts"]),
                     recent_errors=deque(data["recent_errors"],
                                         maxlen=config.no_progress_window or 1),
                     started_at=config.clock(), on_event=on_event)
    state.checkpoint = ckpt
    state.tool_use_ids = {b["id"] for m in state.messages if isinstance(m["content"], list)
                          for b in m["content"] if isinstance(b, dict)
                          and b.get("type") == "tool_use" and isinstance(b.get("id"), str)}
    return state


def _stored_result(data: dict[str, Any], path: Path, state: RunState) -> AgentResult:
    r = data["result"]
    return AgentResult(r["final_text"], StopCause(r["stop_cause"]), state.steps, state.usage,
                       state.cost_usd, state.messages, r["summary"], r["stop_detail"], [],
                       checkpoint=str(path))


def resume(path: str | Path, llm: LLM, tools: ToolRegistry | Iterable[Tool] = (), *,
           on_event: EventSink | None = None, hooks: Any = None) -> AgentResult:
    """Continue the run saved at ``path`` with model ``llm`` and the run's ``tools``.

    Decided calls of the paused reply run (approved ones with exactly the approved input,
    rejected ones answered with the rejection), recorded calls are not run again, then the
    loop goes on and the checkpoint follows it (a later pause overwrites the same file; the
    end marks it ``finished``). If a call still awaits a decision, nothing runs and the
    result is ``awaiting_approval`` again. A finished checkpoint returns its stored result
    and runs nothing. The wall-clock limit restarts at resume (time paused is not counted).

    Raises :class:`CheckpointError` for a bad file, or when a call to run names a tool
    that ``tools`` lacks (resume with the tools the run started with). ``on_event`` and
    ``hooks`` work as in :func:`~primer.agents.run_agent` (hooks also see the resumed calls;
    a hook that rewrites an approved call's input defeats the approval, so do not).
    """
    path = Path(path)
    ckpt = Checkpoint(path.parent, path)
    with ckpt.held():
        data = read_checkpoint(path)
        try:
            config = AgentConfig.from_dict(data["config"])
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{path}: its config is not usable ({e}). Nothing was run.") \
                from None
        registry = _registry_for_run(tools, config)
        ckpt.data = data
        ckpt.scenario = data.get("scenario")
        try:
            state = _state_from(data, ckpt, config, registry.definitions(), on_event)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CheckpointError(f"{path}: its saved run is malformed ({type(e).__name__}: "
                                  f"{e}); the file was edited or damaged. Nothing was run.") \
                from None
        state.hooks = as_hook_list(hooks)
        if data["status"] == "finished":
            return _stored_result(data, path, state)
        calls = data["calls"]
        undecided = [c for c in calls if c["needs_approval"] and c["decision"] is None
                     and c["state"] != "done"]
        if undecided:
            names = ", ".join(f"{c['tool_use_id']} ({c['name']})" for c in undecided)
            stop = Stop(StopCause.AWAITING_APPROVAL,
                        f"no decision yet for {names}; nothing was run")
            result = finish(state, stop, None)
            result.pending = [_block(c) for c in undecided]
            return result
        missing = sorted({c["name"] for c in calls if c["state"] != "done"
                          and c["name"] not in registry and not _is_rejected(c)})
        if missing:
            raise CheckpointError(
                f"{path}: the run needs the tool(s) {', '.join(missing)}, which are not among "
                f"the tools given to resume ({', '.join(registry.names)}). Resume with the "
                f"tools the run started with. Nothing was run.")
        if calls:
            state.emit("resume", path=str(path), calls=[c["tool_use_id"] for c in calls])
            for c in calls:
                if c["decision"] is not None and c["state"] != "done":
                    state.emit("approval", step=state.model_calls, tool_use_id=c["tool_use_id"],
                               name=c["name"], approved=c["decision"]["approved"],
                               note=c["decision"]["note"])
            ran_before = {c["tool_use_id"] for c in calls if c["state"] == "done"}
            ckpt.save(state, "running")
            executions = ckpt.run_calls(registry, state, calls)
            step = state.steps[-1]  # holds the calls that ran at the pause; now all, in order
            step.executions = [e for e in step.executions if e.tool_use_id not in
                               {c["tool_use_id"] for c in calls}] + executions
            account_executions(state, [e for e in executions if e.tool_use_id not in ran_before])
            state.append(user_message([e.result_block() for e in executions]))
            ckpt.data["calls"] = []
            ckpt.save(state, "running")
            stop = check_budgets_after_tools(state) or check_no_progress(state)
            if stop:
                return finish(state, stop, None)
        return continue_run(llm, registry, state)


def _is_rejected(call: dict[str, Any]) -> bool:
    return call["decision"] is not None and not call["decision"]["approved"]


# ---------------------------------------------------------------- listing


@dataclass
class CheckpointInfo:
    """One checkpoint file as ``approvals list`` shows it.

    ``status`` is ``running`` / ``awaiting_approval`` / ``finished``, or ``invalid`` with
    ``error`` saying why. ``calls`` are the records of calls awaiting a decision or a run.
    """

    path: Path
    status: str
    run_id: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""
    error: str = ""

    def describe(self) -> str:
        """A few lines for a person: the file, its status, each gated call and decision."""
        if self.status == "invalid":
            return f"{self.path.name}: INVALID: {self.error}"
        lines = [f"{self.path.name}: {self.status}" + (f" - {self.summary}" if self.summary
                                                       else "")]
        for c in self.calls:
            d = c["decision"]
            verdict = ("undecided" if d is None else
                       ("approved" if d["approved"] else "rejected")
                       + (f" ({d['note']})" if d["note"] else ""))
            args = json.dumps(c["input"], ensure_ascii=False, sort_keys=True)
            lines.append(f"  {c['tool_use_id']}  {c['name']}({args})  {verdict}")
        return "\n".join(lines)


def list_checkpoints(directory: str | Path) -> list[CheckpointInfo]:
    """Every ``*.json`` checkpoint in ``directory``, sorted by name; bad files as ``invalid``.

    ``directory`` may also be one checkpoint file: the list then holds that file alone.
    Raises :class:`CheckpointError` when ``directory`` does not exist.
    """
    directory = Path(directory)
    if directory.is_file():
        return [checkpoint_info(directory)]
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: no such directory of checkpoints (or "
                              f"checkpoint file)")
    return [checkpoint_info(p) for p in sorted(directory.glob("*.json"))]


def checkpoint_info(path: str | Path) -> CheckpointInfo:
    """One checkpoint file as :class:`CheckpointInfo`; a bad file is ``invalid``, not raised."""
    p = Path(path)
    try:
        data = read_checkpoint(p)
    except CheckpointError as e:
        return CheckpointInfo(p, "invalid", error=str(e).removeprefix(f"{p}: "))
    gated = [c for c in data["calls"] if c["needs_approval"] and c["state"] != "done"]
    summary = (data["result"] or {}).get("summary", "") if data["status"] == "finished" \
        else ""
    return CheckpointInfo(p, data["status"], data["run_id"], gated, summary)


# ---------------------------------------------------------------- the approval desk


@dataclass
class ApprovalDesk:
    """Approve / Reject for one paused call, as a plain object (notebook buttons call it).

    ``checkpoint`` is the file, ``tool_use_id`` the call, ``note`` the note the next decision
    carries. :meth:`approve` and :meth:`reject` record the decision and return (and keep in
    ``status``) one line saying what happened; a bad file or id becomes that line, starting
    with ``"error: "``, rather than an exception, so a button never fails silently.
    """

    checkpoint: str | Path
    tool_use_id: str
    note: str = ""
    status: str = ""

    def describe(self) -> str:
        """The call as the person sees it: tool, exact arguments, decision so far."""
        try:
            data = read_checkpoint(self.checkpoint)
        except CheckpointError as e:
            return f"error: {e}"
        call = next((c for c in data["calls"] if c["tool_use_id"] == self.tool_use_id), None)
        if call is None:
            return f"{self.tool_use_id}: nothing awaits a decision (run {data['status']})"
        d = call["decision"]
        verdict = "undecided" if d is None else "approved" if d["approved"] else "rejected"
        return (f"{call['name']}({json.dumps(call['input'], ensure_ascii=False, sort_keys=True)})"
                f" - {verdict}")

    def approve(self) -> str:
        """Record a yes (with ``note``); returns the status line."""
        return self._decide(approve)

    def reject(self) -> str:
        """Record a no (with ``note``, which the model will read); returns the status line."""
        return self._decide(reject)

    def _decide(self, decide: Any) -> str:
        try:
            call = decide(self.checkpoint, self.tool_use_id, note=self.note)
        except CheckpointError as e:
            self.status = f"error: {e}"
            return self.status
        d = call["decision"]
        self.status = (f"{'approved' if d['approved'] else 'rejected'} {call['name']} "
                       f"({call['tool_use_id']})" + (f", note: {d['note']}" if d["note"] else ""))
        return self.status
