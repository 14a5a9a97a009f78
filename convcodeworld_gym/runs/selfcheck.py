"""Ground-truth self-check: run every canonical solution of a task set and explain each failure.

Holds:
    SelfCheckReport  pass rate, judge-mode shares and, per failing task, why it failed
    classify_failure the reason class of a failed result: missing library, data files, network, timeout, memory, other
    run_selfcheck    run the canonical solutions through an executor and build the report
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..sandbox import ExecutionResult, Executor
from ..sandbox.runtimes.needs import Lacking, choose_tasks, nltk_download_command, summarize
from ..sandbox.runtimes.packages import pypi_name
from ..tasks import TaskSet

__all__ = ["SelfCheckReport", "classify_failure", "run_selfcheck"]

_NETWORK_MARKERS = ("Network is unreachable", "Name or service not known", "Temporary failure in name resolution",
                    "gaierror", "ConnectionError", "URLError", "NewConnectionError", "Connection refused")


def classify_failure(result: ExecutionResult, lacking: tuple[str, ...] = (), python: str = sys.executable
                     ) -> tuple[str, str]:
    """``(kind, detail)`` of a failed result; kind is ``missing library``, ``data files`` (NLTK data),
    ``network``, ``timeout``, ``memory`` (the kernel ended the run at its container's memory limit) or ``other``.
    The advice installs into ``python``, the interpreter that ran the tests.

    >>> from convcodeworld_gym.sandbox import ExecutionResult
    >>> classify_failure(ExecutionResult(tests=(), crash="ModuleNotFoundError: No module named 'pandas'"), ("pandas",), "/rt/bin/python")
    ('missing library', 'pandas (/rt/bin/python -m pip install pandas)')
    """
    texts = "\n".join([result.crash or ""] + [t.traceback for t in result.tests if not t.outcome.ok])
    if lacking or "ModuleNotFoundError" in texts:
        names = lacking or tuple(sorted({line.split("'")[1] for line in texts.splitlines()
                                         if "No module named '" in line and line.count("'") >= 2}))
        return "missing library", ", ".join(f"{m} ({python} -m pip install {pypi_name(m.split('.')[0])})" for m in names)
    if "LookupError" in texts and "nltk" in texts:
        names = sorted(set(re.findall(r"nltk\.download\('([\w.-]+)'\)", texts))) or ["?"]
        return "data files", f"NLTK data {', '.join(names)} ({nltk_download_command(python, names)})"
    if result.limits_hit and any("timeout" in limit for limit in result.limits_hit):
        return "timeout", ", ".join(result.limits_hit)
    if "memory_limit" in result.limits_hit:
        return "memory", "the run outgrew its container's memory limit (give DockerExecutor a larger memory=)"
    if any(marker in texts for marker in _NETWORK_MARKERS):
        return "network", next(line.strip() for line in texts.splitlines() if any(m in line for m in _NETWORK_MARKERS))
    last = [line.strip() for line in texts.strip().splitlines() if line.strip()]
    return "other", (last[-1] if last else "failed")[:300]


@dataclass
class SelfCheckReport:
    """Outcome of running every canonical solution of ``task_set``."""

    task_set: str
    total: int
    passed: int
    failures: dict[str, tuple[str, str]] = field(default_factory=dict)
    modes: Counter = field(default_factory=Counter)
    confinement: str = ""
    left_out: dict[str, Lacking] = field(default_factory=dict)
    advice: str = ""
    without_solution: tuple[str, ...] = ()  # tasks with no canonical solution to run (LiveCodeBench's rows): not run

    @property
    def pass_rate(self) -> float:
        return self.passed / self.total if self.total else 0.0

    def render(self) -> str:
        lines = [f"selfcheck {self.task_set}: {self.passed}/{self.total} canonical solutions pass ({self.pass_rate:.1%})"]
        if self.without_solution:
            some = ", ".join(self.without_solution[:5]) + (", ..." if len(self.without_solution) > 5 else "")
            lines.append(f"not run: {len(self.without_solution)} tasks without a canonical solution ({some})")
        if self.left_out:
            lines.append(f"left out: {len(self.left_out)} tasks whose needs the runtime does not meet "
                         f"({summarize(self.left_out)}); install: {self.advice}")
        if self.confinement:
            lines.append(f"confinement: {self.confinement}")
        if self.modes:
            lines.append("judge modes: " + ", ".join(f"{m} {n} ({n / self.total:.1%})" for m, n in sorted(self.modes.items())))
        by_kind = Counter(kind for kind, _ in self.failures.values())
        for kind, count in sorted(by_kind.items()):
            lines.append(f"{kind}: {count}")
            lines += [f"  {tid}: {detail}" for tid, (k, detail) in self.failures.items() if k == kind]
        return "\n".join(lines)


def _run_all(tasks: TaskSet, executor: Executor, progress: bool) -> list[ExecutionResult]:
    """Every task's ground truth through ``executor``, in task order, with a progress bar on stderr if asked."""
    if not progress:
        return executor.run_many([(t, t.ground_truth) for t in tasks])
    from tqdm.auto import tqdm

    passed = 0
    with ThreadPoolExecutor(max_workers=executor.default_concurrency()) as pool, \
            tqdm(total=len(tasks), desc="selfcheck", unit="task", dynamic_ncols=True, file=sys.stderr) as bar:
        futures = [pool.submit(executor.run, t, t.ground_truth) for t in tasks]
        results = []
        for future in futures:
            results.append(future.result())
            passed += results[-1].passed
            bar.set_postfix_str(f"pass {passed / len(results):.1%}", refresh=False)
            bar.update(1)
    return results


def run_selfcheck(tasks: TaskSet, executor: Executor, *, by_id: bool = False, limit: int | None = None,
                  progress: bool = False) -> SelfCheckReport:
    """Run each task's ground truth through ``executor``; never raises for a failing task.

    Unless the tasks were asked for by id (``by_id``), those whose needs the executor's runtime does not
    meet are left out, with one warning, and listed in ``left_out``; tasks without a canonical solution (every
    LiveCodeBench row) are not run and listed in ``without_solution``; then the first ``limit`` are run.
    """
    probe = executor.runtime_probe()
    chosen, lacking = choose_tasks(tasks, probe, by_id=by_id)
    without = tuple(t.task_id for t in chosen if not t.has_ground_truth)  # nothing to run (LiveCodeBench's rows)
    if without:
        chosen = TaskSet(tuple(t for t in chosen if t.has_ground_truth), name=chosen.name, left_out=chosen.left_out)
    chosen = chosen.subset(limit=limit) if limit is not None else chosen
    python = probe.python if probe is not None else sys.executable
    results = _run_all(chosen, executor, progress)
    report = SelfCheckReport(chosen.name, len(chosen), sum(r.passed for r in results), without_solution=without)
    if lacking and not by_id:
        report.left_out = lacking
        report.advice = probe.install_advice(lacking.values(), any(t.from_bigcodebench for t in tasks))
    for task, result in zip(chosen, results):
        mode = result.details.get("judge")
        if mode:
            report.modes[mode] += 1
        if not result.passed:
            report.failures[task.task_id] = classify_failure(result, lacking.get(task.task_id, Lacking()).modules, python)
    if results:
        conf = results[0].details.get("confinement")
        report.confinement = (conf or {}).get("level", "")
    return report
