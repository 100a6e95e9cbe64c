"""The Bash tool: a command in its own process group, output interleaved as a terminal shows it."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Any

from agi.errors import ToolError
from agi.policy.environment import child_env
from agi.tools.protocol import ToolContext, ToolText, require
from agi.tools.strays import MARK, end_marked, marking, new_token

if TYPE_CHECKING:
    from collections.abc import Callable

    from agi.policy.sandbox import Policy

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
OUTPUT_LIMIT = 30_000  # characters kept: half from the start, half from the end
DRAIN_SECONDS = 0.2  # after exit, how long to wait for background children still holding the pipe
BACKGROUND = {
    "type": "boolean",
    "description": "Run the command in the background; read its output with BashOutput",
}


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """TERM the process group, then KILL what is left; reap the leader."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        pass


def _group_exists(pgid: int) -> bool:
    """Whether a process group of ours is still there (another user's is not ours to end)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class Processes:
    """What one tool started: the commands running now, and every process group it made (its
    background jobs live there), so the tool can end them all."""

    def __init__(self) -> None:
        self.running: set[subprocess.Popen[bytes]] = set()
        self.groups: set[int] = set()
        self.lock = threading.Lock()
        self.token = new_token()  # AGI_JOB in each command's environment (agi.tools.strays)
        self.interrupts = 0  # how many times interrupt() was called: a command starting then

    def started(self, proc: subprocess.Popen[bytes]) -> None:
        with self.lock:
            self.running.add(proc)
            # forget groups that are gone, so close() never signals a group id reused since
            self.groups = {pgid for pgid in self.groups if _group_exists(pgid)} | {proc.pid}

    def adopt(self, proc: subprocess.Popen[bytes]) -> None:
        """A background command's group: ended by close(), not by interrupt()."""
        with self.lock:
            self.groups = {pgid for pgid in self.groups if _group_exists(pgid)} | {proc.pid}

    def ended(self, proc: subprocess.Popen[bytes]) -> None:
        with self.lock:
            self.running.discard(proc)

    def interrupt(self) -> None:
        """End the commands still running (a cancelled turn); background jobs stay."""
        with self.lock:
            self.interrupts += 1
            procs = list(self.running)
        for proc in procs:
            kill_group(proc)

    def close(self) -> None:
        """End every command and background job (at exit): no process is left behind."""
        self.interrupt()
        with self.lock:
            groups = list(self.groups)
            self.groups.clear()
        alive = []
        for pgid in groups:
            try:
                os.killpg(pgid, signal.SIGTERM)
                alive.append(pgid)
            except (ProcessLookupError, PermissionError):
                pass
        if alive:
            time.sleep(0.1)
        for pgid in alive:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if groups:  # what left its group and session (`setsid cmd &`) carries the mark
            end_marked(self.token)


def _marked(env: dict[str, str] | None, processes: Processes | None) -> dict[str, str]:
    """The command's environment, with the mark that finds its strays at the end."""
    env = env if env is not None else child_env()
    return env if processes is None else {**env, MARK: processes.token}


class Output:
    """Keeps the head and the tail of a stream of bytes, and counts what it dropped."""

    def __init__(self, limit: int = OUTPUT_LIMIT):
        self.half = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        tail = bytes(self.tail[-self.half :]) if self.tail else b""
        dropped = self.total - len(self.head) - len(tail)
        text = head
        if dropped > 0:
            text += f"\n[... {dropped} bytes of output omitted ...]\n"
        text += tail.decode("utf-8", "replace")
        return text.replace("\r\n", "\n")


