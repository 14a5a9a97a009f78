"""Running untrusted programs against task test suites.

Holds:
    Executor, Limits                 the interface and its limits (:mod:`.executor`)
    ExecutionResult, TestResult, Outcome   what a run returns (:mod:`.result`)
    LocalExecutor                    one fresh child interpreter per run, unconfined (:mod:`.local`)
    SandboxExecutor                  warm confined workers, split-process judge (:mod:`.pool`)
    Level, SandboxSettings           confinement levels and sizes (:mod:`.confine`)
    Mode                             judge modes (:mod:`.judge`)
    TimePolicy, TaskProfile, ProfileStore   calibrated per-task limits (:mod:`.profile`)
    ResultCache                      cache of results (:mod:`.cache`)
"""

from .cache import ResultCache
from .confine import Level, SandboxSettings
from .executor import Executor, Limits
from .judge import Mode
from .local import LocalExecutor
from .pool import SandboxExecutor
from .profile import ProfileStore, TaskProfile, TimePolicy
from .result import ExecutionResult, Outcome, TestResult

__all__ = [
    "Executor", "Limits", "LocalExecutor", "SandboxExecutor", "ExecutionResult", "Outcome", "TestResult",
    "Level", "SandboxSettings", "Mode", "TimePolicy", "TaskProfile", "ProfileStore", "ResultCache",
]
