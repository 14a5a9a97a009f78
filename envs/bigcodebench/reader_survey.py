"""Survey: the readers a task set's tests apply to paths and bytes, and who decides what each returns.

The split judge runs a task's tests in its own process. A test may hand a file the program wrote, or bytes it
returned, to a library reader; a reader that can run code or build any object (``pickle.load``, an unsafe YAML
loader, ...) would then let the program's bytes decide the test. This tool reads every test of a task set (parsed,
never run), resolves each call's callee through the test module's imports (``import pandas as pd`` makes
``pd.read_csv`` ``pandas.read_csv``), keeps the calls whose name says they read, open, load or parse (and every call
that can run code: ``eval``, ``exec``, ``compile``, ``importlib``, ``runpy``, ``subprocess``), and classifies each by
the reviewed table :data:`REVIEWED`: what the reader can build, who decides what it returns in the split judge, the
guard, and the test that proves it (docs/threat-model.md carries the table).

Usage, from the repository root (any interpreter with the package importable; nothing of a task runs):

    python envs/bigcodebench/reader_survey.py --dataset bigcodebench            # one JSON line per reader found
    python envs/bigcodebench/reader_survey.py --dataset bigcodebench --table    # the Markdown table
    python envs/bigcodebench/reader_survey.py --dataset humaneval --check       # exit 1 on a reader not reviewed

``--check`` is what ``tests/sandbox/run/test_reader_survey.py`` runs on BigCodeBench and HumanEval: a task set whose
tests call a reader the table does not know fails there, until it is reviewed and added.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["Reader", "REVIEWED", "reader_calls", "survey", "main"]

#: A callee's last part that says it reads a path or bytes (or runs code).
_READS = re.compile(r"^(open|load\w*|read\w*|parse\w*|fromstring|frombuffer|fromfile|from_\w+|literal_eval|connect|"
                    r"\w*[Uu]npickler|decode\w*|unpack\w*|imread|loadtxt|genfromtxt|decompress\w*|extract\w*|"
                    r"eval|exec|compile|__import__|import_module|run_path|run_module|run|Popen|call|check_output|"
                    r"system|getsource)$")


@dataclass(frozen=True)
class Reader:
    """A reviewed reader: what it ``builds`` from the bytes it reads (``"data"``: values of fixed types only;
    ``"objects"``: any class a stream names; ``"code"``: runs code), ``who`` decides what a test gets from a
    program's bytes in the split judge, the ``guard`` that makes it so, and the test that ``proves`` it."""

    builds: str
    who: str
    guard: str
    proves: str


_READERS_PY = "sandbox/run/readers.py"
_TEST = "tests/sandbox/run/test_readers.py"
_PICKLE = Reader("objects (any class or function a stream names; `__reduce__` runs code)",
                 "the program, as data: plain data and the judge's value types only",
                 f"{_READERS_PY}: DataUnpickler in the judge (VALUE_TYPES, typed constructors, no other class); the "
                 "judge's own pickles alone by the standard unpickler (by digest); an audit hook refuses any "
                 "`pickle.find_class` otherwise",
                 f"{_TEST}::test_no_forged_file_passes_any_reader, ::test_any_unpickler_the_judge_holds_refuses_a_global_"
                 "from_a_programs_bytes, ::test_bigcodebench_832_forged_through_its_own_pickle_load")
_DATA = Reader("data (fixed value types: text, numbers, containers, arrays, frames)", "the program, as data",
               "none needed: the reader builds no object of a class the bytes name and runs nothing", "")
_FS = Reader("nothing: files, paths and file objects", "the judge (its own file system calls)",
             "none needed; a run's view of the file system (confinement/view.py) and Landlock bound what it reaches",
             "tests/sandbox/test_hostile.py::test_writes_and_deletes_outside_the_work_dir_fail")
_CODE_TEST = Reader("code: runs what it is given", "the test's own text (trusted), never the program's",
                    "no task's tests call one (the survey lists any call that would)", "")

