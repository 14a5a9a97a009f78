"""Input/output task sets in their hub schemas (LiveCodeBench, TACO, CodeContests, APPS), judged through the real
sandbox: the fixtures of ``tests/fixtures/io`` (written by its ``make.py``, field for field as each loader reads them)
load through ``datasets``, their canonical and known-right programs score 1.0, their known-wrong ones 0.0, on the
fixtures and on the held-out rows; no hidden test's input or expected output reaches an observation under partial
execution feedback; the feedback on a failing test gives the input, the expected and the program's output.
"""

from __future__ import annotations

import base64
import json
import pickle
import time
import zlib
from pathlib import Path

import pytest

from convcodeworld_gym import ConvCodeWorldEnv
from convcodeworld_gym.errors import DatasetError, LeftOutTaskError, NoGroundTruth
from convcodeworld_gym.feedback.verbal import OfflineSimulator
from convcodeworld_gym.tasks import IOCase, IOTask, load_tasks
from convcodeworld_gym.tasks.canary import IOCanaryTwin, make_twin
from convcodeworld_gym.tasks.io import APPS_HEADER, APPS_STDIO_TAIL, LIVECODEBENCH_HEADER
from convcodeworld_gym.tasks.io_datasets import decode_private_tests, load_io_dataset, schema_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "io"
FILES = ("livecodebench.jsonl", "taco.jsonl", "taco_verified.jsonl", "apps.jsonl", "codecontests.parquet")
HELDOUT = ("livecodebench.jsonl", "taco.jsonl", "apps.jsonl", "codecontests.parquet")


def _programs(base: Path) -> dict:
    return json.loads((base / "programs.json").read_text())


def _fence(code: str) -> str:
    return f"```python\n{code}```"


# ----------------------------------------------------------------------------- loading


def test_each_schema_loads_through_datasets_with_its_ids_kinds_and_public_tests():
    lcb = load_tasks(str(FIXTURES / "livecodebench.jsonl"))
    assert lcb.ids == ("abc900_a", "3100", "1900_B") and lcb is load_tasks(str(FIXTURES / "livecodebench.jsonl"))
    a, topk, avg = lcb
    assert (a.kind, topk.kind, topk.func_name, avg.kind) == ("stdio", "call", "topK", "stdio")
    assert a.public_tests == ("test_01",) and len(a.test_names) == 4  # one public case, three packed private ones
    assert topk.public_tests == ("test_01", "test_02") and topk.code_prompt.startswith("class Solution:")
    assert a.import_header == LIVECODEBENCH_HEADER and a.time_limit_s == 6.0 and not a.has_ground_truth
    assert dict(a.meta)["contest_date"] == "2023-05-13T00:00:00"
    assert set(lcb.left_out) == {"abc900_b", "abc900_c", "abc900_d"}
    assert "no global" in lcb.left_out["abc900_c"] or "not admitted" in lcb.left_out["abc900_c"]
    assert "no tests" in lcb.left_out["abc900_d"]
    with pytest.raises(LeftOutTaskError, match="cannot be judged"):
        lcb["abc900_b"]

    taco = load_tasks(str(FIXTURES / "taco.jsonl"))
    assert taco.ids == ("TACO/0", "TACO/1", "TACO/2") and "no tests" in taco.left_out["TACO/3"]
    assert [t.kind for t in taco] == ["stdio", "call", "call"] and taco["TACO/2"].func_name == "addDigits"
    assert all(t.public_tests == ("test_01", "test_02", "test_03") and t.libs == ("numpy",) for t in taco)
    assert taco["TACO/0"].memory_limit_mb == 256 and taco["TACO/0"].time_limit_s == 4.0
    verified = load_tasks(str(FIXTURES / "taco_verified.jsonl"))  # its own id; solutions as a list
    assert verified.ids == ("TACO/17",) and verified["TACO/17"].has_ground_truth

    apps = load_tasks(str(FIXTURES / "apps.jsonl"))
    assert apps.ids == ("APPS/4000", "APPS/4001") and "no tests" in apps.left_out["APPS/4002"]
    cc = load_tasks(str(FIXTURES / "codecontests.parquet"))
    assert cc.ids == ("1000_A. Even Sum", "1000_B. Half") and "files" in cc.left_out["1000_C. Files"]
    even = cc["1000_A. Even Sum"]
    assert even.public_tests == ("test_01",) and len(even.cases) == 6 and even.rule == "codecontests"
    assert even.solution_code.startswith("input()") and dict(even.meta)["contest_time_limit_s"] == "2"


