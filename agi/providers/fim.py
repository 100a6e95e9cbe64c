"""Fill-in-the-middle completions, for inline suggestions in an editor.

The request shapes: OpenAI-compatible `/v1/completions` with `prompt` and `suffix` (Ollama,
DeepSeek's beta endpoint), llama.cpp's `/infill`, Mistral's `/v1/fim/completions`, and for any
other model a chat request with a fill-in-the-middle instruction whose reply is cleaned up (code
fences, a repeated line). Each shape is a `FimCompletions` protocol object (agi.providers.wire.Wire)
over an exchange (`agi.providers.transport.Exchange`): its client, headers, retries, deadline,
idle limit and `cancel()`; only the URL, the body and the chunk decoder differ from chat's.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agi.options.config import config_path
from agi.options.settings import Settings
from agi.options.values import ToolChoice, overlay
from agi.prompts import sections
from agi.providers.chat import ChatAssembler, ChatCompletions
from agi.providers.endpoint import root
from agi.providers.protocols import transport_for
from agi.providers.stream import StreamAssembler
from agi.providers.transport import Exchange

if TYPE_CHECKING:
    from agi.options.config import ModelConfig

CHOICES = ("auto", "completions", "infill", "chat")  # suggest.fim; "mistral" is chosen by auto
# "prompt": a /v1/completions body without suffix, for next-edit suggestions (frontends/nvim/nes)
DEADLINE = 30.0  # seconds one suggestion may take, retries included
MARKER = "<|cursor|>"
LLAMA_CPP = ("llamacpp", "llama.cpp", "llama-cpp", "llama_cpp", "llama-server")


def choose(fim: str, model: ModelConfig) -> str:
    """The request shape for `suggest.fim`; "auto" goes by the provider (and Mistral's host)."""
    if fim != "auto":
        return fim
    provider = model.provider.lower()
    host = urlsplit(model.base_url).hostname or ""
    if provider in ("ollama", "deepseek"):
        return "completions"
    if provider in LLAMA_CPP:
        return "infill"
    if provider in ("mistral", "codestral") or host.endswith("mistral.ai"):
        return "mistral"
    return "chat"


def endpoint(kind: str, model: ModelConfig) -> str:
    base = model.base_url.rstrip("/")
    if kind == "infill":  # a llama.cpp server route, beside its /v1
        return root(base) + "/infill"
    if kind == "mistral":
        return base + "/fim/completions"
    if urlsplit(base).hostname == "api.deepseek.com":  # FIM is on DeepSeek's beta endpoint only
        return "https://api.deepseek.com/beta/completions"
    return base + "/completions"


class FimCompletions(ChatCompletions):
    """One fill-in-the-middle shape as an exchange speaks it: chat completions' headers, errors
    and stream, another URL, body and chunk decoder. The body has no conversation to trace."""

    conversation = ""

    def __init__(self, config: ModelConfig, kind: str):
        super().__init__(config)
        self.kind = kind

    @property
    def url(self) -> str:
        return endpoint(self.kind, self.config)

    def body(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **extra: Any
    ) -> dict[str, Any]:
        prefix, suffix = str(extra.pop("prefix", "")), str(extra.pop("suffix", ""))
        max_tokens = int(extra.pop("max_tokens", 128))
        if self.kind == "prompt":  # a plain completion (next-edit models' own formats)
            body: dict[str, Any] = {"model": self.config.model, "prompt": prefix}
            body["max_tokens"] = max_tokens
        elif self.kind == "infill":
            body = {
                "input_prefix": prefix,
                "input_suffix": suffix,
                "n_predict": max_tokens,
                "cache_prompt": True,
            }
        else:
            body = {"model": self.config.model, "prompt": prefix, "suffix": suffix}
            body["max_tokens"] = max_tokens
        body["stream"] = True
        body.update(extra)  # suggest.params
        return body

    def decoder(self) -> StreamAssembler:
        return FimAssembler(self.kind)


def fim_exchange(config: ModelConfig, kind: str) -> Exchange:
    """An exchange for one fill-in-the-middle shape (`choose`), untraced: a suggestion per
    keystroke keeps no session."""
    return Exchange(config, protocol=FimCompletions(config, kind))


class FimAssembler(ChatAssembler):
    """Reads completion chunks (`choices[].text`) and llama.cpp's (`content`, `stop`) as the chat
    chunks ChatAssembler knows; Mistral's FIM chunks already are."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def feed(self, chunk: Any, event: str = "message") -> list[Any]:
        if isinstance(chunk, dict) and not chunk.get("error"):
            chunk = as_chat_chunk(chunk, self.kind)
        return super().feed(chunk, event)


def as_chat_chunk(chunk: dict[str, Any], kind: str) -> dict[str, Any]:
    if kind == "infill" and "content" in chunk and "choices" not in chunk:
        choice = {"index": 0, "delta": {"content": chunk.get("content") or ""}}
        choice["finish_reason"] = "stop" if chunk.get("stop") else None
        return {"choices": [choice], "timings": chunk.get("timings")}
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not any(
        isinstance(c, dict) and "text" in c for c in choices
    ):
        return chunk
    out = []
    for c in choices:
        if isinstance(c, dict):
            delta = {"content": c.get("text") or ""}
            out.append(
                {
                    "index": c.get("index", 0),
                    "delta": delta,
                    "finish_reason": c.get("finish_reason"),
                }
            )
    return {**chunk, "choices": out}


# --- the chat fallback ----------------------------------------------------------------------


def fence_for(text: str) -> str:
    """A backtick fence longer than any run of backticks in the text, so it cannot close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def chat_messages(request: dict[str, Any]) -> list[dict[str, str]]:
    texts = sections("suggest.md")
    prefix, suffix = str(request.get("prefix", "")), str(request.get("suffix", ""))
    user = texts["user"].format(
        filetype=request.get("filetype") or "text",
        filename=request.get("filename") or "[No Name]",
        fence=fence_for(prefix + suffix),
        marker=MARKER,
        code=prefix + MARKER + suffix,
    )
    return [{"role": "system", "content": texts["system"]}, {"role": "user", "content": user}]


def from_chat(text: str, prefix: str, final: bool) -> str:
    """The inserted text in a chat reply: the code fence around it dropped, the marker and a
    repeat of the cursor line's start removed. While streaming, what may still turn into a fence
    or the repeated line is held back."""
    head = text.lstrip()
    if head.startswith("```"):
        if "\n" not in head:
            return ""
        text = head.split("\n", 1)[1]
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            text, final = "\n".join(lines[:i]), True
            break
    else:
        if not final and lines[-1].strip() and "```".startswith(lines[-1].strip()):
            text = "\n".join(lines[:-1])
    text = text.replace(MARKER, "")
    line = prefix.rsplit("\n", 1)[-1]
    if line.strip():
        if text.startswith(line):
            return text[len(line) :]
        if text.lstrip().startswith(line.lstrip()):
            return text.lstrip()[len(line.lstrip()) :]
        if not final and line.lstrip().startswith(text.lstrip()):
            return ""  # may be the cursor line coming again
    return text


def tidy(text: str, suffix: str, max_lines: int) -> tuple[str, bool]:
    """What to show: line ends normalized, trailing blank space and the text that is already
    after the cursor dropped, at most `max_lines` lines. Also: whether that is enough."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "")
    lines = text.split("\n")
    enough = len(lines) > max_lines
    text = "\n".join(lines[:max_lines]).rstrip()
    after = suffix.split("\n", 1)[0].strip()
    if after and text.endswith(after):
        text = text[: -len(after)].rstrip()
    return text, enough


# --- requests -------------------------------------------------------------------------------


class Completer:
    """Settings (reloaded when the config file or the options change) and idle transports (a
    finished request leaves its connection open for the next one), shared by all requests."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loaded: dict[str, tuple[Any, Settings]] = {}  # by options: (config stamp, settings)
        self.idle: dict[tuple[str, str], list[Exchange]] = {}  # by (options, kind)

    def settings(self, options: dict[str, Any]) -> tuple[str, Settings]:
        """The settings for the request's options, and the key they are kept under."""
        given = {k: options[k] for k in ("model", "base_url") if options.get(k)}
        path = config_path()
        stamp = (path.stat().st_mtime_ns if path.exists() else 0, _env())
        key = repr(sorted(given.items()))
        with self.lock:
            found = self.loaded.get(key)
        if found is not None and found[0] == stamp:
            return key, found[1]
        settings = Settings.load(overlay("Neovim setup()", tools=ToolChoice(none=True), **given))
        with self.lock:
            self.loaded[key] = (stamp, settings)
            stale = [t for k, idle in self.idle.items() if k[0] == key for t in idle]
            self.idle = {k: idle for k, idle in self.idle.items() if k[0] != key}
        for transport in stale:
            transport.close()
        return key, settings

    def take(
        self, key: str, kind: str, settings: Settings, deadline: float | None = None
    ) -> Exchange:
        """An idle exchange for `key` and `kind`, or a new one; `deadline` (monotonic) set on it."""
        transport = self._take(key, kind, settings)
        if deadline is not None:
            transport.deadline = deadline
        return transport

    def _take(self, key: str, kind: str, settings: Settings) -> Exchange:
        with self.lock:
            idle = self.idle.get((key, kind))
            if idle:
                return idle.pop()
        if kind != "chat":
            return fim_exchange(settings.model, kind)
        # suggestions keep no session: nothing is traced per keystroke
        return transport_for(settings.model, home=settings.home, windows=settings.window.windows)

    def give(self, key: str, kind: str, transport: Exchange) -> None:
        with self.lock:
            idle = self.idle.setdefault((key, kind), [])
            if len(idle) < 2:
                idle.append(transport)
                return
        transport.close()

    def complete(
        self,
        request: dict[str, Any],
        show: Callable[[str], None],
        attach: Callable[[Exchange], None],
    ) -> str:
        """Stream one suggestion, telling `show` the text so far; return the final text."""
        options = request.get("options") or {}
        key, settings = self.settings(options)
        kind = choose(str(options.get("fim") or "auto"), settings.model)
        transport = self.take(key, kind, settings)
        transport.deadline = time.monotonic() + DEADLINE
        attach(transport)
        prefix, suffix = str(request.get("prefix", "")), str(request.get("suffix", ""))
        max_lines = int(options.get("max_lines") or 16)
        params = options.get("params")
        params = params if isinstance(params, dict) else {}  # Lua sends {} as a list
        if kind == "chat":
            events = transport.stream(chat_messages(request), [], **params)
        else:
            max_tokens = int(options.get("max_tokens") or 128)
            extra = {"prefix": prefix, "suffix": suffix, "max_tokens": max_tokens, **params}
            events = transport.stream([], [], **extra)
        raw, shown, finished = "", "", False
        try:
            for event in events:
                if getattr(event, "type", "") != "text":
                    continue
                raw += event.text
                text = from_chat(raw, prefix, False) if kind == "chat" else raw
                text, enough = tidy(text, suffix, max_lines)
                if text != shown:
                    shown = text
                    show(text)
                if enough:
                    break
            finished = True
        finally:
            events.close()
            if finished and not transport.cancelled.is_set():
                self.give(key, kind, transport)
            else:
                transport.close()
        text = from_chat(raw, prefix, True) if kind == "chat" else raw
        return tidy(text, suffix, max_lines)[0]


def _env() -> tuple[str, ...]:
    return tuple(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("AGI_"))
