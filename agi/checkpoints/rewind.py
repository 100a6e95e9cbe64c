"""Going back to before a turn (docs: checkpoints): the turns of a session, what each
changed, and the restore of files and conversation.

Files: for each working directory the turns since N worked in, the first snapshot since N is
the target; the working directory now is snapshotted too (kept, so a rewind can be undone), and
every file that differs is written back whole or removed (agi.checkpoints.shadow). Files Write and
Edit touched outside a snapshot (elsewhere, ignored, no git, a huge tree) get their recorded
prior content. A file that changed while no turn of this session ran (between a turn's end and
the next one's start, or since the last) was changed by someone else: restored too, and named.

Only records that pass their check are used (agi.checkpoints.snapshots.read_records); the
files changed are those of the directory each checkpoint recorded (still that directory, not a
link), never through a link on the way, plus the files Write and Edit recorded. Files a turn
made that an ignore rule it wrote hides are found with the checkpoint's own rules
(Shadow.hidden). Files no checkpoint kept (over 5 MB, holding a key, a nested repository) are
left as they are and named (`Plan.left`).

Conversation: a rewind record (agi.checkpoints.rewinds) appended to messages.jsonl.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agi.checkpoints.rewinds import REWIND
from agi.checkpoints.shadow import (
    EMPTY_BLOB,
    Change,
    Shadow,
    ShadowError,
    TooMany,
    checked_path,
    write_whole,
)
from agi.checkpoints.snapshots import (
    OFF,
    append_record,
    kept_out,
    load_blob,
    owner_of,
    read_records,
)
from agi.options.config import agi_home


@dataclass
class Turn:
    number: int
    time: float = 0.0
    prompt: str = ""
    start: int = 0
    cwd: str = ""
    tree: str | None = None
    skipped: list[str] = field(default_factory=list)
    end: str | None = None
    untracked: str | None = None
    priors: list[dict[str, Any]] = field(default_factory=list)
    rewound: bool = False
    kept_out: list[str] = field(default_factory=list)  # relative to cwd: never snapshotted
    withheld: list[str] = field(default_factory=list)  # holding a key: never snapshotted
    stamps: dict[str, list[int]] = field(default_factory=dict)  # of those left out
    excludes: str | None = None  # the project's ignore rules at the checkpoint (a blob)


def read_turns(
    session_path: Path, home: Path, strict: bool = True
) -> tuple[list[Turn], list[dict[str, Any]]]:
    """The session's turns in order, and its rewind records, from the records agi wrote
    (`strict`: any other line is refused, agi.checkpoints.snapshots.RecordsError). A turn is
    `rewound` when a conversation rewind took the view back past it (and none brought it back
    since)."""
    turns: dict[int, Turn] = {}
    rewinds = []
    rewound: set[int] = set()
    at_start: dict[int, set[int]] = {}  # the turns rewound when each began
    for r in read_records(session_path, home, strict):  # shapes checked there
        if "rewind" in r:
            rewinds.append(r)
            if r.get("conversation"):
                back = r["rewind"]
                rewound = at_start.get(back, rewound) | {t for t in turns if t >= back}
            continue
        n = r["turn"]
        if "prompt" in r:
            turns[n] = Turn(n, r.get("time", 0), r["prompt"], r.get("start", 0), r["cwd"])
            at_start[n] = set(rewound)
            turns[n].untracked = r.get("untracked")
            continue
        turn = turns.get(n)
        if turn is None:
            continue
        if "tree" in r:
            if r["cwd"] != turn.cwd:
                continue  # a snapshot is of the directory its turn recorded, no other
            turn.tree, turn.skipped = r["tree"], list(r.get("skipped", []))
            turn.kept_out, turn.withheld = list(r.get("kept_out", [])), list(r.get("withheld", []))
            turn.stamps, turn.excludes = dict(r.get("stamps", {})), r.get("excludes")
        elif "end" in r:
            turn.end = r["end"]
        elif "untracked" in r:
            turn.untracked = r["untracked"]
        elif "prior" in r:
            turn.priors.append(r)
    for number in rewound & set(turns):
        turns[number].rewound = True
    return sorted(turns.values(), key=lambda t: t.number), rewinds


def shown(path: str, cwd: str) -> str:
    """A path as the listing shows it: relative to the turn's directory when inside it."""
    if cwd and (path == cwd or path.startswith(cwd.rstrip("/") + "/")):
        return os.path.relpath(path, cwd)
    return path