def test_a_window_of_contest_dates_and_the_options_are_checked():
    window = load_tasks(str(FIXTURES / "livecodebench.jsonl") + "?start=2024-01-01&end=2024-03-01")
    assert window.ids == ("3100",)
    assert load_tasks(str(FIXTURES / "livecodebench.jsonl") + "?end=2023-05-13").ids == ("abc900_a",)  # inclusive
    with pytest.raises(DatasetError, match=r"unknown option\(s\) split"):
        load_tasks(str(FIXTURES / "livecodebench.jsonl") + "?split=test")
    with pytest.raises(DatasetError, match="YYYY-MM-DD"):
        load_tasks(str(FIXTURES / "livecodebench.jsonl") + "?start=May")
    with pytest.raises(DatasetError, match="no version 'release_v9'"):
        load_io_dataset("livecodebench", {"version": "release_v9"})
    with pytest.raises(DatasetError, match="splits test, valid, train"):
        load_io_dataset("codecontests", {"split": "dev"})


def test_a_hub_set_offline_fails_at_once_naming_the_fix(monkeypatch):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    for name in ("livecodebench?version=release_v5", "taco", "codecontests?split=valid", "apps"):
        started = time.monotonic()
        with pytest.raises(DatasetError, match=r"cannot reach the Hugging Face hub .*local copy in the \w+ schema"):
            load_tasks(name)
        assert time.monotonic() - started < 5


def test_schemas_are_told_by_their_fields_and_a_bigcodebench_file_still_loads(tmp_path):
    rows = {"livecodebench": FIXTURES / "livecodebench.jsonl", "taco": FIXTURES / "taco.jsonl", "apps": FIXTURES / "apps.jsonl"}
    for schema, path in rows.items():
        assert schema_of(json.loads(path.read_text().splitlines()[0])) == schema
    bcb = tmp_path / "mine.jsonl"
    bcb.write_text(json.dumps({"task_id": "Mine/0", "instruct_prompt": "Return 1.", "code_prompt": "def task_func():\n",
                               "canonical_solution": "    return 1\n", "entry_point": "task_func",
                               "test": "import unittest\nclass TestCases(unittest.TestCase):\n    def test_1(self):\n"
                                       "        self.assertEqual(task_func(), 1)\n"}) + "\n")
    mine = load_tasks(str(bcb))
    assert mine.ids == ("Mine/0",) and not isinstance(mine[0], IOTask)


def test_packed_private_tests_admit_text_only():
    def packed(value) -> str:
        return base64.b64encode(zlib.compress(pickle.dumps(value))).decode()

    assert decode_private_tests(packed(json.dumps([{"input": "1"}]))) == [{"input": "1"}]
    for hostile in (print, [json.dumps([])], {"a": 1}, Path("/etc/passwd")):
        with pytest.raises(ValueError, match="refused|not the JSON text"):
            decode_private_tests(packed(hostile))


# ----------------------------------------------------------------------------- judged in the sandbox


def _plays(base: Path, name: str, executor, kinds=("canonical", "right", "wrong")) -> list[tuple[str, str, str, float]]:
    """(task id, kind, program, reward) of every canonical, known-right and known-wrong program of a fixture file."""
    table = _programs(base)[name]
    tasks = load_tasks(str(base / name))
    env = ConvCodeWorldEnv("CF-EF_full", dataset=tasks, executor=executor)
    out = []
    for task in tasks:
        plays = [("canonical", task.solution_code)] if task.has_ground_truth else []
        plays += [(kind, code) for kind in ("right", "wrong", "loose") for code in table.get(task.task_id, {}).get(kind, [])]
        for kind, code in plays:
            if kind not in kinds:
                continue
            env.reset(options={"task_id": task.task_id})
            _, reward, _, _, info = env.step(_fence(code))
            assert info["judge"] == "split" and info["infra_error"] is None
            out.append((task.task_id, kind, code, reward))
    env.close()
    return out


