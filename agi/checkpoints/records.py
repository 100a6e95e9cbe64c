"""The signed records of a session's checkpoints (docs: checkpoints): `checkpoints.jsonl`.

Each line is signed: `..., "mac": HMAC}` last, an HMAC-SHA256 of the line without it, of the
session's directory and of the line before's mac, keyed by `$AGI_HOME/checkpoint-records.key`;
`read_records` passes over (or, strict, refuses) any line that does not check, and `invalid`
says what is wrong with a record's shape. What the records hold: agi.checkpoints.snapshots.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from pathlib import Path
from typing import Any

from agi.errors import UsageError
from agi.sessions.files import append_bytes, make_private_dir, read_bytes

RECORDS = "checkpoints.jsonl"
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
        return _first_wrong(_rewind_checks(r))
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


def _rewind_checks(r: dict[str, Any]) -> dict[str, bool]:
    """The checks of a rewind record's fields (agi.checkpoints.rewind writes them)."""
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
    return checks


def _first_wrong(checks: dict[str, bool]) -> str | None:
    bad = [name for name, ok in checks.items() if not ok]
    return f"bad {bad[0]!r}" if bad else None
