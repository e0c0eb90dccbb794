"""Resume: continue a run from its checkpoint journal, through the loop's own steps.

:func:`resume` reads the journal back into a :class:`~primer.loop.state.RunState` (the
lock held throughout), decides what each call of the reply the run stopped on needs, runs
them through the loop's one results path (:func:`~primer.loop.steps.add_results`) and
then the loop itself (:func:`~primer.loop.loop.continue_run`), on the caller's thread
(:func:`~primer.loop.loop.drive`). It has no steps of its own. The rules for the paused
reply's calls:

* whether a call changes the world or takes an idempotency key comes from the *live* tools
  given to resume, never from the file;
* whether a call needs approval is the gate's answer recorded when the run paused (its
  predicate or rules were asked once, :meth:`~primer.loop.state.Step.approval_reason`), or
  yes when the file or a live tool marked ``needs_approval=True`` says so; a predicate is
  not asked again, so one whose answer would now differ changes nothing;
* an approved call runs with exactly the arguments the person saw (the SHA-256 of the input
  stored with the decision is checked again first); an edited one with the person's input
  (its hash and the live ``input_schema`` checked), and the model is told of the change;
* an approval holds only for the tool definition and approval rules it was made on: when
  the live tool's definition (name, description, ``input_schema``) or its rules' version
  differ, resume records a fresh pause, refuses, and asks for a fresh decision (fail closed);
* a rejected call gets an error ``tool_result`` saying a person rejected it, with the note;
  an answered one (``respond``) gets the person's text, and its tool does not run;
* a call that needs approval and has no decision never runs (fail closed): the run stays
  paused;
* nothing recorded ``done`` runs again; a side-effecting call recorded ``started`` with no
  result runs again with the same idempotency key if its tool takes one (the world
  deduplicates it), and otherwise does not run: the model is told the outcome is unknown;
* resuming a finished journal returns its stored result and runs nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from primer.loop.config import AgentConfig
from primer.loop.loop import Turns, continue_run, drive
from primer.loop.messages import ToolUseBlock
from primer.loop.model import LLM, EventSink
from primer.loop.result import AgentResult, finish
from primer.loop.state import (
    CancelSignal,
    RunInputs,
    RunState,
    Step,
    Stop,
    StopCause,
    registry_for_run,
)
from primer.loop.steps import ToolCalls, add_results, calls_to_run
from primer.loop.tools import Tool, ToolExecution, ToolRegistry

from ..allowance import running
from ..approval_rules import rules_version
from ..hooks import Hooks, after_reply_sink, as_hook_list
from ..request_check import block_problem
from ..runner import ToolRunner
from .journal import (
    CallRecord,
    CheckpointError,
    Journal,
    definition_sha256,
    expired,
    input_sha256,
)
from .recorder import JournalRecorder


def resume(path: str | Path, llm: LLM, tools: ToolRegistry | Iterable[Tool] = (), *,
           on_event: EventSink | None = None,
           hooks: Hooks | Iterable[Hooks] | None = None,
           cancel: CancelSignal | None = None, now: datetime | None = None,
           session: tuple[str, int] | None = None) -> AgentResult:
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
    With ``session`` (``(session id, turn)``, as a session's turn passes it) only a journal
    written for that turn is resumed. A journal resumes only as its own run: one put at
    another run's name, or an older copy of a run that went on, is refused.

    Raises :class:`~primer.harness.durable.journal.CheckpointError` for a bad journal, or when a
    call to run names a tool that ``tools`` lacks (resume with the tools the run started
    with), or when an approval has expired, or was made on another definition of its tool or
    another version of its approval rules (a fresh pause is recorded first, so the person can
    decide again); nothing runs then.
    """
    if now is not None and (not isinstance(now, datetime) or now.tzinfo is None):
        raise ValueError(f"now must be a timezone-aware datetime (UTC), not {now!r}")
    recorder, journal = JournalRecorder.reopen(path, session=session)
    try:
        state = _state_of(journal, recorder, llm, tools, on_event, hooks, cancel)
        if journal.status == "finished":
            recorder.close()
            return _stored_result(journal, state)
        try:
            plan = _plan(journal, state, now or datetime.now(timezone.utc))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            if isinstance(e, CheckpointError):
                raise
            raise CheckpointError(f"{journal.path}: a recorded call is malformed "
                                  f"({type(e).__name__}: {e}). Nothing was run.") from None
        if plan.stale:
            _refuse_stale(journal, recorder, state, plan)
    except BaseException:
        recorder.close()
        raise
    if plan.undecided:
        if plan.repause:  # the pause's record is not the call as it is now: record it anew
            recorder.paused(state, plan.calls)
        names = ", ".join(f"{b['id']} ({b['name']})" for b in plan.undecided)
        stop = Stop(StopCause.AWAITING_APPROVAL, f"no decision yet for {names}; nothing was run")
        return finish(state, stop, state.last_reply, pending=plan.undecided)
    if plan.edits:
        state.inputs = dataclasses.replace(
            state.inputs, runner=_with_edits(state.inputs.runner, plan.edits))
    with running(state):  # the current run, for tools that spend (sub-agents)
        return drive(state, _go_on(state, journal, plan.calls, plan.settled))


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
                           action=c.decision["action"], note=c.decision["note"])
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


