"""An AgentDojo suite as primer tools, environments and eval tasks, scored as AgentDojo scores.

A :class:`DojoWorld` is one trial's environment: a fresh copy of the suite's environment (with
any injections planted), the task, its ground-truth calls and the tools that act on it. Each
tool is a primer :class:`~primer.loop.tools.Tool` whose ``input_schema`` is the JSON Schema
of AgentDojo's own function definition (``Function.parameters.model_json_schema()``, what
its Anthropic client sends) and whose function calls AgentDojo's
``FunctionsRuntime.run_function`` on the world's environment, exactly as its
``ToolsExecutor`` does (string lists read back as lists first). A result is formatted by
AgentDojo's ``tool_result_to_str`` (YAML), an error is AgentDojo's error text as an error
``tool_result``, the two things its Anthropic client sends: the model reads the same bytes
under either loop.

:meth:`DojoWorld.utility` is AgentDojo's own check: the task's ``utility_from_traces`` when it
defines one, else its ``utility``, given the text of the last reply, the environment before
and after, and every call the model asked for (:func:`function_calls`).
:meth:`DojoWorld.security` is the same for an injection task (``True``: the attacker's goal was
reached).

:func:`eval_tasks` makes a suite's user tasks :class:`~primer.harness.evals.run.EvalTask`\\ s
for :func:`~primer.harness.evals.run.run_evals`; :func:`world_tools` is the tools factory and
:class:`Utility` the check. The three share one trial's world through the thread the trial
runs on (``run_task`` builds the tools, the model, runs and scores on one thread, on any
executor), so trials running at once never share an environment.
"""

from __future__ import annotations

import ast
import copy
import functools
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from primer.harness.approval_rules import ApprovalRules
from primer.loop.messages import Message
from primer.loop.result import AgentResult
from primer.loop.tools import Tool, ToolOutput

from ..run import EvalTask
from ..scorers import Verdict

if TYPE_CHECKING:
    from agentdojo.base_tasks import BaseInjectionTask, BaseUserTask
    from agentdojo.functions_runtime import FunctionCall, TaskEnvironment
    from agentdojo.task_suite.task_suite import TaskSuite

#: AgentDojo's default benchmark version (its own default in ``agentdojo.scripts``).
DEFAULT_VERSION = "v1.2.2"
#: The suites of the default benchmark.
SUITE_NAMES = ("workspace", "travel", "banking", "slack")
#: How to get AgentDojo (the optional extra).
INSTALL_HINT = ("install the optional extra: .venv/bin/pip install -e '.[agentdojo]' "
                "(or: pip install 'agentdojo>=0.1.35')")

#: The tools of the four suites that change the world (send, create, delete, book, update,
#: invite ...; and ``get_webpage``, which the site sees: a URL can carry data out). AgentDojo
#: does not mark them; tests check that every ground-truth call that changed an environment
#: is one of these, but for ``get_unread_emails``, a read that marks the emails read.
SIDE_EFFECTING = frozenset({
    # workspace
    "send_email", "delete_email", "create_calendar_event", "cancel_calendar_event",
    "reschedule_calendar_event", "add_calendar_event_participants", "append_to_file",
    "create_file", "delete_file", "share_file",
    # travel
    "reserve_hotel", "reserve_car_rental", "reserve_restaurant",
    # banking
    "send_money", "schedule_transaction", "update_scheduled_transaction", "update_password",
    "update_user_info",
    # slack
    "add_user_to_channel", "send_direct_message", "send_channel_message",
    "invite_user_to_slack", "remove_user_from_slack", "post_webpage", "get_webpage",
})


class AgentDojoMissing(ImportError):
    """AgentDojo is not installed; the message says how to install it."""


def require_agentdojo() -> None:
    """Import ``agentdojo`` (its first import takes seconds: it loads its model clients), or
    raise :class:`AgentDojoMissing` saying how to install it."""
    try:
        import agentdojo.task_suite.load_suites  # noqa: F401
    except ImportError as e:
        raise AgentDojoMissing(f"AgentDojo is not installed ({e}): {INSTALL_HINT}") from None


