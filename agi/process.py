"""The process around a run: standard streams that never end it with a traceback, signals
held while it cleans up, and an exit that does not wait for threads stuck in a system call.

- stdout: text goes out as UTF-8 (the bytes of a non-UTF-8 path as they were: agi.policy.decoding);
  when its reader went away (EPIPE) the rest is dropped and the CLI exits quietly with 141, as
  filters killed by SIGPIPE do; any other failure (a full disk, a closed descriptor) raises
  `OutputFailed`, an AgiError (exit 1) with one line.
- stderr is for people: when it cannot be written (closed, full, a terminal that hung up) what
  was meant for it is dropped, and the answer on stdout is not lost.
- A closed descriptor 0, 1 or 2 is taken by /dev/null at once, so that no file agi opens
  later gets its number (a session file that commands would write to as their stdout).
"""

from __future__ import annotations

import errno
import io
import os
import signal
import sys
import time

from agi.errors import AgiError, Interrupted, TimeLimit, UsageError
from agi.policy.decoding import STDIO_ERRORS
from agi.policy.environment import forget, withheld, withhold
from agi.policy.redaction import redact, usable

TYPE_CHECKING = False  # not typing's: `agi --version` imports neither typing nor threading
if TYPE_CHECKING:
    from types import FrameType
    from typing import Any

HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class OutputFailed(AgiError):
    """stdout could not be written (not a closed pipe: that ends quietly)."""


class Stdout(io.TextIOWrapper):
    reader_gone = False  # EPIPE: what follows goes nowhere
    secrets: list[str] = []  # redacted from every write, here and on stderr

    def write(self, text: str) -> int:
        try:
            return super().write(redact(text, Stdout.secrets))
        except BrokenPipeError:
            self._gone()
            return len(text)
        except OSError as e:
            raise _failed(e) from e

    def flush(self) -> None:
        try:
            super().flush()
        except BrokenPipeError:
            self._gone()
        except OSError as e:
            raise _failed(e) from e

    def _gone(self) -> None:
        Stdout.reader_gone = True
        _silence(1)
        try:
            super().flush()  # into /dev/null now, so nothing fails again at exit
        except OSError:
            pass


class Stderr(io.TextIOWrapper):
    def write(self, text: str) -> int:
        try:
            return super().write(redact(text, Stdout.secrets))
        except (OSError, ValueError):
            _silence(2)
            return len(text)

    def flush(self) -> None:
        try:
            super().flush()
        except (OSError, ValueError):
            _silence(2)


def _failed(error: OSError) -> OutputFailed:
    _silence(1)  # what is still buffered must not fail again at exit
    why = "it is closed" if error.errno == errno.EBADF else error.strerror or str(error)
    return OutputFailed(f"cannot write to stdout: {why}")


def _silence(fd: int) -> None:
    """From now on what goes to `fd` goes to /dev/null."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass


def silence_stdout() -> None:
    _silence(1)


def flush_stdout() -> bool:
    """Flush stdout (OutputFailed if it cannot be written); whether its reader went away."""
    sys.stdout.flush()
    return Stdout.reader_gone


def _occupy(fd: int) -> bool:
    """Whether `fd` was open; a closed one is given /dev/null (stdout's: not writable)."""
    try:
        os.fstat(fd)
        return True
    except OSError:
        pass
    null = os.open(os.devnull, os.O_WRONLY if fd == 2 else os.O_RDONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)
    return False


def standard_streams() -> None:
    """Set up the standard streams for a run (the real process only, not tests in-process)."""
    # httpcore imports trio whenever it is installed, for clients run under trio (about 45 ms
    # of every run's start); agi's own process never runs under trio: keep it out
    sys.modules.setdefault("trio", None)  # type: ignore[arg-type]
    for fd in (0, 1, 2):
        _occupy(fd)
    if sys.stdin is None:
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
    line = bool(sys.stdout is not None and sys.stdout.line_buffering)
    sys.stdout = Stdout(_writer(1), "utf-8", STDIO_ERRORS, line_buffering=line)
    sys.stderr = Stderr(_writer(2), "utf-8", STDIO_ERRORS, line_buffering=True)


def _writer(fd: int) -> io.BufferedWriter:
    return io.BufferedWriter(io.FileIO(fd, "w", closefd=False))


class signals_held:  # noqa: N801  (used as a function: `with signals_held() as held`)
    """Signals that arrive inside are noted (in the list given) instead of interrupting."""

    def __enter__(self) -> list[int]:
        self.held: list[int] = []
        self.old = {signum: signal.signal(signum, self.note) for signum in HELD_SIGNALS}
        return self.held

    def note(self, signum: int, frame: FrameType | None) -> None:
        self.held.append(signum)

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self.old.items():
            signal.signal(signum, handler)


def exit_now_if_stuck(code: int) -> None:
    """The run is over: if a thread is still inside a tool (a read that never returns), exit
    without waiting for it, as the interpreter otherwise would at exit (the exit functions,
    such as the REPL's history, still run)."""
    import threading

    main = threading.main_thread()
    if any(t.is_alive() and not t.daemon and t is not main for t in threading.enumerate()):
        import atexit

        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, AgiError, ValueError):
                pass
        os._exit(code)


