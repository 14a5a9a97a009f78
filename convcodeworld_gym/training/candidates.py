"""Candidate sources for :class:`~convcodeworld_gym.training.choice.CandidateChoiceEnv` and repair strategies.

Two sources of ``K`` candidate replies per turn:

* :class:`SyntheticCandidates` (SYNTHETIC, offline, no model): the candidates are *repair
  strategies* applied to the bugs of the code judged last turn, built with the synthetic
  coder's machinery (:func:`~convcodeworld_gym.policies.synthetic.inject_bugs`,
  :func:`~convcodeworld_gym.policies.synthetic.apply_mutations`). The pool is designed to
  hold a learnable signal: a ``repair`` is a small edit that compiles, ``keep`` changes
  nothing, ``regress`` edits several places and adds bugs, ``garbage`` does not compile.
  Its numbers are no claim about any model.
* :class:`LLMCandidates`: ``K`` samples of a chat model from one ``n=K`` request
  (:class:`~convcodeworld_gym.policies.llm.OpenAIPolicy`, its prompts)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..observation import make_observation
from ..policies.base import fenced
from ..policies.llm import OpenAIPolicy
from ..policies.synthetic import Mutation, SyntheticCoder, apply_mutations, inject_bugs
from ..records import TurnRecord
from ..tasks import Task

__all__ = ["STRATEGIES", "POOL", "BugState", "replayed_state", "apply_strategy", "program", "SyntheticCandidates", "LLMCandidates"]

#: Repair strategies. ``repair`` removes one bug (or the breakage); ``keep`` resends the code;
#: ``regress`` adds ``regress_bugs`` compiling bugs; ``garbage`` breaks the program so that it
#: no longer compiles; ``resample`` starts over: the ground truth with 0..``resample_bugs`` new bugs.
STRATEGIES = ("repair", "keep", "regress", "garbage", "resample")
#: The strategies :class:`SyntheticCandidates` proposes by default.
POOL = ("repair", "keep", "regress", "garbage")
_BREAK = "\nresult = (\n"  # appended by ``garbage``: an unclosed parenthesis, a SyntaxError


@dataclass(frozen=True)
class BugState:
    """A synthetic program: the ground truth with ``bugs`` applied, made uncompilable when ``broken``."""

    bugs: tuple[Mutation, ...] = ()
    broken: bool = False

    @property
    def correct(self) -> bool:
        return not self.bugs and not self.broken


def program(task: Task, state: BugState) -> str:
    """The program text of ``state`` for ``task`` (the ground truth verbatim when correct)."""
    code = apply_mutations(task.solution_code, state.bugs)
    return code.rstrip("\n") + _BREAK if state.broken else code


def _seeded(rng: np.random.Generator) -> random.Random:
    """A :class:`random.Random` drawn from ``rng`` (the synthetic helpers take one)."""
    return random.Random(int(rng.integers(0, 2**63 - 1)))


def _more_bugs(task: Task, state: BugState, count: int, rng: np.random.Generator) -> BugState:
    """``state`` with up to ``count`` new compiling bugs (fewer when the program has few sites)."""
    pool = inject_bugs(task.solution_code, _seeded(rng), len(state.bugs) + count + 3)
    new = [m for m in pool if m.kind != "syntax_slip" and m not in state.bugs][:count]
    return replace(state, bugs=state.bugs + tuple(new))


def apply_strategy(name: str, task: Task, state: BugState, rng: np.random.Generator, regress_bugs: int = 2,
                   resample_bugs: int = 2) -> BugState:
    """The bug state after strategy ``name`` (one of :data:`STRATEGIES`) on ``state``.

    ``repair`` mends the breakage first, else removes one bug drawn with ``rng``; on a
    correct program it is ``keep``.

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> task = load_tasks("humaneval")["HumanEval/0"]
    >>> start = BugState((Mutation("flip_comparison", 0),), broken=True)
    >>> rng = np.random.default_rng(0)
    >>> apply_strategy("repair", task, start, rng) == BugState(start.bugs)
    True
    >>> apply_strategy("repair", task, apply_strategy("repair", task, start, rng), rng).correct
    True
    >>> len(apply_strategy("regress", task, start, rng).bugs), apply_strategy("garbage", task, BugState(), rng).broken
    (3, True)
    >>> apply_strategy("resample", task, start, rng).broken
    False
    """
    if name == "keep":
        return state
    if name == "repair":
        if state.broken:
            return replace(state, broken=False)
        if not state.bugs:
            return state
        drop = int(rng.integers(len(state.bugs)))
        return replace(state, bugs=state.bugs[:drop] + state.bugs[drop + 1:])
    if name == "regress":
        return _more_bugs(task, state, regress_bugs, rng)
    if name == "garbage":
        return replace(state, broken=True)
    if name == "resample":
        count = int(rng.integers(0, resample_bugs + 1))
        return BugState(tuple(inject_bugs(task.solution_code, _seeded(rng), count)))
    raise ValueError(f"unknown repair strategy {name!r}; choose one of {', '.join(STRATEGIES)}")


def replayed_state(coder: SyntheticCoder, task: Task, feedback: str, seed: int, history: Sequence[TurnRecord]) -> BugState:
    """The bugs of the last turn of ``history``, logged by ``coder`` playing ``task`` with ``seed``.

    Replays the coder's episode on the logged observations (the coder is deterministic given
    them) and checks that it rebuilds the logged code.

    Raises:
        ValueError: the replayed code differs from the log: the log was not written by this
            coder (same strength and ``max_bugs``) with this ``seed`` and combination.
    """
    episode = coder.start(task, feedback=feedback, seed=seed)
    episode.act(make_observation(task.prompt, 0))
    for row in history[:-1]:
        episode.act(make_observation(task.prompt, row.turn + 1, code=row.code, compilation_feedback=row.compilation_feedback,
                                     execution_feedback=row.execution_feedback, verbal_feedback=row.verbal_feedback))
    state = BugState(tuple(episode.bugs))  # type: ignore[attr-defined]
    if program(task, state).strip() != history[-1].code.strip():
        raise ValueError(
            f"{task.task_id} turn {history[-1].turn}: replaying {coder.name} with seed {seed} under {feedback} does not "
            "rebuild the logged code; pass the strength, max_bugs and seed the reference log was recorded with"
        )
    return state


class SyntheticCandidates:
    """SYNTHETIC offline :class:`~convcodeworld_gym.training.choice.CandidateSource`: ``k`` repair strategies per turn.

    At turn 0 (``previous_code`` it did not propose, e.g. ``""``) the episode's bugs are drawn:
    1..``max_bugs`` of them. Each turn it proposes ``strategies`` (default :data:`POOL`) in a
    cycle (``k`` of them: ``k=2`` is repair and keep; ``k>4`` repeats them with fresh draws),
    applied to the bug state of ``previous_code``, in an order shuffled with ``rng``.
    Deterministic given ``rng``. ``last_strategies`` names the strategy of each candidate of
    the latest call (for analysis; an agent must not see it).

    Args:
        max_bugs: most bugs an episode starts with (>= 1).
        regress_bugs: bugs a ``regress`` candidate adds (>= 1).
        strategies: the strategies proposed, from :data:`STRATEGIES`.
    """

    def __init__(self, max_bugs: int = 3, regress_bugs: int = 2, strategies: tuple[str, ...] = POOL) -> None:
        if max_bugs < 1:
            raise ValueError(f"max_bugs must be >= 1, got {max_bugs}")
        if regress_bugs < 1:
            raise ValueError(f"regress_bugs must be >= 1, got {regress_bugs}")
        unknown = [name for name in strategies if name not in STRATEGIES]
        if unknown or not strategies:
            raise ValueError(f"strategies {list(strategies)}: give one or more of {', '.join(STRATEGIES)}")
        self.max_bugs, self.regress_bugs, self.strategies = max_bugs, regress_bugs, tuple(strategies)
        self._states: dict[tuple[str, str], BugState] = {}
        self.last_strategies: list[str] = []

    def start_state(self, task: Task, rng: np.random.Generator) -> BugState:
        """The bugs of a fresh episode: 1..``max_bugs`` drawn with ``rng``."""
        count = int(rng.integers(1, self.max_bugs + 1))
        return BugState(tuple(inject_bugs(task.solution_code, _seeded(rng), count)))

    def state_of(self, task: Task, code: str) -> BugState | None:
        """The bug state of a program this source proposed for ``task``, or None."""
        return self._states.get((task.task_id, code.strip()))

    def candidates(self, task: Task, observation: Mapping[str, Any], previous_code: str, k: int,
                   rng: np.random.Generator) -> list[str]:
        """``k`` fenced programs, one per strategy (see the class docstring)."""
        current = self.state_of(task, previous_code) if previous_code else None
        if current is None:
            self._states = {key: s for key, s in self._states.items() if key[0] != task.task_id}
            current = self.start_state(task, rng)
        names = [self.strategies[i % len(self.strategies)] for i in range(k)]
        order = rng.permutation(k)
        replies = []
        self.last_strategies = []
        for i in order:
            state = apply_strategy(names[i], task, current, rng, self.regress_bugs)
            code = program(task, state)
            self._states[(task.task_id, code.strip())] = state
            replies.append(fenced(code))
            self.last_strategies.append(names[i])
        return replies


class LLMCandidates:
    """:class:`~convcodeworld_gym.training.choice.CandidateSource` of ``k`` chat-model samples from one ``n=k`` request.

    The prompt is the policy's own (:meth:`OpenAIPolicy.turn_messages`: the task at turn 0,
    else the previous code and this turn's feedback). A ``seed`` drawn from ``rng`` is sent
    with the request, so endpoints that honour it are reproducible. An endpoint that returns
    fewer than ``k`` choices (one that ignores ``n``) is asked again for the rest. Give the
    policy a ``temperature`` above 0, or the ``k`` samples tend to be one program ``k`` times.
    """

    def __init__(self, policy: OpenAIPolicy, max_requests: int = 4) -> None:
        self.policy, self.max_requests = policy, max_requests

    def candidates(self, task: Task, observation: Mapping[str, Any], previous_code: str, k: int,
                   rng: np.random.Generator) -> list[str]:
        messages = self.policy.turn_messages(observation)
        replies: list[str] = []
        for _ in range(self.max_requests):
            replies += self.policy.sample(messages, k - len(replies), seed=int(rng.integers(0, 2**31 - 1)))
            if len(replies) >= k:
                return replies[:k]
        raise ValueError(
            f"LLM endpoint {self.policy.base_url} returned {len(replies)} of the k={k} candidates in "
            f"{self.max_requests} requests; use an endpoint that supports n>1 or a smaller k"
        )
