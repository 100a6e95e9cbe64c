"""Where a model is served, as every protocol sees it: the server's root beside its OpenAI-style
`/v1` (the one place that strips it), whether it is a local server, the headers sent to it (built
once per transport), the API key it needs (checked before anything is sent), and what to start
when a local server does not answer."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from agi import __version__
from agi.errors import ConfigError

if TYPE_CHECKING:
    from agi.config import ModelConfig

LOCAL_PRESETS = ("ollama", "litellm")  # presets for servers on this machine: no key needed
STARTS = {
    "ollama": "is Ollama running? start it with 'ollama serve'",
    "litellm": "is the LiteLLM proxy running? start it with 'litellm --model MODEL'",
}


def root(base_url: str) -> str:
    """The server's root: the base URL without a trailing `/` and an OpenAI-style `/v1`
    (`http://localhost:11434/v1/` -> `http://localhost:11434`)."""
    return re.sub(r"/v1$", "", base_url.rstrip("/"))


def is_local(base_url: str) -> bool:
    """Whether the URL names this machine (localhost, a loopback address, 0.0.0.0)."""
    host = (urlsplit(base_url).hostname or "").lower()
    if host in ("localhost", "0.0.0.0") or host.endswith(".localhost"):
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def headers(auth: dict[str, str], **more: str) -> dict[str, str]:
    """The headers of every request to a model: agi's User-Agent, an event stream accepted,
    the protocol's own (`more`) and its authentication (`auth`, empty without a key)."""
    return {"User-Agent": f"agi/{__version__}", "Accept": "text/event-stream", **more, **auth}


def bearer(api_key: str | None) -> dict[str, str]:
    """`Authorization: Bearer KEY` (chat completions, Ollama, model listings), or nothing."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def key_needed(model: ModelConfig) -> str | None:
    """The variable an API key must come from when the model has none and surely needs one, or
    None: a hosted preset at its own endpoint (`OPENAI_API_KEY` for api.openai.com), or a
    provider table's `api_key_env`, unless the server is on this machine. A preset pointed at
    another server (a self-hosted vLLM, say) may need no key: that server will say so."""
    from agi.config import PROVIDERS

    variable = model.key_env
    if model.api_key or not variable or model.provider in LOCAL_PRESETS:
        return None
    default_url, preset_variable, _ = PROVIDERS.get(model.provider, (None, None, None))
    elsewhere = model.base_url.rstrip("/") != (default_url or "").rstrip("/")
    if variable == preset_variable and elsewhere:
        return None
    return None if is_local(model.base_url) else variable


def require_key(model: ModelConfig) -> None:
    """A ConfigError (exit 2, before anything is sent) naming the variable to set when the
    model needs an API key and none was found (`key_needed`)."""
    variable = key_needed(model)
    if variable is not None:
        also = "" if variable == "AGI_API_KEY" else " (or AGI_API_KEY)"
        raise ConfigError(f"no API key for {model.provider}: set {variable}{also}")


def start_hint(model: ModelConfig) -> str | None:
    """What to start when the server refused the connection: for a local preset, or any server
    on this machine; None for a remote one (the network's business, not a missing process)."""
    if model.provider in STARTS:
        return STARTS[model.provider].replace("MODEL", model.model)
    if is_local(model.base_url):
        return (
            f"is a server listening at {root(model.base_url)}? start it, or point --base-url at one"
        )
    return None
