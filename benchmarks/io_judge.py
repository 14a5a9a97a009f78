"""Benchmark: input/output judging, ours (the sandbox's split judge) against LiveCodeBench's own harness, in one run.

The workload is a LiveCodeBench-schema task file this script writes (problems of our own, standard-input and
LeetCode-style call problems, 12 to 20 tests each, 1 to 3 public), loaded through ``load_tasks`` as any
``code_generation_lite`` file is; each problem gets programs known to be right (two forms), wrong (an answer off),
crashing (an exception on some inputs), and one that LiveCodeBench's harness judges wrong although it is right (a
``global`` at module level: its harness wraps a standard-input program's top-level code in a function, so the
variable is no global there). Both sides judge the same (task, program) pairs:

* ours: ``SandboxExecutor(workers=N, cache=False).run_many`` (confined where the machine allows; the level is
  printed), the split judge comparing by LiveCodeBench's rule (``iocheck``);
* theirs: ``lcb_runner/evaluation/compute_code_generation_metrics.py``'s ``evaluate_generations`` with
  ``num_process_evaluate=N`` and its 6 s timeout (a process pool over problems; a fresh process and a
  ``multiprocessing.Manager`` per program, ``testing_util.run_test`` in it, unconfined but for its
  ``reliability_guard``). Its three files (``testing_util.py``, ``compute_code_generation_metrics.py``,
  ``pass_k_utils.py``) are copied at run time from a LiveCodeBench checkout (``--lcb-repo``: a git clone of
  https://github.com/LiveCodeBench/LiveCodeBench, read with ``git show HEAD:...``) into a temporary directory; nothing
  of it is kept in the project.

Reports the verdicts of both (the disagreements listed, each with the reason where the reason is known), and the
throughput: (task, program) pairs and tests judged per second (``N`` workers on ``N`` cores), and per core: pairs per
CPU second of this process and everything it starts (``judge_rate.CpuClock``: a ``cpuacct`` cgroup of its own, so
what else the machine runs is not counted; else the machine's busy CPU), each side's median of ``--passes`` passes,
the sides interleaved (theirs, ours, theirs, ...). Our executor is made once and
its first pass (its workers' start, cold) is reported apart; LiveCodeBench's function makes its process pool at each
call, as it does in its own runs.

Usage (see docs/benchmarks.md):
    python benchmarks/io_judge.py --lcb-repo PATH [--problems 24 --workers 2 --passes 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from judge_rate import CpuClock
from convcodeworld_gym.sandbox import SandboxExecutor
from convcodeworld_gym.tasks import IOTask, load_tasks

LCB_FILES = ("lcb_runner/evaluation/testing_util.py", "lcb_runner/evaluation/compute_code_generation_metrics.py",
             "lcb_runner/evaluation/pass_k_utils.py")
DEFAULT_LCB_REPO = os.environ.get("LCB_REPO", "/work/.mirror/LiveCodeBench+LiveCodeBench/repo")


# ----------------------------------------------------------------------------- the workload (problems of our own)

@dataclass(frozen=True)
class Kind:
    """A problem family: how a case is drawn, its answer, and programs right, wrong, crashing and harness-tripping."""

    name: str
    statement: str
    functional: bool
    func_name: str
    starter: str
    draw: object  # rng -> (input text, expected output text)
    right: tuple[str, ...]
    wrong: str
    crashing: str
    tripping: str | None = None  # right, but LiveCodeBench's harness judges it wrong


def _ints(rng: random.Random, n: int, lo: int = -1000, hi: int = 1000) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


def _sum_case(rng):
    xs = _ints(rng, rng.randint(1, 300))
    return f"{len(xs)}\n{' '.join(map(str, xs))}\n", f"{sum(xs)}\n"


def _sort_case(rng):
    xs = _ints(rng, rng.randint(1, 300))
    return f"{len(xs)}\n{' '.join(map(str, xs))}\n", " ".join(map(str, sorted(xs))) + "\n"


def _avg_case(rng):
    xs = _ints(rng, rng.choice([2, 4, 5, 8]), 0, 100)
    return f"{len(xs)}\n{' '.join(map(str, xs))}\n", f"{sum(xs) / len(xs)}\n"


def _lines_case(rng):
    words = ["".join(rng.choice("abcxyz") for _ in range(rng.randint(1, 8))) for _ in range(rng.randint(1, 40))]
    return "\n".join([str(len(words)), *words]) + "\n", "\n".join(w[::-1] for w in words) + "\n"


def _prefix_case(rng):
    xs = _ints(rng, rng.randint(1, 200))
    out, total = [], 0
    for x in xs:
        total += x
        out.append(total)
    return json.dumps(xs), json.dumps(out)


def _pair_case(rng):
    xs = _ints(rng, rng.randint(2, 200), 0, 10_000)
    k = rng.randint(1, len(xs))
    return f"{json.dumps(xs)}\n{k}", json.dumps(sorted(xs, reverse=True)[:k])


def _pal_case(rng):
    s = "".join(rng.choice("ab") for _ in range(rng.randint(0, 12)))
    if rng.random() < 0.5:
        s = s + s[::-1]
    return json.dumps(s), json.dumps(s == s[::-1])


KINDS = (
    Kind("sum", "Read n, then n integers on one line. Print their sum.", False, "", "", _sum_case,
         ("n = int(input())\nprint(sum(map(int, input().split())))\n",
          "import sys\ndata = sys.stdin.read().split()\nprint(sum(int(x) for x in data[1:]))\n"),
         "n = int(input())\nprint(sum(map(int, input().split())) + (n > 3))\n",
         "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs) // (n - 1))\n",
         "total = 0\ndef add(x):\n    global total\n    total += x\nn = int(input())\nfor x in input().split():\n"
         "    add(int(x))\nprint(total)\n"),
    Kind("sort", "Read n, then n integers. Print them in increasing order, on one line.", False, "", "", _sort_case,
         ("n = int(input())\nprint(*sorted(map(int, input().split())))\n",
          "input()\nxs = sorted(int(t) for t in input().split())\nprint(' '.join(map(str, xs)))\n"),
         "n = int(input())\nprint(*sorted(map(int, input().split()), reverse=n > 5))\n",
         "n = int(input())\nxs = list(map(int, input().split()))\nprint(*sorted(xs)[: n // (n % 7)])\n"),
    Kind("average", "Read n, then n integers. Print their average.", False, "", "", _avg_case,
         ("n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs) / n)\n",
          "n = int(input())\nxs = list(map(int, input().split()))\nprint(f'{sum(xs) / n:.6f}')\n"),
         "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs) // n)\n",
         "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs) / (n - 2))\n"),
    Kind("reverse", "Read n, then n words, one a line. Print each word reversed, one a line.", False, "", "",
         _lines_case,
         ("n = int(input())\nfor _ in range(n):\n    print(input()[::-1])\n",
          "import sys\nlines = sys.stdin.read().split()\nsys.stdout.write('\\n'.join(w[::-1] for w in lines[1:]) + '\\n')\n"),
         "n = int(input())\nfor _ in range(n):\n    print(input())\n",
         "n = int(input())\nfor i in range(n):\n    w = input()\n    print(w[::-1][i % len(w) - 99])\n"),
    Kind("prefix", "Return the running sums of nums.", True, "prefixSums",
         "class Solution:\n    def prefixSums(self, nums: List[int]) -> List[int]:\n        ", _prefix_case,
         ("class Solution:\n    def prefixSums(self, nums):\n        return list(accumulate(nums))\n",
          "class Solution:\n    def prefixSums(self, nums):\n        out, t = [], 0\n        for x in nums:\n"
          "            t += x\n            out.append(t)\n        return tuple(out)\n"),
         "class Solution:\n    def prefixSums(self, nums):\n        return nums\n",
         "class Solution:\n    def prefixSums(self, nums):\n        return [nums[i] + nums[i + 1] for i in range(len(nums))]\n"),
    Kind("topk", "Return the k largest values of nums in decreasing order.", True, "topK",
         "class Solution:\n    def topK(self, nums: List[int], k: int) -> List[int]:\n        ", _pair_case,
         ("class Solution:\n    def topK(self, nums, k):\n        return sorted(nums, reverse=True)[:k]\n",
          "class Solution:\n    def topK(self, nums, k):\n        return nlargest(k, nums)\n"),
         "class Solution:\n    def topK(self, nums, k):\n        return sorted(nums)[:k]\n",
         "class Solution:\n    def topK(self, nums, k):\n        return sorted(nums, reverse=True)[k]\n"),
    Kind("palindrome", "Return whether s reads the same backwards.", True, "isPal",
         "class Solution:\n    def isPal(self, s: str) -> bool:\n        ", _pal_case,
         ("class Solution:\n    def isPal(self, s):\n        return s == s[::-1]\n",
          "class Solution:\n    def isPal(self, s):\n        return all(s[i] == s[-1 - i] for i in range(len(s) // 2))\n"),
         "class Solution:\n    def isPal(self, s):\n        return len(s) % 2 == 0\n",
         "class Solution:\n    def isPal(self, s):\n        return s[0] == s[-1] and s == s[::-1]\n"),
)


def write_workload(path: Path, problems: int, seed: int) -> dict[str, list[tuple[str, str]]]:
    """Write ``problems`` LiveCodeBench-schema rows to ``path``; per task id, its programs as ``(label, code)``."""
    rng = random.Random(seed)
    rows, programs = [], {}
    for index in range(problems):
        kind = KINDS[index % len(KINDS)]
        cases = [kind.draw(rng) for _ in range(rng.randint(12, 20))]
        public = rng.randint(1, 3)
        testtype = "functional" if kind.functional else "stdin"
        tests = [{"input": i, "output": o, "testtype": testtype} for i, o in cases]
        qid = f"bench_{kind.name}_{index}"
        rows.append({"question_title": kind.name, "question_content": kind.statement, "platform": "atcoder",
                     "question_id": qid, "contest_id": "bench", "contest_date": "2025-01-01T00:00:00",
                     "starter_code": kind.starter, "difficulty": "easy", "public_test_cases": json.dumps(tests[:public]),
                     "private_test_cases": json.dumps(tests[public:]),
                     "metadata": json.dumps({"func_name": kind.func_name} if kind.functional else {})})
        programs[qid] = [*((f"right{i}", code) for i, code in enumerate(kind.right)), ("wrong", kind.wrong),
                         ("crashing", kind.crashing), *((("tripping", kind.tripping),) if kind.tripping else ())]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return programs


# ----------------------------------------------------------------------------- the two judges

def copy_lcb(repo: Path, into: Path) -> None:
    """LiveCodeBench's evaluation files from a git checkout into ``into`` (a package tree of its own)."""
    for name in LCB_FILES:
        text = subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{name}"], capture_output=True, text=True,
                              check=True).stdout
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for package in ("lcb_runner", "lcb_runner/evaluation"):
        (into / package / "__init__.py").write_text("")  # the real ones import the other scenarios' metrics


