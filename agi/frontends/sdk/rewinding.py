"""The SDK's `rewind_files` (docs: claude-agent-sdk, checkpoints): the files back to their state
before the turn a user message began, from agi's checkpoints. Each user message's `uuid` (the
SDK's, or one agi makes, echoed under --replay-user-messages) is mapped to the checkpoint turn it
began, kept in the session's meta.json (a resumed or forked session has it); the answer is the
SDKs' RewindFilesResult (`canRewind`, `filesChanged`, `error`). Like `agi --rewind-files N`: the
conversation stays as it is."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.checkpoints.snapshots import OFF, RecordsError, read_records, repair_records
from agi.errors import AgiError
from agi.policy.environment import SECRETS

if TYPE_CHECKING:
    from agi.frontends.sdk.channel import Channel
    from agi.sessions.session import Session

LOCK_WAIT = 30.0  # seconds to wait for the session's lock (another agi on it)
KEPT = "sdk_turns"  # meta.json's key for the map, so a resumed session has it
KEEP = 1000  # messages the map keeps at most (the latest)


class Unrewindable(AgiError):
    """A rewind that cannot be made; its text is the answer's `error`."""


class Rewinds:
    """A session's user messages, each with the checkpoint turn it began (kept in meta.json):
    `start` before the message's turn, `end` after it; `answer` the SDK's request."""

    def __init__(self, session: Session, home: Path) -> None:
        self.session, self.home = session, home
        kept = session.meta.get(KEPT)
        self.turns: dict[str, int] = {
            k: v for k, v in (kept if isinstance(kept, dict) else {}).items()
            if isinstance(k, str) and type(v) is int and v > 0
        }  # fmt: skip
        self.taking: tuple[str, int] | None = None

    def last_turn(self) -> int:
        """The number of the session's last checkpoint turn (0: none yet)."""
        try:
            records = read_records(self.session.path, self.home, False)
        except (RecordsError, OSError):
            return 0
        return max((r["turn"] for r in records if isinstance(r.get("turn"), int)), default=0)

    def start(self, uid: str) -> None:
        self.taking = (uid, self.last_turn())

    def end(self) -> None:
        """The message's turn is over: it began the first turn after the last one before it
        (none when its turn never started: a prompt refused before it)."""
        if self.taking is not None:
            (uid, before), self.taking = self.taking, None
            if self.last_turn() > before:
                self.turns[uid] = before + 1
                try:
                    self.keep()
                except (AgiError, OSError) as e:  # the session's lock held elsewhere, say
                    sys.stderr.write(f"agi: which turn each message began was not saved: {e}\n")

    def keep(self) -> None:
        """The map into the session's meta.json (the latest KEEP messages)."""
        session = self.session
        with session.locked(time.monotonic() + LOCK_WAIT, LOCK_WAIT):
            session.meta[KEPT] = dict(list(self.turns.items())[-KEEP:])
            session.write_meta()

    def answer(self, channel: Channel, message: dict[str, Any]) -> None:
        """A `rewind_files` control request answered: the RewindFilesResult, or an error (a
        dry run that cannot rewind is a success with `canRewind` false, as Claude Code's)."""
        request_id = str(message.get("request_id"))
        body = message.get("request") or {}
        dry = bool(body.get("dry_run"))
        try:
            channel.answer(request_id, self.rewind(str(body.get("user_message_id")), dry))
        except AgiError as e:
            if dry:
                channel.answer(request_id, {"canRewind": False, "error": str(e)})
            else:
                channel.answer(request_id, None, str(e))

    def rewind(self, uid: str, dry: bool) -> dict[str, Any]:
        """Restore (or with `dry`, name) the files changed since the message's turn began."""
        # lazy: the shadow repository's code, only once a rewind is asked (docs: development)
        from agi.checkpoints.rewind import apply_files, plan_files, read_turns, record_rewind
        from agi.checkpoints.shadow import ShadowError

        session, home = self.session, self.home
        number = self.turns.get(uid)
        if number is None:
            known = "none yet" if not self.turns else f"{len(self.turns)} of them"
            raise Unrewindable(
                f"no checkpoint for user message {uid!r}: agi knows the user messages of this "
                f"session that began a turn ({known})"
            )
        with session.locked(time.monotonic() + LOCK_WAIT, LOCK_WAIT):
            if not dry:
                repair_records(session.path, home)
            turns, _ = read_turns(session.path, home)
            since = [t for t in turns if t.number >= number]
            if since and since[0].untracked == OFF:
                raise Unrewindable(f"checkpoints are off (turn {number}): no file can be restored")
            secrets = [os.fsencode(k) for k in {*session.secrets, *SECRETS} if len(k) >= 8]
            try:
                plan = plan_files(turns, number, home, session.path, dry, secrets)
            except ShadowError as e:
                raise Unrewindable(f"cannot rewind the files: {e}") from e
            for line in [*plan.warnings, *(f"{p}: {why}; left as it is" for p, why in plan.left)]:
                sys.stderr.write(f"agi: {line}\n")
            paths = [p for _, p in plan.paths()]
            if dry:
                return {"canRewind": not plan.refused, "filesChanged": paths}
            done, failed = apply_files(plan, home)
            record_rewind(session, number, plan, "files", done, home)
        for path in sorted(plan.others & set(done)):
            sys.stderr.write(f"agi: {path} was changed by someone else since turn {number}\n")
        failed = [*plan.refused, *failed]
        if failed:
            raise Unrewindable("could not restore " + "; ".join(failed))
        return {"canRewind": True, "filesChanged": done}