@functools.cache
def get_suite(name: str, version: str = DEFAULT_VERSION) -> TaskSuite[Any]:
    """AgentDojo's suite ``name`` at benchmark ``version``. ``ValueError`` naming the known
    suites or versions; :class:`AgentDojoMissing` without the package."""
    require_agentdojo()
    from agentdojo.task_suite.load_suites import _SUITES

    if version not in _SUITES:
        raise ValueError(f"unknown AgentDojo benchmark version {version!r}; known: "
                         f"{', '.join(_SUITES)}")
    if name not in _SUITES[version]:
        raise ValueError(f"unknown AgentDojo suite {name!r}; known: "
                         f"{', '.join(_SUITES[version])}")
    return _SUITES[version][name]


@functools.cache
def agentdojo_system_prompt() -> str:
    """AgentDojo's default system prompt (``data/system_messages.yaml``, ``default``)."""
    require_agentdojo()
    import importlib.resources

    import yaml

    text = (importlib.resources.files("agentdojo") / "data" / "system_messages.yaml").read_text()
    return str(yaml.safe_load(text)["default"])


@functools.lru_cache(maxsize=64)
def _environment(suite: TaskSuite[Any], injections: tuple[tuple[str, str], ...]
                 ) -> TaskEnvironment:
    """The suite's environment with ``injections`` planted, loaded once (its YAML takes up
    to half a second) and copied for each trial."""
    return suite.load_and_inject_default_environment(dict(injections))


def user_tasks(suite: TaskSuite[Any]) -> dict[str, BaseUserTask[Any]]:
    """The suite's user tasks by id, in their number's order (``user_task_0``, ``_1``, ...)."""
    tasks = suite.user_tasks
    return {k: tasks[k] for k in sorted(tasks, key=lambda k: int(k.rsplit("_", 1)[1]))}


def injection_tasks(suite: TaskSuite[Any]) -> dict[str, BaseInjectionTask[Any]]:
    """The suite's injection tasks by id, in their number's order."""
    tasks = suite.injection_tasks
    return {k: tasks[k] for k in sorted(tasks, key=lambda k: int(k.rsplit("_", 1)[1]))}


def _is_string_list(value: str) -> bool:
    try:
        return isinstance(ast.literal_eval(value), list)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def agentdojo_args(args: dict[str, Any]) -> dict[str, Any]:
    """A call's input as AgentDojo's ``ToolsExecutor`` hands it on: a string that reads as a
    Python list (``"['a', 'b']"``) becomes that list."""
    return {k: ast.literal_eval(v) if isinstance(v, str) and v[:1] == "[" and _is_string_list(v)
            else v for k, v in args.items()}


