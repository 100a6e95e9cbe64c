"""Running hooks: command hooks as processes (in parallel, killed as a group on timeout or
interrupt), `async` and `asyncRewake` commands in the background, and `"type": "prompt"` hooks
as one JSON exchange with a model. Each run becomes a record that agi.claude.hooks.merge reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agi.claude.hooks.settings import Hook
from agi.errors import ProviderError, SchemaFailed

PIPE = subprocess.PIPE
POPEN: Any = dict(stdin=PIPE, stdout=PIPE, stderr=PIPE, encoding="utf-8", errors="replace")
POPEN["process_group"] = 0  # its own group: a timeout or an interrupt kills its children too


class Running:
    """The hook processes one agent's hooks are running now, in any thread: `end()` kills them
    (the run ended: a time limit, a signal, a closed session). One per Lifecycle, so that runs
    sharing a process never end each other's hooks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.procs: set[subprocess.Popen[str]] = set()

    def add(self, proc: subprocess.Popen[str]) -> None:
        with self.lock:
            self.procs.add(proc)

    def discard(self, proc: subprocess.Popen[str]) -> None:
        with self.lock:
            self.procs.discard(proc)

    def end(self) -> None:
        with self.lock:
            procs = list(self.procs)
        for proc in procs:
            _kill(proc)


class Rewakes:
    """`asyncRewake` hooks still running in the background, and what those that exited 2 said:
    (summary for the user, message for the agent). One per agent; any thread may add."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.found: list[tuple[str, str]] = []

    def add(self, summary: str, message: str) -> None:
        with self.lock:
            self.found.append((summary, message))

    def take(self) -> list[tuple[str, str]]:
        with self.lock:
            found, self.found = self.found, []
            self.threads = [t for t in self.threads if t.is_alive()]
        return found

    def wait(self) -> list[tuple[str, str]]:
        """Wait for the running ones (each ends by its own timeout), then take what they said."""
        with self.lock:
            threads = list(self.threads)
        for thread in threads:
            thread.join()
        return self.take()


def run_all(
    hooks: list[Hook],
    event: str,
    payload: dict[str, Any],
    env: dict[str, str],
    cwd: str,
    judge: Any = None,
    rewakes: Rewakes | None = None,
    running: Running | None = None,
) -> list[dict[str, Any]]:
    """Run the hooks in parallel threads; an interrupt kills every hook's process group."""
    stdin = json.dumps(payload)
    running = running if running is not None else Running()
    procs: list[subprocess.Popen[str]] = []
    lock = threading.Lock()
    stopped = threading.Event()  # interrupted: a hook started from now on is killed at once

    def one(hook: Hook) -> dict[str, Any]:
        record: dict[str, Any] = dict(type="hook", event=event, command=hook.command)
        record.update(source=hook.source, input=payload, stdout="", stderr="", exit_code=None)
        record["timed_out"] = False
        if hook.kind == "prompt":
            return record | {"prompt": True} | run_prompt(hook, stdin, judge)
        own = {**env, "CLAUDE_PLUGIN_ROOT": hook.plugin_root} if hook.plugin_root else env
        if hook.run_async:
            return record | start_async(hook, event, stdin, own, cwd, rewakes, running)
        try:
            proc = subprocess.Popen([hook.shell, "-c", hook.command], cwd=cwd, env=own, **POPEN)
        except OSError as e:
            return record | {"stderr": f"cannot start: {e}", "seconds": 0.0}
        with lock:  # a signal may land before this thread has it listed: it kills it here
            procs.append(proc)
            late = stopped.is_set()
        if late:
            _kill(proc)
        running.add(proc)
        return record | _wait_or_detach(proc, stdin, hook.timeout, running)

    with ThreadPoolExecutor(max_workers=len(hooks)) as pool:
        try:  # a signal may land while the hooks are handed out, one of them already running
            futures = [pool.submit(one, hook) for hook in hooks]
            return [f.result() for f in futures]
        except BaseException:
            with lock:
                stopped.set()
                for proc in procs:
                    _kill(proc)
            raise


