"""The figures are drawn from primer code, and the committed SVGs are what the code draws."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from primer.loop.state import StopCause
from primer.views import figures

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_the_committed_figure_is_byte_for_byte_what_the_code_draws(name):
    path = ROOT / "figures" / f"{name}.svg"
    assert path.exists(), f"{path} is missing: run make figures"
    assert path.read_bytes() == figures.svg_bytes(figures.draw(name)), (
        f"{path} differs from what primer.views.figures draws: run make figures and commit")


def test_drawing_a_figure_twice_gives_the_same_svg_bytes():
    assert (figures.svg_bytes(figures.draw("06_quadratic_tokens"))
            == figures.svg_bytes(figures.draw("06_quadratic_tokens")))


def test_the_svg_carries_no_date_and_no_matplotlib_version():
    svg = figures.svg_bytes(figures.draw("08_compounding")).decode()
    assert "<dc:date>" not in svg
    assert "Matplotlib v" not in svg


def test_check_order_is_the_order_the_loop_runs_from_the_step_limit_to_no_progress():
    from primer.loop import checks as exits

    checks = figures.check_order()
    plain = [c.name for c in checks if not c.when]
    assert plain == [f.__name__ for f in (*exits.BEFORE_CALL, *exits.BEFORE_SEND,
                                          *exits.AFTER_REPLY, *exits.AFTER_TOOLS)]
    assert plain[0] == "check_step_limit" and plain[-1] == "check_no_progress"
    after_reply = ["check_stop_reason", "check_output", "check_budgets", "check_handoff",
                   "check_repeats", "check_step_limit", "check_approval"]
    assert [c.name for c in checks if c.phase == figures.PHASES[1]] == after_reply
    phases = {c.name: c.phase for c in checks}
    assert phases["check_context"] == figures.PHASES[0]
    assert phases["check_stop_reason"] == figures.PHASES[1]
    assert phases["check_no_progress"] == figures.PHASES[2]


def test_the_output_check_sits_on_the_end_turn_branch_right_after_the_stop_reason():
    # check_output runs only when AFTER_REPLY stops with end_turn, and only
    # check_stop_reason says end_turn, so nothing after it in that phase ran
    from primer.loop import checks as exits

    checks = figures.check_order()
    k = [c.name for c in checks].index("check_output")
    assert checks[k - 1].name == "check_stop_reason"
    assert "end_turn" in checks[k].when and "check_stop_reason" in checks[k].when
    owners = [f.__name__ for f in exits.AFTER_REPLY if StopCause.END_TURN in f.causes]
    assert owners == ["check_stop_reason"]


def test_one_turn_of_the_figure_appears_in_the_loops_source_in_the_same_order():
    import inspect

    from primer.loop import loop as agent_loop
    from primer.loop import steps

    loop = inspect.getsource(agent_loop.continue_run).split('"""')[2]  # the body
    order = []
    for item in figures.loop_turn():
        if isinstance(item, figures.LoopStep):
            order.append(item.function)
        elif item.when:
            order.append(item.name)
    assert order == ["compact_if_needed", "call_model", "check_output", "ToolCalls"]
    positions = [loop.index(name) for name in ("BEFORE_CALL", "compact_if_needed",
                                               "BEFORE_SEND", "call_model", "AFTER_REPLY",
                                               "check_output", "ToolCalls", "add_results")]
    assert positions == sorted(positions)  # run the calls, then record them and check
    assert "first_stop(AFTER_TOOLS" in inspect.getsource(steps.add_results)


def test_figure_4s_footer_sums_the_latencies_its_labels_show():
    svg = figures.svg_bytes(figures.draw("04_fan_out_fan_in")).decode()
    assert "0.52 + 0.35 + 0.85 + 0.27 = 1.99 s" in svg
    assert "slowest call: 0.85 s" in svg


def test_figure_7_draws_a_stored_measurement_that_behaves_like_threads_that_wait():
    from primer.scenarios.parallel import latency_model, seeded_latencies

    data = figures.read_latency_measurement()
    latencies = seeded_latencies(8)
    assert data["tools"] == list(range(1, 9)) and data["seed"] == 7
    for n, seq, conc in zip(data["tools"], data["sequential_s"], data["concurrent_s"],
                            strict=True):
        total, slowest = latency_model(latencies[:n])
        assert total - 0.001 <= seq < total * 1.25      # one after another: the sum
        assert slowest - 0.001 <= conc < slowest * 1.25  # concurrently: the slowest call
    assert data["concurrent_s"][-1] < data["sequential_s"][-1] / 2


def test_measuring_stores_what_it_measured(tmp_path):
    path = tmp_path / "latency.json"
    data = figures.write_latency_measurement(path, time_scale=0.01)
    assert figures.read_latency_measurement(path) == data
    assert data["time_scale"] == 0.01 and len(data["sequential_s"]) == 8


def test_a_missing_measurement_says_how_to_make_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="figures --measure"):
        figures.read_latency_measurement(tmp_path / "none.json")


def test_each_check_returns_only_the_causes_it_is_marked_with():
    from primer.loop import checks as exits

    assert exits.check_approval.causes == (StopCause.AWAITING_APPROVAL,)
    assert exits.check_wall_clock.causes == (StopCause.WALL_CLOCK,)
    assert StopCause.INVALID_OUTPUT in exits.check_output.causes


def test_every_stop_cause_is_owned_by_some_check():
    # model_error: check_stop_reason owns a reply with an unknown stop_reason
    owned = {cause for c in figures.check_order() for cause in c.causes}
    assert owned == {c.value for c in StopCause}


def test_an_unknown_figure_name_lists_the_known_ones():
    with pytest.raises(KeyError, match="06_quadratic_tokens"):
        figures.draw("06_quadratic")


def test_importing_the_agent_library_does_not_import_matplotlib():
    code = "import sys, primer, primer.loop.loop; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.strip()
    assert out == "False"


def test_the_figures_command_measures_again_only_when_asked(tmp_path, monkeypatch, capsys):
    from primer.__main__ import build_parser

    measured = []
    monkeypatch.setattr(figures, "write_latency_measurement",
                        lambda: measured.append(1) or {"time_scale": 0.25})
    for argv, times in ((["figures", "08_compounding", "--out", str(tmp_path)], 0),
                        (["figures", "08_compounding", "--out", str(tmp_path), "--measure"], 1)):
        args = build_parser().parse_args(argv)
        assert args.func(args) == 0
        assert len(measured) == times
    assert (tmp_path / "08_compounding.svg").exists()
    assert "measured" in capsys.readouterr().out