@pytest.mark.parametrize("name", FILES)
def test_right_programs_score_1_and_wrong_ones_0(name, executor):
    plays = _plays(FIXTURES, name, executor)
    assert {kind for _, kind, _, _ in plays} >= {"right", "wrong"}
    wrong = [(t, k, r) for t, k, _, r in plays if (r == 1.0) != (k != "wrong")]
    assert not wrong, wrong


@pytest.mark.parametrize("name", HELDOUT)
def test_held_out_rows_right_programs_score_1_and_wrong_ones_0(name, executor):
    plays = _plays(FIXTURES / "heldout", name, executor)
    wrong = [(t, k, r) for t, k, _, r in plays if (r == 1.0) != (k != "wrong")]
    assert not wrong, wrong


def test_codecontests_incorrect_solutions_score_0(executor):
    import datasets

    rows = datasets.load_dataset("parquet", data_files=str(FIXTURES / "codecontests.parquet"), split="train")
    tasks = load_tasks(str(FIXTURES / "codecontests.parquet"))
    env = ConvCodeWorldEnv("CF", dataset=tasks, executor=executor)
    tried = 0
    for row in rows:
        if row["name"] not in tasks:
            continue
        for language, code in zip(row["incorrect_solutions"]["language"], row["incorrect_solutions"]["solution"]):
            if language == 3:
                env.reset(options={"task_id": row["name"]})
                assert env.step(_fence(code))[1] == 0.0
                tried += 1
    env.close()
    assert tried == 2


def test_apps_chain_passes_a_permutation_and_rule_livecodebench_does_not(executor):
    """APPS's (and TACO's) chain compares lines as sets of tokens: the numbers unsorted pass a sorting problem."""
    loose = _programs(FIXTURES)["apps.jsonl"]["APPS/4000"]["loose"][0]
    for spec, expected in (("", 1.0), ("?rule=livecodebench", 0.0)):
        tasks = load_tasks(str(FIXTURES / "apps.jsonl") + spec)
        env = ConvCodeWorldEnv("CF", dataset=tasks, executor=executor, task_ids=["APPS/4000"])
        env.reset(options={"task_id": "APPS/4000"})
        assert env.step(_fence(loose))[1] == expected, spec
        env.close()
    assert load_tasks(str(FIXTURES / "apps.jsonl") + "?rule=livecodebench")["APPS/4001"].rule == "apps"  # calls keep theirs


# ----------------------------------------------------------------------------- feedback


_ECHO_STDIO = "import sys\ndata = sys.stdin.read()\nprint(data)\nprint(data, file=sys.stderr)\n"
_ECHO_CALL = "import sys\nclass Solution:\n    def topK(self, nums, k):\n        print(nums, k)\n        raise ValueError(repr((nums, k)))\n"


def _hidden_values(task: IOTask) -> list[str]:
    """The hidden cases' inputs and expected outputs, and each of their lines, that are specific enough to look for (3
    characters or more: a ``0`` is everywhere)."""
    public = set(task.public_tests)
    texts = [text for name, case in zip(task.test_names, task.cases) if name not in public for text in (case.input, case.output)]
    return sorted({part.strip() for text in texts for part in (text, *text.splitlines()) if len(part.strip()) >= 3})


@pytest.mark.parametrize("style", ["reference", "corrected", "rich"])
def test_no_hidden_input_or_output_reaches_a_partial_observation(style, executor):
    tasks = load_tasks(str(FIXTURES / "livecodebench.jsonl"))
    for task_id, code in (("abc900_a", _ECHO_STDIO), ("3100", _ECHO_CALL)):
        task = tasks[task_id]
        hidden = _hidden_values(task)
        assert hidden
        for combo in ("CF-EF_partial", "CF-EF_partial-SNF"):
            env = ConvCodeWorldEnv(combo, dataset=tasks, executor=executor, feedback_style=style)
            env.reset(options={"task_id": task_id})
            obs, reward, _, _, info = env.step(_fence(code))
            shown = "\n".join(str(v) for v in obs.values())
            assert reward == 0.0 and obs["execution_feedback"] != "Passed all test runs"
            assert task.cases[0].input.strip() in shown  # the public input is shown ...
            leaked = [value for value in hidden if value in shown]
            assert not leaked, (combo, style, leaked)  # ... no hidden one, nor its expected output
            assert info["public_pass_fraction"] == 0.0 and info["hidden_pass_fraction"] == 0.0
            env.close()


