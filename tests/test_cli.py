"""The command line with bad input and as a new user meets it (issue 51, items 6 and 7): every bad input below gets
one line that names it and the fix (before: tracebacks of 25-78 lines), and the rough edges are gone (help and its
defaults, --version, demo counts, the ConvCodeBench hint, an endpoint that is down or hung found before the run)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from convcodeworld_gym import __version__
from convcodeworld_gym.cli import build_parser, main
from convcodeworld_gym.errors import RunLogError
from convcodeworld_gym.policies import OpenAIPolicy
from convcodeworld_gym.policies.llm import LLMError
from convcodeworld_gym.records import TURNS_FILE
from convcodeworld_gym.testing import ScriptedOpenAIServer
from convcodeworld_gym.testing.openai_server import Reply

ROOT = Path(__file__).resolve().parents[1]
QUICK = ["--dataset", "humaneval", "--limit", "2", "--max-turns", "1", "--no-progress"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A finished CF-EF_full run of 2 tasks (the CLI's own)."""
    out = tmp_path_factory.mktemp("cli") / "run"
    assert main(["evaluate", "CF-EF_full", *QUICK, "--out", str(out), "--no-report"]) == 0
    return out


def _error(capsys, argv: list[str]) -> str:
    """The one line ``convcodeworld`` prints for ``argv``'s bad input (exit status 2), without its prefix."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # one line, no traceback
    prefix = f"convcodeworld {argv[0]}: error: "
    assert err[0].startswith(prefix), err[0]
    return err[0][len(prefix):]


# --------------------------------------------------------------------------------------------- item 6: bad input


def test_report_on_an_empty_log(tmp_path, capsys):
    (tmp_path / TURNS_FILE).write_text("")  # before: 33 lines ending in StopIteration
    line = _error(capsys, ["report", str(tmp_path)])
    assert f"{tmp_path / TURNS_FILE} holds no rows" in line and f"--out {tmp_path}" in line


def test_report_on_a_corrupt_line_names_the_line(tmp_path, run_dir, capsys):
    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    lines = (bad / TURNS_FILE).read_text().splitlines(keepends=True)
    lines[1] = lines[1][:40] + "\n"  # a torn line in the middle (before: 78 lines, DatasetGenerationError)
    (bad / TURNS_FILE).write_text("".join(lines))
    line = _error(capsys, ["report", str(bad)])
    assert f"{bad / TURNS_FILE}, line 2: not valid JSON" in line and "delete it" in line


def test_report_on_a_torn_last_line_scores_the_finished_episodes(tmp_path, run_dir, capsys):
    torn = tmp_path / "torn"
    shutil.copytree(run_dir, torn)
    (torn / TURNS_FILE).write_bytes((torn / TURNS_FILE).read_bytes()[:-30])
    capsys.readouterr()
    assert main(["report", str(torn)]) == 0
    assert "1 unfinished episode(s) left out" in capsys.readouterr().out


@pytest.mark.parametrize("content, expected", [
    ("", "has no rows for combination CF-EF_full"),
    ("{}\nnot json\n{}\n", "line 1: a row without feedback, task_id, turn"),
    ("not json\n{}\n", "line 1: not valid JSON"),
])
def test_a_static_replay_of_an_empty_or_corrupt_log(tmp_path, capsys, content, expected):
    log = tmp_path / TURNS_FILE
    log.write_text(content)  # before: 71 and 27 lines of traceback
    line = _error(capsys, ["evaluate", "ConvCodeBench-CF-EF_full-v0", "--env-kwarg", f"log={log}", *QUICK,
                           "--out", str(tmp_path / "static")])
    assert expected in line and str(log) in line


def test_out_a_file(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")  # before: FileExistsError
    line = _error(capsys, ["evaluate", "CF", *QUICK, "--out", str(tmp_path / "afile")])
    assert line == f"{tmp_path / 'afile'} is a file, not a folder; pass a folder as --out (a new one, or the folder of the run to resume)"


@contextlib.contextmanager
def _read_only_folder(path: Path) -> Iterator[Path]:
    """A folder this process cannot write: a read-only tmpfs for root (who may write anywhere else; the test skips
    where mounting is not allowed), else a folder without write permission."""
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs as root here ({done.stderr.strip()}): needs CAP_SYS_ADMIN")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_out_a_read_only_folder(tmp_path, capsys):
    with _read_only_folder(tmp_path / "ro") as folder:
        line = _error(capsys, ["evaluate", "CF", *QUICK, "--out", str(folder)])
    assert line.startswith(f"cannot write in {folder} (") and "pass an --out folder you can write in" in line


def test_an_env_kwarg_the_env_lacks(tmp_path, capsys):
    line = _error(capsys, ["evaluate", "CF", *QUICK, "--env-kwarg", "nonsense=1", "--out", str(tmp_path / "x")])
    assert line.startswith("--env-kwarg nonsense: not an option of ConvCodeWorld-CF-v0; drop it (its options: ")
    assert len(line) < 400 and "Task(" not in line  # before: 25 lines, the last 2,700 characters, every task printed


def test_an_empty_task_file(tmp_path, capsys):
    (tmp_path / "tasks.jsonl").write_text("\n")  # before: "could not read task file ... with datasets: " (no reason)
    line = _error(capsys, ["evaluate", "CF", "--dataset", str(tmp_path / "tasks.jsonl"), "--out", str(tmp_path / "x")])
    assert f"task file {str(tmp_path / 'tasks.jsonl')!r} is empty" in line


def test_a_corrupt_metadata_file_is_named(tmp_path, run_dir, capsys):
    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    (bad / "metadata.json").write_text('{"config": ')  # before: the JSON error alone
    line = _error(capsys, ["evaluate", "CF-EF_full", *QUICK, "--out", str(bad)])
    assert line.startswith(f"{bad / 'metadata.json'} is not valid JSON (")
    with pytest.raises(RunLogError, match="metadata.json is not valid JSON"):
        from convcodeworld_gym.runs.report import load_report

        load_report(bad)


def test_a_malformed_task_file_gets_one_line_and_no_datasets_noise(tmp_path):
    """Through a real process (datasets writes its progress bars and error log to the process's stderr): the one
    line and nothing before it (before: 'Generating train split' and pyarrow's 'Failed to load JSON' first, and a
    message reading 'starting at at column')."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task_id": "a", "instruct_prompt": "unterminated\n')
    done = subprocess.run([sys.executable, "-m", "convcodeworld_gym.cli", "evaluate", "CF", "--dataset", str(tasks),
                           "--out", str(tmp_path / "x"), "--no-progress"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"convcodeworld evaluate: error: {tasks}, line 1, field '<record>': not valid JSON (Unterminated string, "
        "column 37)"]


# --------------------------------------------------------------------------------------------- item 7: friction


def test_demo_plays_at_least_one_episode(capsys):
    for count in ("-1", "0"):  # before: -1 played 163 tasks, 0 none, both exit 0
        with pytest.raises(SystemExit) as stopped:
            main(["demo", "--dataset", "humaneval", "--episodes", count])
        assert stopped.value.code == 2
        assert f"argument --episodes: must be at least 1, got {count}" in capsys.readouterr().err


def test_convcodebench_without_a_log_says_how_to_pass_one(tmp_path, capsys):
    line = _error(capsys, ["evaluate", "ConvCodeBench-CF-SEF-v0", *QUICK, "--out", str(tmp_path / "x")])
    assert "--env-kwarg log=RUN_DIR" in line  # before: "pass log=<...>", the Python API's words


def test_version_help_and_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"convcodeworld {__version__}"
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices  # noqa: SLF001 - argparse's own table
    assert sub["demo"].description and "canonical solution" in sub["demo"].description
    evaluate = sub["evaluate"].format_help()
    for flag in ("--seed", "--temperature", "--max-turns"):
        assert sub["evaluate"]._option_string_actions[flag].help, flag  # noqa: SLF001
    assert "(default: auto)" in " ".join(evaluate.split())  # --simulator: a default the help did not say
    assert "corrected" in evaluate
    serve = sub["serve"].parse_args(["--feedback-style", "corrected"])  # before: refused (reference, rich only)
    assert serve.feedback_style == "corrected"


def test_an_endpoint_that_refuses_fails_before_the_run(tmp_path, capsys):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # closed once the block ends: connections are refused
    started = time.monotonic()
    line = _error(capsys, ["evaluate", "CF", *QUICK, "--model", "m", "--base-url", f"http://127.0.0.1:{port}/v1",
                           "--out", str(tmp_path / "x")])
    assert time.monotonic() - started < 8  # before: 6 tries with backoff, 32 s
    assert line.startswith(f"LLM endpoint http://127.0.0.1:{port}/v1 (model 'm'): cannot connect")


def test_a_hung_endpoint_is_found_in_seconds():
    """A server that accepts connections and never answers: found by one short question, not after 6 tries of 120 s."""
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        policy = OpenAIPolicy("m", base_url=f"http://127.0.0.1:{hung.getsockname()[1]}/v1", api_key="EMPTY")
        started = time.monotonic()
        with pytest.raises(LLMError, match=r"no answer within 1 s"):
            policy.check_endpoint(timeout_s=1.0)
        assert time.monotonic() - started < 5
        policy.close()


def test_each_retry_says_so(caplog):
    with ScriptedOpenAIServer([Reply(status=500, content="busy"), Reply(status=503, content="busy"), "ok"]) as server:
        url = server.base_url
        policy = OpenAIPolicy("m", base_url=url, api_key="EMPTY", max_retries=2, backoff_s=0.01)
        with caplog.at_level(logging.WARNING, logger="convcodeworld_gym.policies.llm"):
            reply = policy.complete([{"role": "user", "content": "hi"}])
        policy.close()
    assert reply.text == "ok"
    said = [r.getMessage() for r in caplog.records if r.name == "convcodeworld_gym.policies.llm"]
    assert len(said) == 2 and "HTTP 500: busy (try 1 of 3); trying again in 0.01 s" in said[0], said
    assert said[0].startswith(f"LLM endpoint {url} (model 'm'): ")

