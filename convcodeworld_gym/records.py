"""Episode logs: one row per (task, turn), the one schema that live runs write and ConvCodeBench replays.

Logs are JSON-lines files that ``datasets.load_dataset("json", data_files=...)`` reads.
Whole episodes are appended in one write and flushed to disk. An episode is *finished* when its rows are its
turns, each once, in order, and its last row says how it ended (``episode_end``): only finished episodes count
(:func:`split_finished`; the report, the static replay, resuming). A run killed mid-write, or one a full disk
stopped, leaves at most a torn last line and an unfinished episode: readers skip them, and the next writer on the
folder drops them (the episode is played again). One writer holds a run folder at a time
(:class:`RunFolderLock`).

Holds:
    TurnRecord        one turn of one episode (a log row)
    turn_record       the row of one ``env.step``
    EpisodeKey        which episode a row belongs to: ``(feedback, task_id, sample)``
    episode_key       the key of an episode: the one place that says what tells episodes apart
    row_key           the key of the episode a row belongs to
    episode_finished  whether an episode's rows are whole and say how it ended
    split_finished    the rows of finished episodes, and the keys of the unfinished ones
    EpisodeLogWriter  appends whole episodes; drops unfinished ones on open; knows which are done
    RunFolderLock     one run at a time in a folder (a lock the kernel drops with its process)
    make_folder       make an output folder, or a RunFolderError naming what is in the way
    is_secret_name    whether a setting's name says it holds a secret (never written to a run folder)
    valid_text        text as a row stores it and a request sends it: lone surrogates replaced
    read_turns        every row of a log (a run folder, a file, a hub id)
    iter_jsonl        the rows of a JSON-lines file (a torn last line skipped)
    group_episodes    rows by episode, each sorted by turn
    TURNS_FILE        ``turns.jsonl``
    METADATA_FILE     ``metadata.json``
    LOCK_FILE         the folder's lock file
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import shlex
import socket
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import RunFolderBusy, RunFolderError, RunLogError
from .observation import TEXT_KEYS

try:  # POSIX: the kernel drops a flock with the last descriptor of its process
    import fcntl
except ImportError:  # pragma: no cover - Windows: no folder lock
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "TurnRecord",
    "turn_record",
    "EpisodeKey",
    "episode_key",
    "row_key",
    "episode_finished",
    "split_finished",
    "EpisodeLogWriter",
    "RunFolderLock",
    "make_folder",
    "is_secret_name",
    "valid_text",
    "read_turns",
    "iter_jsonl",
    "group_episodes",
    "TURNS_FILE",
    "METADATA_FILE",
    "LOCK_FILE",
]

_log = logging.getLogger(__name__)

#: File name of the turn log inside a run directory.
TURNS_FILE = "turns.jsonl"
#: File name of the run's settings (versions, dataset, policy, seed) inside a run directory.
METADATA_FILE = "metadata.json"
#: The lock file of a run folder (:class:`RunFolderLock`): who holds it (pid, host, start, command).
LOCK_FILE = ".convcodeworld.lock"


@dataclass(frozen=True)
class TurnRecord:
    """One turn of one episode.

    Attributes:
        feedback: the combination's id part, e.g. ``"CF-EF_full-SNF"``.
        task_id, turn: which task and which submission (0 = first program).
        sample: which of the run's trajectories of this task and combination (0, 1, ... ``samples - 1``:
            ``convcodeworld evaluate --samples N``); 0 in a run of one trajectory per task. A keyword-only field, kept
            next to ``task_id`` in a written row (it is part of the episode's key: :func:`episode_key`).
        reply: the policy's raw reply; ``code``: the code extracted from it.
        compilation_feedback, execution_feedback, verbal_feedback: the texts shown after this
            turn ("" when not shown).
        compile_ok, passed, reward, pass_fraction: the truth about this turn's code (all tests).
        tests: per-test ``{"name", "outcome", "traceback"}``.
        episode_end: ``"passed"``, ``"max_turns"``, or ``""`` while the episode goes on.
        verbal_feedback_source: which simulator spoke (``""`` if none).
        policy: the policy's name; ``usage``: token counts and latency of the policy call.
        timings: seconds spent per stage (measurements; not part of a record's identity).
        reference: for ConvCodeBench (static replay) rows, the reference log that was replayed
            (a path or hub id); ``""`` for live rows.
        model_calls: the policy's calls that wrote this turn's program: 1 on every turn of the
            ``always`` protocol; under the reference protocol 0 for code carried over (nothing
            to act on), more than 1 with compile fixes inside the turn. ``usage`` and the
            ``policy_s`` timing add up all of them.
        infra_error: ``""``, or why the infrastructure lost this turn's run, also on its retry
            (``info["infra_error"]``): the turn is no verdict (``passed`` False, ``reward`` 0.0 mean
            nothing), its episode ends there, and the metrics leave the episode out
            (:mod:`~convcodeworld_gym.runs.log_scores`).
        regressed_tests: the tests a program of an earlier turn of the episode passed and this one fails
            (``info["regressed_tests"]``, :mod:`~convcodeworld_gym.regressions`); ``convcodeworld report`` gives the
            share of episodes with one.
        canary: the task is a canary twin (``info["canary"]``, :mod:`~convcodeworld_gym.tasks.canary`): its row
            counts towards the canary pass rate, never towards Pass@1, MRR or Recall.
        perturbation: on a task the env perturbed (``perturb=``, :mod:`~convcodeworld_gym.tasks.perturb`), the swap and
            whether this program followed it (``info["perturbation"]``: ``{"kind", "seed", "tests", "followed"}``);
            ``{}`` otherwise. The feedback texts of the row are the perturbed copy's, ``passed`` and ``reward`` the
            task's own; ``followed`` counts beside the scores, never in them.
        reasoning: the reasoning the endpoint returned apart from the reply of the call whose reply this row judged
            (``reasoning_content``: :attr:`~convcodeworld_gym.policies.PolicyReply.reasoning`); ``""`` when none. Never
            judged: ``code`` comes from ``reply`` alone (a thought inside ``reply`` is removed before, under the env's
            ``reasoning="strip"``).
    """

    feedback: str
    task_id: str
    sample: int = field(default=0, kw_only=True)
    turn: int
    reply: str
    code: str
    compilation_feedback: str
    execution_feedback: str
    verbal_feedback: str
    compile_ok: bool
    passed: bool
    reward: float
    pass_fraction: float
    tests: list[dict[str, str]] = field(default_factory=list)
    episode_end: str = ""
    verbal_feedback_source: str = ""
    policy: str = ""
    usage: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict, compare=False)
    reference: str = ""
    model_calls: int = 1
    infra_error: str = ""
    regressed_tests: list[str] = field(default_factory=list)
    canary: bool = False
    reasoning: str = ""
    perturbation: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> TurnRecord:
        """Build from a row (unknown keys are ignored, missing optional ones defaulted; a None where a field has a
        default is missing too: ``datasets`` fills a column that older rows of a log lack with None)."""
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in row.items() if k in fields and not (v is None and _has_default(fields[k]))})


def _has_default(spec: Any) -> bool:
    """Whether a dataclass field has a default (a value or a factory)."""
    return spec.default is not MISSING or spec.default_factory is not MISSING


def turn_record(
    *,
    feedback: str,
    reply: str,
    obs: Mapping[str, Any],
    reward: float,
    info: Mapping[str, Any],
    policy: str = "",
    usage: Mapping[str, float] | None = None,
    policy_s: float | None = None,
    model_calls: int = 1,
    reasoning: str | None = None,
    sample: int = 0,
) -> TurnRecord:
    """The row for one ``env.step(reply)`` that returned ``obs, reward, info``.

    The code and feedback texts come from ``obs``, unless ``info["judged"]`` holds them (the
    keys ``code``, ``compilation_feedback``, ``execution_feedback``, ``verbal_feedback``): a
    static replay's observation is the reference's frozen turn, while its row records the
    evaluated model's own code and the (unshown) feedback on it. ``info["reference_log"]``,
    when present, fills :attr:`TurnRecord.reference`. ``reasoning``: the reasoning the endpoint returned apart from
    ``reply`` (kept in the row, never judged). ``sample``: which of the task's trajectories the episode is
    (:attr:`TurnRecord.sample`).
    """
    texts = {**{k: obs[k] for k in TEXT_KEYS}, **dict(info.get("judged") or {})}
    timings = info.get("timings")
    timing_dict = {k: float(v) for k, v in asdict(timings).items()} if timings is not None else {}
    if policy_s is not None:
        timing_dict["policy_s"] = float(policy_s)
    return TurnRecord(
        feedback=feedback,
        task_id=str(info["task_id"]),
        sample=int(sample),
        turn=int(info["turn"]),
        reply=reply,
        code=str(texts["code"]),
        compilation_feedback=str(texts["compilation_feedback"]),
        execution_feedback=str(texts["execution_feedback"]),
        verbal_feedback=str(texts["verbal_feedback"]),
        compile_ok=bool(info["compile_ok"]),
        passed=bool(info["passed"]),
        reward=float(reward),
        pass_fraction=float(info["pass_fraction"]),
        tests=[dict(t) for t in info["tests"]],
        episode_end=str(info.get("episode_end") or ""),
        verbal_feedback_source=str(info.get("verbal_feedback_source") or ""),
        policy=policy,
        usage={k: float(v) for k, v in (usage or {}).items()},
        timings=timing_dict,
        reference=str(info.get("reference_log") or ""),
        model_calls=int(model_calls),
        infra_error=str(info.get("infra_error") or ""),
        regressed_tests=[str(name) for name in info.get("regressed_tests") or ()],
        canary=bool(info.get("canary", False)),
        reasoning=str(reasoning or ""),
        perturbation=dict(info.get("perturbation") or {}),
    )


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: each lone surrogate replaced by U+FFFD, a surrogate pair joined into its character;
    ``text`` itself when it holds none (the usual case: one encode). A model's reply goes through it before it is
    stored or sent on: a ``str`` may hold a lone surrogate (``"\\ud800"`` is valid JSON, and a reply can carry one)
    that no UTF-8 file or request body can.

    >>> valid_text("ok \\ud800 then \\ud83d\\ude00") == "ok \\ufffd then \\U0001f600"
    True
    >>> valid_text("plain")
    'plain'
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


#: A setting whose name ends in one of these (``api_key``, ``hf_token``, ``password``) holds a secret; other names
#: with these words inside (``max_tokens``, ``return_token_ids``, ``key_order``) do not.
_SECRET_NAME = re.compile(r"(?:^|[_\-])(?:api[_\-]?key|key|token|secret|password|passwd|authorization|auth|credentials?)$",
                          re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether a setting named ``name`` holds a secret (its value is never written to a run folder).

    >>> [n for n in ("api_key", "OPENAI_API_KEY", "--api-key", "hf_token", "password", "max_tokens",
    ...              "return_token_ids", "keywords", "monkey") if is_secret_name(n)]
    ['api_key', 'OPENAI_API_KEY', '--api-key', 'hf_token', 'password']
    """
    return bool(_SECRET_NAME.search(name.lstrip("-")))


EpisodeKey = tuple[str, str, int]

#: The key fields at the start of a row as :class:`EpisodeLogWriter` writes it (``TurnRecord``'s field order).
_TORN_KEY = re.compile(r'^\{"feedback": "((?:[^"\\]|\\.)*)", "task_id": "((?:[^"\\]|\\.)*)"(?:, "sample": (\d+))?')


def episode_key(feedback: str, task_id: str, sample: int = 0) -> EpisodeKey:
    """The key of one episode of a run: its combination, its task and which of the task's trajectories it is (its
    sample: ``convcodeworld evaluate --samples N`` plays N of each). Every reader and writer of logs groups rows and
    tells episodes apart by it (:func:`row_key`), so an episode gains a part here and nowhere else.

    >>> episode_key("CF", "HumanEval/0"), episode_key("CF", "HumanEval/0", 3)
    (('CF', 'HumanEval/0', 0), ('CF', 'HumanEval/0', 3))
    """
    return (str(feedback), str(task_id), int(sample))


def row_key(row: TurnRecord | Mapping[str, Any]) -> EpisodeKey:
    """:func:`episode_key` of the episode a row (a :class:`TurnRecord` or a log's dict) belongs to; a row without
    ``sample`` (written before rows carried one, or None where ``datasets`` filled the column) is sample 0."""
    if isinstance(row, Mapping):
        return episode_key(row["feedback"], row["task_id"], row.get("sample") or 0)
    return episode_key(row.feedback, row.task_id, row.sample)


def _get(row: TurnRecord | Mapping[str, Any], name: str, default: Any = None) -> Any:
    return row.get(name, default) if isinstance(row, Mapping) else getattr(row, name, default)


def episode_finished(turns: Sequence[TurnRecord | Mapping[str, Any]]) -> bool:
    """Whether ``turns`` (one episode's rows, in the log's order) are a finished episode: numbered from 0 (or from 1:
    a static replay without its own turn 0) up by one, each once, the last saying how the episode ended
    (``episode_end``). A run cut short (a kill, a full disk, a crash) leaves an episode that is not.

    >>> row = lambda turn, end="": {"feedback": "CF", "task_id": "t", "turn": turn, "episode_end": end}
    >>> episode_finished([row(0), row(1, "max_turns")]), episode_finished([row(0), row(1)])
    (True, False)
    >>> episode_finished([row(0), row(1, "passed"), row(0), row(1, "passed")])  # written twice
    False
    """
    if not turns:
        return False
    numbers = [int(_get(row, "turn", -1)) for row in turns]
    first = numbers[0]
    return first in (0, 1) and numbers == list(range(first, first + len(numbers))) and bool(_get(turns[-1], "episode_end"))


def split_finished(rows: Iterable[TurnRecord]) -> tuple[list[TurnRecord], list[EpisodeKey]]:
    """``(rows of finished episodes, keys of unfinished ones)``: the rows in their order, the keys in the order their
    episodes first appear. What counts is only a finished episode (:func:`episode_finished`); an unfinished one is
    played again by the next ``convcodeworld evaluate`` on its folder."""
    rows = list(rows)
    groups: dict[EpisodeKey, list[TurnRecord]] = {}
    for row in rows:
        groups.setdefault(row_key(row), []).append(row)
    unfinished = [key for key, turns in groups.items() if not episode_finished(turns)]
    if not unfinished:
        return rows, []
    left = set(unfinished)
    return [row for row in rows if row_key(row) not in left], unfinished


def _json_problem(exc: json.JSONDecodeError | UnicodeDecodeError) -> str:
    """What is wrong with one line, in words (``json``'s ``"... starting at"`` messages read on with the column)."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.start + 1})"
    return f"not valid JSON: {exc.msg.removesuffix(' starting at')}, column {exc.colno}"


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Rows of a JSON-lines file; a torn (unparsable, unterminated) *last* line is skipped, any other bad line raises.

    Raises:
        RunLogError: a line that is not a JSON object (names the file, the line and what is wrong with it).
    """
    for _, _, row in _numbered_rows(path):
        yield row


def _numbered_rows(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    """``(line number, raw line, row)`` of every row of a JSON-lines file (as :func:`iter_jsonl` reads it)."""
    with open(path, "rb") as fh:
        lines = fh.readlines()
    for number, line in enumerate(lines, start=1):
        row = _parse_line(path, number, line, last=number == len(lines))
        if row is not None:
            yield number, line, row


def _parse_line(path: str | os.PathLike[str], number: int, line: bytes, *, last: bool) -> dict[str, Any] | None:
    """One line of a JSON-lines file as a dict; None for a blank line and for a torn last line."""
    if not line.strip():
        return None
    try:
        row = json.loads(line.decode("utf-8").rstrip("\r\n"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        if last and not line.endswith(b"\n"):
            return None  # an interrupted append
        raise RunLogError(f"{path}, line {number}: {_json_problem(exc)}; the file is corrupt there: fix that line or "
                          "delete it (a turn log's episode that loses a row is played again by the next evaluate "
                          "on its folder)") from None
    if not isinstance(row, dict):
        raise RunLogError(f"{path}, line {number}: a JSON {type(row).__name__}, not an object (a row); fix or delete "
                          "that line")
    return row


def _check_row(path: str | os.PathLike[str], number: int, row: Mapping[str, Any]) -> None:
    """A log row names its episode (:func:`row_key`), else :class:`~.errors.RunLogError` names the line."""
    missing = [name for name in ("feedback", "task_id", "turn") if name not in row]
    if missing:
        raise RunLogError(f"{path}, line {number}: a row without {', '.join(missing)}: not a turn log's row (this "
                          "package's runs write them); fix or delete that line, or pass the log of a run")


def _turn_of(path: str | os.PathLike[str], number: int, row: Mapping[str, Any]) -> TurnRecord:
    _check_row(path, number, row)
    try:
        return TurnRecord.from_dict(row)
    except TypeError as exc:
        raise RunLogError(f"{path}, line {number}: not a turn log's row ({exc}); fix or delete that line, or pass the "
                          "log of a run") from None


class RunFolderLock:
    """One run at a time in a folder: an exclusive ``flock`` on ``<folder>/.convcodeworld.lock``, which says who holds
    it (pid, host, start time, command; a secret option's value masked). The kernel drops the lock with the process
    that holds it, so a killed run leaves no folder stuck. Within one process the folder's holds are counted, so the
    runner and the log writer it opens may both hold it.

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with RunFolderLock(folder) as held:
    ...     sorted(held.holder)
    ['command', 'host', 'pid', 'started']

    Raises:
        RunFolderBusy: another process holds the folder (the message names it).
        RunFolderError: the folder cannot be made or written (a file is in the way, no permission, read-only).
    """

    _held: dict[str, list[Any]] = {}  # real path -> [descriptor, holds] in this process
    _guard = threading.Lock()

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self._key: str | None = None
        make_folder(self.folder)
        key = os.path.realpath(self.folder)
        with self._guard:
            entry = self._held.get(key)
            if entry is not None and entry[2] == os.getpid():
                entry[1] += 1
            else:
                self._held[key] = [self._take(), 1, os.getpid()]
            self._key = key
        self.holder = _read_holder(self.folder / LOCK_FILE) or {}

    def _take(self) -> int:
        path = self.folder / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise _folder_error(self.folder, exc) from None
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                holder = _read_holder(path)
                raise RunFolderBusy(
                    f"{self.folder} is in use by another run ({_describe_holder(holder)}); wait for it to end, or pass "
                    "another --out folder (two runs in one folder would play every episode twice)", holder or {}) from None
            except OSError as exc:  # a filesystem without flock (some network mounts): go on, unguarded, and say so
                _log.warning("%s cannot be locked (%s): make sure no other run writes to this folder meanwhile",
                             self.folder, exc.strerror or exc)
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "command": shlex.join(_masked_argv(sys.argv))}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(holder) + "\n").encode("utf-8", "replace"), 0)
        except OSError as exc:
            os.close(fd)
            raise _folder_error(self.folder, exc) from None
        return fd

    def release(self) -> None:
        """Let go of this hold (the lock itself once the process's last hold goes). Idempotent."""
        key, self._key = self._key, None
        if key is None:
            return
        with self._guard:
            entry = self._held.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] <= 0:
                del self._held[key]
                if entry[2] == os.getpid():
                    os.close(entry[0])  # drops the flock

    def __enter__(self) -> RunFolderLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _masked_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of every secret option (``--api-key X``, ``--api-key=X``) masked.

    >>> _masked_argv(["evaluate", "--api-key", "sk-1", "--max-tokens", "16", "--hf-token=abc"])
    ['evaluate', '--api-key', 'REDACTED', '--max-tokens', '16', '--hf-token=REDACTED']
    """
    out: list[str] = []
    mask_next = False
    for arg in argv:
        if mask_next:
            out.append("REDACTED")
            mask_next = False
            continue
        name, sep, _ = arg.partition("=")
        if arg.startswith("-") and is_secret_name(name):
            out.append(f"{name}=REDACTED" if sep else arg)
            mask_next = not sep
        else:
            out.append(arg)
    return out


def _read_holder(path: Path) -> dict[str, Any] | None:
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def _describe_holder(holder: Mapping[str, Any] | None) -> str:
    """``pid 123 on host h since 2026-12-06T10:00:00+00:00: <command>`` (what a lock file says of its holder)."""
    if not holder:
        return "its pid, host and command not written yet"
    return (f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')} since {holder.get('started', '?')}: "
            f"{holder.get('command', '?')}")


def make_folder(folder: Path) -> None:
    """Make ``folder`` (and its parents) for a run to write in.

    Raises:
        RunFolderError: a file stands where it would be, or it cannot be made (the message names it and the fix).
    """
    if folder.exists() and not folder.is_dir():
        raise RunFolderError(f"{folder} is a file, not a folder; pass a folder as --out (a new one, or the folder of "
                             "the run to resume)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _folder_error(folder, exc) from None


def _folder_error(folder: Path, exc: OSError) -> RunFolderError:
    if isinstance(exc, FileExistsError) or isinstance(exc, NotADirectoryError):
        return RunFolderError(f"{folder}: a file stands in its path ({exc.filename}); pass a folder as --out")
    return RunFolderError(f"cannot write in {folder} ({exc.strerror or exc}); pass an --out folder you can write in")


class EpisodeLogWriter:
    """Appends whole episodes to ``<run_dir>/turns.jsonl``; knows which episodes are done.

    Each episode is one ``write`` followed by ``fsync``; a write that fails (a full disk) is cut off again, so the
    log holds whole episodes only. On open, the writer holds the folder (:class:`RunFolderLock`) and drops what a
    run cut short left: a torn last line and every unfinished episode (:func:`episode_finished`), counted in
    ``repaired`` (their keys) so that they are played again. ``done`` holds the keys (:func:`episode_key`) of the
    finished episodes. Text a row cannot hold in UTF-8 (a lone surrogate) is written as U+FFFD.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> with EpisodeLogWriter(d) as w:
    ...     w.write_episode([{"feedback": "CF", "task_id": "t/0", "turn": 0, "episode_end": "passed"}])
    >>> EpisodeLogWriter(d).done == {("CF", "t/0", 0)}
    True

    Raises:
        RunFolderBusy: another run holds the folder.
        RunFolderError: the folder cannot be made or written.
        RunLogError: a line other than the last is not a JSON row.
    """

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)
        self._lock = RunFolderLock(self.run_dir)
        self.path = self.run_dir / TURNS_FILE
        self.done: set[EpisodeKey] = set()
        self.repaired: list[EpisodeKey] = []
        self._fd: int | None = None
        try:
            self._repair()
        except BaseException:
            self._lock.release()
            raise

    def _repair(self) -> None:
        """Keep the finished episodes' lines; drop a torn last line and every unfinished episode (the log rewritten
        atomically, only when there is something to drop)."""
        if not self.path.exists():
            return
        with open(self.path, "rb") as fh:
            lines = fh.readlines()
        groups: dict[EpisodeKey, list[tuple[bytes, dict[str, Any]]]] = {}
        torn: bytes | None = None
        for number, line in enumerate(lines, start=1):
            row = _parse_line(self.path, number, line, last=number == len(lines))
            if row is None:
                torn = line if line.strip() else torn
                continue
            _check_row(self.path, number, row)
            groups.setdefault(row_key(row), []).append((line if line.endswith(b"\n") else line + b"\n", row))
        self.done = {key for key, group in groups.items() if episode_finished([row for _, row in group])}
        self.repaired = [key for key in groups if key not in self.done]
        if torn is not None:  # the start of an episode's write: its key, where the torn line still holds it
            found = _TORN_KEY.search(torn.decode("utf-8", "replace"))
            # a sample the line lost is -1: unknown, so no finished episode is taken for it
            key = (episode_key(json.loads(f'"{found[1]}"'), json.loads(f'"{found[2]}"'),
                               int(found[3]) if found[3] is not None else -1) if found else episode_key("", "", -1))
            if key not in self.repaired:
                self.repaired.append(key)
            self.done.discard(key)
        if torn is None and not self.repaired and (not lines or lines[-1].endswith(b"\n")):
            return
        kept = b"".join(line for key, group in groups.items() if key in self.done for line, _ in group)
        tmp = self.path.with_name(self.path.name + ".repair")
        with open(tmp, "wb") as fh:
            fh.write(kept)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def write_episode(self, rows: Iterable[TurnRecord | Mapping[str, Any]]) -> None:
        """Append every turn of one finished episode, atomically with respect to interruption and a full disk.

        Raises:
            ValueError: the rows are not one finished episode (:func:`episode_finished`): write an episode once it
                is over.
            OSError: the write failed (a full disk; its ``filename`` is the log): nothing of the episode is kept.
        """
        dicts = [r.to_dict() if isinstance(r, TurnRecord) else dict(r) for r in rows]
        if not dicts:
            return
        keys = {row_key(d) for d in dicts}
        if len(keys) != 1 or not episode_finished(dicts):
            raise ValueError(f"not one finished episode: rows of {sorted(keys)}, turns {[d.get('turn') for d in dicts]}, "
                             f"the last ending {dicts[-1].get('episode_end')!r}; write an episode once it is over")
        payload = valid_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in dicts)).encode("utf-8")
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        start = os.fstat(self._fd).st_size
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(self._fd, view):]
            os.fsync(self._fd)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, start)  # no part of the episode stays
            except OSError:
                pass
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None
        self.done.add(keys.pop())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._lock.release()

    def __enter__(self) -> EpisodeLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_turns(source: str | os.PathLike[str]) -> list[TurnRecord]:
    """Every row of a log: a run directory, a ``turns.jsonl`` file (read as JSON lines: a torn last line is skipped),
    or a Hugging Face hub dataset id (through ``datasets``). Unfinished episodes are among the rows:
    :func:`split_finished` tells them apart.

    Raises:
        RunLogError: a line of a local log is not a JSON row (names the file and the line).
    """
    path = Path(source)
    if path.is_dir():
        path = path / TURNS_FILE
    if path.exists():
        return [_turn_of(path, number, row) for number, _, row in _numbered_rows(path)]
    import datasets

    ds = datasets.load_dataset(str(source), split="train")
    return [TurnRecord.from_dict(row) for row in ds]


def group_episodes(rows: Iterable[TurnRecord]) -> dict[EpisodeKey, list[TurnRecord]]:
    """Rows grouped by episode (:func:`row_key`), each group sorted by turn."""
    groups: dict[EpisodeKey, list[TurnRecord]] = {}
    for row in rows:
        groups.setdefault(row_key(row), []).append(row)
    for group in groups.values():
        group.sort(key=lambda r: r.turn)
    return groups
