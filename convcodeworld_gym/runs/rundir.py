"""The output folder of a run: what the runner may write there, its ``metadata.json``, and the resume check.

A run folder (``convcodeworld evaluate --out``) holds the turn log, ``metadata.json``, the report's files and the
folder's lock (:class:`~convcodeworld_gym.records.RunFolderLock`). The runner never overwrites a file it did not
write: :func:`claim` refuses a name that is already there unless the folder's list of the files this package wrote
(``.convcodeworld-files.json``, with each file's digest when it was written whole) holds it and the file is still as
written. In a run folder from before that list (a ``metadata.json`` with its run's ``config``) the run's own files are
taken as the runner's.

Resuming compares the settings that change results, by name (:func:`config_differences`): the model and its
decoding (``max_tokens`` included), the prompts, the ids, the feedback, the dataset's content, the seed. How the
endpoint is reached (its URL, timeouts, retries) is recorded but never compared, and only a setting whose name says
it holds a secret is redacted (:func:`redact`).

Holds:
    redact              settings as stored: secrets (and passwords in URLs) masked, objects named by their type
    REACH_SETTINGS      the names of settings that say how an endpoint is reached (never compared)
    config_differences  the settings that differ between a stored config and a new one, by name
    legacy_config       a config an older version wrote, made comparable (and what it did not record)
    METADATA_SCHEMA     the version of the metadata this package writes
    read_metadata       a run's metadata.json, or a RunLogError naming the file and the fix
    write_json_atomic   a JSON file written whole or not at all
    claim               check that the runner may write some files in a folder: none another's, none changed
    record_written      add files to the folder's list of the files this package wrote
    WRITTEN_FILE        that list's file name
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import RunFolderError, RunLogError
from ..records import METADATA_FILE, TURNS_FILE, is_secret_name

__all__ = ["redact", "REACH_SETTINGS", "config_differences", "legacy_config", "METADATA_SCHEMA", "read_metadata",
           "write_json_atomic", "claim", "record_written", "WRITTEN_FILE"]

#: The folder's list of the files this package wrote there, and their digests.
WRITTEN_FILE = ".convcodeworld-files.json"

#: The version of the metadata this package writes (``"schema"``): 2 since issue 51 (the prompts' digest recorded,
#: only secret names redacted); metadata without it is 1 (:func:`legacy_config`).
METADATA_SCHEMA = 2
_NEW_IN_SCHEMA_2 = ("prompts",)

#: Settings that say how an endpoint is reached, not what it answers: recorded, never compared on resume.
REACH_SETTINGS = frozenset({"base_url", "timeout", "timeout_s", "max_retries", "retries", "backoff_s"})
#: Settings that say where the task set was read from; its content (``sha256``) is what is compared.
_WHERE_SETTINGS = frozenset({"spec"})

_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^/@:\s]*):[^/@\s]*@", re.IGNORECASE)


def redact(value: Any, name: str = "") -> Any:
    """``value`` as a run folder stores it: a string under a secret name (:func:`~convcodeworld_gym.records.is_secret_name`)
    becomes ``"<redacted>"``, a password inside a URL ``***``; numbers, flags and every other name are kept as they
    are; an object that is no JSON value is named by its type.

    >>> redact({"api_key": "sk-1", "max_tokens": 2048, "return_token_ids": True, "base_url": "http://u:pw@h/v1",
    ...         "provider": object()})
    {'api_key': '<redacted>', 'max_tokens': 2048, 'return_token_ids': True, 'base_url': 'http://u:***@h/v1', 'provider': '<object>'}
    """
    if isinstance(value, Mapping):
        return {str(k): redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, name) for v in value]
    if isinstance(value, str):
        if value and is_secret_name(name):
            return "<redacted>"
        return _URL_PASSWORD.sub(r"\g<scheme>\g<user>:***@", value)
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    return f"<{type(value).__name__}>"


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a.b": leaf}`` of a nested mapping (lists are leaves)."""
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flat(inner, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: value} if prefix else {"": value}


def _compared(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return last not in REACH_SETTINGS and not (name.startswith("dataset.") and last in _WHERE_SETTINGS)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:18] + "..." + text[-12:]


