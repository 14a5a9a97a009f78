"""Loading input/output task sets in their exact hub schemas: LiveCodeBench, TACO, CodeContests, APPS.

Each loader reads rows through ``datasets`` (from the hub, or a local ``.jsonl``, ``.jsonl.gz`` or ``.parquet`` with
the same builders) and turns each into an :class:`~.io.IOTask`; a row that cannot be judged (no tests, tests that do
not decode, a kind of test the dataset's judge does not run) is left out with its reason (:attr:`IOLoad.left_out`,
which ``convcodeworld tasks`` lists). A local file's schema is recognised by its fields (:func:`schema_of`).

Names (``dataset=`` of the envs, ``--dataset`` of the commands), with options after ``?`` (``&`` between):

* ``livecodebench`` (``livecodebench/code_generation_lite``): ``version=`` a release tag (``release_v1`` ...
  ``release_v6``, ``release_latest``, the default; ``v2``, ``v1_v3`` ...: the hub's own tags and their files),
  ``start=`` / ``end=`` (``YYYY-MM-DD``) a window of contest dates, as ``lcb_runner`` filters them; the window also
  applies to a local file. Id: ``question_id``. Public tests: ``public_test_cases``; hidden: ``private_test_cases``
  (plain JSON, or base64 of zlib of a pickle of the JSON text, unpickled by an unpickler that admits nothing but
  ``str``: :func:`decode_private_tests`). No canonical solution.
* ``taco`` (``BAAI/TACO``, ``split=train|test``, default ``test``) and ``taco-verified`` (``likaixin/TACO-verified``,
  split ``train``): id ``TACO/<n>``, the row's position in what was loaded (TACO's rows have no id field; a row of
  TACO-verified that has an ``id`` keeps it: ``TACO/<id>``). No public split: the first 3 tests are public.
* ``codecontests`` (``deepmind/code_contests``, ``split=train|valid|test``, default ``test``): id ``name``; public
  tests ``public_tests``, hidden ``private_tests`` then ``generated_tests``; the first Python 3 solution is canonical.
* ``apps`` (``codeparrot/apps``, ``split=train|test``, default ``test``): id ``APPS/<id>`` (``id``, or ``problem_id``
  as codeparrot's loading script names it). No public split: the first 3 tests are public.

Per-test time limits are the judges' own: LiveCodeBench 6 s, TACO and APPS 4 s, CodeContests 10 s (its tester's
default; the problem's contest limit, written for C++, is kept in ``meta``).

``rule=`` (TACO, APPS, CodeContests, and their local files) judges the standard-input tasks by another dataset's rule
(:data:`~convcodeworld_gym.sandbox.run.iocheck.RULES`): APPS's chain, which TACO's judge uses too, passes a line whose
tokens are a permutation of the expected ones (an unsorted list for a sorting problem), and ``rule=livecodebench``
does not. Call tasks keep their dataset's rule (their expected values are stored in its own form).

Holds:
    IO_DATASETS           the names and their hub facts
    SCHEMAS               the four schemas
    LIVECODEBENCH_VERSIONS  LiveCodeBench's version tags and the files each reads
    IOLoad                what a load gives: the tasks, the rows left out and why
    UnjudgeableRow        the reason a row was left out (a selection lists it as kind ``data``)
    parse_spec            a name or path with its options
    is_io_name            whether a name is one of these sets
    load_io_dataset       a named set from the hub (offline: an error at once, naming the fix)
    load_io_file          a local file in any of the four schemas
    file_schema           which of the four schemas a local file is in, if any
    file_fields           a local file's fields, read cheaply
    schema_of             which schema a row's fields are
    rows_to_tasks         rows of one schema to tasks (and the rows left out)
    decode_private_tests  LiveCodeBench's private tests, text only
"""

from __future__ import annotations

import base64
import datetime
import gzip
import io
import json
import math
import os
import pickle
import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from ..errors import DatasetError
from .io import APPS_HEADER, APPS_STDIO_TAIL, LIVECODEBENCH_HEADER, IOCase, IOTask
from .record import PUBLIC_TEST_COUNT, Task

