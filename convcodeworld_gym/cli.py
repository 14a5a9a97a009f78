"""The ``convcodeworld`` command line.

Subcommands:
    demo              play a few episodes with the canonical solution and with a wrong-then-right
                      policy, printing every turn (works offline on HumanEval)
    selfcheck         run every canonical solution of a task set in the sandbox; pass rate and why each failure failed
    import-reference  convert the reference implementation's result files into a turn log
    correlate         Spearman correlation of live vs static (ConvCodeBench) MRR and Recall rankings
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Callable, Sequence

import gymnasium as gym

from .registration import LIVE_IDS, env_id
from .tasks import BIGCODEBENCH_ENV, Task

__all__ = ["main", "build_parser"]


def _default_dataset() -> str:
    return "bigcodebench" if os.environ.get(BIGCODEBENCH_ENV) else "humaneval"


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
        for key in ("compilation_feedback", "execution_feedback", "verbal_feedback"):
            if obs[key]:
                shown = textwrap.shorten(obs[key].replace("\n", " | "), width=110, placeholder=" ...")
                print(f"    {key}: {shown}", file=out)
        if terminated or truncated:
            print(f"  -> episode over ({info['episode_end']})", file=out)
            return


def cmd_demo(args: argparse.Namespace) -> int:
    dataset = args.dataset or _default_dataset()
    kwargs = {"dataset": dataset, "max_turns": args.max_turns}
    if dataset == "bigcodebench":
        kwargs["stdlib_only"] = True
    env = gym.make(env_id(args.feedback), **kwargs)
    try:
        tasks = env.unwrapped.tasks  # type: ignore[attr-defined]
        policies: dict[str, Callable[[Task, int], str]] = {
            "canonical solution": lambda task, turn: task.ground_truth,
            "wrong, then canonical": lambda task, turn: _wrong_program(task) if turn == 0 else task.ground_truth,
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
    from .reference_import import iteration_files, write_reference_log

    files = list(args.files)
    if args.discover:
        if len(files) != 2:
            raise SystemExit("--discover takes exactly two files: turn 0's generation file and the iteration-1 file")
        files = [files[0], *iteration_files(files[1])]
    path = write_reference_log(files, args.out, feedback=args.feedback, policy=args.policy, max_turns=args.max_turns)
    print(f"wrote {path} from {len(files)} turn file(s)")
    return 0


def cmd_correlate(args: argparse.Namespace) -> int:
    from .correlation import correlate, format_correlations

    print(format_correlations(correlate(args.live_dirs, args.static, reference=args.reference, max_turns=args.max_turns)))
    return 0


def cmd_selfcheck(args: argparse.Namespace) -> int:
    from .sandbox import SandboxExecutor
    from .selfcheck import run_selfcheck
    from .tasks import load_tasks

    tasks = load_tasks(args.dataset, stdlib_only=args.stdlib_only, limit=args.limit)
    with SandboxExecutor(workers=args.workers, require=args.require) as executor:
        report = run_selfcheck(tasks, executor)
    print(report.render())
    return 0 if report.passed == report.total else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="convcodeworld", description="ConvCodeWorld / ConvCodeBench environments.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="play a few episodes with scripted policies and print each turn")
    demo.add_argument("--dataset", help=f"humaneval, bigcodebench or a task file (default: bigcodebench stdlib if ${BIGCODEBENCH_ENV} is set, else humaneval)")
    demo.add_argument("--feedback", default="CF-EF_full", help=f"feedback combination (ids: {', '.join(LIVE_IDS)})")
    demo.add_argument("--episodes", type=int, default=3, help="number of tasks to play")
    demo.add_argument("--max-turns", type=int, default=10)
    demo.set_defaults(func=cmd_demo)

    imp = sub.add_parser("import-reference", help="convert the reference repository's result files into a turn log")
    imp.add_argument("files", nargs="+", help="generation .jsonl files in turn order (turn 0 first), each with its _eval_results.json beside it")
    imp.add_argument("--feedback", required=True, help="the combination the reference run used, e.g. CF-EF_full-SEF")
    imp.add_argument("--out", required=True, help="run directory to write turns.jsonl into")
    imp.add_argument("--policy", default="", help="the reference model's name, stored in every row")
    imp.add_argument("--max-turns", type=int, default=10)
    imp.add_argument("--discover", action="store_true", help="given turn 0's file and the iteration-1 file, also take its _ITER=k siblings")
    imp.set_defaults(func=cmd_import_reference)

    cor = sub.add_parser("correlate", help="Spearman correlation of live vs static MRR and Recall over policies")
    cor.add_argument("live_dirs", nargs="+", help="live run directories, one per policy")
    cor.add_argument("--static", nargs="+", required=True, help="static run directories, in the same policy order")
    cor.add_argument("--reference", help="the reference log the static runs replayed (default: the one their rows name)")
    cor.add_argument("--max-turns", type=int, default=10)
    cor.set_defaults(func=cmd_correlate)

    check = sub.add_parser("selfcheck", help="run every canonical solution of a task set; report pass rate and failure reasons")
    check.add_argument("--dataset", default="humaneval", help="humaneval, bigcodebench or a task file")
    check.add_argument("--stdlib-only", action="store_true", help="only tasks that need nothing beyond the standard library")
    check.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    check.add_argument("--workers", type=int, default=None, help="sandbox workers (default: CPUs)")
    check.add_argument("--require", default=None, choices=["process", "uid", "namespaces"], help="fail unless this confinement level is reached")
    check.set_defaults(func=cmd_selfcheck)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
