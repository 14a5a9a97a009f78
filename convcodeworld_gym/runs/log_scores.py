"""Scores of runs from their logs: live (ConvCodeWorld) and static (ConvCodeBench).

The metric definitions live in :mod:`..metrics`; this module only turns log rows into their
inputs and checks that the rows are complete.

* Live: per task, the passes of its episode turn by turn (an episode that re-executed its passing
  code, ``rerun_passed``, goes on after its pass; one that ended there carries it).
* Static: per task, the reference's passes (from the reference log) and the evaluated
  model's passes at the turns it played (from the static run), walked as
  :mod:`..metrics` says. The model's own turn-0 program (credited 1 with
  ``compensate_init=True``, the reference's default) is not part of a static replay,
  which starts at turn 1: it comes from ``turn0`` rows (the same model's live run, or a
  run whose turn 0 came from its BigCodeBench samples) when given.
  A static episode that ended at the model's pass (``StaticReplay(stop_on_pass=True)``)
  lacks the model's later turns; they count as passing (its passing code carried over),
  where the reference writes each of them anew on the reference's history.

A run of many trajectories per task (``convcodeworld evaluate --samples N``: rows with ``sample``) is scored per task
over its samples (:func:`~..metrics.live_sample_scores`, :func:`~..metrics.static_sample_scores`: the mean of each
task's samples, and pass@k); a static run's samples all replay the one reference history of each task.

Either way an episode holding a turn the infrastructure lost (``TurnRecord.infra_error``: its
run was lost, also on its retry) is left out: that turn is no verdict, so where the episode
first passed is unknown, and counting it as a failure would blame the program. ``Scores.left_out``
says how many were (a static task whose own turn-0 row was lost is left out too).

Holds:
    combinations          the feedback combinations a set of rows holds
    live_run_scores       Scores of a live run, one combination
    static_run_scores     Scores of a static run against its reference log, one combination
    run_scores            either, decided by the rows; the function report code calls per combination
    carried_turn0_scores  the scores of a combination whose every turn carries turn 0's program (CF and CF SNF
                          when every turn-0 program compiles), from a run's turn-0 rows
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from ..reference import ReferenceLog, ReferenceSpec, load_reference
from ..combos import ALL_CONFIGS, FeedbackConfig
from ..errors import ReferenceLogError
from ..metrics import DEFAULT_MAX_TURNS, Scores, live_sample_scores, static_sample_scores
from ..records import TurnRecord, group_episodes

__all__ = ["combinations", "live_run_scores", "static_run_scores", "run_scores", "carried_turn0_scores"]


def combinations(rows: Iterable[TurnRecord]) -> list[str]:
    """The combinations (id parts) present in ``rows``, in the paper's order."""
    present = {row.feedback for row in rows}
    unknown = sorted(present - {c.name for c in ALL_CONFIGS})
    if unknown:
        raise ReferenceLogError(f"rows name unknown feedback combination(s) {unknown}; expected id parts like 'CF-EF_full-SNF'")
    return [c.name for c in ALL_CONFIGS if c.name in present]


#: An episode of one combination: its task and its sample.
_Key = tuple[str, int]


def _episodes(rows: Iterable[TurnRecord], feedback: str | FeedbackConfig, first_turn: int, what: str
              ) -> tuple[dict[_Key, list[TurnRecord]], set[_Key]]:
    """The episodes of one combination, ``(task id, sample)`` -> its turns (checked: every turn from ``first_turn``
    on, once), and the keys of those among them that hold a turn the infrastructure lost (to be left out)."""
    name = FeedbackConfig.parse(feedback).name
    rows = list(rows)
    episodes = {(task_id, sample): turns for (combo, task_id, sample), turns in group_episodes(rows).items()
                if combo == name}
    if not episodes:
        raise ReferenceLogError(f"the {what} has no rows for combination {name} (it holds: {', '.join(combinations(rows)) or 'no rows'})")
    for (task_id, sample), turns in episodes.items():
        numbers = [row.turn for row in turns]
        expected = list(range(first_turn, first_turn + len(turns)))
        if numbers != expected:
            raise ReferenceLogError(
                f"the {what}'s {name} episode of {task_id!r}{f' (sample {sample})' if sample else ''} has turns "
                f"{numbers}, expected {expected}: a turn is missing or duplicated; re-run that task"
            )
    return episodes, {key for key, turns in episodes.items() if any(row.infra_error for row in turns)}


def _by_task(episodes: dict[_Key, list[TurnRecord]]) -> dict[str, list[list[TurnRecord]]]:
    """Episodes grouped by task (in the order tasks first appear), each task's samples in sample order."""
    out: dict[str, dict[int, list[TurnRecord]]] = {}
    for (task_id, sample), turns in episodes.items():
        out.setdefault(task_id, {})[sample] = turns
    return {task_id: [samples[s] for s in sorted(samples)] for task_id, samples in out.items()}


