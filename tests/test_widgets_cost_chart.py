"""The cost explorer's chart has a token axis and each call's value, its text names output
tokens, and its caching toggle sits on one line with its label."""

from __future__ import annotations

import re

from primer.views.widgets import CostExplorer, bars_svg, cost_explorer, render_cost


def _texts(svg: str, cls: str | None = None) -> list[str]:
    attr = f' class="{cls}"' if cls else ""
    return re.findall(rf"<text{attr}[^>]*>([^<]*)</text>", svg)


def test_each_bar_shows_its_prompt_tokens_and_the_axis_has_round_ticks_from_zero():
    explorer = CostExplorer()
    html_out = render_cost(explorer)
    per_call = [f"{u.prompt_tokens:,}" for u in explorer.usages]
    assert _texts(html_out, "primer-bar-value") == per_call
    ticks = [int(t.replace(",", "")) for t in _texts(html_out, "primer-axis-tick")]
    assert ticks[0] == 0 and ticks == sorted(ticks) and 3 <= len(ticks) <= 6
    assert ticks[-1] >= max(u.prompt_tokens for u in explorer.usages)
    assert "model call" in _texts(html_out)


def test_a_long_run_labels_only_its_first_and_last_bar():
    explorer = CostExplorer(steps=40)
    values = _texts(render_cost(explorer), "primer-bar-value")
    assert values == [f"{explorer.usages[0].prompt_tokens:,}",
                      f"{explorer.usages[-1].prompt_tokens:,}"]


def test_the_summary_says_the_written_tokens_are_output_tokens():
    text = re.sub("<[^>]+>", "", render_cost(CostExplorer()))
    assert "and write 1,500 output tokens:" in text


def test_other_charts_keep_their_plain_form():
    svg = bars_svg([1, 2, 3], title="t")
    assert "primer-bar-value" not in svg and "<line" not in svg


def test_the_caching_toggle_lays_out_as_one_row_with_room_for_its_buttons():
    toggle = cost_explorer().controls["cache"]
    assert toggle.layout.display == "flex"
    buttons = len(toggle.options) * (int(toggle.style.button_width.removesuffix("px")) + 4)
    label = int(toggle.style.description_width.removesuffix("px"))
    assert label + buttons <= int(toggle.layout.width.removesuffix("px"))
