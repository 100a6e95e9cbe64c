"""`--fork`: a copy of a session in a new directory (docs: sessions), its checkpoint records
signed anew for the copy (docs: checkpoints)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agi.attachments import copy_folder
from agi.checkpoints.records import resign
from agi.errors import UsageError
from agi.options.config import agi_home
from agi.policy.decoding import clean
from agi.sessions.files import append_bytes, make_private_dir, read_bytes, refused, replace_file
from agi.sessions.session import read_meta


def fork(source: Path, target: Path) -> None:
    """Copy a session into a new directory, built under a temporary name and renamed at the
    end, so a failed fork leaves nothing behind; the source is only read."""
    import shutil

    source, target = source.expanduser(), target.expanduser()
    if not os.path.lexists(source / "meta.json"):
        raise UsageError(f"cannot fork {source}: not an agi session (no meta.json)")
    _check_fork_target(source, target)
    make_private_dir(target.parent)
    building = target.with_name(f".{target.name}.fork-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)  # a failed fork's, or a link: never followed
    try:
        os.mkdir(building, 0o700)
    except OSError as e:
        raise refused(building, e.strerror or str(e)) from e
    try:
        for name in ("messages.jsonl", "trace.jsonl", "checkpoints.jsonl"):  # turns: section 18
            data = read_bytes(source / name)
            if data is not None and name == "checkpoints.jsonl":  # signed for the copy
                data = resign(data, source, target, agi_home())
            if data is not None:
                append_bytes(building / name, data)
        copy_folder(source, building)  # attached files (docs: attachments)
        meta = read_meta(source)
        meta.update(id=target.name, forked_from=str(source.resolve()))
        text = clean(json.dumps(meta, indent=1, ensure_ascii=False, default=str)) + "\n"
        replace_file(building / "meta.json", text.encode("utf-8"))
        os.replace(building, target)  # over an empty directory too
    except OSError as e:
        raise refused(target, e.strerror or str(e)) from e
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _check_fork_target(source: Path, target: Path) -> None:
    where = f"cannot fork into {target}"
    if target.resolve().is_relative_to(source.resolve()):
        raise UsageError(f"{where}: it is inside the session being forked")
    if os.path.islink(target) or os.path.lexists(target) and not target.is_dir():
        raise UsageError(f"{where}: it exists and is not a directory")
    try:
        if target.is_dir() and any(target.iterdir()):
            raise UsageError(f"{where}: it exists and is not empty")
    except OSError as e:
        raise refused(target, e.strerror or str(e)) from e
