"""Runs in the host: what a task needs of its runtime beyond the standard library, and what a runtime lacks of it.

A task whose solution or tests import a module the runtime cannot import, or read NLTK data the
runtime does not hold, cannot pass there however good the program: it is never scored silently.
Default task sets leave such tasks out with one warning (:func:`select_runnable`); a task asked
for by id still runs, and its results name what is missing.

What the runtime lacks is judged by the runtime interpreter itself (:class:`RuntimeProbe` runs
:mod:`._probe` in it), with a run's environment: a separate runtime (``runtime=``) is asked, not
the interpreter of this process.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import subprocess
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ExecutorError, MissingRuntimeDependencies
from ...tasks import Task, TaskSet, imported_modules
from .interpreter import child_env
from .packages import pypi_name

__all__ = ["NLTK_DATA", "nltk_data_needed", "Lacking", "RuntimeProbe", "select_runnable", "choose_tasks", "left_out_warning",
           "RUNTIME_INSTALL_COMMAND", "LOGGER", "warn_once", "summarize", "nltk_download_command"]

LOGGER = logging.getLogger("convcodeworld_gym")

#: The command that builds the pinned BigCodeBench runtime in its own venv (``convcodeworld runtime install``).
RUNTIME_INSTALL_COMMAND = "convcodeworld runtime install bigcodebench"

#: NLTK resources BigCodeBench tasks use, and where ``nltk.data.find`` looks for each (zipped or not).
NLTK_DATA: dict[str, str] = {
    "punkt": "tokenizers/punkt",
    "stopwords": "corpora/stopwords",
    "words": "corpora/words",
    "wordnet": "corpora/wordnet",
    "omw-1.4": "corpora/omw-1.4",
    "brown": "corpora/brown",
    "averaged_perceptron_tagger": "taggers/averaged_perceptron_tagger",
    "vader_lexicon": "sentiment/vader_lexicon.zip",
    "maxent_ne_chunker": "chunkers/maxent_ne_chunker",
}

#: Calls that load NLTK data, and the resource each loads (``nltk.download('x')`` names its own).
_NLTK_USES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), name) for p, name in (
    (r"\b(?:word_tokenize|sent_tokenize)\b", "punkt"),
    (r"\bstopwords\.words\s*\(", "stopwords"),
    (r"\bwords\.words\s*\(", "words"),
    (r"\b(?:WordNetLemmatizer|wordnet\.\w+)\s*\(", "wordnet"),
    (r"\bbrown\.(?:words|sents|tagged_words|tagged_sents|categories)\s*\(", "brown"),
    (r"\bpos_tag\b", "averaged_perceptron_tagger"),
    (r"\bSentimentIntensityAnalyzer\s*\(", "vader_lexicon"),
    (r"\bne_chunk\s*\(", "maxent_ne_chunker"),
))
_NLTK_DOWNLOAD = re.compile(r"\bnltk\.download\(\s*['\"]([\w.-]+)['\"]")
#: TextBlob tokenizes with NLTK's punkt for these properties (its sentiment needs no NLTK data).
_TEXTBLOB_TOKENS = re.compile(r"\.(?:ngrams|words|sentences|tokens|noun_phrases|tags|pos_tags|word_counts)\b")


def nltk_data_needed(task: Task) -> tuple[str, ...]:
    """The NLTK resources (names of :data:`NLTK_DATA`) the task's ground truth or tests load, sorted.

    Read from the text: ``nltk.download('x')`` calls and the calls that load data (``word_tokenize``
    loads ``punkt``, ``stopwords.words`` loads ``stopwords``, ...), in sources that import ``nltk``; and
    TextBlob's tokens, words, sentences and n-grams (``punkt``), in sources that import ``textblob``.

    >>> t = Task("d/0", "p", "import nltk\\nfrom nltk.corpus import stopwords\\ndef f(s):\\n", "f",
    ...          "    return [w for w in nltk.word_tokenize(s) if w not in stopwords.words('english')]\\n",
    ...          "import unittest\\nclass TestCases(unittest.TestCase):\\n    def test_1(self): f('a b')\\n")
    >>> nltk_data_needed(t)
    ('punkt', 'stopwords')
    """
    return _nltk_data_needed(task.solution_code, task.test)


@functools.lru_cache(maxsize=4096)
def _nltk_data_needed(solution: str, test: str) -> tuple[str, ...]:
    found: set[str] = set()
    for text in (solution, test):
        modules = imported_modules(text)
        if "textblob" in modules and _TEXTBLOB_TOKENS.search(text):
            found.add("punkt")
        if "nltk" not in modules:
            continue
        found.update(name for name in _NLTK_DOWNLOAD.findall(text) if name in NLTK_DATA)
        found.update(name for pattern, name in _NLTK_USES if pattern.search(text))
    return tuple(sorted(found))


@dataclass(frozen=True)
class Lacking:
    """What a runtime lacks of one task's needs: importable modules and NLTK data (both sorted)."""

    modules: tuple[str, ...] = ()
    data: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.modules or self.data)

    def describe(self) -> str:
        """In words: ``modules pandas, scipy and NLTK data 'stopwords'``.

        >>> Lacking(("pandas", "scipy"), ("stopwords",)).describe()
        "modules pandas, scipy and NLTK data 'stopwords'"
        """
        parts = []
        if self.modules:
            parts.append(("module " if len(self.modules) == 1 else "modules ") + ", ".join(self.modules))
        if self.data:
            parts.append("NLTK data " + ", ".join(repr(d) for d in self.data))
        return " and ".join(parts)

    def note(self) -> str:
        """The line the feedback of such a task starts with."""
        return (f"Note: the runtime that runs these tests lacks the {self.describe()} that this task needs, "
                "so its tests cannot pass here.")