def test_full_feedback_gives_input_expected_output_and_stderr_or_traceback(executor):
    tasks = load_tasks(str(FIXTURES / "livecodebench.jsonl"))
    env = ConvCodeWorldEnv("CF-EF_full", dataset=tasks, executor=executor, feedback_style="corrected")
    env.reset(options={"task_id": "abc900_a"})
    obs, _, _, _, info = env.step(_fence("import sys\na, b = map(int, input().split())\nprint('dbg', file=sys.stderr)\nprint(a - b)\n"))
    ef = obs["execution_feedback"]
    for part in ("TEST_01", "Input:\n3 5", "Expected output:\n8", "Program output:\n-2", "Program standard error:\ndbg",
                 "Wrong answer: line 1 differs: -2 where 8 was expected", "Input:\n999999999999 1"):
        assert part in ef, part
    env.reset(options={"task_id": "abc900_a"})
    obs, *_ = env.step(_fence("x = 1\n\ny = int(input().split()[0])\nprint(y // 0)\n"))
    ef = obs["execution_feedback"]
    assert 'File "solution.py", line 4, in <module>' in ef and "ZeroDivisionError" in ef  # the model's own line numbers
    env.close()


def test_the_pass_fractions_split_public_and_hidden_tests(executor, humaneval):
    tasks = load_tasks(str(FIXTURES / "livecodebench.jsonl"))
    env = ConvCodeWorldEnv("CF", dataset=tasks, executor=executor)
    env.reset(options={"task_id": "abc900_a"})
    # right on the public case (3 5 -> 8) only
    _, reward, _, _, info = env.step(_fence("input()\nprint(8)\n"))
    assert reward == 0.0 and info["public_pass_fraction"] == 1.0 and info["hidden_pass_fraction"] == 0.0
    env.close()
    env = ConvCodeWorldEnv("CF", dataset="humaneval", executor=executor, task_ids=["HumanEval/0"])
    env.reset(options={"task_id": "HumanEval/0"})
    _, reward, _, _, info = env.step(env.task.ground_truth)
    assert reward == 1.0 and info["public_pass_fraction"] == 1.0 and info["hidden_pass_fraction"] == 1.0
    env.close()


def test_the_simulated_users_speak_on_io_tasks_and_sef_refuses_a_set_without_solutions(executor):
    lcb = load_tasks(str(FIXTURES / "livecodebench.jsonl"))
    with pytest.raises(NoGroundTruth, match=r"3 of the 3 tasks .* have none .*without SEF") as refused:
        ConvCodeWorldEnv("CF-EF_partial-SEF", dataset=lcb, executor=executor)
    assert refused.value.task_ids == ("abc900_a", "3100", "1900_B")
    taco = load_tasks(str(FIXTURES / "taco.jsonl"))
    for combo, expertise in (("CF-EF_partial-SNF", "novice"), ("CF-EF_partial-SEF", "expert"), ("CF-SEF", "expert")):
        env = ConvCodeWorldEnv(combo, dataset=taco, executor=executor,
                               verbal_feedback=OfflineSimulator(expertise, executor=executor))
        env.reset(options={"task_id": "TACO/0"})
        obs, reward, _, _, info = env.step(_fence(_ECHO_STDIO))
        assert reward == 0.0 and obs["verbal_feedback"], combo
        task = taco["TACO/0"]
        leaked = [v for v in _hidden_values(task) if v in obs["verbal_feedback"]]
        assert not leaked, (combo, leaked)
        env.close()


# ----------------------------------------------------------------------------- limits, canaries, the wrapper


def _task(cases, **kw) -> IOTask:
    return IOTask("io/x", "Echo the number.", "", "", kw.pop("canonical", "print(input())"), "", cases=cases,
                  public_count=1, **kw)


