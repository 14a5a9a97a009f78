"""What the episodes a server played add up to, per id: the reward, the canary pass rate and regressions beside it.

Every session of a server reports each episode it ends to the backend's one :class:`EpisodeTally` (thread-safe; the
sessions run on one event loop, but the tally may be read from any thread). ``GET /episodes`` returns
:meth:`EpisodeTally.to_json`, and the server writes it to its log when it shuts down: what an RL user reads beside
the reward while the trainer plays episodes through the server (docs/canary.md).

An episode counts once it ends with a verdict: its program passed, or its last turn was played. One the
infrastructure lost (``info["infra_error"]``: no verdict, reward ``None``) counts under ``lost``; one cut by the
episode time limit, or whose client went away, or that a new ``reset`` abandoned, does not count. A canary twin's
episodes (``info["canary"]``: reward always 0.0) are counted apart, never in the reward's mean: their pass rate is
the canary (:class:`~convcodeworld_gym.tasks.canary.CanaryRate`).

Holds:
    EpisodeTally   running counts per id, and their JSON
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from ..tasks.canary import CanaryRate

__all__ = ["EpisodeTally"]


@dataclass
class _Counts:
    """One id's counts (see :class:`EpisodeTally`)."""

    episodes: int = 0
    reward: float = 0.0
    regressed: int = 0
    lost: int = 0
    twins: int = 0
    twins_passed: int = 0

    def to_json(self) -> dict[str, Any]:
        canary = CanaryRate(self.twins, self.twins_passed)
        return {
            "episodes": self.episodes,
            "reward_mean": self.reward / self.episodes if self.episodes else None,
            "regressed_share": self.regressed / self.episodes if self.episodes else None,
            "lost": self.lost,
            "canary": {"episodes": canary.episodes, "passed": canary.passed, "pass_rate": canary.rate},
        }


class EpisodeTally:
    """Running counts of the episodes a server's sessions ended, per id.

    Per id: ``episodes`` (real tasks' episodes with a verdict), ``reward_mean`` over them, ``regressed_share`` (those
    with a turn whose program broke a test an earlier turn passed: ``info["regressed_tests"]``), ``lost`` (episodes
    the infrastructure lost) and ``canary`` (the canary twins' episodes with a verdict, those a program passed, and
    the pass rate; none of it in the reward).

    >>> tally = EpisodeTally()
    >>> tally.record("ConvCodeWorld-CF-v0", reward=1.0, canary=False, passed=True, regressed=False)
    >>> tally.record("ConvCodeWorld-CF-v0", reward=0.0, canary=True, passed=True, regressed=True)
    >>> tally.to_json()["all"]["canary"], tally.to_json()["all"]["reward_mean"]
    ({'episodes': 1, 'passed': 1, 'pass_rate': 1.0}, 1.0)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[str, _Counts] = {}

    def record(self, env_id: str, *, reward: float | None, canary: bool, passed: bool, regressed: bool) -> None:
        """Count one ended episode of ``env_id``: ``reward`` None when the infrastructure lost it (``lost``);
        ``passed`` whether its last program passed every test (on a canary twin: the canary); ``regressed`` whether
        any of its turns broke a test an earlier turn passed."""
        with self._lock:
            counts = self._by_id.setdefault(env_id, _Counts())
            if reward is None:
                counts.lost += 1
            elif canary:
                counts.twins += 1
                counts.twins_passed += bool(passed)
            else:
                counts.episodes += 1
                counts.reward += reward
                counts.regressed += bool(regressed)

    def to_json(self) -> dict[str, Any]:
        """``{"ids": {env_id: counts}, "all": counts}``, each as :class:`EpisodeTally` describes."""
        with self._lock:
            total = _Counts()
            for counts in self._by_id.values():
                for name in vars(total):
                    setattr(total, name, getattr(total, name) + getattr(counts, name))
            return {"ids": {env_id: counts.to_json() for env_id, counts in sorted(self._by_id.items())},
                    "all": total.to_json()}
