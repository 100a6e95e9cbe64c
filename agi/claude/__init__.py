"""Claude Code compatibility: hooks and their lifecycle, settings files, plugins, slash
commands, permission rules (with the Bash parser), skills, subagents, the transcript."""
