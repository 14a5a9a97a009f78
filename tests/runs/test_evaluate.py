"""The evaluation runner end to end: the real CLI against a real local OpenAI-compatible server,
runner-level metric fixtures, resume after a real SIGKILL, and the README's main job."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from convcodeworld_gym.cli import main
from convcodeworld_gym.runs.evaluate import EvalConfig, RunConfigMismatch, run_evaluation
from convcodeworld_gym.policies import ReplayPolicy, SyntheticCoder
from convcodeworld_gym.records import TURNS_FILE, read_turns
from convcodeworld_gym.runs.report import load_report, write_report
from convcodeworld_gym.testing import ScriptedOpenAIServer

SECRET = "sk-test-SECRET-must-not-leak-9876"
REPO = Path(__file__).resolve().parents[2]


def _csv(path: Path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def test_evaluate_cli_against_a_local_openai_server_wrong_then_right(tmp_path, humaneval, capsys):
    tasks = humaneval.subset(limit=2)
    truth = {t.prompt.strip(): t.ground_truth for t in tasks}

    def script(body):
        user = body["messages"][-1]["content"]
        if "Previous code" not in user:
            return "Here you go:\n```python\ndef wrong():\n    return None\n```"
        task = next(prompt for prompt in truth if prompt in user)
        return f"Fixed:\n```python\n{truth[task]}\n```"

    out = tmp_path / "run"
    with ScriptedOpenAIServer(script) as server:
        rc = main([
            "evaluate", "ConvCodeWorld-CF-EF_full-v0", "--dataset", "humaneval", "--limit", "2",
            "--policy", "openai", "--model", "scripted-model", "--base-url", server.base_url, "--api-key", SECRET,
            "--out", str(out), "--no-progress", "--concurrency", "2",
        ])
        requests = server.chat_requests
    printed = capsys.readouterr().out
    assert rc == 0
    assert len(requests) == 4
    # the refinement request carries the previous code and this turn's execution feedback
    refinements = [r["messages"][-1]["content"] for r in requests if "Previous code" in r["messages"][-1]["content"]]
    assert len(refinements) == 2 and all("def wrong()" in r and "TEST_1" in r for r in refinements)

    pass_rows = _csv(out / "pass_at_turn.csv")
    assert pass_rows[0] == ["Turn", "CF EF(full)"]
    assert pass_rows[1] == ["0", "0.0"] and pass_rows[2] == ["1", "100.0"] and pass_rows[-1] == ["10", "100.0"]
    assert _csv(out / "mrr_recall.csv") == [["Metric", "CF EF(full)"], ["MRR", "50.0"], ["Recall", "100.0"]]
    assert "|    1 |       100.0 |" in printed and "|    MRR |        50.0 |" in printed
    assert f"plot: {out / 'pass_at_turn.png'}" in printed

    import datasets

    ds = datasets.load_dataset("json", data_files=str(out / TURNS_FILE), split="train")
    assert ds.num_rows == 4 and sorted(zip(ds["task_id"], ds["turn"])) == [(t.task_id, k) for t in tasks for k in (0, 1)]
    assert all(u["total_tokens"] > 0 for u in ds["usage"]) and all(p == "scripted-model" for p in ds["policy"])
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["config"]["policy"]["model"] == "scripted-model" and meta["config"]["dataset"]["n_tasks"] == 2
    assert len(meta["config"]["dataset"]["sha256"]) == 64 and meta["packages"]["openai"] and meta["python"]
    for path in out.rglob("*"):  # the key reached the server but never a file
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_runner_metrics_on_hand_computed_episodes(tmp_path, humaneval, executor):
    """Solved at turn 0, solved at turn 10, never solved: Pass@1, MRR and Recall by hand."""
    ids = ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    wrong = "```python\ndef nope():\n    return 0\n```"
    rows = [
        {"task_id": ids[0], "solution": humaneval[ids[0]].ground_truth},
        {"task_id": ids[1], "turn": 0, "reply": wrong},
        {"task_id": ids[1], "turn": 10, "reply": humaneval[ids[1]].ground_truth},
        {"task_id": ids[2], "turn": 0, "reply": wrong},
    ]
    replies = tmp_path / "replies.jsonl"
    replies.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = EvalConfig(ids=("ConvCodeWorld-CF-EF_full-v0",), dataset="humaneval", task_ids=tuple(ids), concurrency=2)
    summary = run_evaluation(config, ReplayPolicy(replies), tmp_path / "run", executor=executor, progress=None)
    assert summary.played == {"CF-EF_full": 3}
    report = load_report(tmp_path / "run")
    scores = report.scores["CF-EF_full"]
    assert scores.pass_at_turn == (1 / 3,) * 10 + (2 / 3,)
    assert scores.mrr == pytest.approx((1 + 1 / 11 + 0) / 3)
    assert scores.recall == pytest.approx(2 / 3)
    header, table = report.mrr_table()
    assert table == [["MRR", "36.4"], ["Recall", "66.7"]]
    assert sorted(r.turn for r in read_turns(tmp_path / "run") if r.task_id == ids[1]) == list(range(11))
    # what judged the programs: the runtime interpreter and its libraries (not only this process's packages)
    runtime = json.loads((tmp_path / "run" / "metadata.json").read_text())["runtime"]
    probe = executor.runtime_probe()
    assert runtime["python"] == probe.python and runtime["version"] == sys.version.split()[0] == probe.describe()["version"]
    assert runtime["packages"] and runtime["packages"] == probe.describe()["packages"]
    if os.path.abspath(probe.python) == os.path.abspath(sys.executable):  # the env's own venv judged (no runtime installed)
        assert runtime["packages"]["convcodeworld-gym"]
    # resuming with other settings is refused, naming what differs
    with pytest.raises(RunConfigMismatch, match="seed"):
        run_evaluation(EvalConfig(ids=config.ids, dataset="humaneval", task_ids=tuple(ids), seed=1), ReplayPolicy(replies),
                       tmp_path / "run", executor=executor, progress=None)


class _Expert:
    """A tiny verbal-feedback provider for the Python API (no simulator needed)."""

    expertise = "expert"
    source = "test-provider"

    def __call__(self, context):
        return None if context.result.passed else f"Turn {context.turn}: look again at the comparisons."


def test_verbal_kwargs_reach_only_verbal_ids(tmp_path, humaneval, executor):
    config = EvalConfig(
        ids=("ConvCodeWorld-CF-v0", "ConvCodeWorld-CF-SEF-v0"), dataset="humaneval", limit=4, max_turns=3,
        verbal_env_kwargs={"verbal_feedback": _Expert()},
    )
    summary = run_evaluation(config, SyntheticCoder(0.5), tmp_path, executor=executor, progress=None)
    assert summary.played == {"CF": 4, "CF-SEF": 4} and not summary.skipped
    rows = read_turns(tmp_path)
    sef = [r for r in rows if r.feedback == "CF-SEF"]
    assert all(r.verbal_feedback == "" for r in rows if r.feedback == "CF")
    failed = [r for r in sef if not r.passed]
    assert failed and all(r.verbal_feedback.startswith(f"Turn {r.turn}:") and r.verbal_feedback_source == "test-provider" for r in failed)
    meta = json.loads((tmp_path / "metadata.json").read_text())
    assert meta["config"]["verbal_env_kwargs"] == {"verbal_feedback": "<_Expert>"} and meta["synthetic"] is True


def _cli(out: Path) -> list[str]:
    return [
        sys.executable, "-m", "convcodeworld_gym.cli", "evaluate", "CF", "CF-EF_full", "--dataset", "humaneval",
        "--limit", "20", "--max-turns", "4", "--strength", "0.3", "--out", str(out), "--no-progress", "--no-report",
        "--concurrency", "2",
    ]


def test_resume_after_sigkill_matches_an_uninterrupted_run(tmp_path):
    env = {k: v for k, v in os.environ.items()}
    killed_dir, clean_dir = tmp_path / "killed", tmp_path / "clean"
    proc = subprocess.Popen(_cli(killed_dir), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = killed_dir / TURNS_FILE
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if log.exists() and log.read_bytes().count(b"\n") >= 25:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL  # killed mid-run, not finished
    written = log.read_bytes().count(b"\n")
    assert 25 <= written
    subprocess.run(_cli(killed_dir), env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(_cli(clean_dir), env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    resumed, clean = read_turns(killed_dir), read_turns(clean_dir)
    keys = [(r.feedback, r.task_id, r.turn) for r in resumed]
    assert len(keys) == len(set(keys)), "duplicated turns after resume"
    assert {(f, t) for f, t, _ in keys} == {(f, f"HumanEval/{i}") for f in ("CF", "CF-EF_full") for i in range(20)}
    assert len(resumed) > written  # the rerun played the rest
    assert resumed == clean  # every field but the timings (measurements)
    assert (killed_dir / "metadata.json").read_bytes() == (clean_dir / "metadata.json").read_bytes()
    write_report(killed_dir)
    write_report(clean_dir)
    for name in ("report.md", "pass_at_turn.csv", "mrr_recall.csv"):
        assert (killed_dir / name).read_bytes() == (clean_dir / name).read_bytes(), name


def test_readme_main_job_on_a_small_limit(tmp_path):
    """The README's first command (console script, default ids, policy and output directory), on 3 tasks."""
    script = Path(sys.executable).with_name("convcodeworld")
    assert script.exists(), "install the package (pip install -e .) to get the console script"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    line = next(l for l in readme.splitlines() if "bin/convcodeworld evaluate" in l)  # the quick start's first command
    args = line.split("bin/convcodeworld ", 1)[1].split()
    args[args.index("--limit") + 1] = "3"
    command = [str(script), *args]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "Table 1. Pass@1 (%)" in out and "Table 2. MRR and Recall (%)" in out and "SYNTHETIC" in out
    plot = Path(out.split("plot: ", 1)[1].splitlines()[0])
    plot = plot if plot.is_absolute() else tmp_path / plot
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    assert matplotlib.image.imread(plot).shape[0] > 300
    header = _csv(plot.with_name("pass_at_turn.csv"))[0]
    assert header[:4] == ["Turn", "CF", "CF EF(partial)", "CF EF(full)"]


