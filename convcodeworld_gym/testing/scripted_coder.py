"""A scripted coder to serve from the scripted OpenAI-compatible server: wrong programs first, then the right one.

:class:`CoderScript` answers a chat request of the package's prompts (:mod:`~convcodeworld_gym.policies.prompts`)
for any task of a task set: ``wrong_turns`` wrong programs (they compile and fail every test), then the task's
canonical solution; after a latency like a real model's (``latency_s`` per call plus the reply's tokens at
``tokens_per_s``). Programs of the tasks in ``sleepy`` sleep that many seconds when run (a slow task). It finds the
task by its instruction in the request, and the attempt by a marker in the previous code the request shows.

:class:`CoderServer` serves it from a process of its own (``python -m convcodeworld_gym.testing.scripted_coder``),
as a model server would be: its threads then take no CPU time from the process that plays the episodes. The same
from a shell: ``python -c 'from convcodeworld_gym.testing.scripted_coder import main; main()' --latency 1``.

>>> from convcodeworld_gym.tasks import load_tasks
>>> from convcodeworld_gym.policies.prompts import initial_prompt
>>> script = CoderScript(load_tasks("humaneval").subset(limit=3))
>>> body = {"messages": [{"role": "user", "content": initial_prompt(script.tasks[2].prompt)}]}
>>> "# scripted attempt 1" in script(body).content
True
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..tasks import DatasetSpec, Task, load_tasks
from .openai_server import Reply, ScriptedOpenAIServer, fake_tokens

__all__ = ["CoderScript", "CoderServer", "wrong_program", "main"]

_ATTEMPT = re.compile(r"# scripted attempt (\d+)")
#: The server process's program: :func:`main` (run with ``-c``: ``-m`` would import this module twice).
_SERVE = "import sys; from convcodeworld_gym.testing.scripted_coder import main; sys.exit(main(sys.argv[1:]))"


def wrong_program(task: Task, attempt: int, sleep_s: float = 0.0) -> str:
    """A program for ``task`` that compiles and fails every test (it returns None), marked with its attempt number;
    it sleeps ``sleep_s`` seconds first when run (at import, once per run)."""
    sleep = f"import time as _scripted_time\n_scripted_time.sleep({sleep_s!r})\n" if sleep_s else ""
    return f"{sleep}{task.code_prompt.rstrip()}\n    # scripted attempt {attempt}\n    return None\n"


@dataclass(frozen=True)
class CoderScript:
    """A :data:`~.openai_server.Script`: wrong programs for ``wrong_turns`` calls of an episode, then the canonical
    solution (see the module).

    Attributes:
        tasks: the tasks it can answer.
        wrong_turns: wrong programs before the right one.
        latency_s: seconds every reply waits, plus ``len(fake_tokens(reply)) / tokens_per_s`` when that is set.
        sleepy: task id -> seconds the task's wrong programs sleep when run.
    """

    tasks: Sequence[Task]
    wrong_turns: int = 1
    latency_s: float = 0.0
    tokens_per_s: float | None = None
    sleepy: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        prompts = {task.prompt.strip(): task for task in self.tasks}
        object.__setattr__(self, "_by_prompt", sorted(prompts.items(), key=lambda kv: -len(kv[0])))

    def task_of(self, text: str) -> Task:
        """The task whose instruction ``text`` holds (the longest match); KeyError naming the text when none does."""
        for prompt, task in self._by_prompt:  # type: ignore[attr-defined]
            if prompt in text:
                return task
        raise KeyError(f"no task of the script's {len(self.tasks)} has its instruction in the request: {text[:120]!r}...")

    def __call__(self, body: dict[str, Any]) -> Reply:
        user = str(body["messages"][-1]["content"])
        task = self.task_of(user)
        shown = [int(n) for n in _ATTEMPT.findall(user)]
        attempt = (max(shown) + 1) if shown else 1
        if attempt <= self.wrong_turns:
            code = wrong_program(task, attempt, self.sleepy.get(task.task_id, 0.0))
        else:
            code = task.solution_code
        text = f"```python\n{code.rstrip()}\n```"
        delay = self.latency_s + (len(fake_tokens(text)) / self.tokens_per_s if self.tokens_per_s else 0.0)
        return Reply(text, delay_s=delay)


class CoderServer:
    """:class:`CoderScript` on the scripted server in a subprocess; ``base_url`` once started (a context manager).

    Args:
        dataset: the task set (a name or a path), as for :func:`~convcodeworld_gym.tasks.load_tasks`.
        stdlib_only: its standard-library tasks only (BigCodeBench).
        wrong_turns, latency_s, tokens_per_s, sleepy: as for :class:`CoderScript`.
    """

    def __init__(self, dataset: str = "humaneval", *, stdlib_only: bool = False, wrong_turns: int = 1,
                 latency_s: float = 0.0, tokens_per_s: float | None = None, sleepy: Mapping[str, float] | None = None) -> None:
        self.command = [sys.executable, "-c", _SERVE, "--dataset", str(dataset), "--wrong-turns", str(wrong_turns),
                        "--latency", str(latency_s)]
        if stdlib_only:
            self.command.append("--stdlib-only")
        if tokens_per_s:
            self.command += ["--tokens-per-s", str(tokens_per_s)]
        for task_id, seconds in (sleepy or {}).items():
            self.command += ["--sleepy", f"{task_id}={seconds}"]
        self._proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> CoderServer:
        self._proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.startswith("http://"):
            self._proc.kill()
            raise RuntimeError(f"the scripted coder server did not start ({' '.join(self.command)}): {line!r}")
        self.base_url = line
        return self

    @property
    def pid(self) -> int:
        """The server process's id (to read its CPU time, say)."""
        if self._proc is None:
            raise RuntimeError("the scripted coder server is not running: use it as a context manager")
        return self._proc.pid

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a :class:`CoderScript` until killed; print the base URL on the first line of stdout."""
    parser = argparse.ArgumentParser(description="Serve the scripted coder over the OpenAI chat-completions API.")
    parser.add_argument("--dataset", default="humaneval")
    parser.add_argument("--stdlib-only", action="store_true")
    parser.add_argument("--wrong-turns", type=int, default=1)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds every reply waits")
    parser.add_argument("--tokens-per-s", type=float, default=None, help="and its tokens at this rate")
    parser.add_argument("--sleepy", action="append", default=[], metavar="TASK_ID=SECONDS",
                        help="the task's wrong programs sleep this long when run")
    args = parser.parse_args(argv)
    sleepy = {}
    for item in args.sleepy:
        task_id, _, seconds = item.rpartition("=")
        sleepy[task_id] = float(seconds)
    dataset: DatasetSpec = args.dataset
    script = CoderScript(tuple(load_tasks(dataset, stdlib_only=args.stdlib_only)), args.wrong_turns, args.latency,
                         args.tokens_per_s, sleepy)
    with ScriptedOpenAIServer(script) as server:
        print(server.base_url, flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    raise SystemExit(main())
