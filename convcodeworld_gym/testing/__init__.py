"""Test utilities for users and for this package's own tests: a scripted OpenAI-compatible
server (:mod:`.openai_server`) and a scripted coder to serve from it, in-process or from a process of
its own (:mod:`.scripted_coder`), a deterministic fake executor (:mod:`.executor`), and sandbox
workers killed from outside mid-run, on purpose (:mod:`.infra`), a Ray cluster of several nodes on this machine whose
nodes come and go (:mod:`.ray_cluster`), and programs that take all the CPU and processes a
run can get (:mod:`.cpu_hogs`); and the episode server (``convcodeworld serve``) in a process of its own
(:mod:`.episode_server`)."""

from .episode_server import EpisodeServer
from .executor import FakeExecutor
from .openai_server import Reply, ScriptedOpenAIServer
from .scripted_coder import CoderScript, CoderServer

__all__ = ["ScriptedOpenAIServer", "Reply", "FakeExecutor", "CoderScript", "CoderServer", "EpisodeServer"]