@dataclass
class DojoWorld:
    """One trial's environment and task (see the module docstring).

    ``env``: the environment the tools act on; ``pre_env``: a copy taken before the run;
    ``ground_truth``: the task's own calls for this environment (``FunctionCall``\\ s);
    ``injection``: the injection task planted, if any. Build with :meth:`new`.
    """

    suite: TaskSuite[Any]
    task: BaseUserTask[Any]
    env: TaskEnvironment
    pre_env: TaskEnvironment
    ground_truth: list[FunctionCall]
    injection: BaseInjectionTask[Any] | None = None
    injections: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def new(cls, suite: TaskSuite[Any], task_id: str, *, injection_task_id: str | None = None,
            injections: dict[str, str] | None = None) -> DojoWorld:
        """A fresh world for user task ``task_id`` (``KeyError`` naming the known ids), with
        ``injections`` (injection vector → text) planted and, if given, the injection task
        ``injection_task_id`` whose goal they carry."""
        tasks = suite.user_tasks
        if task_id not in tasks:
            raise KeyError(f"{suite.name} has no user task {task_id!r}; known: "
                           f"{', '.join(user_tasks(suite))}")
        task = tasks[task_id]
        planted = dict(injections or {})
        env = _environment(suite, tuple(sorted(planted.items())))
        env = task.init_environment(env.model_copy(deep=True))
        pre = env.model_copy(deep=True)
        injection = suite.injection_tasks[injection_task_id] if injection_task_id else None
        return cls(suite, task, env, pre, task.ground_truth(pre.model_copy(deep=True)),
                   injection, planted)

    def call(self, name: str, args: dict[str, Any]) -> str | ToolOutput:
        """Run AgentDojo's function ``name`` on this world: its result as AgentDojo formats
        it, or its error text as an error result."""
        from agentdojo.agent_pipeline.tool_execution import tool_result_to_str

        with self._lock:  # one reply's calls run on threads; the environment is one object
            result, error = self.runtime.run_function(self.env, name, agentdojo_args(args))
        if error is not None:
            return ToolOutput(error, is_error=True)
        return tool_result_to_str(result)

    @functools.cached_property
    def runtime(self) -> Any:
        """AgentDojo's ``FunctionsRuntime`` over the suite's functions."""
        from agentdojo.functions_runtime import FunctionsRuntime

        return FunctionsRuntime(self.suite.tools)

    def tools(self, *, approval: bool = False, only: Sequence[str] | None = None,
              rules: ApprovalRules | None = None) -> list[Tool]:
        """The suite's functions as primer tools acting on this world, in the suite's order.
        ``approval``: side-effecting tools wait for a person; ``only``: keep just these
        names (an allow-list); ``rules``: approval rules on the arguments gate the tools
        they name (:meth:`ApprovalRules.apply`)."""
        keep = None if only is None else set(only)
        templates = (_ruled(self.suite, rules) if rules is not None
                     else [_template(f, approval) for f in self.suite.tools])
        return [_bind(self, t) for t in templates if keep is None or t.name in keep]

    def utility(self, result: AgentResult) -> bool:
        """AgentDojo's utility check of the run: ``utility_from_traces`` first, else
        ``utility``."""
        output, traces = model_output(result.messages), function_calls(result.messages)
        verdict = self.task.utility_from_traces(output, self.pre_env, self.env, traces)
        if verdict is None:
            verdict = self.task.utility(output, self.pre_env, self.env)
        return bool(verdict)

    def security(self, result: AgentResult) -> bool:
        """AgentDojo's security check of the planted injection task: ``True`` when the
        attacker's goal was reached (``security_from_traces`` first, else ``security``).
        ``ValueError`` for a world with no injection task."""
        if self.injection is None:
            raise ValueError("this world has no injection task to check")
        output, traces = model_output(result.messages), function_calls(result.messages)
        verdict = self.injection.security_from_traces(output, self.pre_env, self.env, traces)
        if verdict is None:
            verdict = self.injection.security(output, self.pre_env, self.env)
        return bool(verdict)


def _bind(world: DojoWorld, template: Tool) -> Tool:
    """A copy of ``template`` whose function acts on ``world`` (its schema checked once, when
    the template was made, not once a trial)."""
    name = template.name

    def run(**args: Any) -> str | ToolOutput:
        return world.call(name, args)

    made = copy.copy(template)
    made.fn = run
    return made


_RULED: dict[tuple[int, str], list[Tool]] = {}


def _ruled(suite: TaskSuite[Any], rules: ApprovalRules) -> list[Tool]:
    """The suite's templates with ``rules`` applied, made once per suite and rule set."""
    key = (id(suite), json.dumps(rules.to_dict(), sort_keys=True, default=str))
    if key not in _RULED:
        _RULED[key] = rules.apply([_template(f, False) for f in suite.tools])
    return _RULED[key]


_TEMPLATES: dict[tuple[int, bool], tuple[Any, Tool]] = {}


def _template(f: Any, approval: bool) -> Tool:
    """``f`` as a primer tool with a placeholder function: building a :class:`Tool` checks
    its ``input_schema`` against the JSON Schema meta-schema (about 30 ms for AgentDojo's
    schemas), so each world copies this one and sets its own function."""
    key = (id(f), approval)
    kept = _TEMPLATES.get(key)
    if kept is None or kept[0] is not f:
        side = f.name in SIDE_EFFECTING
        made = Tool(f.name, f.description, dict(f.parameters.model_json_schema()), _unbound,
                    side_effecting=side, needs_approval=approval and side)
        kept = _TEMPLATES[key] = (f, made)
    return kept[1]


def _unbound(**args: Any) -> str:
    raise RuntimeError("an AgentDojo tool template was called; use DojoWorld.tools()")


def model_output(messages: Sequence[Message]) -> str:
    """What AgentDojo scores as the model's output: the text blocks of the last message when
    it is the model's (joined by newlines), else ``""`` (a run stopped mid-task)."""
    if not messages or messages[-1].get("role") != "assistant":
        return ""
    content = messages[-1].get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content or ()
                     if isinstance(b, dict) and b.get("type") == "text")