def test_each_case_has_its_own_time_limit_and_the_suite_covers_all(executor):
    cases = tuple(IOCase(f"{i}\n", f"{i}\n") for i in range(4))
    task = _task(cases, time_limit_s=1.0)
    assert executor.run(task, task.program_for("import time\ntime.sleep(0.6)\nprint(input())\n")).passed  # 2.4 s in all
    slow = executor.run(task, task.program_for("import time\nx = input()\nif x == '2':\n    time.sleep(1.3)\nprint(x)\n"))
    outcomes = {t.name: t.outcome.value for t in slow.tests}
    assert outcomes == {"test_01": "passed", "test_02": "passed", "test_03": "failed", "test_04": "passed"}
    assert "Time limit exceeded" in slow.tests[2].traceback and "the limit is 1 s per test" in slow.tests[2].traceback


def test_the_wrapper_serves_stdin_forms_threads_and_exit_codes(executor):
    cases = (IOCase("3\n1 2 3\n", "6\n"), IOCase("2\n5 5\n", "10\n"))
    forms = {
        "open(0)": "n, *xs = map(int, open(0).read().split())\nprint(sum(xs))\n",
        "buffer": "import sys\nn, *xs = map(int, sys.stdin.buffer.read().split())\nsys.stdout.buffer.write(b'%d\\n' % sum(xs))\n",
        "readline": "import sys\ninput = sys.stdin.readline\nn = int(input())\nprint(sum(map(int, input().split())))\n",
        "thread": "import threading\ndef main():\n    input()\n    print(sum(map(int, input().split())))\n"
                  "threading.Thread(target=main).start()\n",
        "exit 0": "import sys\ninput()\nprint(sum(map(int, input().split())))\nsys.exit(0)\n",
        # the standard descriptors themselves, as a process of its own has them (os.read and fileinput read nothing before, argv was the worker's)
        "os.read": "import os\nn, *xs = map(int, os.read(0, 1 << 20).split())\nos.write(1, b'%d\\n' % sum(xs))\n",
        "fileno": "import os, sys\nwith os.fdopen(sys.stdin.fileno(), 'rb', closefd=False) as f:\n"
                  "    n, *xs = map(int, f.read().split())\nprint(sum(xs))\n",
        "fileinput": "import fileinput\nlines = [line for line in fileinput.input()]\nprint(sum(map(int, lines[1].split())))\n",
        "argv": "import sys\nassert sys.argv == ['solution.py'], sys.argv\ninput()\nprint(sum(map(int, input().split())))\n",
        "open(1)": "input()\nopen(1, 'w').write('%d\\n' % sum(map(int, input().split())))\n",
        "print, then close 1": "import os\ninput()\nprint(sum(map(int, input().split())), flush=True)\nos.close(1)\n",
    }
    task = _task(cases, rule="taco")
    for name, code in forms.items():
        assert executor.run(task, task.program_for(code)).passed, name
    for header in (APPS_HEADER + APPS_STDIO_TAIL, LIVECODEBENCH_HEADER):  # both bind stdin (and the second stdout)
        aliased = _task(cases, rule="taco", import_header=header)
        code = "n = int(stdin.readline())\nprint(sum(map(int, stdin.readline().split())))\n"
        assert executor.run(aliased, aliased.program_for(code)).passed, header[:20]
    exit_1 = "import sys\ninput()\nprint(sum(map(int, input().split())))\nsys.exit(1)\n"
    assert not executor.run(task, task.program_for(exit_1)).passed  # TACO's judge reads the exit status
    lcb = _task(cases, rule="livecodebench")
    assert executor.run(lcb, lcb.program_for(exit_1)).passed  # LiveCodeBench's ignores SystemExit


def test_a_program_cannot_print_or_return_a_verdict(executor):
    task = _task((IOCase("1\n", "1\n"), IOCase("2\n", "2\n")))
    forged = [
        "import sys\nprint('ok')\nsys.modules['__test__'].run_program = lambda s: {'stdout': s, 'stderr': '', 'error': None}\n",
        "class S(str):\n    def __eq__(self, o):\n        return True\n    __hash__ = str.__hash__\nprint(S('x'))\n",
        "print('Passed all test runs')\nraise SystemExit(0)\n",
    ]
    for code in forged:
        assert not executor.run(task, task.program_for(code)).passed, code
    call = IOTask("io/c", "", "", "", "def f(x):\n    return x\n", "", kind="call", func_name="f",
                  cases=(IOCase("1", "2"),), public_count=1)
    always = "class A:\n    def __eq__(self, o):\n        return True\ndef f(x):\n    return A()\n"
    result = executor.run(call, call.program_for(always))
    assert not result.passed and "not data" in result.tests[0].traceback


