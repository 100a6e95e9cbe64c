"""Claude Code-compatible hooks: run the matching commands of an event, merge their verdicts.

Settings (read by agi.claude.hook_settings): `{"hooks": {EVENT: [{"matcher": M, "hooks": [{"type":
"command", "command": CMD, "timeout": SECONDS}]}]}}`. Each command runs with `sh -c` in the
project directory, the event JSON on stdin; all matching hooks of an event run in parallel and
identical commands run once.
Exit 0: stdout is JSON to honour, or plain text that becomes context for UserPromptSubmit and
SessionStart (ignored elsewhere). Exit 2: a block, stderr the reason. Other exits, timeouts and
commands that cannot start are warnings; the run goes on. `Outcome` holds the merged verdict;
what it means at each event (what the loop must do) is on the class.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agi.claude.hook_settings import (
    EVENTS,
    TOOL_EVENTS,
    Hook,
    HookSettingsError,
    Matcher,
    read_settings,
)

__all__ = [
    "EVENTS",
    "Hook",
    "HookSettingsError",
    "Hooks",
    "Matcher",
    "Outcome",
    "base_payload",
    "load_hooks",
    "read_env_file",
    "resolve_ask",
]

# The payload field a matcher is compared with; other events ignore matchers (Claude Code).
MATCH_FIELD = dict.fromkeys(TOOL_EVENTS, "tool_name")
MATCH_FIELD.update(
    SessionStart="source", SessionEnd="reason", SubagentStop="agent_type", PreCompact="trigger"
)
BLOCKING = frozenset(EVENTS[:6])  # exit 2 / decision "block" mean something here only
PLAIN_CONTEXT = frozenset({"UserPromptSubmit", "SessionStart"})
CONTEXT_LIMIT = 10_000  # characters of one hook's context, as Claude Code caps hook output
SHELL_NOISE = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})
PIPE = subprocess.PIPE
POPEN: Any = dict(stdin=PIPE, stdout=PIPE, stderr=PIPE, encoding="utf-8", errors="replace")
POPEN["process_group"] = 0  # its own group: a timeout or an interrupt kills its children too
_RUNNING: set[subprocess.Popen[str]] = set()  # every hook command running now, in any thread
_RUNNING_LOCK = threading.Lock()


@dataclass
class Outcome:
    """The merged verdict of one event's hooks. What the loop does with it, per event:

    PreToolUse: `blocked` (permission "deny") -> do not run; the model gets `reason` as the
    result. "ask" -> `resolve_ask(reason, interactive)`; no -> a denial. Otherwise run with
    `updated_input` if set. `context` goes to the model with the result.
    PostToolUse / PostToolUseFailure: `blocked` -> the model gets `reason` as hook feedback after
    the result; `context` too.
    UserPromptSubmit: `blocked` -> the prompt is not stored or sent; show `reason`; exit 6.
    `context` is stored with the user's message as a marked context block.
    Stop / SubagentStop: `blocked` -> the agent continues with `reason` as a user message
    (the next Stop payload has `stop_hook_active: true`).
    SessionStart: `context` is stored as context; `env` is merged into later Bash calls.
    SessionEnd: nothing to decide.
    Every event: `stop` (continue: false, winning over any block) -> end the run, show
    `stop_reason`, exit 6; print `messages` to stderr; write `runs` to the trace.
    """

    blocked: bool = False
    reason: str = ""  # the block reason, or for "ask" the question's explanation
    permission: str | None = None  # PreToolUse: allow | deny | ask | None (no decision)
    updated_input: dict[str, Any] | None = None
    context: list[str] = field(default_factory=list)
    stop: bool = False
    stop_reason: str = ""
    messages: list[str] = field(default_factory=list)  # for the user's stderr, one line each
    env: dict[str, str] = field(default_factory=dict)  # SessionStart: CLAUDE_ENV_FILE exports
    runs: list[dict[str, Any]] = field(default_factory=list)  # one trace record per hook run


class Hooks:
    """The hooks of all settings files given, by event, in file order."""

    def __init__(
        self, hooks: dict[str, list[Hook]], project_dir: Path, warnings: list[str] | None = None
    ):
        self.hooks, self.project_dir = hooks, project_dir
        self.warnings = warnings or []  # load-time notes (events or types agi does not run)

    def __bool__(self) -> bool:
        return any(self.hooks.values())

    def has(self, event: str) -> bool:
        """Whether any hook is configured for the event (to skip building payloads)."""
        return bool(self.hooks.get(event))

    def matching(self, event: str, payload: dict[str, Any]) -> list[Hook]:
        """The hooks the payload selects, identical commands once, in settings order."""
        key = MATCH_FIELD.get(event)
        query = payload.get(key) if key else None
        query = query if isinstance(query, str) else None  # no name: matchers do not apply
        seen: set[str] = set()
        found = []
        for hook in self.hooks.get(event, []):
            if hook.command not in seen and hook.matcher.matches(query, payload.get("tool_input")):
                seen.add(hook.command)
                found.append(hook)
        return found

    def run(
        self, event: str, payload: dict[str, Any], *, env: dict[str, str] | None = None
    ) -> Outcome:
        """Run the event's matching hooks in parallel on the payload; `env` adds variables."""
        if event not in EVENTS:
            raise ValueError(f"unknown hook event {event!r}")
        hooks = self.matching(event, payload)
        if not hooks:
            return Outcome()
        payload = {**payload, "hook_event_name": event}
        project = str(self.project_dir)
        extra = {"CLAUDE_PROJECT_DIR": project, "AGI_PROJECT_DIR": project, **(env or {})}
        own_file = None
        if event == "SessionStart" and "CLAUDE_ENV_FILE" not in extra:
            fd, own_file = tempfile.mkstemp(prefix="agi-env-", suffix=".sh")
            os.close(fd)
            extra["CLAUDE_ENV_FILE"] = own_file
        try:
            runs = _run_all(hooks, event, payload, {**os.environ, **extra}, project)
            outcome = _merge(event, hooks, runs)
            if event == "SessionStart":
                try:
                    outcome.env = read_env_file(extra["CLAUDE_ENV_FILE"])
                except ValueError as e:
                    outcome.messages.append(str(e))
        finally:
            if own_file:
                Path(own_file).unlink(missing_ok=True)
        return outcome


