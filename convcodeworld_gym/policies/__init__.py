"""Policies: what writes the code in an evaluation run."""

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

POLICY_KINDS = ("synthetic", "oracle", "replay", "openai")


def make_policy(kind: str, **settings: object) -> Policy:
    """Build a policy by kind: ``synthetic`` (``strength``), ``oracle``, ``replay`` (``path``) or
    ``openai`` (``model`` and the :class:`OpenAIPolicy` settings). ``None`` settings are dropped.

    >>> make_policy("synthetic", strength=0.25).name
    'SYNTHETIC-coder(strength=0.25)'
    """
    given = {k: v for k, v in settings.items() if v is not None}
    if kind == "synthetic":
        return SyntheticCoder(**given)  # type: ignore[arg-type]
    if kind == "oracle":
        return OraclePolicy()
    if kind == "replay":
        if "path" not in given:
            raise ValueError("the replay policy needs a file: pass --replay-file PATH (JSONL of task_id, turn, reply)")
        return ReplayPolicy(given["path"])  # type: ignore[arg-type]
    if kind == "openai":
        if "model" not in given:
            raise ValueError("the openai policy needs a model name: pass --model (e.g. gpt-4o-mini, or the name your vLLM/Ollama server serves)")
        return OpenAIPolicy(**given)  # type: ignore[arg-type]
    raise ValueError(f"unknown policy {kind!r}; choose one of {', '.join(POLICY_KINDS)}")


__all__ += ["make_policy", "POLICY_KINDS"]