class Bash:
    name = "Bash"
    description = (
        "Run a bash command and return its output (stdout and stderr interleaved) and, when "
        "non-zero, its exit code. Commands run in a fresh shell in the working directory; "
        "stdin is empty. Default timeout 120000 ms, at most 600000."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command to run"},
            "timeout": {"type": "number", "description": "Timeout in milliseconds"},
            "description": {
                "type": "string",
                "description": "What the command does, in 5-10 words",
            },
        },
        "required": ["command"],
    }

    per_call = True  # the toolbox says which tools it offers (BashOutput: run_in_background)

    def __init__(self) -> None:
        self.processes = Processes()
        # starts a background command, says its id (agi.tools.background; builtin_tools)
        self.background: Callable[[str, ToolContext], str] | None = None

    def spec_among(self, offered: set[str]) -> dict[str, Any]:
        """The `tools` entry: with `run_in_background` when BashOutput is offered beside it."""
        parameters = self.parameters
        if "BashOutput" in offered:
            properties = {**parameters["properties"], "run_in_background": BACKGROUND}
            parameters = {**parameters, "properties": properties}
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description,
                         "parameters": parameters},
        }  # fmt: skip

    def interrupt(self) -> None:
        self.processes.interrupt()

    def close(self) -> None:
        self.processes.close()

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        command = require(input, "command")
        background = input.get("run_in_background")
        if background not in (None, False, True):
            raise ToolError("'run_in_background' must be true or false")
        if background:
            if "BashOutput" not in ctx.offered or self.background is None:
                raise ToolError(
                    "run_in_background needs the BashOutput tool, which this run does not offer"
                )
            return self.background(command, ctx)
        timeout_ms = input.get("timeout")
        if timeout_ms is None or timeout_ms == 0 and not isinstance(timeout_ms, bool):
            timeout_ms = DEFAULT_TIMEOUT_MS  # 0: not given
        if (
            not isinstance(timeout_ms, (int, float))
            or isinstance(timeout_ms, bool)  # true is not 1 ms
            or not timeout_ms > 0  # NaN too
        ):
            raise ToolError("'timeout' must be a positive number of milliseconds")
        timeout = min(float(timeout_ms), MAX_TIMEOUT_MS) / 1000  # infinity: the cap
        left = ctx.remaining()
        if left is not None:
            timeout = min(timeout, left)
        output, code, timed_out = self.execute(command, ctx, timeout)
        shown = output.text()
        text = shown.rstrip("\n")
        if timed_out:
            text += f"\nCommand timed out after {timeout:g} s and was killed"
        elif code != 0:
            text += f"\nexit code {code}"
        # one pipe keeps the order a terminal shows, so hooks get both streams in `stdout`
        response = {
            "stdout": shown,
            "stderr": "",
            "output": shown,
            "exit_code": None if timed_out else code,
            "interrupted": timed_out,
        }
        return ToolText.with_response(text.lstrip("\n") or "(no output)", response)

    def execute(self, command: str, ctx: ToolContext, timeout: float) -> tuple[Output, int, bool]:
        argv = ["bash", "-c", command]
        return run_process(
            argv, ctx.cwd, timeout, ctx.environ(), sandbox=ctx.sandbox, processes=self.processes
        )


def run_process(
    argv: list[str],
    cwd: str,
    timeout: float,
    env: dict[str, str] | None = None,
    stdin: Any = subprocess.DEVNULL,
    sandbox: Policy | None = None,
    processes: Processes | None = None,
) -> tuple[Output, int, bool]:
    """Run argv in its own process group, stdout and stderr in one pipe, within `timeout`.

    `env` is the whole environment (None: ours); `processes`, if given, tracks the command while
    it runs and its process group after, for the tool's interrupt() and close().
    Under a sandbox bwrap leads the group; its PID namespace and --die-with-parent take every
    process of the command down with it, so killing the group still leaves nothing behind.
    """
    if sandbox is not None and sandbox.enabled:
        argv = sandbox.wrap(argv, cwd)
    elif processes is not None:  # a mark env -i cannot clear (bwrap's PID namespace needs none)
        argv = marking(argv, processes.token)
    interrupts = processes.interrupts if processes is not None else 0
    proc = subprocess.Popen(
        argv,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one pipe: the order a terminal would show
        cwd=cwd,
        env=_marked(env, processes),
        start_new_session=True,
    )
    if processes is not None:
        processes.started(proc)
        if processes.interrupts != interrupts:  # cancelled while it was starting: it was running
            kill_group(proc)
    output, timed_out = Output(), False
    assert proc.stdout is not None
    try:
        timed_out = _collect(proc, output, time.monotonic() + timeout)
    finally:
        if timed_out or proc.poll() is None:
            kill_group(proc)
        proc.stdout.close()
        if processes is not None:
            processes.ended(proc)
    if timed_out:
        return output, -1, True
    code = proc.wait()
    return output, 128 - code if code < 0 else code, False  # a signal, as $? shows it


def _collect(proc: subprocess.Popen[bytes], output: Output, deadline: float) -> bool:
    """Read the command's output until it exits (and its pipe drains) or `deadline`: timed out?"""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    exited_at: float | None = None
    eof = False
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                return True
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if eof:  # the command closed its output but may still be running
                if exited_at is not None:
                    return False
                try:
                    proc.wait(timeout=min(0.05, deadline - now))
                except subprocess.TimeoutExpired:
                    pass
                continue
            if exited_at is not None and now - exited_at > DRAIN_SECONDS:
                return False  # background children keep the pipe open; do not wait for them
            if not sel.select(timeout=min(0.05, deadline - now)):
                continue
            data = os.read(fd, 65536)
            if data:
                output.add(data)
            else:
                eof = True
    finally:
        sel.close()
