"""What a run is extended with, for people: `--list-extensions` (every plugin, command, skill,
agent, hook and MCP source, and the file it came from), and a `/command` prompt applied to the
settings of the run (its text, its `allowed-tools` rules, its `model`)."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from agi.claude.commands import Where, expand, first_word, listing, lookup, prepare
from agi.options.config import PROVIDERS, split_model
from agi.policy.permissions import Permissions
from agi.providers.anthropic import claude_model

if TYPE_CHECKING:
    from agi.claude.commands import Expansion
    from agi.options.config import ModelConfig
    from agi.options.settings import Settings

BUILTINS = ("compact", "help", "session", "sys")  # the REPL's own commands


def command_settings(
    prompt: str, settings: Settings, builtins: tuple[str, ...] = ()
) -> tuple[Expansion, Settings] | None:
    """The command a `/NAME args` prompt names, and the settings its turn runs with (its
    `allowed-tools` rules added, its `model`); None for any other prompt. Nothing runs here.
    An unknown `/WORD` is a usage error listing the known commands."""
    name = first_word(prompt)
    if name is None:
        return None
    command = lookup(name, settings.commands, builtins)
    expansion = prepare(prompt, command, os.getcwd())
    changes: dict[str, Any] = {}
    if expansion.rules:
        permissions = settings.permissions or Permissions()
        changes["permissions"] = permissions.with_rules(expansion.rules)
        named = [*settings.tools.named, *(r.tool for r in expansion.rules)]  # opt-in ones offered
        changes["tools"] = dataclasses.replace(settings.tools, named=named)
    if expansion.model:
        changes["model"] = command_model(settings.model, expansion.model)
    return expansion, dataclasses.replace(settings, **changes) if changes else settings


def command_text(expansion: Expansion, settings: Settings, ctx: Any, trace: Any) -> str:
    """The command's prompt, its shell steps run now, inside the run: judged by the turn's
    permission rules like Bash calls, recorded in the session's trace."""
    env = {**settings.env, **ctx.env}
    where = Where(ctx.cwd, env, ctx.warn, settings.sandbox, trace)
    permissions = (settings.permissions or Permissions()).with_rules(list(ctx.learned))
    return expand(expansion, permissions, where)  # and a person's "always" answers (docs: acp)


def command_model(current: ModelConfig, spec: str) -> ModelConfig:
    """A command's `model`: `provider:model` as given; a Claude name or alias (`haiku`) when
    the run speaks Anthropic; otherwise the run's own model (the command was written for
    Claude Code, and its model may not exist elsewhere)."""
    provider, model = split_model(spec, {})
    if provider is not None and provider in PROVIDERS:
        return dataclasses.replace(current, provider=provider, model=model)
    if current.provider != "anthropic":
        return current
    if spec.startswith("claude-"):
        return dataclasses.replace(current, model=spec)
    alias = claude_model(spec)
    return dataclasses.replace(current, model=alias) if alias else current


def inventory(settings: Settings) -> str:
    """The listing `agi --list-extensions` prints."""
    out: list[str] = []

    def section(title: str, rows: list[tuple[str, str, str]]) -> None:
        out.append(f"{title}:" if rows else f"{title}: none")
        for name, summary, where in rows:
            out.append(f"  {name}" + (f"  {summary}" if summary else ""))
            if where:
                out.append(f"      {where}")

    project = settings.project
    if project is not None:  # --project: the files it loaded, by their place in the project
        rows = [(str(p.relative_to(project.root)), "", "") for p in project.files()]
        section(f"project {project.root}", rows)
    section("plugins", [(p.label, "", str(p.root)) for p in settings.plugins])
    section("commands", listing(settings.commands))
    section("skills", [(s.name, _short(s.description), str(s.file)) for s in settings.skills])
    agents = [(a.name, _short(a.description), str(a.path or "")) for a in settings.agents]
    section("agents", agents)
    hooks = settings.hooks.hooks if settings.hooks is not None else {}
    rows = [(_hook_row(event, h), "", h.source) for event, hs in hooks.items() for h in hs]
    section("hooks", rows)
    section("MCP configs", [(str(m), "", "") for m in settings.tools.mcp])
    permissions = settings.permissions
    if permissions is not None:
        rules = [(f"{r.kind} {r.text}", "", r.source) for r in permissions.rules]
        section(f"permission rules (mode {permissions.mode})", rules)
    return "\n".join(line.rstrip() for line in out) + "\n"


def _hook_row(event: str, hook: Any) -> str:
    """`EVENT COMMAND`, or `EVENT prompt: TEXT`, with its `if` and how it runs."""
    command = hook.command
    if hook.plugin_root:  # shown with its plugin's directory, as Claude Code's listing does
        command = command.replace('"${CLAUDE_PLUGIN_ROOT}"', hook.plugin_root)
    text = command if hook.kind == "command" else f"prompt: {_short(command)}"
    more = [f"if {hook.condition.text}"] if hook.condition is not None else []
    more += ["asyncRewake"] if hook.rewake else ["async"] if hook.run_async else []
    return f"{event} {text}" + (f"  [{', '.join(more)}]" if more else "")


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
