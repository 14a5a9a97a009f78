"""Test utilities for users and for this package's own tests: a scripted OpenAI-compatible
server (:mod:`.openai_server`) and a deterministic fake executor (:mod:`.executor`)."""

from .executor import FakeExecutor
from .openai_server import Reply, ScriptedOpenAIServer

__all__ = ["ScriptedOpenAIServer", "Reply", "FakeExecutor"]