__all__ = ["IO_DATASETS", "IOLoad", "UnjudgeableRow", "parse_spec", "is_io_name", "file_fields", "load_io_dataset", "load_io_file", "file_schema", "schema_of", "rows_to_tasks",
           "decode_private_tests", "LIVECODEBENCH_VERSIONS", "SCHEMAS"]


class UnjudgeableRow(str):
    """Why a loader left a row out (no tests, tests that do not decode): a reason of a task set's ``left_out`` that
    the selection lists as kind ``data`` (a task left out for what a runtime lacks has a plain ``str`` reason)."""

    __slots__ = ()


@dataclass(frozen=True)
class HubSet:
    """A named task set on the hub: its repository, splits (the first is the default), schema and judge's limit."""

    hub_id: str
    splits: tuple[str, ...]
    schema: str


IO_DATASETS: dict[str, HubSet] = {
    "livecodebench": HubSet("livecodebench/code_generation_lite", ("test",), "livecodebench"),
    "taco": HubSet("BAAI/TACO", ("test", "train"), "taco"),
    "taco-verified": HubSet("likaixin/TACO-verified", ("train",), "taco"),
    "codecontests": HubSet("deepmind/code_contests", ("test", "valid", "train"), "codecontests"),
    "apps": HubSet("codeparrot/apps", ("test", "train"), "apps"),
}
SCHEMAS = ("livecodebench", "taco", "codecontests", "apps")

#: The fields that tell a row's schema (a row may hold more).
_SIGNATURES: dict[str, frozenset[str]] = {
    "livecodebench": frozenset({"question_id", "question_content", "public_test_cases", "private_test_cases", "metadata"}),
    "codecontests": frozenset({"name", "description", "public_tests", "private_tests", "generated_tests"}),
    "taco": frozenset({"question", "solutions", "input_output", "skill_types"}),
    "apps": frozenset({"question", "solutions", "input_output", "starter_code"}),
}


def _livecodebench_versions() -> dict[str, tuple[str, ...]]:
    """The hub's version tags and the files each reads (its loading script's table): ``release_vN`` the first N
    files, ``vN`` the N-th alone, ``vN_vM`` the N-th to the M-th."""
    files = ("test.jsonl", *(f"test{i}.jsonl" for i in range(2, 7)))
    tags: dict[str, tuple[str, ...]] = {f"release_v{n}": files[:n] for n in range(1, 7)}
    tags["release_latest"] = files
    for n in range(1, 7):
        tags[f"v{n}"] = (files[n - 1],)
        for m in range(n + 1, 7):
            tags[f"v{n}_v{m}"] = files[n - 1:m]
    return tags


LIVECODEBENCH_VERSIONS = _livecodebench_versions()
#: The per-test time limit of each dataset's judge, in seconds.
TIME_LIMITS = {"livecodebench": 6.0, "taco": 4.0, "apps": 4.0, "codecontests": 10.0}
_OPTIONS = {"livecodebench": {"version", "start", "end"}, "taco": {"split", "rule"}, "taco-verified": {"split", "rule"},
            "codecontests": {"split", "rule"}, "apps": {"split", "rule"}}
#: The options a local file takes, by its schema: a LiveCodeBench window of dates; another rule for standard input.
_FILE_OPTIONS = {"livecodebench": {"start", "end"}, "taco": {"rule"}, "apps": {"rule"}, "codecontests": {"rule"}}


@dataclass(frozen=True)
class IOLoad:
    """What a load gives: the tasks kept, in the rows' order, and the rows left out (task id -> why it cannot be
    judged), under the name the set is known by."""

    tasks: tuple[Task, ...]
    left_out: Mapping[str, str] = field(default_factory=dict, compare=False)
    name: str = ""


# ----------------------------------------------------------------------------- names and options

