"""Checkpoints of a session's turns (docs: checkpoints), taken while a run works.

Each turn appends to the session's `checkpoints.jsonl` (one JSON object a line, appended, never
rewritten), every line signed: `..., "mac": HMAC}` last, an HMAC-SHA256 of the line without it
and of the line before's mac, keyed by `$AGI_HOME/checkpoint-records.key`
(agi.checkpoints.records). A model that can write the session cannot forge, alter, move or
copy in a record unnoticed:

- `{"turn": N, "time": T, "prompt": FIRST_LINE, "start": I, "cwd": DIR}` when the turn begins
  (I: the messages the session held before its prompt, where a rewind takes the conversation);
- `{"turn": N, "tree": SHA, "cwd": DIR, "files": COUNT, "seconds": S, "skipped": [...],
  "withheld": [...], "stamps": {PATH: [SIZE, MTIME_NS]}, "excludes": SHA}` before the turn's
  first tool call that can change files: a snapshot in the shadow repository
  (agi.checkpoints.shadow), without the files over 5 MB (`skipped`) or holding a key
  (`withheld`), and the project's own ignore rules then (`excludes`); or `{"turn": N,
  "untracked": WHY}` when there is none (no git, a huge tree): then only Write/Edit;
- `{"turn": N, "prior": PATH, "blob": SHA256|null, "mode": MODE, "size": BYTES, "kept": WHY}`
  the first time in the turn that Write or Edit touches PATH (wherever it lies): its content
  before (`null`: it did not exist, or `kept` says why it was not kept: over 5 MB, holding a
  key), kept compressed in `$AGI_HOME/checkpoints/files/`; the prompt is stored redacted;
- `{"turn": N, "end": SHA}` when the turn ends (what changed in it, for the listing);
- `{"rewind": N, ...}` for each rewind (agi.checkpoints.rewind);
- `{"torn": DIGEST}` after a line a killed process left unfinished (so that line is known).

Subagents share their parent's Checkpoints, so what they change belongs to the parent's turn.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.checkpoints.records import (
    KEY_FILE,
    RECORDS,
    RecordsError,
    append_record,
    read_records,
    repair_records,
)
from agi.errors import AgiError
from agi.policy.environment import SECRETS
from agi.sessions.files import make_private_dir, read_bytes

if TYPE_CHECKING:
    from agi.checkpoints.shadow import Shadow
    from agi.options.settings import Settings
    from agi.sessions.session import Session

__all__ = ["RECORDS", "RecordsError", "append_record", "read_records", "repair_records"]
# built-in tools that change no file; every other tool (Bash, Write, Edit, Terminal, user
# tools, MCP tools) gets a checkpoint before its first call in a turn
READ_ONLY = frozenset(
    {"Read", "calculate", "TempDir", "Skill", "Task", "Glob", "Grep", "LS", "TodoWrite"}
)
WRITERS = ("Write", "Edit")
OFF = "checkpoints off"


def owner_of(session_path: Path) -> str:
    """The key of a session's index and records in shadow repositories."""
    # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
    from agi.checkpoints import plumbing

    return plumbing.owner_of(session_path)


def kept_out(session_path: Path, home: Path) -> tuple[Path, ...]:
    """Never snapshotted nor restored: the session, $AGI_HOME, and the config file (it may
    hold the API key)."""
    # lazy: agi.options.config imports this module
    from agi.options.config import config_path

    return (session_path, home, config_path())


