"""The ``convcodeworld`` command line.

Subcommands:
    demo       play a few episodes with the canonical solution and with a wrong-then-right
               policy, printing every turn (works offline on HumanEval)
    selfcheck  run every canonical solution of a task set in the sandbox; pass rate and why each failure failed
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
