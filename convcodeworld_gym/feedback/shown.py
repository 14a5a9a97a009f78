"""What of a step's ``info`` the policy's side may be shown: the execution feedback's rule, applied to the info.

A step's ``info`` is written for whoever runs the env (a trainer, a benchmark): it holds every test's outcome and
traceback and the run's crash text, hidden tests' included. That is right in the runner's own process and log, and
wrong wherever ``info`` crosses to someone who may be the policy, or may hand it to one: a client of the episode
server is a stranger (:mod:`convcodeworld_gym.service`). :func:`shown_info` keeps of ``info`` only what the step's
execution feedback could have shown:

* ``tests``: every test keeps its ``name`` and ``outcome`` (the verdict's detail, as ``pass_fraction`` has it); a
  ``traceback`` stays only on a test the feedback covers (all under full EF; the public ones,
  :attr:`~convcodeworld_gym.tasks.Task.public_tests`, under partial; none without EF), else it is ``None``: a
  hidden test's traceback names its input and expected value.
* ``crash``: kept under full EF, and under partial EF where a public test had not reported when it came (then it
  came in a public test or before any test, as the feedback shows it: :func:`.execution.public_reported`); else
  ``None``: a crash after the public tests came in a hidden one.

Everything else passes unchanged: ``untrimmed_execution_feedback`` is the shown text before its cut, the fractions
are counts, and ``test_names`` (at reset) and ``regressed_tests`` are names only. The input is never changed.

Holds:
    shown_info   ``info`` with what the feedback did not show taken out
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from ..sandbox.result import Outcome
from .execution import public_reported

__all__ = ["shown_info"]


def shown_info(info: Mapping[str, Any], public_tests: Collection[str]) -> dict[str, Any]:
    """A copy of a step's ``info`` holding only what its execution feedback could show (see the module).

    Args:
        info: a reset's or step's info (:meth:`convcodeworld_gym.env.ConvCodeWorldEnv.step`); a reset's has no tests
            and passes as it is.
        public_tests: the task's public tests (:attr:`~convcodeworld_gym.tasks.Task.public_tests`): what partial EF
            covers.

    >>> info = {"feedback_shown": {"execution": "partial"}, "crash": None,
    ...         "tests": [{"name": "a", "outcome": "failed", "traceback": "AssertionError: 1 != 2"},
    ...                   {"name": "h", "outcome": "failed", "traceback": "AssertionError: 41 != 42"}]}
    >>> [t["traceback"] for t in shown_info(info, ("a",))["tests"]]
    ['AssertionError: 1 != 2', None]
    """
    shown = dict(info)
    if "tests" not in info:
        return shown
    execution = (info.get("feedback_shown") or {}).get("execution")
    tests = list(info["tests"])
    covered = {t["name"] for t in tests} if execution == "full" else set(public_tests) if execution == "partial" else set()
    shown["tests"] = [t if t["name"] in covered else {**t, "traceback": None} for t in tests]
    if info.get("crash") is not None:
        before_public = execution == "partial" and not public_reported(
            ((t["name"], Outcome(t["outcome"])) for t in tests), covered)
        shown["crash"] = info["crash"] if execution == "full" or before_public else None
    return shown
