"""Checkpoints of a session's turns (docs: checkpoints), taken while a run works.

Each turn appends to the session's `checkpoints.jsonl` (one JSON object a line, appended, never
rewritten), every line signed: `..., "mac": HMAC}` last, an HMAC-SHA256 of the line without it
and of the line before's mac, keyed by `$AGI_HOME/checkpoint-records.key` (read_records). A
model that can write the session cannot forge, alter, move or copy in a record unnoticed:

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
import json
import os
import re
import shutil
import stat
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.errors import AgiError, UsageError
from agi.policy.environment import SECRETS
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
    # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
    from agi.checkpoints.shadow import key_of

    return key_of(os.path.realpath(session_path))


def kept_out(session_path: Path, home: Path) -> tuple[Path, ...]:
    """Never snapshotted nor restored: the session, $AGI_HOME, and the config file (it may
    hold the API key)."""
    # lazy: agi.options.config imports this module
    from agi.options.config import config_path

    return (session_path, home, config_path())


RECORDS_LIMIT = 64 << 20  # bytes of checkpoints.jsonl read at most (a turn adds a few hundred)
KEY_FILE = "checkpoint-records.key"  # in $AGI_HOME: outside every session directory
_SUFFIX = re.compile(rb',"mac":"([0-9a-f]{64})"\}$')
HEX40 = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # a git object name (SHA-1 or SHA-256)
HEX64 = re.compile(r"[0-9a-f]{64}")  # a kept file's SHA-256
_tails: dict[str, tuple[int, int, bytes]] = {}  # records file: (size, mtime, last mac)
_tails_lock = threading.Lock()
_append_lock = threading.Lock()


class RecordsError(UsageError):
    """The session's checkpoint records cannot be trusted: the rewind is refused (exit 2)."""


def records_key(home: Path, create: bool = False) -> bytes | None:
    """The key every record is signed with (docs: checkpoints): 32 random bytes, 0600, made
    whole (written under another name, then linked into place) the first time; None when
    there is none yet and `create` is false."""
    folder = home
    path = folder / KEY_FILE
    for _ in range(2):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            if not create:
                return None
        except OSError as e:
            raise RecordsError(f"cannot read {path}: {e.strerror or e}") from e
        else:
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    raise RecordsError(f"{path} is not a regular file: checkpoint records fail")
                key = f.read(4096)
            if len(key) < 32:
                raise RecordsError(f"{path} is damaged (shorter than a key): remove it")
            return key
        make_private_dir(folder)
        tmp = folder / f".{KEY_FILE}.{os.getpid()}.{threading.get_ident()}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, os.urandom(32))
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)  # never over a key another run made meanwhile
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
        except OSError as e:
            raise RecordsError(f"cannot create {path}: {e.strerror or e}") from e
    raise RecordsError(f"cannot create {path}")


def _scope(session_path: Path) -> bytes:
    """What a record is bound to besides its place in the chain: the session's directory, so
    no record of one session checks in another (a fork signs its copy anew)."""
    return os.fsencode(os.path.realpath(session_path)) + b"\0"


def _mac(key: bytes, scope: bytes, prev: bytes, body: bytes) -> bytes:
    import hmac

    return hmac.new(key, scope + prev + b"\n" + body, "sha256").hexdigest().encode()


def _signed(
    line: bytes, key: bytes | None, scope: bytes, prev: bytes
) -> tuple[bytes, bytes] | None:
    """(body, mac) when `line` is a record signed with `key` for the session `scope`,
    following the record `prev`."""
    import hmac

    found = _SUFFIX.search(line)
    if found is None or key is None:
        return None
    body = line[: found.start()] + b"}"
    if not hmac.compare_digest(_mac(key, scope, prev, body), found.group(1)):
        return None
    return body, found.group(1)


def resign(data: bytes, source: Path, target: Path, home: Path) -> bytes:
    """The records of session `source` signed for `target` (a fork): only those that check
    in `source` are copied."""
    key = records_key(home)
    if key is None or not data.strip():
        return b""
    old, new = _scope(source), _scope(target)
    prev, ours, out = b"", b"", []
    for line in data.split(b"\n"):
        signed = _signed(line, key, old, prev)
        if signed is not None:
            body, prev = signed
            ours = _mac(key, new, ours, body)
            out.append(body[:-1] + b',"mac":"' + ours + b'"}\n')
    return b"".join(out)