#: Where NLTK looks for its data under an interpreter's prefix, and outside it (a run's ``HOME`` is empty and its
#: environment has no ``NLTK_DATA``, so these are all a run can find).
_NLTK_UNDER_PREFIX = ("nltk_data", "share/nltk_data", "lib/nltk_data")
_NLTK_SYSTEM = ("/usr/share/nltk_data", "/usr/local/share/nltk_data", "/usr/lib/nltk_data", "/usr/local/lib/nltk_data")


def _stamp(paths: Iterable[str]) -> tuple[tuple[str, int], ...]:
    """Each of ``paths`` with its modification time in ns (-1: absent). A directory's time changes when an entry is
    added, removed or renamed in it: what ``pip install``/``uninstall`` do in site-packages, and a download in an NLTK
    data dir or its category dirs."""
    stamped = []
    for path in paths:
        try:
            stamped.append((path, os.stat(path).st_mtime_ns))
        except OSError:
            stamped.append((path, -1))
    return tuple(stamped)


def _watched(paths: Iterable[str], prefix: str) -> list[str]:
    """The directories whose change means an interpreter may hold other modules or NLTK data: its ``sys.path``
    directories, and the NLTK data dirs a run can search with their category dirs (``corpora``, ``tokenizers``...)."""
    nltk_roots = [os.path.join(prefix, sub) for sub in _NLTK_UNDER_PREFIX if prefix] + list(_NLTK_SYSTEM)
    watched = list(paths) + nltk_roots
    for root in nltk_roots:
        with contextlib.suppress(OSError):
            watched += sorted(entry.path for entry in os.scandir(root) if entry.is_dir())
    return watched


