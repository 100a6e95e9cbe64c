"""The Claude Agent SDK's own examples (tests/fixtures/sdk_examples/python/, MIT, copied
unchanged from anthropics/claude-agent-sdk-python) run with agi as their CLI, `cli_path` and the
environment alone set (example_runner.py), against the scripted model server: each example (or
each of its parts, named on its command line) one case of python_examples.py. Those that need
a Claude-only feature are listed in SOURCES.md there, with the reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from python_examples import CASES, Case

from conftest import AGI
from fakeserver import FakeModel

pytestmark = pytest.mark.timeout(180)

EXAMPLES = Path(__file__).parents[2] / "fixtures" / "sdk_examples" / "python" / "examples"
RUNNER = Path(__file__).with_name("example_runner.py")


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_python_sdk_example(env, tmp_path, case: Case):
    (tmp_path / "config.toml").write_text(case.config)
    e = {**env, "AGI_SDK_CLI": AGI, "AGI_MODEL": "fake-model"}
    e["CLAUDE_CONFIG_DIR"] = str(tmp_path / "claude")
    with FakeModel(*case.script(tmp_path)) as server:
        e["AGI_BASE_URL"] = server.url  # Claude models' calls too (ANTHROPIC_BASE_URL's place)
        done = subprocess.run(
            [sys.executable, str(RUNNER), str(EXAMPLES / case.example), *case.args],
            env=e, cwd=tmp_path, capture_output=True, text=True, timeout=150,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        case.check(done.stdout, done.stderr, server, tmp_path)
