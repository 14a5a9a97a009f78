"""Runs in the host: running untrusted programs against task test suites (the package's public door to the sandbox).
"""

from .backends.local import LocalExecutor
from .confinement.confine import Level, SandboxSettings
from .host.cache import ResultCache
from .host.executor import Executor
from .host.pool import SandboxExecutor
from .host.profile import ProfileStore, TaskProfile, TimePolicy
from .limits import Limits
from .messages import Mode
from .result import ExecutionResult, Outcome, TestResult

__all__ = [
    "Executor", "Limits", "LocalExecutor", "SandboxExecutor", "ExecutionResult", "Outcome", "TestResult",
    "Level", "SandboxSettings", "Mode", "TimePolicy", "TaskProfile", "ProfileStore", "ResultCache",
]