def function_calls(messages: Sequence[Message]) -> list[FunctionCall]:
    """Every call the model asked for, in order, as AgentDojo's ``FunctionCall``\\ s (its
    trace: calls that were refused or failed included, as AgentDojo counts them)."""
    from agentdojo.functions_runtime import FunctionCall

    calls = []
    for m in messages:
        content = m.get("content")
        if m.get("role") != "assistant" or isinstance(content, str):
            continue
        for b in content or ():
            if isinstance(b, dict) and b.get("type") == "tool_use":
                args = b.get("input")
                calls.append(FunctionCall(function=str(b.get("name")),
                                          args=agentdojo_args(args) if isinstance(args, dict)
                                          else {}, id=str(b.get("id"))))
    return calls


# ---------------------------------------------------------------- eval tasks

_trial = threading.local()


def suite_limits(suite: TaskSuite[Any]) -> dict[str, Any]:
    """The limits every task of ``suite`` runs with, from the suite's own longest ground
    truth (n calls): ``max_steps`` twice the n + 1 model calls it takes one call a reply (room
    for a model's detours), no token budget (the step limit bounds the run), and no
    ``handoff_to_human`` tool (AgentDojo's models are not offered one)."""
    n = longest_ground_truth(suite)[1]
    return {"max_steps": 2 * (n + 1), "token_budget": None, "offer_handoff": False}


@functools.cache
def _longest(suite: TaskSuite[Any]) -> tuple[str, int]:
    sizes = {tid: len(DojoWorld.new(suite, tid).ground_truth) for tid in user_tasks(suite)}
    longest = max(sizes, key=lambda t: sizes[t])
    return longest, sizes[longest]


def longest_ground_truth(suite: TaskSuite[Any]) -> tuple[str, int]:
    """The user task of ``suite`` with the most ground-truth calls, and how many."""
    return _longest(suite)


def eval_tasks(name: str, version: str = DEFAULT_VERSION, *,
               only: Sequence[str] | None = None) -> list[EvalTask]:
    """The user tasks of suite ``name`` as eval tasks (``only``: these ids), each checked by
    :class:`Utility`, with :func:`suite_limits` and AgentDojo's system prompt; run them with
    :func:`world_tools` as the tools. ``ValueError`` for an unknown suite, version or id."""
    suite = get_suite(name, version)
    tasks = user_tasks(suite)
    unknown = [t for t in only or () if t not in tasks]
    if unknown:
        raise ValueError(f"{name} has no user task {', '.join(unknown)}; known: "
                         f"{', '.join(tasks)}")
    limits, system = suite_limits(suite), agentdojo_system_prompt()
    return [EvalTask(tid, task.PROMPT, Utility(), None, dict(limits), system,
                     {"agentdojo": name, "version": version})
            for tid, task in tasks.items() if only is None or tid in only]


def trial_world(task: EvalTask) -> DojoWorld:
    """The world of ``task``'s trial on this thread, made on first use (by
    :func:`world_tools` or the model factory, whichever runs first)."""
    current = getattr(_trial, "world", None)
    if current is None or _trial.task is not task:
        suite = get_suite(task.meta["agentdojo"], task.meta.get("version", DEFAULT_VERSION))
        current = DojoWorld.new(suite, task.name)
        _trial.world, _trial.task = current, task
    return current


def world_tools(task: EvalTask) -> list[Tool]:
    """The tools factory for :func:`eval_tasks`' tasks: a fresh world for the trial."""
    _trial.world = _trial.task = None  # a new trial: never the previous trial's world
    return trial_world(task).tools()


@dataclass(frozen=True)
class Utility:
    """The check of :func:`eval_tasks`' tasks: AgentDojo's utility of the trial's world
    (:meth:`DojoWorld.utility`)."""

    name: str = "agentdojo_utility"

    def __call__(self, result: AgentResult) -> Verdict:
        world = getattr(_trial, "world", None)
        if world is None:
            return Verdict(False, "no AgentDojo world on this thread: run the task with "
                                  "world_tools as its tools")
        ok = world.utility(result)
        return Verdict(ok, "" if ok else "AgentDojo's utility check failed")
