"""Hooks settings files (Claude Code's format, plus agi's argument matchers): read, validated.

`{"hooks": {EVENT: [{"matcher": M, "hooks": [{"type": "command", "command": CMD, "timeout": S,
"shell": "bash", "async": false}]}]}}`
where M is empty or `*` (everything), exact names `Edit|Write`, a regex, or agi's object
`{"tool": M, "input": {ARG: REGEX}}` for tool events. agi.claude.hooks runs what this reads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agi.errors import ConfigError

TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
EVENTS = (
    *TOOL_EVENTS,
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
)
DEFAULT_TIMEOUT = 60.0
SIMPLE = re.compile(r"[A-Za-z0-9_| -]+")  # Claude Code compares such matchers as exact names


class HookSettingsError(ConfigError):
    """A hooks settings file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Matcher:
    """Which invocations a group applies to: a Claude Code matcher plus agi's argument regexes."""

    names: frozenset[str] | None = None  # exact names (`Bash`, `Edit|Write`)
    pattern: re.Pattern[str] | None = None  # anything else: searched, unanchored, like RegExp.test
    inputs: tuple[tuple[str, re.Pattern[str]], ...] = ()  # agi: argument name -> regex searched

    def matches(self, query: str | None, tool_input: Any) -> bool:
        """True when the name (if the event has one) and every argument regex match."""
        if query is not None and self.names is not None and query not in self.names:
            return False
        if query is not None and self.pattern is not None and not self.pattern.search(query):
            return False
        args = tool_input if isinstance(tool_input, dict) else {}
        return all(k in args and regex.search(_as_text(args[k])) for k, regex in self.inputs)


@dataclass(frozen=True)
class Hook:
    """One command of a settings file, with the matcher of its group."""

    command: str
    timeout: float
    matcher: Matcher
    source: str
    shell: str = "sh"  # the entry's `shell` (e.g. "bash"): runs the command with SHELL -c
    run_async: bool = False  # `async: true`: started and not waited for; its output is unused
    plugin_root: str | None = None  # a plugin's hook: CLAUDE_PLUGIN_ROOT in its environment


def read_settings(paths: list[Path]) -> tuple[dict[str, list[Hook]], list[str]]:
    """The hooks of several settings files by event, in file order, and notes on what is
    skipped; a missing or malformed file is a HookSettingsError naming it."""
    hooks: dict[str, list[Hook]] = {}
    warnings: list[str] = []
    for path in paths:
        for event, hook in _read_settings(Path(path), warnings):
            hooks.setdefault(event, []).append(hook)
    return hooks, warnings


