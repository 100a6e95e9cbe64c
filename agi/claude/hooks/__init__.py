"""Claude Code's hooks: settings, runs, merged verdicts, where they fire."""