def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``(name or path, options)`` of a dataset spec: the options follow a ``?`` as ``key=value`` pairs joined by ``&``.

    >>> parse_spec("livecodebench?version=release_v5&start=2024-01-01")
    ('livecodebench', {'version': 'release_v5', 'start': '2024-01-01'})
    >>> parse_spec("taco")
    ('taco', {})
    """
    if "?" not in spec:
        return spec, {}
    base, _, query = spec.partition("?")
    return base, dict(parse_qsl(query, keep_blank_values=True))


def is_io_name(name: str) -> bool:
    """Whether ``name`` (without options) names one of :data:`IO_DATASETS`."""
    return name.lower() in IO_DATASETS


def _check_options(name: str, options: Mapping[str, str], allowed: set[str] | None = None) -> None:
    allowed = _OPTIONS.get(name, set()) if allowed is None else allowed
    unknown = sorted(set(options) - allowed)
    if unknown:
        takes = f"it takes {', '.join(sorted(allowed))}" if allowed else "it takes none"
        raise DatasetError(f"dataset {name!r}: unknown option(s) {', '.join(unknown)}; {takes}")


def _date(options: Mapping[str, str], key: str) -> datetime.datetime | None:
    text = options.get(key)
    if not text:
        return None
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        raise DatasetError(f"option {key}={text!r}: give a date as YYYY-MM-DD (e.g. {key}=2024-08-01)") from None


# ----------------------------------------------------------------------------- LiveCodeBench private tests

#: The most bytes a compressed private-tests field may inflate to.
MAX_PRIVATE_TESTS_BYTES = 1 << 30


class _TextOnly(pickle.Unpickler):
    """An unpickler that admits no class, function or global of any kind: the stream can build plain values only."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a global {module}.{name} is not admitted (private tests hold one str)")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("a persistent id is not admitted")


def decode_private_tests(text: str) -> Any:
    """LiveCodeBench's ``private_test_cases``: JSON, else base64 of zlib of a pickle of the JSON text. The pickle is
    read by an unpickler that admits no global (so no class and no callable can be named), and must hold one ``str``.

    >>> decode_private_tests('[{"input": "1", "output": "2", "testtype": "stdin"}]')[0]["output"]
    '2'
    >>> packed = base64.b64encode(zlib.compress(pickle.dumps(json.dumps([{"input": "x"}])))).decode()
    >>> decode_private_tests(packed)
    [{'input': 'x'}]
    >>> decode_private_tests(base64.b64encode(zlib.compress(pickle.dumps(print))).decode())
    Traceback (most recent call last):
    ...
    ValueError: private_test_cases: the pickle is refused: a global builtins.print is not admitted (private tests hold one str)

    Raises:
        ValueError: saying what is wrong with the text.
    """
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        packed = base64.b64decode(text.encode("utf-8"), validate=False)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(packed, MAX_PRIVATE_TESTS_BYTES)
        if inflater.unconsumed_tail:
            raise ValueError(f"it inflates to more than {MAX_PRIVATE_TESTS_BYTES} bytes")
    except (ValueError, zlib.error) as exc:
        raise ValueError(f"private_test_cases: neither JSON nor base64 of zlib ({exc})") from None
    try:
        value = _TextOnly(io.BytesIO(raw)).load()
    except Exception as exc:  # noqa: BLE001 - any refusal or malformed stream
        raise ValueError(f"private_test_cases: the pickle is refused: {exc}") from None
    if type(value) is not str:
        raise ValueError(f"private_test_cases: the pickle holds a {type(value).__name__}, not the JSON text (a str)")
    try:
        return json.loads(value)
    except ValueError as exc:
        raise ValueError(f"private_test_cases: the unpickled text is no JSON ({exc})") from None


# ----------------------------------------------------------------------------- rows to tasks

class _Skip(Exception):
    """A row that cannot be judged: why."""


def _text(row: Mapping[str, Any], key: str) -> str:
    """``row[key]`` as text; a date as ISO text (``datasets``' JSON reader reads LiveCodeBench's ``contest_date`` as a
    timestamp, where the hub's loading script declared a string)."""
    value = row.get(key)
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    return value if isinstance(value, str) else "" if value is None else str(value)


def _stdio_prompt(statement: str) -> str:
    return (f"{statement.rstrip()}\n\nWrite a Python 3 program that solves this problem: it reads the input from "
            "standard input and writes the answer to standard output.")


