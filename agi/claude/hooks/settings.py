"""Hooks settings files (Claude Code's format, plus agi's argument matchers): read, validated.

`{"hooks": {EVENT: [{"matcher": M, "hooks": [{"type": "command", "command": CMD, "timeout": S,
"shell": "bash", "async": false, "asyncRewake": false, "if": RULE}]}]}}`, or `{"type": "prompt",
"prompt": TEXT, "model": M}`
where M is empty or `*` (everything), exact names `Edit|Write`, a regex, or agi's object
`{"tool": M, "input": {ARG: REGEX}}` for tool events. agi.claude.hooks.run runs what this reads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agi.errors import ConfigError, UsageError
from agi.fileio import loads, read_text
from agi.policy.bash.quote import by_reference
from agi.policy.permissions import parse_rule

TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest")
EVENTS = (
    *TOOL_EVENTS,
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    "Notification",
)
# the events a "type": "prompt" hook can decide (Claude Code's list; the others take commands)
PROMPT_EVENTS = frozenset({*TOOL_EVENTS, "UserPromptSubmit", "Stop", "SubagentStop"})
DEFAULT_TIMEOUT = 60.0
PROMPT_TIMEOUT = 30.0  # Claude Code's default for prompt hooks
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

    command: str  # for a prompt hook, its prompt
    timeout: float
    matcher: Matcher
    source: str
    shell: str = "sh"  # the entry's `shell` (e.g. "bash"): runs the command with SHELL -c
    run_async: bool = False  # `async: true`: started and not waited for; its output is unused
    plugin_root: str | None = None  # a plugin's hook: CLAUDE_PLUGIN_ROOT in its environment
    kind: str = "command"  # or "prompt": the model answers {"ok", "reason"}
    model: str | None = None  # a prompt hook's `model` (else the run's)
    condition: Any = None  # `if`: a permission rule (agi.policy.permissions.Rule) calls match
    rewake: bool = False  # `asyncRewake`: in the background; exit 2 wakes the agent
    rewake_message: str = ""  # `rewakeMessage`: put before the hook's stderr
    rewake_summary: str = ""  # `rewakeSummary`: shown to the user when it wakes the agent

    @property
    def key(self) -> str:
        """Identical hooks of one event run once: the same command (or prompt and model)."""
        return self.command if self.kind == "command" else f"prompt\0{self.model}\0{self.command}"


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
        return loads(read_text(path))  # bounded, and too deep is a line number (docs: security)
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
                where = f"{at}.hooks[{j}]"
                if hook := _entry(entry, event, matcher, where, path, warnings):
                    found.append((event, _in_plugin(hook, plugin_root)))
    return found


def _in_plugin(hook: Hook, root: str | None) -> Hook:
    if root is None:
        return hook
    # a reference the shell expands from the hook's environment, never the path as text
    command = by_reference(hook.command, arguments=False)
    return replace(hook, command=command, plugin_root=root)


def _entry(
    entry: Any, event: str, matcher: Matcher, where: str, path: str, notes: list[str]
) -> Hook | None:
    """One entry of a group's "hooks" list: a command or a prompt hook. Types agi does not run
    (`http`, `agent`), and prompt hooks of events that take none, are skipped with a note."""
    problem = f"hooks file {path}: {where}"
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
        raise HookSettingsError(f'{problem} must be an object with "type": "command"')
    kind = entry["type"]
    if kind not in ("command", "prompt") or (kind == "prompt" and event not in PROMPT_EVENTS):
        what = f"{kind} hooks" if kind != "prompt" else f"prompt hooks for {event}"
        notes.append(f"{problem}: agi runs no {what} (as Claude Code); skipped")
        return None
    field_name = "command" if kind == "command" else "prompt"
    text = entry.get(field_name)
    if not isinstance(text, str) or not text.strip():
        raise HookSettingsError(f"{problem}.{field_name} must be a non-empty string")
    timeout = entry.get("timeout", DEFAULT_TIMEOUT if kind == "command" else PROMPT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise HookSettingsError(f"{problem}.timeout must be a positive number of seconds")
    shell = entry.get("shell", "sh")
    if not isinstance(shell, str) or not shell.strip():
        raise HookSettingsError(f'{problem}.shell must name a shell, e.g. "bash"')
    flags = {k: entry.get(k, False) for k in ("async", "asyncRewake")}
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise HookSettingsError(f"{problem}.{name} must be true or false")
    texts = {k: entry.get(k, "") for k in ("model", "rewakeMessage", "rewakeSummary")}
    for name, value in texts.items():
        if not isinstance(value, str):
            raise HookSettingsError(f"{problem}.{name} must be a string")
    condition = _condition(entry.get("if"), event, problem, notes, str(Path(path).parent))
    if condition is False:
        return None
    return Hook(
        text,
        float(timeout),
        matcher,
        path,
        shell.strip(),
        flags["async"] or flags["asyncRewake"],
        kind=kind,
        model=texts["model"] or None,
        condition=condition,
        rewake=flags["asyncRewake"] and kind == "command",
        rewake_message=texts["rewakeMessage"],
        rewake_summary=texts["rewakeSummary"],
    )


def _condition(value: Any, event: str, problem: str, notes: list[str], base: str) -> Any:
    """`if`: one permission rule (`Bash(git commit:*)`), judged by the permission rules' own
    matcher; on events without a tool call the entry never runs (Claude Code), so it is
    skipped (False). A malformed rule is an error naming the file."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise HookSettingsError(f'{problem}.if must be a permission rule such as "Bash(git *)"')
    if event not in TOOL_EVENTS:
        notes.append(f"{problem}: `if` applies to tool events only; the hook never runs")
        return False
    try:  # as a deny rule: any part of a compound Bash line may match
        rule = parse_rule(value, "deny", f"{problem}.if", base)  # its tool: checked per run
    except UsageError as e:
        raise HookSettingsError(str(e)) from e
    return rule


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
