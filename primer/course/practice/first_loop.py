"""Lesson 03's exercise: the ten-line loop over the Messages API shape, with a step limit.

The learner writes the loop of the coding round (:mod:`primer.course.exercises`) before it
has any exit but two, with the same signature, so lesson 05 can extend the very same
function until it passes the whole battery::

    def my_loop(model, task, tools, *, max_steps, token_budget) -> dict:
        # model(messages, tools.definitions) -> {"content", "stop_reason", "usage"}
        # returns {"answer": str | None, "stop_cause": "end_turn" | "max_steps"}

What lesson 03's loop must do: send the whole history and the tool definitions on every
call; append each reply as an ``assistant`` message, exactly as returned; on ``end_turn``
return the text of every text block, joined; otherwise run every ``tool_use`` and answer all
of them in ONE ``user`` message of ``tool_result`` blocks, in request order (a tool that
fails is an ``is_error`` result, not a crash); make at most ``max_steps`` model calls.
``token_budget`` is read in lesson 05.

:func:`check_first_loop` runs five behaviours of the battery (:data:`FIRST_LOOP`), judged
exactly as :func:`~primer.course.exercises.check_loop` judges them, except that the step
limit accepts a loop that still runs the tools of its last reply (lesson 05 adds that rule,
as "model that wanders").
"""

from __future__ import annotations

import dataclasses

from primer.course.exercises import BEHAVIOURS, Behaviour, LoopFn, LoopReport, Run, check_loop

#: The behaviours of the battery lesson 03's loop is held to, by name.
FIRST_LOOP_NAMES = ("happy path", "two calls in one reply", "answer in two text blocks",
                    "wrong argument")


def _calls(n: int) -> str:
    return f"{n} model call{'s' if n != 1 else ''}"


def judge_step_limit(run: Run) -> str | None:
    """Stops with ``max_steps`` and no answer after exactly ``run.max_steps`` model calls.

    The model (the order world's "wanderer") never finishes. Unlike the battery's "model
    that wanders", running the tools of the last allowed reply is not a failure here.
    """
    limit, got = run.max_steps, run.result["stop_cause"]
    if run.calls > limit:
        return (f"made {_calls(run.calls)} with max_steps={limit}; stop after exactly "
                f"{limit}")
    if got != "max_steps":
        return (f"stopped with {got!r} after {_calls(run.calls)}; the model never finishes, "
                f"so the loop must stop with 'max_steps' once it has made {limit} calls")
    if run.calls < limit:
        return (f"stopped with 'max_steps' after {_calls(run.calls)} with max_steps={limit}; "
                f"the model had not finished, so make all {limit} calls before stopping")
    if run.result["answer"] is not None:
        return ("stopped with 'max_steps' but returned an answer; a stopped run's answer "
                "must be None")
    return None


def did_stop_at_limit(run: Run) -> str:
    """What a passing step-limit run did: its calls, and that it stopped."""
    return (f"stopped with max_steps after {_calls(run.calls)} (max_steps={run.max_steps}) "
            f"and no answer")


def _first_loop() -> tuple[Behaviour, ...]:
    by_name = {b.name: b for b in BEHAVIOURS}
    wanders = by_name["model that wanders"]
    step_limit = dataclasses.replace(wanders, name="step limit", judge=judge_step_limit,
                                     passed=did_stop_at_limit)
    return (*(by_name[n] for n in FIRST_LOOP_NAMES), step_limit)


#: Lesson 03's behaviours, in the order they are printed: four of the battery's, then the
#: step limit (the battery's wandering model, judged by :func:`judge_step_limit`).
FIRST_LOOP: tuple[Behaviour, ...] = _first_loop()


def check_first_loop(fn: LoopFn, *, show: bool = True) -> LoopReport:
    """Run lesson 03's loop ``fn`` through :data:`FIRST_LOOP` and judge each run.

    ``fn(model, task, tools, *, max_steps, token_budget) -> {"answer", "stop_cause"}``,
    the coding round's signature (see :mod:`primer.course.exercises`). Prints one
    ``PASS``/``FAIL`` line per behaviour and ``score: k/5`` when ``show``; returns the
    :class:`~primer.course.exercises.LoopReport`. Never raises because of ``fn`` (its
    exceptions, broken histories and runaway loops are failures); ``TypeError`` when ``fn``
    is not callable.
    """
    return check_loop(fn, behaviours=FIRST_LOOP, show=show)
