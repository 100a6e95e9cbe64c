"""Claude Code-compatible hooks: run the matching hooks of an event, merge their verdicts.

Settings (read by agi.claude.hooks.settings): `{"hooks": {EVENT: [{"matcher": M, "hooks": [{"type":
"command", "command": CMD, "timeout": SECONDS, "if": RULE}]}]}}`. Each command runs with `sh -c`
in the project directory, the event JSON on stdin; all matching hooks of an event run in
parallel and identical commands run once. An entry's `if` (a permission rule) limits it to the
tool calls the rule matches, judged by agi.policy.permissions' own matcher. A `"type": "prompt"`
entry asks a model instead (agi.claude.hooks.runs.run_prompt).
Exit 0: stdout is JSON to honour, or plain text that becomes context for UserPromptSubmit and
SessionStart (ignored elsewhere). Exit 2: a block, stderr the reason. Other exits, timeouts and
commands that cannot start are warnings; the run goes on. `Outcome` holds the merged verdict;
what it means at each event (what the loop must do) is on the class.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from agi.claude.hooks.merge import Outcome, merge
from agi.claude.hooks.runs import Rewakes, Running, run_all
from agi.claude.hooks.settings import (
    EVENTS,
    TOOL_EVENTS,
    Hook,
    HookSettingsError,
    Matcher,
    read_settings,
)
from agi.errors import UsageError
from agi.fileio import read_limited
from agi.policy.asking import resolve_ask
from agi.policy.environment import child_env
from agi.policy.permissions import Permissions, decide

__all__ = [
    "EVENTS",
    "Hook",
    "HookSettingsError",
    "Hooks",
    "Matcher",
    "Outcome",
    "Rewakes",
    "base_payload",
    "Running",
    "load_hooks",
    "read_env_file",
    "resolve_ask",
]

# The payload field a matcher is compared with; other events ignore matchers (Claude Code).
MATCH_FIELD = dict.fromkeys(TOOL_EVENTS, "tool_name")
MATCH_FIELD.update(
    SessionStart="source",
    SessionEnd="reason",
    SubagentStop="agent_type",
    PreCompact="trigger",
    Notification="notification_type",
)
SHELL_NOISE = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})


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
            if hook.key in seen or not hook.matcher.matches(query, payload.get("tool_input")):
                continue
            if hook.condition is not None and not _condition_holds(hook.condition, payload):
                continue
            seen.add(hook.key)
            found.append(hook)
        return found

    def run(
        self,
        event: str,
        payload: dict[str, Any],
        *,
        env: dict[str, str] | None = None,
        judge: Any = None,
        rewakes: Rewakes | None = None,
        running: Running | None = None,
    ) -> Outcome:
        """Run the event's matching hooks in parallel on the payload; `env` adds variables.
        `judge(prompt, model, timeout) -> {"ok", "reason"}` answers prompt hooks; `rewakes`
        collects what `asyncRewake` hooks report (without it they run as `async` ones);
        `running` holds the processes, for whoever must end them early."""
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
            environ = child_env(extra)
            runs = run_all(hooks, event, payload, environ, project, judge, rewakes, running)
            outcome = merge(event, hooks, runs)
            if event == "SessionStart":
                try:
                    outcome.env = read_env_file(extra["CLAUDE_ENV_FILE"])
                except ValueError as e:
                    outcome.messages.append(str(e))
        finally:
            if own_file:
                Path(own_file).unlink(missing_ok=True)
        return outcome


def _condition_holds(rule: Any, payload: dict[str, Any]) -> bool:
    """An entry's `if` against the call: the permission rules' matcher, as a deny rule would
    match (for a Bash line: any of its parts); a call it cannot judge runs the hook."""
    name, tool_input = payload.get("tool_name"), payload.get("tool_input")
    if not isinstance(name, str) or not isinstance(tool_input, dict):
        return False
    cwd = payload.get("cwd")
    if not isinstance(cwd, str):
        cwd = os.getcwd()
    try:
        return decide(Permissions([rule]), name, tool_input, cwd).verdict != "none"
    except (ValueError, TypeError, OSError):
        return True


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
    base = child_env() if base is None else dict(base)
    try:  # bounded, regular files only (docs: security)
        if not read_limited(path).decode("utf-8", "replace").strip():
            return {}
    except OSError:
        return {}
    except UsageError as e:
        raise ValueError(f"CLAUDE_ENV_FILE {e}: not sourced") from None
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
