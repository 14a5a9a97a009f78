"""The episode server is an optional extra: the core install gets no new dependency and never imports OpenEnv, and
without the extra ``convcodeworld serve`` says how to install it. Also: the secrets mask, and the server image's
Dockerfile serves with the CLI as it is. None of these needs OpenEnv (they run in the default suite)."""

from __future__ import annotations

import logging
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

from convcodeworld_gym.cli import build_parser
from convcodeworld_gym.service import OPENENV_INSTALL
from convcodeworld_gym.service.command import cmd_serve
from convcodeworld_gym.service.secrets import Secrets

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("openenv", "fastapi", "uvicorn", "gradio", "fastmcp")


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_the_core_install_gets_no_new_dependency_and_the_extra_pins_openenv_0_10():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if re.match(r"(openenv|fastapi|uvicorn|gradio)\b", d)]
    assert project["optional-dependencies"]["openenv"] == ["openenv>=0.10,<0.11"]


def test_importing_the_package_and_its_cli_never_imports_openenv():
    done = _python("import sys, convcodeworld_gym, convcodeworld_gym.cli, convcodeworld_gym.service, "
                   "convcodeworld_gym.service.command, convcodeworld_gym.testing\n"
                   f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_serve_without_the_extra_says_how_to_install_it_and_starts_nothing():
    done = _python("import sys\nsys.modules['openenv'] = None  # as if not installed\n"
                   "from convcodeworld_gym.cli import main\n"
                   "sys.exit(main(['serve', '--dataset', 'humaneval', '--port', '0']))")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "convcodeworld serve: error:" in done.stderr and OPENENV_INSTALL in done.stderr, done.stderr
    assert done.stdout == ""  # no URL: nothing was served
    helped = subprocess.run([sys.executable, "-m", "convcodeworld_gym.cli", "serve", "--help"], capture_output=True,
                            text=True, timeout=120, cwd=ROOT)
    assert helped.returncode == 0 and "--max-sessions" in helped.stdout and "127.0.0.1" in helped.stdout


def test_secrets_are_masked_in_text_bytes_and_every_log_record(caplog):
    key = "sk-abc\"def-0123456789"  # with a character JSON escapes
    secrets = Secrets([key, "short", None])
    assert secrets.mask_text(f"a {key} b") == f"a {'*' * len(key)} b"
    escaped = '"sk-abc\\"def-0123456789"'
    assert secrets.mask_text(escaped) == '"' + "*" * (len(escaped) - 2) + '"'  # its JSON form too
    assert secrets.mask_bytes(key.encode()) == b"*" * len(key)
    assert secrets.mask({"a": [key, ("x", key)]}) == {"a": ["*" * len(key), ("x", "*" * len(key))]}
    assert secrets.mask_text("short") == "short"  # too short to be a secret
    factory = logging.getLogRecordFactory()
    try:
        secrets.guard_logs()
        secrets.guard_logs()  # idempotent
        log = logging.getLogger("ccw.test.secrets")
        with caplog.at_level(logging.INFO, logger="ccw.test.secrets"):
            log.info("calling with %s", key)
            try:
                raise RuntimeError(f"endpoint said: bad key {key}")
            except RuntimeError:
                log.exception("failed")
        text = caplog.text
        plain = logging.getLogRecordFactory()("n", logging.INFO, "f", 1, "%s %s", ("GET", "/health"), None)
        assert plain.args == ("GET", "/health")  # no secret in it: left as it is (uvicorn's formatters read args)
    finally:
        logging.setLogRecordFactory(factory)
    assert key not in text and "calling with " + "*" * len(key) in text and "bad key " + "*" * len(key) in text, text


def test_the_server_image_serves_the_bigcodebench_runtime_with_this_cli():
    dockerfile = (ROOT / "envs" / "server" / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE=convcodeworld-bigcodebench$", dockerfile, re.M)  # the Docker backend's image
    assert re.search(r"^FROM \$\{BASE\}$", dockerfile, re.M)
    assert "[openenv]" in dockerfile
    cmd = re.search(r"^CMD (\[.*\])$", dockerfile, re.M)
    assert cmd, dockerfile
    argv = [word.strip('"') for word in re.findall(r'"[^"]*"', cmd.group(1))]
    assert argv[:2] == ["convcodeworld", "serve"]
    args = build_parser().parse_args(argv[1:])
    assert args.func is cmd_serve and args.host == "0.0.0.0" and args.dataset == "bigcodebench"
    documented = re.findall(r"^#\s+(docker (?:build|run) .*)$", dockerfile, re.M)
    assert any("-p 127.0.0.1:8000:8000" in line for line in documented), documented  # published on loopback only
    assert all(shlex.split(line) for line in documented)
