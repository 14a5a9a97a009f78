"""Scoring a batch of bandit candidates against the judge's own throughput, side by side in one run (issue 50).

The candidates are ``judge_rate.py``'s rollout mix (per task: the canonical program, a wrong one that runs every test
and fails them, one that crashes at import), each as a model's reply (a fenced block), on every ``--sample-every``-th
task the runtime serves, cut to ``--candidates`` (default 1024), each with a context of its task
(:class:`convcodeworld_gym.bandit.Context`, best pass rate 0.5, the shaped reward). Four passes, each on a fresh
``SandboxExecutor`` of ``--workers`` slots, started and warm before its clock starts:

1. **judge**: ``executor.run_many`` of the very programs the scorer runs (each reply read and extracted as the scorer
   reads it), result cache off: the judge's throughput, as ``judge_rate.py`` measures it;
2. **scorer**: ``Scorer.score`` of the (context, completion) pairs, result cache off: reading, extracting and
   compiling each reply, one batch through ``run_many``, the rewards;
3. **scorer, awaited**: ``await Scorer.ascore`` of the same pairs, cache off: every run through ``arun``;
4. **scorer, cached**: the same batch scored again on an executor whose cache already holds it (a GRPO group's
   repeats, an epoch's second pass): every verdict from the cache.

Per pass: candidates, seconds, candidates per second, and the scorer's share of the judge's rate.

Usage (docs/benchmarks.md; BigCodeBench needs the pinned runtime: ``convcodeworld runtime install bigcodebench``):
    CONVCODEWORLD_BIGCODEBENCH_PATH=... python benchmarks/bandit_scoring.py
    python benchmarks/bandit_scoring.py --dataset humaneval --sample-every 1 --candidates 300   # a quick run
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass

from judge_rate import crashing, wrong
from convcodeworld_gym.bandit import Context, Scorer
from convcodeworld_gym.extract import judged_program
from convcodeworld_gym.feedback.compilation import reply_feedback
from convcodeworld_gym.policies.base import fenced
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.sandbox.runtimes.needs import choose_tasks
from convcodeworld_gym.tasks import load_tasks


@dataclass(frozen=True)
class Pass:
    label: str
    candidates: int
    seconds: float
    passed: int

    @property
    def rate(self) -> float:
        return self.candidates / self.seconds


def _fresh(workers: int, cache: bool, warm: tuple) -> SandboxExecutor:
    executor = SandboxExecutor(workers=workers, cache=cache)
    executor.run(*warm)  # the workers up and the first task's profile read, outside the pass
    return executor


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="bigcodebench")
    parser.add_argument("--sample-every", type=int, default=3, help="every N-th task the runtime serves (default 3)")
    parser.add_argument("--candidates", type=int, default=1024)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()

    probe_ex = SandboxExecutor(workers=1, cache=False)
    probe = probe_ex.runtime_probe()
    probe_ex.close()
    chosen, _lacking = choose_tasks(load_tasks(args.dataset), probe, by_id=False)
    tasks = list(chosen)[:: args.sample_every]
    replies = [(t, fenced(program)) for t in tasks for program in (t.ground_truth, wrong(t), crashing(t))]
    replies = replies[: args.candidates]
    pairs = [(Context(t.task_id, args.dataset, "CF-EF_partial", 0, 1, (), best_pass_rate=0.5), reply)
             for t, reply in replies]
    programs = []
    for t, reply in replies:  # what the scorer runs for each reply: read, extracted, built as the env builds it
        code, ok, _, _ = reply_feedback(reply)
        programs.append((t, judged_program(t, code, ok)))
    jobs = [(t, p) for t, p in programs if p is not None]
    print(f"{len(pairs)} candidates ({len(jobs)} programs that compile) on {len(tasks)} {args.dataset} tasks "
          f"(every {args.sample_every}th the runtime serves); {args.workers} workers, {os.cpu_count()} cores; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    passes: list[Pass] = []

    executor = _fresh(args.workers, False, jobs[0])
    started = time.perf_counter()
    results = executor.run_many(jobs)
    passes.append(Pass("judge: executor.run_many, cache off", len(jobs), time.perf_counter() - started,
                       sum(r.passed for r in results)))
    executor.close()

    executor = _fresh(args.workers, False, jobs[0])
    scorer = Scorer(executor=executor, reward="shaped")
    started = time.perf_counter()
    scores = scorer.score(pairs)
    passes.append(Pass("scorer: Scorer.score, cache off", len(pairs), time.perf_counter() - started,
                       sum(s.passed for s in scores)))
    executor.close()

    executor = _fresh(args.workers, False, jobs[0])
    scorer = Scorer(executor=executor, reward="shaped")
    started = time.perf_counter()
    scores = asyncio.run(scorer.ascore(pairs))
    passes.append(Pass("scorer: await Scorer.ascore, cache off", len(pairs), time.perf_counter() - started,
                       sum(s.passed for s in scores)))
    executor.close()

    executor = _fresh(args.workers, True, jobs[0])
    scorer = Scorer(executor=executor, reward="shaped")
    scorer.score(pairs)  # fills the cache
    started = time.perf_counter()
    scores = scorer.score(pairs)
    passes.append(Pass("scorer: Scorer.score, the batch again, cache on", len(pairs), time.perf_counter() - started,
                       sum(s.passed for s in scores)))
    cached = sum(s.cached for s in scores)
    executor.close()

    judge = passes[0]
    print("| pass | candidates | seconds | candidates/s | of the judge's rate | passed |")
    print("|---|---:|---:|---:|---:|---:|")
    for p in passes:
        print(f"| {p.label} | {p.candidates} | {p.seconds:.1f} | {p.rate:.2f} | {p.rate / judge.rate:.2f}x | {p.passed} |")
    print(f"\ncached pass: {cached} of {len(pairs)} verdicts from the cache; load average after "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
