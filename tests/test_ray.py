"""The Ray executor on a real local Ray instance (``ray.init(num_cpus=2)``): 20 tasks, results identical to local."""

from __future__ import annotations

import pytest

from convcodeworld_gym.sandbox import LocalExecutor

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'convcodeworld-gym[ray]'")

from convcodeworld_gym.sandbox.ray import RayExecutor, make_ray_executor  # noqa: E402


def test_twenty_tasks_identical_to_local(humaneval) -> None:
    tasks = [humaneval[i] for i in range(20)]
    # ground truth for most, a wrong body for every fourth task: passes and failures both compare
    jobs = [(t, t.ground_truth if i % 4 else f"def {t.entry_point}(*args):\n    raise ValueError('wrong')\n") for i, t in enumerate(tasks)]
    with LocalExecutor() as local:
        expected = local.run_many(jobs)
    with RayExecutor(init_kwargs={"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}) as ex:
        assert ex.default_concurrency() == 2
        results = ex.run_many(jobs)
        single = ex.run(*jobs[1])
    assert not ray.is_initialized()  # the executor shut down the instance it started
    assert results == expected
    assert single == expected[1]
    assert [r.passed for r in results] == [bool(i % 4) for i in range(20)]
    assert all(r.details.get("ray_node") for r in results)


def test_empty_address_is_a_clear_error() -> None:
    # (an unreachable address is not tested: Ray retries the connection for minutes)
    with pytest.raises(ValueError, match="cluster address"):
        make_ray_executor("")
