"""MCP configuration in Claude Code's `mcpServers` format, and the cache of servers' tool lists.

`${VAR}` and `${VAR:-default}` expand in command, args, env, url and headers as in Claude Code (a
plugin's servers also see `${CLAUDE_PLUGIN_ROOT}`, and have it in their environment): a
variable that is set (even empty) wins, else the default; an unset one without a default makes
that server a warning (it is skipped) rather than failing every run. Of two servers with one
name, the later file's wins. A malformed file is a ConfigError (exit 2) naming the file.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agi.errors import ConfigError, UsageError
from agi.fileio import loads, read_text

CACHE_VERSION = 1
CACHE_LIMIT = 64 << 20  # bytes of the tool-list cache read at most (larger: empty)
CACHE_TTL = 24 * 3600.0  # seconds a cached tool list is trusted without starting the server
VAR = re.compile(r"\$\{([^}]+)\}")


@dataclass
class ServerConfig:
    """One entry of `mcpServers`, with `${VAR}` expanded; `spec` is what starts the server."""

    name: str
    spec: dict[str, Any]
    source: str

    @property
    def key(self) -> str:
        """Name, spec and mtimes of the files it runs, hashed: an edit or upgrade is a new key."""
        import hashlib
        import shutil

        stamps: list[int | None] = []
        if self.spec["type"] == "stdio":
            command = shutil.which(self.spec["command"]) or self.spec["command"]
            for part in [command, *self.spec["args"]]:
                try:
                    stamps.append(os.stat(part).st_mtime_ns)
                except (OSError, ValueError):
                    stamps.append(None)
        data = json.dumps([self.name, self.spec, stamps], sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:32]


@dataclass
class McpSource:
    """Servers from somewhere other than a plain file: a plugin's `.mcp.json` or its manifest's
    `mcpServers` (with `${CLAUDE_PLUGIN_ROOT}` its directory), or a file read with the `env` of
    settings files. `env` is set for the servers and seen by `${VAR}`."""

    path: Path | None = None
    data: Any = None  # inline `mcpServers` (a plugin manifest's), instead of a file
    plugin_root: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return str(self.path) if self.path else f"{self.plugin_root}/.claude-plugin/plugin.json"

    def variables(self) -> dict[str, str]:
        root = {"CLAUDE_PLUGIN_ROOT": self.plugin_root} if self.plugin_root else {}
        return {**self.env, **root}


def expand(value: str, missing: list[str], extra: dict[str, str] | None = None) -> str:
    """Claude Code's expansion: `${VAR}`, `${VAR:-default}`; unset names are collected."""

    def one(m: re.Match[str]) -> str:
        name, sep, default = m.group(1).partition(":-")
        if extra and name in extra:
            return extra[name]
        if name in os.environ:
            return os.environ[name]
        if sep:
            return default
        missing.append(name)
        return m.group(0)

    return VAR.sub(one, value)


def _strings(value: Any, kind: type, where: str) -> Any:
    items = value.values() if isinstance(value, dict) else value
    if not isinstance(value, kind) or not all(isinstance(v, str) for v in items):
        what = "an object of strings" if kind is dict else "a list of strings"
        raise ConfigError(f"{where} must be {what}")
    return value


def _server(
    name: str, entry: Any, where: str, missing: list[str], extra: dict[str, str] | None = None
) -> dict[str, Any]:
    """Check one server entry and return its expanded spec; problems are ConfigErrors."""
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be an object")
    kind = entry.get("type") or ("http" if "url" in entry and "command" not in entry else "stdio")
    if kind == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"{where}.command must be a non-empty string")
        args = _strings(entry.get("args", []), list, f"{where}.args")
        env = _strings(entry.get("env", {}), dict, f"{where}.env")
        return {
            "type": "stdio",
            "command": expand(command, missing, extra),
            "args": [expand(a, missing, extra) for a in args],
            "env": {**(extra or {}), **{k: expand(v, missing, extra) for k, v in env.items()}},
        }
    if kind not in ("http", "sse"):
        raise ConfigError(f"{where}.type must be stdio, http or sse, not {kind!r}")
    url = entry.get("url")
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"{where}.url must be a non-empty string")
    headers = _strings(entry.get("headers", {}), dict, f"{where}.headers")
    return {
        "type": kind,
        "url": expand(url, missing, extra),
        "headers": {k: expand(v, missing, extra) for k, v in headers.items()},
    }


