"""Running untrusted programs against task test suites.

Holds:
    Executor, Limits                 the interface and its limits (:mod:`.executor`)
    ExecutionResult, TestResult, Outcome   what a run returns (:mod:`.result`)
    LocalExecutor                    one fresh child interpreter per run (:mod:`.local`)
"""

from .executor import Executor, Limits
from .local import LocalExecutor
from .result import ExecutionResult, Outcome, TestResult

__all__ = ["Executor", "Limits", "LocalExecutor", "ExecutionResult", "Outcome", "TestResult"]
