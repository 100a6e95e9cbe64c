"""The Claude Agent SDKs' CLI protocol (docs: claude-agent-sdk): agi as `cli_path`."""