def _scored(episodes: dict[_Key, list[TurnRecord]], lost: set[_Key], name: str, what: str) -> dict[_Key, list[TurnRecord]]:
    """``episodes`` without the ``lost`` ones; raises when none is left to score."""
    kept = {key: turns for key, turns in episodes.items() if key not in lost}
    if not kept:
        raise ReferenceLogError(
            f"every {name} episode of the {what} ({len(episodes)}) holds a turn the infrastructure lost "
            "(rows with infra_error): there is nothing to score; play them again (remove their rows and resume)"
        )
    return kept


def live_run_scores(
    rows: Iterable[TurnRecord], feedback: str | FeedbackConfig, max_turns: int = DEFAULT_MAX_TURNS, *,
    exclude_init_solved: bool = False,
) -> Scores:
    """Pass@turn, MRR and Recall of a live run's episodes of one combination (``exclude_init_solved``: see
    :func:`~convcodeworld_gym.metrics.live_episode_scores`).

    >>> from convcodeworld_gym.records import TurnRecord
    >>> row = lambda task, turn, passed: TurnRecord("CF", task, turn, "", "", "", "", "", True, passed, float(passed), 0.0)
    >>> s = live_run_scores([row("a", 0, False), row("a", 1, True), row("b", 0, False)], "CF")
    >>> s.mrr, s.recall, s.pass_at_turn[:2]
    (0.25, 0.5, (0.0, 0.5))

    Episodes holding a turn the infrastructure lost are left out (``Scores.left_out`` counts them). Several samples
    of a task are scored as :func:`~convcodeworld_gym.metrics.live_sample_scores` says (pass@k among them).
    """
    name = FeedbackConfig.parse(feedback).name
    episodes, lost = _episodes(rows, name, 0, "live run")
    kept = _scored(episodes, lost, name, "live run")
    scores = live_sample_scores([[[row.passed for row in turns] for turns in samples]
                                 for samples in _by_task(kept).values()], max_turns,
                                exclude_init_solved=exclude_init_solved)
    return replace(scores, left_out=len(lost))


def static_run_scores(
    rows: Iterable[TurnRecord],
    feedback: str | FeedbackConfig,
    reference: ReferenceSpec | None = None,
    *,
    turn0: Iterable[TurnRecord] | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    compensate_init: bool = True,
    exclude_init_solved: bool = False,
) -> Scores:
    """ConvCodeBench Pass@turn (turns 1..), MRR and Recall of a static run's episodes of one combination.

    Args:
        rows: the static run (turns 1..; every task it holds is scored). Turn-0 rows among them
            are the model's own turn 0 (a run with ``--turn0`` judges its samples so).
        reference: the reference log; by default the one the rows name (``TurnRecord.reference``).
        turn0: rows holding the evaluated model's own turn-0 program per task (its live run's
            rows do; those of the same combination are preferred, else any combination's);
            default: the run's own turn-0 rows. Without any, MRR and Recall ignore the model's turn 0.
        compensate_init: credit the model's own turn-0 pass 1 in MRR (the reference's default).
        exclude_init_solved: leave the tasks whose own turn-0 program passed out of MRR and Recall
            (print_results.py's option of that name; off by default there too).

    Episodes holding a turn the infrastructure lost, and tasks whose own turn-0 row it lost, are left out
    (``Scores.left_out``). The samples of a task (``TurnRecord.sample``) all replay its one reference history; each
    takes its own turn 0 from the rows of its sample (else sample 0's).

    Raises:
        ReferenceLogError: the reference lacks a task of the run, a run episode misses a turn,
            no reference is given or named, or ``turn0`` lacks a task.
    """
    name = FeedbackConfig.parse(feedback).name
    rows = list(rows)
    logged_turn0 = [row for row in rows if row.turn == 0 and row.feedback == name]  # the run's own (--turn0)
    rows = [row for row in rows if row.turn != 0]
    if turn0 is None and logged_turn0:
        turn0 = logged_turn0
    episodes, lost = _episodes(rows, name, 1, "static run")
    if reference is None:
        named = {row.reference for turns in episodes.values() for row in turns}
        if len(named) != 1 or not next(iter(named)):
            raise ReferenceLogError(
                f"the static run's {name} rows name {sorted(named)} as their reference log; pass reference=<the log it replayed>"
            )
        reference = named.pop()
    log: ReferenceLog = load_reference(reference, name, max_turns)
    own_turn0: dict[_Key, bool] = {}
    if turn0 is not None:
        firsts = [row for row in turn0 if row.turn == 0]
        # the same combination's turn 0 when present, else any combination's (turn 0 sees no feedback)
        own_turn0 = {(row.task_id, row.sample): row.passed for row in firsts if row.feedback != name}
        own_turn0.update({(row.task_id, row.sample): row.passed for row in firsts if row.feedback == name})
        turn0_lost = {(row.task_id, row.sample): bool(row.infra_error) for row in firsts if row.feedback != name}
        turn0_lost.update({(row.task_id, row.sample): bool(row.infra_error) for row in firsts if row.feedback == name})
        own = {key: key if key in own_turn0 else (key[0], 0) for key in episodes}  # a sample's own, else sample 0's
        missing = [task_id for (task_id, _), found in own.items() if found not in own_turn0]
        if missing:
            raise ReferenceLogError(f"the turn-0 rows lack task(s) {missing[:5]}; pass the model's run that played every task")
        lost |= {key for key, found in own.items() if turn0_lost[found]}
        own_turn0 = {key: own_turn0[found] for key, found in own.items()}
    items: dict[str, list[tuple[list[bool], dict[int, bool]]]] = {}
    for (task_id, sample), turns in _scored(episodes, lost, name, "static run").items():
        model = {row.turn: row.passed for row in turns}
        if turns[-1].passed:  # the episode stopped at the model's pass: its code is carried over
            model.update({t: True for t in range(turns[-1].turn + 1, max_turns + 1)})
        if (task_id, sample) in own_turn0:
            model[0] = own_turn0[(task_id, sample)]
        items.setdefault(task_id, []).append((log.passes(task_id), model))
    scores = static_sample_scores(items.values(), max_turns, compensate_init=compensate_init,
                                  exclude_init_solved=exclude_init_solved)
    return replace(scores, left_out=len(lost))


