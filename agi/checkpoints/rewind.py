"""Going back to before a turn (docs: checkpoints): the turns of a session, what each
changed, and the restore of files and conversation.

Files: for each working directory the turns since N worked in, the first snapshot since N is
the target; the working directory now is snapshotted too (kept, so a rewind can be undone), and
every file that differs is written back whole or removed (agi.checkpoints.shadow). Files Write and
Edit touched outside a snapshot (elsewhere, ignored, no git, a huge tree) get their recorded
prior content. A file that changed while no turn of this session ran (between a turn's end and
the next one's start, or since the last) was changed by someone else: restored too, and named.

Conversation: a rewind record (agi.checkpoints.rewinds) appended to messages.jsonl.
"""

from __future__ import annotations

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


def read_turns(session_path: Path) -> tuple[list[Turn], list[dict[str, Any]]]:
    """The session's turns in order, and its rewind records. A turn is `rewound` when a
    conversation rewind took the view back past it (and none brought it back since)."""
    turns: dict[int, Turn] = {}
    rewinds = []
    rewound: set[int] = set()
    at_start: dict[int, set[int]] = {}  # the turns rewound when each began
    for r in read_records(session_path):
        n = r.get("turn")
        if isinstance(r.get("rewind"), int):
            rewinds.append(r)
            if r.get("conversation"):
                back = r["rewind"]
                rewound = at_start.get(back, rewound) | {t for t in turns if t >= back}
            continue
        if not isinstance(n, int):
            continue
        if "prompt" in r:
            turns[n] = Turn(n, r.get("time", 0), str(r["prompt"]), int(r.get("start", 0)))
            turns[n].cwd, at_start[n] = str(r.get("cwd", "")), set(rewound)
        turn = turns.get(n)
        if turn is None:
            continue
        if isinstance(r.get("tree"), str):
            turn.tree, turn.skipped = r["tree"], list(r.get("skipped") or [])
            turn.kept_out = [str(p) for p in r.get("kept_out") or []]
        elif isinstance(r.get("end"), str):
            turn.end = r["end"]
        elif "untracked" in r:
            turn.untracked = str(r["untracked"])
        elif isinstance(r.get("prior"), str):
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
    """The files a turn changed (None: unknown, the turn never ended or took no checkpoint)."""
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


@dataclass
class Plan:
    """What a rewind of files does: per working directory the target and the changes, plus
    the Write/Edit priors to put back; `others`: paths changed by someone else since."""

    groups: list[tuple[Shadow, str, list[Change]]] = field(default_factory=list)
    priors: list[dict[str, Any]] = field(default_factory=list)
    others: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    now: dict[str, str] = field(default_factory=dict)  # cwd: the tree before the rewind
    after: dict[str, str] = field(default_factory=dict)  # cwd: the tree after it

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


def plan_files(turns: list[Turn], number: int, home: Path, session_path: Path) -> Plan:
    """What rewinding the files to before turn `number` does; the session's directory and
    $AGI_HOME are never touched."""
    plan, owner, keep_out = Plan(), owner_of(session_path), kept_out(session_path, home)
    since = [t for t in turns if t.number >= number]
    _, rewinds = read_turns(session_path)
    covered: list[tuple[Shadow, set[str]]] = []  # the paths the snapshots speak for
    for cwd in dict.fromkeys(t.cwd for t in since if t.tree):
        mine = [t for t in since if t.cwd == cwd]
        first = next(t for t in mine if t.tree)
        recorded = {Path(cwd, p) for t in mine for p in t.kept_out}  # kept out back then
        shadow = Shadow(home, cwd, owner, (*keep_out, *recorded))
        try:
            now = shadow.snapshot()
        except TooMany:
            plan.warnings.append(f"{cwd} now holds too many files; only Write/Edit are undone")
            continue
        plan.now[cwd] = now.tree
        assert first.tree is not None
        # over 5 MB at the checkpoint: no content to go back to, left alone; over 5 MB only
        # now: put back (grown: it is in the checkpoint) or removed (created since)
        skipped, before = set(first.skipped), _names(shadow, first.tree)
        changes = [c for c in shadow.changes(first.tree, now.tree) if c.path not in skipped]
        made = sorted(set(now.skipped) - skipped - before)
        changes += [Change("A", p, "000000", EMPTY_BLOB) for p in made]
        plan.groups.append((shadow, first.tree, changes))
        # a file in neither tree (ignored, over 5 MB before, in a nested repository) is
        # Write's and Edit's to restore
        known = before | _names(shadow, now.tree) | set(made)
        covered.append((shadow, known - skipped))
        plan.others |= _others(shadow, mine, rewinds, now.tree)
    seen: set[str] = set()
    for turn in since:
        for prior in turn.priors:
            if prior["prior"] not in seen and not _inside(prior["prior"], keep_out):
                seen.add(prior["prior"])
                if not _in_snapshot(prior["prior"], covered) and _differs(home, prior):
                    plan.priors.append(prior)
    return plan


