"""Every canonical solution passes at turn 0 on the real task sets (slow: minutes; CI runs it)."""

from __future__ import annotations

import socket
from collections import Counter

import pytest

from convcodeworld_gym import ConvCodeWorldEnv
from convcodeworld_gym.sandbox import LocalExecutor, Outcome
from convcodeworld_gym.sandbox.host.forgeable import SPLIT_UNJUDGEABLE
from convcodeworld_gym.sandbox.runtimes.needs import select_runnable

# Their tests reach the internet (DNS, HTTP): they can only pass with network access, which the
# sandbox (an empty network namespace) never gives. Tasks 812 and 832, whose tests expect permission
# errors, pass now that programs run as a non-root uid.
NEEDS_NETWORK = {"BigCodeBench/176", "BigCodeBench/314", "BigCodeBench/1005"}


def _have_network() -> bool:
    try:
        socket.getaddrinfo("dns.google", 53)
        return True
    except OSError:
        return False


@pytest.mark.slow
def test_bigcodebench_stdlib_canonical_all_pass(bigcodebench, executor):
    tasks = bigcodebench.subset(stdlib_only=True)
    assert len(tasks) == 300
    results = executor.run_many([(t, t.ground_truth) for t in tasks])
    failed = {t.task_id: r for t, r in zip(tasks, results) if not r.passed}
    excused = set(SPLIT_UNJUDGEABLE)  # judged split, they fail: the default env leaves them out (sandbox.forgeable)
    if not _have_network() or "netns" in results[0].details.get("confinement", {}).get("features", ()):
        excused |= NEEDS_NETWORK
    unexpected = {k: [(t.name, t.outcome.value, t.traceback[-400:]) for t in r.tests if not t.outcome.ok] or r.crash
                  for k, r in failed.items() if k not in excused}
    assert not unexpected, unexpected
    modes = Counter(r.details.get("judge") for r in results)
    print(f"\nstdlib canonical: {300 - len(failed)}/300 passed; excused here: {sorted(set(failed))}; judge modes: {dict(modes)}")


@pytest.mark.slow
def test_humaneval_canonical_all_pass_and_empty_body_fails(humaneval, executor):
    results = executor.run_many([(t, t.ground_truth) for t in humaneval])
    assert [t.task_id for t, r in zip(humaneval, results) if not r.passed] == []
    print(f"\nHumanEval judge modes: {dict(Counter(r.details.get('judge') for r in results))}")
    empty = executor.run_many([(t, t.code_prompt + "    pass\n") for t in humaneval])
    assert not any(r.passed for r in empty)
    # per-test feedback: every test reported individually, none silently passed
    assert all(len(r.tests) == len(t.test_names) for t, r in zip(humaneval, empty))
    assert sum(t.outcome is Outcome.FAILED for r in empty for t in r.tests) > 500


def test_canonical_reward_one_at_turn_zero_through_env(bigcodebench, executor):
    env = ConvCodeWorldEnv("CF-EF_full", dataset=bigcodebench.subset(stdlib_only=True, limit=5), executor=executor)
    for task in env.tasks:
        env.reset(options={"task_id": task.task_id})
        _, reward, terminated, _, info = env.step(f"```python\n{task.ground_truth}\n```")
        assert (reward, terminated, info["turn"]) == (1.0, True, 0), task.task_id
    env.close()



@pytest.mark.slow
def test_library_tasks_get_the_same_verdicts_in_the_sandbox_as_in_a_plain_interpreter(bigcodebench, executor):
    """The first 24 BigCodeBench tasks that import third-party libraries this runtime holds (numpy, pandas,
    matplotlib, scipy, ... whatever is installed): libraries the worker has not imported yet load inside runs
    too, wherever the venv lives (CI also runs this from a venv under /tmp). A canonical solution may fail
    with library versions other than the pinned ones; it must then fail the same way outside the sandbox."""
    kept, _ = select_runnable(bigcodebench, executor.runtime_probe())
    tasks = [t for t in kept if not t.stdlib_only][:24]
    if len(tasks) < 24:
        pytest.skip(f"only {len(tasks)} library tasks have their needs met here")
    jobs = [(t, t.ground_truth) for t in tasks]
    with LocalExecutor(python=executor.runtime_probe().python) as same_runtime:  # the sandbox's runtime, unconfined
        sandboxed, plain = executor.run_many(jobs), same_runtime.run_many(jobs, max_workers=2)
    differ = {t.task_id: ([(x.name, x.traceback[-300:]) for x in s.tests if not x.outcome.ok] or s.crash)
              for t, s, p in zip(tasks, sandboxed, plain) if s.passed != p.passed}
    assert not differ, differ
    assert sum(r.passed for r in sandboxed) >= 18