def _run_all(
    hooks: list[Hook], event: str, payload: dict[str, Any], env: dict[str, str], cwd: str
) -> list[dict[str, Any]]:
    """Run the hooks in parallel threads; an interrupt kills every hook's process group."""
    stdin = json.dumps(payload)
    procs: list[subprocess.Popen[str]] = []
    lock = threading.Lock()

    def one(hook: Hook) -> dict[str, Any]:
        record: dict[str, Any] = dict(type="hook", event=event, command=hook.command)
        record.update(source=hook.source, input=payload, stdout="", stderr="", exit_code=None)
        record["timed_out"] = False
        start = time.monotonic()
        own = {**env, "CLAUDE_PLUGIN_ROOT": hook.plugin_root} if hook.plugin_root else env
        if hook.run_async:
            return record | _start_async(hook, stdin, own, cwd)
        try:
            proc = subprocess.Popen([hook.shell, "-c", hook.command], cwd=cwd, env=own, **POPEN)
        except OSError as e:
            return record | {"stderr": f"cannot start: {e}", "seconds": 0.0}
        with lock, _RUNNING_LOCK:
            procs.append(proc)
            _RUNNING.add(proc)
        try:
            out, err = proc.communicate(stdin, timeout=hook.timeout)
        except subprocess.TimeoutExpired:
            record["timed_out"] = True
            _kill(proc)
            try:
                out, err = proc.communicate(timeout=2)
            except subprocess.TimeoutExpired:  # a process that left the group holds the pipes
                out, err = "", ""
                for pipe in filter(None, (proc.stdout, proc.stderr)):
                    pipe.close()
                proc.wait()
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)
        seconds = round(time.monotonic() - start, 3)
        return record | dict(
            stdout=out or "", stderr=err or "", exit_code=proc.returncode, seconds=seconds
        )

    with ThreadPoolExecutor(max_workers=len(hooks)) as pool:
        futures = [pool.submit(one, hook) for hook in hooks]
        try:
            return [f.result() for f in futures]
        except BaseException:
            with lock:
                for proc in procs:
                    _kill(proc)
            raise


