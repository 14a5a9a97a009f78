"""A run folder loses nothing and counts only what finished (issue 51): unfinished episodes are played again, one run
at a time holds a folder, a resume compares the settings that change results by name, the runner never overwrites a
file it did not write, and a full disk ends a run in one line that a rerun recovers from."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from convcodeworld_gym.cli import main
from convcodeworld_gym.errors import ReferenceLogError, RunFolderBusy
from convcodeworld_gym.policies import SyntheticCoder
from convcodeworld_gym.records import TURNS_FILE, EpisodeLogWriter, read_turns, split_finished
from convcodeworld_gym.reference import load_reference
from convcodeworld_gym.runs.evaluate import EvalConfig, RunConfigMismatch, run_evaluation
from convcodeworld_gym.runs.report import load_report, write_report
from convcodeworld_gym.testing import ScriptedOpenAIServer
from convcodeworld_gym.testing.openai_server import Reply

ROOT = Path(__file__).resolve().parents[2]
COMBO = "CF-EF_full"
CLI = [sys.executable, "-m", "convcodeworld_gym.cli"]


def _config(**changes) -> EvalConfig:
    return EvalConfig(**{"ids": (f"ConvCodeWorld-{COMBO}-v0",), "dataset": "humaneval", "limit": 6, "max_turns": 4,
                         "concurrency": 2, **changes})


def _run(run_dir: Path, executor, lines: list[str] | None = None, **changes):
    return run_evaluation(_config(**changes), SyntheticCoder(0.3), run_dir, executor=executor, progress=None,
                          log=(lines.append if lines is not None else lambda line: None))


def _scores(run_dir: Path) -> tuple:
    scores = load_report(run_dir).scores[COMBO]
    return scores.pass_at_turn, scores.mrr, scores.recall, scores.n_tasks


_ARGS = ["evaluate", COMBO, "--dataset", "humaneval", "--limit", "6", "--max-turns", "4", "--strength", "0.3",
         "--no-progress", "--no-report"]


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    """An uninterrupted run (the CLI's, in this process): what every cut-short run must come back to."""
    run_dir = tmp_path_factory.mktemp("clean") / "run"
    assert main([*_ARGS, "--out", str(run_dir)]) == 0
    return run_dir


# ---------------------------------------------------------------------------------------------- item 1: finished


def test_a_log_cut_short_is_played_again_and_scores_as_the_clean_run(tmp_path, clean, executor, capsys):
    """The last 200 bytes of a finished log cut off: the report leaves the unfinished episode out (before: counted
    as played, Recall 83.3 for 100), and the resume plays it again and says so first (before: "6 already done")."""
    cut = tmp_path / "cut"
    shutil.copytree(clean, cut)
    data = (cut / TURNS_FILE).read_bytes()
    (cut / TURNS_FILE).write_bytes(data[:-200])
    last = json.loads(data.splitlines()[-1])
    report = load_report(cut)
    assert report.unfinished == 1 and report.scores[COMBO].n_tasks == 5
    assert "1 unfinished episode(s) left out" in report.captions()[0]

    capsys.readouterr()
    assert main([*_ARGS, "--out", str(cut)]) == 0
    printed = capsys.readouterr()
    assert f"repaired {cut / TURNS_FILE}: 1 unfinished episode(s)" in printed.err
    assert f"{COMBO}: 1 episodes played, 5 already done (1 unfinished, played again)" in printed.out
    assert read_turns(cut) == read_turns(clean)  # every row (timings aside), in order: the cut episode was the last
    assert _scores(cut) == _scores(clean) and last["task_id"] == read_turns(cut)[-1].task_id


def test_an_episode_without_its_end_is_not_done(tmp_path, clean, capsys):
    """Turns 0..k of an episode and no row saying how it ended (a disk that filled mid-write, before): dropped
    and played again, never taken as finished; so is an episode written twice (two runs in one folder, before)."""
    run_dir = tmp_path / "run"
    shutil.copytree(clean, run_dir)
    lines = (run_dir / TURNS_FILE).read_text(encoding="utf-8").splitlines(keepends=True)
    rows = [json.loads(line) for line in lines]
    long = max({r["task_id"] for r in rows} - {rows[0]["task_id"]}, key=lambda t: sum(r["task_id"] == t for r in rows))
    assert sum(r["task_id"] == long for r in rows) >= 2
    headless = [line for line, row in zip(lines, rows) if not (row["task_id"] == long and row["episode_end"])]
    doubled = [line for line, row in zip(lines, rows) if row["task_id"] == rows[0]["task_id"]]
    (run_dir / TURNS_FILE).write_text("".join(headless + doubled), encoding="utf-8")
    assert len(split_finished(read_turns(run_dir))[1]) == 2
    capsys.readouterr()
    assert main([*_ARGS, "--out", str(run_dir)]) == 0
    printed = capsys.readouterr()
    assert printed.err.startswith(f"repaired {run_dir / TURNS_FILE}: 2 unfinished episode(s)")
    assert f"{COMBO}: 2 episodes played, 4 already done (2 unfinished, played again)" in printed.out
    assert sorted(map(_key, read_turns(run_dir))) == sorted(map(_key, read_turns(clean)))
    assert _scores(run_dir) == _scores(clean)


def _key(row) -> tuple:
    return row.feedback, row.task_id, row.turn


def test_the_static_replay_replays_only_finished_reference_episodes(tmp_path, clean):
    """A reference log with an unfinished episode (log= of a run cut short): that task is left out, saying why;
    the others replay (before: the whole replay refused, or the torn episode replayed as if it ended there)."""
    reference = tmp_path / "reference"
    shutil.copytree(clean, reference)
    data = (reference / TURNS_FILE).read_bytes()
    (reference / TURNS_FILE).write_bytes(data[:-200])
    cut_task = json.loads(data.splitlines()[-1])["task_id"]
    log = load_reference(str(reference), COMBO, max_turns=4)
    assert cut_task not in log.episodes and len(log.episodes) == 5
    with pytest.raises(ReferenceLogError, match="left it unfinished"):
        log.episode(cut_task)


def test_a_writer_hit_by_a_full_disk_keeps_whole_episodes_only(tmp_path):
    """The file size limit (the kernel's EFBIG, as a full disk's ENOSPC) stops an append mid-episode: the writer cuts
    the part it wrote, raises an OSError naming the log, and the log holds whole episodes (before: turns 0-4 of the
    episode stayed, read back as finished)."""
    probe = r"""
import json, resource, signal, sys
from convcodeworld_gym.records import EpisodeLogWriter
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
row = lambda task, turn, end: {"feedback": "CF", "task_id": task, "turn": turn, "episode_end": end, "reply": "x" * 300}
writer = EpisodeLogWriter(sys.argv[1])
writer.write_episode([row("t/0", 0, "passed")])
size = (writer.path).stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 1000, resource.RLIM_INFINITY))
try:
    writer.write_episode([row("t/1", turn, "max_turns" if turn == 9 else "") for turn in range(10)])
except OSError as exc:
    print(json.dumps({"errno": exc.errno, "filename": exc.filename, "size": writer.path.stat().st_size, "before": size}))
"""
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["errno"] == 27 and seen["filename"] == str(tmp_path / TURNS_FILE) and seen["size"] == seen["before"]
    writer = EpisodeLogWriter(tmp_path)
    assert writer.done == {("CF", "t/0", 0)} and writer.repaired == []
    writer.close()


@contextlib.contextmanager
def _tmpfs(path: Path, size: str, *, readonly: bool = False) -> Iterator[Path]:
    """A small tmpfs mounted at ``path`` (root with CAP_SYS_ADMIN; the test skips elsewhere, saying why)."""
    path.mkdir(parents=True)
    options = f"size={size}" + (",ro" if readonly else "")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): needs root with CAP_SYS_ADMIN")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.mark.slow  # three CLI runs in subprocesses (about 15 s)