def config_differences(stored: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """The settings of ``now`` that differ from ``stored`` (two runs' ``config``), by dotted name with both values
    (``"policy.max_tokens: 2048 -> 16"``); settings of :data:`REACH_SETTINGS` (and where the task set was read
    from) are left out. Empty when a run with ``now`` may resume one with ``stored``.

    >>> config_differences({"seed": 0, "policy": {"max_tokens": 2048, "base_url": "http://localhost:8000/v1"}},
    ...                    {"seed": 0, "policy": {"max_tokens": 16, "base_url": "http://127.0.0.1:9000/v1"}})
    ['policy.max_tokens: 2048 -> 16']
    """
    old, new = _flat(stored), _flat(now)
    missing = object()
    out = []
    for name in sorted(set(old) | set(new)):
        if not _compared(name):
            continue
        before, after = old.get(name, missing), new.get(name, missing)
        if before != after:
            out.append(f"{name}: {'(not set)' if before is missing else _shown(before)} -> "
                       f"{'(not set)' if after is missing else _shown(after)}")
    return out


def legacy_config(stored: Mapping[str, Any], now: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A config written before :data:`METADATA_SCHEMA` 2 (no ``"schema"`` in its metadata), made comparable with
    ``now``: the settings it did not record (the prompts' digest; a setting it stored as ``"<redacted>"`` although
    its name holds no secret, such as ``max_tokens``) are taken from ``now``, and named, so that a resume can say
    what it could not check.

    >>> legacy_config({"seed": 0, "policy": {"max_tokens": "<redacted>", "api_key": "<redacted>"}},
    ...               {"seed": 0, "prompts": "ab", "policy": {"max_tokens": 16, "api_key": "<redacted>"}})
    ({'seed': 0, 'policy': {'max_tokens': 16, 'api_key': '<redacted>'}, 'prompts': 'ab'}, ['policy.max_tokens', 'prompts'])
    """
    unchecked: list[str] = []

    def fill(old: Any, new: Any, prefix: str) -> Any:
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            merged = {k: fill(v, new.get(k), f"{prefix}{k}.") if k in new else v for k, v in old.items()}
            return merged
        name = prefix[:-1]
        if old == "<redacted>" and not is_secret_name(name.rsplit(".", 1)[-1]) and new is not None:
            unchecked.append(name)
            return new
        return old

    merged = fill(dict(stored), now, "")
    for name in _NEW_IN_SCHEMA_2:
        if name not in merged and name in now:
            merged[name] = now[name]
            unchecked.append(name)
    return merged, sorted(unchecked)


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A run's ``metadata.json``.

    Raises:
        RunLogError: it cannot be read, is not JSON, or is not a JSON object (names the file and the fix).
    """
    path = Path(path)
    fix = (f"restore it, or move the folder's files away and run again (its {TURNS_FILE} alone cannot say which "
           "settings made it)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise RunLogError(f"{path} is not UTF-8 text; {fix}") from None
    except OSError as exc:
        raise RunLogError(f"cannot read {path} ({exc.strerror or exc}); {fix}") from None
    if not text.strip():
        raise RunLogError(f"{path} is empty; {fix}")
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunLogError(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno}); {fix}") from None
    if not isinstance(meta, dict):
        raise RunLogError(f"{path} holds a JSON {type(meta).__name__}, not a run's metadata object; {fix}")
    return meta


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """``data`` written to ``path`` whole (a temporary file, then renamed over it)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _written(folder: Path, legacy: Iterable[str] = ()) -> dict[str, str | None]:
    """The folder's list of files this package wrote: name -> digest (None: a file it appends to, like the log). A
    run folder written before the list (a ``metadata.json`` with its run's ``config``): ``legacy`` (the files a run
    writes) are the runner's."""
    path = folder / WRITTEN_FILE
    if path.exists():
        try:
            listed = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            listed = None
        if not isinstance(listed, dict) or not isinstance(listed.get("files"), dict):
            raise RunFolderError(f"{path} is not this package's list of the files it wrote (it cannot be read); delete "
                                 "it only if every file of the folder was written by convcodeworld, else pass another "
                                 "--out folder")
        return dict(listed["files"])
    meta = folder / METADATA_FILE
    if meta.exists():  # a run folder written before the list: its own files are the runner's
        try:
            if isinstance(json.loads(meta.read_text(encoding="utf-8")).get("config"), dict):
                return {name: None for name in legacy}
        except (OSError, ValueError, AttributeError):
            pass
    return {}


def claim(folder: str | os.PathLike[str], names: Iterable[str]) -> None:
    """Check that the runner may write ``names`` in ``folder``: each is absent, or this package wrote it there (the
    folder's list holds it) and it is as written then (for a file written whole). Nothing is written.

    Raises:
        RunFolderError: some are files this package did not write, or changed since (names them and the fix).
    """
    folder, names = Path(folder), list(names)
    written = _written(folder, names)
    foreign, changed = [], []
    for name in names:
        path = folder / name
        if not path.exists():
            continue
        if name not in written:
            foreign.append(name)
        elif written[name] is not None and _digest(path) != written[name]:
            changed.append(name)
    if foreign or changed:
        what = []
        if foreign:
            what.append(f"{', '.join(foreign)}, which convcodeworld did not write")
        if changed:
            what.append(f"{', '.join(changed)}, changed since convcodeworld wrote {'it' if len(changed) == 1 else 'them'}")
        raise RunFolderError(f"{folder} holds {' and '.join(what)}; it never overwrites a file it did not write: pass "
                             "another folder (--out), or move those files away")


def record_written(folder: str | os.PathLike[str], names: Iterable[str], *, whole: bool = True) -> None:
    """Add ``names`` to the folder's list of files this package wrote (with their digests when ``whole``: files it
    writes whole, so that a later change by someone else is noticed; without: files it appends to)."""
    folder, names = Path(folder), list(names)
    written = _written(folder, names)
    for name in names:
        written[name] = _digest(folder / name) if whole else None
    write_json_atomic(folder / WRITTEN_FILE, {"about": "files convcodeworld wrote in this folder (it never overwrites "
                                                       "others)", "files": written})
