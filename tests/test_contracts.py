"""The contracts are written where people look: module contents, the observation, ``env.step``'s info."""

from __future__ import annotations

import ast
import inspect
import re
import typing
from pathlib import Path

from convcodeworld_gym.env import ConvCodeWorldEnv
from convcodeworld_gym.observation import OBSERVATION_KEYS, Observation, make_observation
from convcodeworld_gym.sandbox.host.executor import Executor

PACKAGE = Path(__file__).resolve().parents[1] / "convcodeworld_gym"


def _holds_and_all(path: Path) -> tuple[set[str] | None, set[str] | None]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree) or ""
    found = re.search(r"^Holds:\n((?:[ \t]+.*\n?|\n)*)", doc, re.M)
    holds = {m.group(1).rstrip(":,") for m in re.finditer(r"^ {4}(\S+)", found.group(1), re.M)} if found else None
    names = None
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if getattr(target, "id", None) == "__all__":
            names = set(ast.literal_eval(node.value))
    return holds, names


def test_every_module_declares_all_and_a_holds_list_agrees_with_it() -> None:
    modules = list(PACKAGE.rglob("*.py"))
    disagree, undeclared = [], []
    for path in modules:
        holds, names = _holds_and_all(path)
        if names is None:
            undeclared.append(str(path.relative_to(PACKAGE)))
        elif holds is not None and holds != names:
            disagree.append(f"{path.relative_to(PACKAGE)}: Holds-only {sorted(holds - names)}, __all__-only {sorted(names - holds)}")
    assert not undeclared, f"modules without __all__: {undeclared}"
    assert not disagree, "a module's Holds: list disagrees with its __all__ (fix or drop the list):\n" + "\n".join(disagree)


def test_the_observation_typeddict_is_the_observation() -> None:
    assert tuple(typing.get_type_hints(Observation)) == OBSERVATION_KEYS
    assert tuple(make_observation("t", 0)) == OBSERVATION_KEYS


def test_env_step_documents_every_info_key_it_returns() -> None:
    source = inspect.getsource(ConvCodeWorldEnv._step_plan)  # step's one code path (step and astep drive it)
    tree = ast.parse(source.replace("\n    ", "\n")[4:] if source.startswith("    ") else source)
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "info" for t in node.targets) and isinstance(node.value, ast.Dict):
            keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    assert len(keys) > 15  # the parse found the info dict
    doc = ConvCodeWorldEnv.step.__doc__ or ""
    assert not [k for k in sorted(keys) if f"``{k}``" not in doc], "env.step's docstring misses info keys"


def test_the_code_size_guard_lives_in_the_executor_base_class_only() -> None:
    sandbox = PACKAGE / "sandbox"
    copies = [p.name for p in sandbox.glob("*.py") if "len(program) > self.limits.max_code_chars" in p.read_text(encoding="utf-8")]
    assert copies == [], f"executors that repeat the code-size guard instead of calling Executor.refuse_oversized: {copies}"
    assert "max_code_chars" in inspect.getsource(Executor.refuse_oversized)


def test_the_middle_cut_helper_exists_once() -> None:
    marker = "characters cut]"
    holders = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if marker in p.read_text(encoding="utf-8"))
    assert holders == ["sandbox/result.py"], holders


def test_every_executor_refuses_an_oversized_program_without_running_it(humaneval) -> None:
    from convcodeworld_gym.sandbox import Limits, LocalExecutor, SandboxExecutor

    task = humaneval["HumanEval/0"]
    program = task.ground_truth  # would pass: the refusal is the size guard, not the code
    limits = Limits(max_code_chars=len(program) - 1)
    with LocalExecutor(limits) as local, SandboxExecutor(limits, workers=1) as sandbox:
        for executor in (local, sandbox):
            result = executor.run(task, program)
            reason = f"Not run: the program has {len(program)} characters, over the limit of {len(program) - 1}."
            assert not result.passed and not result.executed
            assert {(t.outcome.value, t.traceback) for t in result.tests} == {("not_run", reason)}