@dataclass
class _Plan:
    """What the reply the run stopped on needs (see :func:`_plan`)."""

    calls: list[ToolUseBlock] = field(default_factory=list)  # its calls (none if answered)
    settled: dict[str, ToolExecution] = field(default_factory=dict)  # answered without running
    undecided: list[ToolUseBlock] = field(default_factory=list)  # awaiting a decision
    edits: dict[str, Any] = field(default_factory=dict)  # tool_use id -> the person's input
    stale: list[tuple[ToolUseBlock, str]] = field(default_factory=list)  # approval, why void
    repause: bool = False  # an undecided call's record names another tool or rules: renew it


def _plan(journal: Journal, state: RunState, now: datetime) -> _Plan:
    """What the reply the run stopped on needs: its calls, the results settled without
    running now, the calls still awaiting a decision, edited inputs, and approvals made on
    another tool definition or other rules (``stale``); nothing when it was answered.

    Raises :class:`CheckpointError` for a journal whose records contradict the reply, a
    decided input that is not the reply's, an edit whose input does not match its hash or
    the live ``input_schema``, an approval past its expiry at ``now`` for a call not yet
    started, or a call whose tool is missing.
    """
    step = state.steps[-1] if state.steps else None
    if step is None or not step.reply.tool_uses or state.messages[-1]["role"] != "assistant":
        return _Plan()
    reply, registry = step.reply, state.inputs.registry
    plan = _Plan(reply.tool_uses)
    by_id = {b["id"]: b for b in plan.calls}
    rec: CallRecord | None
    for rec in journal.calls.values():
        b = by_id.get(rec.tool_use_id)
        if b is None or b.get("name") != rec.name or input_sha256(b.get("input")) != \
                input_sha256(rec.input):
            raise CheckpointError(f"{journal.path}: call {rec.tool_use_id} differs from what "
                                  f"the model asked for. Nothing was run.")
    missing: set[str] = set()
    for b in plan.calls:
        rec = journal.calls.get(b["id"])
        tool = registry.get(b["name"])
        decision = rec.decision if rec is not None else None
        if rec is not None and rec.state == "done" and rec.result is not None:
            plan.settled[b["id"]] = ToolExecution(**rec.result)
            continue
        if step.refused and b["id"] in step.refused:
            continue  # refused where the reply entered the loop: answered, never run
        if decision is not None and decision["input_sha256"] != input_sha256(b["input"]):
            raise CheckpointError(f"{journal.path}: the input of call {b['id']} ({b['name']}) is "
                                  f"not the input the person decided on. Nothing was run.")
        action = decision["action"] if decision is not None else None
        if action in ("reject", "respond"):  # (safe on any tool or rules: nothing runs)
            plan.settled[b["id"]] = (_rejected if action == "reject" else _responded)(
                b, decision or {})
            continue
        if decision is None:
            if _gate(step, registry, b, rec, tool) is not None:
                plan.undecided.append(b)
                plan.repause |= rec is None or not rec.needs_approval or (
                    tool is not None and rec.tool_sha256 != definition_sha256(tool.definition())
                    or rec.rules_version != rules_version(tool))
                continue
        if tool is None:
            missing.add(str(b["name"]))
            continue
        if decision is not None:
            why = _changed_since(decision, tool)
            if why:
                plan.stale.append((b, why))
                continue
            if rec is not None and rec.state != "started" and expired(decision, now):
                raise CheckpointError(
                    f"{journal.path}: the approval of call {b['id']} ({b['name']}) by "
                    f"{decision['approver'] or 'an unrecorded approver'} expired at "
                    f"{decision['expires_at']}, so the call was not run. Record a new decision "
                    f"(`python -m primer approve {journal.path} {b['id']} --yes` or `--no`) "
                    f"to go on. Nothing was run.")
            if action == "edit":
                plan.edits[b["id"]] = _edited_input(journal, b, decision, tool)
        if rec is not None and rec.state == "started" and tool.side_effecting \
                and not tool.takes_idempotency_key:
            plan.settled[b["id"]] = _unknown_outcome(b)
    if missing and not plan.undecided:
        raise CheckpointError(
            f"{journal.path}: the run needs the tool(s) {', '.join(sorted(missing))}, which are "
            f"not among the tools given to resume ({', '.join(registry.names)}). Resume "
            f"with the tools the run started with. Nothing was run.")
    return plan