class RuntimeProbe:
    """Asks the interpreter ``python`` which modules and NLTK data it lacks; each answer is cached.

    The question runs in a subprocess of that interpreter, with a run's environment (no inherited
    variables, ``HOME`` a fresh empty dir) and ``extra_path`` on its ``PYTHONPATH`` (what the sandbox
    worker adds). Thread-safe. :meth:`shared` gives one probe per interpreter to a whole process, asked again
    once something is installed in it or removed from it (:meth:`unchanged`).
    """

    _shared: dict[tuple[str, str | None], RuntimeProbe] = {}
    _shared_lock = threading.Lock()

    def __init__(self, python: str, extra_path: str | None = None, timeout_s: float = 120.0) -> None:
        self.python = python
        self.extra_path = extra_path
        self.timeout_s = timeout_s
        self._modules: dict[str, bool] = {}
        self._data: dict[str, bool] = {}
        self._identity: list[str] | None = None
        self._stamp: tuple[tuple[str, int], ...] | None = None
        self._lock = threading.Lock()

    @classmethod
    def shared(cls, python: str, extra_path: str | None = None) -> RuntimeProbe:
        """This process's probe of ``python`` (with ``extra_path``): the one made before while :meth:`unchanged`,
        else a fresh one. Executors of one interpreter share it, so the second one made asks nothing (its answers,
        and the identity result caches are keyed by, are the first's until an install changes the interpreter)."""
        key = (python, extra_path)
        with cls._shared_lock:
            probe = cls._shared.get(key)
            if probe is None or not probe.unchanged():
                probe = cls._shared[key] = cls(python, extra_path)
            return probe

    def unchanged(self) -> bool:
        """Whether the interpreter's installed modules and NLTK data dirs are as they were when it was first asked
        (True before any question): nothing added to, removed from or renamed in its ``sys.path`` directories or
        NLTK data dirs. A file edited in place inside a package is not seen (nor is it by :meth:`identity`)."""
        stamp = self._stamp
        return stamp is None or _stamp(path for path, _ in stamp) == stamp

    def _ask(self, modules: Iterable[str], data: Iterable[str]) -> None:
        """Fill the caches for ``modules`` and ``data`` not asked about yet (and the identity, once)."""
        with self._lock:
            modules = sorted(set(modules) - set(self._modules))
            data = sorted(set(data) - set(self._data))
            if not modules and not data and self._identity is not None:
                return
            question = json.dumps({"modules": modules, "nltk": {d: NLTK_DATA[d] for d in data}})
            with tempfile.TemporaryDirectory(prefix="ccw_probe_") as home:
                extra = {"PYTHONPATH": self.extra_path} if self.extra_path else None
                try:
                    done = subprocess.run([self.python, "-s", str(Path(__file__).with_name("_probe.py"))],
                                          input=question, capture_output=True, text=True, cwd=home,
                                          env=child_env(home, extra), timeout=self.timeout_s)
                    answer = json.loads(done.stdout) if done.returncode == 0 else None
                except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
                    raise ExecutorError(f"could not ask the runtime interpreter {self.python!r} what it holds: {exc}") from exc
                if answer is None:
                    raise ExecutorError(f"could not ask the runtime interpreter {self.python!r} what it holds: "
                                        f"it exited with code {done.returncode}: {done.stderr.strip()[-500:]}")
            lacking_modules, lacking_data = set(answer["modules"]), set(answer["nltk"])
            self._modules.update({m: m not in lacking_modules for m in modules})
            self._data.update({d: d not in lacking_data for d in data})
            self._identity = answer["identity"]
            if self._stamp is None:
                self._stamp = _stamp(_watched(answer.get("paths", ()), answer.get("prefix", "")))

    def lacking_modules(self, modules: Iterable[str]) -> tuple[str, ...]:
        """Those of ``modules`` (top-level names) this runtime cannot import, sorted."""
        modules = sorted(set(modules))
        self._ask(modules, ())
        return tuple(m for m in modules if not self._modules[m])

    def lacking_one(self, task: Task) -> Lacking:
        """What this runtime lacks of ``task``'s needs (empty when nothing)."""
        return self.lacking([task]).get(task.task_id, Lacking())

    def lacking(self, tasks: Iterable[Task]) -> dict[str, Lacking]:
        """Task id -> what this runtime lacks of its needs, for the tasks that lack something (one question)."""
        tasks = list(tasks)
        needs = {t.task_id: (sorted(t.third_party_modules), nltk_data_needed(t)) for t in tasks}
        self._ask((m for mods, _ in needs.values() for m in mods), (d for _, data in needs.values() for d in data))
        out = {}
        for task_id, (mods, data) in needs.items():
            found = Lacking(tuple(m for m in mods if not self._modules[m]),
                            tuple(d for d in data if not self._data[d]) if "nltk" not in mods or self._modules["nltk"] else ())
            if found:
                out[task_id] = found
        return out

    def describe(self) -> dict[str, Any]:
        """What this interpreter is: its path, Python version and platform, and every installed distribution with
        its version (name -> version), as recorded with a run's metadata."""
        self._ask((), ())
        version, platform, *dists = self._identity or ("?", "?")
        return {"python": self.python, "version": version.split()[0], "platform": platform,
                "packages": dict(d.split("==", 1) for d in dists if "==" in d)}

    def identity(self) -> str:
        """A digest of the interpreter's version and installed distributions (for cache keys)."""
        self._ask((), ())
        return hashlib.sha256("\n".join(self._identity or ()).encode()).hexdigest()[:16]

    def install_advice(self, lacking: Iterable[Lacking], bigcodebench: bool = False) -> str:
        """The commands that give this runtime what ``lacking`` names."""
        lacking = list(lacking)
        modules = sorted({m for item in lacking for m in item.modules})
        data = sorted({d for item in lacking for d in item.data})
        advice = []
        if modules:
            advice.append(f"{self.python} -m pip install {' '.join(dict.fromkeys(pypi_name(m) for m in modules))}")
        if data:
            advice.append(nltk_download_command(self.python, data) + " (needs internet)")
        text = "; ".join(advice)
        if bigcodebench and modules:
            text = f"`{RUNTIME_INSTALL_COMMAND}` (the pinned BigCodeBench runtime, in its own venv), or {text}"
        return text


def nltk_download_command(python: str, resources: Iterable[str]) -> str:
    """The command that downloads NLTK ``resources`` where runs of ``python`` find them: ``<prefix>/nltk_data``
    (a run's ``HOME`` is its empty work dir, so ``~/nltk_data`` is never seen).

    >>> nltk_download_command("/opt/rt/bin/python", ["punkt", "stopwords"])
    '/opt/rt/bin/python -m nltk.downloader -d /opt/rt/nltk_data punkt stopwords'
    """
    return f"{python} -m nltk.downloader -d {os.path.dirname(os.path.dirname(python))}/nltk_data {' '.join(resources)}"


