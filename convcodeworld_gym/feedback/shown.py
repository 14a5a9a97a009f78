"""What of a step's ``info`` the policy's side may be shown: the execution feedback's rule, applied to the info.

A step's ``info`` is written for whoever runs the env (a trainer, a benchmark): it holds every test's outcome and
traceback, the run's crash text and its timings, hidden tests' included. That is right in the runner's own process
and log, and wrong wherever ``info`` crosses to someone who may be the policy, or may hand it to one: a client of the
episode server is a stranger (:mod:`convcodeworld_gym.service`). The program owns what it does on a hidden test, so
anything per hidden test that reaches such a client is a channel it can write into: a traceback (the hidden input,
raised), an outcome (fail hidden test *k* where a bit of the input is set), a time (sleep as long as a character's
code). :func:`shown_info` keeps of ``info`` only what the step's execution feedback covers:

* ``tests``: the entries of the tests the feedback covers (all under full EF; the public ones,
  :attr:`~convcodeworld_gym.tasks.Task.public_tests`, under partial; none without EF), with their outcome and
  traceback; no entry of any other test.
* ``pass_fraction`` and ``hidden_pass_fraction``: kept under full EF, else None; ``public_pass_fraction`` kept where
  the feedback covers the public tests (partial or full EF), else None.
* ``crash`` and ``limits_hit``: kept under full EF, and under partial EF where a public test had not reported when
  they came (then they came in a public test or before any test, as the feedback shows them:
  :func:`.execution.public_reported`); else None and ``[]``.
* ``regressed_tests``: only the covered tests among them.
* ``timings``: only ``compile_s`` (what the program's run and the simulated user took depends on hidden tests:
  None) unless under full EF.
* ``verbal_feedback_details``: without its ``leak`` counts (how many hidden literals the simulated user's words
  held) unless under full EF.

Everything else passes unchanged: the verdict (``passed``, the reward's), ``untrimmed_execution_feedback`` (the shown
text before its cut), ``test_names`` (at reset: names only), the run's confinement and profile. What this cannot take
away is the step's own latency, which a client measures itself (docs/threat-model.md). The input is never changed.

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

    >>> info = {"feedback_shown": {"execution": "partial"}, "crash": None, "pass_fraction": 0.0,
    ...         "tests": [{"name": "a", "outcome": "failed", "traceback": "AssertionError: 1 != 2"},
    ...                   {"name": "h", "outcome": "failed", "traceback": "AssertionError: 41 != 42"}]}
    >>> shown = shown_info(info, ("a",))
    >>> [t["name"] for t in shown["tests"]], shown["pass_fraction"]
    (['a'], None)
    """
    shown = dict(info)
    if "tests" not in info:
        return shown
    execution = (info.get("feedback_shown") or {}).get("execution")
    if execution == "full":
        return shown
    tests = list(info["tests"])
    covered = set(public_tests) if execution == "partial" else set()
    shown["tests"] = [t for t in tests if t["name"] in covered]
    shown["regressed_tests"] = [name for name in info.get("regressed_tests") or () if name in covered]
    shown["pass_fraction"] = shown["hidden_pass_fraction"] = None
    if execution != "partial":
        shown["public_pass_fraction"] = None
    before_public = execution == "partial" and not public_reported(
        ((t["name"], Outcome(t["outcome"])) for t in tests), covered)
    if not before_public:
        shown["crash"], shown["limits_hit"] = None, []
    if "timings" in info:
        shown["timings"] = _compile_time_only(info["timings"])
    if isinstance(info.get("verbal_feedback_details"), Mapping):
        shown["verbal_feedback_details"] = {k: v for k, v in info["verbal_feedback_details"].items() if k != "leak"}
    return shown


def _compile_time_only(timings: Any) -> Any:
    """``timings`` (a :class:`~convcodeworld_gym.env.Timings` or its dict) with only ``compile_s`` kept."""
    if isinstance(timings, Mapping):
        return {key: (value if key == "compile_s" else None) for key, value in timings.items()}
    fields = getattr(timings, "__dataclass_fields__", None)
    if fields is None:
        return None
    return type(timings)(**{key: (getattr(timings, key) if key == "compile_s" else None) for key in fields})