def _digest(line: bytes) -> str:
    import hashlib

    return hashlib.sha256(line).hexdigest()[:16]


def protected_paths(home: Path, *sessions: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What Write and Edit refuse (the sessions' directories, agi's checkpoint records and
    shadow repositories), and what Read refuses too (the key records are signed with)."""
    key = os.path.join(os.path.realpath(home), KEY_FILE)
    checkpoints = os.path.realpath(home / "checkpoints")
    dirs = dict.fromkeys([*(os.path.realpath(s) for s in sessions), checkpoints, key])
    return tuple(dirs), (key,)


def read_records(session_path: Path, home: Path, strict: bool = False) -> list[dict[str, Any]]:
    """The session's records that agi wrote (each signed, in a chain: none can be altered,
    moved, copied or left out in the middle without failing the check). `strict` (a rewind,
    the listing): any other line is a RecordsError naming it, except a torn one (a process
    killed while writing it: the last line with no newline yet, or one a repair record names).
    Otherwise such lines are passed over."""
    path = session_path / RECORDS
    raw = read_bytes(path, RECORDS_LIMIT) or b""
    key = records_key(home) if raw.strip() else None
    scope = _scope(session_path)
    lines = raw.split(b"\n")
    records: list[dict[str, Any]] = []
    prev, pending = b"", None  # pending: (number, digest) of an unsigned line
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        signed = _signed(line, key, scope, prev)
        if signed is None:
            last = number == len(lines)  # no newline after it yet: being written, or torn
            if strict and pending is not None:
                raise _untrusted(path, pending[0])
            pending = None if last else (number, _digest(line))
            continue
        body, prev = signed
        try:
            record = json.loads(body)
            wrong = invalid(record)
        except (ValueError, RecursionError) as e:
            record, wrong = None, f"not JSON ({type(e).__name__})"
        if isinstance(record, dict) and "torn" in record and not wrong:
            if pending is not None and record["torn"] == pending[1]:
                pending = None
            continue
        if strict and pending is not None:
            raise _untrusted(path, pending[0])
        if wrong:
            if strict:
                raise RecordsError(
                    f"{path}, line {number}: a malformed checkpoint record ({wrong}); "
                    "the rewind is refused"
                )
            continue
        assert isinstance(record, dict)
        records.append(record)
    if strict and pending is not None:
        raise _untrusted(path, pending[0])
    return records


def _untrusted(path: Path, number: int) -> RecordsError:
    return RecordsError(
        f"{path}, line {number}: not a checkpoint record agi wrote for this session "
        "(unsigned, altered, or from another directory); the rewind is refused: remove the "
        "lines agi did not write, or rewind by hand"
    )


def _last_mac(path: Path, scope: bytes, key: bytes) -> bytes:
    """The signature of the file's last record agi wrote: the next one follows it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return b""
    name = os.path.realpath(path)
    with _tails_lock:
        cached = _tails.get(name)
    if cached is not None and cached[:2] == (st.st_size, st.st_mtime_ns):
        return cached[2]
    prev = b""
    for line in (read_bytes(path, RECORDS_LIMIT) or b"").split(b"\n"):
        signed = _signed(line, key, scope, prev)
        if signed is not None:
            prev = signed[1]
    return prev


def _remember(path: Path, mac: bytes) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    with _tails_lock:
        _tails[os.path.realpath(path)] = (st.st_size, st.st_mtime_ns, mac)


def repair_records(session_path: Path, home: Path) -> None:
    """End a torn last line (a process killed mid-write), so the next record stands alone,
    and say so in a signed record naming it; only under the session's lock."""
    path = session_path / RECORDS
    try:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            torn = f.read(1) != b"\n"
    except OSError:  # none yet, or empty
        return
    if torn:
        raw = read_bytes(path, RECORDS_LIMIT) or b""
        line = raw.rsplit(b"\n", 1)[-1]
        append_bytes(path, b"\n")
        append_record(session_path, {"torn": _digest(line)}, home)


