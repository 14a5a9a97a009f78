"""The Ray executor on a real cluster of several nodes on this machine (``ray.cluster_utils.Cluster``: each node its
own raylet, object store and workers): a node lost mid-batch, a node added mid-batch, the head's connection flapping,
an actor that stops answering, and nothing of the executor left after ``close()``.

Before issue 52, a worker node removed mid-batch stopped the batch for good: the lost actor's replacement needed a CPU
the shrunken cluster no longer had, and the run waited on it without a deadline.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import pytest

from convcodeworld_gym.sandbox import Limits
from convcodeworld_gym.sandbox.host.launch import WORKER_MODULE
from convcodeworld_gym.testing.infra import descendants, marked, runs_under, until

# Every test here starts and kills nodes (15-40 s each on 2 cores): the slow mark, which CI runs
# (`pytest -m "slow and not full_set"`).
pytestmark = [pytest.mark.ray, pytest.mark.slow]
ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'convcodeworld-gym[ray]'")

from convcodeworld_gym.sandbox.backends.ray import RayExecutor  # noqa: E402
from convcodeworld_gym.testing.ray_cluster import NodeCluster  # noqa: E402

LOGGER = "convcodeworld_gym.sandbox.backends.ray"
SHORTFALL = "actors this executor asked for"  # in the one warning of a shortfall
START_S = 60.0  # an actor's start, and a node's, on this loaded 2-core machine: at most


@pytest.fixture(scope="module")
def cluster():
    """A head node of 1 CPU for the module (starting one costs seconds); each test adds the worker nodes it needs
    and removes them."""
    with NodeCluster(head_cpus=1) as nodes:
        yield nodes


@pytest.fixture
def nodes(cluster):
    yield cluster
    for node in list(cluster.workers):  # what a failed test left
        cluster.remove(node)


@pytest.fixture
def held_cpu(nodes):
    """A CPU of the cluster held by someone else (a placement group of 1 CPU, made before the test adds nodes: the
    head's); calling it frees the CPU."""
    from ray.util.placement_group import placement_group, remove_placement_group

    group = placement_group([{"CPU": 1}])
    ray.get(group.ready(), timeout=START_S)
    freed: list[bool] = []

    def free() -> None:
        if not freed:
            freed.append(True)
            remove_placement_group(group)

    yield free
    free()


def _jobs(humaneval, n: int, sleep_s: float) -> tuple[list, list[bool]]:
    """``2 n`` jobs over ``n`` HumanEval tasks, the canonical program and a wrong one each (named and slowed by
    :func:`marked`, so that a run can be caught going on); and which are right."""
    jobs, right = [], []
    for i in range(n):
        task = humaneval[i]
        jobs.append((task, marked(task.ground_truth, sleep_s)))
        jobs.append((task, marked(f"def {task.entry_point}(*args):\n    raise ValueError('wrong')\n", sleep_s)))
        right += [True, False]
    return jobs, right


def _verdicts_hold(results, right) -> None:
    """No verdict changed: a right program passes or is lost (no verdict), never fails; a wrong one never passes."""
    for result, good in zip(results, right, strict=True):
        if good:
            assert result.passed or result.infra_error, result
        else:
            assert not result.passed, result


class _Batch(threading.Thread):
    """``ex.run_many(jobs)`` in a thread of its own; ``results`` once it ends, ``ended`` its time."""

    def __init__(self, ex: RayExecutor, jobs: list) -> None:
        super().__init__(daemon=True)
        self.ex, self.jobs, self.results, self.ended = ex, jobs, None, None
        self.start()

    def run(self) -> None:
        self.results = self.ex.run_many(self.jobs)
        self.ended = time.monotonic()


def _sandbox_workers(pids: list[int]) -> list[int]:
    """The sandbox worker processes of this machine that descend from one of ``pids`` (actors' processes)."""
    def is_worker(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                return WORKER_MODULE.encode() in fh.read()
        except OSError:
            return False

    return [pid for actor in pids for pid in descendants(actor) if is_worker(pid)]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _close_leaves_nothing(ex: RayExecutor, nodes: NodeCluster) -> None:
    """``ex.close()``, then: every CPU of the cluster free again (no actor of it, started or starting, holds one or
    starts later), its actors' processes and their sandbox workers gone, and its watching thread ended."""
    actors = [pid for _node, pid in ex.actors()]
    workers = _sandbox_workers(actors)
    assert workers, "the actors' sandbox workers were not found on this machine"
    ex.close()
    until(lambda: nodes.cpus()[0] == nodes.cpus()[1], 30, f"every CPU free after close(): {nodes.cpus()}")
    until(lambda: not any(_alive(pid) for pid in actors + workers), 30,
          f"the actors' processes {actors} and their sandbox workers {workers} ended")
    assert not [t for t in threading.enumerate() if t.name == "ccw-ray-watch" and t.is_alive()]
    time.sleep(2 * 1.0)  # two looks of a watcher that would still run: nothing starts again
    assert nodes.cpus()[0] == nodes.cpus()[1]


def test_a_node_lost_mid_batch_leaves_no_run_waiting_and_no_verdict_changed(humaneval, nodes, caplog) -> None:
    """A worker node killed (SIGKILL, as a machine lost) while it holds a run: the batch ends within seconds, the run
    it held is retried on the head's actor and judged there, no verdict changes, the shortfall is told once, naming
    the node, and close() leaves nothing of the executor."""
    worker = nodes.add()
    jobs, right = _jobs(humaneval, 12, sleep_s=0.3)
    ex = RayExecutor(nodes.address, slots=2)
    try:
        until(lambda: len(ex.actors()) == 2, START_S, "both actors started")
        assert {node for node, _pid in ex.actors()} == {nodes.head_id, worker.node_id}  # SPREAD over the nodes
        (on_worker,) = [pid for node, pid in ex.actors() if node == worker.node_id]
        batch = _Batch(ex, jobs)
        until(lambda: runs_under(on_worker), START_S, "a run on the worker node")
        lost_at = time.monotonic()
        nodes.remove(worker)
        batch.join(timeout=ex.deadline_s)
        assert not batch.is_alive(), "the batch waited on past the node's loss (the stall of issue 52)"
        # what was left of the batch, on one actor (about 10 s on a loaded machine), far below any deadline
        assert batch.ended - lost_at < 60, f"the batch took {batch.ended - lost_at:.1f} s after the loss"
        results = batch.results
        _verdicts_hold(results, right)
        retried = [(r, good) for r, good in zip(results, right) if r.details.get("retried")]
        assert retried and all("Ray actor" in r.details["retried"]["lost"] for r, _good in retried), results
        assert all(r.passed == good for r, good in retried)  # the run the node held: judged on the head
        assert not any(r.infra_error for r in results)  # one loss each at most: retried on the head, none lost
        until(lambda: _told(caplog), START_S, "the shortfall told")
        (warning,) = _told(caplog)
        assert worker.node_id[:12] in warning and "1 of the 2" in warning, warning
        assert [node for node, _pid in ex.actors()] == [nodes.head_id]
        assert [r.passed for r in ex.run_many(jobs[:4])] == right[:4]  # on the head alone, at once
        _close_leaves_nothing(ex, nodes)
    finally:
        ex.close()


def _told(caplog) -> list[str]:
    """The shortfall warnings logged so far."""
    return [r.getMessage() for r in caplog.records if SHORTFALL in r.getMessage() and r.levelno == logging.WARNING]


def test_a_node_that_comes_back_takes_runs_again(humaneval, nodes, caplog) -> None:
    """A node lost and started again (a restarted machine): the executor starts an actor there and sends it runs,
    with no restart; the shortfall was told once, and its end is logged."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    nodes.add()
    ex = RayExecutor(nodes.address, slots=2)
    try:
        until(lambda: len(ex.actors()) == 2, START_S, "both actors started")
        nodes.remove(nodes.workers[0])
        until(lambda: _told(caplog), START_S, "the shortfall told")
        back = nodes.add()
        until(lambda: len(ex.actors()) == 2, START_S, "an actor started on the node that came back")
        jobs, right = _jobs(humaneval, 6, sleep_s=0.05)
        results = ex.run_many(jobs)
        assert [r.passed for r in results] == right and all(r.infra_error is None for r in results)
        assert {r.details["ray_node"] for r in results} == {nodes.head_id, back.node_id}
        assert any("again" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)
        assert len(_told(caplog)) == 1
        _close_leaves_nothing(ex, nodes)
    finally:
        ex.close()


def test_a_node_added_mid_batch_takes_runs(humaneval, nodes) -> None:
    """An executor sized by the cluster (``slots=None``) on the head alone: a node added mid-batch (an
    autoscaler's) gets an actor and runs of that batch, with no restart."""
    ex = RayExecutor(nodes.address)
    try:
        until(lambda: len(ex.actors()) == 1, START_S, "the head's actor started")
        assert ex.default_concurrency() == 1
        jobs, right = _jobs(humaneval, 10, sleep_s=0.5)
        batch = _Batch(ex, jobs)
        until(lambda: runs_under(ex.actors()[0][1]), START_S, "the batch running on the head")
        added = nodes.add()
        batch.join(timeout=ex.deadline_s)
        assert not batch.is_alive()
        results = batch.results
        _verdicts_hold(results, right)
        assert all(r.infra_error is None for r in results) and [r.passed for r in results] == right
        on_added = [r for r in results if r.details["ray_node"] == added.node_id]
        assert on_added, "the node added mid-batch took none of its runs"
        assert ex.default_concurrency() == 2 and {node for node, _pid in ex.actors()} == {nodes.head_id, added.node_id}
        _close_leaves_nothing(ex, nodes)
    finally:
        ex.close()


def test_an_actor_the_cluster_has_no_cpu_for_is_not_waited_on_and_close_stops_it(humaneval, nodes, held_cpu, caplog
                                                                                 ) -> None:
    """Two slots on two CPUs, one of them held by someone else (a placement group): the second actor waits for a CPU,
    the runs go to the first without waiting, the wait is told once, and close() stops the waiting actor too (it
    does not start when the CPU is freed after)."""
    nodes.add()
    ex = RayExecutor(nodes.address, slots=2, grace_s=3.0)
    try:
        until(lambda: len(ex.actors()) == 1, START_S, "the actor with a CPU started")
        assert ex.default_concurrency() == 2  # one started, one starting
        jobs, right = _jobs(humaneval, 4, sleep_s=0.0)
        results = ex.run_many(jobs)
        assert [r.passed for r in results] == right and all(r.infra_error is None for r in results)
        until(lambda: any("not started after 3 s" in m for m in _told(caplog)), 10 + ex.grace_s,
              "the actor waiting for a CPU told")  # (both, when the first took over grace_s to start too)
        assert len(ex.actors()) == 1 and ex.default_concurrency() == 2
        actors = [pid for _node, pid in ex.actors()]
        ex.close()
        held_cpu()  # the CPU the waiting actor wanted is free now: it must not start
        until(lambda: nodes.cpus()[0] == nodes.cpus()[1], 30, f"every CPU free after close(): {nodes.cpus()}")
        until(lambda: not any(_alive(pid) for pid in actors), 30, "the started actor's process ended")
        time.sleep(3.0)
        assert nodes.cpus()[0] == nodes.cpus()[1], "the actor that waited for a CPU started after close()"
        assert len(_told(caplog)) == 1
    finally:
        ex.close()


def test_a_run_whose_node_is_lost_with_no_actor_left_comes_back_lost_within_its_bound(humaneval, nodes, held_cpu
                                                                                     ) -> None:
    """One slot, on the worker node (the head's CPU held by someone else, as on a head started with --num-cpus=0):
    the node killed mid-run leaves no live actor for the retry, so the run comes back lost (infra_error, no verdict)
    once it has waited its time limit + grace_s, not later; the node back, runs pass again."""
    worker = nodes.add()
    ex = RayExecutor(nodes.address, slots=1, limits=Limits(suite_timeout_s=1.0), grace_s=3.0)
    try:
        until(lambda: len(ex.actors()) == 1, START_S, "the actor started")
        ((node, pid),) = ex.actors()
        assert node == worker.node_id
        task = humaneval["HumanEval/0"]
        out: list = []
        runner = threading.Thread(target=lambda: out.append(ex.run(task, marked(task.ground_truth, 0.5))), daemon=True)
        runner.start()
        until(lambda: runs_under(pid), START_S, "the run on the worker node")
        lost_at = time.monotonic()
        nodes.remove(worker)
        runner.join(timeout=60)
        assert not runner.is_alive(), "the run waited on with no actor left"
        waited = time.monotonic() - lost_at
        (result,) = out
        assert not result.passed and "no Ray actor of this executor was alive for 8 s" in (result.infra_error or ""), result
        assert "Ray actor" in result.details["retried"]["lost"]
        assert 8 <= waited < 8 + 15, waited  # its time limit (the 5 s floor) + grace_s, then at once
        nodes.add()
        until(lambda: len(ex.actors()) == 1, START_S, "an actor on the node that came back")
        assert ex.run(task, task.ground_truth).passed
        held_cpu()
        _close_leaves_nothing(ex, nodes)
    finally:
        ex.close()


def test_the_heads_connection_flapping_mid_batch_changes_nothing(humaneval, nodes) -> None:
    """The head's GCS stopped for 5 s mid-batch (every connection to the head hangs) and resumed: the runs on the
    actors go on, every verdict is right, and the executor is as elastic after it (a node added takes runs)."""
    worker = nodes.add()
    ex = RayExecutor(nodes.address)
    try:
        until(lambda: len(ex.actors()) == 2, START_S, "both actors started")
        jobs, right = _jobs(humaneval, 12, sleep_s=0.3)
        batch = _Batch(ex, jobs)
        until(lambda: any(runs_under(pid) for _node, pid in ex.actors()), START_S, "the batch running")
        nodes.gcs_pause(True)
        try:
            time.sleep(5.0)
        finally:
            nodes.gcs_pause(False)
        batch.join(timeout=ex.deadline_s)
        assert not batch.is_alive()
        assert [r.passed for r in batch.results] == right and all(r.infra_error is None for r in batch.results)
        nodes.remove(worker)
        added = nodes.add()
        until(lambda: added.node_id in {node for node, _pid in ex.actors()}, START_S, "an actor on the added node")
        results = ex.run_many(_jobs(humaneval, 4, sleep_s=0.0)[0])
        assert added.node_id in {r.details["ray_node"] for r in results}
        _close_leaves_nothing(ex, nodes)
    finally:
        ex.close()


def test_an_actor_that_stops_answering_is_stopped_at_the_deadline_and_its_run_retried(humaneval, nodes) -> None:
    """The worker node's actor process frozen (SIGSTOP: a node cut off, or hung) while it holds a run: nothing tells
    Ray, so the run's own deadline (run_deadline_s of its limits) ends the wait; the run is retried on the head's
    actor and passes, the frozen actor is stopped, and a fresh one takes its CPU."""
    worker = nodes.add()
    ex = RayExecutor(nodes.address, slots=2, limits=Limits(suite_timeout_s=2.0), grace_s=5.0)
    frozen = None
    try:
        assert ex.deadline_s == 25.0  # 4 x max(5 s floor, 2 s) + 5 s
        until(lambda: len(ex.actors()) == 2, START_S, "both actors started")
        (frozen,) = [pid for node, pid in ex.actors() if node == worker.node_id]
        jobs, right = _jobs(humaneval, 6, sleep_s=0.3)
        batch = _Batch(ex, jobs)
        until(lambda: runs_under(frozen), START_S, "a run on the worker node's actor")
        os.kill(frozen, signal.SIGSTOP)
        stopped_at = time.monotonic()
        batch.join(timeout=3 * ex.deadline_s)
        assert not batch.is_alive()
        assert batch.ended - stopped_at < ex.deadline_s + 20
        results = batch.results
        assert [r.passed for r in results] == right and all(r.infra_error is None for r in results)
        (retried,) = [r for r in results if r.details.get("retried")]
        assert "did not answer within 25 s" in retried.details["retried"]["lost"]
        # its deadline (after its wait for an idle actor in the batch), no more
        assert ex.deadline_s <= retried.details["retried"]["lost_s"] < ex.deadline_s + 15
        until(lambda: not _alive(frozen), 30, "the frozen actor stopped")
        until(lambda: len(ex.actors()) == 2, START_S, "a fresh actor on the freed CPU")
        _close_leaves_nothing(ex, nodes)
    finally:
        if frozen is not None and _alive(frozen):
            os.kill(frozen, signal.SIGCONT)
        ex.close()