def test_model_without_policy_selects_the_openai_policy(tmp_path, capsys):
    """--model / --base-url alone select the OpenAI-compatible policy (they were ignored before);
    its requests carry the paper's settings: temperature 0, at most 2048 new tokens."""
    out = tmp_path / "run"
    with ScriptedOpenAIServer(lambda body: "```python\ndef wrong():\n    return None\n```") as server:
        rc = main([
            "evaluate", "CF", "--dataset", "humaneval", "--limit", "1", "--model", "scripted-model",
            "--base-url", server.base_url, "--out", str(out), "--no-progress", "--no-report",
        ])
        bodies = server.chat_requests
    assert rc == 0
    # the reference protocol: CF says nothing on code that compiles, so turn 0 is the only call
    assert len(bodies) == 1 and bodies[0]["max_tokens"] == 2048 and bodies[0]["temperature"] == 0.0
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["config"]["policy"]["model"] == "scripted-model" and not meta["synthetic"]
    assert meta["config"]["protocol"] == "reference" and meta["config"]["feedback_style"] == "reference"
    rows = read_turns(out)
    assert [r.model_calls for r in rows] == [1] + [0] * 10
    capsys.readouterr()
    rc = main(["evaluate", "CF", "--dataset", "humaneval", "--limit", "1", "--policy", "synthetic", "--model", "m",
               "--out", str(tmp_path / "bad"), "--no-progress"])
    assert rc == 2 and "--model / --base-url are options of the openai policy" in capsys.readouterr().err


