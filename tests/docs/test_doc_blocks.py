"""Every sh and bash block of README.md and docs/ runs: against the scripted model server, in a
small git repository, with agi's state and the home under the test's own directory. Blocks that
cannot run here are listed in doc_cases.py with the reason, and the lists are kept current."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doc_cases import BY_CI, NOT_RUN, cases
from docblocks import (
    GIT_ID,
    REPO,
    SHELL_LIKE,
    Block,
    Case,
    Oracle,
    Ran,
    blocks_of,
    pages,
    shell_blocks,
    workspace,
)

from fakeserver import FakeModel

BLOCKS = {b.name: b for b in shell_blocks()}
CASES = cases()
# blocks of `$ command` lines, each followed by what it prints
TRANSCRIPTS = sorted(n for n, b in BLOCKS.items() if b.text.startswith("$ "))


def test_every_shell_block_is_run_or_listed_with_its_reason():
    unaccounted = sorted(set(BLOCKS) - set(CASES) - set(NOT_RUN) - set(BY_CI) - set(TRANSCRIPTS))
    assert not unaccounted, (
        "shell blocks that no test runs (add a Case to tests/docs/doc_cases*.py, or list them "
        "in NOT_RUN with the reason):\n" + "\n".join(unaccounted)
    )


def test_the_lists_name_only_blocks_that_exist():
    listed = [*CASES, *NOT_RUN, *BY_CI]
    stale = sorted(name for name in listed if name not in BLOCKS)
    assert not stale, "listed, but no page has such a block:\n" + "\n".join(stale)
    assert len(listed) == len(set(listed)), "a block is listed twice"


def test_no_two_shell_blocks_share_a_name():
    names = [b.name for b in shell_blocks()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_shell_blocks_are_marked_sh_or_bash():
    """A shell block under another name would escape the tests above."""
    found = [b for page in pages() for b in blocks_of(page)]
    other = [f"{b.page}:{b.line} ({b.lang})" for b in found if b.lang in SHELL_LIKE]
    assert not other, "mark these blocks ```sh:\n" + "\n".join(other)


def test_the_blocks_ci_runs_are_in_ci():
    ci = (REPO / ".ci" / "run").read_text()
    for name in BY_CI:
        for line in BLOCKS[name].text.splitlines():
            for command in line.split("&&"):
                assert command.strip() in ci, f"{command.strip()!r} is not in .ci/run"


def run(block: Block, case: Case, tmp: Path, env: dict[str, str]) -> Ran:
    """Run one block as a user would paste it, with agi pointed at the scripted model."""
    work, home = tmp / "work", tmp / "home"
    work.mkdir()
    env = dict(env, HOME=str(home), TMPDIR=str(tmp), **GIT_ID)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    workspace(work, home, env)
    if case.setup:
        case.setup(work, home)
    if case.config:
        Path(env["AGI_CONFIG"]).write_text(case.config)
    with FakeModel(Oracle(case.routes)) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="fake-model", **case.env)
        script = ("set -e\n" if case.errexit else "") + case.prelude + block.text
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return Ran(done.returncode, done.stdout, done.stderr, work, home, list(server.requests))


def transcript(block: Block, tmp: Path, env: dict[str, str]) -> None:
    """A block of `$ command` lines, each followed by what it prints: run each, compare."""
    shown: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            shown.append((line[2:], []))
        else:
            shown[-1][1].append(line)
    with FakeModel(Oracle()) as server:
        env = dict(env, AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        for command, expected in shown:
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=tmp,
                env=env,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=60,
            )
            assert (done.stdout + done.stderr).rstrip("\n").splitlines() == expected
        assert server.requests == []


@pytest.mark.parametrize("name", sorted(set(CASES) & set(BLOCKS)))
def test_the_block_runs(name, tmp_path, env):
    block, case = BLOCKS[name], CASES[name]
    missing = [program for program in case.needs if not shutil.which(program)]
    missing = [p for p in missing if not (Path(sys.executable).parent / p).exists()]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (see docs/development.md, Tests)")
    r = run(block, case, tmp_path, env)
    assert "Traceback" not in r.stderr, r.stderr
    if case.check:
        case.check(r)


@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_the_transcript_shows_what_the_command_prints(name, tmp_path, env):
    transcript(BLOCKS[name], tmp_path, env)
