"""Approval rules declared as data: which calls wait for a person, and why.

A tool's ``needs_approval`` can be any function of the input; a rule set says the same thing
as data a person can read, diff and sign off: each rule names a tool, conditions on its
arguments (all must hold) and the reason a person is needed. A rule set has a ``version``;
a paused run records it with each waiting call, and a resume under other rules refuses the
earlier decision and asks for a fresh one (:mod:`primer.harness.durable.resume`)::

    rules = ApprovalRules.from_dict({
        "version": "2026-12-01",
        "rules": [{"tool": "issue_refund", "when": {"amount_usd": {">": 100}},
                   "reason": "a refund over 100 USD needs a person"}]})
    tools = rules.apply(refund_tools)     # issue_refund over 100 USD waits; 100 or less runs

Operators: ``>``, ``>=``, ``<``, ``<=``, ``==``, ``!=``, ``in``, ``not in``. A rule with no
``when`` holds for every call of its tool. The first rule that holds gives the reason. A
condition that cannot be judged (its argument missing with no default in the
``input_schema``, a value that does not compare) holds: a rule fails closed. Tools the rules
do not name keep their own ``needs_approval``.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from primer.loop.text import json_problem, safe_repr
from primer.loop.tools import Tool

#: The operators a condition may use, with what each computes (argument, value).
OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
    "==": operator.eq, "!=": operator.ne,
    "in": lambda a, v: a in v, "not in": lambda a, v: a not in v,
}


@dataclass(frozen=True)
class Condition:
    """``argument op value``, e.g. ``amount_usd > 100`` (``op`` one of :data:`OPERATORS`)."""

    argument: str
    op: str
    value: Any

    def holds(self, args: Mapping[str, Any]) -> bool:
        """Whether the call's ``args`` meet it; ``True`` when it cannot be judged (the
        argument is missing or does not compare with ``value``): a rule fails closed."""
        if self.argument not in args:
            return True
        try:
            return bool(OPERATORS[self.op](args[self.argument], self.value))
        except TypeError:
            return True

    def __str__(self) -> str:
        return f"{self.argument} {self.op} {json.dumps(self.value)}"


@dataclass(frozen=True)
class ArgumentRule:
    """Calls of ``tool`` whose arguments meet every condition of ``when`` need a person,
    for ``reason`` (said to the person and recorded with the pause)."""

    tool: str
    when: tuple[Condition, ...]
    reason: str

    def holds(self, args: Mapping[str, Any]) -> bool:
        """Whether a call with ``args`` needs a person under this rule."""
        return all(c.holds(args) for c in self.when)


@dataclass(frozen=True)
class ApprovalRules:
    """A versioned rule set (:class:`ArgumentRule` s), built from data with :meth:`from_dict`.

    ``version``: any non-empty text that changes whenever the rules do; a pause records it.
    Raises ``ValueError`` naming the rule and field at fault for rules that are not usable.
    """

    version: str
    rules: tuple[ArgumentRule, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.version, str) or not self.version.strip():
            raise ValueError(f"approval rules need a version (non-empty text that changes "
                             f"when the rules do), not {safe_repr(self.version)}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApprovalRules:
        """Rules from ``{"version": str, "rules": [{"tool", "when": {argument: {op: value}},
        "reason"}]}`` (JSON-ready). ``ValueError`` names what is wrong and where."""
        if not isinstance(data, Mapping) or not isinstance(data.get("rules"), list):
            raise ValueError('approval rules are {"version": ..., "rules": [...]}, not '
                             f"{safe_repr(data)}")
        rules = []
        for n, r in enumerate(data["rules"], start=1):
            where = f"approval rule {n}"
            if not isinstance(r, Mapping) or set(r) - {"tool", "when", "reason"}:
                raise ValueError(f"{where}: a rule is {{\"tool\", \"when\", \"reason\"}}, not "
                                 f"{safe_repr(r)}")
            tool, reason, when = r.get("tool"), r.get("reason"), r.get("when", {})
            if not isinstance(tool, str) or not tool:
                raise ValueError(f"{where}: name the tool it applies to (\"tool\")")
            if not isinstance(reason, str) or not reason.strip():
                raise ValueError(f"{where} ({tool}): give the reason a person is needed "
                                 f"(\"reason\"); the person and the record see it")
            if not isinstance(when, Mapping):
                raise ValueError(f"{where} ({tool}): \"when\" maps an argument to "
                                 f"{{operator: value}}, not {safe_repr(when)}")
            conditions = []
            for argument, tests in when.items():
                if not isinstance(tests, Mapping) or not tests:
                    raise ValueError(f"{where} ({tool}): the test of {argument!r} must be "
                                     f"{{operator: value}}, e.g. {{\">\": 100}}")
                for op, value in tests.items():
                    if op not in OPERATORS:
                        raise ValueError(f"{where} ({tool}): unknown operator {op!r} for "
                                         f"{argument!r}; use one of {', '.join(OPERATORS)}")
                    if op in ("in", "not in") and not isinstance(value, list):
                        raise ValueError(f"{where} ({tool}): {op!r} needs a list of values")
                    problem = json_problem(value)
                    if problem is not None:  # NaN compares false: the rule would never fire
                        raise ValueError(f"{where} ({tool}): the value for {op!r} is not "
                                         f"plain JSON ({problem})")
                    if op in ("<", "<=", ">", ">=") and (
                            type(value) not in (int, float) or isinstance(value, bool)):
                        raise ValueError(f"{where} ({tool}): {op!r} compares numbers; give a "
                                         f"number, not {safe_repr(value)}")
                    conditions.append(Condition(argument, op, value))
            rules.append(ArgumentRule(tool, tuple(conditions), reason.strip()))
        return cls(data.get("version"), tuple(rules))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """The rules as data (the inverse of :meth:`from_dict`)."""
        rules = []
        for r in self.rules:
            when: dict[str, dict[str, Any]] = {}
            for c in r.when:
                when.setdefault(c.argument, {})[c.op] = c.value
            rules.append({"tool": r.tool, "when": when, "reason": r.reason})
        return {"version": self.version, "rules": rules}

    def reason(self, tool: str, args: Mapping[str, Any]) -> str | None:
        """The reason of the first rule of ``tool`` that holds for ``args``, or ``None``."""
        for r in self.rules:
            if r.tool == tool and r.holds(args):
                return r.reason
        return None

    def apply(self, tools: Iterable[Tool]) -> list[Tool]:
        """``tools`` with each named tool's ``needs_approval`` replaced by a
        :class:`RuleGate` of these rules (others unchanged). ``ValueError`` when a rule names
        a tool not among ``tools`` or an argument its ``input_schema`` does not have."""
        tools = list(tools)
        by_name = {t.name: t for t in tools}
        for n, r in enumerate(self.rules, start=1):
            t = by_name.get(r.tool)
            if t is None:
                raise ValueError(f"approval rule {n} names the tool {r.tool!r}, which is not "
                                 f"among the tools ({', '.join(by_name) or 'none'})")
            known = t.input_schema.get("properties", {})
            for c in r.when:
                if c.argument not in known:
                    raise ValueError(f"approval rule {n} ({r.tool}) tests {c.argument!r}, "
                                     f"which is not an argument of {r.tool} "
                                     f"({', '.join(known) or 'none'})")
        named = {r.tool for r in self.rules}
        return [dataclasses.replace(t, needs_approval=RuleGate(self, t.name, _defaults(t)))
                if t.name in named else t for t in tools]


@dataclass(frozen=True)
class RuleGate:
    """A tool's ``needs_approval`` from :class:`ApprovalRules`: called with a call's input,
    returns the reason a person is needed, or ``False``. An argument the call leaves out is
    judged at its ``input_schema`` default (``defaults``). ``rules_version`` is what a pause
    records."""

    rules: ApprovalRules
    tool: str
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def rules_version(self) -> str:
        """The version of the rules this gate applies."""
        return self.rules.version

    def __call__(self, args: dict[str, Any]) -> str | bool:
        reason = self.rules.reason(self.tool, {**self.defaults, **args})
        return False if reason is None else reason


def _defaults(t: Tool) -> dict[str, Any]:
    """The defaults ``t``'s ``input_schema`` gives its arguments."""
    props = t.input_schema.get("properties", {})
    return {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}


def rules_version(tool: Tool | None) -> str | None:
    """The version of the approval rules that gate ``tool`` (its ``needs_approval`` has a
    text ``rules_version``, as :class:`RuleGate` does), or ``None``."""
    version = getattr(tool.needs_approval, "rules_version", None) if tool is not None else None
    return version if isinstance(version, str) else None
