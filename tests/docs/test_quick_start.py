"""The README's quick start, followed as a newcomer would on a machine with nothing but Python:
a fresh clone, a new virtualenv, `pip install -e .` (and `'.[test]'`), then the first answer.
There is no network here: pip is kept to this machine (no index, no dependencies, the build
tools and agi's dependencies from the test environment on PYTHONPATH), and the first answer comes
from the scripted server standing in for the user's endpoint (OPENAI_BASE_URL)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig

import pytest
from docblocks import REPO, shell_blocks

from fakeserver import FakeModel, text

QUESTION = "Which Linux distribution is this machine running?"


def block(first: str) -> str:
    [found] = [b.text for b in shell_blocks() if b.page == "README.md" and b.name.endswith(first)]
    return found


def test_the_quick_start_in_a_fresh_clone_and_venv(env, tmp_path):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("the quick start clones the repository: git or the checkout's .git missing")
    start = block("git clone URL agi && cd agi")
    model = block("export OPENAI_API_KEY=sk-...").splitlines()[:2]  # the hosted provider's
    tests = block("pip install -e '.[test]'").splitlines()[0]
    assert start.startswith("git clone URL agi ")
    script = "\n".join(
        [
            start.replace("git clone URL agi", f"git clone -q '{REPO}' agi", 1).rstrip(),
            'echo "status $?"; command -v agi',
            *model,
            'echo "status $?"',
            tests,
            'echo "status $?"',
        ]
    )
    conf = tmp_path / "pip.conf"  # offline: what pip needs is already on this machine
    conf.write_text(
        "[global]\nno-index = true\n[install]\nno-deps = true\nno-build-isolation = false\n"
    )
    for name in ("AGI_CONFIG", "VIRTUAL_ENV", "PYTHONHOME"):
        env.pop(name, None)
    home = tmp_path / "home"
    home.mkdir()
    with FakeModel(text("Debian GNU/Linux 12")) as server:
        env.update(
            HOME=str(home),
            PIP_CONFIG_FILE=str(conf),
            PIP_DISABLE_PIP_VERSION_CHECK="1",
            PYTHONPATH=sysconfig.get_paths()["purelib"],
            OPENAI_BASE_URL=server.url,
        )
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        sent = list(server.requests)
    out = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    # no model yet: one line saying what is missing, exit 2, nothing sent
    missing = [line for line in done.stderr.splitlines() if line.startswith("agi: ")]
    assert missing[0].startswith("agi: no model configured: pass -m PROVIDER:MODEL"), done.stderr
    statuses = [line for line in out if line.startswith("status ")]
    assert statuses == ["status 2", "status 0", "status 0"], done.stdout  # pip's own lines between
    assert str(tmp_path / "agi" / ".venv" / "bin" / "agi") in out  # the clone's own agi
    # the key the user exported, the model named: the first answer
    assert "Debian GNU/Linux 12" in out, done.stderr
    assert len(sent) == 1 and sent[0]["model"] == "gpt-4o-mini"
    assert QUESTION in str(sent[0]["messages"][-1]["content"])
    assert (tmp_path / "agi" / ".venv").is_dir() and not os.path.exists(home / ".config" / "agi")