def changed_in(turn: Turn, turns: list[Turn], home: Path, owner: str) -> list[str] | None:
    """The files a turn changed (None: unknown, the turn never ended or took no checkpoint);
    read from the recorded trees only (nothing written)."""
    if turn.untracked == OFF:
        return None
    paths = [shown(p["prior"], turn.cwd) for p in turn.priors]
    if turn.tree is not None:
        after = turn.end
        if after is None:
            later = [t for t in turns if t.number > turn.number and t.cwd == turn.cwd]
            after = next((t.tree for t in later if t.tree), None)
        if after is None:
            return None
        try:
            changes = Shadow(home, turn.cwd, owner).changes(turn.tree, after)
        except ShadowError:
            return None
        paths += [c.path for c in changes]
    return sorted(set(paths))


NOT_KEPT = {
    "over 5 MB": "it was over 5 MB before turn {n}: its content was not kept",
    "holds a key": "it held an API key before turn {n}: its content was not kept",
}


@dataclass
class Plan:
    """What a rewind of files does: per working directory the target and the changes, plus
    the Write/Edit priors to put back; `others`: paths changed by someone else since; `left`:
    (path, why) of the files it leaves as they are."""

    groups: list[tuple[Shadow, str, list[Change]]] = field(default_factory=list)
    priors: list[dict[str, Any]] = field(default_factory=list)
    others: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    now: dict[str, str] = field(default_factory=dict)  # cwd: the tree before the rewind
    after: dict[str, str] = field(default_factory=dict)  # cwd: the tree after it
    left: list[tuple[str, str]] = field(default_factory=list)
    unkept: set[str] = field(default_factory=set)  # left out of a snapshot (big, a key)
    refused: list[str] = field(default_factory=list)  # directories not restored, and why

    def paths(self) -> list[tuple[str, str]]:
        """(action, absolute path) for each file, `restore` or `remove`."""
        out = []
        for shadow, _, changes in self.groups:
            for c in changes:
                action = "remove" if c.status == "A" else "restore"
                out.append((action, os.path.join(shadow.workdir, c.path)))
        for p in self.priors:
            out.append(("remove" if p["blob"] is None else "restore", p["prior"]))
        return out


def plan_files(
    turns: list[Turn],
    number: int,
    home: Path,
    session_path: Path,
    dry: bool = False,
    secrets: list[bytes] | None = None,
) -> Plan:
    """What rewinding the files to before turn `number` does; the session's directory and
    $AGI_HOME are never touched, nor anything outside the directories the turns recorded
    (and the files Write and Edit recorded). `dry`: nothing is written (the snapshot of the
    tree now goes to a temporary index and object directory, removed after)."""
    plan, owner, keep_out = Plan(), owner_of(session_path), kept_out(session_path, home)
    since = [t for t in turns if t.number >= number]
    _, rewinds = read_turns(session_path, home)
    covered: list[tuple[Shadow, set[str]]] = []  # the paths the snapshots speak for
    for cwd in dict.fromkeys(t.cwd for t in since if t.tree):
        mine = [t for t in since if t.cwd == cwd]
        first = next(t for t in mine if t.tree)
        if os.path.realpath(cwd) != cwd or not os.path.isdir(cwd):
            plan.refused.append(
                f"{cwd}: no longer the directory turn {first.number} recorded (gone, or a "
                "link now); nothing in it is restored"
            )
            continue
        recorded = {Path(cwd, p) for t in mine for p in t.kept_out}  # kept out back then
        shadow = Shadow(home, cwd, owner, (*keep_out, *recorded), secrets)
        with shadow.dry() if dry else contextlib.nullcontext():
            try:
                _plan_directory(plan, shadow, first, mine, rewinds, covered)
            except TooMany:
                plan.warnings.append(f"{cwd} now holds too many files; only Write/Edit are undone")
    seen: set[str] = set()
    for turn in since:
        for prior in turn.priors:
            path = prior["prior"]
            if path in seen or _inside(path, keep_out):
                continue
            seen.add(path)
            if _in_snapshot(path, covered) or path in plan.unkept:
                continue  # the snapshot's to restore, or to name
            why = NOT_KEPT.get(prior.get("kept", "content"))
            if why is not None:
                plan.left.append((path, why.format(n=turn.number)))
            elif _differs(home, prior):
                plan.priors.append(prior)
    return plan


