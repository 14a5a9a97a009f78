"""Shared fixtures: the real BigCodeBench file (via $CONVCODEWORLD_BIGCODEBENCH_PATH), HumanEval, executors.

``executor`` is the environment's default, the confined :class:`SandboxExecutor`; ``local_executor``
is the unconfined fresh-interpreter backend, kept for comparison; ``fake_executor`` judges by a rule
and runs nothing (:class:`~convcodeworld_gym.testing.executor.FakeExecutor`), for tests that are not
about the sandbox (a module switches by defining its own ``executor`` fixture that returns it).
"""

from __future__ import annotations

import os

import pytest

from convcodeworld_gym.sandbox import Limits, LocalExecutor, SandboxExecutor
from convcodeworld_gym.tasks import BIGCODEBENCH_ENV, TaskSet, load_tasks
from convcodeworld_gym.testing.executor import FakeExecutor


@pytest.fixture(scope="session")
def bigcodebench() -> TaskSet:
    """The 1140 real BigCodeBench tasks. CI sets the path; elsewhere the tests skip, saying how to enable them."""
    if not os.environ.get(BIGCODEBENCH_ENV):
        pytest.skip(f"set ${BIGCODEBENCH_ENV} to a local BigCodeBench.jsonl.gz to run BigCodeBench tests")
    return load_tasks("bigcodebench")


@pytest.fixture(scope="session")
def humaneval() -> TaskSet:
    return load_tasks("humaneval")


@pytest.fixture(scope="session")
def executor():
    with SandboxExecutor() as ex:
        yield ex


@pytest.fixture(scope="session")
def local_executor():
    with LocalExecutor() as ex:
        yield ex


@pytest.fixture(scope="session")
def quick_executor():
    """Short fixed limits (no calibration), for tests that provoke timeouts."""
    with SandboxExecutor(Limits(suite_timeout_s=6.0, test_timeout_s=2.0), calibrate=False) as ex:
        yield ex


@pytest.fixture(scope="session")
def fake_executor() -> FakeExecutor:
    """Every test passes exactly when the program is the task's canonical solution; nothing runs."""
    return FakeExecutor()
