"""Numeric views of ConvCodeWorld for agents that need fixed-size spaces (Stable-Baselines3).

At every turn a :class:`CandidateSource` proposes ``K`` candidate replies; the agent picks
one (``Discrete(K)``), the underlying env runs it, and the agent observes a fixed-size
feature vector: features of the feedback on the code just judged, then features of each of
the next ``K`` candidates (does it compile, how much does it change the previous code,
hashed tokens of what it adds and removes). The reward is the env's."""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..errors import InfrastructureError
from ..extract import ReasoningMode
from ..feedback import reply_feedback
from ..observation import FEEDBACK_KEYS
from ..tasks import Task

__all__ = [
    "CandidateSource",
    "FeedbackFeatures",
    "candidate_features",
    "hashed_tokens",
    "CandidateChoiceEnv",
    "ERROR_TYPES",
]

#: Exception names told apart in the features; anything else counts as "other".
ERROR_TYPES = (
    "SyntaxError", "IndentationError", "NameError", "TypeError", "ValueError", "AttributeError",
    "KeyError", "IndexError", "AssertionError", "TimeoutError", "ImportError", "ModuleNotFoundError",
)
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+|[^\sA-Za-z0-9_]")


@runtime_checkable
class CandidateSource(Protocol):
    """Proposes ``k`` candidate replies for the current turn of ``task``.

    ``previous_code`` is the code judged last turn ("" at turn 0); ``observation`` is the
    env's latest observation. Implementations must be deterministic given ``rng``.
    """

    def candidates(self, task: Task, observation: Mapping[str, Any], previous_code: str, k: int,
                   rng: np.random.Generator) -> list[str]: ...


def hashed_tokens(text: str, dim: int) -> np.ndarray:
    """Signed feature hashing of code/text tokens into ``dim`` buckets, L2-normalised.

    Stable across processes (BLAKE2, not Python's salted ``hash``).

    >>> v = hashed_tokens("x = x + 1", 8)
    >>> v.shape, round(float(np.linalg.norm(v)), 6)
    ((8,), 1.0)
    """
    vec = np.zeros(dim, dtype=np.float32)
    for token in _TOKEN.findall(text):
        digest = hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        vec[value % dim] += 1.0 if (value >> 63) & 1 else -1.0
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 else vec


class FeedbackFeatures:
    """Features of the latest observation: pass fraction, compile status, error types,
    turn, which feedback is non-empty, and hashed tokens of the feedback texts."""

    def __init__(self, max_turns: int, hash_dim: int = 32) -> None:
        self.max_turns, self.hash_dim = max_turns, hash_dim

    @property
    def size(self) -> int:
        return 3 + len(ERROR_TYPES) + 1 + 3 + self.hash_dim

    def __call__(self, obs: Mapping[str, Any], info: Mapping[str, Any]) -> np.ndarray:
        text = "\n".join(str(obs[k]) for k in FEEDBACK_KEYS)
        errors = [float(name in text) for name in ERROR_TYPES]
        other = float("Error" in text and not any(errors))
        head = [
            float(info.get("pass_fraction", 0.0)),
            float(info.get("compile_ok", 0.0)),
            float(obs["turn"]) / max(self.max_turns + 1, 1),
        ]
        shown = [float(bool(obs[k])) for k in FEEDBACK_KEYS]
        return np.concatenate([np.asarray(head + errors + [other] + shown, np.float32), hashed_tokens(text, self.hash_dim)])


def candidate_features(reply: str, previous_code: str, hash_dim: int = 16,
                       reasoning: ReasoningMode = "strip") -> np.ndarray:
    """Features of one candidate: compiles, size of its change to ``previous_code`` (lines
    added / removed, line-level similarity), relative length, and hashed tokens of the change. The code is the
    one the env judges (its answer's, read with the env's ``reasoning``): a thought's draft is no feature."""
    code, ok, _, _ = reply_feedback(reply, reasoning)
    old_lines, new_lines = previous_code.splitlines(), code.splitlines()
    added, removed = [], []
    for line in difflib.ndiff(old_lines, new_lines):
        if line.startswith("+ "):
            added.append(line[2:])
        elif line.startswith("- "):
            removed.append(line[2:])
    # line-level: a character-level matcher without autojunk is quadratic and dominated every step
    similarity = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).ratio() if previous_code else 0.0
    scale = max(len(old_lines), 1)
    head = [float(ok), len(added) / scale, len(removed) / scale, similarity,
            len(code) / max(len(previous_code), 1) if previous_code else 1.0, float(code.strip() == previous_code.strip())]
    change = hashed_tokens("\n".join(added), hash_dim) - hashed_tokens("\n".join(removed), hash_dim)
    return np.concatenate([np.asarray(head, np.float32), change.astype(np.float32)])


