"""The Claude-format transcript of an SDK session where the SDKs' `list_sessions()` and
`get_session_messages()` read it: `$CLAUDE_CONFIG_DIR/projects/<cwd>/<session id>.jsonl`
(~/.claude without the variable), in the line format agi writes for hooks
(agi.claude.transcript), appended after each turn."""

from __future__ import annotations

import os
import re
from pathlib import Path

from agi.claude.transcript import Transcript
from agi.sessions.files import make_private_dir
from agi.sessions.session import Session

UNSAFE = re.compile(r"[^a-zA-Z0-9]")
LONGEST = 200  # characters of a project's directory name before its hash (Claude Code's rule)


def project_dir(cwd: str) -> Path:
    home = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
    name = UNSAFE.sub("-", cwd)
    if len(name) > LONGEST:
        name = f"{name[:LONGEST]}-{short_hash(cwd)}"
    return home / "projects" / name


def short_hash(text: str) -> str:
    """Claude Code's 32-bit string hash in base 36, for directory names past LONGEST."""
    h = 0
    for ch in text:
        h = ((h << 5) - h + ord(ch)) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    h = abs(h)
    digits, out = "0123456789abcdefghijklmnopqrstuvwxyz", ""
    while h:
        h, r = divmod(h, 36)
        out = digits[r] + out
    return out or "0"


def claude_transcript(session: Session, cwd: str) -> Transcript:
    """agi's hook transcript, written to the SDK's place for the session instead."""
    folder = project_dir(cwd)
    make_private_dir(folder)
    return Transcript(session, cwd, folder / f"{session.path.name}.jsonl")
