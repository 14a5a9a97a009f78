"""The report of a run: the reference's two tables, the Pass@1-per-turn plot, and what RL users watch beside them.

Table 1 is Pass@1 (%) at each turn 0..max_turns, one column per feedback combination;
Table 2 is MRR and Recall (%), one column per combination. Both are printed and written as
Markdown (``report.md``) and CSV (``pass_at_turn.csv``, ``mrr_recall.csv``); the plot is
``pass_at_turn.png``. Scores come from :mod:`..metrics` (live: the first passing turn), over finished episodes only
(:func:`~convcodeworld_gym.records.split_finished`: one a run left unfinished is counted apart, and the next
``evaluate`` on the folder plays it again). The files are never written over a file this package did not write
(:func:`.rundir.claim`).

A run of many trajectories per task (``convcodeworld evaluate --samples N``) gives each task's mean over its samples in
Tables 1 and 2, and Table 1b beside them: pass@k (%) at each turn, per combination, for k = 1, 2, 4, ... N
(``pass_at_k.csv``; its header only for a run of one trajectory per task).

Beside the scores, never part of them (:mod:`.watch`): Table 3, the share (%) of episodes with a turn-by-turn
regression, per combination and per turn (``regressions.csv``); and the canary pass rate of the canary twins the run
played (:mod:`~convcodeworld_gym.tasks.canary`; ``canary.csv``), whose rows the scores leave out; and, for a run played
with perturbed public tests (``perturb=``, :mod:`~convcodeworld_gym.tasks.perturb`), the share of its programs that
followed the perturbation (in ``report.md``)."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..combos import ALL_CONFIGS, FeedbackConfig
from ..errors import RunFolderError, RunLogError
from ..metrics import DEFAULT_MAX_TURNS, Scores
from ..records import METADATA_FILE, TURNS_FILE, TurnRecord, make_folder, read_turns, split_finished
from .log_scores import carried_turn0_scores, combinations, run_scores
from ..tasks.canary import CanaryRate
from .rundir import claim, read_metadata, record_written
from ..tasks.perturb import FollowRate
from .watch import RegressionShares, canary_rates, follow_rates, regression_shares, split_canaries

__all__ = ["Report", "scores_by_combination", "load_report", "write_report", "plot_pass_at_turn", "pass_at_turn_figure",
           "headless_pyplot",
           "CARRIED_COMBINATIONS",
           "REPORT_FILES"]

#: Files :func:`write_report` writes, by role.
REPORT_FILES = {"markdown": "report.md", "pass_csv": "pass_at_turn.csv", "mrr_csv": "mrr_recall.csv", "plot": "pass_at_turn.png",
                "regressions_csv": "regressions.csv", "canary_csv": "canary.csv", "pass_at_k_csv": "pass_at_k.csv"}


def _label(name: str) -> str:
    try:
        return FeedbackConfig.parse(name).paper_name
    except ValueError:
        return name


#: The combinations :func:`scores_by_combination` fills from turn 0 when a live run lacks them (``fill_cf``).
CARRIED_COMBINATIONS = ("CF", "CF-SNF")


def scores_by_combination(
    rows: Iterable[TurnRecord], max_turns: int = DEFAULT_MAX_TURNS, *, compensate_init: bool = True,
    exclude_init_solved: bool = False, fill_cf: bool = False,
) -> dict[str, Scores]:
    """Scores per combination (id part, e.g. ``CF-EF_full``), in the paper's order: static
    (ConvCodeBench) for rows that name a reference log, live otherwise. ``compensate_init``:
    see :func:`~convcodeworld_gym.metrics.static_credit_turn`; ``exclude_init_solved``: see
    :func:`~convcodeworld_gym.metrics.live_episode_scores`.

    ``fill_cf``: a live run that did not play CF or CF SNF gets their columns from its turn-0 rows, as the
    reference's ``print_results.py`` fills them (:func:`~.log_scores.carried_turn0_scores`; not when some turn-0
    program does not compile, where the reference stops on its assertion).

    >>> rows = [TurnRecord("CF", "t/0", 0, "", "", "", "", "", True, False, 0.0, 0.0),
    ...         TurnRecord("CF", "t/0", 1, "", "", "", "", "", True, True, 1.0, 1.0)]
    >>> s = scores_by_combination(rows, max_turns=2)["CF"]
    >>> s.pass_at_turn, s.mrr
    ((0.0, 1.0, 1.0), 0.5)
    """
    rows = list(rows)
    scores = {name: run_scores(rows, name, max_turns=max_turns, compensate_init=compensate_init,
                               exclude_init_solved=exclude_init_solved) for name in combinations(rows)}
    if fill_cf and not any(row.reference for row in rows):
        missing = [name for name in CARRIED_COMBINATIONS if name not in scores]
        carried = carried_turn0_scores(rows, max_turns) if missing else None
        if carried is not None:
            scores.update({name: carried for name in missing})
            scores = {c.name: scores[c.name] for c in ALL_CONFIGS if c.name in scores}
    return scores


@dataclass(frozen=True)
class Report:
    """Scores of one run, per combination, with what the captions need.

    Attributes:
        scores: combination id part -> :class:`~convcodeworld_gym.metrics.Scores`, paper order.
        max_turns: last turn index of Table 1.
        policy: the policy's name; ``synthetic``: whether it is the SYNTHETIC coder.
        dataset: the task set's name; ``benchmark``: ``ConvCodeWorld`` or another id prefix.
        filled: the combinations whose scores were filled from turn 0, not played (``fill_cf``).
        regressions: combination -> its turn-by-turn regressions (:class:`~.watch.RegressionShares`; Table 3).
        canaries: combination -> its canary twins' pass rate (:class:`~convcodeworld_gym.tasks.canary.CanaryRate`), for the combinations
            that played any; their rows take no part in ``scores``.
        unfinished: episodes of the log that are not finished (a run still going, or cut short), left out of
            everything.
        follows: combination -> the programs judged on perturbed tasks and how many followed the perturbation
            (:class:`~convcodeworld_gym.tasks.perturb.FollowRate`), for the combinations that played any.
    """

    scores: Mapping[str, Scores]
    max_turns: int = DEFAULT_MAX_TURNS
    policy: str = ""
    synthetic: bool = False
    dataset: str = ""
    benchmark: str = "ConvCodeWorld"
    filled: tuple[str, ...] = ()
    regressions: Mapping[str, RegressionShares] = field(default_factory=dict)
    canaries: Mapping[str, CanaryRate] = field(default_factory=dict)
    unfinished: int = 0
    follows: Mapping[str, FollowRate] = field(default_factory=dict)

    @property
    def turns(self) -> range:
        """The turns of Table 1: from 0 (live) or 1 (static: the reference prints no turn-0 row)."""
        first = min((s.first_turn for s in self.scores.values()), default=0)
        return range(first, self.max_turns + 1)

    def pass_table(self) -> tuple[list[str], list[list[str]]]:
        """Header and rows of Table 1: ``Turn`` then Pass@1 (%) per combination."""
        header = ["Turn"] + [_label(n) for n in self.scores]
        rows = [[str(t)] + [_percent(s.pass_at(t)) for s in self.scores.values()] for t in self.turns]
        return header, rows

    @property
    def samples(self) -> int:
        """Trajectories per task (the most of any combination; 1 for a run of one per task)."""
        return max((s.samples for s in self.scores.values()), default=1)

    def pass_at_k_table(self) -> tuple[list[str], list[list[str]]]:
        """Header and rows of Table 1b: ``Combination``, ``k``, then pass@k (%) at each turn; one row per combination
        and k (:func:`~convcodeworld_gym.metrics.sample_ks`), none for a combination of one trajectory per task."""
        header = ["Combination", "k"] + [str(t) for t in self.turns]
        rows = [[_label(n), str(k)] + [_percent(values[t - s.first_turn]) if 0 <= t - s.first_turn < len(values) else ""
                                       for t in self.turns]
                for n, s in self.scores.items() for k, values in s.pass_at_k.items()]
        return header, rows

    def mrr_table(self) -> tuple[list[str], list[list[str]]]:
        """Header and rows of Table 2: ``Metric`` then MRR and Recall (%) per combination."""
        header = ["Metric"] + [_label(n) for n in self.scores]
        rows = [
            ["MRR"] + [f"{100 * s.mrr:.1f}" for s in self.scores.values()],
            ["Recall"] + [f"{100 * s.recall:.1f}" for s in self.scores.values()],
        ]
        return header, rows

    def regression_table(self) -> tuple[list[str], list[list[str]]]:
        """Header and rows of Table 3: ``Turn`` then the share (%) of episodes with a regression per combination;
        the first row (``any``) over whole episodes, then one per turn from 1 (turn 0 has no earlier turn)."""
        names = [n for n in self.scores if n in self.regressions]
        header = ["Turn"] + [_label(n) for n in names]
        rows = [["any"] + [_percent(self.regressions[n].share) for n in names]]
        rows += [[str(t)] + [_percent(self.regressions[n].share_at(t)) for n in names] for t in range(1, self.max_turns + 1)]
        return header, rows

    def canary_table(self) -> tuple[list[str], list[list[str]]]:
        """Header and rows of the canary table: per combination, twin episodes, those passed, the rate (%)."""
        header = ["Combination", "Twin episodes", "Passed", "Canary pass rate (%)"]
        return header, [[_label(n), str(c.episodes), str(c.passed), _percent(c.rate)] for n, c in self.canaries.items()]

    def _subject(self) -> str:
        who = f"{self.policy} (SYNTHETIC: no claim about any model)" if self.synthetic else self.policy
        counts = sorted({s.n_tasks for s in self.scores.values()})
        tasks = f"{counts[0]} tasks" if len(counts) == 1 else "tasks per combination: " + ", ".join(
            f"{_label(n)} {s.n_tasks}" for n, s in self.scores.items()
        )
        if self.samples > 1:
            tasks += (f", {self.samples} trajectories each (per task the mean over them)"
                      if len({s.samples for s in self.scores.values()}) == 1 else
                      ", trajectories per task: " + ", ".join(f"{_label(n)} {s.samples}" for n, s in self.scores.items()))
        left_out = {n: s.left_out for n, s in self.scores.items() if s.left_out}
        if left_out:  # no verdict: a run of theirs was lost to the infrastructure, also on its retry
            tasks += "; left out, a run lost to the infrastructure: " + ", ".join(
                f"{_label(n)} {count}" for n, count in left_out.items())
        excluded = {n: s.init_solved_excluded for n, s in self.scores.items() if s.init_solved_excluded}
        if excluded:  # exclude_init_solved: as print_results prints it, (kept)/(all)
            tasks += "; MRR and Recall without the tasks solved at turn 0: " + ", ".join(
                f"{_label(n)} {s.n_tasks - count}/{s.n_tasks}" for n, count in excluded.items() for s in [self.scores[n]])
        if self.filled:
            tasks += ("; " + " and ".join(_label(n) for n in self.filled) + " not played: every turn is the turn-0 rate, "
                      "as the reference fills them when every turn-0 program compiles (its model is then never called)")
        if self.unfinished:
            tasks += (f"; {self.unfinished} unfinished episode(s) left out (a run still going, or cut short: the next "
                      "evaluate on the folder plays them)")
        return f"{who} on {self.benchmark} ({', '.join(part for part in (self.dataset, tasks) if part)})"

    def task_count(self) -> str:
        """``"40 tasks"`` (or the range over combinations: ``"38-40 tasks"``)."""
        counts = sorted({s.n_tasks for s in self.scores.values()})
        return f"{counts[0]} tasks" if len(counts) == 1 else f"{counts[0]}-{counts[-1]} tasks"

    def captions(self) -> tuple[str, str]:
        return (
            f"Table 1. Pass@1 (%) of {self._subject()} at each turn.",
            f"Table 2. MRR and Recall (%) of {self._subject()}.",
        )

    def watch_markdown(self) -> str:
        """Table 3 (regressions) and the canary pass rate, as Markdown: what the scores do not say."""
        parts = []
        if any(n in self.regressions for n in self.scores):
            parts.append(f"{_md(*self.regression_table())}\n\nTable 3. Episodes (%) with a turn-by-turn regression "
                         "(a program broke a test that an earlier program of its episode passed): over whole episodes "
                         "(any), then at each turn, of the episodes that played it. The reward ignores regressions.")
        if self.canaries:
            rising = any((c.rate or 0.0) > 0 for c in self.canaries.values())
            note = (" Above 0: the policy passed tests that contradict the task's description, i.e. it fitted its "
                    "programs to the tests; see docs/canary.md." if rising else " 0: no sign of a policy fitted to the tests.")
            parts.append(f"{_md(*self.canary_table())}\n\nCanary twins: tasks whose one changed test contradicts their "
                         "description, played beside the tasks and left out of Tables 1-3; their pass rate is never part "
                         f"of the scores.{note}")
        if self.follows:
            header = ["Combination", "Programs on perturbed tasks", "Followed", "Following rate (%)"]
            rows = [[_label(n), str(f.programs), str(f.followed), _percent(f.rate)] for n, f in self.follows.items()]
            parts.append(f"{_md(header, rows)}\n\nPerturbed public tests: two public tests of these tasks showed each "
                         "other's expected value; a program *followed* when it passed a swapped test as shown (the wrong "
                         "expectation). Scored on the true tests in Tables 1-3; the following rate is never part of the "
                         "scores.")
        return "\n\n".join(parts)

    def markdown(self) -> str:
        """Both tables with captions and the legend of abbreviations, as Markdown."""
        c1, c2 = self.captions()
        legend = (
            "CF: compilation feedback; EF: execution feedback (partial: first 3 tests, full: all tests); "
            "SNF / SEF: simulated novice / expert feedback."
        )
        watched = self.watch_markdown()
        watched = f"{watched}\n\n" if watched else ""
        at_k = ""
        if self.samples > 1:
            at_k = (f"{_md(*self.pass_at_k_table())}\n\nTable 1b. pass@k (%) at each turn: the chance that at least one "
                    "of k of a task's trajectories, drawn without replacement, passes there (the unbiased estimate from "
                    "all of them), averaged over tasks; k = 1 is Table 1's Pass@1.\n\n")
        return f"{_md(*self.pass_table())}\n\n{c1}\n\n{at_k}{_md(*self.mrr_table())}\n\n{c2}\n\n{watched}{legend}\n"


def _percent(share: float | None) -> str:
    return "" if share is None else f"{100 * share:.1f}"


def _md(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(header), "| " + " | ".join("-" * (w - 1) + ":" for w in widths) + " |", *map(line, rows)])


def _csv(header: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def load_report(
    run_dir: str | os.PathLike[str], *, compensate_init: bool = True, exclude_init_solved: bool = False, fill_cf: bool = False
) -> Report:
    """The report of a run directory (``turns.jsonl`` read as JSON lines; ``metadata.json`` if present), of its
    finished episodes (:func:`~convcodeworld_gym.records.split_finished`; ``Report.unfinished`` counts the others).
    ``compensate_init``: static MRR credits the model's own turn-0 pass (the reference's default);
    ``exclude_init_solved`` and ``fill_cf``: see :func:`scores_by_combination`.

    Raises:
        FileNotFoundError: the directory has no ``turns.jsonl`` (nothing was run there).
        RunLogError: the log holds no finished episode, or it or ``metadata.json`` is corrupt (names the file and line).
    """
    run_dir = Path(run_dir)
    if run_dir.is_file() and run_dir.name == TURNS_FILE:
        run_dir = run_dir.parent
    if not (run_dir / TURNS_FILE).exists():
        raise FileNotFoundError(f"{run_dir} has no {TURNS_FILE}; pass the --out directory of a `convcodeworld evaluate` run")
    meta_path = run_dir / METADATA_FILE
    meta = read_metadata(meta_path) if meta_path.exists() else {}
    config = meta.get("config", {}) if isinstance(meta.get("config"), dict) else {}
    max_turns = int(config.get("max_turns", DEFAULT_MAX_TURNS))
    every = read_turns(run_dir)
    rows, unfinished = split_finished(every)
    if not rows:
        what = (f"only {len(unfinished)} unfinished episode(s)" if unfinished else "no rows" if not every else "nothing")
        raise RunLogError(f"{run_dir / TURNS_FILE} holds {what}: no finished episode to score yet; run `convcodeworld "
                          f"evaluate ... --out {run_dir}` (or let the run writing it finish)")
    rows, twins = split_canaries(rows)  # a canary twin's rows count towards its pass rate only
    if not rows:
        raise ValueError(f"{run_dir / TURNS_FILE} holds canary twins' episodes only ({len(twins)} rows): there is "
                         "nothing to score; play the tasks themselves too (a canary share below 1)")
    ids = config.get("ids") or ["ConvCodeWorld-"]
    scores = scores_by_combination(rows, max_turns, compensate_init=compensate_init,
                                   exclude_init_solved=exclude_init_solved, fill_cf=fill_cf)
    played = set(combinations(rows))
    return Report(
        scores=scores,
        filled=tuple(name for name in scores if name not in played),
        max_turns=max_turns,
        policy=str(config.get("policy", {}).get("name", rows[0].policy)),
        synthetic=bool(meta.get("synthetic", False)),
        dataset=str(config.get("dataset", {}).get("name", "")),
        benchmark=str(ids[0]).split("-", 1)[0],
        regressions=regression_shares(rows),
        canaries=canary_rates(twins),
        unfinished=len(unfinished),
        follows=follow_rates(rows),
    )


def headless_pyplot() -> Any:
    """``matplotlib.pyplot``, on the Agg backend unless one was chosen already (so no display is needed)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def plot_pass_at_turn(report: Report, path: str | os.PathLike[str]) -> Path:
    """Write :func:`pass_at_turn_figure` to ``path`` (PNG); returns the path."""
    plt = headless_pyplot()
    fig = pass_at_turn_figure(report)
    out = Path(path)
    try:
        fig.savefig(out)
    finally:
        plt.close(fig)
    return out


