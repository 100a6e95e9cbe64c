"""The cases of docs/guides/volume.md's blocks: what each leaves under AGI_HOME (nothing, for an
ephemeral run) and how many model calls it made."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

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


def listed(r: Ran) -> None:
    """An old session (made by the prelude, then aged) is listed and left in place."""
    ok(r)
    (session,) = r.stdout.splitlines()
    assert (Path(session) / "meta.json").exists()


def aged_session(work: Path, home: Path) -> None:
    """A session under AGI_HOME last used 40 days ago."""
    session = work.parent / "agi-home" / "sessions" / "20200101-000000-old"
    session.mkdir(parents=True)
    (session / "meta.json").write_text('{"agi_session": 1}\n')
    then = time.time() - 40 * 86400
    for p in (session / "meta.json", session):
        os.utime(p, (then, then))


def volume() -> dict[str, Case]:
    page = "docs/guides/volume.md: "
    return {
        page + 'agi --ephemeral --no-tools "Is this mail spam? Answer yes or no." < mail.txt': Case(
            setup=MAIL, routes={"Is this mail spam?": [text("yes")]}, check=nothing_kept
        ),
        page + "agi --ephemeral --no-tools --schema 'kind: enum(sales|support|spam)' < mail.txt": (
            Case(setup=MAIL, check=one_call)
        ),
        page + "agi --prune 30d --dry-run": Case(setup=aged_session, check=listed),
    }
