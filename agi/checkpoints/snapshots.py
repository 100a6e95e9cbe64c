"""Checkpoints of a session's turns (docs: checkpoints), taken while a run works.

Each turn appends to the session's `checkpoints.jsonl` (one JSON object a line, appended, never
rewritten; a torn line is skipped):

- `{"turn": N, "time": T, "prompt": FIRST_LINE, "start": I, "cwd": DIR}` when the turn begins
  (I: the messages the session held before its prompt, where a rewind takes the conversation);
- `{"turn": N, "tree": SHA, "cwd": DIR, "files": COUNT, "seconds": S, "skipped": [...]}` before
  the turn's first tool call that can change files: a snapshot in the shadow repository
  (agi.checkpoints.shadow), or `{"turn": N, "untracked": WHY}` when there is none (no git, a huge
  tree): then only Write/Edit;
- `{"turn": N, "prior": PATH, "blob": SHA256|null, "mode": MODE}` the first time in the turn
  that Write or Edit touches PATH (wherever it lies): its content before (`null`: it did not
  exist), kept compressed in `$AGI_HOME/checkpoints/files/`; the prompt is stored redacted;
- `{"turn": N, "end": SHA}` when the turn ends (what changed in it, for the listing);
- `{"rewind": N, ...}` for each rewind (agi.checkpoints.rewind).

Subagents share their parent's Checkpoints, so what they change belongs to the parent's turn.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.errors import AgiError
from agi.sessions.files import append_bytes, make_private_dir, read_bytes

if TYPE_CHECKING:
    from agi.checkpoints.shadow import Shadow
    from agi.options.settings import Settings
    from agi.sessions.session import Session

RECORDS = "checkpoints.jsonl"
# built-in tools that change no file; every other tool (Bash, Write, Edit, Terminal, user
# tools, MCP tools) gets a checkpoint before its first call in a turn
READ_ONLY = frozenset(
    {"Read", "calculate", "TempDir", "Skill", "Task", "Glob", "Grep", "LS", "TodoWrite"}
)
WRITERS = ("Write", "Edit")
OFF = "checkpoints off"


def owner_of(session_path: Path) -> str:
    """The key of a session's index and records in shadow repositories."""
    from agi.checkpoints.shadow import key_of

    return key_of(os.path.realpath(session_path))


def kept_out(session_path: Path, home: Path) -> tuple[Path, ...]:
    """Never snapshotted nor restored: the session, $AGI_HOME, and the config file (it may
    hold the API key)."""
    from agi.options.config import config_path

    return (session_path, home, config_path())


