"""`--project` (config `project = true`): a Claude Code project's files in the working directory,
used as Claude Code would use them: `.claude/settings.json` and `.claude/settings.local.json`
(hooks, permissions, env) before the settings files given, `.claude/agents/`,
`.claude/skills/` and `.claude/commands/`, and `CLAUDE.md` and `AGENTS.md` as system-prompt
files after `--sys` (after the built-in prompt when no `--sys` is given). Off by default: agi
has no notion of a project otherwise. Nothing here runs anything."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agi.options.values import Options, Resolved

SETTINGS = (".claude/settings.json", ".claude/settings.local.json")
PROMPTS = ("CLAUDE.md", "AGENTS.md")


@dataclasses.dataclass(frozen=True)
class Project:
    """The project files found in `root`: what --list-extensions shows."""

    root: Path
    settings: tuple[Path, ...] = ()
    agents: Path | None = None
    skills: Path | None = None
    commands: Path | None = None
    prompts: tuple[Path, ...] = ()

    def files(self) -> list[Path]:
        found = [*self.settings, self.agents, self.skills, self.commands, *self.prompts]
        return [p for p in found if p is not None]


def apply_project(r: Resolved, anchor: str | None) -> Project | None:
    """`--project`: the Claude Code project of the working directory (a server's `anchor`),
    its files added to the resolved options; None when not asked for."""
    if not r.options.project:
        return None
    found = find_project(Path(anchor or os.getcwd()))
    r.options = with_project(r.options, found)
    return found


def find_project(root: Path) -> Project:
    """The project files present in `root` (a missing one is simply not used)."""

    def directory(name: str) -> Path | None:
        path = root / ".claude" / name
        return path if path.is_dir() else None

    return Project(
        root,
        tuple(root / n for n in SETTINGS if (root / n).is_file()),
        directory("agents"),
        directory("skills"),
        directory("commands"),
        tuple(root / n for n in PROMPTS if (root / n).is_file()),
    )


def with_project(options: Options, project: Project) -> Options:
    """The options with the project's files added: its settings files before those given (a
    flag's file is read after them), its agents and skills directories after those given,
    its CLAUDE.md and AGENTS.md after `sys` (after `default` when no `sys` is given)."""
    changed: dict[str, Any] = {}
    if project.settings:
        changed["settings"] = [*map(str, project.settings), *(options.settings or [])]
    for name in ("agents", "skills"):
        found = getattr(project, name)
        if found is not None:
            changed[name] = [*(getattr(options, name) or []), str(found)]
    if project.prompts:
        changed["sys"] = [*(options.sys or ["default"]), *map(str, project.prompts)]
    return dataclasses.replace(options, **changed)
