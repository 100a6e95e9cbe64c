"""The jobs of `agi --batch` (docs: batch): JSON lines read and checked as they come (a bad
line is a usage error naming its number), `--shard K/N`, and the jobs an earlier `--batch-out`
file already holds with exit 0 (resume). The input is read lazily, in bounded memory: what is kept
of the lines read is their ids (for an id used twice), not the lines."""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agi.errors import TimeLimit, UsageError
from agi.fileio import loads
from agi.options import checks
from agi.process import STDIN_LIMIT

MAX_JOBS = 100_000  # lines one batch input holds (docs: batch), streamed or read whole

# A job's own fields, each with its check; every other option comes from the command line.
FIELDS: tuple[str, ...] = ("id", "prompt", "schema", "exit_code", "model", "sys", "session")
FIELDS += ("max_steps", "max_cost", "timeout", "ephemeral", "attachments")


@dataclass
class BatchJob:
    """One line of the input: its number (1-based), its index among the jobs (0-based, what
    `--shard` counts), its id (the line number when it gives none) and its own options."""

    line: int
    index: int
    id: Any
    prompt: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The id as JSON: what a `--batch-out` line is matched by (1 and "1" differ)."""
        return json.dumps(self.id, ensure_ascii=False)

    @property
    def source(self) -> str:
        """Where this job's settings come from, for error messages (docs: configuration)."""
        return f"batch line {self.line}"