#: Every reader the surveyed tests call, and those a test could call on a program's bytes (the issue's list).
REVIEWED: dict[str, Reader] = {
    # code-capable, data-only in the judge
    "pickle.load": _PICKLE, "pickle.loads": _PICKLE, "pickle.Unpickler": _PICKLE, "_pickle.loads": _PICKLE,
    "_pickle.load": _PICKLE, "pandas.read_pickle": _PICKLE, "joblib.load": _PICKLE, "shelve.open": _PICKLE,
    "dill.load": _PICKLE, "dill.loads": _PICKLE, "cloudpickle.load": _PICKLE, "cloudpickle.loads": _PICKLE,
    "numpy.load": Reader("data; with allow_pickle=True, objects (a pickled object array)",
                         "the program, as data", f"{_READERS_PY}: numpy unpickles through `pickle.load`: DataUnpickler "
                         "(an object array of plain values)", f"{_TEST}::test_no_forged_file_passes_any_reader[numpy.load-*]"),
    "marshal.load": Reader("builtin values and code objects (never run by the reader)", "the program, as data",
                           f"{_READERS_PY}: read in the judge, a code object refused; an audit "
                           "hook refuses any unmarshal outside it and the import system", f"{_TEST}::test_no_forged_file_"
                           "passes_any_reader[marshal.loads-*]"),
    "marshal.loads": Reader("builtin values and code objects", "the program, as data", f"{_READERS_PY}: as marshal.load",
                            f"{_TEST}::test_no_forged_file_passes_any_reader[marshal.loads-*]"),
    "yaml.load": Reader("with Loader/FullLoader/UnsafeLoader: objects a tag names, and calls (`python/object/apply`)",
                        "the program, as data", f"{_READERS_PY}: read in the judge, whose YAML constructors look up no "
                        "Python name",
                        f"{_TEST}::test_no_forged_file_passes_any_reader[yaml.load-*]"),
    "yaml.unsafe_load": Reader("objects and calls a tag names", "the program, as data", f"{_READERS_PY}: as yaml.load",
                               f"{_TEST}::test_no_forged_file_passes_any_reader[yaml.unsafe_load-*]"),
    "yaml.full_load": Reader("objects a tag names", "the program, as data", f"{_READERS_PY}: as yaml.load", ""),
    "yaml.safe_load": _DATA, "yaml.safe_dump": _DATA,
    "torch.load": Reader("weights_only=True (torch >= 2.6's default): tensors and plain data; False: objects",
                         "the program, as data", "weights_only=False unpickles through the C unpickler, whose every "
                         "global the judge's audit hook refuses; no task's runtime has torch", ""),
    "keras.models.load_model": Reader("a model; an old-format Lambda layer unmarshals and runs its code",
                                      "the judge's keras, on the file's data", "the audit hook refuses the unmarshal "
                                      "of a Lambda layer's code in the judge; no task's tests load a model", ""),
    # data readers the tests call
    "json.load": _DATA, "json.loads": _DATA, "csv.reader": _DATA, "csv.DictReader": _DATA,
    "pandas.read_csv": _DATA, "pandas.read_excel": _DATA, "pandas.read_json": _DATA, "pandas.read_sql": _DATA,
    "pandas.read_sql_query": _DATA, "pandas.read_html": _DATA, "pandas.read_parquet": _DATA,
    "openpyxl.load_workbook": _DATA, "xlrd.open_workbook": _DATA, "ast.literal_eval": _DATA,
    "configparser.ConfigParser.read": _DATA, "sqlite3.connect": Reader(
        "data (SQLite runs no Python; extension loading is off by default)", "the program, as data",
        "none needed", ""),
    "PIL.Image.open": Reader("an image (pure parsers; EPS would run Ghostscript, which no run can see)",
                             "the program, as data", "none needed; the run's view holds no `gs`", ""),
    "matplotlib.image.imread": _DATA, "numpy.loadtxt": _DATA, "numpy.genfromtxt": _DATA, "numpy.fromfile": _DATA,
    "numpy.frombuffer": _DATA, "base64.b64decode": _DATA, "base64.b64encode": _DATA, "base64.decodebytes": _DATA,
    "gzip.open": _DATA, "gzip.decompress": _DATA, "zlib.decompress": _DATA, "bz2.open": _DATA, "lzma.open": _DATA,
    "zipfile.ZipFile": _DATA, "tarfile.open": Reader("archive members; `extractall` writes files",
                                                     "the program, as data", "extraction writes only where the run may "
                                                     "write (its tmpfs); the judge imports nothing from there "
                                                     "(run/shared.py's PinnedPathFinder)", ""),
    "xml.etree.ElementTree.parse": _DATA, "xml.etree.ElementTree.fromstring": _DATA, "wave.open": _DATA,
    "soundfile.read": _DATA, "librosa.load": _DATA, "docx.Document": _DATA, "bs4.BeautifulSoup": _DATA,
    "codecs.decode": _DATA, "binascii.unhexlify": _DATA, "struct.unpack": _DATA, "urllib.parse.urlparse": _DATA,
    "urllib.parse.parse_qs": _DATA, "datetime.datetime.fromisoformat": _DATA, "datetime.datetime.fromtimestamp": _DATA,
    "datetime.date.fromisoformat": _DATA, "dateutil.parser.parse": _DATA, "email.message_from_string": _DATA,
    "hashlib.sha256": _DATA, "re.compile": _DATA, "itertools.chain.from_iterable": _DATA, "rsa.PrivateKey.load_pkcs1": _DATA,
    "sklearn.datasets.load_diabetes": Reader("the library's own bundled data set", "the judge's library",
                                             "none needed: no byte of the program's is read", ""), "io.open": _FS, "open": _FS, "builtins.open": _FS, "os.open": _FS, "codecs.open": _FS,
    "tempfile.TemporaryDirectory": _FS, "pathlib.Path.open": _FS, "pathlib.Path.read_text": _FS,
    "pathlib.Path.read_bytes": _FS, "shutil.unpack_archive": Reader(
        "archive members written to disk", "the program, as data", "as tarfile.open", ""),
    "inspect.getsource": Reader("source text of a judge object", "the judge", "the program's objects are stand-ins "
                                "(their source is not the judge's to give); a test's own source is the judge's", ""),
    # run code: only with the test's own text in these tests
    "eval": _CODE_TEST, "exec": _CODE_TEST, "compile": _CODE_TEST, "__import__": _CODE_TEST,
    "importlib.import_module": _CODE_TEST, "runpy.run_path": _CODE_TEST, "subprocess.run": _CODE_TEST,
    "subprocess.Popen": _CODE_TEST, "subprocess.call": _CODE_TEST, "subprocess.check_output": _CODE_TEST,
    "os.system": _CODE_TEST,
}

