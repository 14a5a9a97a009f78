"""Policies: what writes the code in an evaluation run.

Holds:
    Policy, PolicyEpisode, PolicyReply   the interface (:mod:`.base`)
    OpenAIPolicy, LLMError               any OpenAI-compatible chat endpoint (:mod:`.llm`)
    OraclePolicy, ReplayPolicy           the canonical solution; logged replies (:mod:`.offline`)
    SyntheticCoder                       SYNTHETIC offline coder with seeded bugs (:mod:`.synthetic`)
    initial_prompt, refinement_prompt    the LLM prompts (:mod:`.prompts`)
"""

from .base import Policy, PolicyEpisode, PolicyReply, fenced
from .llm import LLMError, OpenAIPolicy
from .offline import OraclePolicy, ReplayError, ReplayPolicy
from .prompts import SYSTEM_PROMPT, initial_prompt, refinement_prompt
from .synthetic import SyntheticCoder

__all__ = [
    "Policy",
    "PolicyEpisode",
    "PolicyReply",
    "fenced",
    "OpenAIPolicy",
    "LLMError",
    "OraclePolicy",
    "ReplayPolicy",
    "ReplayError",
    "SyntheticCoder",
    "SYSTEM_PROMPT",
    "initial_prompt",
    "refinement_prompt",
]