def pass_at_turn_figure(report: Report) -> Any:
    """Pass@1 (%) against turn, one line per combination (colour: EF; line style: verbal feedback), as a matplotlib
    figure (close it with ``pyplot.close``). The legend sits beside the axes, never over a line; 0% and 100% lie
    inside the frame; the title names the benchmark, the task set, the task count and the policy."""
    plt = headless_pyplot()
    colours = {"none": "tab:blue", "partial": "tab:orange", "full": "tab:green"}
    styles = {"none": "-", "novice": "--", "expert": ":"}
    markers = {"none": "o", "novice": "s", "expert": "^"}
    fig, ax = plt.subplots(figsize=(11, 5.5), dpi=120)
    turns = list(report.turns)
    count = len(report.scores)
    for i, (name, scores) in enumerate(report.scores.items()):
        try:
            cfg = FeedbackConfig.parse(name)
            style = {"color": colours[cfg.execution], "linestyle": styles[cfg.verbal], "marker": markers[cfg.verbal]}
        except ValueError:
            style = {"marker": "x"}
        ax.plot(list(scores.turns), [100 * p for p in scores.pass_at_turn], label=_label(name), linewidth=1.5 + 0.45 * (count - 1 - i), markersize=5, **style)
        # earlier lines are drawn wider, so a line hidden under a later one still shows at its edges
    ax.set_xlabel("Turn (0 = first program, then one rewrite per feedback turn)")
    ax.set_ylabel("Pass@1 (%)")
    ax.set_xticks(turns)
    ax.set_xlim(turns[0] - 0.3, turns[-1] + 0.3)
    ax.set_ylim(-4, 104)  # a line at 0% or 100% stays off the frame
    ax.set_yticks(range(0, 101, 20))
    ax.grid(True, alpha=0.3)
    on = f" on {report.dataset}" if report.dataset else ""
    title = f"{report.benchmark}{on} ({report.task_count()}): Pass@1 per turn — {report.policy}"
    if report.synthetic:
        title += "\nSYNTHETIC coder: no claim about any model"
    ax.set_title(title, fontsize=11)
    ax.legend(title="Feedback", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=9)
    fig.tight_layout()
    return fig