def test_a_disk_that_fills_mid_run_ends_in_one_line_and_the_rerun_scores_as_a_clean_run(tmp_path):
    """--out on a 48 kB tmpfs: the run stops with one line that names the log and says how to go on (before: a
    58-line ENOSPC traceback and a torn row); once space is freed the same command finishes the run, and its rows
    and scores are a clean run's (before: an episode kept with turns 0-4 and no end, Recall 96.7 for 100)."""
    args = ["evaluate", COMBO, "--dataset", "humaneval", "--limit", "12", "--max-turns", "2", "--strength", "0.3",
            "--no-progress", "--no-report", "--concurrency", "2"]
    clean = tmp_path / "clean"
    done = subprocess.run([*CLI, *args, "--out", str(clean)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    with _tmpfs(tmp_path / "small", "48k") as small:
        full = subprocess.run([*CLI, *args, "--out", str(small)], capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert full.returncode == 2, full.stdout[-1000:] + full.stderr[-2000:]
        assert "Traceback" not in full.stderr
        assert full.stderr.strip().splitlines()[-1] == (
            f"convcodeworld evaluate: error: cannot write {small / TURNS_FILE} (No space left on device); every finished "
            "episode is kept in the log: free space (or fix the folder) and rerun the same command to resume")
        kept = read_turns(small)
        assert kept and split_finished(kept)[1] == []  # whole episodes only
        subprocess.run(["mount", "-o", "remount,size=4m", str(small)], check=True)
        resumed = subprocess.run([*CLI, *args, "--out", str(small)], capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        assert sorted(map(_key, read_turns(small))) == sorted(map(_key, read_turns(clean)))
        assert sorted(read_turns(small), key=_key) == sorted(read_turns(clean), key=_key)


# ------------------------------------------------------------------------------------------ item 2: one run a folder


_HOLDER = r"""
import sys, time
from convcodeworld_gym.records import RunFolderLock
held = RunFolderLock(sys.argv[1])
print("held", flush=True)
time.sleep(120)
"""


def test_a_folder_is_held_by_one_run_and_a_killed_run_leaves_it_free(tmp_path, executor, capsys):
    """A second run into a folder another process holds is refused in one line naming that process (before: both
    played every episode, 64 rows for 32 episodes); once the holder is killed (SIGKILL), the folder is free."""
    run_dir = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(run_dir), "--api-key", "sk-held-SECRET-123"],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunFolderBusy) as refused:
            _run(run_dir, executor)
        message = str(refused.value)
        assert f"pid {holder.pid} on host {os.uname().nodename}" in message and "-c" in message
        assert "sk-held-SECRET" not in message and "--api-key REDACTED" in message  # a secret option's value is masked
        assert refused.value.holder["pid"] == holder.pid
        assert main(["evaluate", COMBO, "--dataset", "humaneval", "--limit", "2", "--out", str(run_dir),
                     "--no-progress"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"convcodeworld evaluate: error: {run_dir} is in use by another run "
                                                   f"(pid {holder.pid}")
        assert not (run_dir / TURNS_FILE).exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    summary = _run(run_dir, executor)  # nothing stuck: the kernel dropped the lock with its process
    assert summary.played == {COMBO: 6}


# ------------------------------------------------------------------------------------------ item 3: the resume check


def _openai_args(base_url: str, out: Path, *extra: str) -> list[str]:
    return ["evaluate", "CF", "--dataset", "humaneval", "--limit", "2", "--max-turns", "1", "--model", "m",
            "--base-url", base_url, "--api-key", "sk-resume-SECRET-42", "--out", str(out), "--no-progress", "--no-report",
            *extra]


def test_a_resume_compares_what_changes_results_by_name_and_ignores_how_the_endpoint_is_reached(tmp_path, capsys):
    """max_tokens is stored, and a resume with another is refused naming it (before: stored "<redacted>", resumed
    silently); another host or port (localhost for 127.0.0.1), --timeout or --max-retries resumes (before: refused,
    "differing: policy")."""
    out = tmp_path / "run"
    reply = "```python\ndef wrong():\n    return None\n```"
    with ScriptedOpenAIServer([reply, Reply(status=401, content="bad key")]) as first:  # fails on the second task
        assert main(_openai_args(first.base_url, out, "--concurrency", "1")) == 2
    assert "HTTP 401" in capsys.readouterr().err and len(read_turns(out)) == 2  # task 0's two turns
    meta = json.loads((out / "metadata.json").read_text())
    policy = meta["config"]["policy"]
    assert policy["max_tokens"] == 2048 and policy["model"] == "m" and "sk-resume" not in json.dumps(meta)
    assert len(meta["config"]["prompts"]) == 64
    capsys.readouterr()
    with ScriptedOpenAIServer(lambda body: reply) as second:  # another port; localhost for 127.0.0.1
        url = second.base_url.replace("127.0.0.1", "localhost")
        assert main(_openai_args(url, out, "--max-tokens", "16")) == 2
        err = capsys.readouterr().err
        assert "policy.max_tokens: 2048 -> 16" in err and len(err.strip().splitlines()) == 1
        assert main(_openai_args(url, out, "--temperature", "0.7", "--seed", "3")) == 2
        err = capsys.readouterr().err
        assert "policy.temperature: 0.0 -> 0.7" in err and "seed: 0 -> 3" in err
        assert main(_openai_args(url, out, "--timeout", "30", "--max-retries", "1", "--concurrency", "1")) == 0
        assert len(second.chat_requests) == 1  # the other task, played through the new endpoint
    printed = capsys.readouterr().out
    assert "CF: 1 episodes played, 1 already done" in printed


def test_a_run_the_api_started_resumes_from_the_command_line_and_the_reverse(tmp_path, executor, capsys):
    """The same run by the Python API (no simulator settings given) and by the command line (which writes
    ``backend: auto`` and the seed out): either resumes the other (before: refused, "verbal_env_kwargs.simulator_kwargs
    .backend: (not set) -> auto"); a simulator seed that differs is still refused."""
    by_api = tmp_path / "api"
    _run(by_api, executor)
    assert main([*_ARGS, "--out", str(by_api)]) == 0
    assert f"{COMBO}: 0 episodes played, 6 already done" in capsys.readouterr().out
    by_cli = tmp_path / "cli"
    assert main([*_ARGS, "--limit", "2", "--out", str(by_cli)]) == 0
    assert _run(by_cli, executor, limit=2).played == {COMBO: 0}
    with pytest.raises(RunConfigMismatch, match=r"verbal_env_kwargs\.simulator_kwargs\.seed: 0 -> 5"):
        _run(by_cli, executor, limit=2, verbal_env_kwargs={"simulator_kwargs": {"seed": 5}})


def test_config_mismatch_names_each_differing_field(tmp_path, executor):
    _run(tmp_path / "run", executor, limit=1)
    with pytest.raises(RunConfigMismatch, match=r"max_turns: 4 -> 3; seed: 0 -> 1"):
        _run(tmp_path / "run", executor, limit=1, max_turns=3, seed=1)


# --------------------------------------------------------------------------------- item 4: the user's files stay


def test_the_runner_never_overwrites_a_file_it_did_not_write(tmp_path, clean, capsys):
    """--out a folder holding the user's report.md (before: overwritten); report --out the same; the runner's own
    report files are written again; one the user changed since is not."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.md").write_text("my own notes\n")
    (mine / "mrr_recall.csv").write_text("a,b\n")
    assert main(["evaluate", COMBO, "--dataset", "humaneval", "--limit", "1", "--out", str(mine), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "holds report.md, mrr_recall.csv, which convcodeworld did not write" in err
    assert main(["report", str(clean), "--out", str(mine)]) == 2
    assert "which convcodeworld did not write" in capsys.readouterr().err
    assert (mine / "report.md").read_text() == "my own notes\n" and (mine / "mrr_recall.csv").read_text() == "a,b\n"
    assert sorted(p.name for p in mine.iterdir()) == ["mrr_recall.csv", "report.md"]

    ours = tmp_path / "ours"
    write_report(clean, ours)
    first = (ours / "report.md").read_bytes()
    write_report(clean, ours)  # its own files: written again
    assert (ours / "report.md").read_bytes() == first
    (ours / "pass_at_turn.csv").write_text("edited by hand\n")
    assert main(["report", str(clean), "--out", str(ours)]) == 2
    assert "pass_at_turn.csv, changed since convcodeworld wrote it" in capsys.readouterr().err
    assert (ours / "pass_at_turn.csv").read_text() == "edited by hand\n"


def test_a_run_folder_from_before_the_list_of_written_files_is_the_runners(tmp_path, clean):
    old = tmp_path / "old"
    old.mkdir()
    for name in (TURNS_FILE, "metadata.json", "report.md"):
        shutil.copy(clean / name, old / name) if (clean / name).exists() else (old / name).write_text("x")
    write_report(old)  # its report.md is taken as the runner's
    assert (old / "report.md").read_text().startswith("| Turn |")


def test_the_runner_and_its_writer_share_the_folder_and_free_it(tmp_path):
    """Holds are counted in a process (the runner and the log writer it opens both hold the folder); once both let
    go, another process takes it."""
    writer = EpisodeLogWriter(tmp_path)
    second = EpisodeLogWriter(tmp_path)  # the same process: no refusal
    writer.close()
    probe = "import sys; from convcodeworld_gym.records import RunFolderLock; RunFolderLock(sys.argv[1]).release(); print('ok')"
    held = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "is in use by another run" in held.stderr  # the second hold still holds it
    second.close()
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.stdout.strip() == "ok", done.stderr


def test_a_run_an_older_version_started_resumes_and_says_what_it_cannot_check(tmp_path, executor):
    """metadata.json of before issue 51 (no schema, no prompts' digest, max_tokens stored as "<redacted>"): the run
    resumes, and its first line names what the resume could not check (not a refusal for "prompts: (not set)")."""
    run_dir = tmp_path / "run"
    _run(run_dir, executor, limit=2)
    meta = json.loads((run_dir / "metadata.json").read_text())
    del meta["schema"], meta["config"]["prompts"]
    meta["config"]["executor_limits"]["suite_timeout_s"] = "<redacted>"  # as the old redaction stored a non-secret
    (run_dir / "metadata.json").write_text(json.dumps(meta))
    (run_dir / ".convcodeworld-files.json").unlink()  # nor did it list its files
    said: list[str] = []
    summary = _run(run_dir, executor, said, limit=2)
    assert summary.resumed == {COMBO: 2} and summary.played == {COMBO: 0}
    assert said == [f"note: {run_dir / 'metadata.json'} was written by an older version, which did not record "
                    "executor_limits.suite_timeout_s, prompts: this resume cannot check that they are the same"]
    with pytest.raises(RunConfigMismatch, match="seed: 0 -> 1"):  # what it did record is still compared
        _run(run_dir, executor, limit=2, seed=1)
