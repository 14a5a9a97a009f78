"""TRL's ``environment_factory`` door: one ConvCodeWorld episode per rollout, played through one tool.

``GRPOTrainer(environment_factory=ConvCodeWorldTools)`` makes one :class:`ConvCodeWorldTools` per rollout (TRL
pools them and resets them between batches), calls :meth:`~ConvCodeWorldTools.reset` with the rollout's dataset
row, exposes :meth:`~ConvCodeWorldTools.submit_program` to the model as its only tool (its type hints and
docstring are the tool's schema), and scores the rollout with :meth:`~ConvCodeWorldTools.get_reward`. Each call
of the tool is one ConvCodeWorld turn: the program is compiled and tested, and the tool's answer is the feedback
the env's id shows (compilation, execution, the simulated user's words), in the words the LLM policy sees them
(:func:`~convcodeworld_gym.policies.prompts.feedback_sections`). Tool results are masked out of the loss by TRL.

Use this door for models trained to call tools; use :func:`convcodeworld_gym.training.grpo.make_rollout_func` (the
``rollout_func`` door) for the paper's chat format, where feedback comes back as a user turn (docs/training.md says
when to use which).

A run the infrastructure lost (``info["infra_error"]``: the sandbox's worker died from outside, twice) says
nothing about the program: the tool says so, the episode ends, and :meth:`~ConvCodeWorldTools.get_reward` returns
None, which TRL counts as unscorable (left out of its group's baseline, advantage 0), never as a 0.

Each episode's result is public without being a tool: :attr:`~ConvCodeWorldTools.result` (a property: TRL makes
tools of functions only, as its own environment classes expose ``reward``) holds the rows of the programs judged
(:class:`~convcodeworld_gym.records.TurnRecord`: pass fraction, per-test outcomes, feedback), their count and the last
step's ``info``. TRL hands reward functions the rollouts' environment instances (``environments=``), so an extra
reward or a logger reads ``[env.result.pass_fraction for env in environments]``.

Canary twins (docs/canary.md) play as any task: build the rows and the tools on a set with twins in it, e.g.
``tasks = with_canaries(load_tasks("humaneval"), 0.1, seed=0)`` (the rows tell a twin by its ``task_id``,
``HumanEval/3/canary``, so a twin can be played beside its task; ``replace=True`` works too). A twin's reward is
always 0.0; whether a program passed its tests is the canary (:attr:`EpisodeResult.canary_passed`).
:func:`report_canary`, listed in ``reward_funcs``, logs the twins' pass rate of each batch beside the reward with TRL's
``log_metric`` (``canary/pass_rate``, ``canary/episodes``: the names the ``rollout_func`` door's
:func:`~convcodeworld_gym.training.grpo.env_reward` logs under), never in it.

A model that answers with a fenced code block instead of a ``submit_program`` call submitted nothing: its reward is
0.0, and :class:`NoSubmissionWarning` says so (once per process, under Python's default warning filter). Off by
default, :func:`submit_code_blocks` gives such a block the effect of the tool call: listed in ``reward_funcs``, it
submits the final reply of each rollout whose episode is still open and whose reply holds a fenced block, before TRL
reads the env's reward.

This module imports neither TRL nor torch: TRL imports it.

Holds:
    ConvCodeWorldTools   the environment class for ``environment_factory``
    EpisodeResult        what one episode gave: the rows of its programs, the last step's info, the reward
    submit_code_blocks   the reward function that gives a reply's fenced code block the effect of a tool call
    report_canary        the reward function that logs the batch's canary pass rate (scores nothing)
    NoSubmissionWarning  a rollout ended without submitting a program
    tool_rows            the dataset rows (prompt + task id + task set) of a task set for it
    tool_answer          what the tool answers on one step (shared with the verifiers door's tool variant)
    SUBMIT_PROGRAM_TOOL  the tool's schema as an OpenAI ``tools`` entry
    TOOL_SYSTEM_PROMPT   the system message those rows carry
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from ..policies.prompts import feedback_sections
from ..records import TurnRecord, turn_record
from ..registration import LIVE_IDS
from ..sandbox import Executor
from ..tasks import DEFAULT_DATASET, DatasetSpec, Task, TaskSet, is_canary, load_tasks  # noqa: F401 - load_tasks: doctests
from .grpo import canary_pass_rate
from .shared import shared_executor, task_set

__all__ = ["ConvCodeWorldTools", "EpisodeResult", "submit_code_blocks", "report_canary", "NoSubmissionWarning",
           "tool_rows", "tool_answer", "SUBMIT_PROGRAM_TOOL", "TOOL_SYSTEM_PROMPT"]

#: The id a factory called with no arguments plays.
DEFAULT_ID = "ConvCodeWorld-CF-EF_full-v0"

TOOL_SYSTEM_PROMPT = (
    "You are an expert Python programmer. Solve the user's task by calling the submit_program tool with a "
    "complete, self-contained Python program. The tool runs the task's tests and answers with feedback; when "
    "the tests fail, fix the program and submit it again."
)


def tool_rows(tasks: Iterable[Task]) -> list[dict[str, Any]]:
    """One dataset row per task for ``GRPOTrainer(environment_factory=...)``: ``prompt`` (a system message and the
    task's instruction), ``task_id`` (which :meth:`ConvCodeWorldTools.reset` reads) and ``task_set`` (the name of the
    task set the rows come from, e.g. ``"humaneval"``: :meth:`ConvCodeWorldTools.reset` names it when the tools play
    another set). Build the tools on the same set: ``functools.partial(ConvCodeWorldTools, env_id, dataset=tasks)``.

    >>> from convcodeworld_gym.tasks import load_tasks
    >>> row = tool_rows(load_tasks("humaneval", limit=1))[0]
    >>> row["task_id"], row["task_set"], [m["role"] for m in row["prompt"]]
    ('HumanEval/0', 'humaneval', ['system', 'user'])
    """
    name = _root_name(tasks.name) if isinstance(tasks, TaskSet) else "custom"
    return [{"prompt": [{"role": "system", "content": TOOL_SYSTEM_PROMPT},
                        {"role": "user", "content": task.prompt.strip()}],
             "task_id": task.task_id, "task_set": name} for task in tasks]


def _root_name(name: str) -> str:
    """The name of the task set a subset was cut from (``"humaneval/limit3"`` -> ``"humaneval"``)."""
    return name.split("/", 1)[0]


#: The ``submit_program`` tool as an OpenAI chat-completions ``tools`` entry: the schema transformers renders from
#: :meth:`ConvCodeWorldTools.submit_program` (its ``return`` left out; tested), for doors whose client sends the schema itself (verifiers).
SUBMIT_PROGRAM_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "submit_program",
        "description": "Submit a complete Python program for the task: it is compiled and run against the task's tests.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string",
                                    "description": "the complete, self-contained Python program (imports included)."}},
            "required": ["code"],
        },
    },
}


def tool_answer(observation: Mapping[str, Any], info: Mapping[str, Any], *, terminated: bool, left: int) -> str:
    """What the ``submit_program`` tool answers on one step: the feedback the id shows (compilation, execution, the
    user's words, as the LLM policy sees them), then whether the tests pass and how many more programs are judged
    (``left``; 0: the episode is over). A run the infrastructure lost (``info["infra_error"]``) is said to be no
    verdict.

    >>> tool_answer({}, {"infra_error": None}, terminated=True, left=0)
    'All tests pass. The episode is over.'
    """
    lost = info.get("infra_error")
    if lost:
        return f"The sandbox lost this run ({lost}); that is no verdict on the program. The episode is over."
    if terminated:
        return "All tests pass. The episode is over."
    parts = feedback_sections(observation) or ["The tests fail."]
    if left > 0:
        parts.append(f"Not all tests pass. Fix the program and submit it again ({left} more allowed).")
    else:
        parts.append("Not all tests pass, and that was the last submission allowed: the episode is over.")
    return "\n\n".join(parts)


class NoSubmissionWarning(UserWarning):
    """A rollout ended without a ``submit_program`` call: its reward is 0.0 whatever its reply said."""


#: What :class:`NoSubmissionWarning` says: one text, so that Python's default filter shows it once per process.
NO_SUBMISSION = ("a rollout submitted no program (no submit_program tool call), so its reward is 0.0; a reply's fenced "
                 "code block is no submission unless submit_code_blocks is among the reward functions: "
                 "GRPOTrainer(..., reward_funcs=[convcodeworld_gym.training.tools.submit_code_blocks])")


@dataclass(frozen=True)
class EpisodeResult:
    """What one :class:`ConvCodeWorldTools` episode gave so far (a snapshot: later programs do not change it).

    Attributes:
        task_id: the episode's task (None before the first reset).
        reward: :meth:`ConvCodeWorldTools.get_reward`'s value: 1.0 passed, 0.0 not (yet), None lost to the
            infrastructure; always 0.0 on a canary twin.
        rows: one :class:`~convcodeworld_gym.records.TurnRecord` per program judged (its code, feedback, pass
            fraction and per-test outcomes), in order.
        info: the last step's ``info`` (``{}`` before the first program).
        canary: the task is a canary twin (docs/canary.md).
    """

    task_id: str | None
    reward: float | None
    rows: tuple[TurnRecord, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict)
    canary: bool = False

    @property
    def canary_passed(self) -> bool | None:
        """For a canary twin's episode with a verdict, whether a program passed the twin's tests (False when none was
        submitted); None on a real task, or when the infrastructure lost a run (no verdict). The canary: counted by
        :func:`report_canary`, never in the reward."""
        if not self.canary or self.reward is None:
            return None
        return any(row.passed for row in self.rows)

    @property
    def turns(self) -> int:
        """How many programs were judged (0: the rollout submitted none)."""
        return len(self.rows)

    @property
    def pass_fraction(self) -> float | None:
        """The fraction of the task's tests the last program passed (0.0 when none was submitted); None when the
        infrastructure lost its run (no verdict)."""
        if self.reward is None:
            return None
        return self.rows[-1].pass_fraction if self.rows else 0.0


class ConvCodeWorldTools:
    """One ConvCodeWorld episode per rollout, for TRL's ``environment_factory``.

    ``ConvCodeWorldTools()`` plays :data:`DEFAULT_ID` on the env's default task set (BigCodeBench); another id or task
    set comes through a picklable partial (what ``AsyncGRPOTrainer`` needs), e.g.
    ``functools.partial(ConvCodeWorldTools, "ConvCodeWorld-CF-EF_partial-SNF-v0", dataset="humaneval")``. The rows
    must come from the task set the tools play (``tool_rows(tasks)`` with ``dataset=tasks``): a row of another set
    fails at its :meth:`reset`, naming both sets and that fix.
    Construction is cheap (TRL makes one per rollout): the env is made at the first :meth:`reset`, task sets named
    by a string are loaded once per process, and all instances of a process share one sandbox executor unless
    ``executor=`` is given (closed at the process's exit).

    Args:
        env_id: one of the nine ``ConvCodeWorld-...-v0`` ids.
        dataset: the task set (a name, a path, or a :class:`~convcodeworld_gym.tasks.TaskSet`); None: the env's.
        executor: the executor to run programs on; None: the process's shared one.
        **env_kwargs: further keyword arguments of the id (``max_turns``, ``simulator_kwargs``, ...).

    Only :meth:`submit_program` is public besides :meth:`reset` and :meth:`get_reward`: TRL makes every other public
    method a tool. The episode's result is the property :attr:`result` (no tool: TRL lists functions only).

    >>> env = ConvCodeWorldTools(dataset="humaneval")
    >>> env.reset(task_id="HumanEval/0", prompt=[]) is None
    True
    >>> "All tests pass" in env.submit_program(load_tasks("humaneval")["HumanEval/0"].ground_truth), env.get_reward()
    (True, 1.0)
    >>> env.result.turns, env.result.pass_fraction, env.result.info["passed"]
    (1, 1.0, True)
    """

    def __init__(self, env_id: str = DEFAULT_ID, *, dataset: DatasetSpec | None = None, executor: Executor | None = None,
                 **env_kwargs: Any) -> None:
        if env_id not in LIVE_IDS:
            raise ValueError(f"env_id {env_id!r} is not a ConvCodeWorld id; use one of: {', '.join(LIVE_IDS)}")
        self._env_id, self._dataset, self._executor, self._env_kwargs = env_id, dataset, executor, env_kwargs
        self._env: gym.Env | None = None
        self._active = False  # reset was called and the episode has not ended
        self._reward: float | None = 0.0
        self._left = 0  # submissions still allowed
        self._task_id: str | None = None
        self._canary = False
        self._rows: list[TurnRecord] = []
        self._info: Mapping[str, Any] = {}

    def reset(self, **row: Any) -> None:
        """Start the episode of the row's task (``task_id``; :func:`tool_rows` makes such rows). Returns None: the
        row's prompt already holds the task.

        Raises:
            ValueError: the row has no ``task_id``; or its task is not in the task set these tools play (rows of one
                set, tools of another: the message names both and how to build the tools on the rows' set). With no
                ``dataset=`` (BigCodeBench), a row of another set fails before anything is loaded.
        """
        task_id = row.get("task_id")
        if not isinstance(task_id, str):
            raise ValueError("a ConvCodeWorldTools dataset row needs a 'task_id' (str); build the rows with "
                             "convcodeworld_gym.training.tools.tool_rows(tasks)")
        if self._dataset is None and not task_id.startswith("BigCodeBench/"):  # the default set holds no other id
            raise self._mismatch(task_id, row.get("task_set"), f"{DEFAULT_DATASET!r} (the default: no dataset= given)")
        env = self._make_env()
        tasks = env.unwrapped.tasks
        if task_id not in tasks and task_id not in tasks.left_out:  # a left-out task raises its own reason below
            raise self._mismatch(task_id, row.get("task_set"), f"{tasks.name!r} ({len(tasks)} tasks)")
        env.reset(options={"task_id": task_id})
        self._active, self._reward = True, 0.0
        self._left = env.unwrapped.max_turns + 1
        self._task_id, self._rows, self._info = task_id, [], {}
        self._canary = is_canary(env.unwrapped.task)
        return None

    def submit_program(self, code: str) -> str:
        """Submit a complete Python program for the task: it is compiled and run against the task's tests.

        Args:
            code: the complete, self-contained Python program (imports included).

        Returns:
            The feedback on the program: whether all tests pass, and otherwise what the compiler, the tests and the
            user said about it.
        """
        if self._env is None or not self._active:
            return "The episode is over: no more programs are judged."
        observation, reward, terminated, truncated, info = self._env.step(str(code))
        self._left -= 1
        self._info = info
        self._rows.append(turn_record(feedback=self._env.unwrapped.config.name, reply=str(code), obs=observation,
                                      reward=float(reward), info=info, policy="trl-tools"))
        lost = info.get("infra_error")
        if lost:
            self._active, self._reward = False, None
        else:
            self._reward = float(reward)
            self._active = not (terminated or truncated)
        return tool_answer(observation, info, terminated=terminated, left=self._left if self._active else 0)

    def get_reward(self) -> float | None:
        """1.0 when a submitted program passed all tests, else 0.0 (always 0.0 on a canary twin); None when the infrastructure lost a run (no
        verdict: TRL leaves the rollout out of its group's baseline instead of counting a 0). An episode that was
        reset and got no program is 0.0, and :class:`NoSubmissionWarning` says why (it names the switch
        :func:`submit_code_blocks`)."""
        if self._task_id is not None and not self._rows:
            warnings.warn(NO_SUBMISSION, NoSubmissionWarning, stacklevel=2)
        return self._reward

    @property
    def result(self) -> EpisodeResult:
        """The episode so far: its task, reward, the rows of the programs judged and the last step's info."""
        return EpisodeResult(self._task_id, self._reward, tuple(self._rows), dict(self._info), self._canary)

    @property
    def accepts_submission(self) -> bool:
        """Whether a program submitted now would be judged: the episode was reset and has not ended."""
        return self._env is not None and self._active

    def _mismatch(self, task_id: str, row_set: Any, played: str) -> ValueError:
        """The error of a row whose task is not in the task set these tools play: both sets, and the fix."""
        rows = f"task set {row_set!r}" if isinstance(row_set, str) else "another task set"
        return ValueError(
            f"the dataset row's task {task_id!r} comes from {rows}, but these ConvCodeWorldTools play task set "
            f"{played}: build the tools on the rows' task set, environment_factory=functools.partial("
            f"ConvCodeWorldTools, {self._env_id!r}, dataset=tasks) with train_dataset=tool_rows(tasks)")

    def _make_env(self) -> gym.Env:
        if self._env is None:
            kwargs = dict(self._env_kwargs)
            if self._dataset is not None:
                kwargs["dataset"] = task_set(self._dataset)
            self._env = gym.make(self._env_id, executor=self._executor or shared_executor(), **kwargs)
        return self._env


def _final_reply(completion: Any) -> str:
    """The text of a completion's last assistant message, unless it called a tool ("" then); a text completion as
    it is."""
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion)):
        if message.get("role") == "assistant":
            if message.get("tool_calls"):
                return ""
            content = message.get("content")
            if isinstance(content, list):  # content blocks
                return "".join(str(block.get("text", "")) for block in content if isinstance(block, Mapping))
            return str(content or "")
    return ""


def submit_code_blocks(completions: Sequence[Any], environments: Sequence[Any] | None = None,
                       **_: Any) -> list[float | None]:
    """A reward function that gives a reply's fenced code block the effect of a ``submit_program`` call (off unless
    listed in ``reward_funcs``): for each rollout whose :class:`ConvCodeWorldTools` episode still takes a program and
    whose final reply (the last assistant message, with no tool call) holds a fenced block, the reply is submitted
    (one turn: the env extracts the block as it does from any reply), so the env's reward counts it. It scores
    nothing itself (None for every rollout; TRL logs its column as nan and leaves it out of the sum).

    TRL (1.16) calls synchronous reward functions in the order of ``reward_funcs`` and the env's ``get_reward`` after
    them, so the submission is judged before the env's reward is read::

        GRPOTrainer(..., environment_factory=ConvCodeWorldTools, reward_funcs=[submit_code_blocks])

    Raises:
        ValueError: called without ``environments`` (not by a trainer with ``environment_factory``).
    """
    if environments is None:
        raise ValueError("submit_code_blocks reads TRL's environments: use it with "
                         "GRPOTrainer(environment_factory=ConvCodeWorldTools, reward_funcs=[submit_code_blocks])")
    for completion, env in zip(completions, environments):
        if isinstance(env, ConvCodeWorldTools) and env.accepts_submission:
            reply = _final_reply(completion)
            if "```" in reply:
                env.submit_program(reply)
    return [None] * len(completions)


def report_canary(completions: Sequence[Any], environments: Sequence[Any] | None = None,
                  log_metric: Callable[[str, float], None] | None = None, **_: Any) -> list[float | None]:
    """A reward function that reports the batch's canary pass rate beside the reward (docs/canary.md): of the rollouts
    whose :class:`ConvCodeWorldTools` episode played a canary twin (with a verdict), the share in which a program passed
    the twin's tests, logged with TRL's ``log_metric`` as ``canary/pass_rate`` and ``canary/episodes``
    (:func:`~convcodeworld_gym.training.grpo.canary_pass_rate`; nothing is logged for a batch without twins). It scores
    nothing (None for every rollout: TRL logs its column as nan and leaves it out of the sum), so the rate is never in
    the reward. List it after :func:`submit_code_blocks` when both are used (TRL calls them in order), so the
    submissions it makes are counted::

        GRPOTrainer(..., environment_factory=ConvCodeWorldTools, reward_funcs=[submit_code_blocks, report_canary])

    Raises:
        ValueError: called without ``environments`` (not by a trainer with ``environment_factory``).
    """
    if environments is None:
        raise ValueError("report_canary reads TRL's environments: use it with "
                         "GRPOTrainer(environment_factory=ConvCodeWorldTools, reward_funcs=[report_canary])")
    canary_pass_rate((env.result.canary_passed for env in environments if isinstance(env, ConvCodeWorldTools)),
                     log_metric)
    return [None] * len(completions)
