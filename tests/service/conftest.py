"""Fixtures of the episode server's tests: a real ``convcodeworld serve`` on 127.0.0.1 (a process of its own, the real
sandbox). Nothing here imports OpenEnv; the test modules that need it skip without it (helpers: server_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from convcodeworld_gym.testing.episode_server import EpisodeServer


@pytest.fixture(scope="session")
def server() -> Iterator[EpisodeServer]:
    """A server of HumanEval on the 9 ids (default CF-EF_full), default limits."""
    with EpisodeServer(["CF-EF_full", "--dataset", "humaneval"]) as running:
        yield running