def protected_paths(home: Path, *sessions: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What Write and Edit refuse (the sessions' directories, agi's checkpoint records and
    shadow repositories), and what Read refuses too (the key records are signed with)."""
    key = os.path.join(os.path.realpath(home), KEY_FILE)
    checkpoints = os.path.realpath(home / "checkpoints")
    dirs = dict.fromkeys([*(os.path.realpath(s) for s in sessions), checkpoints, key])
    return tuple(dirs), (key,)


def store_blob(home: Path, data: bytes) -> str:
    """Keep `data` in `$AGI_HOME/checkpoints/files/` under its SHA-256, compressed (as git
    keeps objects) and written whole."""
    import hashlib  # only once Write or Edit keeps a file: not at every start

    digest = hashlib.sha256(data).hexdigest()
    folder = home / "checkpoints" / "files"
    path = folder / digest
    if not path.exists():
        make_private_dir(folder)
        tmp = folder / f".{digest}.{os.getpid()}.{threading.get_ident()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(zlib.compress(data, 1))
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    return digest


def _inside(path: str, dirs: tuple[Path, ...]) -> bool:
    return any(
        path == (d := os.path.realpath(p)) or path.startswith(d.rstrip("/") + "/") for p in dirs
    )


def load_blob(home: Path, digest: str) -> bytes:
    data = read_bytes(home / "checkpoints" / "files" / digest)
    if data is None:
        raise OSError(0, f"the checkpoint lacks the file content {digest[:12]}")
    return zlib.decompress(data)


class Checkpoints:
    """One run's checkpoints: `begin` and `end` around each turn (under the session's lock),
    `before_tool` before every tool call (from any thread)."""

    def __init__(
        self,
        home: Path,
        session: Session,
        cwd: str,
        warn: Callable[[str], None],
        files: bool = True,
        notices: bool = True,
    ):
        self.home, self.session, self.cwd, self.warn = home, session, cwd, warn
        self.notices = notices  # the big-file notice: a person watches stderr (or -v)
        self.files = files  # False: `checkpoints = false`: only the turn list
        self.git = files and shutil.which("git") is not None  # agi.checkpoints.shadow's git
        self.turn: int | None = None
        self.shadow: Shadow | None = None
        self.snapped = False
        self.touched: set[str] = set()
        self.warned: set[str] = set()
        self.lock = threading.Lock()

    def record(self, record: dict[str, Any]) -> None:
        append_record(self.session.path, record, self.home)

    def secrets(self) -> list[bytes]:
        """The keys no checkpoint may keep: the session's and every key withheld from tools."""
        return [os.fsencode(k) for k in {*self.session.secrets, *SECRETS} if len(k) >= 8]

    def warn_once(self, kind: str, text: str) -> None:
        if kind not in self.warned:
            self.warned.add(kind)
            self.warn(text)

    def begin(self, prompt: str) -> None:
        """A turn starts: its number, time, prompt and where its conversation begins."""
        path = self.session.path
        repair_records(path, self.home)
        records = read_records(path, self.home)
        numbers = [r["turn"] for r in records if "turn" in r]
        self.turn = max(numbers, default=0) + 1
        if not self.notices or any("skipped" in r for r in records):  # said once a session
            self.warned.add("big")
        self.snapped, self.touched, self.shadow = False, set(), None
        # redacted whole, then cut: a key across the cut would leave a part of itself
        first = self.session.redact((prompt.strip().splitlines() or [""])[0])[:200]
        record = {"turn": self.turn, "time": round(time.time(), 3), "prompt": first}
        record.update(start=len(self.session.messages), cwd=os.path.realpath(self.cwd))
        if not self.files:  # so that a rewind of its files can say why nothing comes back
            record["untracked"] = OFF
        self.session.mark()
        append_record(path, record, self.home)

    def before_tool(self, name: str, input: dict[str, Any], cwd: str) -> None:
        """Before a call that may change files: the turn's snapshot (once), and for Write and
        Edit the prior content of the file."""
        if self.turn is None or not self.files or name in READ_ONLY:
            return
        with self.lock:
            try:
                if not self.snapped:
                    self.snapped = True
                    self._snapshot()
                if name in WRITERS and isinstance(input.get("file_path"), str):
                    self._prior(input["file_path"], cwd)
            except AgiError:
                raise  # interrupted, a time limit: the run ends
            except Exception as e:  # a checkpoint never stops the tool call itself
                self.warn_once("error", f"checkpoints: {type(e).__name__}: {e}")

    def _snapshot(self) -> None:
        assert self.turn is not None
        cwd = os.path.realpath(self.cwd)
        if not self.git:
            self.warn_once(
                "git",
                "checkpoints: git is not installed; only the files Write "
                "and Edit change are recorded (not what commands change)",
            )
            self.record({"turn": self.turn, "untracked": "no git"})
            return
        home = os.path.realpath(self.home)
        if cwd == home or cwd.startswith(home.rstrip("/") + "/"):  # agi's own state: never
            self.record({"turn": self.turn, "untracked": "inside AGI_HOME"})
            return
        keep_out = kept_out(self.session.path, self.home)
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.checkpoints.shadow import MAX_FILES, Shadow, ShadowError, TooMany

        shadow = Shadow(self.home, cwd, owner_of(self.session.path), keep_out, self.secrets())
        started = time.monotonic()
        try:
            snap = shadow.snapshot()
        except TooMany:
            self.warn_once(
                "many",
                f"checkpoints: {cwd} holds more than {MAX_FILES} files; "
                "only the files Write and Edit change are recorded",
            )
            self.record({"turn": self.turn, "untracked": "too many files"})
            return
        except (ShadowError, OSError) as e:
            self.warn_once("git", f"checkpoints: {e}; only Write and Edit are recorded")
            self.record({"turn": self.turn, "untracked": str(e)})
            return
        self.shadow = shadow
        took = round(time.monotonic() - started, 3)
        record = {"turn": self.turn, "tree": snap.tree, "cwd": cwd, "files": snap.files}
        if shadow.keep_out:  # a rewind keeps out the same (whatever its environment)
            record["kept_out"] = shadow.keep_out
        record["seconds"] = took  # what the snapshot took (not in trace.jsonl: not a model step)
        if snap.excludes:
            record["excludes"] = snap.excludes  # the project's own ignore rules then
        if snap.withheld:  # holding a key: never kept (docs: checkpoints)
            record["withheld"] = snap.withheld
        if snap.stamps:  # of the files left out: a rewind names those changed since
            record["stamps"] = snap.stamps
        if snap.skipped:
            record["skipped"] = snap.skipped
            self.warn_once(
                "big",
                f"checkpoints: {len(snap.skipped)} file(s) over 5 MB are "
                f"not recorded (first: {snap.skipped[0]})",
            )
        self.record(record)

    def _prior(self, file_path: str, cwd: str) -> None:
        """The file's content before Write or Edit changes it, kept only when it is a regular
        file of at most MAX_FILE bytes holding no key (else the record says why it is not:
        a rewind leaves that file as it is, and names it); read no further than that."""
        path = os.path.realpath(os.path.join(cwd, os.path.expanduser(file_path)))
        if path in self.touched or _inside(path, kept_out(self.session.path, self.home)):
            return
        self.touched.add(path)
        record: dict[str, Any] = {"turn": self.turn, "prior": path, "blob": None}
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            fd = None
        except OSError as e:
            if e.errno == errno.ELOOP or not os.path.lexists(path):
                return  # a link: Write and Edit refuse it
            self.warn(f"checkpoints: cannot record {path}: {e.strerror or e}")
            return
        if fd is not None:
            # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
            from agi.checkpoints.shadow import MAX_FILE

            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    return  # Write and Edit refuse what is not a regular file
                record["mode"] = "100755" if st.st_mode & 0o100 else "100644"
                record["size"] = st.st_size
                try:
                    data = f.read(MAX_FILE + 1) if st.st_size <= MAX_FILE else None
                except OSError as e:
                    self.warn(f"checkpoints: cannot record {path}: {e.strerror or e}")
                    return
            if data is None or len(data) > MAX_FILE:
                record["kept"] = "over 5 MB"
            elif any(k in data for k in self.secrets()):
                record["kept"] = "holds a key"
            else:
                record["blob"] = store_blob(self.home, data)
        self.record(record)

    def end(self) -> None:
        """The turn is over: its end state, so the listing can say what it changed."""
        with self.lock:
            turn, shadow, self.turn = self.turn, self.shadow, None
            if turn is None or shadow is None:
                return
            try:
                tree = shadow.snapshot().tree
                self.record({"turn": turn, "end": tree})
            except AgiError:
                raise
            except Exception:  # the listing will say "files unknown" for this turn
                return


def for_run(
    settings: Settings, session: Session, cwd: str, warn: Callable[[str], None]
) -> Checkpoints:
    """The run's checkpoints (`checkpoints = false`: the turn list only, no files). The notice
    of files too big to record is for a person: a terminal's stderr or -v, once a session."""
    files = getattr(settings, "checkpoints", True)
    notices = bool(getattr(settings, "verbose", False)) or sys.stderr.isatty()
    return Checkpoints(settings.home, session, cwd, warn, files, notices)