def _others(shadow: Shadow, mine: list[Turn], rewinds: list[dict[str, Any]], now: str) -> set[str]:
    """What changed in this directory while none of these turns, nor a rewind since the
    first of them, ran: between one's end and the next one's start."""
    found: set[str] = set()
    tracked = [(t.time, t.tree, t.end) for t in mine if t.tree]
    cwd = mine[0].cwd
    for r in rewinds:  # a rewind's own changes are agi's, not someone else's
        trees = [v if isinstance(v := r.get(k), dict) else {} for k in ("before", "after")]
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


def _names(shadow: Shadow, tree: str) -> set[str]:
    out = shadow.git(["ls-tree", "-r", "-z", "--name-only", tree]).split(b"\0")
    return {os.fsdecode(p) for p in out if p}


def _in_snapshot(path: str, covered: list[tuple[Shadow, set[str]]]) -> bool:
    for shadow, known in covered:
        root = shadow.workdir.rstrip("/") + "/"
        if path.startswith(root) and path[len(root) :] in known:
            return True
    return False


def _differs(home: Path, prior: dict[str, Any]) -> bool:
    """Whether the file is not as Write or Edit found it (read without following a link or
    waiting on a pipe put there since)."""
    path = prior["prior"]
    if prior["blob"] is None:
        return os.path.lexists(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return True
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return True
        return f.read() != load_blob(home, prior["blob"])


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


def record_rewind(session: Any, number: int, plan: Plan | None, kind: str, done: list[str]) -> None:
    """`kind`: both, files or conversation. Counted in meta.json (for --list-sessions); `at`:
    the messages the session held then (where --show puts a files-only rewind)."""
    session.load()
    record: dict[str, Any] = {"rewind": number, "time": round(time.time(), 3), "kind": kind}
    record.update(conversation=kind != "files", files=done, at=len(session.messages))
    if plan is not None and plan.now:
        record["before"] = plan.now  # the trees of the working directories before it
        record["after"] = plan.after
    append_record(session.path, record)
    rewinds = session.meta.get("rewinds")
    session.write_meta(rewinds=(rewinds if isinstance(rewinds, int) else 0) + 1)


def files_rewinds(session_path: Path) -> dict[int, list[str]]:
    """For --show: the lines of the files-only rewinds (a conversation rewind has its record
    in messages.jsonl), by the number of messages the session held when each was made."""
    marks: dict[int, list[str]] = {}
    for r in read_records(session_path):
        at, number = r.get("at"), r.get("rewind")
        if r.get("kind") == "files" and isinstance(at, int) and isinstance(number, int):
            count = len(r.get("files") or [])
            line = f"── files rewound to before turn {number} ({count} file{'s' * (count != 1)}) ──"
            marks.setdefault(at, []).extend(["", line])
    return marks


def session_owner(session_path: Path) -> str:
    return owner_of(session_path)
