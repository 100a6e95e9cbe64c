"""`agi --rewind`: the turns of a session, and going back to before one (docs: checkpoints).

stdout: the listing, or one line per file (`restored PATH`, `removed PATH`; `would ...` with
--dry-run) and one for the conversation. stderr: `agi: PATH was changed by someone else since
turn N` for each such file, `agi: PATH: WHY; left as it is` for each file the rewind cannot
bring back; a file that could not be restored is one `agi:` line, exit 1. Records that fail
their check are refused before anything is read of them (exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from agi.checkpoints.rewind import (
    apply_files,
    changed_in,
    plan_files,
    read_turns,
    record_rewind,
    rewind_conversation,
)
from agi.checkpoints.shadow import ShadowError
from agi.checkpoints.snapshots import OFF, owner_of, repair_records
from agi.errors import AgiError, UsageError
from agi.options.config import agi_home, config_path, load_file, resolve_model
from agi.options.values import env_layer, file_layer, resolve
from agi.policy.decoding import one_line
from agi.policy.environment import SECRETS
from agi.sessions.session import Session, SessionIndex


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
    if not (value.isascii() and value.isdigit()) or int(value) < 1:  # `²` is a digit too
        raise UsageError(f"--rewind takes a turn number (1, 2, ... or last), not {value!r}")
    return kind, int(value)


def _session_path(args: argparse.Namespace) -> Path:
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
        session.load(repair=not args.dry_run)  # a torn last line ended: the record stands alone
        for warning in session.warnings:
            sys.stderr.write(f"agi: {warning}\n")
        if not args.dry_run:  # a dry run changes nothing, not even a torn line
            repair_records(path, home)
        turns, _ = read_turns(path, home)
        number = number or (turns[-1].number if turns else 1)  # `last`
        turn = next((t for t in turns if t.number == number), None)
        if turn is None:
            have = f"turns 1-{turns[-1].number}" if turns else "no turns"
            raise UsageError(f"{path} has no turn {number} (it has {have})")
        as_json = getattr(args, "output", None) == "json"
        return _rewind(session, turns, turn, kind, bool(args.dry_run), home, as_json)
    finally:
        session.unlock()


def _rewind(
    session: Any, turns: list[Any], turn: Any, kind: str, dry: bool, home: Path, as_json: bool
) -> int:
    n = turn.number
    plan, actions, done, failed = None, [], [], []
    if kind in ("both", "files"):
        plan, actions, done, failed = _files(session, turns, n, dry, home, kind == "files")
    if kind in ("both", "conversation") and not dry:
        rewind_conversation(session, turn)
    if not dry:
        record_rewind(session, n, plan, kind, done, home)
    others = sorted(plan.others & {p for _, p in actions}) if plan is not None else []
    for path in others:
        tail = "it would be restored" if dry else "restored"
        sys.stderr.write(
            f"agi: {_display(path)} was changed by someone else since turn {n}; {tail}\n"
        )
    left = plan.left if plan is not None else []
    for path, why in left:
        sys.stderr.write(f"agi: {_display(path)}: {why}; left as it is\n")
    shown = [(a, p) for a, p in actions if dry or p in done]
    conversation = kind in ("both", "conversation")
    if as_json:
        result: dict[str, Any] = {"turn": n, "dry_run": dry, "conversation": conversation}
        for action in ("restore", "remove"):
            result[action + "d"] = [p for a, p in shown if a == action]
        result.update(others=others, failed=failed, left=[p for p, _ in left])
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        for action, path in shown:
            sys.stdout.write(f"{'would ' + action if dry else action + 'd'} {_display(path)}\n")
        if conversation:
            done_text = "would rewind the conversation" if dry else "conversation rewound"
            sys.stdout.write(f"{done_text} to before turn {n}\n")
    sys.stdout.flush()
    for failure in failed:
        sys.stderr.write(f"agi: could not restore {failure}\n")
    return 1 if failed else 0


def _files(
    session: Any, turns: list[Any], n: int, dry: bool, home: Path, only: bool = False
) -> tuple[Any, ...]:
    """Plan (and unless `dry`, carry out) the rewind of the files: (plan, actions, done,
    failed). `only` (--rewind-files): a turn without a snapshot whose rewind would restore
    nothing is a usage error (exit 2), not a success that did nothing."""
    secrets = [os.fsencode(k) for k in known_keys()]  # the rewind's own snapshot keeps none
    try:
        plan = plan_files(turns, n, home, session.path, dry, secrets)
    except ShadowError as e:
        raise AgiError(f"cannot rewind the files: {e}") from e
    for warning in plan.warnings:
        sys.stderr.write(f"agi: {warning}\n")
    untracked = [t for t in turns if t.number >= n and t.untracked]
    if untracked:
        first = untracked[0]
        what = (
            "its files are not restored"
            if first.untracked == OFF
            else "only what Write and Edit changed is restored"
        )
        if only and first.number == n and not plan.paths() and not plan.left:
            raise UsageError(
                f"turn {n} had no snapshot ({first.untracked}): none of its files can be "
                "restored, and nothing was changed"
            )
        sys.stderr.write(f"agi: turn {first.number} had no snapshot ({first.untracked}): {what}\n")
    done, failed = ([], []) if dry else apply_files(plan, home)
    return plan, plan.paths(), done, [*plan.refused, *failed]


def known_keys() -> set[str]:
    """The API keys a run here would use (the config file's and the environment's): the
    snapshot a rewind takes keeps no file holding one, as a run's does (docs: checkpoints).
    Best effort: a configuration that does not resolve still leaves AGI_API_KEY."""
    keys = {*SECRETS, os.environ.get("AGI_API_KEY") or ""}
    try:
        path = config_path()
        key = resolve_model(resolve([file_layer(load_file(path), path), env_layer()]), path).api_key
        keys.add(key or "")
    except (AgiError, OSError, ValueError):
        pass
    return {k for k in keys if len(k) >= 8}


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
    turns, rewinds = read_turns(path, home)
    owner = owner_of(path)
    rows: list[dict[str, Any]] = []
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
                "untracked": t.untracked,
            }
        )
    if as_json:
        return json.dumps({"turns": rows, "rewinds": len(rewinds)}) + "\n"
    if not rows:
        return f"{path}: no turns yet\n"
    lines = []
    for r in rows:
        files = r["files"]
        shown = [quoted(f) for f in files[:12]] if files is not None else []
        what = "files unknown" if files is None else ", ".join(shown) or "no files changed"
        if files is not None and len(files) > 12:
            what += f" (and {len(files) - 12} more; --output json lists them all)"
        if r["untracked"] == OFF:
            what += f" ({OFF})"
        elif r["untracked"]:
            what += f" (no snapshot: {r['untracked']}; only Write and Edit recorded)"
        mark = "  (rewound)" if r["rewound"] else ""
        prompt = one_line(r["prompt"])  # a prompt's escape sequences never reach the terminal
        lines.append(f"{r['turn']:>3}  {r['time']}  {prompt}{mark}\n       {what}")
    for record in rewinds:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.get("time", 0)))
        kind = str(record.get("kind", "?"))
        scope = "files and conversation" if kind == "both" else kind
        lines.append(f"  rewound {when}  to before turn {record['rewind']} ({scope})")
    return "\n".join(lines) + "\n"
