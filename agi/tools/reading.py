"""Reading files for the file tools without trusting them: regular files only (a device, a FIFO
or a socket is refused before anything blocks), never the whole file in memory for Read (the
lines asked for are streamed, each cut at a bounded length), and the deadline honoured while
reading."""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from agi.errors import ToolError

CHUNK = 1 << 16
SNIFF = 8192  # bytes looked at for a NUL: a binary file
COUNT_LIMIT = 64 << 20  # bytes scanned past the lines shown to count the rest
KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _refuse_special(path: Path, mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise ToolError(f"{path} is a directory")
    for test, kind in KINDS:
        if test(mode):
            raise ToolError(
                f"{path} is {kind}, not a regular file: the file tools do not read it "
                "(it may never end); use Bash with a bound, e.g. `head -c 1000`"
            )
    if not stat.S_ISREG(mode):
        raise ToolError(f"{path} is not a regular file")


def _own_output(path: Path, st: os.stat_result) -> None:
    """agi's own stdout and stderr are not files a tool may write: the answer goes there."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        try:
            own = os.fstat(fd)
        except OSError:
            continue
        if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino):
            raise ToolError(f"{path} is agi's own {name}: the file tools do not write it")


def _refuse_for_writing(path: Path, st: os.stat_result) -> None:
    _own_output(path, st)
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path} is a directory")
    for test, kind in KINDS:
        if test(st.st_mode):
            raise ToolError(
                f"{path} is {kind}, not a regular file: the file tools do not write it "
                "(it may block, or be a terminal or a device); use Bash with a bound"
            )


def check_writable(path: Path) -> None:
    """Refuse, before anything is read or written, a path the file tools must not write."""
    try:
        _refuse_for_writing(path, os.stat(path))
    except FileNotFoundError:
        pass


def open_no_links(path: Path, flags: int, mode: int = 0o666) -> int:
    """Open `path` following no link on the way: each directory from `/` down, then the file,
    opened with O_NOFOLLOW. The file tools are given real paths (agi.tools.pinned), so a link
    found now was put there since the call was judged."""
    parts = Path(os.path.abspath(path)).parts
    step = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    dirfd = os.open("/", step)
    try:
        for part in parts[1:-1]:
            deeper = os.open(part, step, dir_fd=dirfd)
            os.close(dirfd)
            dirfd = deeper
        return os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=dirfd)
    finally:
        os.close(dirfd)


def open_for_writing(path: Path) -> BinaryIO:
    """`path` opened to be replaced: created if missing; refused unopened when it is not a
    regular file or is agi's own stdout/stderr (and checked again once open, before it is
    truncated)."""
    check_writable(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = open_no_links(path, flags)
    except OSError as e:
        if e.errno in (errno.ENXIO, errno.EWOULDBLOCK):  # a FIFO with no reader
            raise ToolError(f"{path} is not a regular file: the file tools do not write it") from e
        if e.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.realpath(path) != str(path):
            raise ToolError(
                f"{path} changed while it was being written (a link appeared in its path); "
                "nothing was written"
            ) from e
        raise
    try:
        _refuse_for_writing(path, os.fstat(fd))
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "wb")


def read_some(f: BinaryIO, size: int, path: Path | str = "the file") -> bytes:
    """Read up to `size` bytes; a file with nothing to read yet (a kernel file such as
    /proc/kmsg, opened without blocking) is refused rather than waited for."""
    data = f.read(size)
    if data is None:
        raise ToolError(f"{path} has no data ready: it is not an ordinary file")
    return data


def open_regular(path: Path) -> BinaryIO:
    """The regular file at `path`, opened for reading; anything else is refused unopened
    (and checked again once open, in case it was swapped in between)."""
    _refuse_special(path, os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        _refuse_special(path, os.fstat(fd).st_mode)
    except ToolError:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


class Lines:
    """A file read line by line, at most CHUNK plus one line's bound in memory at a time.
    `check` is called before each read: it raises to stop (a deadline, an interrupt)."""

    def __init__(self, f: BinaryIO, check: Callable[[], None], max_line: int):
        self.f, self.check, self.max_line = f, check, max_line
        self.buf = b""
        self.eof = False
        self.scanned = 0

    def _fill(self) -> bool:
        if self.eof:
            return False
        self.check()
        chunk = read_some(self.f, CHUNK)
        self.scanned += len(chunk)
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def skip(self, n: int) -> int:
        """Skip up to n lines; how many there were."""
        done, partial = 0, False  # partial: text after the last newline seen
        while done < n:
            found = self.buf.count(b"\n")
            if done + found >= n:
                at = -1
                for _ in range(n - done):
                    at = self.buf.index(b"\n", at + 1)
                self.buf = self.buf[at + 1 :]
                return n
            done += found
            if self.buf:
                partial = not self.buf.endswith(b"\n")
            self.buf = b""
            if not self._fill():
                return done + partial
        return done

    def next(self) -> tuple[bytes, bool] | None:
        """The next line (without its newline) cut at max_line bytes, and whether it was cut;
        None at the end of the file."""
        while True:
            at = self.buf.find(b"\n")
            if at >= 0:
                line, self.buf = self.buf[:at], self.buf[at + 1 :]
                return line[: self.max_line], at > self.max_line
            if len(self.buf) > self.max_line:
                head = self.buf[: self.max_line]
                self.buf = b""
                self._discard_line()
                return head, True
            if not self._fill():
                line, self.buf = self.buf, b""
                return (line[: self.max_line], False) if line else None

    def _discard_line(self) -> None:
        while True:
            at = self.buf.find(b"\n")
            if at >= 0:
                self.buf = self.buf[at + 1 :]
                return
            self.buf = b""
            if not self._fill():
                return

    def count_rest(self) -> int | None:
        """The lines left, or None when counting them would mean reading too much."""
        count, start, last = 0, self.scanned, b""
        while True:
            if self.buf:
                count += self.buf.count(b"\n")
                last = self.buf[-1:]
            self.buf = b""
            if self.scanned - start > COUNT_LIMIT:
                return None
            if not self._fill():
                return count + (1 if last not in (b"", b"\n") else 0)


def deadline_check(deadline: float | None, stopped: Callable[[], bool]) -> Callable[[], None]:
    def check() -> None:
        if stopped():
            raise ToolError("interrupted")
        if deadline is not None and time.monotonic() >= deadline:
            raise ToolError("the time limit was reached while reading the file")

    return check
