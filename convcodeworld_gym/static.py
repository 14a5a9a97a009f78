"""ConvCodeBench: replaying a reference model's logged episodes (static, frozen history).

A reference model was played once in ConvCodeWorld and logged (the :mod:`.records` schema).
At turn ``i`` the evaluated model sees the reference's frozen history up to turn ``i-1``
(its code and the feedback on it, verbal feedback included, as logged) and writes code for
turn ``i``, which is executed and rewarded on all tests. The next observation is the
reference's turn ``i``, never the evaluated model's own: nothing is generated, so static
mode makes no verbal-feedback (LLM) calls at all.

The reference log it replays is read and checked by :mod:`.reference`. Like the live env, it offers
``await areset(...)`` / ``await astep(reply)`` with exactly the results of ``reset`` / ``step`` (one code
path, :mod:`.aio`: the judge's run is awaited).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from .aio import Plan, method_call, run_awaited, run_blocking
from .combos import FeedbackConfig
from .env import DEFAULT_MAX_REPLY_CHARS, DEFAULT_MAX_TURNS, ConvCodeWorldEnv
from .errors import InfrastructureError, ReferenceLogError, ResetNeeded
from .feedback.context import VerbalFeedback
from .observation import RENDER_MODES, TEXT_KEYS, check_render_mode, make_observation, render_ansi
from .protocol import actionable
from .records import TurnRecord
from .regressions import TestHistory
from .reference import ReferenceLog, ReferenceSpec, load_reference
from .sandbox import Executor
from .tasks import DatasetSpec, Task, TaskSet, load_tasks

__all__ = ["StaticReplay", "BanditRound", "EPISODE_ENDS"]

#: ``info["episode_end"]`` of a static episode: the evaluated model passed; the reference's
#: log ends because its code passed (at the turn just played, or at turn 0); the turn limit; the
#: infrastructure lost the run of the model's code, also on its retry (``info["infra_error"]``: no verdict).
EPISODE_ENDS = ("passed", "reference_passed", "max_turns", "infra_error")


@dataclass(frozen=True)
class BanditRound:
    """One static turn as a contextual-bandit round.

    Attributes:
        task: the task (the arm's reward is judged on all of its tests).
        turn: the turn the reply is for (1..max_turns).
        history: the reference's frozen turns ``0..turn-1`` (the context).
        observation: the same dict :class:`StaticReplay` shows before this turn.
    """

    task: Task
    turn: int
    history: tuple[TurnRecord, ...]
    observation: Mapping[str, Any]


class StaticReplay(gym.Env[dict[str, Any], str]):
    """ConvCodeBench: the evaluated model writes each turn's code on the reference's frozen history.

    Args:
        feedback: the combination (id part or :class:`FeedbackConfig`); the log's rows of it are replayed.
        log: the reference log (run directory, ``turns.jsonl``, hub id, rows or :class:`ReferenceLog`).
        reference_sample: which of the log's trajectories of each task is the frozen history, in a log of many per
            task (``convcodeworld evaluate --samples N``); default: the one ``log`` names (``<log>#sample=<n>``), else 0.
            The rows of the replay name it (``TurnRecord.reference`` ends in ``#sample=<n>`` when it is not 0).
        dataset, task_ids, stdlib_only, limit: the tasks, as for the live env; only tasks the
            log holds are played (``limit`` counts those), in the dataset's order.
        executor, max_turns, max_reply_chars, render_mode, allow_forgeable: as for :class:`ConvCodeWorldEnv` (an
            :class:`Executor` is shared and never closed; a factory's executor is owned and closed).
        verbal_feedback, simulator_kwargs: accepted so that live and static ids take the same
            kwargs; ignored (no simulator is built or called): static mode shows the logged
            verbal feedback.
        stop_on_pass: end the episode at the model's first pass (default). ``False`` plays on
            while the reference's log does, as the reference's static runs do (each static turn
            is written anew on the reference's history), so the per-turn static Pass@1 is exact;
            ``convcodeworld evaluate`` plays static ids so.
        feedback_style: the style of the (unshown) feedback on the model's own code, logged in
            ``info["judged"]``; the observation shows the reference's logged texts.
        reasoning: how the model's replies are read, as for :class:`ConvCodeWorldEnv` (``"strip"``: a thought's
            draft is never judged; ``"keep"``: the reply as it is).

    ``reset`` shows the task, the reference's turn-0 code and the feedback on it (``turn`` 1).
    ``step(reply)`` is the evaluated model's turn ``i``: executed, rewarded 1.0 iff all tests
    pass. The observation returned is the reference's turn ``i``. The episode ends when the
    model passes (``terminated``, ``episode_end="passed"``), when the reference's code of turn
    ``i`` passed so its log ends (``truncated``, ``"reference_passed"``; a reference that passed
    at turn 0 ends the episode after the model's turn 1), or after turn ``max_turns``
    (``truncated``, ``"max_turns"``, also when the reference passed at that very turn: the
    static metrics give that pass no credit), or when the infrastructure lost the run of the model's
    code (``truncated``, ``"infra_error"``; ``info["infra_error"]`` says why, and the step is no verdict:
    see :meth:`.ConvCodeWorldEnv.step`). ``info["judged"]`` holds the model's own code and the
    (unshown) feedback on it, which :func:`~convcodeworld_gym.records.turn_record` logs.
    ``info["regressed_tests"]`` names the tests one of the model's own programs of this episode passed at an
    earlier turn and this one fails (:mod:`~convcodeworld_gym.regressions`; the reference's turns play no part).

    It is a ``gym.Env`` holding a live env as its judge (rather than a ``gym.Wrapper``), so
    that ``env.unwrapped`` is the static env with its ``config``, ``tasks`` and ``task``.

    >>> import tempfile, gymnasium as gym
    >>> from convcodeworld_gym.wrappers import RecordEpisodes
    >>> log = tempfile.mkdtemp()
    >>> live = RecordEpisodes(gym.make("ConvCodeWorld-CF-EF_full-v0", dataset="humaneval", max_turns=1), log)
    >>> _ = live.reset(options={"task_id": "HumanEval/2"})
    >>> _ = live.step("def truncate_number(number):\\n    return 1.0")  # the reference fails, twice
    >>> _ = live.step("def truncate_number(number):\\n    return 2.0")
    >>> live.close()
    >>> env = gym.make("ConvCodeBench-CF-EF_full-v0", log=log, dataset="humaneval", max_turns=1)
    >>> obs, info = env.reset(options={"task_id": "HumanEval/2"})
    >>> obs["turn"], obs["code"], obs["execution_feedback"].splitlines()[0]
    (1, 'def truncate_number(number):\\n    return 1.0', 'TEST_1')
    >>> obs, reward, terminated, truncated, info = env.step("def truncate_number(number):\\n    return number % 1.0")
    >>> reward, terminated, info["episode_end"], obs["code"]
    (1.0, True, 'passed', 'def truncate_number(number):\\n    return 2.0')
    >>> env.close()
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 1}

    def __init__(
        self,
        feedback: str | FeedbackConfig = "CF-EF_full-SEF",
        log: ReferenceSpec | None = None,
        dataset: DatasetSpec = "bigcodebench",
        *,
        task_ids: Sequence[str] | None = None,
        stdlib_only: bool = False,
        limit: int | None = None,
        executor: Executor | Callable[[], Executor] | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        verbal_feedback: VerbalFeedback | None = None,
        simulator_kwargs: Mapping[str, Any] | None = None,
        max_reply_chars: int = DEFAULT_MAX_REPLY_CHARS,
        render_mode: str | None = None,
        stop_on_pass: bool = True,
        feedback_style: str = "reference",
        allow_forgeable: bool = False,
        reasoning: str = "strip",
        reference_sample: int | None = None,
    ) -> None:
        del verbal_feedback, simulator_kwargs  # static mode shows the logged verbal feedback; nothing is generated
        if log is None:
            raise ReferenceLogError("ConvCodeBench replays a reference log: pass log=<run directory, turns.jsonl, hub id or rows>")
        if not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns must be an int >= 1 for a static replay, got {max_turns!r}")
        self.render_mode = check_render_mode(render_mode)
        self.config = FeedbackConfig.parse(feedback)
        self.reference = load_reference(log, self.config, max_turns, sample=reference_sample)
        self.max_turns = max_turns
        self.stop_on_pass = bool(stop_on_pass)
        tasks = self._select_tasks(load_tasks(dataset), task_ids, stdlib_only, limit)
        # The judge runs the model's code with the same CF/EF; it never has a verbal simulator.
        self._judge = ConvCodeWorldEnv(
            FeedbackConfig(self.config.execution, "none"),
            dataset=tasks,
            executor=executor,
            max_turns=max_turns,
            max_reply_chars=max_reply_chars,
            feedback_style=feedback_style,  # type: ignore[arg-type]
            allow_forgeable=allow_forgeable,
            reasoning=reasoning,  # type: ignore[arg-type]
        )
        self._round_judge: ConvCodeWorldEnv | None = None
        self.tasks: TaskSet = self._judge.tasks
        self.observation_space = self._judge.observation_space
        self.action_space = self._judge.action_space
        self._turn = 0
        self._done = True
        self._judge_done = False
        self._last_obs: dict[str, Any] | None = None
        # the tests the evaluated model's own programs of this episode passed so far: its judge starts afresh when
        # it plays on after a pass (stop_on_pass=False), so the episode's history is kept here
        self._history = TestHistory()

    # ------------------------------------------------------------------ API

    @property
    def task(self) -> Task:
        """The task of the current episode."""
        return self._judge.task

    @property
    def executor(self) -> Executor:
        return self._judge.executor

    @property
    def reasoning(self) -> str:
        """How the model's replies are read (``"strip"`` or ``"keep"``): its judge's."""
        return self._judge.reasoning

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode (task chosen as by the live env: ``task_id``, ``task_index`` or seeded draw)."""
        return run_blocking(self._reset_plan(seed, options))

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """:meth:`reset`, awaited: the same result (the judge's preparation of the task is awaited)."""
        return await run_awaited(self._reset_plan(seed, options))

    def _reset_plan(self, seed: int | None, options: dict[str, Any] | None) -> Plan[tuple[dict[str, Any], dict[str, Any]]]:
        super().reset(seed=seed)
        wanted = (options or {}).get("task_id")
        if wanted is not None and str(wanted) not in self.tasks:
            self.reference.episode(str(wanted))  # a task the log lacks: say so, naming the log
        _, judge_info = yield method_call(self._judge, "reset", seed=seed, options=options)
        self._judge_done = False
        self._history.clear()
        self._turn = 1
        self._done = False
        obs = self._frozen_observation(0)
        info = {
            **judge_info,
            "feedback": self.config.name,
            "reference_log": self.reference.source,
            "reference_turns": len(self.reference.episode(self.task.task_id)),
            "reference_passed_at": self.reference.passed_at(self.task.task_id),
            "feedback_shown": self._feedback_shown(self.reference.episode(self.task.task_id)[0]),
            **self._protocol_facts(self.reference.episode(self.task.task_id)[0]),
        }
        return obs, info

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """The evaluated model's turn (see the class docstring)."""
        return run_blocking(self._step_plan(action))

    async def astep(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """:meth:`step`, awaited: exactly the same result (the judge's run is awaited)."""
        return await run_awaited(self._step_plan(action))

    def _step_plan(self, action: str) -> Plan[tuple[dict[str, Any], float, bool, bool, dict[str, Any]]]:
        if self._done:
            raise ResetNeeded("the episode is over (or never started): call env.reset() before step()")
        turn = self._turn
        task_id = self.task.task_id
        if self._judge_done:  # the model passed earlier and plays on (stop_on_pass=False)
            yield method_call(self._judge, "reset", options={"task_id": task_id})
        judged_obs, reward, judge_terminated, judge_truncated, judge_info = yield method_call(self._judge, "step", action)
        self._judge_done = judge_terminated or judge_truncated
        reference_passed_at = self.reference.passed_at(task_id)
        terminated = bool(judge_info["passed"]) and self.stop_on_pass
        if terminated:
            end = "passed"
        elif judge_info["infra_error"] is not None:  # no verdict on this turn: the episode cannot go on
            end = "infra_error"
        elif turn >= self.max_turns:  # before the reference's pass: one at turn max_turns earns no credit
            end = "max_turns"
        elif reference_passed_at is not None and reference_passed_at <= turn:
            end = "reference_passed"
        else:
            end = None
        truncated = end is not None and not terminated
        self._done = end is not None
        self._turn = turn + 1
        shown = min(turn, len(self.reference.episode(task_id)) - 1)
        obs = self._frozen_observation(shown)
        info = {
            **judge_info,
            "turn": turn,
            "feedback": self.config.name,
            "judged": {key: judged_obs[key] for key in TEXT_KEYS},
            # the model's own programs of this episode (turns 1..): tests one passed that this one fails
            "regressed_tests": self._history.judge(judge_info["tests"], lost=judge_info["infra_error"] is not None),
            "feedback_shown": self._feedback_shown(self.reference.episode(task_id)[shown]),
            "verbal_feedback_source": None,
            "episode_end": end,
            "reference_log": self.reference.source,
            "reference_turn_shown": shown,
            "reference_passed_at": reference_passed_at,
            **self._protocol_facts(self.reference.episode(task_id)[shown]),
        }
        return obs, reward, terminated, truncated, info

    def user_feedback_for(self, code: str) -> str | None:
        """The user's words shown on the reference's turn in view: static mode replays the
        logged feedback, whatever ``code`` (the reference protocol's turn after a compile fix)."""
        del code
        return self._last_obs["verbal_feedback"] if self._last_obs is not None else None

    async def auser_feedback_for(self, code: str) -> str | None:
        """:meth:`user_feedback_for`, for the awaited protocol: the logged words, nothing to wait for."""
        return self.user_feedback_for(code)

    def rounds(self) -> Iterator[BanditRound]:
        """Every static turn of every task as a contextual-bandit round, task by task, turn by turn.

        A round exists for turn ``i`` (1..max_turns) when the reference's turns ``0..i-1`` all
        failed; rounds are independent (a passing reply does not remove later rounds).
        """
        for task in self.tasks:
            episode = self.reference.episode(task.task_id)
            for turn in range(1, self.max_turns + 1):
                if episode[turn - 1].passed:
                    break
                yield BanditRound(task, turn, episode[:turn], self._observation_of(task, episode[turn - 1], turn))

    def judge_own_turn0(self, reply: str) -> tuple[dict[str, Any], float, dict[str, Any]]:
        """Judge the evaluated model's own turn-0 program for the current task, outside the
        episode (a static replay starts at turn 1): ``(obs, reward, info)`` of the judge, with
        ``info["reference_log"]`` set so the row is logged as part of the static run. The
        static MRR credits it (``compensate_init``); the per-turn table does not show it.
        """
        return run_blocking(self._own_turn0_plan(reply))

    async def ajudge_own_turn0(self, reply: str) -> tuple[dict[str, Any], float, dict[str, Any]]:
        """:meth:`judge_own_turn0`, awaited: the same result."""
        return await run_awaited(self._own_turn0_plan(reply))

    def _own_turn0_plan(self, reply: str) -> Plan[tuple[dict[str, Any], float, dict[str, Any]]]:
        judge = self._own_judge()
        yield method_call(judge, "reset", options={"task_id": self.task.task_id})
        obs, reward, _, _, info = yield method_call(judge, "step", reply)
        return obs, float(reward), {**info, "turn": 0, "episode_end": None, "reference_log": self.reference.source}

    def _own_judge(self) -> ConvCodeWorldEnv:
        if self._round_judge is None:
            self._round_judge = ConvCodeWorldEnv(
                FeedbackConfig(self.config.execution, "none"), dataset=self.tasks, executor=self._judge.executor,
                max_turns=self.max_turns, max_reply_chars=self._judge.max_reply_chars, feedback_style=self._judge.feedback_style,
                allow_forgeable=self._judge.allow_forgeable, reasoning=self._judge.reasoning,
            )
        return self._round_judge

    def score(self, round: BanditRound, reply: str) -> float:
        """The reward of ``reply`` in ``round``: 1.0 iff its code passes all the task's tests.

        Uses its own judge on the same executor, so it does not disturb a running episode. One reply at a time: a
        batch of candidates for many contexts is :class:`convcodeworld_gym.bandit.Scorer`'s (all runs together).

        Raises:
            InfrastructureError: the infrastructure lost the run, also on its retry: there is no reward to give
                (a 0 would say the reply failed); leave the round out, or score it again.
        """
        judge = self._own_judge()
        judge.reset(options={"task_id": round.task.task_id})
        _, reward, _, _, info = judge.step(reply)
        if info["infra_error"] is not None:
            raise InfrastructureError(
                f"the run scoring a reply for {round.task.task_id} (turn {round.turn}) was lost to the infrastructure, "
                f"also on its retry ({info['infra_error']}); it has no reward: leave the round out or score it again",
                round.task.task_id, info["infra_error"])
        return float(reward)

    def render(self) -> str | None:
        return render_ansi(self.render_mode, self._last_obs, lambda obs: (
            f"{self.task.task_id} [ConvCodeBench {self.config.name}] reference turn {obs['turn'] - 1}, next turn {obs['turn']}"))

    def close(self) -> None:
        if self._round_judge is not None:
            self._round_judge.close()  # does not own the executor
        self._judge.close()
        super().close()

    # ------------------------------------------------------------- helpers

    def _select_tasks(self, tasks: TaskSet, task_ids: Sequence[str] | None, stdlib_only: bool, limit: int | None) -> TaskSet:
        """The dataset's tasks (subset as asked) that the log holds, in the dataset's order.

        Tasks of the dataset that the log lacks are not played; asking for one by id is an error.
        """
        logged = self.reference.episodes
        if task_ids is not None:
            for task_id in task_ids:
                self.reference.episode(task_id)  # raises, naming the task, when the log lacks it
        chosen = tasks.subset(task_ids=task_ids, stdlib_only=stdlib_only)
        selected = TaskSet(tuple(t for t in chosen if t.task_id in logged), name=f"{chosen.name}/reference")
        if len(selected) == 0:
            raise ReferenceLogError(
                f"none of the {len(chosen)} tasks of {chosen.name!r} is in the reference log {self.reference.source or '(rows)'} "
                f"({len(logged)} tasks, e.g. {', '.join(list(logged)[:3])}); pass the dataset the reference was played on"
            )
        return selected.subset(limit=limit) if limit is not None else selected

    def _observation_of(self, task: Task, row: TurnRecord, next_turn: int) -> dict[str, Any]:
        return make_observation(task.prompt, next_turn, code=row.code, compilation_feedback=row.compilation_feedback,
                                execution_feedback=row.execution_feedback, verbal_feedback=row.verbal_feedback)

    def _frozen_observation(self, reference_turn: int) -> dict[str, Any]:
        row = self.reference.episode(self.task.task_id)[reference_turn]
        obs = self._observation_of(self.task, row, self._turn)
        self._last_obs = obs
        return obs

    def _protocol_facts(self, row: TurnRecord) -> dict[str, Any]:
        """What the reference protocol decides on for the frozen turn ``row`` in view."""
        ef = row.execution_feedback if self._feedback_shown(row)["execution"] else None
        return {
            "shown_compiles": row.compile_ok,
            "actionable": actionable(self.config, passed=row.passed, compile_ok=row.compile_ok, execution_feedback=ef,
                                     verbal_feedback=row.verbal_feedback),
        }

    def _feedback_shown(self, row: TurnRecord) -> dict[str, Any]:
        # EF is shown for every program that compiled (an empty text is a timeout's), and for one
        # that did not when the log holds its text (the reference's style)
        ef_shown = self.config.execution != "none" and (row.compile_ok or bool(row.execution_feedback))
        return {
            "compilation": True,
            "execution": self.config.execution if ef_shown else None,
            "verbal": self.config.verbal if row.verbal_feedback else None,
        }
