"""The Terminal tool: long-running programs in pseudo-terminals, shown as a person sees them."""

from __future__ import annotations

import itertools
import os
import re
import selectors
import signal
import threading
import time
from typing import TYPE_CHECKING, Any

from agi.errors import ToolError
from agi.policy.environment import child_env
from agi.tools import strays
from agi.tools.keys import encode_keys
from agi.tools.line_edit import MARK, UNREADABLE, LineEditor
from agi.tools.protocol import ToolContext, require
from agi.tools.terminal_procs import foreground, session_groups, starts_reader
from agi.tools.terminal_screen import pyte_classes

if TYPE_CHECKING:
    from agi.policy.sandbox import Policy

DEFAULT_ROWS, DEFAULT_COLS = 24, 80
DEFAULT_WAIT_MS = 1000
START_WAIT_MS = 2000  # programs take a while to draw their first screen
MAX_WAIT_MS = 30_000
QUIET = 0.2  # seconds without output that count as "settled"
MAX_TERMINALS = 16
DECCKM = 1 << 5  # pyte's key for private mode 1: the arrows send application sequences


def end(programs: list[Program]) -> None:
    """HUP, then TERM, then KILL every process of the programs' sessions; reap; stop the readers."""
    for sig, grace in ((signal.SIGHUP, 0.3), (signal.SIGTERM, 0.3), (signal.SIGKILL, 2.0)):
        alive = [p for p in programs if p.alive()]
        if not alive:
            break
        for p in alive:
            p.signal(sig)
        deadline = time.monotonic() + grace
        while any(p.alive() for p in alive) and time.monotonic() < deadline:
            time.sleep(0.01)
    deadline = time.monotonic() + 0.5  # the readers drain the last output, then see the end
    for p in programs:
        p.thread.join(max(0.0, deadline - time.monotonic()))
    for p in programs:  # a process that left the session may still hold the terminal open
        p.stopping = True
        p.thread.join(1)


def spawn(
    command: str,
    cwd: str,
    rows: int,
    cols: int,
    env: dict[str, str],
    sandbox: Policy | None = None,
) -> tuple[int, int]:
    """Fork `bash -c command` as the leader of a new session whose controlling terminal is a pty.

    Under a sandbox bwrap runs in that session without --new-session, so the program keeps the
    pty as its controlling terminal (job control, Ctrl-C); Terminal.close() ends it with the run.
    """
    import fcntl
    import pty
    import struct
    import termios

    argv = ["bash", "-c", command]
    if sandbox is not None and sandbox.enabled:  # wrapped before the fork: the child only execs
        # no --die-with-parent: it would follow the tool call's thread, which ends before we do
        argv = sandbox.wrap(argv, cwd, die_with_parent=False)
    elif env.get(strays.MARK):  # a mark `env -i` cannot clear (docs: security)
        argv = strays.marking(argv, env[strays.MARK])
    winsize = struct.pack("HHHH", rows, cols, 0, 0)
    pid, fd = pty.fork()
    if pid == 0:  # the child: only what must happen before exec
        try:
            fcntl.ioctl(1, termios.TIOCSWINSZ, winsize)
            os.chdir(cwd)
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):  # Python ignores these
                signal.signal(sig, signal.SIG_DFL)
            os.execvpe(argv[0], argv, env)
        except BaseException as e:
            os.write(2, f"agi: cannot start bash: {e}\r\n".encode())
        os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, winsize)
    os.set_blocking(fd, False)
    return pid, fd


