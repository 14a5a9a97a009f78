"""The ``convcodeworld`` command line.

Subcommands:
    demo              play a few episodes with the canonical solution and with a wrong-then-right
                      policy, printing every turn (offline: --dataset humaneval)
    evaluate          run a policy on every task of one or more ids, log every turn, print the report
                      (logic: :mod:`.runs.evaluate`, :mod:`.policies`)
    report            print and write the tables and plot of a run directory (logic: :mod:`.runs.report`)
    selfcheck         run every canonical solution of a task set in the sandbox; pass rate and why each failure failed
    tasks             what a task set's default set leaves out on a runtime, and why: each task, and how to get it back
    runtime           build a task set's pinned runtime in its own venv (``runtime install bigcodebench``)
    import-reference  convert the reference implementation's result files into a turn log
    correlate         Spearman correlation of live vs static (ConvCodeBench) MRR and Recall rankings
    serve             an OpenEnv-compatible episode server over the live ids (logic: :mod:`.service`)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import gymnasium as gym

from . import __version__
from .errors import ConvCodeWorldError
from .feedback.execution import FEEDBACK_STYLES
from .observation import FEEDBACK_KEYS
from .policies import POLICY_KINDS, Policy, make_policy
from .protocol import PROTOCOLS
from .registration import LIVE_IDS, env_id
from .records import RunFolderLock
from .runs.evaluate import EvalConfig, RunSummary, check_run_folder, default_dataset, run_evaluation
from .runs.report import write_report
from .sandbox import Executor, Limits, SandboxExecutor
from .sandbox.confinement.confine import Level
from .sandbox.runtimes.install import (KNOWN_RUNTIMES, RUNTIME_PYTHON_ENV, RUNTIMES_DIR_ENV, install_runtime,
                                       resolve_runtime, runtimes_dir)
from .service.command import add_serve
from .tasks import BIGCODEBENCH_ENV, Task

__all__ = ["main", "build_parser"]


def _wrong_program(task: Task) -> str:
    """A program that compiles but fails: the signature with an empty body."""
    return f"```python\n{task.code_prompt.rstrip()}\n    pass\n```"


def _play(env: gym.Env, task_id: str, replies: Callable[[Task, int], str], out=sys.stdout) -> None:
    obs, info = env.reset(options={"task_id": task_id})
    task: Task = env.unwrapped.task  # type: ignore[attr-defined]
    while True:
        turn = obs["turn"]
        obs, reward, terminated, truncated, info = env.step(replies(task, turn))
        print(f"  turn {turn}: reward={reward:.0f} tests passed {info['pass_fraction']:.0%}", file=out)
        for key in FEEDBACK_KEYS:
            if obs[key]:
                shown = textwrap.shorten(obs[key].replace("\n", " | "), width=110, placeholder=" ...")
                print(f"    {key}: {shown}", file=out)
        if terminated or truncated:
            print(f"  -> episode over ({info['episode_end']})", file=out)
            return


def _positive_int(text: str) -> int:
    """An argument that counts something there must be at least one of.

    >>> _positive_int("3")
    3
    >>> _positive_int("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be at least 1, got 0
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _count(text: str) -> int:
    """An argument that counts something there may be none of (``--max-turns 0``: turn 0 only)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


class _DefaultsShown(argparse.HelpFormatter):
    """Help that shows each option's default (``(default: X)``) unless its text already speaks of it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if ("default" in text.lower() or action.default in (None, False, True, argparse.SUPPRESS, [])
                or not action.option_strings):
            return action.help
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose help shows defaults, for the command and each subcommand."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _DefaultsShown)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


def cmd_demo(args: argparse.Namespace) -> int:
    dataset = args.dataset or default_dataset()[0]
    kwargs = {"dataset": dataset, "max_turns": args.max_turns, "runtime": args.runtime}
    env = gym.make(env_id(args.feedback), **kwargs)
    try:
        tasks = env.unwrapped.tasks  # type: ignore[attr-defined]
        policies: dict[str, Callable[[Task, int], str]] = {
            "canonical solution": lambda task, turn: task.solution_code,
            "wrong, then canonical": lambda task, turn: _wrong_program(task) if turn == 0 else task.solution_code,
        }
        print(f"{env.spec.id if env.spec else ''} on {tasks.name} ({len(tasks)} tasks)")
        for task in tasks.tasks[: args.episodes]:
            for label, policy in policies.items():
                print(f"\n[{task.task_id}] policy: {label}")
                _play(env, task.task_id, policy)
    finally:
        env.close()
    return 0