def test_canary_twins_of_io_tasks_change_an_expected_output_and_the_canonical_solution_fails_them(executor, monkeypatch):
    import convcodeworld_gym.tasks.canary as canary_module
    from convcodeworld_gym.runs.canaries import build_list

    taco = load_tasks(str(FIXTURES / "taco.jsonl"))
    twin = make_twin(taco["TACO/0"])
    assert isinstance(twin, IOCanaryTwin) and twin.cases[0].output == "7\n" and twin.original is taco["TACO/0"]
    assert twin.test_names == taco["TACO/0"].test_names and twin.test != taco["TACO/0"].test
    built = build_list(taco, executor, dataset="taco-fixture")
    assert set(built.twins) == {"TACO/0", "TACO/1", "TACO/2"}, built.excluded
    monkeypatch.setattr(canary_module, "canary_lists", lambda: (built,))
    env = ConvCodeWorldEnv("CF-EF_full", dataset=taco, executor=executor, canary=["TACO/1"])
    env.reset(options={"task_id": "TACO/1/canary"})
    _, reward, _, _, info = env.step(_fence(taco["TACO/1"].solution_code))
    assert info["canary"] and not info["passed"] and reward == 0.0
    env.close()


def test_selfcheck_runs_the_canonical_solutions_and_names_the_tasks_without_one(executor):
    from convcodeworld_gym.runs.selfcheck import run_selfcheck

    taco = run_selfcheck(load_tasks(str(FIXTURES / "taco.jsonl")), executor)
    assert (taco.total, taco.passed, taco.without_solution) == (3, 3, ())
    lcb = run_selfcheck(load_tasks(str(FIXTURES / "livecodebench.jsonl")), executor)
    assert (lcb.total, lcb.failures, lcb.without_solution) == (0, {}, ("abc900_a", "3100", "1900_B"))
    assert "not run: 3 tasks without a canonical solution" in lcb.render()


def test_the_llm_expert_reads_the_canonical_solution_itself_and_no_hidden_test(executor, tmp_path):
    from convcodeworld_gym.testing.openai_server import ScriptedOpenAIServer

    taco = load_tasks(str(FIXTURES / "taco.jsonl"))
    task = taco["TACO/0"]
    with ScriptedOpenAIServer(fallback="Reasoning: it prints its input.\nUser Feedback: Sum the numbers.") as server:
        env = ConvCodeWorldEnv("CF-EF_partial-SEF", dataset=taco, executor=executor, simulator_kwargs={
            "backend": "llm", "base_url": server.base_url, "api_key": "test-key", "model": "m",
            "cache_path": str(tmp_path / "cache.sqlite")})
        env.reset(options={"task_id": "TACO/0"})
        obs, *_ = env.step(_fence(_ECHO_STDIO))
        env.close()
        (request,) = server.chat_requests
    sent = "\n".join(str(m["content"]) for m in request["messages"])
    assert obs["verbal_feedback"] == "Sum the numbers."
    assert task.solution_code.strip() in sent and "convcodeworld_gym" not in sent and "_Program" not in sent
    assert not [v for v in _hidden_values(task) if v in sent]  # partial EF: the public tests' text only


def test_codecontests_reads_numbers_in_ascii_digits_only():
    """An attack on the rule's number reading: Python's float() and int() take other scripts' digits, so a program
    printing "٣.5" (Arabic-Indic three) passed where 3.5 was expected; the dataset's checker reads ASCII numbers."""
    from convcodeworld_gym.sandbox.run.iocheck import _codecontests_stdio

    assert _codecontests_stdio("3.5000001\n", "3.5\n") is None and _codecontests_stdio("-0\n", "0\n") is None
    for forged, expected in (("\u0663.5", "3.5"), ("\u0663", "3"), ("\uff13", "3"), ("1\u0660", "10")):
        assert _codecontests_stdio(forged + "\n", expected + "\n") is not None, forged