def lcb_sample(task: IOTask) -> dict:
    """The ``input_output`` sample LiveCodeBench's harness reads (its ``get_evaluation_sample``)."""
    return {"input_output": json.dumps({"inputs": [c.input for c in task.cases], "outputs": [c.output for c in task.cases],
                                        "fn_name": task.func_name or None})}


_THEIRS = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
sys.set_int_max_str_digits(50000)
from lcb_runner.evaluation.compute_code_generation_metrics import evaluate_generations
jobs = json.load(open(sys.argv[2]))
started = time.monotonic()
results, metadata = evaluate_generations([j["sample"] for j in jobs], [[j["code"]] for j in jobs], debug=False,
                                         num_process_evaluate=int(sys.argv[3]), timeout=6)
took = time.monotonic() - started
verdicts = [all(r is True for r in results[i][0]) for i in range(len(jobs))]
json.dump({"seconds": took, "verdicts": verdicts, "metadata": [metadata[i][0] for i in range(len(jobs))]}, open(sys.argv[4], "w"))
"""


def theirs(lcb_dir: Path, jobs: list[tuple[IOTask, str]], workers: int, scratch: Path) -> tuple[float, list[bool], list]:
    """LiveCodeBench's harness on ``jobs`` in a process of its own (it nulls os functions in its children)."""
    spec = scratch / "jobs.json"
    spec.write_text(json.dumps([{"sample": lcb_sample(task), "code": code} for task, code in jobs]))
    out = scratch / "theirs.json"
    done = subprocess.run([sys.executable, "-c", _THEIRS, str(lcb_dir), str(spec), str(workers), str(out)],
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"LiveCodeBench's harness failed: {done.stderr[-3000:]}")
    data = json.loads(out.read_text())
    return data["seconds"], data["verdicts"], data["metadata"]


