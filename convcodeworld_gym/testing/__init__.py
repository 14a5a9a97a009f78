"""Test utilities for users and for this package's own tests: a scripted OpenAI-compatible
server (:mod:`.openai_server`), a deterministic fake executor (:mod:`.executor`), and sandbox
workers killed from outside mid-run, on purpose (:mod:`.infra`)."""

from .executor import FakeExecutor
from .openai_server import Reply, ScriptedOpenAIServer

__all__ = ["ScriptedOpenAIServer", "Reply", "FakeExecutor"]