def _wait(
    proc: subprocess.Popen[str], stdin: str, timeout: float, running: Running
) -> dict[str, Any]:
    """Feed the payload, wait up to `timeout`, kill the group after it."""
    start, timed_out = time.monotonic(), False
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(proc)
        try:
            out, err = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:  # a process that left the group holds the pipes
            out, err = "", ""
            for pipe in filter(None, (proc.stdout, proc.stderr)):
                pipe.close()
            proc.wait()
    running.discard(proc)
    seconds = round(time.monotonic() - start, 3)
    return dict(
        stdout=out or "",
        stderr=err or "",
        exit_code=proc.returncode,
        seconds=seconds,
        timed_out=timed_out,
    )


def _wait_or_detach(
    proc: subprocess.Popen[str], stdin: str, timeout: float, running: Running
) -> dict[str, Any]:
    """Like `_wait`, but a command whose first line of output is `{"async": true,
    "asyncTimeout": MS}` goes on in the background from there (Claude Code's asynchronous hook
    answer): the run does not wait for it, its output is not used, and it is killed after
    asyncTimeout (else its timeout)."""
    start = time.monotonic()
    out: list[bytes] = []
    err: list[bytes] = []
    first = threading.Event()  # a first line of output, or its end

    def feed() -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(stdin)
            proc.stdin.close()
        except (OSError, ValueError):  # the hook did not read it all
            pass

    # raw reads, not lines: a stray child of the hook may hold the pipes open after the hook
    # exits, and what the hook wrote must not wait for a newline or an end that never comes
    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout.fileno(), out, first), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr.fileno(), err, None), daemon=True),
        threading.Thread(target=feed, daemon=True),
    ]
    for thread in readers:
        thread.start()
    while not first.wait(0.02) and proc.poll() is None and time.monotonic() - start < timeout:
        pass
    text = b"".join(out).decode("utf-8", "replace")
    detach = _async_answer(text.splitlines(keepends=True)[0]) if "\n" in text else None
    if detach is not None:  # from here on like an `async` hook: the run's end leaves it be
        running.discard(proc)
        limit = detach or timeout
        threading.Thread(target=_reap, args=(proc, limit), daemon=True).start()
        return {"exit_code": 0, "seconds": round(time.monotonic() - start, 3), "async": True}
    timed_out = False
    try:
        proc.wait(max(0.0, timeout - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(proc)
        proc.wait()
    for thread in readers:
        thread.join(DRAIN)  # a process that left the group may hold the pipes: do not wait
    running.discard(proc)
    return dict(
        stdout=b"".join(out).decode("utf-8", "replace"),
        stderr=b"".join(err).decode("utf-8", "replace"),
        exit_code=proc.returncode,
        seconds=round(time.monotonic() - start, 3),
        timed_out=timed_out,
    )


DRAIN = 0.2  # seconds to collect output after the hook exited (stray children may hold pipes)


OUTPUT_LIMIT = 10 << 20  # bytes of a hook's stdout (and of its stderr) kept; the rest is read


def _drain(fd: int, sink: list[bytes], first: threading.Event | None) -> None:
    """Read a pipe to its end, keeping its first OUTPUT_LIMIT bytes (a hook that writes
    forever fills no memory); `first` is set at the first newline and at the end."""
    kept = 0
    try:
        while chunk := os.read(fd, 1 << 16):
            if kept < OUTPUT_LIMIT:
                sink.append(chunk[: OUTPUT_LIMIT - kept])
                kept += len(sink[-1])
            if first is not None and b"\n" in chunk:
                first.set()
    except OSError:
        pass
    if first is not None:
        first.set()


def _async_answer(line: str) -> float | None:
    """None unless the line is `{"async": true, ...}`; then its asyncTimeout in seconds, or 0."""
    try:
        data = json.loads(line) if line.startswith("{") else None
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("async") is not True:
        return None
    limit = data.get("asyncTimeout")
    if not isinstance(limit, int | float) or isinstance(limit, bool) or limit <= 0:
        return 0.0
    return limit / 1000


def _reap(proc: subprocess.Popen[str], limit: float) -> None:
    try:
        proc.wait(limit)
    except subprocess.TimeoutExpired:
        _kill(proc)
        proc.wait()


def run_prompt(hook: Hook, payload: str, judge: Any) -> dict[str, Any]:
    """A prompt hook: `$ARGUMENTS` (or, without it, the end of the prompt) gets the event JSON;
    the model's `{"ok": false, "reason"}` becomes a block (exit 2 with the reason on stderr),
    `ok: true` a plain success; a failed exchange is a failed hook (ignored, reported)."""
    prompt = hook.command
    prompt = (
        prompt.replace("$ARGUMENTS", payload)
        if "$ARGUMENTS" in prompt
        else (f"{prompt.rstrip()}\n\n{payload}")
    )
    start = time.monotonic()
    if judge is None:
        return {"stderr": "cannot run: no model to ask here", "seconds": 0.0}
    try:
        answer = judge(prompt, hook.model, hook.timeout)
    except TimeoutError:
        return {"timed_out": True, "seconds": round(time.monotonic() - start, 3)}
    except (ProviderError, SchemaFailed) as e:
        return {"stderr": f"cannot run: {e}", "seconds": round(time.monotonic() - start, 3)}
    seconds = round(time.monotonic() - start, 3)
    if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
        return {"stderr": f"cannot run: the model answered {answer!r}", "seconds": seconds}
    reason = answer.get("reason") if isinstance(answer.get("reason"), str) else ""
    if answer["ok"]:
        return {"exit_code": 0, "seconds": seconds, "answer": answer}
    return {"exit_code": 2, "stderr": reason or "the prompt hook said no", "seconds": seconds}


def start_async(
    hook: Hook,
    event: str,
    stdin: str,
    env: dict[str, str],
    cwd: str,
    rewakes: Rewakes | None,
    running: Running,
) -> dict[str, Any]:
    """`async: true`: start the command, feed it the payload from a thread, and go on; it is
    killed after its timeout and its output is not used (docs: permissions). With
    `asyncRewake: true` its stderr is kept, and an exit 2 is added to `rewakes`."""
    keep = hook.rewake and rewakes is not None
    out = PIPE if keep else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(
            [hook.shell, "-c", hook.command],
            cwd=cwd,
            env=env,
            stdin=PIPE,
            stdout=out,
            stderr=out,
            encoding="utf-8",
            errors="replace",
            process_group=0,
        )
    except OSError as e:
        return {"stderr": f"cannot start: {e}", "seconds": 0.0, "async": True}

    if keep:
        running.add(proc)  # its report is awaited: it ends with the run

    def feed() -> None:
        try:
            result = _wait(proc, stdin, hook.timeout, running)
        except (OSError, ValueError):
            return
        if keep and result["exit_code"] == 2 and rewakes is not None:
            summary = _summary(result["stdout"]) or hook.rewake_summary
            summary = summary or f"a background {event} hook reported a problem"
            intro = hook.rewake_message or f"A background {event} hook reports:"
            rewakes.add(summary, f"{intro}\n\n{result['stderr'].strip()}")

    thread = threading.Thread(target=feed, daemon=True)
    if keep and rewakes is not None:
        with rewakes.lock:
            rewakes.threads.append(thread)
    thread.start()
    return {"exit_code": 0, "seconds": 0.0, "async": True, "pid": proc.pid}


def _summary(stdout: str) -> str:
    """An asyncRewake hook's own `rewakeSummary`, from the first stdout line that is a JSON
    object (as Claude Code reads it), overriding the settings' one."""
    line = next((x for x in stdout.splitlines() if x.startswith("{")), "")
    try:
        data = json.loads(line) if line else None
    except ValueError:
        return ""
    value = data.get("rewakeSummary") if isinstance(data, dict) else None
    return value[:REWAKE_SUMMARY_MAX] if isinstance(value, str) else ""


REWAKE_SUMMARY_MAX = 300  # characters of a hook's own rewakeSummary, as Claude Code cuts it


def _kill(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