def _start_async(hook: Hook, stdin: str, env: dict[str, str], cwd: str) -> dict[str, Any]:
    """`async: true`: start the command, feed it the payload from a thread, and go on; it is
    killed after its timeout and its output is not used (CONTRACT section 12)."""
    try:
        proc = subprocess.Popen(
            [hook.shell, "-c", hook.command],
            cwd=cwd,
            env=env,
            stdin=PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            encoding="utf-8",
            errors="replace",
            process_group=0,
        )
    except OSError as e:
        return {"stderr": f"cannot start: {e}", "seconds": 0.0, "async": True}

    def feed() -> None:
        try:
            proc.communicate(stdin, timeout=hook.timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.wait()
        except (OSError, ValueError):
            pass

    threading.Thread(target=feed, daemon=True).start()
    return {"exit_code": 0, "seconds": 0.0, "async": True, "pid": proc.pid}


def end_running() -> None:
    """Kill every hook command still running, in any thread: the hooks of tool calls whose
    threads the run no longer waits for (it ended: a time limit, a signal)."""
    with _RUNNING_LOCK:
        procs = list(_RUNNING)
    for proc in procs:
        _kill(proc)


def _kill(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class _Tally:
    """What the runs said, before the rules combine it."""

    reasons: list[str] = field(default_factory=list)  # blocks and denials
    asks: list[str] = field(default_factory=list)
    decisions: set[str] = field(default_factory=set)  # PreToolUse permissions given
    updates: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _merge(event: str, hooks: list[Hook], runs: list[dict[str, Any]]) -> Outcome:
    """Combine the runs: deny > ask > allow, any block wins, contexts and messages add up."""
    out, tally = Outcome(runs=runs), _Tally()
    for hook, run in zip(hooks, runs, strict=True):
        name = f"`{_short(hook.command)}`"
        code, stderr, stdout = run["exit_code"], run["stderr"].strip(), run["stdout"].strip()
        if run.get("async") and code is not None:
            continue  # started in the background: its output is not used
        if run["timed_out"]:
            out.messages.append(f"{event} hook {name} timed out after {hook.timeout:g} s; ignored")
        elif code is None:
            out.messages.append(f"{event} hook {name} {_first_line(stderr)}; ignored")
        elif code == 2 and event in BLOCKING:
            tally.reasons.append(stderr or f"blocked by hook {name}")
            tally.decisions.add("deny")
        elif code == 2:  # Session* events cannot block: stderr is for the user only
            out.messages.append(f"{event} hook {name}: {_first_line(stderr)}")
        elif code != 0:
            tail = f": {_first_line(stderr)}" if stderr else ""
            out.messages.append(f"{event} hook {name} failed with exit code {code}{tail}; ignored")
        elif (data := _json_object(stdout)) is not None:
            run["suppress_output"] = data.get("suppressOutput") is True
            _apply(event, name, data, out, tally)
        elif event in PLAIN_CONTEXT and stdout:
            out.context.append(_cap(stdout))
    if event == "PreToolUse":
        out.permission = next((p for p in ("deny", "ask", "allow") if p in tally.decisions), None)
    updates = {json.dumps(u, sort_keys=True) for _, u in tally.updates}
    if tally.reasons:
        out.blocked, out.reason = True, "\n".join(tally.reasons)
    elif len(updates) > 1:
        # Hooks rewrote the input differently: running one rewrite would silently drop the
        # other's, so the call is refused (fail closed) and the user is told why.
        names = ", ".join(n for n, _ in tally.updates)
        out.blocked, out.permission = True, "deny"
        out.reason = f"hooks {names} returned different updatedInput; the call was not run"
        out.messages.append(out.reason)
    elif updates:
        out.updated_input = tally.updates[0][1]
    if not out.blocked and out.permission == "ask":
        out.reason = "\n".join(tally.asks)
    return out


def _apply(event: str, name: str, data: dict[str, Any], out: Outcome, tally: _Tally) -> None:
    """Take in one hook's JSON answer (exit 0)."""
    if data.get("continue") is False:
        out.stop = True
        out.stop_reason = "\n".join(filter(None, [out.stop_reason, _text(data.get("stopReason"))]))
    if _text(data.get("systemMessage")):
        out.messages.append(data["systemMessage"])
    specific = data.get("hookSpecificOutput")
    if not isinstance(specific, dict):
        specific = {}
    elif specific.get("hookEventName", event) != event:
        out.messages.append(f"{event} hook {name} answered for {specific['hookEventName']}")
        specific = {}
    reason, decision = _text(data.get("reason")), data.get("decision")
    if event == "PreToolUse":
        # the deprecated top-level decision, still honoured: approve = allow, block = deny
        legacy = {"approve": "allow", "block": "deny"}.get(_text(decision))
        permission = specific.get("permissionDecision") or legacy
        why = _text(specific.get("permissionDecisionReason")) or reason
        if permission in ("allow", "deny", "ask"):
            tally.decisions.add(permission)
            if permission == "deny":
                tally.reasons.append(why or f"denied by hook {name}")
            elif permission == "ask" and why:
                tally.asks.append(why)
        elif permission not in (None, "defer"):
            out.messages.append(f"{event} hook {name}: bad permissionDecision {permission!r}")
        new_input = specific.get("updatedInput")
        if isinstance(new_input, dict) and permission != "deny":
            tally.updates.append((name, new_input))
        elif new_input is not None and not isinstance(new_input, dict):
            out.messages.append(f"{event} hook {name}: updatedInput is not an object; ignored")
    elif decision == "block" and event in BLOCKING:
        tally.reasons.append(reason or f"blocked by hook {name}")
    if _text(specific.get("additionalContext")):
        out.context.append(_cap(specific["additionalContext"]))


def load_hooks(
    paths: list[Path],
    project_dir: Path | None = None,
    extra: list[tuple[str, Hook]] | None = None,
) -> Hooks:
    """Merge several settings files (in order), then `extra` hooks (from settings files and
    plugins, read by their loaders); a missing or malformed file is an error."""
    hooks, warnings = read_settings(paths)
    for event, hook in extra or []:
        hooks.setdefault(event, []).append(hook)
    return Hooks(hooks, Path(project_dir or os.getcwd()), warnings)


def _json_object(stdout: str) -> dict[str, Any] | None:
    """stdout as a JSON object, or None when it is plain text (Claude Code's rule)."""
    try:
        data = json.loads(stdout) if stdout.startswith("{") else None
    except ValueError:
        data = None
    return data if isinstance(data, dict) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _cap(text: str, limit: int = CONTEXT_LIMIT, more: str = "\n[hook output truncated]") -> str:
    return text if len(text) <= limit else text[:limit] + more


def _short(command: str) -> str:
    return _cap(" ".join(command.split()), 60, "...")


def _first_line(text: str) -> str:
    return _cap(text.strip().splitlines()[0], 200, "...") if text.strip() else "(no output)"


def base_payload(
    session_id: str,
    transcript_path: str | Path,
    cwd: str | Path,
    event: str,
    permission_mode: str = "default",
) -> dict[str, Any]:
    """The fields every event's stdin JSON starts with (Session* events carry no mode)."""
    payload: dict[str, Any] = dict(session_id=session_id, transcript_path=str(transcript_path))
    payload.update(cwd=str(cwd), hook_event_name=event)
    if event not in ("SessionStart", "SessionEnd"):
        payload["permission_mode"] = permission_mode
    return payload


def read_env_file(path: str | Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The variables a CLAUDE_ENV_FILE sets or changes, found by sourcing it with sh like Claude
    Code does (so `export PATH="$HOME/bin:$PATH"` expands); ValueError if it cannot be sourced."""
    base = dict(os.environ if base is None else base)
    try:
        if not Path(path).read_text(encoding="utf-8", errors="replace").strip():
            return {}
    except OSError:
        return {}
    # Python would add LC_CTYPE to a C-locale environment (PEP 538) unless told not to.
    dump = (
        "import json, os; e = dict(os.environ); e.pop('PYTHONCOERCECLOCALE'); print(json.dumps(e))"
    )
    script = 'set -a; . "$1" >&2 || exit 1; PYTHONCOERCECLOCALE=0 exec "$2" -c "$3"'
    try:
        done = subprocess.run(
            ["sh", "-c", script, "sh", str(path), sys.executable, dump],
            env=base,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=10,
        )
        after = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        after = None
    if not isinstance(after, dict):
        raise ValueError(f"CLAUDE_ENV_FILE {path} could not be sourced; its exports are ignored")
    return {k: v for k, v in after.items() if base.get(k) != v and k not in SHELL_NOISE}


def resolve_ask(prompt: str, interactive: bool) -> bool:
    """Put a hook's `ask` to the person at the terminal (y/N on /dev/tty); nobody there is a no."""
    if not interactive:
        return False
    try:
        with open("/dev/tty", "rb+", buffering=0) as tty:  # a terminal is not seekable: raw
            tty.write(f"{prompt} [y/N] ".encode())
            answer = tty.readline().decode(errors="replace")
    except OSError:
        return False
    return answer.strip().lower() in ("y", "yes")
