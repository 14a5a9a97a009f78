"""Loading BigCodeBench-schema records with ``datasets``: from the hub or a local file."""

from __future__ import annotations

import ast
import contextlib
import gzip
import json
import os
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..errors import DatasetError, MalformedRecordError
from .record import TEST_CLASS, Task, test_method_names

__all__ = [
    "BIGCODEBENCH_ENV",
    "BIGCODEBENCH_HUB_ID",
    "BIGCODEBENCH_SPLIT",
    "REQUIRED_FIELDS",
    "load_bigcodebench",
    "load_task_file",
    "record_to_task",
    "hub_unreachable",
    "DEFAULT_DATASET",
]

#: Environment variable naming a local copy of BigCodeBench (``.jsonl``, ``.jsonl.gz`` or ``.parquet``).
BIGCODEBENCH_ENV = "CONVCODEWORLD_BIGCODEBENCH_PATH"
BIGCODEBENCH_HUB_ID = "bigcode/bigcodebench"
BIGCODEBENCH_SPLIT = "v0.1.0_hf"
#: The task set ``gym.make``, ``convcodeworld evaluate`` and ``convcodeworld demo`` take when none is given.
DEFAULT_DATASET = "bigcodebench"

#: Fields every record must carry as non-empty strings.
REQUIRED_FIELDS = ("task_id", "instruct_prompt", "code_prompt", "canonical_solution", "test", "entry_point")

_SUFFIXES = {".jsonl": "json", ".json": "json", ".gz": "json", ".parquet": "parquet"}


def record_to_task(record: Mapping[str, Any], *, source: str, path: str, line: int) -> Task:
    """Validate one BigCodeBench-schema record and build a :class:`Task`.

    Raises:
        MalformedRecordError: naming ``path``, ``line`` and the offending field.
    """
    for name in REQUIRED_FIELDS:
        value = record.get(name)
        if not isinstance(value, str) or not value.strip():
            got = "missing" if value is None else f"{type(value).__name__} {str(value)[:40]!r}"
            raise MalformedRecordError(path, line, name, f"expected a non-empty string, got {got}")
    test = record["test"]
    if not test_method_names(test):
        raise MalformedRecordError(
            path, line, "test", f"must define class {TEST_CLASS}(unittest.TestCase) with at least one test* method"
        )
    entry_point = record["entry_point"]
    if f"def {entry_point}" not in record["code_prompt"]:
        raise MalformedRecordError(path, line, "code_prompt", f"does not contain 'def {entry_point}'")
    return Task(
        task_id=record["task_id"],
        prompt=record["instruct_prompt"],
        code_prompt=record["code_prompt"],
        entry_point=entry_point,
        canonical_solution=record["canonical_solution"],
        test=test,
        libs=_parse_libs(record.get("libs"), path, line),
        source=source,
    )


def _parse_libs(raw: Any, path: str, line: int) -> tuple[str, ...]:
    if raw is None or raw == "":
        return ()
    if isinstance(raw, str):
        try:
            raw = ast.literal_eval(raw)
        except (ValueError, SyntaxError) as exc:
            raise MalformedRecordError(path, line, "libs", f"not a Python list literal: {exc}") from None
    if not isinstance(raw, (list, tuple)) or not all(isinstance(x, str) for x in raw):
        raise MalformedRecordError(path, line, "libs", "expected a list of module names")
    return tuple(raw)


def _records_from_dataset(rows: Iterable[Mapping[str, Any]], *, source: str, path: str) -> tuple[Task, ...]:
    tasks = tuple(record_to_task(row, source=source, path=path, line=i) for i, row in enumerate(rows, start=1))
    seen: set[str] = set()
    for i, task in enumerate(tasks, start=1):
        if task.task_id in seen:
            raise MalformedRecordError(path, i, "task_id", f"duplicate id {task.task_id!r}")
        seen.add(task.task_id)
    return tasks