def read_records(session_path: Path) -> list[dict[str, Any]]:
    raw = read_bytes(session_path / RECORDS) or b""
    records = []
    for line in raw.split(b"\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def repair_records(session_path: Path) -> None:
    """End a torn last line (a process killed mid-write), so the next record stands alone;
    only under the session's lock."""
    try:
        with open(session_path / RECORDS, "rb") as f:
            f.seek(-1, os.SEEK_END)
            torn = f.read(1) != b"\n"
    except OSError:  # none yet, or empty
        return
    if torn:
        append_bytes(session_path / RECORDS, b"\n")


def append_record(session_path: Path, record: dict[str, Any]) -> None:
    line = json.dumps(record, separators=(",", ":")) + "\n"  # ASCII: any file name survives
    append_bytes(session_path / RECORDS, line.encode("ascii"))


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
    ):
        self.home, self.session, self.cwd, self.warn = home, session, cwd, warn
        self.files = files  # False: `checkpoints = false`: only the turn list
        self.git = files and shutil.which("git") is not None  # agi.checkpoints.shadow's git
        self.turn: int | None = None
        self.shadow: Shadow | None = None
        self.snapped = False
        self.touched: set[str] = set()
        self.warned: set[str] = set()
        self.lock = threading.Lock()

    def warn_once(self, kind: str, text: str) -> None:
        if kind not in self.warned:
            self.warned.add(kind)
            self.warn(text)

    def begin(self, prompt: str) -> None:
        """A turn starts: its number, time, prompt and where its conversation begins."""
        path = self.session.path
        repair_records(path)
        numbers = [r["turn"] for r in read_records(path) if isinstance(r.get("turn"), int)]
        self.turn = max(numbers, default=0) + 1
        self.snapped, self.touched, self.shadow = False, set(), None
        # redacted whole, then cut: a key across the cut would leave a part of itself
        first = self.session.redact((prompt.strip().splitlines() or [""])[0])[:200]
        record = {"turn": self.turn, "time": round(time.time(), 3), "prompt": first}
        record.update(start=len(self.session.messages), cwd=os.path.realpath(self.cwd))
        if not self.files:  # so that a rewind of its files can say why nothing comes back
            record["untracked"] = OFF
        self.session.mark()
        append_record(path, record)

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
            append_record(self.session.path, {"turn": self.turn, "untracked": "no git"})
            return
        home = os.path.realpath(self.home)
        if cwd == home or cwd.startswith(home.rstrip("/") + "/"):  # agi's own state: never
            append_record(self.session.path, {"turn": self.turn, "untracked": "inside AGI_HOME"})
            return
        from agi.checkpoints.shadow import MAX_FILES, Shadow, ShadowError, TooMany

        keep_out = kept_out(self.session.path, self.home)
        shadow = Shadow(self.home, cwd, owner_of(self.session.path), keep_out)
        started = time.monotonic()
        try:
            snap = shadow.snapshot()
        except TooMany:
            self.warn_once(
                "many",
                f"checkpoints: {cwd} holds more than {MAX_FILES} files; "
                "only the files Write and Edit change are recorded",
            )
            append_record(self.session.path, {"turn": self.turn, "untracked": "too many files"})
            return
        except (ShadowError, OSError) as e:
            self.warn_once("git", f"checkpoints: {e}; only Write and Edit are recorded")
            append_record(self.session.path, {"turn": self.turn, "untracked": str(e)})
            return
        self.shadow = shadow
        took = round(time.monotonic() - started, 3)
        record = {"turn": self.turn, "tree": snap.tree, "cwd": cwd, "files": snap.files}
        if shadow.keep_out:  # a rewind keeps out the same (whatever its environment)
            record["kept_out"] = shadow.keep_out
        record["seconds"] = took  # what the snapshot took (not in trace.jsonl: not a model step)
        if snap.skipped:
            record["skipped"] = snap.skipped
            self.warn_once(
                "big",
                f"checkpoints: {len(snap.skipped)} file(s) over 5 MB are "
                f"not recorded (first: {snap.skipped[0]})",
            )
        append_record(self.session.path, record)

    def _prior(self, file_path: str, cwd: str) -> None:
        path = os.path.realpath(os.path.join(cwd, os.path.expanduser(file_path)))
        if path in self.touched:
            return
        self.touched.add(path)
        record: dict[str, Any] = {"turn": self.turn, "prior": path, "blob": None}
        try:
            st = os.lstat(path)
        except OSError:
            st = None
        if st is not None:
            if not stat.S_ISREG(st.st_mode):
                return  # Write and Edit refuse what is not a regular file
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with os.fdopen(fd, "rb") as f:
                    data = f.read()
                record["blob"] = store_blob(self.home, data)
            except OSError as e:
                self.warn(f"checkpoints: cannot record {path}: {e.strerror or e}")
                return
            record["mode"] = "100755" if st.st_mode & 0o100 else "100644"
        append_record(self.session.path, record)

    def end(self) -> None:
        """The turn is over: its end state, so the listing can say what it changed."""
        with self.lock:
            turn, shadow, self.turn = self.turn, self.shadow, None
            if turn is None or shadow is None:
                return
            try:
                tree = shadow.snapshot().tree
                append_record(self.session.path, {"turn": turn, "end": tree})
            except AgiError:
                raise
            except Exception:  # the listing will say "files unknown" for this turn
                return


def for_run(
    settings: Settings, session: Session, cwd: str, warn: Callable[[str], None]
) -> Checkpoints:
    """The run's checkpoints (`checkpoints = false`: the turn list only, no files)."""
    return Checkpoints(settings.home, session, cwd, warn, getattr(settings, "checkpoints", True))
