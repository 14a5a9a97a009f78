"""Test utilities for users and for this package's own tests."""

from .openai_server import Reply, ScriptedOpenAIServer

__all__ = ["ScriptedOpenAIServer", "Reply"]
