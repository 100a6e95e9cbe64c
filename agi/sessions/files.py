"""The files of a session directory (and of `$AGI_HOME`), opened safely.

No symbolic link is followed (O_NOFOLLOW on every file, lstat on the directory), a FIFO or a
device planted under a session's file name is refused rather than opened, nothing agi did not
create is chmodded or chowned, and a directory agi cannot safely use is refused with one line
(exit 2). When root writes in a directory another user owns, what it creates there is given to
that user, so that the owner's next run can still use the session.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from agi.errors import UsageError
from agi.policy.decoding import clean

# O_NONBLOCK: opening a FIFO planted under a file's name must fail or return, never block
OPEN = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
SESSION_FILES = ("messages.jsonl", "trace.jsonl", "meta.json", "lock")
# subagents' sessions and attached files (docs: attachments) are made inside: never through a link
SESSION_DIRS = ("subagents", "attachments")


def refused(path: Path, why: str) -> UsageError:
    return UsageError(f"cannot use {path}: {why}")


def _why(error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return "it is a symbolic link (agi does not follow links in a session)"
    if error.errno == errno.ENXIO:
        return "it is not a regular file"
    return error.strerror or str(error)


def make_private_dir(path: Path) -> None:
    """Create path and any missing parents as 0700 directories; existing ones keep their mode."""
    missing, parent = [], path
    while not os.path.lexists(parent) and parent.parent != parent:
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            continue  # a concurrent run made it
        except OSError as e:
            raise refused(directory, _why(e)) from e
        os.chmod(directory, 0o700)  # ours: made 0700 whatever the umask


def check_directory(path: Path, names: tuple[str, ...] = SESSION_FILES) -> list[str]:
    """Refuse a directory agi cannot safely use (a link, not a directory, not readable and
    writable, a file of `names` that is a link or not a regular file); warnings for one that
    others may write. A directory that does not exist yet is fine."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return []
    except OSError as e:
        raise refused(path, _why(e)) from e
    if stat.S_ISLNK(st.st_mode):
        raise refused(path, "it is a symbolic link; give the directory it points to")
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"session {path} is not a directory")
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        raise refused(path, f"you cannot read and write it (owner uid {st.st_uid}, {_mode(st)})")
    warnings = [_open_to_others(path, st)] if _writable_by_others(st) else []
    for name in SESSION_DIRS:
        if (
            os.path.islink(path / name)
            or os.path.lexists(path / name)
            and not (path / name).is_dir()
        ):
            raise refused(path / name, "it is not a directory (a link is not followed)")
    for name in names:
        try:
            fst = os.lstat(path / name)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(fst.st_mode):
            raise refused(path / name, _why(OSError(errno.ELOOP, "")))
        if not stat.S_ISREG(fst.st_mode):
            raise refused(path / name, "it is not a regular file")
        if _writable_by_others(fst):
            warnings.append(_open_to_others(path / name, fst))
    return warnings


def _mode(st: os.stat_result) -> str:
    return f"mode {stat.S_IMODE(st.st_mode):04o}"


def _writable_by_others(st: os.stat_result) -> bool:
    """World-writable, or writable by a group other than one's own private group (a umask of
    002 makes every directory group-writable, and the group is then the user's alone)."""
    if st.st_mode & 0o002:
        return True
    return bool(st.st_mode & 0o020) and not _private_group(st.st_gid)


def _private_group(gid: int) -> bool:
    """Whether the group `gid` is this user's own: their primary group with no other member."""
    if gid != os.getgid():
        return False
    try:
        import grp
        import pwd

        name = pwd.getpwuid(os.getuid()).pw_name
        return set(grp.getgrgid(gid).gr_mem) <= {name}
    except (KeyError, ImportError):
        return False


def _open_to_others(path: Path, st: os.stat_result) -> str:
    return f"{path} is writable by other users ({_mode(st)}): they can change this conversation"


def _adopt(fd: int, like: Path) -> None:
    """Root creating a file in another user's directory gives it to that user."""
    if os.geteuid() != 0:
        return
    try:
        st = os.lstat(like)
        if st.st_uid != 0:
            os.fchown(fd, st.st_uid, st.st_gid)
    except OSError:
        pass


def open_file(path: Path, flags: int, create: bool = False) -> int:
    """A descriptor of the regular file `path`, never through a link; created 0600 if asked."""
    while True:
        try:
            fd = os.open(path, flags | OPEN)
        except FileNotFoundError:
            if not create:
                raise
            try:
                fd = os.open(path, flags | OPEN | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue  # another run created it just now: open that one
            except OSError as e:
                raise refused(path, _why(e)) from e
            _adopt(fd, path.parent)
        except OSError as e:
            raise refused(path, _why(e)) from e
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise refused(path, "it is not a regular file")
        return fd


def read_bytes(path: Path, limit: int | None = None) -> bytes | None:
    """The whole file, or None when it does not exist; over `limit` bytes it is refused."""
    try:
        fd = open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read() if limit is None else f.read(limit + 1)
            if limit is not None and len(data) > limit:
                raise refused(path, f"it is over {limit} bytes")
            return data
    except OSError as e:
        raise refused(path, _why(e)) from e


LINE_LIMIT = 64 << 20  # bytes in one stored line; a longer one is skipped as damaged


def read_lines(path: Path, limit: int = LINE_LIMIT) -> Iterator[bytes | None]:
    """The file's lines (without their newline; the last one even without it), read as a
    stream: never the whole file in memory, and a line over `limit` bytes is given as None
    (its bytes read and dropped)."""
    try:
        fd = open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        with os.fdopen(fd, "rb") as f:
            pieces: list[bytes] = []
            size = 0
            while chunk := f.read(1 << 20):
                *complete, rest = chunk.split(b"\n")
                for piece in complete:
                    yield None if size + len(piece) > limit else b"".join([*pieces, piece])
                    pieces, size = [], 0
                if size <= limit:
                    pieces.append(rest)
                size += len(rest)
                if size > limit:
                    pieces = []
            if size:
                yield None if size > limit else b"".join(pieces)
    except OSError as e:
        raise refused(path, _why(e)) from e


def ends_open(path: Path) -> bool:
    """Whether the file's last line has no newline (a torn write)."""
    try:
        with open(path, "rb") as f:
            if f.seek(0, os.SEEK_END) == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except OSError:
        return False


def append_bytes(path: Path, data: bytes) -> None:
    """Append in as few writes as the kernel allows (one, normally) on an O_APPEND descriptor."""
    fd = open_file(path, os.O_WRONLY | os.O_APPEND, create=True)
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError as e:
        raise refused(path, _why(e)) from e
    finally:
        os.close(fd)


def replace_file(path: Path, data: bytes) -> None:
    """Write a new version of `path` beside it and rename it over; nothing is left behind on
    failure, and the file keeps its owner when root rewrites another user's."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp")
    try:
        os.unlink(tmp)  # a stale one from a killed run (or a link someone planted)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise refused(tmp, _why(e)) from e
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | OPEN, 0o600)
    except OSError as e:
        raise refused(path.parent, _why(e)) from e
    try:
        _adopt(fd, path if os.path.lexists(path) else path.parent)
        while data:
            data = data[os.write(fd, data) :]
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except OSError as e:
        raise refused(path, _why(e)) from e
    finally:
        if fd >= 0:
            os.close(fd)
        if os.path.lexists(tmp):
            os.unlink(tmp)


def append_line(path: Path, line: str) -> None:
    append_bytes(path, clean(line).encode("utf-8"))