def cmd_import_reference(args: argparse.Namespace) -> int:
    from .runs.reference_import import iteration_files, write_reference_log

    files = list(args.files)
    if args.discover:
        if len(files) != 2:
            raise SystemExit("--discover takes exactly two files: turn 0's generation file and the iteration-1 file")
        files = [files[0], *iteration_files(files[1])]
    path = write_reference_log(files, args.out, feedback=args.feedback, policy=args.policy, max_turns=args.max_turns)
    print(f"wrote {path} from {len(files)} turn file(s)")
    return 0


def cmd_correlate(args: argparse.Namespace) -> int:
    from .runs.correlation import correlate, format_correlations

    print(format_correlations(correlate(args.live_dirs, args.static, reference=args.reference, max_turns=args.max_turns)))
    return 0


def cmd_selfcheck(args: argparse.Namespace) -> int:
    from .runs.selfcheck import run_selfcheck
    from .tasks import load_tasks

    ids = [t.strip() for t in args.task_ids.split(",") if t.strip()] if args.task_ids else None
    tasks = load_tasks(args.dataset, task_ids=ids, stdlib_only=args.stdlib_only)
    shipped = args.write_profiles is None  # a file written from shipped profiles would only copy them
    with SandboxExecutor(workers=args.workers, require=args.require, runtime=args.runtime, shipped=shipped) as executor:
        report = run_selfcheck(tasks, executor, by_id=ids is not None, limit=args.limit, progress=not args.no_progress)
        if args.write_profiles is not None:
            _write_profiles(args.write_profiles, tasks, executor)
        if args.write_drift is not None:
            _write_drift(args.write_drift, tasks, report, executor)
    print(report.render())
    return 0 if report.passed == report.total else 1


def _write_drift(path: str, tasks, report, executor: SandboxExecutor) -> None:
    """The tasks whose canonical solutions failed here and pass in the pinned runtime (its shipped profiles), as a
    drift file (:mod:`.sandbox.host.drift`)."""
    from .sandbox.host.drift import pinned_releases, write_drift
    from .sandbox.host.shipped import shipped_profiles
    from .sandbox.runtimes.install import KNOWN_RUNTIMES

    probe = executor.runtime_probe()
    installed = probe.describe()["packages"] if probe is not None else {}
    failures = {task_id: detail for task_id, (kind, detail) in report.failures.items()
                if kind in ("other", "timeout", "memory")}
    shipped = shipped_profiles()
    count = write_drift(path, failures, tasks, pinned_releases(KNOWN_RUNTIMES["bigcodebench"]), installed,
                        (t.task_id for t in tasks if shipped.lookup(t) is not None))
    print(f"wrote {count} drifted task(s) to {path}")


def _write_profiles(path: str, tasks, executor: SandboxExecutor) -> None:
    """The profiles ``executor`` measured for ``tasks``, written as a shipped-profile file (:mod:`.sandbox.host.shipped`)."""
    from .sandbox.host.profile import profile_key
    from .sandbox.host.shipped import write_profiles

    fingerprint = executor.fingerprint()
    measured = {t.task_id: p for t in tasks if (p := executor.profiles.get(profile_key(t, fingerprint))) is not None}
    probe = executor.runtime_probe()
    made_with = {"runtime": probe.identity() if probe is not None else executor.fingerprint(),
                 "confinement": executor.confinement.get("level"), "workers": executor.default_concurrency()}
    sources = sorted({t.source for t in tasks})
    count = write_profiles(path, tasks, measured, dataset=",".join(sources), made_with=made_with)
    print(f"wrote {count} profiles (of {len(tasks)} tasks) to {path}", file=sys.stderr)


def cmd_tasks(args: argparse.Namespace) -> int:
    """List what the default set of ``--dataset`` leaves out on ``--runtime`` (:mod:`.selection`), without running
    anything there but the question of what the runtime holds."""
    from .sandbox.runtimes.install import resolve_runtime
    from .sandbox.runtimes.needs import RuntimeProbe
    from .selection import select_tasks

    dataset = args.dataset or default_dataset()[0]
    probe = RuntimeProbe(resolve_runtime(args.runtime) or sys.executable)
    chosen = select_tasks(dataset, probe, stdlib_only=args.stdlib_only, allow_forgeable=args.allow_forgeable, warn=False)
    print(chosen.to_json() if args.json else chosen.render())
    return 0