def write_report(
    run_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None, *, compensate_init: bool = True,
    exclude_init_solved: bool = False, fill_cf: bool = False,
) -> tuple[Report, dict[str, Path]]:
    """Write ``report.md``, ``pass_at_turn.csv``, ``mrr_recall.csv``, ``pass_at_turn.png``, ``regressions.csv``,
    ``canary.csv`` (its header only when the run played no canary twin) and ``pass_at_k.csv`` (its header only for a run
    of one trajectory per task) into ``out_dir`` (default: the run directory). Returns the report and the paths by role.
    The keyword options are :func:`load_report`'s.

    Raises:
        RunFolderError: ``out_dir`` is a file, cannot be written, or holds one of these files that this package did
            not write (or that changed since it did): nothing is overwritten."""
    report = load_report(run_dir, compensate_init=compensate_init, exclude_init_solved=exclude_init_solved, fill_cf=fill_cf)
    out = Path(out_dir) if out_dir is not None else Path(run_dir)
    make_folder(out)
    claim(out, REPORT_FILES.values())
    paths = {role: out / name for role, name in REPORT_FILES.items()}
    try:
        paths["markdown"].write_text(report.markdown(), encoding="utf-8")
        paths["pass_csv"].write_text(_csv(*report.pass_table()), encoding="utf-8")
        paths["mrr_csv"].write_text(_csv(*report.mrr_table()), encoding="utf-8")
        paths["regressions_csv"].write_text(_csv(*report.regression_table()), encoding="utf-8")
        paths["canary_csv"].write_text(_csv(*report.canary_table()), encoding="utf-8")
        paths["pass_at_k_csv"].write_text(_csv(*report.pass_at_k_table()), encoding="utf-8")
        plot_pass_at_turn(report, paths["plot"])
        record_written(out, REPORT_FILES.values())
    except OSError as exc:
        raise RunFolderError(f"cannot write the report in {out} ({exc.strerror or exc}); pass --out a folder you can "
                             "write in") from None
    return report, paths