def select_runnable(tasks: TaskSet, probe: RuntimeProbe | None) -> tuple[TaskSet, dict[str, Lacking]]:
    """``tasks`` without those whose needs ``probe``'s runtime lacks, and what each left-out task lacks.

    The set returned remembers each task it left out (:meth:`~convcodeworld_gym.tasks.TaskSet.leave_out`):
    asked for by id, it raises :class:`~convcodeworld_gym.errors.LeftOutTaskError` naming what the runtime
    lacks, the command that installs it, and ``task_ids=``. With no probe (a runtime that cannot be asked),
    every task is kept.
    """
    if probe is None:
        return tasks, {}
    lacking = probe.lacking(tasks)
    if not lacking:
        return tasks, {}
    kept = tasks.leave_out({t.task_id: _why_left_out(t, lacking[t.task_id], probe) for t in tasks if t.task_id in lacking})
    return kept, lacking


def _why_left_out(task: Task, lacking: Lacking, probe: RuntimeProbe) -> str:
    """Why ``task`` was left out of a default set for what ``probe``'s runtime lacks, and how to get it back."""
    return (f"the runtime {probe.python} lacks the {lacking.describe()} that it needs, so its tests cannot pass there. "
            f"To play it, install: {probe.install_advice([lacking], task.from_bigcodebench)}; or ask for it by id "
            f"(task_ids=[{task.task_id!r}]) to run it here anyway, where it cannot pass (info['missing_modules'] / "
            "info['missing_data'] then name what it lacks).")


def choose_tasks(tasks: TaskSet, probe: RuntimeProbe | None, *, by_id: bool, strict: bool = False
                 ) -> tuple[TaskSet, dict[str, Lacking]]:
    """The tasks to play and, per task id, what the runtime lacks of its needs.

    A default set (``by_id`` False) leaves out the tasks whose needs are not met, with one warning
    (:func:`left_out_warning`); the returned map then names the tasks left out. Tasks asked for by id
    are all kept, and the map names those of them that cannot pass here.

    Raises:
        MissingRuntimeDependencies: ``strict`` and some task's needs are not met.
    """
    kept, lacking = select_runnable(tasks, probe)
    if not lacking:
        return tasks, {}
    assert probe is not None
    if strict:
        shown = ", ".join(f"{tid} ({item.describe()})" for tid, item in list(lacking.items())[:5])
        raise MissingRuntimeDependencies(
            f"{len(lacking)} of the {len(tasks)} tasks need what the runtime {probe.python} lacks: {shown}"
            f"{', ...' if len(lacking) > 5 else ''}. Install: "
            f"{probe.install_advice(lacking.values(), any(t.from_bigcodebench for t in tasks))}; "
            "or pass strict_runtime=False to leave such tasks out of default task sets.")
    if by_id:
        return tasks, lacking
    warn_once(left_out_warning(tasks, lacking, probe))
    return kept, lacking


def summarize(lacking: Mapping[str, Lacking]) -> str:
    """What tasks lack, most needed first, with the number of tasks in brackets.

    >>> summarize({"a": Lacking(("pandas",)), "b": Lacking(("pandas", "nltk")), "c": Lacking((), ("punkt",))})
    "pandas (2), nltk (1), NLTK data 'punkt' (1)"
    """
    modules = Counter(m for item in lacking.values() for m in item.modules)
    data = Counter(d for item in lacking.values() for d in item.data)
    return ", ".join([f"{m} ({n})" for m, n in modules.most_common()] + [f"NLTK data {d!r} ({n})" for d, n in data.most_common()])


def left_out_warning(tasks: TaskSet, lacking: Mapping[str, Lacking], probe: RuntimeProbe) -> str:
    """One message: how many tasks were left out, which modules and data they need, and how to install them."""
    bigcodebench = any(t.from_bigcodebench for t in tasks if t.task_id in lacking)
    return (f"left out {len(lacking)} of {len(tasks)} tasks of {tasks.name!r}: the runtime {probe.python} lacks what "
            f"they need ({summarize(lacking)}; tasks in brackets). Install: {probe.install_advice(lacking.values(), bigcodebench)}. "
            "Asked for by id (task_ids=), such a task still runs and info['missing_modules'] names what it lacks; "
            "strict_runtime=True raises instead.")


@functools.lru_cache(maxsize=64)
def warn_once(message: str) -> None:
    """Log ``message`` as a warning, once per process (several envs built on the same task set warn once)."""
    LOGGER.warning(message)
