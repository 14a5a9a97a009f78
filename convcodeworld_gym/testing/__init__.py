"""Test utilities for users and for this package's own tests.

Holds:
    ScriptedOpenAIServer, Reply   a real HTTP server on 127.0.0.1 speaking the OpenAI chat API
"""

from .openai_server import Reply, ScriptedOpenAIServer

__all__ = ["ScriptedOpenAIServer", "Reply"]
