"""Feedback texts: compilation (CF) and execution (EF, partial or full).

Verbal feedback (the novice / expert simulators) lives in :mod:`.verbal`.
"""

from .compilation import COMPILE_FILENAME, NO_SYNTAX_ERRORS, compilation_feedback
from .execution import PARTIAL_TEST_COUNT, PASSED_ALL_TEST_RUNS, TRIM_THRESHOLD, execution_feedback, trim_feedback

__all__ = [
    "NO_SYNTAX_ERRORS",
    "COMPILE_FILENAME",
    "compilation_feedback",
    "PASSED_ALL_TEST_RUNS",
    "PARTIAL_TEST_COUNT",
    "TRIM_THRESHOLD",
    "execution_feedback",
    "trim_feedback",
]
