"""`agi --rewind`: the turns of a session, and going back to before one (CONTRACT section 18).

stdout: the listing, or one line per file (`restored PATH`, `removed PATH`; `would ...` with
--dry-run) and one for the conversation. stderr: `agi: PATH was changed by someone else since
turn N` for each such file; a file that could not be restored is one `agi:` line, exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from agi.errors import AgiError, UsageError


def add_rewind_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rewind",
        nargs="?",
        const="",
        metavar="N",
        help="list the turns of the session (-s DIR or -c); with N: restore its files and "
        "conversation to before turn N",
    )
    p.add_argument("--rewind-files", metavar="N", help="restore only the files to before turn N")
    p.add_argument(
        "--rewind-conversation", metavar="N", help="rewind only the conversation to before turn N"
    )
    p.add_argument("--dry-run", action="store_true", help="with --rewind*: print what would change")
    p.add_argument(
        "--no-checkpoints",
        action="store_true",
        default=None,
        help="take no checkpoints of the working directory (config: checkpoints = false)",
    )


def rewinding(args: argparse.Namespace) -> bool:
    """Whether the command line asks for --rewind, --rewind-files or --rewind-conversation."""
    return any(v is not None for v in (args.rewind, args.rewind_files, args.rewind_conversation))


def _which(args: argparse.Namespace) -> tuple[str, int | None]:
    given = [
        (kind, value)
        for kind, value in (
            ("both", args.rewind),
            ("files", args.rewind_files),
            ("conversation", args.rewind_conversation),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise UsageError("give one of --rewind, --rewind-files and --rewind-conversation")
    kind, value = given[0]
    if value == "":
        return "list", None
    if value == "last":
        return kind, 0
    if not value.isdigit() or int(value) < 1:
        raise UsageError(f"--rewind takes a turn number (1, 2, ... or last), not {value!r}")
    return kind, int(value)


def _session_path(args: argparse.Namespace) -> Path:
    from agi.config import agi_home
    from agi.sessions.session import SessionIndex

    if args.prompt:
        raise UsageError("--rewind takes no prompt (a turn number goes right after it)")
    if args.cont and args.session:
        raise UsageError("--continue cannot be used with --session")
    path = Path(args.session) if args.session else None
    if args.cont:
        path = SessionIndex(agi_home()).latest()
        if path is None:
            raise UsageError("no session to continue: none has been used yet")
    if path is None:
        raise UsageError("--rewind works on a session: give -s DIR or -c")
    if not os.path.lexists(path / "meta.json"):
        raise UsageError(f"{path} is not an agi session (no meta.json)")
    return path


def rewind_command(args: argparse.Namespace) -> int:
    from agi.config import agi_home
    from agi.sessions.checkpoints import repair_records
    from agi.sessions.rewind import read_turns
    from agi.sessions.session import Session

    kind, number = _which(args)
    path = _session_path(args)
    home = agi_home()
    if kind == "list":
        sys.stdout.write(listing(path, home, getattr(args, "output", None) == "json"))
        sys.stdout.flush()
        return 0
    session = Session.open(path)
    timeout = getattr(args, "timeout", None)
    session.lock(time.monotonic() + float(timeout) if timeout else None, timeout)
    try:
        for warning in session.warnings:
            sys.stderr.write(f"agi: {warning}\n")
        repair_records(path)
        turns, _ = read_turns(path)
        number = number or (turns[-1].number if turns else 1)  # `last`
        turn = next((t for t in turns if t.number == number), None)
        if turn is None:
            have = f"turns 1-{turns[-1].number}" if turns else "no turns"
            raise UsageError(f"{path} has no turn {number} (it has {have})")
        return _rewind(session, turns, turn, kind, bool(args.dry_run), home)
    finally:
        session.unlock()


def _rewind(session: Any, turns: list[Any], turn: Any, kind: str, dry: bool, home: Path) -> int:
    from agi.sessions.rewind import (
        apply_files,
        plan_files,
        record_rewind,
        rewind_conversation,
    )
    from agi.sessions.shadow import ShadowError

    n, out = turn.number, sys.stdout
    plan, done, failed = None, [], []
    if kind in ("both", "files"):
        try:
            plan = plan_files(turns, n, home, session.path)
        except ShadowError as e:
            raise AgiError(f"cannot rewind the files: {e}") from e
        for warning in plan.warnings:
            sys.stderr.write(f"agi: {warning}\n")
        untracked = [t for t in turns if t.number >= n and t.untracked]
        if untracked:
            why = untracked[0].untracked
            sys.stderr.write(
                f"agi: turn {untracked[0].number} had no snapshot ({why}): "
                "only what Write and Edit changed is restored\n"
            )
        actions = plan.paths()
        if dry:
            for action, path in actions:
                out.write(f"would {action} {_display(path)}\n")
        else:
            done, failed = apply_files(plan, home)
            for action, path in actions:
                if path in done:
                    out.write(f"{action}d {_display(path)}\n")
        for path in sorted(plan.others & {p for _, p in actions}):
            tail = "it would be restored" if dry else "restored"
            sys.stderr.write(
                f"agi: {_display(path)} was changed by someone else since turn {n}; {tail}\n"
            )
    if kind in ("both", "conversation"):
        if dry:
            out.write(f"would rewind the conversation to before turn {n}\n")
        else:
            rewind_conversation(session, turn)
            out.write(f"conversation rewound to before turn {n}\n")
    if not dry:
        record_rewind(session.path, n, plan, kind, done)
    out.flush()
    for failure in failed:
        sys.stderr.write(f"agi: could not restore {failure}\n")
    return 1 if failed else 0


def _display(path: str) -> str:
    """Relative to the current directory when inside it; a name with control characters or
    bytes that are not UTF-8 is quoted as git quotes it (`"caf\\351 \\n.txt"`)."""
    here = os.getcwd().rstrip("/") + "/"
    return quoted(path[len(here) :] if path.startswith(here) else path)


def quoted(path: str) -> str:
    raw = os.fsencode(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.isprintable() and '"' not in text and "\\" not in text:
        return text
    out = []
    for byte in raw:
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif 32 <= byte < 127:
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def listing(path: Path, home: Path, as_json: bool = False) -> str:
    """The session's turns: number, time, the prompt's first line, the files changed."""
    from agi.sessions.checkpoints import owner_of
    from agi.sessions.rewind import changed_in, read_turns

    turns, rewinds = read_turns(path)
    owner = owner_of(path)
    rows = []
    for t in turns:
        files = changed_in(t, turns, home, owner)
        rows.append(
            {
                "turn": t.number,
                "time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t.time)),
                "prompt": t.prompt,
                "files": files,
                "rewound": t.rewound,
                "checkpoint": t.tree is not None,
            }
        )
    if as_json:
        return json.dumps({"turns": rows, "rewinds": len(rewinds)}, ensure_ascii=False) + "\n"
    if not rows:
        return f"{path}: no turns yet\n"
    lines = []
    for r in rows:
        files = r["files"]
        shown = [quoted(f) for f in files[:12]] if files is not None else []
        what = "files unknown" if files is None else ", ".join(shown) or "no files changed"
        if files is not None and len(files) > 12:
            what += f" (and {len(files) - 12} more; --output json lists them all)"
        mark = "  (rewound)" if r["rewound"] else ""
        lines.append(f"{r['turn']:>3}  {r['time']}  {r['prompt']}{mark}\n       {what}")
    for r in rewinds:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.get("time", 0)))
        scope = {"both": "files and conversation"}.get(r.get("kind"), r.get("kind", "?"))
        lines.append(f"  rewound {when}  to before turn {r['rewind']} ({scope})")
    return "\n".join(lines) + "\n"