_CANDIDATE_HEAD = 6


class CandidateChoiceEnv(gym.Wrapper[np.ndarray, int, dict[str, Any], str]):
    """Wraps a ConvCodeWorld env: the action picks one of ``k`` candidates; observations are a Box.

    Args:
        env: a ConvCodeWorld env (live or static).
        source: proposes the candidates each turn.
        k: number of candidates (the size of the action space).
        hash_dim, candidate_hash_dim: sizes of the hashed text features.

    ``info["candidates"]`` holds the replies offered for the *next* step, and
    ``info["chosen"]`` the reply the last action picked.

    A step whose run the infrastructure lost (``info["infra_error"]``: lost, also on the executor's own retry)
    has no reward to give, and an on-policy learner cannot leave a step out of its rollout, so the step is taken
    again: the wrapped env is reset to the same task, the episode's earlier replies are stepped again (the
    executor's cache answers them), then the chosen one. ``info["step_replayed"]`` then names the first loss.
    Lost again (or should the replay not retrace the episode), :class:`~convcodeworld_gym.errors.InfrastructureError`
    is raised: a 0 would teach the learner that the reply failed.
    """

    def __init__(self, env: gym.Env, source: CandidateSource, k: int = 4, hash_dim: int = 32,
                 candidate_hash_dim: int = 16) -> None:
        super().__init__(env)
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.source, self.k, self.candidate_hash_dim = source, k, candidate_hash_dim
        max_turns = int(getattr(env.unwrapped, "max_turns", 10))
        self.features = FeedbackFeatures(max_turns, hash_dim)
        size = self.features.size + k * (_CANDIDATE_HEAD + candidate_hash_dim)
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(size,), dtype=np.float32)
        self.action_space = spaces.Discrete(k)
        self._candidates: list[str] = []
        self._previous_code = ""
        self._played: list[str] = []  # the replies stepped so far in this episode (to take a lost step again)
        self._rng = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._previous_code = ""
        self._played = []
        return self._observe(obs, {**info, "pass_fraction": 0.0, "compile_ok": False})

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an int in [0, {self.k}), got {action!r}")
        chosen = self._candidates[int(action)]
        obs, reward, terminated, truncated, info = self.env.step(chosen)
        if info.get("infra_error") is not None:
            obs, reward, terminated, truncated, info = self._step_again(chosen, str(info["infra_error"]))
        self._played.append(chosen)
        self._previous_code = str(obs["code"])
        vec, info = self._observe(obs, info)
        info["chosen"] = chosen
        return vec, float(reward), terminated, truncated, info

    def _step_again(self, chosen: str, lost: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Take a step the infrastructure lost again: reset the wrapped env to the same task, step the episode's
        earlier replies, then ``chosen``. Raises InfrastructureError when that fails (see the class docstring)."""
        task_id = self.env.unwrapped.task.task_id  # type: ignore[attr-defined]

        def fail(why: str) -> InfrastructureError:
            return InfrastructureError(
                f"a step of {task_id} was lost to the infrastructure ({lost}), and taking it again {why}; its reward "
                "is unknown, so the episode cannot go on", task_id, lost)

        self.env.reset(options={"task_id": task_id})
        for turn, reply in enumerate(self._played):
            _, _, terminated, truncated, info = self.env.step(reply)
            if info.get("infra_error") is not None or terminated or truncated:
                raise fail(f"failed at its turn {turn}, replayed ({info.get('infra_error') or info.get('episode_end')})")
        obs, reward, terminated, truncated, info = self.env.step(chosen)
        if info.get("infra_error") is not None:
            raise fail(f"was lost too ({info['infra_error']})")
        return obs, reward, terminated, truncated, {**info, "step_replayed": lost}

    def _observe(self, obs: Mapping[str, Any], info: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
        task: Task = self.env.unwrapped.task  # type: ignore[attr-defined]
        proposed = self.source.candidates(task, obs, self._previous_code, self.k, self._rng)
        if len(proposed) != self.k:
            raise ValueError(f"candidate source returned {len(proposed)} candidates, expected k={self.k}")
        self._candidates = list(proposed)
        parts = [self.features(obs, info)]
        reasoning = getattr(self.env.unwrapped, "reasoning", "strip")
        parts += [candidate_features(c, self._previous_code, self.candidate_hash_dim, reasoning) for c in self._candidates]
        info = dict(info)
        info["candidates"] = list(self._candidates)
        return np.concatenate(parts).astype(np.float32), info

