"""Code cites the documentation: every `docs: NAME` in agi/, tests/ and lua/ names a page of
docs/ (docs/development.md, "The documentation")."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"docs: ((?:[a-z][a-z-]*)(?:, [a-z][a-z-]*)*)")


def pages() -> set[str]:
    names = set()
    for page in (ROOT / "docs").rglob("*.md"):
        names.add(page.parent.name if page.stem == "index" else page.stem)
    return names


def citations() -> list[tuple[str, str]]:
    found = []
    for folder, pattern in (("agi", "*.py"), ("tests", "*.py"), ("lua", "*.lua")):
        for path in sorted((ROOT / folder).rglob(pattern)):
            if "fixtures" in path.parts:
                continue
            for match in CITATION.finditer(path.read_text(encoding="utf-8")):
                for name in match.group(1).split(", "):
                    found.append((str(path.relative_to(ROOT)), name))
    return found


def test_every_citation_names_a_page():
    known = pages()
    cited = citations()
    assert len(cited) > 50, "the code cites its documentation"
    wrong = sorted({f"{where}: docs: {name}" for where, name in cited if name not in known})
    assert not wrong, "citations of pages that do not exist:\n" + "\n".join(wrong)


def test_no_module_cites_the_outside_contract():
    cites = [
        str(p.relative_to(ROOT))
        for folder in ("agi", "lua")
        for p in (ROOT / folder).rglob("*")
        if p.suffix in (".py", ".lua") and "CONTRACT" in p.read_text(encoding="utf-8")
    ]
    assert not cites, f"modules citing a document outside the repository: {cites}"
