"""Small JSON caches under $AGI_HOME (what a server said about a model: its context window, the
structured-output forms it refuses), each entry stamped and trusted for CACHE_DAYS."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

CACHE_DAYS = 7  # a server is asked again after this, in case it was restarted or upgraded


def read_cache(home: Path, name: str) -> dict[str, Any]:
    try:
        data = json.loads((home / name).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_cache_entry(home: Path, name: str, key: str, entry: dict[str, Any]) -> None:
    """One entry of a JSON cache under `home`, stamped `checked`; written atomically, 0600.
    Losing a race with another run only costs that run's entry."""
    data = read_cache(home, name)
    data[key] = {**entry, "checked": round(time.time())}
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = home / f".{name}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, home / name)
    except OSError:
        pass


def read_cache_entry(home: Path, name: str, key: str) -> dict[str, Any] | None:
    """A cache entry younger than CACHE_DAYS (a server may have been upgraded since), or None."""
    entry = read_cache(home, name).get(key)
    fresh = isinstance(entry, dict) and time.time() - entry.get("checked", 0) < CACHE_DAYS * 86400
    return entry if fresh else None
