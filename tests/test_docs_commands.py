"""Every command in README.md and docs/*.md names something that exists: a console script of the
package and a real ``convcodeworld`` subcommand and option, a file of the clone, an extra of
pyproject.toml, a test file. (Running them all would take hours and a network; this catches the
renames and the commands that only work with a venv activated nobody mentioned.)"""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
#: Programs of other projects the docs tell you to run (servers, cluster, engine, shell words).
EXTERNAL = {"ray", "vllm", "docker", "export", "cd", "apt-get", "for", "do", "done", "then", "fi", "if", "nvidia-smi"}
#: Words that ask for an activated venv when they come without ``.venv/bin/``.
VENV_PROGRAMS = {"convcodeworld", "python", "pytest", "pip"}
ACTIVATE = ". .venv/bin/activate"


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```(?:bash|sh|console)\n(.*?)```", text, re.S)


def commands(text: str) -> list[str]:
    """The simple commands of the file: its bash blocks (comments dropped, continuations joined,
    split at ``&&``, ``;``, ``|``) and the inline code spans that start with ``.venv/bin/``."""
    found = []
    for block in _bash_blocks(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            found += [part.strip() for part in re.split(r"&&|;|\|", line) if part.strip()]
    found += re.findall(r"`(\.venv/bin/[^`]+)`", text)
    return found


@functools.cache
def _help(*subcommand: str) -> str:
    script = Path(sys.executable).parent / "convcodeworld"
    argv = [str(script)] if script.exists() else [sys.executable, "-c", "from convcodeworld_gym.cli import main; main()"]
    return subprocess.run([*argv, *subcommand, "--help"], capture_output=True, text=True, timeout=120, check=True).stdout


def _subcommands() -> set[str]:
    match = re.search(r"\{([a-z,-]+)\}", _help())
    assert match, _help()
    return set(match.group(1).split(","))


def problems(command: str, *, venv_activated: bool) -> list[str]:
    """What is wrong with one simple command ([] when it names only things that exist)."""
    words = shlex.split(command)
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):  # VAR=value prefixes
        words.pop(0)
    while words and words[0] in ("nice", "timeout"):
        words = words[3:] if words[0] == "nice" and words[1:2] == ["-n"] else words[2:]
    if not words:
        return []
    program = words[0]
    bare = program.split("/")[-1]
    if re.match(r"^\.venv[\w-]*/bin/", program):  # a venv the quick start (or the block itself) makes
        pass
    elif bare in VENV_PROGRAMS and "/" not in program:
        if not venv_activated:
            return [f"{command!r}: {bare} without .venv/bin/ in a file that does not say to activate the venv"]
    elif program in EXTERNAL or program in ("python3", "bash", "sh") or program.startswith(("$", '"$')):
        pass
    elif "/" in program:
        return [] if (ROOT / program).exists() else [f"{command!r}: no file {program}"]
    else:
        return [f"{command!r}: unknown program {program!r}"]
    args = words[1:]
    if bare == "convcodeworld":
        scripts = PYPROJECT["project"]["scripts"]
        if "convcodeworld" not in scripts:
            return [f"{command!r}: no console script convcodeworld"]
        if not args:
            return []
        if args[0] not in _subcommands():
            return [f"{command!r}: no subcommand {args[0]!r} (have {sorted(_subcommands())})"]
        path = [args[0]] + ([args[1]] if args[0] == "runtime" and len(args) > 1 else [])
        options = set(re.findall(r"--[a-z][a-z0-9-]*", _help(*path)))
        return [f"{command!r}: {args[0]} has no option {o}" for o in args if o.startswith("--") and o.split("=")[0] not in options]
    if bare in ("python", "python3") and args:
        if args[0] == "-m":
            return []
        script = next((a for a in args if not a.startswith("-")), None)
        return [] if script is None or (ROOT / script).exists() else [f"{command!r}: no file {script}"]
    if bare == "pytest":
        paths = [a.split("::")[0] for a in args if a.startswith("tests/")]
        return [f"{command!r}: no test file {p}" for p in paths if not (ROOT / p).exists()]
    if bare == "bash" and args:
        return [] if (ROOT / args[0]).exists() else [f"{command!r}: no file {args[0]}"]
    if bare == "pip":
        extras = set(PYPROJECT["project"]["optional-dependencies"])
        wanted = [e for a in args for e in re.findall(r"\[([a-z,]+)\]", a) for e in e.split(",")]
        return [f"{command!r}: no extra {e!r}" for e in wanted if e not in extras]
    if program == "docker" and args[:1] == ["build"]:
        return [] if (ROOT / args[-1]).exists() else [f"{command!r}: no build context {args[-1]}"]
    return []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_names_what_exists(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    found = commands(text)
    activated = ACTIVATE in text
    bad = [p for c in found for p in problems(c, venv_activated=activated)]
    assert not bad, "\n".join(bad)


def test_the_docs_have_commands_and_links_that_resolve() -> None:
    assert sum(len(commands(d.read_text(encoding="utf-8"))) for d in DOCS) > 20
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_the_checker_catches_what_it_should() -> None:
    assert problems("convcodeworld evaluate --limit 3", venv_activated=False)  # needs the venv
    assert problems(".venv/bin/convcodeworld evalute", venv_activated=True)  # no such subcommand
    assert problems(".venv/bin/convcodeworld evaluate --no-such-flag", venv_activated=True)
    assert problems(".venv/bin/python benchmarks/nothing.py", venv_activated=True)
    assert problems("pytest tests/test_nothing.py", venv_activated=True)
    assert problems(".venv/bin/pip install -e '.[nothing]'", venv_activated=True)
    assert not problems(".venv/bin/convcodeworld evaluate --dataset humaneval --limit 40", venv_activated=False)