def _plan_directory(
    plan: Plan,
    shadow: Shadow,
    first: Turn,
    mine: list[Turn],
    rewinds: list[dict[str, Any]],
    covered: list[tuple[Shadow, set[str]]],
) -> None:
    """One working directory's part of the plan: the changes from the first snapshot since
    the turn to the tree now."""
    assert first.tree is not None
    now = shadow.snapshot()
    plan.now[shadow.workdir] = now.tree
    # over 5 MB (or holding a key) at the checkpoint: no content to go back to, left alone
    # and named when it changed; over 5 MB only now: put back (grown: it is in the
    # checkpoint) or removed (created since)
    unkept = {p: "over 5 MB" for p in first.skipped} | {p: "holds a key" for p in first.withheld}
    before = shadow.names(first.tree)
    changes = []
    for c in shadow.changes(first.tree, now.tree):
        if c.path in unkept:
            continue
        if "160000" in (c.mode, c.now_mode):  # a nested repository: never ours to change
            plan.left.append((os.path.join(shadow.workdir, c.path), NESTED))
            continue
        changes.append(c)
    made = sorted({*now.skipped, *now.withheld} - set(unkept) - before)
    with shadow.rules(first.tree, first.excludes) as ignored:
        # what the checkpoint's rules ignore was not in it for that reason, not because the
        # turn made it (a turn that removed the rule): left as it is, as ignored files are
        created = [c.path for c in changes if c.status == "A"] + made
        then_ignored = ignored(created)
        changes = [c for c in changes if c.status != "A" or c.path not in then_ignored]
        made = [p for p in made if p not in then_ignored]
        # created since and hidden by an ignore rule written since: the checkpoint's rules
        hidden = shadow.hidden(ignored, first.time)
    made += [p for p in hidden if p not in before and p not in unkept and p not in made]
    changes += [Change("A", p, "000000", EMPTY_BLOB) for p in made]
    plan.groups.append((shadow, first.tree, changes))
    plan.unkept |= {os.path.join(shadow.workdir, p) for p in unkept}
    for rel, why in sorted(unkept.items()):
        if _stamp(shadow.workdir, rel) != first.stamps.get(rel):
            text = NOT_KEPT[why].format(n=first.number).replace("before turn", "at turn")
            plan.left.append((os.path.join(shadow.workdir, rel), text))
    # a file in neither tree (ignored, over 5 MB before, in a nested repository) is
    # Write's and Edit's to restore
    known = before | shadow.names(now.tree) | set(made)
    covered.append((shadow, known - set(unkept)))
    plan.others |= _others(shadow, mine, rewinds, now.tree)


NESTED = "a repository of its own inside the directory: not restored"


def _stamp(workdir: str, rel: str) -> list[int] | None:
    try:
        st = os.lstat(os.path.join(workdir, rel))
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _others(shadow: Shadow, mine: list[Turn], rewinds: list[dict[str, Any]], now: str) -> set[str]:
    """What changed in this directory while none of these turns, nor a rewind since the
    first of them, ran: between one's end and the next one's start."""
    found: set[str] = set()
    tracked = [(t.time, t.tree, t.end) for t in mine if t.tree]
    cwd = mine[0].cwd
    for r in rewinds:  # a rewind's own changes are agi's, not someone else's
        trees = [r.get(k, {}) for k in ("before", "after")]
        if tracked and trees[0].get(cwd) and trees[1].get(cwd) and r.get("time", 0) > mine[0].time:
            tracked.append((r["time"], trees[0][cwd], trees[1][cwd]))
    tracked.sort(key=lambda span: span[0])
    spans = [(a[2], b[1]) for a, b in zip(tracked, tracked[1:], strict=False)]
    spans.append((tracked[-1][2] if tracked else None, now))
    for before, after in spans:
        if before and after:
            found |= {os.path.join(shadow.workdir, c.path) for c in shadow.changes(before, after)}
    return found