def _call_prompt(statement: str, starter: str, func_name: str) -> str:
    target = f"`Solution().{func_name}`" if "class Solution" in starter else f"`{func_name}`"
    start = f"\nYou should write self-contained code starting with:\n```python\n{starter.rstrip()}\n```" if starter.strip() else ""
    return f"{statement.rstrip()}\n\nWrite Python 3 code in which {target} solves this problem.{start}"


def _livecodebench_task(row: Mapping[str, Any], source: str, window: tuple[Any, Any]) -> IOTask | None:
    try:
        date = datetime.datetime.fromisoformat(_text(row, "contest_date"))
    except ValueError:
        raise _Skip(f"contest_date {_text(row, 'contest_date')[:40]!r} is no ISO date") from None
    start, end = window
    if start is not None and date < start or end is not None and date > end:
        return None  # outside the window: not part of the set asked for
    try:
        public = json.loads(_text(row, "public_test_cases"))
    except ValueError as exc:
        raise _Skip(f"public_test_cases is no JSON ({exc})") from None
    try:
        private = decode_private_tests(_text(row, "private_test_cases"))
    except ValueError as exc:
        raise _Skip(str(exc)) from None
    try:
        metadata = json.loads(_text(row, "metadata") or "{}")
    except ValueError as exc:
        raise _Skip(f"metadata is no JSON ({exc})") from None
    if not isinstance(public, list) or not isinstance(private, list) or not isinstance(metadata, dict):
        raise _Skip("public_test_cases and private_test_cases must be lists, metadata an object")
    tests = [*public, *private]
    if not tests:
        raise _Skip("it has no tests")
    kinds = set()
    for test in tests:
        if not (isinstance(test, dict) and isinstance(test.get("input"), str) and isinstance(test.get("output"), str)):
            raise _Skip("a test is not {input: str, output: str, testtype}")
        kinds.add(test.get("testtype"))
    if len(kinds) != 1 or not kinds <= {"stdin", "functional"}:
        raise _Skip(f"its tests' testtype is {sorted(map(str, kinds))}, not one of stdin or functional")
    functional = kinds == {"functional"}
    func_name = metadata.get("func_name") if functional else ""
    if functional and not (isinstance(func_name, str) and func_name):
        raise _Skip("a functional problem without metadata.func_name")
    cases = tuple(IOCase(t["input"], t["output"]) for t in tests)
    if functional:
        for case in cases:
            try:
                [json.loads(line) for line in case.input.split("\n")]
                json.loads(case.output)
            except ValueError:
                raise _Skip("a functional test's input or output is no JSON") from None
    statement = _text(row, "question_content")
    starter = _text(row, "starter_code")
    meta = tuple((k, _text(row, k)) for k in ("question_title", "platform", "contest_id", "contest_date", "difficulty")
                 if _text(row, k))
    return IOTask(
        task_id=_text(row, "question_id"), prompt=_call_prompt(statement, starter, func_name) if functional else
        _stdio_prompt(statement), code_prompt=starter, entry_point="", canonical_solution="", test="", source=source,
        kind="call" if functional else "stdio", rule="livecodebench", func_name=func_name or "", cases=cases,
        public_count=len(public), time_limit_s=TIME_LIMITS["livecodebench"], import_header=LIVECODEBENCH_HEADER,
        args="lines", meta=meta)


def _json_field(row: Mapping[str, Any], key: str) -> Any:
    raw = row.get(key)
    if isinstance(raw, (list, dict)):
        return raw
    text = _text(row, key)
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _Skip(f"{key} is no JSON ({exc})") from None


def _joined(value: Any) -> str:
    return "\n".join(map(str, value)) if isinstance(value, list) else value if isinstance(value, str) else str(value)


def _first_solution(value: Any) -> str:
    solutions = value if isinstance(value, list) else []
    return next((s for s in solutions if isinstance(s, str) and s.strip()), "")