def _read(path: Path | McpSource) -> Any:
    if isinstance(path, McpSource) and path.data is not None:
        return {"mcpServers": path.data}
    file = path.path if isinstance(path, McpSource) else path
    try:
        return loads(read_text(Path(file or "")))  # bounded (docs: security)
    except OSError as e:
        raise ConfigError(f"cannot read MCP config {path}: {e.strerror}") from e
    except ValueError as e:
        raise ConfigError(f"MCP config {path}: not valid JSON: {e}") from e


def read_configs(paths: Sequence[Path | McpSource]) -> tuple[list[ServerConfig], list[str]]:
    """Every server of every file, later files winning; a malformed file is a ConfigError."""
    servers: dict[str, ServerConfig] = {}
    warnings: list[str] = []
    for path in paths:
        data = _read(path)
        extra = path.variables() if isinstance(path, McpSource) else None
        table = data.get("mcpServers") if isinstance(data, dict) else None
        if not isinstance(table, dict):
            raise ConfigError(f'MCP config {path}: expected {{"mcpServers": {{NAME: {{...}}}}}}')
        for name, entry in table.items():
            if not name.strip():
                raise ConfigError(f"MCP config {path}: a server needs a non-empty name")
            missing: list[str] = []
            spec = _server(name, entry, f"MCP config {path}: mcpServers.{name}", missing, extra)
            if missing:
                servers.pop(name, None)
                names = ", ".join(sorted(set(missing)))
                warnings.append(f"MCP server {name} ({path}): {names} not set; skipped")
                continue
            servers[name] = ServerConfig(name, spec, str(path))
    return list(servers.values()), warnings


def _saved(entry: Any) -> float:
    saved = entry.get("saved") if isinstance(entry, dict) else None
    return float(saved) if isinstance(saved, int | float) else 0.0


class Cache:
    """Tool lists by server key in one JSON file, replaced atomically; corrupt means empty."""

    def __init__(self, file: Path | None):
        self.file, self.lock = file, threading.Lock()
        self.entries: dict[str, Any] = {}
        try:
            data = loads(read_text(file, CACHE_LIMIT)) if file else None
        except (OSError, ValueError, UsageError):
            data = None
        if isinstance(data, dict) and data.get("version") == CACHE_VERSION:
            servers = data.get("servers")
            self.entries = servers if isinstance(servers, dict) else {}

    def get(self, config: ServerConfig) -> list[dict[str, Any]] | None:
        entry = self.entries.get(config.key)
        if not isinstance(entry, dict) or not isinstance(entry.get("tools"), list):
            return None
        if not time.time() - CACHE_TTL < _saved(entry) <= time.time():
            return None
        return [t for t in entry["tools"] if isinstance(t, dict) and isinstance(t.get("name"), str)]

    def put(self, config: ServerConfig, tools: list[dict[str, Any]]) -> None:
        """Remember a server's fresh tool list and write the file at once."""
        if self.file is None:
            return
        with self.lock:
            now = time.time()
            self.entries[config.key] = {"server": config.name, "saved": now, "tools": tools}
            live = {k: e for k, e in self.entries.items() if _saved(e) > now - CACHE_TTL}
            data = json.dumps({"version": CACHE_VERSION, "servers": live}, sort_keys=True)
            import tempfile

            tmp = ""
            try:
                self.file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix=".mcp-cache-")
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(data)
                os.replace(tmp, self.file)
            except OSError:
                pass  # an unwritable cache only costs the next run a server start
            finally:
                if tmp and os.path.exists(tmp):
                    os.unlink(tmp)
