"""Claude Code `settings.json` files (`--settings FILE`): their `hooks`, `permissions` and `env`.

Other keys of Claude Code's are ignored; a malformed file, or a key of the wrong type, is a
usage error naming the file and the key (docs: permissions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.claude.hooks.settings import parse_hooks, read_json
from agi.errors import UsageError
from agi.policy.permissions import KINDS, MODES, parse_rules

if TYPE_CHECKING:
    from agi.claude.hooks.run import Hook
    from agi.policy.permissions import Rule

KIND = "settings file"


@dataclass
class ClaudeSettings:
    """What the settings files given say, merged in order (later files add rules and win env)."""

    hooks: list[tuple[str, Hook]] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    mode: str | None = None  # permissions.defaultMode
    warnings: list[str] = field(default_factory=list)


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where} must be a list of strings")
    return value


def read_claude_settings(paths: list[Path]) -> ClaudeSettings:
    found = ClaudeSettings()
    for path in paths:
        path = path.expanduser()
        data = read_json(path, KIND)
        if not isinstance(data, dict):
            raise UsageError(f"{KIND} {path}: the top level must be a JSON object")
        if "hooks" in data:
            found.hooks += parse_hooks(data, str(path), found.warnings, kind=KIND)
        permissions = data.get("permissions", {})
        if not isinstance(permissions, dict):
            raise UsageError(f"{KIND} {path}: permissions must be an object")
        base = str(path.absolute().parent)
        for kind in KINDS:
            texts = _strings(permissions.get(kind, []), f"{KIND} {path}: permissions.{kind}")
            found.rules += parse_rules(texts, kind, str(path), base)
        mode = permissions.get("defaultMode")
        if mode is not None and not isinstance(mode, str):
            raise UsageError(f"{KIND} {path}: permissions.defaultMode must be a string")
        if mode is not None and mode not in MODES:
            found.warnings.append(
                f"{KIND} {path}: permissions.defaultMode {mode!r} is not one agi has "
                f"({', '.join(MODES)}); ignored"
            )
        elif mode is not None:
            found.mode = mode
        env = data.get("env", {})
        if not isinstance(env, dict) or not all(
            isinstance(v, str | int | float) and not isinstance(v, bool) for v in env.values()
        ):
            raise UsageError(f"{KIND} {path}: env must be an object of strings")
        found.env.update({str(k): str(v) for k, v in env.items()})
    return found
