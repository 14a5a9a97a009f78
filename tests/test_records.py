"""Episode logs: append-only whole episodes, torn-line repair, reading back through datasets."""

from __future__ import annotations

import gymnasium as gym

import convcodeworld_gym  # noqa: F401
from convcodeworld_gym.records import EpisodeLogWriter, TurnRecord, group_episodes, read_turns, turn_record


def _episode(env, task_id: str, replies: list[str]) -> list[TurnRecord]:
    rows = []
    env.reset(options={"task_id": task_id})
    for reply in replies:
        obs, reward, terminated, truncated, info = env.step(reply)
        rows.append(turn_record(feedback="CF-EF_full", reply=reply, obs=obs, reward=reward, info=info, policy="scripted"))
        if terminated or truncated:
            break
    return rows


def test_round_trip_and_torn_line_repair(tmp_path):
    env = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset="humaneval")
    one_turn = gym.make("ConvCodeWorld-CF-EF_full-v0", dataset="humaneval", max_turns=0)
    gt = env.unwrapped.tasks["HumanEval/0"].ground_truth
    with EpisodeLogWriter(tmp_path) as writer:
        writer.write_episode(_episode(env, "HumanEval/0", ["def nope(:", gt]))
    # a run killed in the middle of an append leaves a torn last line
    with open(tmp_path / "turns.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"feedback": "CF-EF_full", "task_id": "HumanEval/1", "sample": 2, "tu')
    writer = EpisodeLogWriter(tmp_path)
    assert writer.done == {("CF-EF_full", "HumanEval/0", 0)}
    assert writer.repaired == [("CF-EF_full", "HumanEval/1", 2)]  # the torn line's episode: played again
    writer.write_episode(_episode(one_turn, "HumanEval/1", ["pass"]))
    writer.close()
    one_turn.close()
    rows = read_turns(tmp_path)
    assert [(r.task_id, r.turn) for r in rows] == [("HumanEval/0", 0), ("HumanEval/0", 1), ("HumanEval/1", 0)]
    first = rows[0]
    assert not first.compile_ok and first.compilation_feedback.startswith("Traceback")
    assert rows[1].passed and rows[1].episode_end == "passed" and rows[1].reward == 1.0
    assert rows[2].tests and not rows[2].passed and rows[2].tests[0]["outcome"] in {"failed", "error", "not_run"}
    groups = group_episodes(reversed(rows))
    assert [r.turn for r in groups[("CF-EF_full", "HumanEval/0", 0)]] == [0, 1]
    env.close()