def ours(executor: SandboxExecutor, jobs: list[tuple[IOTask, str]], workers: int) -> tuple[float, list[bool], str]:
    """Our sandbox on ``jobs`` (its result cache off)."""
    started = time.monotonic()
    results = executor.run_many([(task, task.program_for(code)) for task, code in jobs], max_workers=workers)
    took = time.monotonic() - started
    level = results[0].details.get("confinement", {}).get("level", "?") if results else "?"
    return took, [r.passed for r in results], level


# ----------------------------------------------------------------------------- the run

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lcb-repo", default=DEFAULT_LCB_REPO, help="a git checkout of LiveCodeBench/LiveCodeBench")
    parser.add_argument("--problems", type=int, default=21, help="problems in the workload (7 families)")
    parser.add_argument("--workers", type=int, default=2, help="parallel runs on each side (one per core)")
    parser.add_argument("--passes", type=int, default=3, help="timed passes of each side (medians reported)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="ccw-io-bench-") as tmp:
        scratch = Path(tmp)
        copy_lcb(Path(args.lcb_repo), scratch / "lcb")
        commit = subprocess.run(["git", "-C", args.lcb_repo, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        programs = write_workload(scratch / "workload.jsonl", args.problems, args.seed)
        tasks = load_tasks(str(scratch / "workload.jsonl"))
        jobs = [(task, code) for task in tasks for _, code in programs[task.task_id]]
        labels = [(task.task_id, label) for task in tasks for label, _ in programs[task.task_id]]
        tests = sum(len(task.cases) for task, _ in jobs)
        print(f"workload: {len(tasks)} LiveCodeBench-schema problems, {len(jobs)} (task, program) pairs, {tests} tests "
              f"in all; {args.workers} workers a side on {os.cpu_count()} CPUs; LiveCodeBench at {commit}")

        clock = CpuClock()
        our_times, their_times, our_cpu, their_cpu = [], [], [], []
        our_verdicts = their_verdicts = None
        level, metadata = "?", []
        started = time.monotonic()
        with SandboxExecutor(workers=args.workers, cache=False) as executor:  # started cold: its workers' start counted
            cold, _, _ = ours(executor, jobs, args.workers)
            cold_s = time.monotonic() - started
            for _ in range(args.passes):  # then warm, as in a run or a training loop
                cpu = clock()
                seconds, their_verdicts, metadata = theirs(scratch / "lcb", jobs, args.workers, scratch)
                their_times.append(seconds)
                their_cpu.append(clock() - cpu)
                cpu = clock()
                seconds, our_verdicts, level = ours(executor, jobs, args.workers)
                our_times.append(seconds)
                our_cpu.append(clock() - cpu)
        print(f"our confinement: {level}; our first pass, the executor made and its workers started cold: {cold_s:.2f} s; "
              f"CPU counted from {clock.source}")

        expected = {label: not label[1].startswith(("wrong", "crashing")) for label in labels}
        agree = sum(a == b for a, b in zip(our_verdicts, their_verdicts))
        print(f"\nverdicts: {agree} of {len(jobs)} agree")
        ours_right = sum(v == expected[label] for v, label in zip(our_verdicts, labels))
        theirs_right = sum(v == expected[label] for v, label in zip(their_verdicts, labels))
        print(f"  as the programs were written (right / wrong / crashing / tripping = right): ours {ours_right} of "
              f"{len(jobs)}, LiveCodeBench's {theirs_right} of {len(jobs)}")
        for (task_id, label), a, b, meta in zip(labels, our_verdicts, their_verdicts, metadata):
            if a != b:
                why = "its harness runs top-level code in a function: the `global` misses" if label == "tripping" else "?"
                print(f"  disagree: {task_id} {label}: ours {a}, LiveCodeBench's {b} ({why}; its note: "
                      f"{str(meta.get('error_message', meta.get('error', '')))[:80]})")

        ours_s, theirs_s = statistics.median(our_times), statistics.median(their_times)
        ours_cpu, theirs_cpu = statistics.median(our_cpu), statistics.median(their_cpu)
        print(f"\nthroughput (median of {args.passes} passes; each pass: {len(jobs)} pairs, {tests} tests):")
        for name, seconds, cpu, all_times in (("ours", ours_s, ours_cpu, our_times),
                                              ("LiveCodeBench", theirs_s, theirs_cpu, their_times)):
            print(f"  {name:<14} {seconds:6.2f} s wall: {len(jobs) / seconds:6.2f} pairs/s, {tests / seconds:6.1f} tests/s; "
                  f"{cpu:6.2f} CPU s: per core {len(jobs) / cpu:6.2f} pairs/s, {tests / cpu:6.1f} tests/s, "
                  f"{cpu / len(jobs) * 1000:5.1f} CPU ms a pair  (passes: {', '.join(f'{t:.2f}' for t in all_times)} s)")
        ratios = [t / o for t, o in zip(their_times, our_times)]
        cpu_ratios = [t / o for t, o in zip(their_cpu, our_cpu)]
        print(f"  ours / LiveCodeBench's: wall throughput {statistics.median(ratios):.2f}x, per-core (CPU) throughput "
              f"{statistics.median(cpu_ratios):.2f}x (medians of the rounds' ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