#: Callees that read only what the test itself made or a mock stands for (module attributes of ``unittest.mock``,
#: names the test defines), never a program's bytes: not readers here.
_NOT_READERS = re.compile(r"^(unittest\.mock\.|mock\.|self\.|cls\.)")


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted module path or object, from the module's imports (anywhere in it)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _canonical(name: str) -> str:
    """A resolved name as the table keys it (``pandas.io.pickle.read_pickle`` -> ``pandas.read_pickle`` where the
    public name is shorter; ``os.path`` left as it is)."""
    for prefix, short in (("pandas.io.pickle.", "pandas."), ("pandas.io.parsers.", "pandas."),
                          ("numpy.lib.npyio.", "numpy."), ("PIL.Image.Image.", "PIL.Image.")):
        if name.startswith(prefix):
            return short + name[len(prefix):]
    return name


def reader_calls(test_source: str, prelude: str = "") -> Iterator[str]:
    """The resolved names of the calls in ``test_source`` whose last part reads, opens, loads, parses or runs code;
    names resolved through ``prelude`` too (the task's imports, which the judge's module starts with)."""
    from convcodeworld_gym.tasks.record import dotted_name, parse_source  # parsed quietly (invalid escapes warn)

    tree, head_tree = parse_source(test_source), parse_source(prelude)
    if tree is None:
        return
    names = {**(_aliases(head_tree) if head_tree is not None else {}), **_aliases(tree)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        dotted = dotted_name(node.func)
        if dotted is None:
            continue
        head, _, rest = dotted.partition(".")
        resolved = names.get(head, head) + ("." + rest if rest else "")
        if not _READS.match(resolved.rsplit(".", 1)[-1]):
            continue
        if head not in names and head not in ("open", "eval", "exec", "compile", "__import__"):
            continue  # a method of a local value (f.read(), df.to_csv()): not a library reader
        if _NOT_READERS.match(resolved):
            continue
        yield _canonical(resolved)


def survey(tasks: Iterable) -> dict[str, list[str]]:
    """Reader name -> the ids of the tasks whose tests call it."""
    found: dict[str, list[str]] = defaultdict(list)
    for task in tasks:
        for name in sorted(set(reader_calls(task.test, task.header))):
            found[name].append(task.task_id)
    return dict(found)


def _table(found: dict[str, list[str]]) -> str:
    rows = ["| reader | tasks | builds | who decides (split judge) | guard | proved by |", "| --- | --- | --- | --- | --- | --- |"]
    for name in sorted(set(found) | {k for k, r in REVIEWED.items() if r.proves}):
        reader = REVIEWED.get(name)
        ids = found.get(name, [])
        where = f"{len(ids)} ({', '.join(i.split('/')[-1] for i in ids[:6])}{', ...' if len(ids) > 6 else ''})" if ids else "0"
        if reader is None:
            rows.append(f"| `{name}` | {where} | UNREVIEWED | | | |")
        else:
            rows.append(f"| `{name}` | {where} | {reader.builds} | {reader.who} | {reader.guard} | {reader.proves or '-'} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="bigcodebench", help="humaneval, bigcodebench or a task file")
    parser.add_argument("--table", action="store_true", help="print the Markdown table")
    parser.add_argument("--check", action="store_true", help="exit 1 when a test calls a reader the table lacks")
    args = parser.parse_args(argv)
    from convcodeworld_gym.tasks import load_tasks

    found = survey(load_tasks(args.dataset))
    unreviewed = sorted(name for name in found if name not in REVIEWED)
    if args.table:
        print(_table(found))
    elif not args.check:
        for name, ids in sorted(found.items()):
            reader = REVIEWED.get(name)
            print(json.dumps({"reader": name, "tasks": ids, "reviewed": reader is not None,
                              "builds": reader.builds if reader else None}))
    if unreviewed:
        print(f"{len(unreviewed)} reader(s) no review covers: {', '.join(unreviewed)}; add each to REVIEWED with what "
              "it builds, who decides and the guard", file=sys.stderr)
        return 1 if args.check else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