STDIN_LIMIT = 10 << 20  # bytes of stdin a run reads by default (config `stdin_limit`)


STDIN_NOTICE = "agi: waiting for standard input (--no-stdin skips it)\n"
STDIN_PATIENCE = 3.0  # seconds of silence on a piped stdin before agi says it is waiting


def notice_if_silent(stream: Any, seconds: float = STDIN_PATIENCE) -> None:
    """A pipe on stdin that brings no byte (nor its end) within `seconds`: say once on stderr
    that agi is waiting for it, then go on waiting (docs: volume). A file, a terminal or
    a stream without a descriptor is read at once."""
    import select
    import stat

    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return
    ready, _, _ = select.select([fd], [], [], seconds)
    if not ready:
        sys.stderr.write(STDIN_NOTICE)
        sys.stderr.flush()


def read_stdin(stream: Any, limit: int | None = None) -> bytes:
    """stdin whole, but never more than `limit` bytes (default 10 MB): beyond it a usage
    error naming the limit. The caller's --timeout alarm interrupts a read that waits."""
    limit = limit or STDIN_LIMIT
    chunks: list[bytes] = []
    size = 0
    read = getattr(stream, "read1", stream.read)
    while chunk := read(1 << 16):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise UsageError(
                f"stdin is over the limit of {limit} bytes ({limit / (1 << 20):g} MB; "
                "`stdin_limit` in the config sets it)"
            )
    return b"".join(chunks)


def hide_keys(key: str | None, keep: bool = False) -> None:
    """The API key is redacted from whatever reaches stdout and stderr, and withheld from
    every child (child_env); agi's own key variables also leave os.environ, unless `keep`
    (a batch resolves its jobs' keys from them as it reads the jobs)."""
    Stdout.secrets = usable([key])
    withhold(key)
    names = withheld(dict(os.environ))
    forget(names)  # from agi's environment block too (/proc/PID/environ)
    for name in () if keep else names:
        del os.environ[name]


def interrupt_on(*signums: int) -> None:
    """These signals interrupt the run like Ctrl-C (exit 128 + the signal's number)."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    for signum in signums:
        signal.signal(signum, interrupt)


ALARM_LIMIT = 1e8  # seconds (three years): longer timeouts are none


def arm_alarm(started: float, timeout: float) -> None:
    """A backstop for --timeout: the transport and the tools honour the deadline themselves."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise TimeLimit(timeout)

    left = max(0.1, started + timeout - time.monotonic()) + 1
    if not left < ALARM_LIMIT:  # a timeout of years is no limit (the timer cannot hold it)
        return
    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, left)


def end_run(run: Any) -> Interrupted | None:
    """SessionEnd hooks, then close what the run opened (connections, every process the tools
    started, the session's lock). A signal during the hooks ends them; during the closing it is
    held, so nothing is left behind. Returns the signal that came, if one did."""
    signal.setitimer(signal.ITIMER_REAL, 0)
    cut: Interrupted | None = None
    try:
        run.end_hooks("other")
    except KeyboardInterrupt:
        cut = Interrupted(signal.SIGINT)
    except Interrupted as e:
        cut = e
    except AgiError as e:
        run.view.warn(run.redact(str(e)))
    with signals_held() as held:
        run.close()
    return cut if cut is not None or not held else Interrupted(held[0])