def test_a_reply_with_a_lone_surrogate_is_stored_and_sent_on_safely(tmp_path, humaneval, capsys):
    """A reply carrying a lone surrogate (``\\ud800``, valid JSON): the run goes on, the next request carries the
    previous code with U+FFFD in its place, and the log stores it so (before: "'utf-8' codec can't encode character"
    on the next request, every retry, so the run could never finish)."""
    truth = humaneval["HumanEval/0"].ground_truth

    def script(body):
        if "Previous code" not in body["messages"][-1]["content"]:
            return "```python\ndef has_close_elements(numbers, threshold):\n    return '\ud800' == 1\n```"
        return f"```python\n{truth}\n```"

    out = tmp_path / "run"
    with ScriptedOpenAIServer(script) as server:
        rc = main(["evaluate", "CF-EF_full", "--dataset", "humaneval", "--task-ids", "HumanEval/0", "--max-turns", "2",
                   "--model", "m", "--base-url", server.base_url, "--max-retries", "0", "--out", str(out),
                   "--no-progress", "--no-report"])
        requests = server.chat_requests
    assert rc == 0, capsys.readouterr().err
    assert len(requests) == 2
    sent = requests[1]["messages"][-1]["content"]
    assert "return '\ufffd' == 1" in sent and "\ud800" not in sent
    rows = read_turns(out)
    assert [r.turn for r in rows] == [0, 1] and rows[1].passed
    assert "'\ufffd'" in rows[0].reply and "'\ufffd'" in rows[0].code
    import datasets

    assert datasets.load_dataset("json", data_files=str(out / TURNS_FILE), split="train").num_rows == 2