def read_json(path: Path, kind: str = "hooks file") -> Any:
    """A JSON file's data; unreadable or malformed files are errors naming the file."""

    def bad(problem: str) -> HookSettingsError:
        return HookSettingsError(f"{kind} {path}: {problem}")

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise bad(e.strerror or str(e)) from e
    except UnicodeDecodeError as e:
        raise bad("not UTF-8 text") from e
    except json.JSONDecodeError as e:
        raise bad(f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from e


def _read_settings(path: Path, warnings: list[str]) -> list[tuple[str, Hook]]:
    """Validate one settings file and return its (event, hook) pairs."""
    return parse_hooks(read_json(path), str(path), warnings)


def parse_hooks(
    data: Any,
    path: str,
    warnings: list[str],
    plugin_root: str | None = None,
    kind: str = "hooks file",
) -> list[tuple[str, Hook]]:
    """The (event, hook) pairs of settings data (`{"hooks": {...}}`) read from `path`; a
    plugin's hooks have `${CLAUDE_PLUGIN_ROOT}` replaced by `plugin_root` in their commands."""

    def bad(problem: str) -> HookSettingsError:
        return HookSettingsError(f"{kind} {path}: {problem}")

    if not isinstance(data, dict):
        raise bad("the top level must be a JSON object")
    events = data.get("hooks", {})
    if not isinstance(events, dict):
        raise bad('"hooks" must be an object mapping event names to lists')
    found = []
    for event, groups in events.items():
        if not isinstance(groups, list):
            raise bad(f"hooks.{event} must be a list")
        if event not in EVENTS:
            warnings.append(f"hooks file {path}: agi has no {event!r} event; its hooks never run")
            continue
        for i, group in enumerate(groups):
            at = f"hooks.{event}[{i}]"
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                raise bad(f'{at} must be an object with a "hooks" list')
            matcher = _matcher(group.get("matcher"), event, f"{at}.matcher", bad)
            for j, entry in enumerate(group["hooks"]):
                if hook := _command(entry, matcher, f"{at}.hooks[{j}]", path, warnings):
                    found.append((event, _in_plugin(hook, plugin_root)))
    return found


def _in_plugin(hook: Hook, root: str | None) -> Hook:
    if root is None:
        return hook
    command = hook.command.replace("${CLAUDE_PLUGIN_ROOT}", root)
    return replace(hook, command=command, plugin_root=root)


def _command(entry: Any, matcher: Matcher, where: str, path: str, notes: list[str]) -> Hook | None:
    """One entry of a group's "hooks" list; types other than "command" are skipped with a note."""
    problem = f"hooks file {path}: {where}"
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
        raise HookSettingsError(f'{problem} must be an object with "type": "command"')
    if entry["type"] != "command":
        notes.append(f"{problem}: agi runs only command hooks; skipped")
        return None
    command, timeout = entry.get("command"), entry.get("timeout", DEFAULT_TIMEOUT)
    if not isinstance(command, str) or not command.strip():
        raise HookSettingsError(f"{problem}.command must be a non-empty string")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise HookSettingsError(f"{problem}.timeout must be a positive number of seconds")
    shell, run_async = entry.get("shell", "sh"), entry.get("async", False)
    if not isinstance(shell, str) or not shell.strip():
        raise HookSettingsError(f'{problem}.shell must name a shell, e.g. "bash"')
    if not isinstance(run_async, bool):
        raise HookSettingsError(f"{problem}.async must be true or false")
    return Hook(command, float(timeout), matcher, path, shell.strip(), run_async)


def _matcher(spec: Any, event: str, at: str, bad: Any) -> Matcher:
    """Parse a string matcher, or agi's object matcher {"tool": M, "input": {ARG: REGEX}}."""
    if not isinstance(spec, dict):
        return _name_matcher(spec, at, bad)
    if event not in TOOL_EVENTS:
        raise bad(f"{at}: object matchers apply to tool events only")
    if set(spec) - {"tool", "input"}:
        raise bad(f'{at}: an object matcher has only "tool" and "input"')
    inputs = spec.get("input", {})
    if not isinstance(inputs, dict) or not all(isinstance(v, str) for v in inputs.values()):
        raise bad(f"{at}.input must map argument names to regex strings")
    base = _name_matcher(spec.get("tool"), f"{at}.tool", bad)
    regexes = tuple((k, _compile(v, f"{at}.input.{k}", bad)) for k, v in inputs.items())
    return Matcher(base.names, base.pattern, regexes)


def _name_matcher(spec: Any, at: str, bad: Any) -> Matcher:
    """Empty or `*`: everything; letters, digits, `_`, `-` and `|`: exact names; else a regex."""
    if spec is None or (isinstance(spec, str) and spec.strip() in ("", "*")):
        return Matcher()
    if not isinstance(spec, str):
        raise bad(f"{at} must be a string or an object")
    if SIMPLE.fullmatch(spec):
        return Matcher(names=frozenset(p.strip() for p in spec.split("|")))
    return Matcher(pattern=_compile(spec, at, bad))


def _compile(pattern: str, at: str, bad: Any) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise bad(f"{at}: invalid regex {pattern!r}: {e}") from e


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
