"""Verbal feedback: the simulated novice (SNF) and expert (SEF) users of ConvCodeWorld.

Two backends behind one factory, :func:`make_simulator`:

* ``"llm"``: an OpenAI-compatible chat model plays the user (the paper: ``gpt-4o-2024-05-13`` at
  temperature 0), every answer cached on disk (:mod:`.cache`).
* ``"offline"``: deterministic rules, no network (:mod:`.offline`).
* ``"auto"`` (default): the LLM when an endpoint is configured, else offline, with one
  logged warning.

The endpoint is configured by kwargs or these environment variables (``OPENAI_API_KEY``
alone does **not** switch ``"auto"`` to the paid API):

========================================  ==============================================
``CONVCODEWORLD_SIMULATOR_MODEL``         chat model; setting it (or the base URL) turns ``auto`` into the LLM
``CONVCODEWORLD_SIMULATOR_BASE_URL``      OpenAI-compatible base URL (default OpenAI's)
``CONVCODEWORLD_SIMULATOR_API_KEY``       key; falls back to ``OPENAI_API_KEY``
``CONVCODEWORLD_SIMULATOR_CACHE``         sqlite cache file (default ``~/.cache/convcodeworld-gym/verbal_feedback.sqlite``)
========================================  =============================================="""

from __future__ import annotations

import functools
import inspect
import logging
import os
from typing import Any, Literal

from ...sandbox.host.executor import Executor
from ..context import VerbalFeedback, VerbalReply
from .cache import CACHE_ENV, FeedbackCache, default_cache_path
from .leak import leaked_lines, redact
from .llm import DEFAULT_MAX_TOKENS, DEFAULT_MODEL, LLMSimulator
from .offline import OFFLINE_SOURCE, OfflineSimulator
from .prompts import build_messages
from .rules import check_expertise, should_speak

__all__ = [
    "make_simulator",
    "simulator_defaults",
    "endpoint_configured",
    "LLMSimulator",
    "OfflineSimulator",
    "FeedbackCache",
    "VerbalReply",
    "build_messages",
    "should_speak",
    "leaked_lines",
    "redact",
    "DEFAULT_MODEL",
    "OFFLINE_SOURCE",
    "MODEL_ENV",
    "BASE_URL_ENV",
    "API_KEY_ENV",
    "CACHE_ENV",
]

MODEL_ENV = "CONVCODEWORLD_SIMULATOR_MODEL"
BASE_URL_ENV = "CONVCODEWORLD_SIMULATOR_BASE_URL"
API_KEY_ENV = "CONVCODEWORLD_SIMULATOR_API_KEY"

_log = logging.getLogger(__name__)
Backend = Literal["auto", "offline", "llm"]


def endpoint_configured(model: str | None = None, base_url: str | None = None) -> bool:
    """Whether an LLM endpoint is configured: a model or base URL given, or set in the environment."""
    return bool(model or base_url or os.environ.get(MODEL_ENV) or os.environ.get(BASE_URL_ENV))


@functools.lru_cache(maxsize=1)
def _warn_offline_once() -> None:
    _log.warning(
        "no LLM endpoint configured for verbal feedback: using the offline simulator "
        "(set %s or %s, or pass simulator_kwargs={'backend': 'llm', ...}, for the paper's GPT-4o user)",
        MODEL_ENV,
        BASE_URL_ENV,
    )


def simulator_defaults() -> dict[str, Any]:
    """What :func:`make_simulator` builds a user with where its caller says nothing: each keyword's default but the
    key, the cache's path and the executor (they do not decide what the user says).

    >>> simulator_defaults()["backend"], simulator_defaults()["seed"], "api_key" in simulator_defaults()
    ('auto', 0, False)
    """
    return {name: p.default for name, p in inspect.signature(make_simulator).parameters.items()
            if p.default is not inspect.Parameter.empty and name not in ("api_key", "cache_path", "executor")}


def make_simulator(
    expertise: Literal["novice", "expert"],
    backend: Backend = "auto",
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    cache_path: str | os.PathLike[str] | None = None,
    seed: int = 0,
    retries: int = 4,
    backoff_s: float = 1.0,
    timeout_s: float = 120.0,
    executor: Executor | None = None,
    probe: bool = True,
) -> VerbalFeedback:
    """Build a simulated user.

    Args:
        expertise: ``"novice"`` (SNF) or ``"expert"`` (SEF).
        backend: ``"llm"``, ``"offline"``, or ``"auto"`` (LLM when :func:`endpoint_configured`,
            else offline with one logged warning per process).
        model, base_url, api_key: the LLM endpoint; ``None`` reads the environment variables
            above. ``model`` defaults to ``gpt-4o-2024-05-13`` (the paper's version).
        temperature, max_tokens: sampling parameters of the LLM; ``max_tokens=None`` means the
            reference's 2048.
        cache_path: the LLM answers' sqlite cache; ``None`` reads ``$CONVCODEWORLD_SIMULATOR_CACHE``
            or uses the user cache directory.
        seed: the offline simulator's phrasing seed (ignored by the LLM: temperature 0 and
            the cache make it reproducible).
        retries, backoff_s, timeout_s: the LLM's retries after 429 / 5xx / timeouts, the first
            backoff (doubling) and the per-request timeout.
        executor: where the offline expert runs its probes (the env passes its own, so probes
            are confined like the tests); default the env's, else a private sandbox.
        probe: let the offline expert run the ground truth and the candidate on the failing
            test's inputs (two more executions per turn, one when the ground truth's is
            remembered); ``False`` keeps to the failing test's text and the code comparison.

    >>> make_simulator("novice", "offline").source
    'offline'
    """
    check_expertise(expertise)
    if backend not in ("auto", "offline", "llm"):
        raise ValueError(f"backend must be 'auto', 'offline' or 'llm', got {backend!r}")
    if backend == "auto":
        backend = "llm" if endpoint_configured(model, base_url) else "offline"
        if backend == "offline":
            _warn_offline_once()
    if backend == "offline":
        return OfflineSimulator(expertise, seed=seed, executor=executor, probe=probe)
    base_url = base_url or os.environ.get(BASE_URL_ENV) or None
    api_key = api_key or os.environ.get(API_KEY_ENV) or os.environ.get("OPENAI_API_KEY") or None
    if api_key is None and base_url is None:
        raise ValueError(
            "backend='llm' with OpenAI's API needs a key: pass api_key=, or set "
            f"{API_KEY_ENV} (or OPENAI_API_KEY); for a local server set base_url= / {BASE_URL_ENV}"
        )
    return LLMSimulator(
        expertise,
        model=model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL,
        cache=FeedbackCache(cache_path or default_cache_path()),
        base_url=base_url,
        api_key=api_key,
        temperature=temperature,
        max_tokens=DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
        retries=retries,
        backoff_s=backoff_s,
        timeout_s=timeout_s,
    )
