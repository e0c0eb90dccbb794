"""The harness beside AgentDojo's own tool loop on the same tasks (the extra .[agentdojo])."""

from __future__ import annotations

import pytest

pytest.importorskip("agentdojo")

from primer.commands import bench  # noqa: E402
from primer.harness.evals.agentdojo.timing import (  # noqa: E402
    SIDES,
    PrebuiltReplay,
    agentdojo_side,
    loops_side_by_side,
    primer_side,
    tools_side,
    worlds,
)


def test_both_loops_make_the_same_model_calls_and_leave_the_same_environments():
    ours, theirs = worlds(["banking"]), worlds(["banking"])
    seconds, calls = primer_side(ours)
    their_seconds, their_calls = agentdojo_side(theirs)
    assert calls == their_calls == tools_side(worlds(["banking"]))[1]
    assert calls == sum(len(w.ground_truth) + 1 for w in ours)
    assert seconds > 0 and their_seconds > 0
    assert [w.env for w in ours] == [w.env for w in theirs]


def test_the_prebuilt_replay_plays_the_ground_truth_with_a_fixed_usage():
    world = worlds(["banking"])[15]
    model = PrebuiltReplay(world)
    names = [b["name"] for r in model.replies for b in r.content if b["type"] == "tool_use"]
    assert names == [c.function for c in world.ground_truth]
    assert {r.usage.input_tokens for r in model.replies} == {1_000}


def test_side_by_side_gives_each_side_a_figure_per_round():
    figures = loops_side_by_side(2, ["banking"])
    assert list(figures) == list(SIDES) and all(len(v) == 2 and min(v) > 0
                                                for v in figures.values())


def test_make_bench_prints_the_agentdojo_ratio_against_its_target(capsys):
    bench._agentdojo(1, ("banking",))
    out = capsys.readouterr().out
    line = out.split("run_production vs AgentDojo's own tool loop", 1)[1].splitlines()[0]
    assert "(target <= 2x)" in line and (line.endswith("ok") or " MISSED by " in line)
    assert "AgentDojo's tool loop" in out and "the tools' own work alone" in out