def _gate(step: Step, registry: ToolRegistry, b: ToolUseBlock, rec: CallRecord | None,
          tool: Tool | None) -> str | None:
    """Whether an undecided call waits for a person: the gate's recorded answer (asked now,
    once, only for a step that has none), or yes when the pause's record or a live tool's
    ``needs_approval=True`` says so (then recorded on the step, so a new pause shows it)."""
    reason = step.approval_reason(registry, b)
    if reason is None and (rec is not None and rec.needs_approval):
        reason = rec.reason
    if reason is None and tool is not None and tool.needs_approval is True:
        reason = f"{tool.name} needs a person's approval for every call now"
    if reason is not None and step.gate is not None:
        step.gate[b["id"]] = reason
    return reason


def _changed_since(decision: dict[str, Any], tool: Tool) -> str:
    """Why an approval made on the pause's record of ``tool`` no longer holds for the live
    ``tool``, or ``""``: its definition or its approval rules' version changed."""
    problems = []
    if decision.get("tool_sha256") != definition_sha256(tool.definition()):
        problems.append(f"the definition of {tool.name} (name, description or "
                        f"input_schema) changed since the decision was made")
    then, now = decision.get("rules_version"), rules_version(tool)
    if then != now:
        problems.append(f"the approval rules of {tool.name} changed from version "
                        f"{then or '(none)'} to {now or '(none)'}")
    return " and ".join(problems)


def _refuse_stale(journal: Journal, recorder: JournalRecorder, state: RunState,
                  plan: _Plan) -> None:
    """Record a fresh pause on the live tools (the stale approvals do not carry over to it:
    :func:`~primer.harness.durable.journal.decision_holds`) and raise the
    :class:`CheckpointError` that asks for a fresh decision. Nothing runs."""
    step = state.steps[-1]
    if step.gate is None:
        step.gate = {}
    for b, why in plan.stale:
        step.gate[b["id"]] = f"{why}; a person must decide again"
    recorder.paused(state, plan.calls)
    b, why = plan.stale[0]
    more = f" ({len(plan.stale) - 1} more call(s) likewise)" if len(plan.stale) > 1 else ""
    raise CheckpointError(
        f"{journal.path}: call {b['id']} ({b['name']}) was approved, but {why}, so the "
        f"approval no longer holds and the call was not run{more}. Nothing was run. A fresh "
        f"decision is needed: `python -m primer approvals list {journal.path}` shows the call "
        f"as it is now; `python -m primer approve {journal.path} {b['id']} --yes` or `--no`.")


def _edited_input(journal: Journal, b: ToolUseBlock, decision: dict[str, Any],
                  tool: Tool) -> Any:
    """The input a person gave an edited call, checked against its hash and the live
    tool's ``input_schema``; :class:`CheckpointError` if either fails."""
    new = decision.get("edited_input")
    if decision.get("edited_sha256") != input_sha256(new):
        raise CheckpointError(f"{journal.path}: the edited input of call {b['id']} "
                              f"({b['name']}) does not match its hash. Nothing was run.")
    problem = tool.input_errors(new)
    if problem:
        raise CheckpointError(f"{journal.path}: the input a person gave call {b['id']} is not "
                              f"valid for the tool as it is now ({problem}) Nothing was run; "
                              f"record a fresh decision.")
    return new


def _with_edits(runner: Any, edits: dict[str, Any]) -> Any:
    """``runner`` that runs an edited call with the person's input and tells the model so."""
    def run(block: ToolUseBlock) -> ToolExecution:
        new = edits.get(block.get("id"))
        if new is None:
            return runner(block)
        e: ToolExecution = runner({**block, "input": new})
        shown = json.dumps(new, ensure_ascii=False, sort_keys=True)
        return dataclasses.replace(e, content=f"A person changed the input of this call to "
                                              f"{shown} before it ran. Result: {e.content}")
    return run


def _rejected(b: ToolUseBlock, decision: dict[str, Any]) -> ToolExecution:
    note = f" Their note: {decision['note'].rstrip('.')}." if decision["note"] else ""
    return ToolExecution(b["id"], b["name"], b["input"],
                         f"A person rejected this call to {b['name']}; it did not run.{note} "
                         f"Do not retry it; choose another way to help, or explain to the user "
                         f"what happens next.", True, "rejected")


def _responded(b: ToolUseBlock, decision: dict[str, Any]) -> ToolExecution:
    return ToolExecution(b["id"], b["name"], b["input"],
                         f"{b['name']} did not run: a person answered in its place. Their "
                         f"answer: {decision['note']}", False, "not_run")


def _unknown_outcome(b: ToolUseBlock) -> ToolExecution:
    return ToolExecution(b["id"], b["name"], b["input"],
                         f"{b['name']} started before the process stopped and its outcome is "
                         f"unknown; it was not run again, because it takes no idempotency key. "
                         f"Check the current state before any retry.", True, "unknown_outcome")
