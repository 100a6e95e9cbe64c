"""Background commands: `Bash {run_in_background: true}` starts one, `BashOutput` reads what it
wrote since the last read, `KillShell` ends it (Claude Code's names and inputs).

A job runs as a foreground command does (its own process group, the sandbox, the mark that
finds its strays) and belongs to the Bash tool's processes, so it ends when the tool is closed
at the end of the run, the session or the call (docs: tools). What it writes and nobody has
read yet is bounded: the head and the tail are kept, the middle counted.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from typing import Any

from agi.errors import ToolError
from agi.tools.protocol import ToolContext, ToolText, require
from agi.tools.shell import Output, Processes, _marked, kill_group
from agi.tools.strays import marking

MAX_JOBS = 16  # running at once


class Job:
    """One background command: its process, the output not read yet, and how it ended."""

    def __init__(self, id: str, command: str, proc: subprocess.Popen[bytes]):
        self.id, self.command, self.proc = id, command, proc
        self.unread = Output()
        self.lock = threading.Lock()
        self.killed = False
        self.done = threading.Event()  # the pipe is drained (the command and its children ended)
        self.reader = threading.Thread(target=self._read, name=f"agi-{id}", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        try:
            while data := os.read(fd, 65536):
                with self.lock:
                    self.unread.add(data)
        except OSError:
            pass
        finally:
            self.proc.stdout.close()
            self.proc.wait()
            self.done.set()

    def take(self) -> str:
        """The output since the last read (and forget it)."""
        with self.lock:
            text, self.unread = self.unread.text(), Output()
        return text

    @property
    def code(self) -> int | None:
        code = self.proc.poll() if self.done.is_set() else None
        return None if code is None else 128 - code if code < 0 else code

    @property
    def status(self) -> str:
        if not self.done.is_set():
            return "running"
        return "killed" if self.killed else "completed" if self.code == 0 else "failed"


class Jobs:
    """The background commands of a Bash tool, by id."""

    def __init__(self, processes: Processes):
        self.processes = processes
        self.jobs: dict[str, Job] = {}
        self.lock = threading.Lock()
        self.count = 0

    def start(self, command: str, ctx: ToolContext) -> Job:
        with self.lock:
            running = sum(1 for j in self.jobs.values() if j.status == "running")
            if running >= MAX_JOBS:
                raise ToolError(f"{MAX_JOBS} background commands are running; end one first")
            self.count += 1
            id = f"bash_{self.count}"
        argv = ["bash", "-c", command]
        if ctx.sandbox.enabled:
            argv = ctx.sandbox.wrap(argv, ctx.cwd)
        else:
            argv = marking(argv, self.processes.token)
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=ctx.cwd,
            env=_marked(ctx.environ(), self.processes),
            start_new_session=True,
        )
        self.processes.adopt(proc)
        job = Job(id, command, proc)
        with self.lock:
            self.jobs[id] = job
        return job

    def launch(self, command: str, ctx: ToolContext) -> str:
        """Bash's answer to `run_in_background`: the new command's id."""
        job = self.start(command, ctx)
        return (
            f"Command running in background with ID: {job.id}. Read its output with "
            f'BashOutput {{"bash_id": "{job.id}"}}'
        )

    def get(self, id: object, key: str) -> Job:
        if not isinstance(id, str) or not id:
            raise ToolError(f"'{key}' is required and must be a string")
        job = self.jobs.get(id)
        if job is None:
            known = ", ".join(self.jobs) or "none"
            raise ToolError(f"there is no background command {id!r} (started: {known})")
        return job


class BashOutput:
    name = "BashOutput"
    opt_in = True  # offered only when named (agi.engine.assemble.choose)
    read_only = True
    description = (
        "Read what a background command (Bash with run_in_background) wrote since the last "
        "read, and its status: running, or how it ended and its exit code. filter: a regular "
        "expression; only the lines matching it are returned (the others are dropped)."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "bash_id": {"type": "string", "description": "The background command's id"},
            "filter": {"type": "string", "description": "Keep only the lines matching this"},
        },
        "required": ["bash_id"],
    }

    def __init__(self, jobs: Jobs):
        self.jobs = jobs

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        job = self.jobs.get(input.get("bash_id"), "bash_id")
        pattern = input.get("filter")
        regex = None
        if pattern not in (None, ""):
            if not isinstance(pattern, str):
                raise ToolError("'filter' must be a string")
            try:
                regex = re.compile(pattern)
            except re.error as e:
                raise ToolError(f"'filter' is not a valid regular expression: {e}") from e
        status = job.status  # before the read: output read while running may be followed by more
        text = job.take()
        if regex is not None:
            text = "\n".join(line for line in text.split("\n") if regex.search(line))
        text = text.rstrip("\n")
        parts = [f"<status>{status}</status>"]
        if job.code is not None and status != "running":
            parts.append(f"<exit_code>{job.code}</exit_code>")
        parts.append(f"<stdout>\n{text}\n</stdout>" if text else "<stdout></stdout>")
        response = {
            "shellId": job.id,
            "command": job.command,
            "status": status,
            "exitCode": job.code if status != "running" else None,
            "stdout": text,
            "stderr": "",
        }
        return ToolText.with_response("\n".join(parts), response)


class KillShell:
    name = "KillShell"
    opt_in = True  # offered only when named (agi.engine.assemble.choose)
    description = "End a background command started with Bash's run_in_background, by its id."
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"shell_id": {"type": "string", "description": "The command's id"}},
        "required": ["shell_id"],
    }

    def __init__(self, jobs: Jobs):
        self.jobs = jobs

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        require(input, "shell_id")
        job = self.jobs.get(input.get("shell_id"), "shell_id")
        if job.done.is_set():
            raise ToolError(f"background command {job.id} is not running ({job.status})")
        job.killed = True
        kill_group(job.proc)
        job.done.wait(2)
        return f"Successfully killed shell: {job.id} ({job.command})"