def _megabytes(text: str) -> int | None:
    """A memory limit as TACO writes it (``256 megabytes``, ``262144 bytes``) in MB, or None."""
    match = re.search(r"(\d+(?:\.\d+)?)\s*(megabytes|mb|kilobytes|kb|bytes)", text.lower())
    if not match:
        return None
    value, unit = float(match.group(1)), match.group(2)
    scale = {"megabytes": 1, "mb": 1, "kilobytes": 1 / 1024, "kb": 1 / 1024, "bytes": 1 / (1 << 20)}[unit]
    return max(1, math.ceil(value * scale))


def _apps_like_task(row: Mapping[str, Any], task_id: str, source: str, rule: str) -> IOTask:
    """A TACO or APPS row: ``input_output`` (``inputs``, ``outputs``, ``fn_name``), ``solutions``, ``starter_code``."""
    spec = _json_field(row, "input_output")
    if not isinstance(spec, dict):
        raise _Skip("it has no tests (input_output is empty)")
    inputs, outputs = spec.get("inputs"), spec.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or not inputs:
        raise _Skip("it has no tests (input_output has no inputs)")
    if len(inputs) != len(outputs):
        raise _Skip(f"input_output has {len(inputs)} inputs and {len(outputs)} outputs")
    func_name = spec.get("fn_name")
    call = isinstance(func_name, str) and bool(func_name)
    if call:
        if not all(isinstance(i, list) for i in inputs):
            raise _Skip("a call test's input is not a list of arguments")
        cases = tuple(IOCase(json.dumps(i), json.dumps(o)) for i, o in zip(inputs, outputs))
    else:
        cases = tuple(IOCase(_joined(i), _joined(o)) for i, o in zip(inputs, outputs))
    solutions = row.get("solutions")
    if isinstance(solutions, str):
        try:
            solutions = json.loads(solutions) if solutions.strip() else []
        except ValueError:
            solutions = []  # no usable solution: the row is still judged
    statement, starter = _text(row, "question"), _text(row, "starter_code")
    meta = tuple((k, _text(row, k)) for k in ("name", "source", "difficulty", "url", "time_limit", "memory_limit", "date")
                 if _text(row, k))
    return IOTask(
        task_id=task_id, prompt=_call_prompt(statement, starter, func_name) if call else _stdio_prompt(statement),
        code_prompt=starter, entry_point="", canonical_solution=_first_solution(solutions), test="", libs=("numpy",),
        source=source, kind="call" if call else "stdio", rule=rule, func_name=func_name if call else "", cases=cases,
        public_count=min(PUBLIC_TEST_COUNT, len(cases)), time_limit_s=TIME_LIMITS[rule],
        memory_limit_mb=_megabytes(_text(row, "memory_limit")),
        import_header=APPS_HEADER if call else APPS_HEADER + APPS_STDIO_TAIL, args="list", meta=meta)


def _tests_of(row: Mapping[str, Any], key: str) -> list[IOCase]:
    value = row.get(key)
    if value is None:
        return []
    if not isinstance(value, Mapping) or not isinstance(value.get("input"), list) or not isinstance(value.get("output"), list):
        raise _Skip(f"{key} is not {{input: [...], output: [...]}}")
    if len(value["input"]) != len(value["output"]):
        raise _Skip(f"{key} has {len(value['input'])} inputs and {len(value['output'])} outputs")
    return [IOCase(str(i), str(o)) for i, o in zip(value["input"], value["output"])]


#: CodeContests' language of a Python 3 solution (``contest_problem.proto``: PYTHON3 = 3).
_PYTHON3 = 3


