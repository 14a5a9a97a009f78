"""convcodeworld-gym: Gymnasium environments for ConvCodeWorld and ConvCodeBench.

Importing the package registers the ids ``ConvCodeWorld-<combination>-v0`` (live) and
``ConvCodeBench-<combination>-v0`` (static replay of a reference log, ``log=``):

>>> import gymnasium as gym, convcodeworld_gym
>>> env = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset="humaneval")
>>> obs, info = env.reset(seed=0)
>>> sorted(obs)
['code', 'compilation_feedback', 'execution_feedback', 'task', 'turn', 'verbal_feedback']
>>> env.close()
"""

from .reference import ReferenceLog, load_reference
from .static import BanditRound, StaticReplay
from .combos import ALL_CONFIGS, FeedbackConfig
from .env import OBSERVATION_KEYS, ConvCodeWorldEnv
from .errors import (
    ConvCodeWorldError,
    DatasetError,
    ExecutorError,
    FeedbackUnavailable,
    LeftOutTaskError,
    ReferenceLogError,
    MalformedRecordError,
    ResetNeeded,
    SimulatorError,
    UnknownTaskError,
)
from .extract import build_program, extract_code
from .registration import BENCH_IDS, LIVE_IDS, PAPER_BENCH_IDS, env_id, register_envs
from .sandbox import ExecutionResult, Executor, Limits, LocalExecutor, Outcome, SandboxExecutor
from .tasks import Task, TaskSet, load_tasks, with_canaries
from .wrappers import RecordEpisodes

__version__ = "0.1.0"

__all__ = [
    "ConvCodeWorldEnv",
    "OBSERVATION_KEYS",
    "FeedbackConfig",
    "ALL_CONFIGS",
    "LIVE_IDS",
    "BENCH_IDS",
    "PAPER_BENCH_IDS",
    "StaticReplay",
    "ReferenceLog",
    "load_reference",
    "BanditRound",
    "RecordEpisodes",
    "env_id",
    "register_envs",
    "Task",
    "TaskSet",
    "load_tasks",
    "with_canaries",
    "extract_code",
    "build_program",
    "Executor",
    "LocalExecutor",
    "SandboxExecutor",
    "Limits",
    "ExecutionResult",
    "Outcome",
    "ConvCodeWorldError",
    "DatasetError",
    "MalformedRecordError",
    "UnknownTaskError",
    "LeftOutTaskError",
    "FeedbackUnavailable",
    "ExecutorError",
    "ResetNeeded",
    "ReferenceLogError",
    "SimulatorError",
]

register_envs()
