"""Eval results: one row per trial, and the figures computed from rows.

A *trial* is one run of one task. With ``repeats=k`` every task runs ``k`` times; each run is
an :class:`EvalRow` (its ``trial`` is 0 .. k-1). The figures:

``success rate``
    The mean over tasks of each task's pass rate (passed trials / trials). With one trial per
    task it is the share of tasks whose check passed.
``pass@k`` (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1)
    The chance that *at least one* of ``k`` trials passes, estimated without bias from ``n``
    trials of which ``c`` passed: ``1 - C(n-c, k) / C(n, k)`` (:func:`pass_at_k`). Useful when
    something downstream can pick the good run (a test suite, a person choosing).
``pass^k`` (Yao et al. 2024, "tau-bench", section 4)
    The chance that *all* ``k`` trials pass: ``C(c, k) / C(n, k)`` (:func:`pass_hat_k`). What
    a user who asks the same thing ``k`` times experiences: reliability, not capability.
the 95% interval of the success rate
    A Wilson score interval (Wilson 1927, :func:`wilson_interval`) with the effective sample
    size of a clustered sample (Kish 1965; the clustering argument for evals is Miller 2024,
    "Adding Error Bars to Evals", section 2.2): ``n_eff = p(1-p) * T / var``, ``T`` tasks,
    ``var`` the variance of the per-task pass rates (:func:`suite_interval`). It lies between
    ``T`` (each task always passes or always fails: repeats add nothing) and the number of
    trials (every task equally hard: trials are independent). With one trial per task it is
    the textbook Wilson interval over ``T`` tasks. It is an interval for the pass rate on
    tasks like these, drawn the same way, for this model and harness.
"""

from __future__ import annotations

import functools
import math
import statistics
import typing
from collections.abc import Iterable, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from pydantic import TypeAdapter, ValidationError

from primer.loop.text import safe_repr

#: The normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054

#: Stop causes of rows whose task did not produce a run result (it raised, or timed out).
FAILED_TO_RUN = frozenset({"error", "timeout"})


@dataclass
class EvalRow:
    """One trial's outcome.

    ``success``: the check passed (every scorer, when the check is a list of them);
    ``path_ok``: the path matched (``None`` when the task has no expected path); ``steps``:
    model calls; ``input_tokens``: prompt tokens (cache reads and writes included) and
    ``output_tokens``; ``cost_usd`` at the run's prices; ``latency_s``: wall seconds of the
    whole run; ``stop_cause``: the exit, ``"error"`` when the run or its check raised, or
    ``"timeout"`` when the task ran past its time limit (``error`` then says what);
    ``trace``: the trace file; ``trial``: which repeat (from 0); ``scores``: each scorer's
    verdict by name, and ``reasons`` the reasons scorers gave (a model judge's sentence).
    """

    task: str
    success: bool
    path_ok: bool | None
    path: list[str]
    steps: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float
    stop_cause: str
    error: str | None = None
    trace: str | None = None
    trial: int = 0
    scores: dict[str, bool] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    def as_dict(self, *, latency: bool = True) -> dict[str, Any]:
        """The row for a table (``latency=False`` leaves out the time column)."""
        d = {"task": self.task, "success": self.success,
             "path ok": "-" if self.path_ok is None else self.path_ok,
             "steps": self.steps, "in": self.input_tokens, "out": self.output_tokens,
             "cost USD": f"{self.cost_usd:.4f}", "stop cause": self.stop_cause}
        if latency:
            d["latency ms"] = f"{self.latency_s * 1000:.1f}"
        return d

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (one line of a results file; lists and dicts are shared)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalRow:
        """The row back from :meth:`to_dict`, each field checked against its type (pydantic,
        strict: ``"x"`` is no ``cost_usd``, ``true`` no ``steps``) and the counts, cost and
        time from 0. Raises ``TypeError`` for a row that is not a dict, ``ValueError``
        naming the first missing, wrong or unknown field (one line)."""
        if not isinstance(d, dict):
            raise TypeError(f"a row is an object of fields, not {type(d).__name__}")
        adapters = _row_adapters()
        unknown = sorted(set(d) - set(adapters))
        if unknown:
            raise ValueError(f"unknown field {safe_repr(unknown[0])}")
        for name, adapter in adapters.items():
            if name not in d:
                if _FIELDS[name].default is MISSING and \
                        _FIELDS[name].default_factory is MISSING:
                    raise ValueError(f"the field {name!r} is missing")
                continue
            try:
                adapter.validate_python(d[name], strict=True)
            except ValidationError as e:
                first = e.errors()[0]
                where = "".join(f"[{k!r}]" for k in first["loc"])
                raise ValueError(f"{name}{where}: {first['msg']} (got "
                                 f"{safe_repr(d[name], 40)})") from None
            if name in _FROM_ZERO and d[name] < 0:
                raise ValueError(f"{name} must be from 0 (got {d[name]!r})")
        return cls(**d)


