"""Importing the reference repository's result files (fixtures in its format) and replaying them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import convcodeworld_gym  # noqa: F401 - registers the ids
from convcodeworld_gym import ReferenceLogError
from convcodeworld_gym.cli import main
from convcodeworld_gym.records import iter_jsonl, read_turns
from convcodeworld_gym.runs.reference_import import REFERENCE_SOURCE, import_reference, iteration_files

FIXTURES = Path(__file__).parent / "fixtures" / "reference"
TURN0 = FIXTURES / "codellama--CodeLlama-7b-Instruct-hf--humaneval-instruct--vllm-0-1-sanitized-calibrated.jsonl"
ITER1 = FIXTURES / "humaneval_codellama_CodeLlama-7b-Instruct-hf_CF_EF_FULL_SEF_by_gpt-4o.jsonl"
ITER2 = FIXTURES / "humaneval_codellama_CodeLlama-7b-Instruct-hf_CF_EF_FULL_SEF_by_gpt-4o_ITER=2.jsonl"


def _rows_of(path: Path) -> dict[str, dict]:
    return {row["task_id"]: row for row in iter_jsonl(path)}


def _status(path: Path) -> dict[str, str]:
    data = json.loads(path.with_name(path.stem + "_eval_results.json").read_text())
    return {task_id: results[0]["status"] for task_id, results in data["eval"].items()}


def test_iteration_files_are_found_in_order():
    assert iteration_files(ITER1) == [ITER1, ITER2]


def test_cli_import_reads_the_fixtures_into_the_log_schema(tmp_path):
    out = tmp_path / "reference"
    assert main(["import-reference", str(TURN0), str(ITER1), "--discover", "--feedback", "CF-EF_full-SEF",
                 "--out", str(out), "--policy", "codellama/CodeLlama-7b-Instruct-hf", "--max-turns", "2"]) == 0
    rows = read_turns(out)
    files = [TURN0, ITER1, ITER2]
    generations = [_rows_of(f) for f in files]
    statuses = [_status(f) for f in files]
    # each episode stops at its first pass; the copies of a solved task's code are dropped
    assert [(r.task_id, r.turn) for r in rows] == [
        ("HumanEval/0", 0), ("HumanEval/1", 0), ("HumanEval/1", 1), ("HumanEval/2", 0), ("HumanEval/2", 1), ("HumanEval/2", 2),
    ]
    for row in rows:
        t = row.turn
        assert row.feedback == "CF-EF_full-SEF" and row.policy == "codellama/CodeLlama-7b-Instruct-hf"
        assert row.code == row.reply == generations[t][row.task_id]["solution"]
        assert row.passed == (statuses[t][row.task_id] == "pass") and row.reward == float(row.passed)
        # the feedback on turn t's code is what iteration t+1 was generated from
        following = generations[t + 1].get(row.task_id, {}) if t + 1 < len(files) else {}
        assert row.compilation_feedback == (following.get("compilation_feedback") or "")
        assert row.execution_feedback == (following.get("execution_feedback") or "")
        assert row.verbal_feedback == (following.get("user_feedback") or "")
        assert row.verbal_feedback_source == (REFERENCE_SOURCE if row.verbal_feedback else "")
    by_key = {(r.task_id, r.turn): r for r in rows}
    assert not by_key[("HumanEval/1", 0)].compile_ok and by_key[("HumanEval/1", 1)].compile_ok
    assert by_key[("HumanEval/1", 0)].compilation_feedback.startswith("Traceback")
    assert by_key[("HumanEval/2", 0)].verbal_feedback  # the expert spoke
    assert [t["name"] for t in by_key[("HumanEval/2", 0)].tests] == ["test_1", "test_2"]
    assert [(r.task_id, r.episode_end) for r in rows if r.episode_end] == [
        ("HumanEval/0", "passed"), ("HumanEval/1", "passed"), ("HumanEval/2", "max_turns"),
    ]
    # importing again appends nothing
    main(["import-reference", str(TURN0), str(ITER1), str(ITER2), "--feedback", "CF-EF_full-SEF", "--out", str(out), "--max-turns", "2"])
    assert len(read_turns(out)) == len(rows)


def test_imported_log_replays_statically(tmp_path, executor):
    rows = import_reference([TURN0, ITER1, ITER2], feedback="CF-EF_full-SEF", max_turns=2)
    env = gym.make("ConvCodeBench-CF-EF_full-SEF-v0", log=rows, dataset="humaneval", executor=executor, max_turns=2)
    assert env.unwrapped.tasks.ids == ("HumanEval/0", "HumanEval/1", "HumanEval/2")
    obs, info = env.reset(options={"task_id": "HumanEval/2"})
    first = _rows_of(ITER1)["HumanEval/2"]
    assert obs["code"] == _rows_of(TURN0)["HumanEval/2"]["solution"]
    assert (obs["execution_feedback"], obs["verbal_feedback"]) == (first["execution_feedback"], first["user_feedback"])
    obs, reward, terminated, truncated, info = env.step("def truncate_number(number: float) -> float:\n    return 0.0")
    assert reward == 0.0 and obs["code"] == first["solution"] and obs["verbal_feedback"] == _rows_of(ITER2)["HumanEval/2"]["user_feedback"]
    obs, reward, terminated, truncated, info = env.step(env.unwrapped.task.ground_truth)
    assert reward == 1.0 and terminated and info["episode_end"] == "passed" and info["turn"] == 2
    env.close()


def test_import_errors_name_the_file_and_task(tmp_path):
    with pytest.raises(ReferenceLogError, match="no evaluation next to it: expected .*_eval_results.json"):
        copy = tmp_path / ITER1.name
        shutil.copy(ITER1, copy)
        import_reference([TURN0, copy], feedback="CF-EF_full-SEF")
    lacking = tmp_path / "lacking.jsonl"
    lacking.write_text("".join(json.dumps(r) + "\n" for r in iter_jsonl(ITER1) if r["task_id"] != "HumanEval/2"))
    shutil.copy(ITER1.with_name(ITER1.stem + "_eval_results.json"), tmp_path / "lacking_eval_results.json")
    with pytest.raises(ReferenceLogError, match="lacking.jsonl has no result for task 'HumanEval/2' \\(turn 1\\)"):
        import_reference([TURN0, lacking], feedback="CF-EF_full-SEF")
    (tmp_path / "lacking_eval_results.json").write_text(json.dumps({"eval": {"HumanEval/0": [{"details": {}}]}}))
    with pytest.raises(ReferenceLogError, match="lacking_eval_results.json, task 'HumanEval/0': expected"):
        import_reference([TURN0, lacking], feedback="CF-EF_full-SEF")
    with pytest.raises(ValueError, match="unknown feedback combination"):
        import_reference([TURN0], feedback="CF_EF_FULL_SEF")
