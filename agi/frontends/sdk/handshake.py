"""What the SDK is told of the run (docs: claude-agent-sdk): the answer to `initialize` and the
`system/init` message of each turn, with a Claude Code version the SDKs accept beside agi's own."""

from __future__ import annotations

import os
import uuid
from typing import Any

from agi import __version__
from agi.options.settings import Settings

CLAUDE_CODE_VERSION = "2.1.0"  # a version the SDKs accept (2.0.0 or later)


def initialized(settings: Settings, mode: str) -> dict[str, Any]:
    """The `control_response` to `initialize`: commands, models, the mode, pid, versions."""
    return {
        "commands": [
            {
                "name": c.name,
                "description": getattr(c, "description", "") or "",
                "argumentHint": "",
            }
            for c in settings.commands
        ],  # fmt: skip
        "models": [
            {
                "value": settings.model.label,
                "displayName": settings.model.label,
                "description": "agi's model",
            }
        ],  # fmt: skip
        "current_permission_mode": mode,
        "pid": os.getpid(),
        "agi_version": __version__,
        "claude_code_version": CLAUDE_CODE_VERSION,
        "output_style": "default",
        "available_output_styles": ["default"],
        "account": {},
    }


def init_message(
    settings: Settings, mode: str, session_id: str, tools: list[str], servers: list[str]
) -> dict[str, Any]:
    """`system/init`, sent at the start of each turn."""
    return {
        "type": "system",
        "subtype": "init",
        "session_id": session_id,
        "uuid": str(uuid.uuid4()),
        "cwd": os.getcwd(),
        "tools": tools,
        "mcp_servers": [{"name": n, "status": "connected"} for n in servers],
        "model": settings.model.label,
        "permissionMode": mode,
        "slash_commands": [c.name for c in settings.commands],
        "agents": [a.name for a in settings.agents],
        "skills": [s.name for s in settings.skills],
        "plugins": [{"name": p.name, "path": str(p.root)} for p in settings.plugins],
        "apiKeySource": "none",
        "output_style": "default",
        "claude_code_version": CLAUDE_CODE_VERSION,
        "agi_version": __version__,
    }
