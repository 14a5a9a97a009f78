"""Running untrusted programs against task test suites.
"""

from .cache import ResultCache
from .confinement.confine import Level, SandboxSettings
from .executor import Executor, Limits
from .judge_policy import Mode
from .local import LocalExecutor
from .pool import SandboxExecutor
from .profile import ProfileStore, TaskProfile, TimePolicy
from .result import ExecutionResult, Outcome, TestResult

__all__ = [
    "Executor", "Limits", "LocalExecutor", "SandboxExecutor", "ExecutionResult", "Outcome", "TestResult",
    "Level", "SandboxSettings", "Mode", "TimePolicy", "TaskProfile", "ProfileStore", "ResultCache",
]