def run_scores(
    rows: Sequence[TurnRecord],
    feedback: str | FeedbackConfig,
    *,
    reference: ReferenceSpec | None = None,
    turn0: Iterable[TurnRecord] | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    compensate_init: bool = True,
    exclude_init_solved: bool = False,
) -> Scores:
    """Scores of one combination of a run, static when its rows name a reference log (or
    ``reference`` is given), else live. ``compensate_init`` applies to static scores only;
    ``exclude_init_solved`` to both."""
    name = FeedbackConfig.parse(feedback).name
    static = reference is not None or any(row.reference for row in rows if row.feedback == name)
    if static:
        return static_run_scores(rows, name, reference, turn0=turn0, max_turns=max_turns, compensate_init=compensate_init,
                                 exclude_init_solved=exclude_init_solved)
    return live_run_scores(rows, name, max_turns, exclude_init_solved=exclude_init_solved)


def carried_turn0_scores(rows: Iterable[TurnRecord], max_turns: int = DEFAULT_MAX_TURNS) -> Scores | None:
    """The scores of a live combination in which the model is never called after turn 0, from a run's turn-0 rows:
    Pass@1 at every turn, MRR and Recall are all the turn-0 pass rate. None when the rows hold no live turn 0, or
    some turn-0 program does not compile.

    This is how the reference's ``print_results.py`` fills the CF and CF SNF columns when those runs are missing
    (print_results.py:321-329 and 371-379: ``pass_at_1`` of the initial results, after asserting that every initial
    program compiles, print_results.py:328): under CF and CF SNF the reference's protocol calls the model only on code
    that does not compile (pot.py:576-594; the novice is silent on code that compiles, pot.py:526-529), so each turn
    carries turn 0's program. Turn 0 is taken per task from the first combination of the rows (paper order) that
    played it (all the same with ``--turn0``); a task whose turn-0 run the infrastructure lost is left out.

    >>> from convcodeworld_gym.records import TurnRecord
    >>> row = lambda task, passed: TurnRecord("CF-EF_full", task, 0, "", "", "", "", "", True, passed, float(passed), 0.0)
    >>> s = carried_turn0_scores([row("a", True), row("b", False), row("c", False), row("d", False)], max_turns=2)
    >>> s.pass_at_turn, s.mrr, s.recall
    ((0.25, 0.25, 0.25), 0.25, 0.25)
    """
    rows = [row for row in rows if row.turn == 0 and not row.reference]
    firsts: dict[_Key, TurnRecord] = {}  # per task and sample
    for name in combinations(rows):
        for row in rows:
            if row.feedback == name:
                firsts.setdefault((row.task_id, row.sample), row)
    if not firsts or not all(row.compile_ok for row in firsts.values()):
        return None
    lost = {key for key, row in firsts.items() if row.infra_error}
    kept = {key: [row] for key, row in firsts.items() if key not in lost}
    if not kept:
        return None
    return replace(live_sample_scores([[[row.passed for row in turns] for turns in samples]
                                       for samples in _by_task(kept).values()], max_turns), left_out=len(lost))