def cmd_canaries(args: argparse.Namespace) -> int:
    """``canaries build``: verify each task's canary twin in the sandbox and write the list; ``canaries list``: the
    verified twins of a task set (:mod:`.tasks.canary`)."""
    from .runs.canaries import build_list
    from .selection import select_tasks
    from .tasks import load_tasks
    from .tasks.canary import user_lists_dir, verified_twins

    dataset = args.dataset or default_dataset()[0]
    if args.action == "list":
        tasks = load_tasks(dataset, limit=args.limit)
        twins = verified_twins(tasks)
        for task_id, twin in twins.items():
            assert twin.change is not None
            print(f"{twin.task_id}  {twin.change.kind:<8}  {twin.change.describe()}")
        print(f"{tasks.name}: {len(twins)} of {len(tasks)} tasks have a verified canary twin", file=sys.stderr)
        return 0
    with SandboxExecutor(runtime=args.runtime) as executor:
        chosen = select_tasks(dataset, executor.runtime_probe(), warn=False)
        tasks = chosen.tasks.subset(limit=args.limit) if args.limit is not None else chosen.tasks
        left_out = {item.task_id: item.detail for item in chosen.left_out} if args.limit is None else {}
        built = build_list(tasks, executor, dataset=chosen.source.name, max_candidates=args.max_candidates,
                           left_out=left_out, log=lambda line: print(line, file=sys.stderr))
    out = built.write(args.out or user_lists_dir() / f"{_slug(chosen.source.name)}.json")
    print(f"{chosen.source.name}: {len(built.twins)} verified canary twins, {len(built.excluded)} tasks without one; "
          f"written to {out}")
    return 0


def _add_runtime(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runtime", default=None, help=(
        "the interpreter that runs the programs: a python executable, a venv dir, or 'bigcodebench' (see "
        f"`convcodeworld runtime install`); default ${RUNTIME_PYTHON_ENV}, else the installed BigCodeBench runtime, "
        "else this interpreter"))


