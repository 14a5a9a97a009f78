"""Ground-truth self-check: run every canonical solution of a task set and explain each failure.

Holds:
    SelfCheckReport  pass rate, judge-mode shares and, per failing task, why it failed
    classify_failure the reason class of a failed result: missing library, network, timeout, memory, other
    run_selfcheck    run the canonical solutions through an executor and build the report
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .sandbox import ExecutionResult, Executor
from .sandbox.runtime import missing_modules, pypi_name
from .tasks import TaskSet

__all__ = ["SelfCheckReport", "classify_failure", "run_selfcheck"]

_NETWORK_MARKERS = ("Network is unreachable", "Name or service not known", "Temporary failure in name resolution",
                    "gaierror", "ConnectionError", "URLError", "NewConnectionError", "Connection refused")


def classify_failure(result: ExecutionResult, lacking: tuple[str, ...] = ()) -> tuple[str, str]:
    """``(kind, detail)`` of a failed result; kind is ``missing library``, ``network``, ``timeout``,
    ``memory`` (the kernel ended the run at its container's memory limit) or ``other``.

    >>> from convcodeworld_gym.sandbox import ExecutionResult
    >>> classify_failure(ExecutionResult(tests=(), crash="ModuleNotFoundError: No module named 'pandas'"), ("pandas",))
    ('missing library', 'pandas (pip install pandas)')
    """
    texts = "\n".join([result.crash or ""] + [t.traceback for t in result.tests if not t.outcome.ok])
    if lacking or "ModuleNotFoundError" in texts:
        names = lacking or tuple(sorted({line.split("'")[1] for line in texts.splitlines()
                                         if "No module named '" in line and line.count("'") >= 2}))
        return "missing library", ", ".join(f"{m} (pip install {pypi_name(m.split('.')[0])})" for m in names)
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

    @property
    def pass_rate(self) -> float:
        return self.passed / self.total if self.total else 0.0

    def render(self) -> str:
        lines = [f"selfcheck {self.task_set}: {self.passed}/{self.total} canonical solutions pass ({self.pass_rate:.1%})"]
        if self.confinement:
            lines.append(f"confinement: {self.confinement}")
        if self.modes:
            lines.append("judge modes: " + ", ".join(f"{m} {n} ({n / self.total:.1%})" for m, n in sorted(self.modes.items())))
        by_kind = Counter(kind for kind, _ in self.failures.values())
        for kind, count in sorted(by_kind.items()):
            lines.append(f"{kind}: {count}")
            lines += [f"  {tid}: {detail}" for tid, (k, detail) in self.failures.items() if k == kind]
        return "\n".join(lines)


def run_selfcheck(tasks: TaskSet, executor: Executor) -> SelfCheckReport:
    """Run each task's ground truth through ``executor``; never raises for a failing task."""
    results = executor.run_many([(t, t.ground_truth) for t in tasks])
    report = SelfCheckReport(tasks.name, len(tasks), sum(r.passed for r in results))
    for task, result in zip(tasks, results):
        mode = result.details.get("judge")
        if mode:
            report.modes[mode] += 1
        if not result.passed:
            report.failures[task.task_id] = classify_failure(result, missing_modules(task))
    if results:
        conf = results[0].details.get("confinement")
        report.confinement = (conf or {}).get("level", "")
    return report
