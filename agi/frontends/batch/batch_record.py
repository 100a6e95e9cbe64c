"""The record of the provider batches `agi --batch --batch-api` created (docs: batch):
`OUT.batches.json` beside the `--batch-out` file, replaced whole at each change, so a rerun
after Ctrl-C, a crash or a kill polls the same batches and submits none of their jobs again.
A record agi cannot read is reported (exit 2) and left as it is."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agi.errors import UsageError

STATE_VERSION = 1


@dataclass
class Sent:
    """A batch created at the provider: its id, which job each request is (custom_id -> the
    job's id as JSON), its endpoint and model, and OUT's size when it was created (the lines
    after that offset are the ones already written of it, after a crash mid-way).

    It is recorded before it is sent, with no id yet, the `token` agi sends with it (OpenAI's
    batch metadata) and the time `at`: a rerun after a kill between the two finds the batch
    among the provider's by them (agi.frontends.batch.provider_batch.ProviderBatches.reconcile)
    instead of sending its jobs again."""

    api: str
    id: str
    base_url: str
    model: str
    jobs: dict[str, str]
    out_from: int = 0
    token: str = ""
    at: float = 0.0
    status: str = "submitted"
    counts: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "api": self.api,
            "id": self.id,
            "base_url": self.base_url,
            "model": self.model,
            "jobs": self.jobs,
            "out_from": self.out_from,
            "token": self.token,
            "at": self.at,
        }


class State:
    """The batches still to collect, kept in `path` (None without --batch-out: in memory)."""

    def __init__(self, path: Path | None, api: str):
        self.path, self.api = path, api
        self.sent: list[Sent] = []
        if path is not None and path.exists():
            self.sent = self._read(path)

    def _read(self, path: Path) -> list[Sent]:
        bad = f"{path} is not a record of provider batches agi can read"
        hint = "; move it away to submit its jobs again (the batches it names are not collected)"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
        except ValueError as e:
            raise UsageError(f"{bad} ({e}){hint}") from None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise UsageError(f"{bad} (no version {STATE_VERSION}){hint}")
        sent: list[Sent] = []
        entries = data.get("batches")
        for entry in entries if isinstance(entries, list) else [None]:
            try:
                assert isinstance(entry, dict)
                one = Sent(
                    api=str(entry["api"]),
                    id=str(entry["id"]),
                    base_url=str(entry["base_url"]),
                    model=str(entry["model"]),
                    jobs={str(k): str(v) for k, v in dict(entry["jobs"]).items()},
                    out_from=int(entry.get("out_from", 0)),
                    token=str(entry.get("token", "")),
                    at=float(entry.get("at", 0.0)),
                )
                assert one.id or one.token  # a batch sent, or one being sent
            except (AssertionError, KeyError, TypeError, ValueError, AttributeError):
                raise UsageError(f"{bad} (a batch entry is malformed){hint}") from None
            if one.api != self.api:
                raise UsageError(
                    f"{path} holds {one.api} batches still to collect: rerun with "
                    f"--batch-api {one.api}"
                )
            sent.append(one)
        return sent

    def save(self) -> None:
        """Replace the record at once (a crash leaves the old one or the new, never half)."""
        if self.path is None:
            return
        if not self.sent:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return
        data = {"version": STATE_VERSION, "batches": [s.to_json() for s in self.sent]}
        temp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        with open(temp, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, self.path)

    def pending_keys(self) -> set[str]:
        return {key for sent in self.sent for key in sent.jobs.values()}


def written_after(out: Path | None, offset: int) -> set[str]:
    """The ids (as JSON) of the lines OUT holds after `offset`."""
    if out is None:
        return set()
    try:
        with open(out, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return set()
    found = set()
    for line in data.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and "id" in value:
            found.add(json.dumps(value["id"], ensure_ascii=False))
    return found