def cmd_runtime(args: argparse.Namespace) -> int:
    if args.action == "where":
        print(resolve_runtime(None) or f"{sys.executable} (this interpreter: no runtime installed or configured)")
        return 0
    python = install_runtime(args.name, target=args.dir, python=args.python, requirements=args.requirements,
                             nltk_data=not args.no_nltk_data)
    if args.dir is not None:
        print(f"use it with --runtime {Path(args.dir)} (or ${RUNTIME_PYTHON_ENV}={python})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="convcodeworld", description="ConvCodeWorld / ConvCodeBench environments.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo", help="play a few episodes with scripted policies and print each turn",
        description="Play the first tasks of a task set twice each, with two scripted policies (no model needed): "
        "the canonical solution, which passes at turn 0, and a wrong program then the canonical solution, which "
        "shows the feedback of one failed turn. Prints every turn: the reward, the share of tests passed and the "
        "feedback texts. Try: convcodeworld demo --dataset humaneval")
    demo.add_argument("--dataset", help=f"humaneval, bigcodebench, livecodebench, taco, taco-verified, codecontests, apps (options after ?: livecodebench?version=release_v5) or a task file (default: bigcodebench, from ${BIGCODEBENCH_ENV} or the hub)")
    demo.add_argument("--feedback", default="CF-EF_full", help=f"feedback combination (ids: {', '.join(LIVE_IDS)})")
    demo.add_argument("--episodes", type=_positive_int, default=3, help="number of tasks to play (at least 1)")
    demo.add_argument("--max-turns", type=_count, default=10, help="feedback turns after turn 0")
    _add_runtime(demo)
    demo.set_defaults(func=cmd_demo)
    _add_evaluate(sub)
    rep = sub.add_parser("report", help="print and write the tables (Markdown, CSV) and the plot (PNG) of a run")
    rep.add_argument("run_dir", help="the --out directory of an evaluate run")
    rep.add_argument("--out", help="where to write the files (default: the run directory)")
    _add_scoring_options(rep)
    rep.set_defaults(func=cmd_report)

    imp = sub.add_parser("import-reference", help="convert the reference repository's result files into a turn log")
    imp.add_argument("files", nargs="+", help="generation .jsonl files in turn order (turn 0 first), each with its _eval_results.json beside it")
    imp.add_argument("--feedback", required=True, help="the combination the reference run used, e.g. CF-EF_full-SEF")
    imp.add_argument("--out", required=True, help="run directory to write turns.jsonl into")
    imp.add_argument("--policy", default="", help="the reference model's name, stored in every row")
    imp.add_argument("--max-turns", type=_count, default=10, help="feedback turns after turn 0 to import")
    imp.add_argument("--discover", action="store_true", help="given turn 0's file and the iteration-1 file, also take its _ITER=k siblings")
    imp.set_defaults(func=cmd_import_reference)

    cor = sub.add_parser("correlate", help="Spearman correlation of live vs static MRR and Recall over policies")
    cor.add_argument("live_dirs", nargs="+", help="live run directories, one per policy")
    cor.add_argument("--static", nargs="+", required=True, help="static run directories, in the same policy order")
    cor.add_argument("--reference", help="the reference log the static runs replayed (default: the one their rows name)")
    cor.add_argument("--max-turns", type=_count, default=10, help="feedback turns after turn 0 of the runs")
    cor.set_defaults(func=cmd_correlate)

    check = sub.add_parser("selfcheck", help="run every canonical solution of a task set; report pass rate and failure reasons")
    check.add_argument("--dataset", default="humaneval", help="humaneval, bigcodebench, livecodebench, taco, taco-verified, codecontests, apps (options after ?) or a task file")
    check.add_argument("--stdlib-only", action="store_true", help="only tasks that need nothing beyond the standard library")
    check.add_argument("--task-ids", help="comma-separated task ids (run even when the runtime lacks what they need)")
    check.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    check.add_argument("--no-progress", action="store_true", help="no progress bar")
    check.add_argument("--write-profiles", metavar="PATH", default=None, help=(
        "calibrate every task here (no shipped profiles) and write the passing ones' judge mode, canonical time and "
        "import profile to PATH (the package ships convcodeworld_gym/sandbox/profiles/*.json made this way)"))
    check.add_argument("--write-drift", metavar="PATH", default=None, help=(
        "write the tasks whose canonical solutions fail here and pass in the pinned runtime, with the releases they "
        "failed with, to PATH (the package ships convcodeworld_gym/sandbox/host/drift/*.json made this way in a "
        "runtime of the newest releases)"))
    _add_runtime(check)
    check.add_argument("--workers", type=int, default=None, help="sandbox workers (default: CPUs)")
    check.add_argument("--require", default=None, choices=[level.value for level in Level], help="fail unless this confinement level is reached")
    check.set_defaults(func=cmd_selfcheck)

    tasks = sub.add_parser("tasks", help="list the tasks a task set's default set leaves out on a runtime, why, and how to get them back",
                           description="The tasks gym.make and evaluate leave out of a default set (no --task-ids): those "
                           "only an in-process judge can judge, those needing modules or NLTK data the runtime lacks, those "
                           "whose canonical solutions fail with the runtime's library releases where they are not the "
                           "pinned ones, and rows a dataset gives that cannot be judged; per task its id, the kind (judge, "
                           "runtime, versions or data) and the reason, then how to get them back.")
    tasks.add_argument("--dataset", help=f"humaneval, bigcodebench, livecodebench, taco, taco-verified, codecontests, apps (options after ?: livecodebench?version=release_v5) or a task file (default: bigcodebench, from ${BIGCODEBENCH_ENV} or the hub)")
    tasks.add_argument("--stdlib-only", action="store_true", help="only tasks that need nothing beyond the standard library")
    tasks.add_argument("--allow-forgeable", action="store_true", help="as allow_forgeable=True: keep the tasks only an in-process judge can judge")
    tasks.add_argument("--json", action="store_true", help="print JSON: counts and one record per task left out")
    _add_runtime(tasks)
    tasks.set_defaults(func=cmd_tasks)

    can = sub.add_parser("canaries", help="canary twins: build (verify each task's twin in the sandbox) or list a task set's",
                         description="Canary twins keep a task's description and change one test to contradict it; only a "
                         "program fitted to the tests passes one (docs/canary.md). build: verify each task's twin in the "
                         "sandbox (the canonical solution must fail the changed test and pass the rest) and write the "
                         "list; list: the verified twins of a task set.")
    can.add_argument("action", choices=("build", "list"), help="build: verify and write the list; list: show it")
    can.add_argument("--dataset", help="humaneval, bigcodebench, livecodebench, taco, taco-verified, codecontests, apps (options after ?) or a task file (default: bigcodebench)")
    can.add_argument("--limit", type=int, help="first N tasks only")
    can.add_argument("--max-candidates", type=int, default=3, help="build: candidate changes tried per task (default 3)")
    can.add_argument("--out", help="build: the list file (default: ~/.cache/convcodeworld-gym/canaries/<dataset>.json, "
                     "read by every env from then on)")
    _add_runtime(can)
    can.set_defaults(func=cmd_canaries)

    rt = sub.add_parser("runtime", help="build a task set's pinned runtime in its own venv, or show the one in use",
                        description=f"install NAME: build the runtime in its own venv under {runtimes_dir()} "
                        f"(${RUNTIMES_DIR_ENV}), where the env finds it without flags. where: print the runtime in use.")
    rt.add_argument("action", choices=("install", "where"), help="install: build the runtime; where: print the one in use")
    rt.add_argument("name", nargs="?", default="bigcodebench", choices=sorted(KNOWN_RUNTIMES), help="the runtime")
    rt.add_argument("--dir", default=None, help="build it here instead (then pass --runtime DIR)")
    rt.add_argument("--python", default=None, help="the Python that makes the venv (default: this one's base; 3.10 or 3.11)")
    rt.add_argument("--requirements", default=None, help="requirements file (default: envs/<name>/requirements.txt)")
    rt.add_argument("--no-nltk-data", action="store_true", help="do not download NLTK data")
    rt.set_defaults(func=cmd_runtime)
    add_serve(sub)
    return parser


