"""Resume: continue a run from its checkpoint journal, through the loop's own steps.

:func:`resume` reads the journal back into a :class:`~primer.loop.state.RunState` (the
lock held throughout), decides what each call of the reply the run stopped on needs, runs
them through the loop's one results path (:func:`~primer.loop.steps.add_results`) and
then the loop itself (:func:`~primer.loop.loop.continue_run`), on the caller's thread
(:func:`~primer.loop.loop.drive`). It has no steps of its own. The rules for the paused
reply's calls:

* every safety property comes from the *live* tools given to resume, never from the file:
  whether a call needs approval, changes the world, or takes an idempotency key;
* an approved call runs with exactly the arguments the person saw (the SHA-256 of the input
  stored with the decision is checked again first);
* a rejected call gets an error ``tool_result`` saying a person rejected it, with the note;
* a call that needs approval and has no decision never runs (fail closed): the run stays
  paused;
* nothing recorded ``done`` runs again; a side-effecting call recorded ``started`` with no
  result runs again with the same idempotency key if its tool takes one (the world
  deduplicates it), and otherwise does not run: the model is told the outcome is unknown;
* resuming a finished journal returns its stored result and runs nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from primer.loop.config import AgentConfig
from primer.loop.loop import Turns, continue_run, drive
from primer.loop.messages import ToolUseBlock
from primer.loop.model import LLM, EventSink
from primer.loop.result import AgentResult, finish
from primer.loop.state import CancelSignal, RunInputs, RunState, Stop, StopCause, registry_for_run
from primer.loop.steps import ToolCalls, add_results, calls_to_run
from primer.loop.tools import Tool, ToolExecution, ToolRegistry, call_needs_approval

from ..allowance import running
from ..hooks import Hooks, after_reply_sink, as_hook_list
from ..request_check import block_problem
from ..runner import ToolRunner
from .journal import CallRecord, CheckpointError, Journal, expired, input_sha256
from .recorder import JournalRecorder


def resume(path: str | Path, llm: LLM, tools: ToolRegistry | Iterable[Tool] = (), *,
           on_event: EventSink | None = None,
           hooks: Hooks | Iterable[Hooks] | None = None,
           cancel: CancelSignal | None = None, now: datetime | None = None) -> AgentResult:
    """Continue the run recorded at ``path`` with model ``llm`` and the run's ``tools``.

    Decided calls of the paused reply run (approved ones with exactly the approved input,
    rejected ones answered with the rejection), recorded calls are not run again, then the
    loop goes on and the journal follows it. If a call still awaits a decision, nothing runs
    and the result is ``awaiting_approval`` again. A finished journal returns its stored
    result and runs nothing. A run that was cancelled goes on from where it stopped (every
    call of it was answered). The wall-clock limit restarts at resume (time paused is not
    counted). ``on_event``, ``hooks`` and ``cancel`` work as in
    :func:`~primer.loop.loop.run_agent` (hooks also see the resumed calls; a hook that rewrites
    an approved call's input defeats the approval, so do not). An approval past its
    ``expires_at`` is refused: judged at ``now`` (an aware datetime; default the current UTC
    time), a call that has not started yet does not run, and the person may decide again.

    Raises :class:`~primer.harness.durable.journal.CheckpointError` for a bad journal, or when a
    call to run names a tool that ``tools`` lacks (resume with the tools the run started
    with), or when an approval has expired; nothing runs then.
    """
    if now is not None and (not isinstance(now, datetime) or now.tzinfo is None):
        raise ValueError(f"now must be a timezone-aware datetime (UTC), not {now!r}")
    recorder, journal = JournalRecorder.reopen(path)
    try:
        state = _state_of(journal, recorder, llm, tools, on_event, hooks, cancel)
        if journal.status == "finished":
            recorder.close()
            return _stored_result(journal, state)
        try:
            calls, settled, undecided = _plan(journal, state,
                                              now or datetime.now(timezone.utc))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            if isinstance(e, CheckpointError):
                raise
            raise CheckpointError(f"{journal.path}: a recorded call is malformed "
                                  f"({type(e).__name__}: {e}). Nothing was run.") from None
    except BaseException:
        recorder.close()
        raise
    if undecided:
        if any(b["id"] not in journal.calls or not journal.calls[b["id"]].needs_approval
               for b in undecided):  # the live tools gate a call the run did not: pause anew
            recorder.paused(state, calls)
        names = ", ".join(f"{b['id']} ({b['name']})" for b in undecided)
        stop = Stop(StopCause.AWAITING_APPROVAL, f"no decision yet for {names}; nothing was run")
        return finish(state, stop, state.last_reply, pending=undecided)
    with running(state):  # the current run, for tools that spend (sub-agents)
        return drive(state, _go_on(state, journal, calls, settled))


def _go_on(state: RunState, journal: Journal, calls: list[ToolUseBlock],
           settled: dict[str, ToolExecution]) -> Turns:
    """The resumed run: the paused reply's calls (those not settled) run and every result
    recorded, as the loop does after a reply, then the loop itself."""
    if calls:
        state.emit("resume", path=str(journal.path), calls=[b["id"] for b in calls])
        for c in journal.calls.values():
            if c.decision is not None and c.state != "done":
                state.emit("approval", step=state.model_calls, tool_use_id=c.tool_use_id,
                           name=c.name, approved=c.decision["approved"],
                           note=c.decision["note"])
        ran = yield ToolCalls(calls_to_run(state, calls, settled))
        stop = add_results(state, calls, ran, settled)
        if stop is not None:
            return finish(state, stop)
    return (yield from continue_run(state))


def _state_of(journal: Journal, recorder: JournalRecorder, llm: LLM,
              tools: ToolRegistry | Iterable[Tool], on_event: EventSink | None,
              hooks: Hooks | Iterable[Hooks] | None, cancel: CancelSignal | None) -> RunState:
    try:
        config = AgentConfig.from_dict(journal.header["config"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{journal.path}: its config is not usable ({e}). Nothing was "
                              f"run.") from None
    registry = registry_for_run(tools, config.offer_handoff)
    hook_list = as_hook_list(hooks)
    try:
        system = journal.state["system"]
        if not isinstance(system, str):
            raise TypeError("its system prompt is not text")
        inputs = RunInputs(config, system, registry, registry.definitions(), llm,
                           ToolRunner.from_config(registry, config, hook_list), recorder,
                           on_event, on_event, None, cancel, block_problem)
        state = RunState.from_dict(journal.state, inputs)
        state.started_at = config.clock()
        if hook_list:
            state.inputs = dataclasses.replace(
                inputs, on_event=after_reply_sink(hook_list, state, on_event))
        return state
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        raise CheckpointError(f"{journal.path}: its saved run is malformed ({type(e).__name__}: "
                              f"{e}). Nothing was run.") from None


def _stored_result(journal: Journal, state: RunState) -> AgentResult:
    r = journal.result or {}
    return AgentResult(r.get("final_text"), StopCause(r["stop_cause"]), state.steps,
                       state.usage, state.cost_usd, state.messages, r["summary"],
                       r["stop_detail"], [], checkpoint=str(journal.path))


def _plan(journal: Journal, state: RunState, now: datetime
          ) -> tuple[list[ToolUseBlock], dict[str, ToolExecution], list[ToolUseBlock]]:
    """What the reply the run stopped on needs: ``(its calls, results settled without
    running now, calls still awaiting a decision)``; no calls when it was answered.

    Raises :class:`CheckpointError` for a journal whose records contradict the reply, an
    approved input that is not the reply's, an approval past its expiry at ``now`` for a
    call not yet started, or a call whose tool is missing.
    """
    step = state.steps[-1] if state.steps else None
    if step is None or not step.reply.tool_uses or state.messages[-1]["role"] != "assistant":
        return [], {}, []
    reply, registry = step.reply, state.inputs.registry
    calls = reply.tool_uses
    by_id = {b["id"]: b for b in calls}
    rec: CallRecord | None
    for rec in journal.calls.values():
        b = by_id.get(rec.tool_use_id)
        if b is None or b.get("name") != rec.name or input_sha256(b.get("input")) != \
                input_sha256(rec.input):
            raise CheckpointError(f"{journal.path}: call {rec.tool_use_id} differs from what "
                                  f"the model asked for. Nothing was run.")
    settled: dict[str, ToolExecution] = {}
    undecided: list[ToolUseBlock] = []
    missing: set[str] = set()
    for b in calls:
        rec = journal.calls.get(b["id"])
        tool = registry.get(b["name"])
        decision = rec.decision if rec is not None else None
        if rec is not None and rec.state == "done" and rec.result is not None:
            settled[b["id"]] = ToolExecution(**rec.result)
        elif decision is not None and not decision["approved"]:
            settled[b["id"]] = _rejected(b, decision)
        elif (call_needs_approval(registry, b, step.refused) if tool is not None
              else rec is not None and rec.needs_approval) and decision is None:
            undecided.append(b)
        elif step.refused and b["id"] in step.refused:
            continue  # refused where the reply entered the loop: answered, never run
        elif tool is None:
            missing.add(str(b["name"]))
        elif decision is not None and decision["input_sha256"] != input_sha256(b["input"]):
            raise CheckpointError(f"{journal.path}: the input of call {b['id']} ({b['name']}) is "
                                  f"not the input the person approved or rejected. Nothing was "
                                  f"run.")
        elif decision is not None and rec is not None and rec.state != "started" \
                and expired(decision, now):
            raise CheckpointError(
                f"{journal.path}: the approval of call {b['id']} ({b['name']}) by "
                f"{decision['approver'] or 'an unrecorded approver'} expired at "
                f"{decision['expires_at']}, so the call was not run. Record a new decision "
                f"(`python -m primer approve {journal.path} {b['id']} --yes` or `--no`) to "
                f"go on. Nothing was run.")
        elif rec is not None and rec.state == "started" and tool.side_effecting \
                and not tool.takes_idempotency_key:
            settled[b["id"]] = _unknown_outcome(b)
    if missing and not undecided:
        raise CheckpointError(
            f"{journal.path}: the run needs the tool(s) {', '.join(sorted(missing))}, which are "
            f"not among the tools given to resume ({', '.join(registry.names)}). Resume "
            f"with the tools the run started with. Nothing was run.")
    return calls, settled, undecided


def _rejected(b: ToolUseBlock, decision: dict[str, Any]) -> ToolExecution:
    note = f" Their note: {decision['note'].rstrip('.')}." if decision["note"] else ""
    return ToolExecution(b["id"], b["name"], b["input"],
                         f"A person rejected this call to {b['name']}; it did not run.{note} "
                         f"Do not retry it; choose another way to help, or explain to the user "
                         f"what happens next.", True, "rejected")


def _unknown_outcome(b: ToolUseBlock) -> ToolExecution:
    return ToolExecution(b["id"], b["name"], b["input"],
                         f"{b['name']} started before the process stopped and its outcome is "
                         f"unknown; it was not run again, because it takes no idempotency key. "
                         f"Check the current state before any retry.", True, "unknown_outcome")