def append_record(session_path: Path, record: dict[str, Any], home: Path) -> None:
    """One record, signed with the key under $AGI_HOME and chained to the one before it."""
    key = records_key(home, create=True)
    assert key is not None
    path = session_path / RECORDS
    body = json.dumps(record, separators=(",", ":")).encode("ascii")  # any file name survives
    with _append_lock:  # threads of one run (subagents) append one at a time
        scope = _scope(session_path)
        mac = _mac(key, scope, _last_mac(path, scope, key), body)
        append_bytes(path, body[:-1] + b',"mac":"' + mac + b'"}\n')
        _remember(path, mac)


def _abs(value: object) -> bool:
    return isinstance(value, str) and value.startswith("/") and os.path.normpath(value) == value


def _relative(value: object) -> bool:
    return (
        isinstance(value, str)
        and value != ""
        and all(p not in ("", ".", "..") for p in value.split("/"))
    )


def _int(value: object, least: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _time(value: object) -> bool:
    """A wall-clock time agi wrote: finite, from 1970 to 2242 (what the listing can show)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return 0 <= value < 1 << 33


def _paths(value: object) -> bool:
    return isinstance(value, list) and all(_relative(p) for p in value)


def _hex(value: object, pattern: re.Pattern[str] = HEX40) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def invalid(r: object) -> str | None:
    """What is wrong with a record's shape (None: nothing), as snapshots and rewinds write
    them; object names must be hex, paths plain."""
    if not isinstance(r, dict):
        return "not an object"
    if "torn" in r:
        return None if _hex(r["torn"], re.compile(r"[0-9a-f]{16}")) else "a bad torn mark"
    if "rewind" in r:
        checks = {
            "rewind": _int(r["rewind"], 1),
            "time": _time(r.get("time", 0)),
            "kind": r.get("kind", "both") in ("both", "files", "conversation"),
            "files": isinstance(r.get("files", []), list)
            and all(isinstance(f, str) for f in r.get("files", [])),
            "at": _int(r.get("at", 0)),
        }
        for side in ("before", "after"):
            trees = r.get(side, {})
            checks[side] = isinstance(trees, dict) and all(
                _abs(k) and _hex(v) for k, v in trees.items()
            )
        return _first_wrong(checks)
    if not _int(r.get("turn"), 1):
        return "no turn number"
    if "prompt" in r:
        checks = {
            "prompt": isinstance(r["prompt"], str),
            "time": _time(r.get("time", 0)),
            "start": _int(r.get("start", 0)),
            "cwd": _abs(r.get("cwd")),
            "untracked": isinstance(r.get("untracked", ""), str),
        }
    elif "tree" in r:
        checks = {
            "tree": _hex(r["tree"]),
            "cwd": _abs(r.get("cwd")),
            "files": _int(r.get("files", 0)),
            "seconds": _time(r.get("seconds", 0)),
            "skipped": _paths(r.get("skipped", [])),
            "withheld": _paths(r.get("withheld", [])),
            "kept_out": _paths(r.get("kept_out", [])),
            "excludes": "excludes" not in r or _hex(r["excludes"]),
            "stamps": isinstance(r.get("stamps", {}), dict)
            and all(
                _relative(k) and isinstance(v, list) and len(v) == 2 and all(_int(x) for x in v)
                for k, v in r.get("stamps", {}).items()
            ),
        }
    elif "end" in r:
        checks = {"end": _hex(r["end"])}
    elif "untracked" in r:
        checks = {"untracked": isinstance(r["untracked"], str)}
    elif "prior" in r:
        checks = {
            "prior": _abs(r["prior"]),
            "blob": r.get("blob") is None or _hex(r.get("blob"), HEX64),
            "mode": r.get("mode", "100644") in ("100644", "100755"),
            "size": _int(r.get("size", 0)),
            "kept": r.get("kept", "content") in ("content", "over 5 MB", "holds a key"),
        }
    else:
        return "of no known kind"
    return _first_wrong(checks)


def _first_wrong(checks: dict[str, bool]) -> str | None:
    bad = [name for name, ok in checks.items() if not ok]
    return f"bad {bad[0]!r}" if bad else None


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
        numbers = [r["turn"] for r in read_records(path, self.home) if "turn" in r]
        self.turn = max(numbers, default=0) + 1
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
    """The run's checkpoints (`checkpoints = false`: the turn list only, no files)."""
    return Checkpoints(settings.home, session, cwd, warn, getattr(settings, "checkpoints", True))