def _add_scoring_options(parser: argparse.ArgumentParser) -> None:
    """The report's scoring options (print_results.py's): ``--no-compensate-init``, ``--exclude-init-solved``, ``--fill-cf``."""
    parser.add_argument(
        "--exclude-init-solved", action="store_true",
        help="MRR and Recall without the tasks whose turn-0 program passed (the reference's exclude_init_solved=True)",
    )
    parser.add_argument(
        "--fill-cf", action="store_true",
        help="a live run without CF or CF SNF gets their columns from its turn 0, as the reference's print_results "
             "does (only when every turn-0 program compiles)",
    )
    parser.add_argument(
        "--no-compensate-init", dest="compensate_init", action="store_false",
        help="static MRR: do not credit the model's own turn-0 pass (the reference's compensate_init=False)",
    )


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser(
        "evaluate",
        help="run a policy on every task of one or more ids and report Pass@1 per turn, MRR and Recall",
        description="Run a policy on every task of one or more ids (default: all 9 ConvCodeWorld ids), log every "
        "turn to OUT/turns.jsonl, resume when rerun, then print the report. The default policy is the SYNTHETIC "
        "offline coder (no model needed; no claim about any model).",
    )
    ev.add_argument("ids", nargs="*", help="env ids or combinations (CF-EF_full); default: all 9 ConvCodeWorld ids")
    data = ev.add_argument_group("tasks")
    data.add_argument("--dataset", help=f"humaneval, bigcodebench, livecodebench, taco, taco-verified, codecontests, apps (options after ?: livecodebench?version=release_v5) or a task file (default: bigcodebench, from ${BIGCODEBENCH_ENV} or the hub; tasks the runtime cannot serve are left out with a warning)")
    data.add_argument("--stdlib-only", action="store_true", default=None, help="only tasks needing nothing but the standard library")
    data.add_argument("--task-ids", help="comma-separated task ids")
    data.add_argument("--limit", type=int, help="first N tasks only")
    data.add_argument("--canary", type=_canary_arg, metavar="SHARE|IDS",
                      help="play canary twins beside the tasks (ConvCodeWorld ids): a share of the episodes in [0, 1), or "
                      "comma-separated task ids to twin; their pass rate is reported beside the scores, never in them "
                      "(docs/canary.md)")
    data.add_argument("--canary-seed", type=int, default=0, help="which tasks a --canary share twins (default 0)")
    pol = ev.add_argument_group("policy")
    pol.add_argument("--policy", choices=POLICY_KINDS, default=None,
                     help="default: openai when --model or --base-url is given, else synthetic")
    pol.add_argument("--strength", type=float, default=0.5, help="synthetic coder's strength in [0, 1] (default 0.5)")
    pol.add_argument("--replay-file", help="replay policy: JSONL of task_id, turn, reply (or task_id, solution)")
    pol.add_argument("--model", help="openai policy: the model name")
    pol.add_argument("--base-url", help="openai policy: endpoint, e.g. http://localhost:8000/v1 (vLLM), http://localhost:11434/v1 (Ollama); default OpenAI")
    pol.add_argument("--api-key", help="openai policy: the key (default $OPENAI_API_KEY; prefer the variable: arguments show in `ps`)")
    pol.add_argument("--temperature", type=float, default=0.0, help="openai policy: sampling temperature (the paper: 0)")
    pol.add_argument("--max-tokens", type=int, default=2048, help="new tokens per reply (default 2048, as the paper)")
    pol.add_argument("--n", type=int, default=1, help="choices per request; the first is played")
    pol.add_argument("--history", action="store_true", help="send the whole conversation, not only the previous code and this turn's feedback")
    pol.add_argument("--max-retries", type=int, default=5, help="retries on 429/5xx/timeouts, with exponential backoff; "
                     "each retry prints a line")
    pol.add_argument("--timeout", type=float, default=120.0, help="seconds a request may wait for its reply (a long "
                     "reply of a slow model needs tens of seconds; an endpoint that does not answer at all is found "
                     "before the run, within 10 s)")
    sim = ev.add_argument_group("verbal feedback (SNF / SEF ids only)")
    sim.add_argument("--simulator", choices=("auto", "offline", "llm"), default="auto",
                     help="the simulated user: llm (an OpenAI-compatible model, the paper's GPT-4o), offline (rules, no "
                     "model), auto (llm when $CONVCODEWORLD_SIMULATOR_MODEL or --simulator-base-url names one)")
    sim.add_argument("--simulator-model", help="model of the LLM simulator (default: the paper's gpt-4o-2024-05-13)")
    sim.add_argument("--simulator-base-url", help="endpoint of the LLM simulator")
    run = ev.add_argument_group("run")
    run.add_argument("--max-turns", type=_count, default=10, help="feedback turns after turn 0 (default 10, as the paper)")
    run.add_argument("--protocol", choices=PROTOCOLS, default="reference",
                     help="reference (default): call the model only when the reference does (no call on a turn with nothing "
                     "to act on, compile fixes inside a turn); always: one call every turn")
    run.add_argument("--turn0", metavar="FILE",
                     help="BigCodeBench samples (JSONL of task_id, solution) as every task's turn 0, judged without a "
                     "model call, in live and static runs (the paper's turn 0); default: the policy writes turn 0")
    run.add_argument("--feedback-style", choices=FEEDBACK_STYLES, default="reference",
                     help="execution feedback text: reference (default, the text the paper's models saw), corrected "
                     "(the reference's text with its defects fixed) or rich (source lines, whole tracebacks)")
    run.add_argument("--samples", type=_positive_int, default=1, metavar="N",
                     help="trajectories per task and id (default 1): each its own episode (rows carry `sample`), the "
                     "policy seeded --seed + sample; the report adds pass@k; contexts for bandit learning are cut from "
                     "them (docs/training.md)")
    run.add_argument("--concurrency", type=_positive_int, default=2, help="episodes in flight (on one event loop, sharing one executor; against a model endpoint, tens to hundreds)")
    run.add_argument("--seed", type=int, default=0, help="given to the policy for every episode and to the "
                     "simulated user (offline policies and users are deterministic given it)")
    run.add_argument("--out", help="run directory (default: runs/<policy>-<tasks>); rerun with the same settings to resume")
    run.add_argument("--suite-timeout", type=float, default=121.0, help="seconds for a whole test suite (default 121, as the reference)")
    run.add_argument("--test-timeout", type=float, help="seconds per test method (default: none)")
    run.add_argument("--ray", metavar="ADDRESS", help="run the programs on a Ray cluster (ray://head:10001, auto, host:6379, or 'local' for a Ray instance on this machine); each node runs the confined sandbox")
    run.add_argument("--env-kwarg", action="append", default=[], metavar="KEY=VALUE", help="extra env kwarg (VALUE parsed as JSON, else a string); repeatable")
    run.add_argument("--no-report", action="store_true", help="do not print and write the report at the end")
    _add_scoring_options(run)
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    _add_runtime(run)
    ev.set_defaults(func=cmd_evaluate)


