import importlib.metadata
import re
from pathlib import Path

import agi as agi_package

from fakeserver import FakeModel, text

REPO = Path(__file__).resolve().parents[1]
# what a user reads: the docs, the Neovim side, and every message agi prints
HINTED = [
    REPO / "README.md",
    *(REPO / d for d in ("docs", "doc", "agi", "lua", "rplugin", "plugin")),
]
# PyPI's `agi` is another project: `pip install agi`, `pip install 'agi[nvim]'`, "agi[mcp]"...
WRONG_HINT = re.compile(r"pip3? install\s+(?:-\S+\s+)*['\"]?agi(?![\w.-])|(?<![\w./~-])agi\[")


def test_one_answer(agi):
    with FakeModel(text("Hello there")) as server:
        r = agi("hi", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Hello there\n"
    assert r.stderr == ""
    assert server.requests[0]["messages"][-1] == {"role": "user", "content": "hi"}


def test_the_distribution_is_agi_cli_and_its_command_is_agi():
    dist = importlib.metadata.distribution("agi-cli")
    assert dist.metadata["Name"] == "agi-cli" and dist.version == agi_package.__version__
    scripts = [e for e in dist.entry_points if e.group == "console_scripts"]
    assert [(e.name, e.value) for e in scripts] == [("agi", "agi.frontends.cli.main:main")]


def test_no_install_hint_names_the_wrong_distribution():
    assert WRONG_HINT.search("run pip install 'agi[nvim]' there")  # the pattern finds the old hints
    assert WRONG_HINT.search("pip install -U agi") and WRONG_HINT.search('"agi[mcp]"')
    assert not WRONG_HINT.search("pip install -e ~/src/agi'[nvim]' or pip install -e '.[mcp]'")
    found = []
    for root in HINTED:
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if path.is_file() and path.suffix in (".md", ".txt", ".py", ".lua", ".vim", ""):
                for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    if WRONG_HINT.search(line):
                        found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not found, "install hints that name PyPI's `agi`, not agi-cli:\n" + "\n".join(found)