def _inside(path: str, dirs: tuple[Path, ...]) -> bool:
    return any(path.startswith(os.path.realpath(d).rstrip("/") + "/") for d in dirs)


def _in_snapshot(path: str, covered: list[tuple[Shadow, set[str]]]) -> bool:
    for shadow, known in covered:
        root = shadow.workdir.rstrip("/") + "/"
        if path.startswith(root) and path[len(root) :] in known:
            return True
    return False


def _differs(home: Path, prior: dict[str, Any]) -> bool:
    """Whether the file is not as Write or Edit found it (read without following a link or
    waiting on a pipe put there since, and no further than the kept content's length)."""
    path = prior["prior"]
    if prior["blob"] is None:
        return os.path.lexists(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return True
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        kept = load_blob(home, prior["blob"])
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(kept):
            return True
        return f.read(len(kept) + 1) != kept


def apply_files(plan: Plan, home: Path) -> tuple[list[str], list[str]]:
    """Carry out a plan; returns (restored or removed paths, failures)."""
    done, failed = [], []
    for shadow, tree, changes in plan.groups:
        ok, bad = shadow.restore(tree, changes)
        done += [os.path.join(shadow.workdir, p) for p in ok]
        failed += bad
        try:  # what the rewind left: a later one tells its changes from someone else's
            plan.after[shadow.workdir] = shadow.snapshot().tree
        except (ShadowError, TooMany, OSError):
            pass
    for prior in plan.priors:
        path = prior["prior"]
        try:
            checked_path("/", path.lstrip("/"))  # never through a link put on the way
            if prior["blob"] is None:
                if os.path.islink(path) or os.path.lexists(path) and not os.path.isdir(path):
                    os.unlink(path)
            else:
                write_whole(path, load_blob(home, prior["blob"]), prior.get("mode", "100644"))
            done.append(path)
        except OSError as e:
            failed.append(f"{path}: {e.strerror or e}")
    return done, failed


def rewind_conversation(session: Any, turn: Turn) -> None:
    """Append the rewind record (under the session's lock): the view goes back to before the
    turn's prompt; nothing is erased."""
    record = {
        "role": "system",
        "content": f"[rewound to before turn {turn.number}]",
        REWIND: {"turn": turn.number, "to": turn.start, "time": round(time.time(), 3)},
    }
    session.append(record)


def record_rewind(
    session: Any, number: int, plan: Plan | None, kind: str, done: list[str], home: Path
) -> None:
    """`kind`: both, files or conversation. Counted in meta.json (for --list-sessions); `at`:
    the messages the session held then (where --show puts a files-only rewind)."""
    session.load()
    record: dict[str, Any] = {"rewind": number, "time": round(time.time(), 3), "kind": kind}
    record.update(conversation=kind != "files", files=done, at=len(session.messages))
    if plan is not None and plan.now:
        record["before"] = plan.now  # the trees of the working directories before it
        record["after"] = plan.after
    append_record(session.path, record, home)
    rewinds = session.meta.get("rewinds")
    session.write_meta(rewinds=(rewinds if isinstance(rewinds, int) else 0) + 1)


def files_rewinds(session_path: Path, home: Path | None = None) -> dict[int, list[str]]:
    """For --show: the lines of the files-only rewinds (a conversation rewind has its record
    in messages.jsonl), by the number of messages the session held when each was made."""
    marks: dict[int, list[str]] = {}
    for r in read_records(session_path, home or agi_home()):
        at, number = r.get("at"), r.get("rewind")
        if r.get("kind") == "files" and isinstance(at, int) and isinstance(number, int):
            count = len(r.get("files") or [])
            line = f"── files rewound to before turn {number} ({count} file{'s' * (count != 1)}) ──"
            marks.setdefault(at, []).extend(["", line])
    return marks


def session_owner(session_path: Path) -> str:
    return owner_of(session_path)
