"""The figures are drawn from primer code, and the committed SVGs are what the code draws."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from primer import figures
from primer.agents import StopCause

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_the_committed_figure_is_byte_for_byte_what_the_code_draws(name):
    path = ROOT / "figures" / f"{name}.svg"
    assert path.exists(), f"{path} is missing: run make figures"
    assert path.read_bytes() == figures.svg_bytes(figures.draw(name)), (
        f"{path} differs from what primer.figures draws: run make figures and commit")


def test_drawing_a_figure_twice_gives_the_same_svg_bytes():
    assert (figures.svg_bytes(figures.draw("06_quadratic_tokens"))
            == figures.svg_bytes(figures.draw("06_quadratic_tokens")))


def test_the_svg_carries_no_date_and_no_matplotlib_version():
    svg = figures.svg_bytes(figures.draw("08_compounding")).decode()
    assert "<dc:date>" not in svg
    assert "Matplotlib v" not in svg


def test_check_order_is_the_order_the_loop_runs_from_the_step_limit_to_no_progress():
    from primer.agents import exits

    names = [c.name for c in figures.check_order()]
    assert names == [f.__name__ for f in (*exits.BEFORE_CALL, *exits.BEFORE_SEND,
                                          *exits.AFTER_REPLY, exits.validate_output,
                                          *exits.AFTER_TOOLS)]
    assert names[0] == "check_step_limit" and names[-1] == "check_no_progress"
    after_reply = ["check_stop_reason", "check_budgets", "check_handoff", "check_repeats",
                   "check_step_limit", "check_approval"]
    assert [c.name for c in figures.check_order() if c.phase == figures.PHASES[1]][:6] == \
        after_reply
    phases = {c.name: c.phase for c in figures.check_order()}
    assert phases["check_context"] == figures.PHASES[0]
    assert phases["check_stop_reason"] == figures.PHASES[1]
    assert phases["check_no_progress"] == figures.PHASES[2]


def test_each_check_returns_only_the_causes_it_is_marked_with():
    from primer.agents import exits

    assert exits.check_approval.causes == (StopCause.AWAITING_APPROVAL,)
    assert exits.check_wall_clock.causes == (StopCause.WALL_CLOCK,)
    assert StopCause.INVALID_OUTPUT in exits.validate_output.causes


def test_every_stop_cause_is_owned_by_some_check():
    # model_error: check_stop_reason owns a reply with an unknown stop_reason
    owned = {cause for c in figures.check_order() for cause in c.causes}
    assert owned == {c.value for c in StopCause}


def test_an_unknown_figure_name_lists_the_known_ones():
    with pytest.raises(KeyError, match="06_quadratic_tokens"):
        figures.draw("06_quadratic")


def test_importing_the_agent_library_does_not_import_matplotlib():
    code = "import sys, primer.agents; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.strip()
    assert out == "False"