def _find_bad_json_line(path: Path) -> tuple[int, str] | None:
    """Scan a JSON-lines file for the first line that is not a JSON object."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
        for number, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                value = json.loads(text.rstrip("\r\n"))
            except json.JSONDecodeError as exc:
                return number, f"not valid JSON ({exc.msg.removesuffix(' starting at')}, column {exc.colno})"
            if not isinstance(value, dict):
                return number, f"expected a JSON object, got {type(value).__name__}"
    return None


def load_task_file(path: str | os.PathLike[str], *, source: str | None = None) -> tuple[Task, ...]:
    """Load every task of a local file in the BigCodeBench schema, through ``datasets``.

    Accepts ``.jsonl``, ``.jsonl.gz``, ``.json`` and ``.parquet``. The result is cached per
    (path, size, mtime), so repeated environment construction does not reload.

    Raises:
        DatasetError: the file is missing or has an unsupported suffix.
        MalformedRecordError: a record is malformed (names file, line and field).
    """
    p = Path(path).expanduser().resolve()
    if not p.is_file():
        raise DatasetError(f"task file {str(path)!r} does not exist; pass an existing .jsonl, .jsonl.gz or .parquet path")
    if p.suffix not in _SUFFIXES:
        raise DatasetError(f"task file {str(path)!r}: unsupported suffix {p.suffix!r}; use .jsonl, .jsonl.gz, .json or .parquet")
    stat = p.stat()
    return _load_task_file_cached(str(p), stat.st_size, stat.st_mtime_ns, source or f"file:{p.name}")


@lru_cache(maxsize=16)
def _load_task_file_cached(path: str, size: int, mtime_ns: int, source: str) -> tuple[Task, ...]:
    import datasets  # heavy import, deferred

    builder = _SUFFIXES[Path(path).suffix]
    if size == 0 or (builder == "json" and _holds_no_line(Path(path))):
        raise DatasetError(f"task file {path!r} is empty: it holds no task; pass a file with one task per line "
                           "(the BigCodeBench schema: task_id, instruct_prompt, code_prompt, canonical_solution, test, ...)")
    try:
        with _datasets_quiet(datasets):  # its progress bar and its own error log would come before our one line
            ds = datasets.load_dataset(builder, data_files=path, split="train")
    except Exception as exc:  # datasets wraps parse errors in several types
        if builder == "json":
            bad = _find_bad_json_line(Path(path))
            if bad is not None:
                raise MalformedRecordError(path, bad[0], "<record>", bad[1]) from None
        cause = str(exc) or str(exc.__cause__ or "") or type(exc).__name__
        raise DatasetError(f"could not read task file {path!r} with datasets ({cause.splitlines()[0]}); check that it "
                           "is a .jsonl, .json or .parquet file of tasks in the BigCodeBench schema") from exc
    return _records_from_dataset(ds, source=source, path=path)


def _holds_no_line(path: Path) -> bool:
    """Whether a JSON-lines file holds only blank lines (read up to its first line with text)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:  # type: ignore[operator]
            return not any(line.strip() for line in fh)
    except (OSError, EOFError):
        return False  # unreadable: datasets says why


@contextlib.contextmanager
def _datasets_quiet(datasets: Any) -> Iterator[None]:
    """``datasets`` without its progress bars and with its log at CRITICAL while the block runs (restored after)."""
    logging_ = datasets.utils.logging
    bars, level = logging_.is_progress_bar_enabled(), logging_.get_verbosity()
    logging_.disable_progress_bar()
    logging_.set_verbosity(logging_.CRITICAL)
    try:
        yield
    finally:
        logging_.set_verbosity(level)
        if bars:
            logging_.enable_progress_bar()


def load_bigcodebench(path: str | os.PathLike[str] | None = None) -> tuple[Task, ...]:
    """BigCodeBench (full, instruct, ``v0.1.0_hf``, 1140 tasks).

    Looks in order at ``path``, then ``$CONVCODEWORLD_BIGCODEBENCH_PATH``, then the hub
    (``bigcode/bigcodebench``, split ``v0.1.0_hf``).

    Raises:
        DatasetError: with the fix spelled out, when no source can be read.
    """
    local = path or os.environ.get(BIGCODEBENCH_ENV)
    if local:
        return load_task_file(local, source=f"bigcodebench:{BIGCODEBENCH_SPLIT}")
    return _load_bigcodebench_hub()


_OFFLINE_FLAGS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
_OFFLINE_FIX = (f"point ${BIGCODEBENCH_ENV} at a local BigCodeBench.jsonl.gz or .parquet file, pass dataset='humaneval' "
                "(no network needed), or, with BigCodeBench in the Hugging Face cache, set HF_HUB_OFFLINE=1")


def hub_unreachable(timeout_s: float = 3.0) -> str | None:
    """Why the Hugging Face hub (``$HF_ENDPOINT``, default huggingface.co) cannot be reached, or None when a TCP
    connection to it opens within ``timeout_s`` (name resolution included)."""
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (80 if endpoint.scheme == "http" else 443)
    outcome: list[str | None] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
            outcome.append(None)
        except OSError as exc:
            outcome.append(f"{host}:{port}: {exc}")

    probe = threading.Thread(target=connect, daemon=True)  # getaddrinfo has no timeout of its own
    probe.start()
    probe.join(timeout_s)
    return outcome[0] if outcome else f"{host}:{port}: no answer within {timeout_s:g} s"


@lru_cache(maxsize=1)
def _load_bigcodebench_hub() -> tuple[Task, ...]:
    offline = any(os.environ.get(flag, "").strip().lower() in ("1", "true", "yes", "on") for flag in _OFFLINE_FLAGS)
    why = None if offline else hub_unreachable()
    if why is not None:  # fail at once, not after the hub client's retries (about 25 s)
        raise DatasetError(f"cannot reach the Hugging Face hub to load {BIGCODEBENCH_HUB_ID} ({why}); {_OFFLINE_FIX}")
    import datasets

    try:
        ds = datasets.load_dataset(BIGCODEBENCH_HUB_ID, split=BIGCODEBENCH_SPLIT)
    except Exception as exc:
        raise DatasetError(
            f"could not load {BIGCODEBENCH_HUB_ID} (split {BIGCODEBENCH_SPLIT}) from the Hugging Face hub"
            f"{' in offline mode' if offline else ''}: {exc}. Fix: "
            + (_OFFLINE_FIX.rsplit(", or,", 1)[0] + ", or load it once with the network on" if offline else _OFFLINE_FIX)
        ) from exc
    return _records_from_dataset(
        ds, source=f"bigcodebench:{BIGCODEBENCH_SPLIT}", path=f"hf://{BIGCODEBENCH_HUB_ID}@{BIGCODEBENCH_SPLIT}"
    )