def _codecontests_task(row: Mapping[str, Any], source: str) -> IOTask:
    if _text(row, "input_file").strip() or _text(row, "output_file").strip():
        raise _Skip("it reads or writes files (input_file / output_file), not standard input and output")
    public = _tests_of(row, "public_tests")
    hidden = _tests_of(row, "private_tests") + _tests_of(row, "generated_tests")
    if not public and not hidden:
        raise _Skip("it has no tests")
    solutions = row.get("solutions") or {}
    canonical = ""
    if isinstance(solutions, Mapping):
        for language, code in zip(solutions.get("language") or [], solutions.get("solution") or []):
            if language in (_PYTHON3, "PYTHON3") and isinstance(code, str) and code.strip():
                canonical = code
                break
    limit = row.get("time_limit")
    seconds = None
    if isinstance(limit, Mapping) and limit.get("seconds") is not None:
        seconds = float(limit.get("seconds") or 0) + float(limit.get("nanos") or 0) / 1e9
    memory = row.get("memory_limit_bytes")
    meta = tuple((k, v) for k, v in (("source", _text(row, "source")), ("difficulty", _text(row, "difficulty")),
                                      ("cf_rating", _text(row, "cf_rating")),
                                      ("contest_time_limit_s", f"{seconds:g}" if seconds else "")) if v)
    return IOTask(
        task_id=_text(row, "name"), prompt=_stdio_prompt(_text(row, "description")), code_prompt="", entry_point="",
        canonical_solution=canonical, test="", source=source, kind="stdio", rule="codecontests",
        cases=(*public, *hidden), public_count=len(public), time_limit_s=TIME_LIMITS["codecontests"],
        memory_limit_mb=max(1, int(memory) >> 20) if isinstance(memory, int) and memory > 0 else None, meta=meta)


def schema_of(fields: Iterable[str]) -> str | None:
    """The schema whose telling fields ``fields`` holds (:data:`SCHEMAS`), or None (BigCodeBench's, or none).

    >>> schema_of(["question_id", "question_content", "public_test_cases", "private_test_cases", "metadata", "platform"])
    'livecodebench'
    >>> schema_of(["id", "question", "solutions", "input_output", "difficulty", "url", "starter_code"])
    'apps'
    >>> schema_of(["task_id", "instruct_prompt"]) is None
    True
    """
    have = set(fields)
    for schema in ("livecodebench", "codecontests", "taco", "apps"):  # TACO's fields include APPS's: TACO first
        if _SIGNATURES[schema] <= have:
            return schema
    return None


def rows_to_tasks(rows: Iterable[Mapping[str, Any]], schema: str, *, source: str, options: Mapping[str, str] | None = None
                  ) -> IOLoad:
    """The tasks of ``rows`` in ``schema``, and the rows left out with why. ``options``: ``start`` / ``end`` (a
    LiveCodeBench window of contest dates, ``YYYY-MM-DD``), ``rule`` (the standard-input tasks' rule). Ids must be
    unique.

    Raises:
        DatasetError: two rows share an id, or a row lacks its id.
    """
    if schema not in SCHEMAS:
        raise DatasetError(f"unknown schema {schema!r}; the schemas are {', '.join(SCHEMAS)}")
    options = options or {}
    window = (_date(options, "start"), _date(options, "end"))
    stdio_rule = options.get("rule") or None
    if stdio_rule is not None:
        from ..sandbox.run.iocheck import STDIO_RULES  # the judge's names (imported late: the sandbox imports tasks)

        if stdio_rule not in STDIO_RULES:
            raise DatasetError(f"option rule={stdio_rule!r}: the rules are {', '.join(STDIO_RULES)} (rule=livecodebench)")
    tasks: list[Task] = []
    seen: set[str] = set()
    left_out: dict[str, str] = {}
    for position, row in enumerate(rows):
        task_id = _row_id(row, schema, position)
        if not task_id:
            raise DatasetError(f"{source}: row {position} has no id ({'question_id' if schema == 'livecodebench' else 'name'})")
        try:
            if schema == "livecodebench":
                task = _livecodebench_task(row, source, window)
            elif schema == "codecontests":
                task = _codecontests_task(row, source)
            else:
                task = _apps_like_task(row, task_id, source, schema)
        except _Skip as why:
            left_out[task_id] = UnjudgeableRow(f"the row cannot be judged: {why}")
            continue
        if task is None:
            continue
        if stdio_rule is not None and task.kind == "stdio" and task.rule != stdio_rule:
            task = replace(task, rule=stdio_rule, test="")  # its tests made again with the rule asked for
        if task.task_id in seen or task.task_id in left_out:
            raise DatasetError(f"{source}: two rows share the id {task.task_id!r}")
        seen.add(task.task_id)
        tasks.append(task)
    return IOLoad(tuple(tasks), left_out)


