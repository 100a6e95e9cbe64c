"""What an endpoint accepts for structured output, learnt from its refusals.

Servers differ: OpenAI, vLLM, llama.cpp's `llama-server`, LM Studio and recent Ollama take
`response_format: {"type": "json_schema", ...}`; llama-cpp-python's server takes only `"text"`
or `"json_object"` (with an optional `"schema"` it enforces with a grammar) and refuses the
rest with a 500; others know only `json_object`, or nothing. A ghost exchange tries the strongest
form first and falls back on a refusal that names `response_format`. Refusals are remembered
per base URL and model under `$AGI_HOME` (like the MCP tool lists), so a later run starts with
the form that works and pays no refused request. Within one process (a batch, a server) they
are remembered in memory too, for the runs that write nothing (docs: volume).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agi.providers.cache import read_cache_entry, write_cache_entry

CACHE_FILE = "endpoint-cache.json"
# strongest first; "instructions" sends no response_format: the prompt alone asks for JSON
FORMATS = ("json_schema", "json_object_schema", "json_object", "instructions")


def request_format(kind: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The request body's extra keys that ask for JSON in form `kind`."""
    if kind == "json_schema":
        answer = {"name": "answer", "schema": schema, "strict": False}
        return {"response_format": {"type": "json_schema", "json_schema": answer}}
    if kind == "json_object_schema":  # llama-cpp-python and llama.cpp turn it into a grammar
        return {"response_format": {"type": "json_object", "schema": schema}}
    if kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {}


LEARNT: dict[str, list[str]] = {}  # endpoint -> forms it refused, learnt by this process


class Formats:
    """The structured-output forms still worth trying at one endpoint (base URL and model)."""

    def __init__(self, home: Path | None = None, base_url: str = "", model: str = ""):
        self.home = home
        self.key = f"{base_url.rstrip('/')} {model}"
        self.refused: list[str] = []
        if home is not None:
            entry = read_cache_entry(home, CACHE_FILE, self.key) or {}
            known = entry.get("refused_formats")
            if isinstance(known, list):
                self.refused = [k for k in known if k in FORMATS and k != "instructions"]
        for kind in LEARNT.get(self.key, ()):  # this process's runs, ephemeral ones too
            if kind not in self.refused:
                self.refused.append(kind)

    @classmethod
    def of(cls, transport: Any, home: Path | None) -> Formats:
        """The forms for a transport's endpoint, with what earlier runs learnt under `home`."""
        config = getattr(transport, "config", None)
        base_url = str(getattr(config, "base_url", "") or "")
        return cls(home, base_url, str(getattr(config, "model", "") or ""))

    def order(self) -> list[str]:
        """The forms to try, strongest first; "instructions" always remains."""
        return [k for k in FORMATS if k not in self.refused]

    def refuse(self, kind: str) -> None:
        """The endpoint refused `kind`: never ask it again (this run, and later ones)."""
        if kind == "instructions" or kind in self.refused:
            return
        self.refused.append(kind)
        learnt = LEARNT.setdefault(self.key, [])
        if kind not in learnt:
            learnt.append(kind)
        if self.home is not None:
            write_cache_entry(self.home, CACHE_FILE, self.key, {"refused_formats": self.refused})
