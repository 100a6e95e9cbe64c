"""What the jobs of `agi --batch` share (docs: batch): the output lines (stdout and the
`--batch-out` file, a whole line at a time), one cost budget, and the progress line on a
terminal. The workers' HTTP clients and one backoff per endpoint are agi.providers.pool's."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agi.engine.result import RunResult, batch_record
from agi.errors import CostLimit, UsageError
from agi.messages import Usage
from agi.policy.redaction import redact, redact_values
from agi.providers.cost import money


@dataclass
class Outcome:
    """One finished job: its result, written as a batch line (agi.engine.result.batch_record),
    and whether the batch's budget stopped it."""

    id: Any
    result: RunResult
    budget: bool = False  # stopped by the batch's --max-cost (not written)

    @property
    def exit(self) -> int:
        return self.result.exit_code

    def line(self, secrets: list[str] | None = None) -> str:
        """The JSON line, `secrets` redacted value by value (docs: security)."""
        record = redact_values(batch_record(self.result, self.id), secrets or [])
        return json.dumps(record, ensure_ascii=False) + "\n"


class Writer:
    """The output lines, in completion order: to stdout, and appended to `--batch-out` FILE
    with one write(2) of the whole line on a file opened O_APPEND. The lock is held for a whole
    line; the main thread takes it before a hard exit, so no line is begun after that.

    What holds: a line is in FILE whole or (only if the process is killed during the write,
    or the write fails) cut short as FILE's last line, never followed by another. Linux copies
    a write into a regular file a page at a time and may stop between pages when the process
    is killed, so a SIGKILL during the write of a line that straddles a page boundary of the
    file can leave a head of it; a rerun cuts such a last line off (done_keys) before
    appending. A short or failed write (a full disk, a
    file size limit) is cut back to the line's start at once and ends the appending: `failed`
    holds the reason, the lines after it go to stdout only, and no job starts after it."""

    def __init__(self, path: Path | None, secrets: list[str]):
        self.lock = threading.Lock()
        self.secrets = secrets
        self.path = path
        self.fd: int | None = None
        self.failed: str | None = None  # why FILE is no longer written
        if path is not None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            try:
                self.fd = os.open(path, flags, 0o600)
            except OSError as e:
                raise UsageError(f"cannot open --batch-out file {path}: {e.strerror}") from None

    def write(self, outcome: Outcome) -> bool:
        """Write one line; False when it could not be appended to FILE (see `failed`)."""
        line = redact(outcome.line(self.secrets), self.secrets)
        with self.lock:
            data = line.encode("utf-8", "surrogateescape")
            kept = self._append(data) if self.fd is not None else self.failed is None
            sys.stdout.write(line)
            sys.stdout.flush()
        return kept

    def _append(self, data: bytes) -> bool:
        assert self.fd is not None
        size = os.fstat(self.fd).st_size  # one writer (the lock): where this line begins
        try:
            written = os.write(self.fd, data)
            why = "short write" if written != len(data) else None
        except OSError as e:
            why = e.strerror or str(e)
        if why is None:
            return True
        try:
            os.ftruncate(self.fd, size)  # no torn line stays behind
        except OSError:
            pass
        self.failed = f"cannot write --batch-out file {self.path}: {why}"
        self.close()
        return False

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class BudgetSpent(CostLimit):
    """The batch's --max-cost is spent: a job stops before its next model call, or never
    starts."""

    def __init__(self, spent: str, limit: str):
        super().__init__(spent, limit)
        self.args = (f"{self} for the batch (--max-cost)",)


class Budget:
    """`--max-cost` for the whole batch: the cost of every job's model calls summed; a job
    meter checks it before each call and no job starts once it is reached."""

    def __init__(self, limit: float | None):
        self.limit = limit
        self.total = Usage()
        self._lock = threading.Lock()

    def add(self, usage: Usage) -> None:
        with self._lock:
            self.total.add(usage)

    @property
    def spent(self) -> float | None:
        with self._lock:
            return 0.0 if self.total.empty else self.total.cost

    def reached(self) -> BudgetSpent | None:
        """The error a job gets once the budget is spent (None while it is not)."""
        if self.limit is None:
            return None
        spent = self.spent
        if spent is not None and spent < self.limit:
            return None
        if spent is None:  # a call of unknown cost: the budget can no longer be kept
            return BudgetSpent("an unknown amount", money(self.limit))
        return BudgetSpent(money(spent), money(self.limit))


class Progress:
    """The progress line on a terminal: done, failed, running, cost so far, rate and ETA,
    redrawn in place twice a second; nothing at all when stderr is not a terminal, unless -v
    (`redraw=False`): then a plain line every 2 seconds when it changed, and the last one."""

    def __init__(self, total: int, budget: Budget, enabled: bool, redraw: bool = True):
        self.total, self.budget, self.enabled, self.redraw = total, budget, enabled, redraw
        self.written = ""  # the last plain line written (redraw=False)
        self.reading = False  # the input is still being read: the total so far, no ETA
        self.done = self.failed = self.running = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, name="agi-progress", daemon=True)
            self._thread.start()

    def began(self) -> None:
        with self._lock:
            self.running += 1

    def ended(self, code: int | None) -> None:
        """A job ended: with its exit code, or None when it was stopped unfinished."""
        with self._lock:
            self.running -= 1
            if code is not None:
                self.done += 1
                self.failed += code != 0

    def text(self, eta: bool = True) -> str:
        with self._lock:
            done, failed, running = self.done, self.failed, self.running
        elapsed = max(1e-6, time.monotonic() - self.started)
        rate = done / elapsed
        spent = self.budget.spent
        total = f"{self.total}+" if self.reading else str(self.total)
        parts = [f"{done}/{total} done", f"{failed} failed", f"{running} running"]
        parts.append("cost unknown" if spent is None else money(spent))
        parts.append(f"{rate:.1f} jobs/s")
        if eta and rate > 0 and done < self.total and not self.reading:
            parts.append(f"ETA {clock((self.total - done) / rate)}")
        return "agi batch: " + ", ".join(parts)

    def _tick(self) -> None:
        while not self._stop.wait(0.5 if self.redraw else 2.0):
            self._draw()

    def _draw(self, eta: bool = True) -> None:
        line = self.text(eta)
        if self.redraw:
            sys.stderr.write("\r\x1b[K" + line)
        elif line.split(", ")[:3] != self.written.split(", ")[:3]:  # the counts changed
            self.written = line
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def stop(self, eta: bool = True) -> None:
        """The last state stays on the terminal, on a line of its own (after an interrupt,
        without an ETA: `eta=False`)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
            if not self.redraw:
                self.written = ""  # the last line is always written
            self._draw(eta)
            if self.redraw:
                sys.stderr.write("\n")
            sys.stderr.flush()


def clock(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