def _row_id(row: Mapping[str, Any], schema: str, position: int) -> str:
    if schema == "livecodebench":
        return _text(row, "question_id")
    if schema == "codecontests":
        return _text(row, "name")
    if schema == "apps":
        own = row.get("id", row.get("problem_id"))
        return f"APPS/{own}" if own is not None and str(own) != "" else f"APPS/{position}"
    own = row.get("id")
    return f"TACO/{own}" if own is not None and str(own) != "" else f"TACO/{position}"


# ----------------------------------------------------------------------------- reading

_BUILDERS = {".jsonl": "json", ".json": "json", ".gz": "json", ".parquet": "parquet"}


def file_fields(path: Path) -> list[str]:
    """The fields of a local file's rows (a JSON-lines file's first row; a Parquet file's schema), read cheaply.

    Raises:
        DatasetError: the file cannot be read, or its first row is no JSON object.
    """
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    if not isinstance(row, dict):
                        raise DatasetError(f"{path}: line 1 is no JSON object")
                    return list(row)
    except (OSError, ValueError) as exc:
        raise DatasetError(f"cannot read task file {str(path)!r}: {exc}") from None
    return []


def file_schema(path: str | os.PathLike[str]) -> str | None:
    """The input/output schema of a local task file (:func:`schema_of` of its first row's fields), or None: another
    schema, an unsupported suffix, or a file that cannot be read (the BigCodeBench loader then says what is wrong)."""
    p = Path(path)
    if p.suffix not in _BUILDERS or not p.is_file():
        return None
    try:
        return schema_of(file_fields(p))
    except DatasetError:
        return None


def load_io_file(path: str | os.PathLike[str], options: Mapping[str, str] | None = None, *,
                 schema: str | None = None) -> IOLoad:
    """The tasks of a local ``.jsonl``, ``.jsonl.gz`` or ``.parquet`` file in one of :data:`SCHEMAS` (recognised by its
    fields unless ``schema`` is given), read through ``datasets`` (its ``json`` or ``parquet`` builder, as the hub
    path reads the same files). Cached per path, size, modification time and options.

    Raises:
        DatasetError: the file is missing, unreadable, or in none of the schemas (the message lists their fields).
    """
    p = Path(path).expanduser().resolve()
    if not p.is_file():
        raise DatasetError(f"task file {str(path)!r} does not exist")
    if p.suffix not in _BUILDERS:
        raise DatasetError(f"task file {str(path)!r}: unsupported suffix {p.suffix!r}; use .jsonl, .jsonl.gz or .parquet")
    found = schema or schema_of(file_fields(p))
    if found is None:
        raise DatasetError(f"task file {str(path)!r} is in none of the input/output schemas; "
                           + "; ".join(f"{name} rows hold {', '.join(sorted(_SIGNATURES[name]))}" for name in SCHEMAS))
    opts = dict(options or {})
    _check_options(str(path), opts, _FILE_OPTIONS.get(found, set()))
    stat = p.stat()
    return _load_file_cached(str(p), stat.st_size, stat.st_mtime_ns, found, tuple(sorted(opts.items())))


@lru_cache(maxsize=8)
def _load_file_cached(path: str, size: int, mtime_ns: int, schema: str, options: tuple[tuple[str, str], ...]) -> IOLoad:
    import datasets

    try:
        rows = datasets.load_dataset(_BUILDERS[Path(path).suffix], data_files=path, split="train")
    except Exception as exc:  # datasets wraps parse errors in several types
        raise DatasetError(f"could not read task file {path!r} with datasets: {exc}") from exc
    loaded = rows_to_tasks(rows, schema, source=f"file:{Path(path).name}", options=dict(options))
    return IOLoad(loaded.tasks, loaded.left_out, Path(path).name)