def _positive(value: Any, integer: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return value > 0 and math.isfinite(value) and (not integer or isinstance(value, int))


def _names(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value)
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


CHECKS: dict[str, tuple[Any, str]] = {
    "id": (lambda v: isinstance(v, str | int) and not isinstance(v, bool), "a string or integer"),
    "prompt": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string"),
    "schema": (lambda v: isinstance(v, dict) or isinstance(v, str) and bool(v.strip()), "a spec"),
    "exit_code": (lambda v: isinstance(v, bool | str), "true, false or the criteria"),
    "model": (lambda v: isinstance(v, str) and bool(v.strip()), "a model name"),
    "sys": (_names, "a file name or a list of them"),
    "session": (lambda v: isinstance(v, str) and bool(v.strip()), "a directory"),
    "max_steps": (lambda v: _positive(v, integer=True), "a positive integer"),
    "max_cost": (_positive, "a positive number"),
    "timeout": (_positive, "a positive number"),
    "ephemeral": (lambda v: isinstance(v, bool), "true or false"),
    "attachments": (_names, "a file name or a list of them"),  # docs: attachments
}


def parse_line(text: str, number: int, index: int) -> BatchJob:
    """One non-blank line as a job: a JSON object with a prompt, or any other text as the
    prompt itself. A line that starts like an object but is none is unusable input."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return BatchJob(number, index, number, stripped)
    where = f"batch line {number}"
    try:
        job = loads(stripped)  # nested too deep: an error at its column, not a traceback
    except ValueError as e:
        raise UsageError(f"{where}: not valid JSON: {e}") from None
    if not isinstance(job, dict):
        raise UsageError(f"{where}: not valid JSON: a job is one object per line")
    unknown = sorted(set(job) - set(FIELDS))
    if unknown:
        raise UsageError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(FIELDS)})")
    if "prompt" not in job:
        raise UsageError(f"{where}: no prompt")
    for name, value in job.items():
        check, what = CHECKS[name]
        if not check(value):
            raise UsageError(f"{where}: {name} must be {what}, not {json.dumps(value)[:60]}")
    options = {k: v for k, v in job.items() if k not in ("id", "prompt")}
    return BatchJob(number, index, job.get("id", number), job["prompt"], options)


def read_jobs(lines: Iterable[bytes]) -> list[BatchJob]:
    """Every job of the input, checked: bad UTF-8, bad JSON, a bad field or an id used twice
    stops everything before a job starts (UsageError naming the line)."""
    return list(iter_jobs(lines))


def iter_jobs(lines: Iterable[bytes]) -> Iterator[BatchJob]:
    """The jobs of the input one at a time, each checked as it is read: bad UTF-8, bad JSON, a
    bad field or an id used twice is a UsageError naming the line."""
    ids = Ids()
    index = 0
    for number, raw in enumerate(lines, 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"batch line {number}: not UTF-8 text") from None
        if not text.strip():
            continue
        job = parse_line(text, number, index)
        ids.add(job, job.key != str(number))  # an id of its own, or its line's number
        index += 1
        yield job


class Ids:
    """The ids used so far, in memory that grows with the ids lines give, not with the lines: a
    given id is kept as a 16-byte digest; lines whose id is their number are kept as runs of
    line numbers (one run for an input of prompts alone)."""

    def __init__(self) -> None:
        self.given: dict[bytes, int] = {}  # digest of the id's JSON -> its line
        self.starts: list[int] = []  # runs of lines whose id is their number: [start, end]
        self.ends: list[int] = []

    def add(self, job: BatchJob, given: bool) -> None:
        key = job.key
        digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        used = self.given.get(digest)
        if used is None and isinstance(job.id, int) and not isinstance(job.id, bool):
            used = job.id if given and self._numbered(job.id) else None
        if used is not None:
            raise UsageError(f"batch line {job.line}: id {key} is already used on line {used}")
        if given:
            self.given[digest] = job.line
            return
        if self.ends and self.ends[-1] == job.line - 1:
            self.ends[-1] = job.line
        else:
            self.starts.append(job.line)
            self.ends.append(job.line)

    def _numbered(self, line: int) -> bool:
        at = bisect.bisect_right(self.starts, line) - 1
        return at >= 0 and self.ends[at] >= line


@dataclass
class Waiting:
    """How a lazy read waits for input: `going()` false ends the input (Ctrl-C, a reader of
    the output gone); a wait longer than `timeout` seconds (--timeout) is a TimeLimit."""

    going: Callable[[], bool]
    timeout: float | None = None


def regular(name: str) -> bool:
    """Whether the input is a regular file (read twice: checked whole, then run)."""
    import os
    import stat

    try:
        return name != "-" and stat.S_ISREG(os.stat(Path(name).expanduser()).st_mode)
    except OSError:
        return False


def open_input(
    name: str, limit: int | None = None, waiting: Waiting | None = None
) -> Iterator[bytes]:
    """The input's lines as bytes (without their newline): a file, or `-` for standard input,
    read in chunks as the lines are taken: a line over `limit` bytes (`stdin_limit`, 10 MB by
    default) is a usage error naming it, before it is all read, and so is an input over ten
    times `limit` or of more than MAX_JOBS lines, when it gets there (docs: batch). Without
    `waiting` (a provider batch, read whole first) a read that waits is ended by the caller's
    --timeout alarm. A FIFO is opened without waiting for its writer."""
    import os
    import sys

    limit = limit or STDIN_LIMIT
    shown = "stdin" if name == "-" else f"--batch file {name}"
    try:
        if name == "-":
            yield from _lines(sys.stdin.buffer.fileno(), limit, shown, waiting)
            return
        fd = os.open(Path(name).expanduser(), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            os.set_blocking(fd, True)
            yield from _lines(fd, limit, shown, waiting)
        finally:
            os.close(fd)
    except OSError as e:
        raise UsageError(f"cannot read {shown}: {e.strerror or e}") from None


def _chunks(fd: int, waiting: Waiting | None) -> Iterator[bytes]:
    """The input's chunks; with `waiting`, each read waits in short polls (so that Ctrl-C and
    --timeout end a wait), and the input ends when `waiting.going()` is false."""
    import os
    import select

    poll = select.poll() if waiting is not None else None
    if poll is not None:
        poll.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while True:
        if waiting is not None and poll is not None:
            began = time.monotonic()
            while not poll.poll(200):
                if not waiting.going():
                    return
                if waiting.timeout and time.monotonic() - began > waiting.timeout:
                    raise TimeLimit(waiting.timeout)
            if not waiting.going():
                return
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return
        yield chunk


def _lines(fd: int, limit: int, shown: str, waiting: Waiting | None = None) -> Iterator[bytes]:
    number = total = size = 0
    pieces: list[bytes] = []
    for chunk in _chunks(fd, waiting):
        total += len(chunk)
        if total > 10 * limit:
            raise UsageError(f"{shown} is over {10 * limit} bytes (ten times `stdin_limit`)")
        *complete, rest = chunk.split(b"\n")
        for piece in complete:
            number += 1
            if number > MAX_JOBS:
                raise UsageError(f"{shown} has more than {MAX_JOBS} lines: split it")
            if size + len(piece) > limit:
                raise UsageError(f"batch line {number}: longer than {limit} bytes")
            yield b"".join([*pieces, piece])
            pieces, size = [], 0
        pieces.append(rest)
        size += len(rest)
        if size > limit:
            raise UsageError(f"batch line {number + 1}: longer than {limit} bytes")
    if size:
        yield b"".join(pieces)


def lock_out(path: Path) -> int:
    """`--batch-out` FILE, opened and locked (flock) for as long as this process runs: a second
    batch on the same file says so (exit 2) rather than running the same jobs again."""
    import fcntl
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise UsageError(f"cannot open --batch-out file {path}: {e.strerror or e}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"--batch-out file {path}: not a regular file")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise UsageError(
            f"--batch-out file {path} is in use by another batch: wait for it to end, "
            "or give another file"
        ) from None
    return fd


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """`--shard K/N` (0 <= K < N) as (K, N)."""
    if text is None:
        return None
    k, slash, n = text.partition("/")
    try:  # ASCII digits only: int() would take `1_0` and other scripts' digits
        shard = checks.number(k), checks.number(n)
        if not (k.isascii() and k.isdigit() and n.isascii() and n.isdigit()):
            raise ValueError(text)  # no sign either
    except ValueError:
        shard = (-1, 0)
    if not slash or not 0 <= shard[0] < shard[1]:
        raise UsageError(f"--shard must be K/N with 0 <= K < N, e.g. 0/4 (not {text!r})")
    return shard


def in_shard(jobs: list[BatchJob], shard: tuple[int, int] | None) -> list[BatchJob]:
    """The jobs whose index modulo N is K: N shards partition the input."""
    return [job for job in jobs if mine(job, shard)]


def mine(job: BatchJob, shard: tuple[int, int] | None) -> bool:
    """Whether the job is in this shard (index modulo N is K)."""
    return shard is None or job.index % shard[1] == shard[0]


def done_keys(path: Path) -> set[str]:
    """The ids (as JSON) that `--batch-out` FILE holds with exit 0. A last line cut short (a
    crash while it was written, by another program) is cut off, so that appending goes on
    from a line's start; any other line that is not a result is ignored."""
    done: set[str] = set()
    try:
        with open(path, "rb+") as f:  # read a line at a time, each up to OUT_LINE bytes
            end = whole = 0  # bytes read; bytes up to the last newline
            long = False  # within a line over OUT_LINE: skipped
            while line := f.readline(OUT_LINE):
                end += len(line)
                if not line.endswith(b"\n"):
                    long = len(line) == OUT_LINE
                    continue
                whole = end
                if long:
                    long = False
                    continue
                _done(line, done)
            if end != whole:
                f.truncate(whole)
    except FileNotFoundError:
        return set()
    except OSError as e:
        raise UsageError(f"cannot read --batch-out file {path}: {e.strerror or e}") from None
    return done


OUT_LINE = 64 << 20  # bytes of a --batch-out line read at most (a longer one is no result)


def _done(line: bytes, done: set[str]) -> None:
    try:
        result = loads(line)
    except ValueError:
        return
    if isinstance(result, dict) and "id" in result and result.get("exit") == 0:
        done.add(json.dumps(result["id"], ensure_ascii=False))