class Program:
    """One program in a pseudo-terminal; a reader thread feeds its output to a pyte screen."""

    def __init__(
        self,
        id: str,
        command: str,
        cwd: str,
        rows: int,
        cols: int,
        env: dict[str, str],
        sandbox: Policy | None = None,
    ):
        self.id, self.rows, self.cols = id, rows, cols
        screen_class, stream_class = pyte_classes()
        self.screen = screen_class(cols, rows, self.reply)
        self.stream = stream_class(self.screen)
        self.cond = threading.Condition()  # guards the screen and the times below
        self.io_lock = threading.Lock()  # writers against the reader closing the fd
        self.reap_lock = threading.Lock()  # one waitpid at a time: a second would lose the status
        self.last_output = 0.0  # time.monotonic() of the latest output
        self.seen = 0.0  # last_output when a screen was last returned
        self.eof = False
        self.stopping = False
        self.status: int | None = None
        self.line = LineEditor()  # what is typed since the last Enter, for the permission rules
        # a line sent started a program that reads code typed at the terminal (`python3`,
        # `perl -de0`), not yet seen in the foreground: the lines after it are its code
        self.pending = starts_reader(command)
        self.pid, self.fd = spawn(command, cwd, rows, cols, env, sandbox)
        self.thread = threading.Thread(target=self.pump, name=f"terminal {id}", daemon=True)
        self.thread.start()

    def pump(self) -> None:
        """Read output until every holder of the terminal is gone, so the program never blocks."""
        sel = selectors.DefaultSelector()
        sel.register(self.fd, selectors.EVENT_READ)
        try:
            while not self.stopping:
                if not sel.select(timeout=0.1):
                    continue
                try:
                    data = os.read(self.fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:  # EIO: the last process holding the terminal has ended
                    break
                if not data:
                    break
                if self.pending:  # the program it started may be the one drawing now
                    self.reader()
                with self.cond:
                    try:
                        self.stream.feed(data)
                    except Exception:  # a pyte bug must not stop the reader and block the program
                        pass
                    self.last_output = time.monotonic()
                    self.cond.notify_all()
        finally:
            sel.close()
            with self.io_lock:
                os.close(self.fd)
                self.fd = -1
            with self.cond:
                self.eof = True
                self.cond.notify_all()

    def reader(self) -> str:
        """What reads the next line typed: "" for the shell, else the program's name (a line
        for it is its code, not a Bash line; docs: permissions)."""
        with self.io_lock:
            live = foreground(self.fd) if self.fd >= 0 else None
        if live:
            self.pending = False
            return live
        return "a program started by an earlier line" if self.pending else ""

    def reply(self, data: bytes) -> None:
        try:
            os.write(self.fd, data)  # on the reader thread, which alone closes the fd
        except OSError:
            pass

    def write(self, data: bytes, timeout: float) -> None:
        deadline = time.monotonic() + max(timeout, 1.0)
        with self.io_lock:
            while data:
                if self.fd < 0:
                    raise ToolError(f"terminal {self.id} has ended ({self.state()}); close it")
                try:
                    data = data[os.write(self.fd, data) :]
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise ToolError(
                            f"the program is not reading its input; {len(data)} bytes not sent"
                        ) from None
                    time.sleep(0.01)

    def settle(self, wait: float) -> None:
        """Wait until new output has come and gone quiet, the terminal ended, or `wait` passed."""
        deadline = time.monotonic() + wait
        with self.cond:
            while not self.eof:
                now = time.monotonic()
                fresh = self.last_output > self.seen
                if (fresh and now - self.last_output >= QUIET) or now >= deadline:
                    break
                timeout = deadline - now
                if fresh:
                    timeout = min(timeout, self.last_output + QUIET - now)
                self.cond.wait(timeout)
        if self.eof:  # the terminal closes a moment before the process becomes a zombie
            until = time.monotonic() + 0.5
            while self.poll() is None and time.monotonic() < until:
                time.sleep(0.01)

    def poll(self) -> int | None:
        """The exit status (negative: killed by that signal), reaping the leader once it ends."""
        with self.reap_lock:
            if self.status is None:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:  # reaped by someone else (SIGCHLD ignored)
                    pid, status = self.pid, 0
                if pid:
                    self.status = os.waitstatus_to_exitcode(status)
            return self.status

    def alive(self) -> bool:
        return self.poll() is None or bool(session_groups(self.pid))

    def signal(self, sig: int) -> None:
        """Send `sig` to every process group of the session; CONT wakes stopped jobs to take it."""
        for pgid in session_groups(self.pid) | {self.pid}:
            for s in (sig,) if sig == signal.SIGKILL else (sig, signal.SIGCONT):
                try:
                    os.killpg(pgid, s)
                except (ProcessLookupError, PermissionError):
                    pass

    def state(self) -> str:
        status = self.poll()
        if status is None:
            return "running"
        if status < 0:
            try:
                return f"killed by {signal.Signals(-status).name}"
            except ValueError:
                return f"killed by signal {-status}"
        return f"exited with status {status}"

    def render(self, state: str | None = None) -> str:
        """The screen as a person sees it, under a header, after the lines that scrolled off."""
        with self.cond:
            screen = self.screen
            lines = [screen.text(screen.buffer.get(y)) for y in range(screen.lines)]
            scrolled = [screen.text(line) for line in screen.scrolled]
            dropped, screen.dropped = screen.dropped, 0
            screen.scrolled.clear()
            self.seen = self.last_output
            row, col, hidden = screen.cursor.y + 1, screen.cursor.x + 1, screen.cursor.hidden
        while lines and not lines[-1]:
            lines.pop()
        cursor = f"cursor at row {row} col {col}" + (" (hidden)" if hidden else "")
        size = f"{self.rows}x{self.cols}"
        parts = [f"[terminal {self.id}: {size}, {cursor}, {state or self.state()}]"]
        if scrolled:
            note = f", the {dropped} before them not kept" if dropped else ""
            parts.append(f"[{len(scrolled)} lines scrolled off the top since the last look{note}:]")
            parts += scrolled
            parts.append("[screen:]")
        parts += lines or ["[the screen is blank]"]
        return "\n".join(parts)


def number(input: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = input.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ToolError(f"'{name}' must be a number from {low} to {high}")
    return int(value)


class Terminal:
    name = "Terminal"
    description = (
        "Run a program that stays alive in a pseudo-terminal and drive it with keystrokes: a REPL, "
        "an editor, a pager, an installer asking questions, ssh, gdb. action=start runs `command` "
        "with bash in the working directory, under `id` or a new id that it returns; send types "
        "`keys`: text with Vim-style key names <Enter> <Tab> <Esc> <BS> <Up> <Down> <Left> "
        "<Right> <Home> <End> <PageUp> <PageDown> <Del> <Space> <C-c> <C-d> (any <C-x>) <M-x> "
        "<F1>..<F12>, and <lt> for a literal '<'; read waits for more output; close ends the "
        "program. Each returns the screen as a person would see it once the output has settled "
        "(waiting at most wait_ms), after the lines that scrolled off since the last look. "
        "Use Bash instead for commands that finish by themselves."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["start", "send", "read", "close"]},
            "id": {"type": "string", "description": "The terminal (start: optional, e.g. 't1')"},
            "command": {"type": "string", "description": "start: the command line to run"},
            "keys": {"type": "string", "description": "send: text and <Named> keys to type"},
            "wait_ms": {
                "type": "integer",
                "description": "Longest wait for the output to settle, in ms "
                f"(default {DEFAULT_WAIT_MS}, for start {START_WAIT_MS}; at most {MAX_WAIT_MS})",
            },
            "rows": {"type": "integer", "description": f"start: height (default {DEFAULT_ROWS})"},
            "cols": {"type": "integer", "description": f"start: width (default {DEFAULT_COLS})"},
        },
        "required": ["action"],
    }

    def __init__(self) -> None:
        self.token = strays.new_token()  # AGI_JOB in each program's environment
        self.terminals: dict[str, Program] = {}  # the open ones, by id
        self.lock = threading.Lock()
        self.numbers = itertools.count(1)

    def close(self) -> None:
        """End every terminal (at exit, on errors): no process is left behind. Safe to repeat."""
        with self.lock:
            programs = list(self.terminals.values())
            self.terminals.clear()
        end(programs)
        if programs:
            strays.end_marked(self.token)

    def canonical(self, input: dict[str, Any]) -> set[str]:
        """For the rules: the lines a `send` completes, as the shell receives them; a line
        another program reads (an interpreter, a debugger, a pager in the foreground, or one
        an earlier line of the same send starts) is that program's code: unreadable as Bash,
        so no Bash rule vouches for it (docs: permissions)."""
        if input.get("action") != "send" or not isinstance(input.get("keys"), str):
            return set()
        with self.lock:
            program = self.terminals.get(str(input.get("id")))
        editor = program.line.copy() if program is not None else LineEditor()
        foreign = bool(program.reader()) if program is not None else False
        lines = []
        for line in editor.feed(input["keys"]):
            lines.append(UNREADABLE if foreign else line)
            foreign = foreign or line == UNREADABLE or starts_reader(line)
        return {MARK + "\n".join(lines)}

    def find(self, id: str) -> Program:
        with self.lock:
            program = self.terminals.get(id)
            names = ", ".join(self.terminals) or "none"
        if program is None:
            raise ToolError(f"there is no terminal {id!r} (open: {names})")
        return program

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        action = input.get("action")
        if action not in ("start", "send", "read", "close"):
            raise ToolError("'action' must be one of start, send, read, close")
        default = START_WAIT_MS if action == "start" else DEFAULT_WAIT_MS
        wait = min(number(input, "wait_ms", default, 0, 10**9), MAX_WAIT_MS) / 1000
        left = ctx.remaining()
        wait = wait if left is None else min(wait, left)
        program = self.start(input, ctx) if action == "start" else self.find(require(input, "id"))
        if action == "close":
            with self.lock:
                self.terminals.pop(program.id, None)
            end([program])
            return program.render(f"closed, {program.state()}")
        if action == "send":
            keys = require(input, "keys")
            shell = not program.reader()
            for line in program.line.feed(keys):
                if shell and (line == UNREADABLE or starts_reader(line)):
                    program.pending, shell = True, False  # what follows is its input
            program.write(encode_keys(keys, DECCKM in program.screen.mode), wait)
        program.settle(wait)
        return program.render()

    def start(self, input: dict[str, Any], ctx: ToolContext) -> Program:
        command = require(input, "command")
        rows = number(input, "rows", DEFAULT_ROWS, 2, 500)
        cols = number(input, "cols", DEFAULT_COLS, 10, 1000)
        if not os.path.isdir(ctx.cwd):
            raise ToolError(f"the working directory does not exist: {ctx.cwd}")
        env = child_env({**ctx.env, strays.MARK: self.token})
        env.pop("COLUMNS", None)
        env.pop("LINES", None)
        env["TERM"] = "xterm-256color"
        with self.lock:
            id = input.get("id")
            if id is None:
                id = next(f"t{n}" for n in self.numbers if f"t{n}" not in self.terminals)
            elif not isinstance(id, str) or not re.fullmatch(r"[\w.-]{1,40}", id):
                raise ToolError("'id' must be a short name of letters, digits, '_', '.' or '-'")
            if id in self.terminals:
                raise ToolError(f"terminal {id} is in use; close it first or pick another id")
            if len(self.terminals) >= MAX_TERMINALS:
                raise ToolError(f"{MAX_TERMINALS} terminals are open; close one first")
            program = Program(id, command, ctx.cwd, rows, cols, env, ctx.sandbox)
            self.terminals[id] = program
        return program
