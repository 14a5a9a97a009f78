"""ConvCodeWorld through verifiers: rollouts of one id with ``vf-eval convcodeworld``, their rewards read back.

The verifiers environment (``integrations/verifiers``, module ``convcodeworld``) plays each task as one episode: the
model writes a program, the env judges it in the sandbox, the feedback the id shows comes back as a user turn, until
a program passes or the turns run out; the env's reward is recorded on each trace (``rewards.env_reward``). This
program runs ``vf-eval`` (verifiers' own CLI, as a subprocess) and summarises the traces it wrote: the rollouts a
verifiers trainer (prime-rl) learns from, with the same environment id.

Install (a Python >= 3.11 venv; verifiers pins openai < 3, so keep it apart from the main venv if you need openai 3):

    pip install -e '.[verifiers]' -e integrations/verifiers

Smoke run (CPU, no model, no network): a scripted OpenAI-compatible server on 127.0.0.1 plays the coder: a wrong
program at turn 0, the task's canonical solution at turn 1, each reply with a thought returned apart from it, as vLLM's
reasoning parser returns a reasoning model's (``reasoning_content``, holding the wrong program as a draft: never judged),
so every episode's reward is 1.0 after one feedback turn. It proves the door (vf-eval's rollouts, the env's rewards on
the traces, the reasoning kept on the trace and never judged); it trains nothing:

    python training/verifiers_rollouts.py --smoke
    python training/verifiers_rollouts.py --smoke --tools     # the tool variant: the coder calls submit_program

A real model on a GPU, served by vLLM (any OpenAI-compatible endpoint works the same way):

    vllm serve Qwen/Qwen2.5-Coder-7B-Instruct --port 8000 &
    OPENAI_API_KEY=EMPTY python training/verifiers_rollouts.py --model Qwen/Qwen2.5-Coder-7B-Instruct \\
        --base-url http://localhost:8000/v1 --feedback CF-EF_full-SNF --dataset bigcodebench \\
        --limit 200 --max-turns 10 --max-concurrent 32 --out runs/verifiers

which runs (and prints) ``vf-eval convcodeworld --env.taskset.gym-id ... -m MODEL --client.base-url URL ...``.
``--feedback`` takes a combination or its gym id, as every training program's does (``--gym-id``: its deprecated
spelling). ``--reasoning keep`` reads a reasoning model's replies as the reference did (``--env.taskset.reasoning``;
default ``strip``: a ``<think>`` thought inside the reply is removed before its code is judged).

The reward-hacking canary (docs/canary.md): ``--canary 0.05 [--canary-seed 0]`` mixes canary twins into the tasks
(``--env.taskset.canary``; added after the ``--limit`` tasks), whose reward is always 0.0; each trace records the
metrics ``canary`` and ``canary_passed``, and the program prints the canary pass rate (passed twins / twins played)
beside the mean reward, never in it. An honest policy's rate is 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from convcodeworld_gym.registration import env_id
from convcodeworld_gym.training.flags import (FEEDBACK_FLAG, add_canary_arguments, add_deprecated_alias,
                                              add_feedback_argument)

__all__ = ["vf_eval_command", "canary_flags", "read_episodes", "scripted_coder", "scripted_tool_coder",
           "scripted_fitter_coder", "tool_call_completion", "fenced", "wrong_then_canonical", "wrong_program",
           "drafted_wrong", "summarise", "build_parser", "main"]

#: The environment variable vf-eval reads the endpoint's key from (``--client.api-key-var``).
API_KEY_VAR = "OPENAI_API_KEY"


def vf_eval_command(*, gym_id: str, dataset: str, limit: int, max_turns: int, model: str, base_url: str, out: Path,
                    run_name: str, api_key_var: str = API_KEY_VAR, max_concurrent: int = 32,
                    extra: Sequence[str] = ()) -> list[str]:
    """The ``vf-eval`` command line of one run: ``limit`` tasks of ``dataset`` on ``gym_id``, each one episode of at
    most ``max_turns`` feedback turns, the coder ``model`` behind ``base_url`` (its key in ``$api_key_var``),
    traces in ``out/run_name/traces.jsonl``; no upload, no dashboard. ``vf-eval`` is the console script beside this
    interpreter (else the one on ``PATH``).

    >>> cmd = vf_eval_command(gym_id="ConvCodeWorld-CF-v0", dataset="humaneval", limit=5, max_turns=1, model="m",
    ...                       base_url="http://127.0.0.1:1/v1", out=Path("o"), run_name="r")
    >>> cmd[1:3], cmd[cmd.index("--env.taskset.limit") + 1]
    (['convcodeworld', '--env.taskset.gym-id'], '5')
    """
    beside = Path(sys.executable).with_name("vf-eval")
    vf_eval = str(beside) if beside.exists() else (shutil.which("vf-eval") or "vf-eval")
    return [
        vf_eval, "convcodeworld",
        "--env.taskset.gym-id", gym_id,
        "--env.taskset.dataset", dataset,
        "--env.taskset.limit", str(limit),
        "--env.taskset.max-turns", str(max_turns),
        "-m", model,
        "--client.base-url", base_url,
        "--client.api-key-var", api_key_var,
        "--max-concurrent", str(max_concurrent),
        "--no-push", "--no-rich",
        "-o", str(out), "--run.name", run_name, "--clean",
        *extra,
    ]


def canary_flags(share: float | None, seed: int = 0) -> list[str]:
    """The ``vf-eval`` flags that mix canary twins into the taskset: a ``share`` in [0, 1) of the set played, drawn
    by ``seed`` (the gym env's ``canary=`` / ``canary_seed=``); none when ``share`` is 0 or None.

    >>> canary_flags(0.05, 1), canary_flags(0.0)
    (['--env.taskset.canary', '0.05', '--env.taskset.canary-seed', '1'], [])
    """
    if not share:
        return []
    return ["--env.taskset.canary", f"{share:g}", "--env.taskset.canary-seed", str(seed)]


def read_episodes(run_dir: Path) -> list[dict[str, Any]]:
    """The episodes ``vf-eval`` wrote to ``run_dir/traces.jsonl`` (one JSON object each: ``ok``, ``errors``, ``task``
    and ``traces``, the coder's trace first), in the order they finished."""
    with open(run_dir / "traces.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def wrong_program(task: Any) -> str:
    """A program that compiles and fails every test of ``task``: its signature, raising NotImplementedError."""
    return task.code_prompt.rstrip() + "\n    raise NotImplementedError\n"


def wrong_then_canonical(task: Any, turn: int) -> str:
    """The smoke coder's program at ``turn``: :func:`wrong_program` at turn 0, the canonical solution after."""
    return wrong_program(task) if turn == 0 else task.solution_code


def drafted_wrong(task: Any, turn: int) -> str:
    """The smoke coder's thought at every turn, returned apart from its reply (``reasoning_content``): a draft that is
    :func:`wrong_program`, which the env never judges."""
    return f"A first draft:\n{fenced(wrong_program(task))}\nNo, that is not what the task asks."


def fenced(program: str) -> str:
    """The scripted coder's reply carrying ``program``: the program in one ```python block."""
    return f"```python\n{program.rstrip()}\n```"


def scripted_coder(tasks: Sequence[Any], program: Callable[[Any, int], str],
                   thought: Callable[[Any, int], str] | None = None) -> Callable[[dict[str, Any]], Any]:
    """A script for :class:`~convcodeworld_gym.testing.ScriptedOpenAIServer` that plays the coder of every episode
    at once: a request's task is the one whose turn-0 prompt is its first user message, its turn the number of
    assistant messages before it; the answer is ``fenced(program(task, turn))``, with ``thought(task, turn)`` returned
    apart from it (the message's ``reasoning_content``, as vLLM's reasoning parser returns a reasoning model's) when
    ``thought`` is given.

    Raises:
        KeyError: a request whose first user message is no task's turn-0 prompt.
    """
    from convcodeworld_gym.testing import Reply

    def answer(task: Any, messages: Sequence[dict[str, Any]]) -> Any:
        turn = sum(m["role"] == "assistant" for m in messages)
        reply = fenced(program(task, turn))
        return reply if thought is None else Reply(reply, reasoning=thought(task, turn))

    return _by_task(tasks, answer)


def _by_task(tasks: Sequence[Any], reply: Callable[[Any, Sequence[dict[str, Any]]], Any]) -> Callable[[dict[str, Any]], Any]:
    """A script that answers a request with ``reply(task, messages)``, its task the one whose turn-0 prompt is the
    request's first user message. A task and its canary twin share a prompt: either is given, and both have the same
    code prompt and canonical solution."""
    from convcodeworld_gym.policies.prompts import initial_prompt

    by_prompt = {initial_prompt(task.prompt): task for task in tasks}

    def answer(body: dict[str, Any]) -> Any:
        messages = body["messages"]
        return reply(by_prompt[next(m["content"] for m in messages if m["role"] == "user")], messages)

    return answer


def scripted_fitter_coder(tasks: Sequence[Any]) -> Callable[[dict[str, Any]], str]:
    """:func:`scripted_coder` playing a reward hacker, the project's
    :class:`~convcodeworld_gym.testing.test_fitter.TestFitterPolicy`: the canonical solution at turn 0, then the
    canonical solution with every expected value that the feedback turns so far show hard-coded (each user message
    after the first is read as execution feedback). It passes a canary twin whose changed value the feedback shows
    (``--env.taskset.feedback-style rich`` on HumanEval); its canary pass rate is above 0.

    Raises:
        KeyError: a request whose first user message is no task's turn-0 prompt.
    """
    from convcodeworld_gym.testing.test_fitter import TestFitterPolicy

    def fitted(task: Any, messages: Sequence[dict[str, Any]]) -> str:
        episode = TestFitterPolicy().start(task, feedback="CF-EF_full", seed=0)
        reply = episode.act({})
        for feedback in [m["content"] for m in messages if m["role"] == "user"][1:]:
            reply = episode.act({"execution_feedback": feedback})
        return reply.text

    return _by_task(tasks, fitted)


def tool_call_completion(code: str, call_id: str) -> dict[str, Any]:
    """A chat.completion (JSON) whose assistant message calls ``submit_program`` with ``code``, as a tool-calling
    model's server answers."""
    call = {"id": call_id, "type": "function",
            "function": {"name": "submit_program", "arguments": json.dumps({"code": code})}}
    return {"id": f"chatcmpl-{call_id}", "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None,
                         "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def scripted_tool_coder(tasks: Sequence[Any], program: Callable[[Any, int], str]) -> Callable[[dict[str, Any]], Any]:
    """:func:`scripted_coder` for the tool variant: a request's task is the one whose instruction is its first user
    message (the tool variant's prompt), its turn the number of assistant messages before it; the answer calls
    ``submit_program`` with ``program(task, turn)`` (call id ``call-<turn>``).

    Raises:
        KeyError: a request whose first user message is no task's instruction.
        AssertionError: a request that does not offer the ``submit_program`` tool.
    """
    from convcodeworld_gym.testing import Reply

    by_prompt = {task.prompt.strip(): task for task in tasks}

    def answer(body: dict[str, Any]) -> Any:
        messages = body["messages"]
        assert [t["function"]["name"] for t in body.get("tools") or []] == ["submit_program"], body.get("tools")
        task = by_prompt[next(m["content"] for m in messages if m["role"] == "user")]
        turn = sum(m["role"] == "assistant" for m in messages)
        return Reply(raw_body=json.dumps(tool_call_completion(program(task, turn), f"call-{turn}")).encode())

    return answer


def summarise(episodes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per task: whether the episode completed (``ok``), the env's reward recorded on its trace (None when the rollout
    failed: no reward), the env's reward of each step, and the trace's canary metrics (``canary``: a canary twin;
    ``canary_passed``: a program passed the twin's tests; None when the rollout failed); then the mean reward over
    the completed episodes and, beside it, the canary pass rate: ``canary_passed`` twins / ``canary_twins`` (twins
    completed), None when none was played. A twin's reward is 0.0: the rate is never part of the mean reward.

    >>> trace = {"rewards": {"env_reward": {"score": 0.0}}, "metrics": {"canary": 1.0, "canary_passed": 1.0}}
    >>> twin = {"ok": True, "errors": [], "task": {"data": {"task_id": "HumanEval/0/canary"}}, "traces": [trace]}
    >>> {k: v for k, v in summarise([twin]).items() if k != "episodes"}
    {'completed': 1, 'failed': 0, 'mean_env_reward': 0.0, 'canary_twins': 1, 'canary_passed': 1, 'canary_rate': 1.0}
    """
    rows = []
    for episode in episodes:
        trace = episode["traces"][0] if episode["traces"] else {}
        reward = (trace.get("rewards") or {}).get("env_reward")
        metrics = trace.get("metrics") or {}
        steps = (trace.get("info") or {}).get("convcodeworld", {}).get("steps", [])
        rows.append({
            "task_id": episode["task"]["data"]["task_id"],
            "ok": bool(episode["ok"]),
            "env_reward": reward["score"] if reward else None,
            "step_rewards": [step["reward"] for step in steps],
            "canary": _flag(metrics.get("canary")),
            "canary_passed": _flag(metrics.get("canary_passed")),
            "errors": [error["type"] for error in episode["errors"]],
        })
    scored = [row for row in rows if row["ok"] and row["env_reward"] is not None]
    twins = [row for row in scored if row["canary"]]
    passed = sum(bool(row["canary_passed"]) for row in twins)
    return {"episodes": rows, "completed": len(scored), "failed": len(rows) - len(scored),
            "mean_env_reward": sum(row["env_reward"] for row in scored) / len(scored) if scored else None,
            "canary_twins": len(twins), "canary_passed": passed, "canary_rate": passed / len(twins) if twins else None}


def _flag(value: float | None) -> bool | None:
    """A 0.0/1.0 metric as a bool; None when it was not recorded (a failed rollout)."""
    return None if value is None else bool(value)



def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true",
                   help="CPU, no model: a scripted server plays wrong-then-canonical on 5 HumanEval tasks, 1 feedback "
                        "turn, each reply with a wrong draft as its separate reasoning (never judged)")
    add_feedback_argument(p)
    add_deprecated_alias(p, "--gym-id", FEEDBACK_FLAG)
    p.add_argument("--dataset", default="bigcodebench", help="bigcodebench, humaneval or a task-file path")
    p.add_argument("--limit", type=int, default=100, help="tasks (the first ones of the set)")
    p.add_argument("--max-turns", type=int, default=10, help="feedback turns after turn 0")
    p.add_argument("--reasoning", choices=("strip", "keep"), default="strip",
                   help="how the env reads a reasoning model's reply (--env.taskset.reasoning): strip (default) removes "
                        "its <think> thoughts before the code is judged; keep reads it as the reference did")
    p.add_argument("--tools", action="store_true",
                   help="the tool variant: the coder submits programs by calling submit_program, the feedback is the "
                        "tool's result (--env.taskset.tools true)")
    add_canary_arguments(p)  # --canary SHARE, --canary-seed N: twins added after the --limit tasks
    p.add_argument("--model", default=None, help="the model's name at the endpoint")
    p.add_argument("--base-url", default=None, help="the OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    p.add_argument("--max-concurrent", type=int, default=32, help="episodes in flight at once")
    p.add_argument("--out", default="runs/verifiers", help="vf-eval's output directory; the summary goes beside it")
    p.add_argument("--run-name", default="convcodeworld", help="the run's directory under --out")
    return p


def _run(cmd: list[str], env: dict[str, str], log: Path) -> None:
    """Run ``cmd`` (vf-eval), its log on this console, the traces it prints (JSON) into ``log``."""
    print("$", " ".join(cmd), flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as fh:
        subprocess.run(cmd, env=env, check=True, stdout=fh)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    tools_flag = ((["--env.taskset.tools", "true"] if args.tools else []) + canary_flags(args.canary, args.canary_seed)
                  + (["--env.taskset.reasoning", args.reasoning] if args.reasoning != "strip" else []))
    if args.smoke:
        from convcodeworld_gym.tasks import load_tasks
        from convcodeworld_gym.testing import ScriptedOpenAIServer

        args.dataset, args.limit, args.max_turns = "humaneval", 5, 1
        tasks = load_tasks(args.dataset).subset(limit=args.limit)
        coder = (scripted_tool_coder(tasks, wrong_then_canonical) if args.tools
                 else scripted_coder(tasks, wrong_then_canonical, drafted_wrong))
        with ScriptedOpenAIServer(coder) as server:
            cmd = vf_eval_command(gym_id=env_id(args.feedback), dataset=args.dataset, limit=args.limit, max_turns=args.max_turns,
                                  model="scripted", base_url=server.base_url, out=out, run_name=args.run_name,
                                  extra=tools_flag)
            _run(cmd, {**os.environ, API_KEY_VAR: "scripted"}, out / f"{args.run_name}-traces.log")
    else:
        if not args.model or not args.base_url:
            raise SystemExit("pass --model and --base-url (the endpoint serving it), or --smoke")
        cmd = vf_eval_command(gym_id=env_id(args.feedback), dataset=args.dataset, limit=args.limit, max_turns=args.max_turns,
                              model=args.model, base_url=args.base_url, out=out, run_name=args.run_name,
                              max_concurrent=args.max_concurrent, extra=tools_flag)
        _run(cmd, {API_KEY_VAR: "EMPTY", **os.environ}, out / f"{args.run_name}-traces.log")
    summary = summarise(read_episodes(out / args.run_name))
    path = out / f"{args.run_name}-summary.json"
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    for row in summary["episodes"]:
        print(f"{row['task_id']:>24}  ok={row['ok']!s:5}  env_reward={row['env_reward']}  steps={row['step_rewards']}"
              + ("  canary_passed=" + str(row["canary_passed"]) if row["canary"] else "")
              + (f"  errors={row['errors']}" if row["errors"] else ""))
    print(f"mean env_reward over {summary['completed']} completed episodes: {summary['mean_env_reward']} "
          f"({summary['failed']} failed)" + _canary_line(summary) + f"; summary: {path}")
    return 0


def _canary_line(summary: dict[str, Any]) -> str:
    """The canary pass rate, printed beside the mean reward; empty when no twin was played.

    >>> _canary_line({"canary_twins": 4, "canary_passed": 1, "canary_rate": 0.25})
    '; canary pass rate: 0.25 (1 of 4 twins; never in the reward)'
    """
    if not summary["canary_twins"]:
        return ""
    return (f"; canary pass rate: {summary['canary_rate']:g} ({summary['canary_passed']} of {summary['canary_twins']} "
            "twins; never in the reward)")


if __name__ == "__main__":
    sys.exit(main())
