"""Feedback texts: compilation (CF) and execution (EF, partial or full), and their readers
(did this CF compile? does this EF show a failure, for which tests?).

Verbal feedback (the novice / expert simulators) lives in :mod:`.verbal`; what of a step's info the policy's side may
be shown (the episode server's ``metadata["info"]``), in :mod:`.shown`.
"""

from .compilation import COMPILE_FILENAME, NO_SYNTAX_ERRORS, ReplyFeedback, compilation_feedback, compiled, reply_feedback
from .execution import (
    FEEDBACK_STYLES,
    PARTIAL_TEST_COUNT,
    PASSED_ALL_TEST_RUNS,
    TRIM_THRESHOLD,
    compile_error_feedback,
    execution_feedback,
    failing_tests,
    shows_failure,
    trim_feedback,
    visible_tests,
)

__all__ = [
    "NO_SYNTAX_ERRORS",
    "COMPILE_FILENAME",
    "compilation_feedback",
    "ReplyFeedback",
    "reply_feedback",
    "compiled",
    "PASSED_ALL_TEST_RUNS",
    "PARTIAL_TEST_COUNT",
    "TRIM_THRESHOLD",
    "FEEDBACK_STYLES",
    "execution_feedback",
    "compile_error_feedback",
    "shows_failure",
    "failing_tests",
    "trim_feedback",
    "visible_tests",
]
