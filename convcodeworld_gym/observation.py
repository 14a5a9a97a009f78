"""The observation every convcodeworld-gym env shows: its keys, its space, how one is built,
and its text render. The live env, the static replay, the episode records, the
candidate-choice wrapper and the CLI take the field names from here.

An observation is a dict: ``task`` (the instruction), ``code`` (the code judged last),
``compilation_feedback``, ``execution_feedback`` and ``verbal_feedback`` (``""`` when not
shown), and ``turn`` (index of the next submission).

Holds:
    Observation         the observation's ``TypedDict``
    OBSERVATION_KEYS    every key, in order
    TEXT_KEYS           the texts about the code judged: the code and the three feedbacks
    FEEDBACK_KEYS       the three feedback texts
    observation_space   the ``Dict`` space of an env with ``max_turns`` feedback turns
    make_observation    build one observation
    render_observation  the ANSI text of one observation under a header line
    RENDER_MODES        the render modes every env supports
    check_render_mode   the ``render_mode`` argument, checked
    render_ansi         what ``env.render()`` returns, for either env
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # the space is built on demand, so the records and scoring need no Gymnasium
    from gymnasium import spaces

__all__ = ["Observation", "OBSERVATION_KEYS", "TEXT_KEYS", "FEEDBACK_KEYS", "observation_space", "make_observation", "render_observation",
           "RENDER_MODES", "check_render_mode", "render_ansi"]

FEEDBACK_KEYS: tuple[str, ...] = ("compilation_feedback", "execution_feedback", "verbal_feedback")
TEXT_KEYS: tuple[str, ...] = ("code", *FEEDBACK_KEYS)
OBSERVATION_KEYS: tuple[str, ...] = ("task", *TEXT_KEYS, "turn")


class Observation(TypedDict):
    """One observation of a convcodeworld-gym env (live or static replay); its keys are
    :data:`OBSERVATION_KEYS`, in that order.

    Attributes:
        task: the instruction (the task's prompt).
        code: the code judged last (``""`` before the first submission).
        compilation_feedback: the compiler's text on ``code`` (``""`` before the first submission).
        execution_feedback: the test results on ``code``; ``""`` when the combination shows none.
        verbal_feedback: the simulated user's words; ``""`` when the combination shows none.
        turn: index of the next submission (0 after reset; at most ``max_turns + 1``).
    """

    task: str
    code: str
    compilation_feedback: str
    execution_feedback: str
    verbal_feedback: str
    turn: int


def observation_space(max_turns: int, max_chars: int | None = None) -> spaces.Dict:
    """The space of every observation of an env with ``max_turns`` feedback turns (``turn``
    runs to ``max_turns + 1``, the index after the last submission); each text holds at
    most ``max_chars`` characters (default :data:`~convcodeworld_gym.spaces.MAX_TEXT_CHARS`).

    >>> space = observation_space(10)
    >>> sorted(space.keys()) == sorted(OBSERVATION_KEYS), int(space["turn"].n)
    (True, 12)
    """
    from gymnasium import spaces

    from .spaces import MAX_TEXT_CHARS, UnicodeText

    text = UnicodeText(MAX_TEXT_CHARS if max_chars is None else max_chars)
    return spaces.Dict({**{key: text for key in ("task", *TEXT_KEYS)}, "turn": spaces.Discrete(max_turns + 2)})


def make_observation(task: str, turn: int, *, code: str = "", compilation_feedback: str = "", execution_feedback: str = "",
                     verbal_feedback: str = "") -> Observation:
    """One observation; texts not shown are ``""``.

    >>> make_observation("Add.", 0)
    {'task': 'Add.', 'code': '', 'compilation_feedback': '', 'execution_feedback': '', 'verbal_feedback': '', 'turn': 0}
    """
    return {
        "task": task,
        "code": code,
        "compilation_feedback": compilation_feedback,
        "execution_feedback": execution_feedback,
        "verbal_feedback": verbal_feedback,
        "turn": turn,
    }


def render_observation(header: str, observation: Mapping[str, Any]) -> str:
    """``=== header ===`` then a ``--- key ---`` section per shown text (the task alone when
    none is shown yet).

    >>> print(render_observation("t/0", make_observation("Add.", 1, code="x = 1")), end="")
    === t/0 ===
    --- code ---
    x = 1
    """
    parts = [f"=== {header} ==="]
    parts += [f"--- {key} ---\n{observation[key]}" for key in TEXT_KEYS if observation.get(key)]
    if len(parts) == 1:
        parts.append(str(observation["task"]))
    return "\n".join(parts) + "\n"


#: The render modes of both envs (``metadata["render_modes"]``).
RENDER_MODES = ("ansi",)


def check_render_mode(render_mode: str | None) -> str | None:
    """``render_mode`` itself when it is ``None`` or one of :data:`RENDER_MODES`; else a ``ValueError`` naming it.

    >>> check_render_mode("human")
    Traceback (most recent call last):
    ...
    ValueError: render_mode must be None or 'ansi', got 'human'
    """
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
    return render_mode


def render_ansi(render_mode: str | None, observation: Mapping[str, Any] | None,
                header: Callable[[Mapping[str, Any]], str]) -> str | None:
    """What ``render()`` of an env returns: ``None`` unless ``render_mode`` is ``"ansi"``, a note when no
    episode has started (``observation`` is ``None``), else :func:`render_observation` under ``header(observation)``.

    >>> render_ansi("ansi", None, str)
    '(no episode: call reset())\\n'
    >>> render_ansi(None, make_observation("Add.", 0), str) is None
    True
    """
    if render_mode != "ansi":
        return None
    if observation is None:
        return "(no episode: call reset())\n"
    return render_observation(header(observation), observation)