_OFFLINE_FLAGS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def _fix(name: str) -> str:
    schema = IO_DATASETS[name].schema
    return (f"pass a local copy in the {schema} schema instead (dataset='path/to/file.jsonl', .jsonl.gz or .parquet: "
            f"its rows as the hub holds them), or, with {IO_DATASETS[name].hub_id} in the Hugging Face cache, set "
            "HF_HUB_OFFLINE=1")


def load_io_dataset(name: str, options: Mapping[str, str] | None = None) -> IOLoad:
    """A named input/output set (:data:`IO_DATASETS`) from the hub, through ``datasets``, with its options (see the
    module docstring). Cached per name and options. The hub is probed first (3 s): offline, a ``DatasetError`` at
    once that names the fix (a local file, or the cache with ``HF_HUB_OFFLINE=1``).

    Raises:
        DatasetError: an unknown name, option, split or version; the hub cannot be reached or read.
    """
    name = name.lower()
    if name not in IO_DATASETS:
        raise DatasetError(f"unknown input/output dataset {name!r}; the names are {', '.join(IO_DATASETS)}")
    opts = dict(options or {})
    _check_options(name, opts)
    hub = IO_DATASETS[name]
    split = opts.get("split", hub.splits[0])
    if split not in hub.splits:
        raise DatasetError(f"dataset {name!r} has splits {', '.join(hub.splits)}, not {split!r} ({name}?split={hub.splits[0]})")
    version = opts.get("version", "release_latest")
    if name == "livecodebench" and version not in LIVECODEBENCH_VERSIONS:
        raise DatasetError(f"livecodebench has no version {version!r}; the versions are release_v1 ... release_v6, "
                           "release_latest, v1 ... v6 and ranges such as v1_v3")
    _date(opts, "start"), _date(opts, "end")  # checked before any network
    return _load_hub_cached(name, tuple(sorted(opts.items())))


@lru_cache(maxsize=8)
def _load_hub_cached(name: str, options: tuple[tuple[str, str], ...]) -> IOLoad:
    from .files import hub_unreachable

    opts = dict(options)
    hub = IO_DATASETS[name]
    offline = any(os.environ.get(flag, "").strip().lower() in ("1", "true", "yes", "on") for flag in _OFFLINE_FLAGS)
    why = None if offline else hub_unreachable()
    if why is not None:  # at once, not after the hub client's retries
        raise DatasetError(f"cannot reach the Hugging Face hub to load {hub.hub_id} ({why}); {_fix(name)}")
    import datasets

    split = opts.get("split", hub.splits[0])
    try:
        if name == "livecodebench":  # its hub loading script's files, read by the json builder
            version = opts.get("version", "release_latest")
            files = [f"hf://datasets/{hub.hub_id}/{f}" for f in LIVECODEBENCH_VERSIONS[version]]
            rows = datasets.load_dataset("json", data_files=files, split="train")
            label = f"livecodebench:{version}"
        elif name == "apps":  # codeparrot's files (its loading script renames id to problem_id: both are read)
            rows = datasets.load_dataset("json", data_files=f"hf://datasets/{hub.hub_id}/{split}.jsonl", split="train")
            label = f"apps:{split}"
        elif name == "taco":  # the Arrow files its loading script (TACO.py) reads: datasets 4 runs no script
            rows = datasets.load_dataset("arrow", data_files=f"hf://datasets/{hub.hub_id}/{split}/*.arrow", split="train")
            label = f"taco:{split}"
        else:
            rows = datasets.load_dataset(hub.hub_id, split=split)
            label = f"{name}:{split}"
    except Exception as exc:  # noqa: BLE001 - datasets raises many kinds
        raise DatasetError(f"could not load {hub.hub_id} ({label if 'label' in locals() else split}) from the Hugging "
                           f"Face hub{' in offline mode' if offline else ''}: {exc}. Fix: {_fix(name)}") from exc
    loaded = rows_to_tasks(rows, hub.schema, source=label, options=opts)
    suffix = "".join(f"&{k}={v}" for k, v in options)
    return IOLoad(loaded.tasks, loaded.left_out, name + ("?" + suffix[1:] if suffix else ""))
