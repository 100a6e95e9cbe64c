"""The `SlashCommand` tool: the model runs a slash command (docs: claude-code).

Offered when some command may be run by the model: one whose front matter does not set
`disable-model-invocation: true`. The result is the command's prompt, expanded as a typed
`/NAME args` line would be (arguments, shell steps under the run's permission rules), for the
model to carry out. The command's `allowed-tools` and `model` are not applied: the model chose
the command, so its calls stay under the run's own rules, and the run's model does the work.
"""

from __future__ import annotations

from typing import Any

from agi.claude.commands import Command, Where, expand, first_word, lookup, prepare
from agi.errors import ToolError, UsageError
from agi.policy.permissions import Permissions


class SlashCommandTool:
    name = "SlashCommand"

    def __init__(self, commands: list[Command], settings: Any):
        self.commands = [c for c in commands if c.model_may_run()]
        self.settings = settings
        listed = "\n".join(
            f"- /{c.name}" + (f": {c.summary()}" if c.summary() else "") for c in self.commands
        )
        self.description = (
            "Run a slash command: its instructions come back as the result, for you to carry "
            f"out. Give the command line, e.g. /NAME ARGUMENTS. Available commands:\n{listed}"
        )
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "The slash command and its arguments, e.g. /review-pr 123",
                }
            },
            "required": ["command"],
        }

    def run(self, input: dict[str, Any], ctx: Any) -> str:
        line = input.get("command")
        if not isinstance(line, str) or not line.strip():
            raise ToolError("'command' is required: a slash command such as /NAME ARGUMENTS")
        line = line.strip()
        line = line if line.startswith("/") else "/" + line
        name = first_word(line)
        if name is None:
            raise ToolError(f"{line.split()[0]!r} is not a command name")
        try:
            command = lookup(name, self.commands)
            permissions = self.settings.permissions or Permissions()
            env = {**self.settings.env, **(getattr(ctx, "env", None) or {})}
            where = Where(ctx.cwd, env, None, getattr(ctx, "sandbox", None))
            text = expand(prepare(line, command, ctx.cwd), permissions, where)
        except UsageError as e:
            raise ToolError(str(e).removeprefix("agi: ")) from e
        return f"Command /{command.name} — carry out these instructions:\n\n{text}"
