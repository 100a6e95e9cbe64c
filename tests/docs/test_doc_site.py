"""The README stays short and starts with the two commands a newcomer needs; every internal link
of the README and docs/ resolves; mkdocs.yml's navigation has every page; the site builds with
`mkdocs build --strict` and its API page shows all of `agi.__all__`."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from docblocks import REPO, blocks_of, pages

import agi

README = REPO / "README.md"
DOCS = REPO / "docs"
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_is_at_most_300_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


def test_the_readmes_first_commands_install_and_run_agi_then_run_the_tests():
    first = blocks_of(README)[0]
    assert first.lang == "sh" and first.line == 3, "the README opens with its commands"
    install_and_run, tests = first.text.splitlines()
    assert re.match(r"pip install -e '\.\[test\]' && agi ", install_and_run), install_and_run
    assert tests == "python -m pytest -q -n 4"


def test_the_readme_says_how_to_install_and_how_long_the_tests_take():
    text = README.read_text(encoding="utf-8")
    assert "Python 3.11 or later" in text
    commands = [line for b in blocks_of(README) if b.lang == "sh" for line in b.text.splitlines()]
    assert "pip install -e ." in commands, "an install line without the test extras"
    assert "4–6 minutes on 2 cores" in text


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension gives a heading (mkdocs' default)."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    found = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.add(slug(line.lstrip("#").strip()))
    return found


def test_slugs_are_made_as_mkdocs_makes_them():
    assert slug("Judging success: `--exit-code`") == "judging-success-exit-code"
    assert slug("What differs from Claude Code") == "what-differs-from-claude-code"


def broken_links(page: Path) -> list[str]:
    broken = []
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # links in code are not links
    text = re.sub(r"`[^`\n]*`", "", text)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    return broken


def test_every_internal_link_resolves():
    broken = [b for page in pages() for b in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_the_docs_link_only_inside_the_site():
    """A page linking outside docs/ would be a broken link on the built site."""
    outside = []
    for page in sorted(DOCS.rglob("*.md")):
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in LINK.findall(text):
            path = target.partition("#")[0]
            if not path or re.match(r"[a-z]+:", path):
                continue
            if DOCS.resolve() not in (page.parent / path).resolve().parents:
                outside.append(f"{page.relative_to(REPO)}: {target}")
    assert not outside, "\n".join(outside)


def nav_pages(entries: list) -> list[str]:
    found = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        found += nav_pages(value) if isinstance(value, list) else [value]
    return found


def test_the_navigation_has_every_page_and_only_pages_that_exist():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["docs_dir"] == "docs" and config["theme"]["name"] == "material"
    listed = nav_pages(config["nav"])
    on_disk = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(set(listed)) == on_disk
    assert len(listed) == len(set(listed))
    for page in ("python.md", "reference/api.md", "reference/options.md", "providers/transport.md"):
        assert page in listed


def test_the_api_page_documents_agi():
    text = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    assert re.search(r"^::: agi$", text, re.M)
    assert re.search(r"^\s+filters: public$", text, re.M), "members: those of agi.__all__"


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
    reason="mkdocs is not installed (pip install -e '.[docs]')",
)
def test_the_site_builds_strictly(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(Path(sys.executable).parent)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    shown = [name for name in agi.__all__ if f'id="agi.{name}"' in api]
    assert shown == list(agi.__all__), f"the API page lacks {set(agi.__all__) - set(shown)}"
