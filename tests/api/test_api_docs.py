"""docs/python.md's examples run as they are: each ```python block in a program of its own
against the scripted server (the model from AGI_MODEL, as the page says), with the replies the
block needs; a block added to the page needs its script here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from api_script import python

from fakeserver import FakeModel, call, text

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)

GREETING = {"reason": "a greeting", "success": True}
SCRIPTS = {  # the first line of each block: the replies it is given, and what it must print
    "import agi\n\nresult = agi.run(": ([text("Fedora Linux 41.")], "Fedora Linux 41."),
    "import agi\n\nreview = agi.run(": (
        [text("It defines add."), text(json.dumps({"functions": ["add"]}))],
        "['add']",
    ),
    "import agi\n\ntry:": (
        [
            call("calculate", expression="1+1"),
            text("Hello!"),
            text('{"reason": "a greeting", "success": true}'),
        ],
        "0 {'reason': 'a greeting', 'success': True}",
    ),
    "import agi\n\nwith agi.stream(": ([text("Pipes carry the words")], "Pipes carry the words"),
    "import agi\n\nchat = agi.Session(": ([text("Noted."), text("Ada.")], "Ada."),
    "import asyncio\n\nimport agi\n": ([text("Seven.")], "['Seven.', 'Seven.']"),
    "import agi\n\n\ndef ask(": (
        [call("Bash", command="date"), text("Today.")],
        "Bash: {'command': 'date'}",
    ),
    "from concurrent.futures import": ([text("4.")], "['4.', '4.', '4.']"),
}


def key_of(block: str) -> str:
    found = [k for k in SCRIPTS if block.startswith(k)]
    assert len(found) == 1, f"docs/python.md has a block this test has no script for:\n{block}"
    return found[0]


def test_every_block_has_its_script():
    assert sorted(key_of(b) for b in BLOCKS) == sorted(SCRIPTS)


@pytest.mark.parametrize("block", BLOCKS, ids=[key_of(b).split("\n")[-1][:24] for b in BLOCKS])
def test_the_example_runs(block, env, tmp_path):
    script, expected = SCRIPTS[key_of(block)]
    with FakeModel(*script) as server:
        served = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        done = python(block, served, tmp_path, prelude=False)
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout, done.stdout
