"""The cases of docs/guides/volume.md's blocks: what each leaves under AGI_HOME (nothing, for an
ephemeral run) and how many model calls it made."""

from __future__ import annotations

import json

from doc_cases import files, ok
from docblocks import Case, Ran

from fakeserver import text

MAIL = files(**{"mail.txt": "Congratulations! You won a prize, send your bank details.\n"})


def agi_home(r: Ran) -> list[str]:
    home = r.work.parent / "agi-home"  # the env fixture's AGI_HOME, beside the work directory
    return sorted(str(p) for p in home.rglob("*")) if home.exists() else []


def nothing_kept(r: Ran) -> None:
    ok(r)
    assert r.stdout == "yes\n"
    assert agi_home(r) == []


def one_call(r: Ran) -> None:
    ok(r)
    assert json.loads(r.stdout) in ({"kind": "sales"}, {"kind": "support"}, {"kind": "spam"})
    assert len(r.requests) == 1 and "response_format" in r.requests[0]
    assert agi_home(r) == []


def volume() -> dict[str, Case]:
    page = "docs/guides/volume.md: "
    return {
        page + 'agi --ephemeral --no-tools "Is this mail spam? Answer yes or no." < mail.txt': Case(
            setup=MAIL, routes={"Is this mail spam?": [text("yes")]}, check=nothing_kept
        ),
        page + "agi --ephemeral --no-tools --schema 'kind: enum(sales|support|spam)' < mail.txt": (
            Case(setup=MAIL, check=one_call)
        ),
    }
