"""A shell loop over lines that runs agi inside keeps agi from reading the loop's input: stdin
that is not a terminal is read to its end (contract, section 1), so a bare `agi PROMPT` in
`... | while read -r x; do agi "$x"; done` would take every remaining line and run once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from docblocks import requested_schema, shell_blocks, turn

from fakeserver import FakeModel, text

TASKS = ["Tag the release", "Write the notes", "Publish the wheel"]


def loops() -> list[tuple[str, str]]:
    """(block name, loop text) of every `while read` loop in README.md and docs/ that runs agi."""
    found = []
    for block in shell_blocks():
        for loop in re.findall(r"while read[^\n]*?;?\s*do\b.*?\bdone\b", block.text, re.S):
            if re.search(r"(^|[\s;|(])agi\s", loop):
                found.append((block.name, loop))
    return found


def test_every_loop_in_the_docs_keeps_agi_off_its_input():
    assert loops(), "the docs' loops are not found"
    for name, loop in loops():
        for line in re.findall(r"(?:^|[;|\s(])(agi\s[^;|\n]*)", loop):
            assert "--no-stdin" in line or "</dev/null" in line or "< /dev/null" in line, (
                f"{name}: {line!r} reads the loop's input"
            )


def test_the_structured_guides_task_loop_runs_every_task(env, tmp_path):
    [block] = [b for b in shell_blocks() if "while read -r task" in b.text]
    start = block.text.index("agi --schema '[task_title")
    command = block.text[start : block.text.index("done", start) + len("done")]

    def answer(body):
        if requested_schema(body) is not None:  # the plan: three tasks, whatever the wrapping
            tasks = [{"task_title": t} for t in TASKS]
            wrapped = "items" in (requested_schema(body) or {}).get("properties", {})
            return text(json.dumps({"items": tasks} if wrapped else tasks))
        return text("did " + turn(body)[0])

    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    with FakeModel(answer) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        done = subprocess.run(
            ["bash", "-c", command],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        prompts = [turn(body)[0] for body in server.requests if "Do this" in turn(body)[0]]
    assert done.returncode == 0, done.stderr
    assert prompts == [f"Do this: {t}" for t in TASKS]
    assert done.stdout.splitlines() == [f"did Do this: {t}" for t in TASKS]
