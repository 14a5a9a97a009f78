"""docs/training.md as its users run it: the ``train`` extra's install gets PyTorch's CPU build first (a bare install
pulls the CUDA build, 6.3 GB of venv), and each command of a training program uses only options the program has."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "training.md"


def _bash_commands(text: str) -> list[str]:
    """The simple commands of the doc's bash blocks: comments dropped, continuations joined, split at ``&&`` and
    ``;``."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            found += [part.strip() for part in re.split(r"&&|;", line) if part.strip()]
    return found


@functools.cache
def _options(program: str) -> set[str] | None:
    """The options ``python training/<program> --help`` lists; None when the program needs an extra not installed."""
    done = subprocess.run([sys.executable, str(ROOT / "training" / program), "--help"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    if done.returncode != 0 and "ModuleNotFoundError" in done.stderr:
        return None
    assert done.returncode == 0, done.stderr
    return set(re.findall(r"--[a-z][a-z0-9-]*", done.stdout))


def test_the_train_install_gets_pytorchs_cpu_build_first():
    commands = _bash_commands(DOC.read_text(encoding="utf-8"))
    extra = [i for i, c in enumerate(commands) if re.match(r"pip install .*\.\[train\]", c)]
    cpu = [i for i, c in enumerate(commands)
           if c.startswith("pip install torch") and "--index-url https://download.pytorch.org/whl/cpu" in c]
    assert extra and cpu and cpu[0] < extra[0], commands
    assert re.search(r"venv measures [\d.]+ GB \(`du -sh \.venv`", DOC.read_text(encoding="utf-8"))


def test_each_training_command_uses_options_its_program_has():
    runs = [shlex.split(c) for c in _bash_commands(DOC.read_text(encoding="utf-8"))]
    runs = [words for words in runs if words[:1] == ["python"] and words[1].startswith("training/")]
    assert {words[1] for words in runs} >= {"training/grpo_trl.py", "training/grpo_trl_tools.py"}
    checked = 0
    for words in runs:
        options = _options(words[1].removeprefix("training/"))
        if options is None:
            continue
        unknown = [w for w in words[2:] if w.startswith("--") and w.split("=")[0] not in options]
        assert not unknown, f"{' '.join(words)}: {words[1]} has no {unknown}"
        checked += 1
    if not checked:
        pytest.skip("no training program's needs are installed here")
