"""The Pass@1 plot reads at a glance (issue 51, item 8): the legend beside the lines, never over them (it covered the
CF lines at turns 8-10), lines at 0% and 100% inside the frame, the task set and its size named, and a run without
metadata captioned without an empty dataset ("(, 6 tasks)")."""

from __future__ import annotations

import shutil

import pytest

from convcodeworld_gym.policies import SyntheticCoder
from convcodeworld_gym.runs.evaluate import EvalConfig, run_evaluation
from convcodeworld_gym.runs.report import headless_pyplot, load_report, pass_at_turn_figure, write_report
from convcodeworld_gym.testing import FakeExecutor


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Three combinations on 6 tasks, the strongest synthetic coder (its lines end at 100%)."""
    out = tmp_path_factory.mktemp("plot") / "run"
    config = EvalConfig(ids=("ConvCodeWorld-CF-v0", "ConvCodeWorld-CF-EF_full-v0", "ConvCodeWorld-CF-EF_partial-v0"),
                        dataset="humaneval", limit=6, max_turns=10)
    run_evaluation(config, SyntheticCoder(1.0), out, executor=FakeExecutor(), progress=None, log=lambda line: None)
    return out


def test_the_legend_sits_beside_the_lines_and_the_extremes_inside_the_frame(run_dir):
    report = load_report(run_dir)
    assert max(p for s in report.scores.values() for p in s.pass_at_turn) == 1.0  # a line at 100%
    plt = headless_pyplot()
    fig = pass_at_turn_figure(report)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        legend = ax.get_legend().get_window_extent(renderer)
        frame = ax.get_window_extent(renderer)
        assert legend.x0 >= frame.x1  # beside the axes: over no line, whatever the values at turns 8-10
        assert fig.bbox.contains(legend.x1 - 1, legend.y0 + 1)  # and inside the picture
        low, high = ax.get_ylim()
        assert low < 0.0 and high > 100.0  # a line at 0% or 100% is not drawn on the frame
        title = ax.get_title()
        assert "humaneval/limit6 (6 tasks)" in title and report.policy in title
    finally:
        plt.close(fig)


def test_a_run_without_metadata_names_no_empty_dataset(run_dir, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(run_dir / "turns.jsonl", bare / "turns.jsonl")
    report, paths = write_report(bare)
    assert report.dataset == ""
    caption = report.captions()[0]
    assert "(, " not in caption and "on ConvCodeWorld (6 tasks)" in caption
    assert paths["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