#: The fields of a row that count or measure something, so never below 0.
_FROM_ZERO = frozenset({"steps", "input_tokens", "output_tokens", "cost_usd", "latency_s",
                        "trial"})
_FIELDS = {f.name: f for f in fields(EvalRow)}


@functools.cache
def _row_adapters() -> dict[str, TypeAdapter[Any]]:
    """One pydantic validator per :class:`EvalRow` field, from its annotation."""
    return {name: TypeAdapter(hint) for name, hint in typing.get_type_hints(EvalRow).items()}


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` trials passes, from ``c`` passes in ``n`` trials.

    The unbiased estimator of Chen et al. 2021 (eq. 1): ``1 - C(n-c, k) / C(n, k)``.
    Raises ``ValueError`` unless ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The chance that all ``k`` trials pass, from ``c`` passes in ``n`` trials.

    The estimator of tau-bench (Yao et al. 2024): ``C(c, k) / C(n, k)``. Raises
    ``ValueError`` unless ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check_counts(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= passed <= trials (got {c} passed of {n})")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= trials (got k={k} with {n} trials): run more "
                         f"repeats or ask for a smaller k")


def wilson_interval(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval (Wilson 1927) of a proportion ``p`` observed over ``n``.

    ``(center ± half) / (1 + z²/n)`` with ``center = p + z²/2n`` and
    ``half = z * sqrt(p(1-p)/n + z²/4n²)``; ``z`` defaults to the 95% two-sided quantile.
    Unlike ``p ± z*sqrt(p(1-p)/n)`` it stays inside [0, 1] and is not zero-width at 0% or
    100%. ``n`` may be fractional (an effective sample size). Raises ``ValueError`` for
    ``p`` outside [0, 1] or ``n <= 0``.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a proportion is in [0, 1] (got {p})")
    if not n > 0:
        raise ValueError(f"an interval needs at least one observation (n={n})")
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, center - half), min(1.0, center + half)


def effective_sample_size(rates: Sequence[float], trials: int) -> float:
    """Kish's effective sample size of the mean of per-task pass ``rates`` (one per task).

    ``p(1-p) * T / var`` with ``var`` the population variance of the rates, capped at
    ``trials`` (the number of runs) and never below ``T``; ``trials`` when the rates do not
    vary or ``p`` is 0 or 1. Raises ``ValueError`` for no rates.
    """
    if not rates:
        raise ValueError("no tasks: an interval needs at least one")
    t = len(rates)
    p = math.fsum(rates) / t
    var = statistics.pvariance(rates)
    if var == 0 or p in (0.0, 1.0):
        return float(trials)
    return min(float(trials), max(float(t), p * (1 - p) * t / var))


def suite_interval(rates: Sequence[float], trials: int) -> tuple[float, float]:
    """The 95% interval of the mean of per-task pass ``rates`` over ``trials`` runs in all:
    :func:`wilson_interval` at :func:`effective_sample_size` (see the module docstring)."""
    return wilson_interval(math.fsum(rates) / len(rates), effective_sample_size(rates, trials))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation between the closest ranks.

    This is the "inclusive" method of :func:`statistics.quantiles` (numpy's default,
    ``linear``). One value is its own percentile. Raises ``ValueError`` for no values or a
    ``q`` outside [0, 100].
    """
    if not values:
        raise ValueError("percentile of no values: run at least one task")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100] (got {q})")
    data = sorted(values)
    if len(data) == 1 or q == 0:
        return data[0]
    if q == 100:
        return data[-1]
    cuts = statistics.quantiles(data, n=100, method="inclusive")
    lo = int(q)
    if lo == q:
        return cuts[lo - 1]
    a, b = cuts[lo - 1] if lo else data[0], cuts[lo]
    return a + (b - a) * (q - lo)


@dataclass(frozen=True)
class TaskStats:
    """One task over its trials: ``trials`` runs, ``passed`` of them passed."""

    task: str
    trials: int
    passed: int

    @property
    def pass_rate(self) -> float:
        """``passed / trials`` (the task's pass@1)."""
        return self.passed / self.trials

    def pass_at(self, k: int) -> float:
        """:func:`pass_at_k` of this task."""
        return pass_at_k(self.trials, self.passed, k)

    def pass_hat(self, k: int) -> float:
        """:func:`pass_hat_k` of this task."""
        return pass_hat_k(self.trials, self.passed, k)


@dataclass
class EvalSummary:
    """The figures over all rows (see the module docstring for each definition).

    ``tasks``: distinct tasks; ``trials``: rows; ``repeats``: the fewest trials any task has
    (the ``k`` of ``pass_at_k`` / ``pass_hat_k``); ``success_rate``: mean per-task pass rate
    (0-1) with its 95% interval ``ci_low`` .. ``ci_high``; ``pass_at_k`` and ``pass_hat_k``:
    means over tasks; ``path_accuracy``: share of rows *with an expected path* whose path
    matched (``None`` when none has one); ``mean_steps``: model calls per row;
    ``total_cost_usd``; ``input_tokens`` and ``output_tokens`` summed; ``p50_latency_s`` /
    ``p95_latency_s``: :func:`percentile` of the per-row wall times (seconds);
    ``failed_to_run``: rows whose task raised or timed out.
    """

    tasks: int
    success_rate: float
    path_accuracy: float | None
    mean_steps: float
    total_cost_usd: float
    input_tokens: int
    output_tokens: int
    p50_latency_s: float
    p95_latency_s: float
    trials: int = 0
    repeats: int = 1
    ci_low: float = 0.0
    ci_high: float = 1.0
    pass_at_k: float = 0.0
    pass_hat_k: float = 0.0
    failed_to_run: int = 0
    per_task: list[TaskStats] = field(default_factory=list, repr=False)

    @classmethod
    def of(cls, rows: Iterable[EvalRow]) -> EvalSummary:
        """Summarise ``rows`` in one pass (any iterable: a list, or rows read from a file).

        Keeps two counters per task and two floats per row (latency for the percentiles,
        cost for an exact sum), never the rows. Sums are ``math.fsum``, so the figures do not
        depend on the order rows finished in. ``ValueError`` when there are none.
        """
        counts: dict[str, list[int]] = {}
        latencies: list[float] = []
        with_path = path_right = steps = inp = out = failed = 0
        costs: list[float] = []
        for r in rows:
            c = counts.setdefault(r.task, [0, 0])
            c[0] += 1
            c[1] += bool(r.success)
            latencies.append(r.latency_s)
            if r.path_ok is not None:
                with_path += 1
                path_right += bool(r.path_ok)
            steps += r.steps
            inp += r.input_tokens
            out += r.output_tokens
            costs.append(r.cost_usd)
            failed += r.stop_cause in FAILED_TO_RUN
        if not latencies:
            raise ValueError("no eval rows to summarise: give run_evals at least one task")
        per_task = [TaskStats(name, n, c) for name, (n, c) in counts.items()]
        k = min(t.trials for t in per_task)
        rates = [t.pass_rate for t in per_task]
        lo, hi = suite_interval(rates, len(latencies))
        # math.fsum: the figures do not depend on the order the rows finished in
        return cls(tasks=len(per_task), success_rate=math.fsum(rates) / len(rates),
                   path_accuracy=path_right / with_path if with_path else None,
                   mean_steps=steps / len(latencies), total_cost_usd=math.fsum(costs),
                   input_tokens=inp, output_tokens=out,
                   p50_latency_s=percentile(latencies, 50),
                   p95_latency_s=percentile(latencies, 95),
                   trials=len(latencies), repeats=k, ci_low=lo, ci_high=hi,
                   pass_at_k=math.fsum(t.pass_at(k) for t in per_task) / len(per_task),
                   pass_hat_k=math.fsum(t.pass_hat(k) for t in per_task) / len(per_task),
                   failed_to_run=failed, per_task=per_task)

    def text(self, *, latency: bool = True) -> str:
        """The summary as a few lines (``latency=False`` leaves out the wall times)."""
        path = "-" if self.path_accuracy is None else f"{self.path_accuracy:.0%}"
        runs = (f"tasks: {self.tasks}" if self.trials == self.tasks else
                f"tasks: {self.tasks}, trials: {self.trials} (at least {self.repeats} each)")
        lines = [runs,
                 f"success rate: {self.success_rate:.0%} (95% interval {self.ci_low:.0%} to "
                 f"{self.ci_high:.0%}, Wilson)"]
        if self.repeats > 1:
            k = self.repeats
            lines.append(f"pass@{k}: {self.pass_at_k:.0%}  pass^{k}: {self.pass_hat_k:.0%}")
        lines += [f"path accuracy: {path}", f"mean steps: {self.mean_steps:.2f}",
                  f"tokens: {self.input_tokens:,} in, {self.output_tokens:,} out",
                  f"total cost: {self.total_cost_usd:.4f} USD"]
        if self.failed_to_run:
            lines.append(f"trials that raised or timed out: {self.failed_to_run} of "
                         f"{self.trials}")
        if latency:
            lines.append(f"latency p50 / p95: {self.p50_latency_s * 1000:.1f} ms / "
                         f"{self.p95_latency_s * 1000:.1f} ms")
        return "\n".join(lines)

    def task_rows(self, k: int | None = None) -> list[dict[str, Any]]:
        """One dict per task for a table: trials, passed, pass rate, pass@k and pass^k
        (``k`` defaults to :attr:`repeats`; ``ValueError`` if a task has fewer trials)."""
        k = self.repeats if k is None else k
        return [{"task": t.task, "trials": t.trials, "passed": t.passed,
                 "pass rate": f"{t.pass_rate:.0%}", f"pass@{k}": f"{t.pass_at(k):.0%}",
                 f"pass^{k}": f"{t.pass_hat(k):.0%}"} for t in self.per_task]
