"""Eval suites from a YAML or JSON file, so a user's own tasks need no Python.

A suite file holds ``tasks`` (a list) and optional ``defaults`` merged into every task (a
task's own keys win; ``limits`` and ``meta`` are merged key by key)::

    defaults:
      limits: {max_steps: 6}
    tasks:
      - name: orders
        input: What does order A123 cost in total with 18% GST?
        check:                                  # every entry must pass
          - answer_contains: ["5900"]           # one text, or a list of texts
          - stop_cause_is: end_turn
          - tools_in_order: [get_order, calculator]   # or {names: [...], exact: true}
          - cost_under: 0.05                    # USD
          - model_graded: The answer states the total in rupees.   # needs a judge
        expected_path: [get_order, get_order, calculator]   # a list: exactly, in order
        # expected_path: {any_order: [search_kb, get_pto_balance]}   # a set
        system: You answer questions about orders.
        meta: {world: demo, demo: orders}       # whatever your model and tool factories read

``limits`` are :class:`~primer.loop.config.AgentConfig` settings, checked when the file is
loaded. ``model_graded`` entries are judged by the ``judge`` model given to
:func:`load_suite` (``ValueError`` if there is none). Which model answers and which tools it
has stay in code: the ``make_llm`` and ``tools`` factories given to ``run_evals`` read each
task's ``meta``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from primer.harness.files import UnreadableFile, read_text
from primer.loop.config import AgentConfig
from primer.loop.model import LLM
from primer.loop.text import MAX_DEPTH, JSONRefused, parse_json

from .run import EvalTask
from .scorers import AnswerContains, CostUnder, ModelGraded, Scorer, StopCauseIs, ToolsInOrder


class SuiteError(ValueError):
    """A suite file that cannot be loaded: the message names the file, the task and the fix."""


class _AnyOrder(BaseModel):
    model_config = ConfigDict(extra="forbid")
    any_order: list[str] = Field(min_length=1)


class _TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    input: str = Field(min_length=1)
    check: list[dict[str, Any]] | dict[str, Any] = Field(min_length=1)
    expected_path: list[str] | _AnyOrder | None = None
    limits: dict[str, Any] = Field(default_factory=dict)
    system: str = ""
    meta: dict[str, Any] = Field(default_factory=dict)


def _texts(arg: Any) -> list[str]:
    return [arg] if isinstance(arg, str) else list(arg)


def _tools_in_order(arg: Any) -> ToolsInOrder:
    if isinstance(arg, dict):
        extra = set(arg) - {"names", "exact"}
        if extra:
            raise ValueError(f"tools_in_order takes names and exact (got {sorted(extra)})")
        return ToolsInOrder(*_texts(arg.get("names", [])), exact=bool(arg.get("exact")))
    return ToolsInOrder(*_texts(arg))


#: Scorer name in a suite file → how to build it from its argument (``judge`` for the model).
SCORERS: dict[str, Callable[[Any, LLM | None], Scorer]] = {
    "answer_contains": lambda arg, judge: AnswerContains(*_texts(arg)),
    "stop_cause_is": lambda arg, judge: StopCauseIs(str(arg)),
    "tools_in_order": lambda arg, judge: _tools_in_order(arg),
    "cost_under": lambda arg, judge: CostUnder(float(arg)),
    "model_graded": lambda arg, judge: _model_graded(arg, judge),
}


def _model_graded(arg: Any, judge: LLM | None) -> ModelGraded:
    if judge is None:
        raise ValueError("model_graded needs a judge model: load_suite(..., judge=LLM) "
                         "(on the command line: --judge)")
    return ModelGraded(judge, str(arg))


def load_suite(path: str | os.PathLike[str], *, judge: LLM | None = None,
               complete: Callable[[dict[str, Any]], dict[str, Any]] | None = None
               ) -> list[EvalTask]:
    """The tasks of the suite file at ``path`` (``.yaml``, ``.yml`` or ``.json``).

    ``judge`` grades the ``model_graded`` checks. ``complete(raw_task)``, if given, may fill
    in a task's missing fields before it is checked (e.g. a scenario's input and system
    prompt from its ``meta``). Raises :class:`SuiteError` naming the file, the task and the
    field for a missing file, a syntax error, an unknown key or scorer, a bad limit or two
    tasks with one name; nothing is run.
    """
    path = Path(path)
    data = _read(path)
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise SuiteError(f"{path}: a suite file is a mapping with a 'tasks' list")
    unknown = set(data) - {"tasks", "defaults", "name", "description"}
    if unknown:
        raise SuiteError(f"{path}: unknown top-level keys {sorted(unknown)} (known: tasks, "
                         f"defaults, name, description)")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise SuiteError(f"{path}: 'defaults' must be a mapping of task fields")
    tasks: list[EvalTask] = []
    for i, raw in enumerate(data["tasks"], start=1):
        label = f"task {i}" + (f" ({raw.get('name')})" if isinstance(raw, dict)
                               and raw.get("name") else "")
        try:
            tasks.append(_task(_merge(defaults, raw), judge, complete))
        except (ValidationError, ValueError, TypeError) as e:
            raise SuiteError(f"{path}: {label}: {_say(e)}") from None
    names = [t.name for t in tasks]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SuiteError(f"{path}: task names must be unique; repeated: {dupes}")
    if not tasks:
        raise SuiteError(f"{path}: the suite has no tasks")
    return tasks


def _read(path: Path) -> Any:
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise SuiteError(f"{path}: a suite file ends in .yaml, .yml or .json")
    try:
        text = read_text(path)
    except UnreadableFile as e:
        raise SuiteError(f"{path}: no such suite file" if e.missing else str(e)) from None
    if suffix == ".json":
        try:
            return parse_json(text)
        except JSONRefused as e:
            raise SuiteError(f"{path}: {e.reason}") from None
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        """PyYAML's safe loader, refusing nodes nested deeper than the JSON limit (its
        composer recurses once per level: 100,000 brackets would exhaust the stack)."""

        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    mark = self.peek_event().start_mark
                    raise SuiteError(f"{path}: nested deeper than {MAX_DEPTH} levels (line "
                                     f"{mark.line + 1} column {mark.column + 1})")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    try:
        return yaml.load(text, Loader=BoundedLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as e:
        raise SuiteError(f"{path}: not valid YAML ({' '.join(str(e).split())})") from None


def _merge(defaults: dict[str, Any], raw: Any) -> Any:
    if not isinstance(raw, dict):
        return raw
    merged = {**defaults, **raw}
    for key in ("limits", "meta"):
        if isinstance(defaults.get(key), dict) and isinstance(raw.get(key), dict):
            merged[key] = {**defaults[key], **raw[key]}
    return merged


def _task(raw: Any, judge: LLM | None,
          complete: Callable[[dict[str, Any]], dict[str, Any]] | None) -> EvalTask:
    if not isinstance(raw, dict):
        raise ValueError(f"a task is a mapping of fields (got {type(raw).__name__})")
    spec = _TaskSpec.model_validate(complete(raw) if complete else raw)
    if spec.limits:
        AgentConfig.from_dict({**AgentConfig().to_dict(), **spec.limits})  # ValueError
    entries = spec.check if isinstance(spec.check, list) else [
        {k: v} for k, v in spec.check.items()]
    scorers: list[Scorer] = []
    for entry in entries:
        if len(entry) != 1:
            raise ValueError(f"check: each entry is one 'scorer: argument' pair (got "
                             f"{sorted(entry)})")
        (kind, arg), = entry.items()
        if kind not in SCORERS:
            raise ValueError(f"check: unknown scorer {kind!r}; known: {', '.join(SCORERS)}")
        scorers.append(SCORERS[kind](arg, judge))
    path = spec.expected_path
    expected = frozenset(path.any_order) if isinstance(path, _AnyOrder) else path
    return EvalTask(spec.name, spec.input, scorers, expected, spec.limits, spec.system,
                    spec.meta)


def _say(e: Exception) -> str:
    if isinstance(e, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'task'}: {err['msg']}"
                         for err in e.errors())
    return str(e)