def _canary_arg(text: str) -> float | tuple[str, ...]:
    """``--canary``: a share (``0.1``) or comma-separated task ids (``HumanEval/0,HumanEval/3``).

    >>> _canary_arg("0.1"), _canary_arg("HumanEval/0, HumanEval/3")
    (0.1, ('HumanEval/0', 'HumanEval/3'))
    """
    try:
        return float(text)
    except ValueError:
        return tuple(part.strip() for part in text.split(",") if part.strip())


def _env_kwargs(pairs: Sequence[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--env-kwarg {pair!r} is not KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def _ids(names: Sequence[str]) -> tuple[str, ...]:
    if not names:
        return LIVE_IDS
    return tuple(n if n in gym.registry else env_id(n) for n in names)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_")


def _ray_executor(address: str, limits: Limits) -> Executor:
    """The executor of ``--ray ADDRESS`` (the ray extra is imported only when asked for)."""
    from .sandbox.backends.ray import make_ray_executor

    return make_ray_executor(address, limits)


def _policy_kind(args: argparse.Namespace) -> str:
    """``--policy``, or openai when ``--model`` / ``--base-url`` name a model without it."""
    endpoint = args.model is not None or args.base_url is not None
    if args.policy is None:
        return "openai" if endpoint else "synthetic"
    if endpoint and args.policy != "openai":
        raise ValueError(f"--model / --base-url are options of the openai policy, not of --policy {args.policy}; drop them or pass --policy openai")
    return str(args.policy)


def cmd_evaluate(args: argparse.Namespace) -> int:
    args.policy = _policy_kind(args)
    dataset, stdlib_default = (args.dataset, False) if args.dataset else default_dataset()
    stdlib_only = stdlib_default if args.stdlib_only is None else args.stdlib_only
    policy = make_policy(
        args.policy,
        **({"strength": args.strength} if args.policy == "synthetic" else {}),
        **({"path": args.replay_file} if args.policy == "replay" else {}),
        **(
            {
                "model": args.model, "base_url": args.base_url, "api_key": args.api_key, "temperature": args.temperature,
                "max_tokens": args.max_tokens, "n": args.n, "history": args.history,
                "max_retries": args.max_retries, "timeout_s": args.timeout,
            }
            if args.policy == "openai"
            else {}
        ),
    )
    simulator = {"backend": args.simulator, "model": args.simulator_model, "base_url": args.simulator_base_url, "seed": args.seed}
    config = EvalConfig(
        ids=_ids(args.ids),
        dataset=dataset,
        task_ids=tuple(t.strip() for t in args.task_ids.split(",") if t.strip()) if args.task_ids else None,
        stdlib_only=stdlib_only,
        limit=args.limit,
        max_turns=args.max_turns,
        seed=args.seed,
        concurrency=args.concurrency,
        env_kwargs=_env_kwargs(args.env_kwarg),
        verbal_env_kwargs={"simulator_kwargs": {k: v for k, v in simulator.items() if v is not None}},
        protocol=args.protocol,
        feedback_style=args.feedback_style,
        turn0=args.turn0,
        canary=args.canary,
        canary_seed=args.canary_seed,
        samples=args.samples,
    )
    tasks_label = f"{dataset}{'-stdlib' if stdlib_only else ''}{f'-limit{args.limit}' if args.limit is not None else ''}"
    out = Path(args.out or Path("runs") / _slug(f"{policy.name}-{Path(tasks_label).name}"))
    print(f"run directory: {out}" + ("   [SYNTHETIC coder: numbers are no claim about any model]" if policy.synthetic else ""))
    if args.ray is not None and args.runtime is not None:
        raise ValueError("--runtime applies to the local sandbox; with --ray each node runs its own interpreter")
    try:
        check_run_folder(out, report=not args.no_report)  # refused now, not after the run (nothing written there)
        with RunFolderLock(out):  # a folder in use, a file, a read-only folder: refused before anything starts
            if args.policy == "openai":
                _check_endpoint(policy)
            summary = _evaluate(args, config, policy, out)
    except _Interrupted:
        print(f"\ninterrupted: every finished episode is saved in {out}; rerun the same command to resume", file=sys.stderr)
        return 130
    finally:
        policy.close()
    for name in summary.played:
        print(f"{name}: {summary.played[name]} episodes played, {summary.resumed[name]} already done"
              + (f" ({summary.repaired[name]} unfinished, played again)" if summary.repaired.get(name) else "")
              + _infra_note(summary.replayed.get(name, 0), summary.infra_lost.get(name, 0))
              + (f"; canary twins: {summary.canary_passed[name]} of {summary.canary_played[name]} passed (never in the scores)"
                 if summary.canary_played.get(name) else ""))
    for name, why in summary.skipped.items():
        print(f"{name}: skipped ({why})")
    if args.no_report or not summary.played and not any(summary.resumed.values()):
        return 0
    return _print_report(out, None, args)


def _evaluate(args: argparse.Namespace, config: EvalConfig, policy: Policy, out: Path) -> RunSummary:
    """:func:`run_evaluation` with the executor of ``args`` (closed at the end); a full disk (or a folder gone
    read-only) mid-run ends in one line that says what is kept."""
    limits = Limits(suite_timeout_s=args.suite_timeout, test_timeout_s=args.test_timeout)
    executor = _ray_executor(args.ray, limits) if args.ray is not None else SandboxExecutor(limits, runtime=args.runtime)
    try:
        return run_evaluation(
            config, policy, out, executor=executor, progress=None if args.no_progress else run_evaluation.__kwdefaults__["progress"]
        )
    except KeyboardInterrupt:
        raise _Interrupted() from None
    except OSError as exc:  # a full disk, a folder gone read-only mid-run
        raise _RunStopped(f"cannot write {exc.filename or out} ({exc.strerror or exc}); every finished episode is kept "
                          "in the log: free space (or fix the folder) and rerun the same command to resume") from None
    finally:
        executor.close()


class _Interrupted(Exception):
    """Ctrl-C during a run (the folder's lock is let go before the line that says how to resume)."""


class _RunStopped(ConvCodeWorldError):
    """The run stopped on something outside it (a full disk); the message says what is kept and what to do."""


def _check_endpoint(policy: object) -> None:
    """Before the run: an endpoint that refuses, does not answer, or refuses the key fails now, in one line, not
    after every retry of the first request (:meth:`~.policies.OpenAIPolicy.check_endpoint`)."""
    check = getattr(policy, "check_endpoint", None)
    if check is not None:
        check()


def _infra_note(replayed: int, lost: int) -> str:
    """What ``evaluate`` says of the episodes in which the infrastructure lost a run ("" when none).

    >>> _infra_note(0, 0), _infra_note(2, 1)
    ('', '; 2 played again after a run lost to the infrastructure, 1 lost again (logged with infra_error, left out of the metrics)')
    """
    if not replayed:
        return ""
    note = f"; {replayed} played again after a run lost to the infrastructure"
    return note + (f", {lost} lost again (logged with infra_error, left out of the metrics)" if lost else "")


def _print_report(run_dir: Path | str, out: str | None, args: argparse.Namespace) -> int:
    """Write and print the report of ``run_dir`` with the scoring options of ``args`` (:func:`_add_scoring_options`)."""
    report, paths = write_report(run_dir, out, compensate_init=args.compensate_init,
                                 exclude_init_solved=args.exclude_init_solved, fill_cf=args.fill_cf)
    print()
    print(report.markdown())
    print(f"tables: {paths['markdown']}, {paths['pass_csv']}, {paths['mrr_csv']}, {paths['regressions_csv']}, "
          f"{paths['canary_csv']}" + (f", {paths['pass_at_k_csv']}" if report.samples > 1 else ""))
    print(f"plot: {paths['plot']}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    return _print_report(args.run_dir, args.out, args)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ConvCodeWorldError, ValueError, FileNotFoundError) as exc:
        print(f"convcodeworld {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2


def _one_line(exc: BaseException) -> str:
    """An error's message on one line (a message that spans lines is joined with " | ")."""
    return " | ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
