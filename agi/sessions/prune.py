"""Removing old sessions (docs: volume): `agi --prune AGE` and config `keep_sessions`.

A session under `$AGI_HOME/sessions` last used longer ago than AGE goes, with its index entries
and its indexes in the checkpoint repositories; a checkpoint repository that no existing session
uses any more goes too, and so does every file content Write and Edit kept in
`$AGI_HOME/checkpoints/files/` that no existing session's `checkpoints.jsonl` names (those are
shared by digest: one session removed frees only what no other names). Never a session a run
holds locked (its lock is taken for the removal, without waiting), never a symbolic link nor
anything whose real path lies outside `$AGI_HOME`. `keep_sessions` prunes when a run ends, at
most once a day (the stamp file `pruned`)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from agi.errors import UsageError

BLOB_NAME = re.compile(r"\.?[0-9a-f]{64}(\.\d+\.\d+)?")  # a content, or one being written
BLOB_REF = re.compile(rb'"blob":\s*"([0-9a-f]{64})"')  # a checkpoints.jsonl line naming one
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
AGE_HINT = "a number and a unit: s, m, h, d or w (30d, 12h, 45m)"
STAMP = "pruned"  # $AGI_HOME/pruned: when keep_sessions last pruned
DAY = 86400.0
YOUNG_REPOSITORY = 3600.0  # a repository this recent may belong to a run setting it up


def parse_age(text: object) -> float | None:
    """`30d`, `12h`, `45m`, `90s`, `2w` in seconds; None for anything else."""
    if not isinstance(text, str):
        return None
    found = AGE.fullmatch(text.strip().lower())
    if found is None:
        return None
    return float(found.group(1)) * UNITS[found.group(2)]


def age_of(text: str, where: str) -> float:
    seconds = parse_age(text)
    if seconds is None:
        raise UsageError(f"{where}: bad age {text!r}: give {AGE_HINT}")
    return seconds


@dataclass
class Pruned:
    """What a prune removed (or, in a dry run, would remove), and the sessions it kept."""

    sessions: list[Path] = field(default_factory=list)
    repositories: list[Path] = field(default_factory=list)
    blobs: list[Path] = field(default_factory=list)  # kept file contents no session names
    locked: list[Path] = field(default_factory=list)  # old enough, but a run holds them


def prune(home: Path, age: float, dry_run: bool = False, now: float | None = None) -> Pruned:
    """Remove the sessions under `home`/sessions unused for `age` seconds, their index entries,
    their checkpoint indexes, and the checkpoint repositories no session uses."""
    now = time.time() if now is None else now
    done = Pruned()
    real_home = os.path.realpath(home)
    sessions = home / "sessions"
    for entry in _entries(sessions):
        path = sessions / entry.name
        if not _own_directory(entry, real_home) or not _is_session(path):
            continue
        if now - last_used(path) < age:
            continue
        if dry_run:
            if _locked(path):
                done.locked.append(path)
            else:
                done.sessions.append(path)
            continue
        if _remove_unlocked(path):
            done.sessions.append(path)
        else:
            done.locked.append(path)
    gone = {os.path.realpath(p) for p in done.sessions}
    if not dry_run and gone:
        _drop_index_entries(home, gone)
    done.repositories = _orphaned_repositories(home, real_home, gone, now, dry_run)
    done.blobs = _orphaned_blobs(home, real_home, gone, now, dry_run)
    return done


def prune_on_schedule(home: Path, age: float, now: float | None = None) -> Pruned | None:
    """`keep_sessions`: prune when the stamp file is a day old (or missing), then stamp it;
    None when it was not yet time."""
    now = time.time() if now is None else now
    stamp = home / STAMP
    try:
        if now - os.lstat(stamp).st_mtime < DAY:
            return None
    except FileNotFoundError:
        pass
    if not os.path.isdir(home) or os.path.islink(stamp):
        return None
    fd = os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another run is pruning right now
        except BlockingIOError:
            return None
        os.utime(fd, (now, now))
        return prune(home, age, now=now)
    finally:
        os.close(fd)


def last_used(path: Path) -> float:
    """When a session was last written: the newest of its directory's and files' mtimes."""
    newest = os.lstat(path).st_mtime
    for entry in _entries(path):
        try:
            newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
        except OSError:
            continue
    return newest


def _entries(path: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as found:
            return list(found)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _inside(real: str, real_home: str) -> bool:
    return real.startswith(real_home.rstrip("/") + "/")


def _own_directory(entry: os.DirEntry[str], real_home: str) -> bool:
    """A directory itself (not a link to one) whose real path is inside $AGI_HOME."""
    try:
        if not entry.is_dir(follow_symlinks=False):
            return False
    except OSError:
        return False
    return _inside(os.path.realpath(entry.path), real_home)


def _is_session(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path / "meta.json").st_mode)
    except OSError:
        return False


def _locked(path: Path) -> bool:
    """Whether a run holds the session's lock now (a dry run only looks)."""
    try:
        fd = os.open(path / "lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # not a lock agi made: leave the session alone
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _remove_unlocked(path: Path) -> bool:
    """Remove the session holding its lock (taken without waiting: a run holding it keeps
    its session); False when a run holds it."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path / "lock", flags, 0o600)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        shutil.rmtree(path, ignore_errors=True)  # links inside are removed, never followed
        return not os.path.lexists(path)
    finally:
        os.close(fd)


def _drop_index_entries(home: Path, gone: set[str]) -> None:
    """Rewrite index.jsonl without the removed sessions' lines: replaced whole, atomically,
    holding the index's lock so that no run's line is lost to the rewrite."""
    # lazy: agi.sessions.session imports this module (through the checkpoints)
    from agi.sessions.session import index_held

    index = home / "index.jsonl"
    if os.path.islink(index) or not os.path.exists(index):
        return
    with index_held(index, fcntl.LOCK_EX) as fd:
        with os.fdopen(os.dup(fd), "rb") as f:
            lines = f.read().splitlines(keepends=True)
        kept = [line for line in lines if _entry_path(line) not in gone]
        if len(kept) == len(lines):
            return
        tmp = home / f".index.jsonl.{os.getpid()}.tmp"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(out, "wb") as f:
            f.write(b"".join(kept))
        os.replace(tmp, index)


def _entry_path(line: bytes) -> str | None:
    try:
        path = json.loads(line)["path"]
    except (ValueError, KeyError, TypeError):
        return None
    return os.path.realpath(path) if isinstance(path, str) else None


def _live_owners(home: Path, gone: set[str]) -> set[str]:
    """The checkpoint owners (agi.checkpoints.plumbing.owner_of) of every session that still
    exists: under $AGI_HOME/sessions, and elsewhere as the index names them."""
    # lazy: only --prune loads it
    from agi.checkpoints.plumbing import owner_of

    return {owner_of(Path(p)) for p in _session_paths(home, gone)}


def _orphaned_repositories(
    home: Path, real_home: str, gone: set[str], now: float, dry_run: bool
) -> list[Path]:
    """The removed sessions' indexes in every checkpoint repository, then every repository
    left with no index of an existing session (one younger than an hour may be a run's
    that is setting it up, and stays)."""
    checkpoints = home / "checkpoints"
    repositories = [
        e for e in _entries(checkpoints) if e.name != "files" and _own_directory(e, real_home)
    ]
    if not repositories:
        return []
    live = _live_owners(home, gone)
    removed: list[Path] = []
    for entry in repositories:
        repo = checkpoints / entry.name
        young = now - os.lstat(repo).st_mtime < YOUNG_REPOSITORY
        owners = {
            e.name.partition("-")[2]
            for e in _entries(repo)
            if e.name.startswith(("index-", "restoring-"))
        }
        stale = owners - live
        if not dry_run:
            for owner in stale:
                for name in (f"index-{owner}", f"restoring-{owner}"):
                    try:
                        os.unlink(repo / name)
                    except OSError:
                        pass
        if owners & live or young and not owners:
            continue
        if not dry_run:
            shutil.rmtree(repo, ignore_errors=True)
        removed.append(repo)
    return removed


def _session_paths(home: Path, gone: set[str]) -> set[str]:
    """The real paths of every session that still exists: under $AGI_HOME/sessions, and
    elsewhere as the index names them."""
    # lazy: agi.sessions.session imports this module
    from agi.sessions.session import iter_sessions

    paths = {os.path.realpath(home / "sessions" / e.name) for e in _entries(home / "sessions")}
    paths |= {os.path.realpath(p) for p in iter_sessions(home)}
    return {p for p in paths - gone if _is_session(Path(p))}


def _named_blobs(sessions: set[str]) -> set[str] | None:
    """The digests of the file contents the sessions' checkpoint records name; None when a
    record cannot be read (then nothing is known to be unused)."""
    named: set[str] = set()
    for session in sessions:
        try:
            with open(os.path.join(session, "checkpoints.jsonl"), "rb") as f:
                for line in f:
                    if b'"blob"' in line:
                        named.update(m.decode() for m in BLOB_REF.findall(line))
        except FileNotFoundError:
            continue
        except OSError:
            return None
    return named


def _orphaned_blobs(
    home: Path, real_home: str, gone: set[str], now: float, dry_run: bool
) -> list[Path]:
    """The regular files in `$AGI_HOME/checkpoints/files/` no existing session's records name
    (one younger than an hour may be a run's whose record is not written yet, and stays)."""
    folder = home / "checkpoints" / "files"
    found = [e for e in _entries(home / "checkpoints") if e.name == "files"]
    if not found or not _own_directory(found[0], real_home):
        return []
    named = _named_blobs(_session_paths(home, gone))
    if named is None:
        return []
    removed: list[Path] = []
    for entry in _entries(folder):
        if not BLOB_NAME.fullmatch(entry.name) or entry.name in named:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or now - info.st_mtime < YOUNG_REPOSITORY:
            continue
        if not dry_run:
            try:
                os.unlink(folder / entry.name)
            except OSError:
                continue
        removed.append(folder / entry.name)
    return removed
