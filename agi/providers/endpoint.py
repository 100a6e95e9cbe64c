"""Where a model is served, as every protocol sees it: the server's root beside its OpenAI-style
`/v1` (the one place that strips it), whether it is a local server, the headers sent to it (built
once per transport), the API key it needs (checked before anything is sent), and what to start
when a local server does not answer."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agi.errors import ConfigError
from agi.options.config import PROVIDERS, config_path, load_file, resolve_model
from agi.options.values import env_layer, file_layer, resolve
from agi.version import __version__

if TYPE_CHECKING:
    from agi.options.config import ModelConfig

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


def key_required(model: ModelConfig) -> str | None:
    """The variable the model's key is read from when the model surely needs one: a hosted
    preset (`openai`, `anthropic`, ...) at its own endpoint. None for the local presets, a server
    on this machine, a preset pointed at another server (a self-hosted vLLM, say) and a provider of
    your own: agi cannot tell whether those want a key, and they will say so if they do."""
    default_url, preset_variable, _ = PROVIDERS.get(model.provider, (None, None, None))
    variable = model.key_env or preset_variable
    if not variable or not default_url or model.provider in LOCAL_PRESETS:
        return None
    if model.base_url.rstrip("/") != default_url.rstrip("/") or is_local(model.base_url):
        return None
    return variable


def require_key(model: ModelConfig) -> None:
    """A ConfigError (exit 2, before anything is sent) naming the variable to set when the
    model needs an API key (`key_required`) and none was found."""
    variable = None if model.api_key else key_required(model)
    if variable is not None:
        also = "" if variable == "AGI_API_KEY" else " (or AGI_API_KEY)"
        raise ConfigError(f"no API key for {model.provider}: set {variable}{also}")
    key = model.api_key or ""
    bad = next((i for i, c in enumerate(key) if not " " <= c <= "~"), None)
    if bad is not None:  # an HTTP header carries visible ASCII only: say so, never the key
        where = model.key_env or "its configuration"
        raise ConfigError(
            f"the API key for {model.provider} (from {where}) has a character an HTTP header "
            f"cannot carry at position {bad + 1} (a control or non-ASCII character)"
        )


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


class Unconfigured(ConfigError):
    """A call's or job's model on a provider the operator did not configure (exit 2)."""


def configured_providers(*layers: Any) -> set[str]:
    """The providers the operator's options configure (docs: security): the model's own, every
    `[providers.NAME]` table, and each preset whose key or endpoint variable is set."""
    import os

    path = config_path()
    resolved = resolve([file_layer(load_file(path), path), env_layer(), *layers])
    found = set(resolved.options.providers or {})
    if resolved.options.model:
        found.add(resolve_model(resolved, path).provider)
    for name, (_, key_var, url_var) in PROVIDERS.items():
        if any(var and os.environ.get(var) for var in (key_var, url_var)):
            found.add(name)
    return found


def require_configured(
    model: ModelConfig, operator: ModelConfig, configured: set[str], field: str
) -> None:
    """An Unconfigured error naming `field` unless `model` is served where the operator's options
    say (the operator's endpoint, or a provider they configured): a call or a batch job names a
    model, never where the operator's key goes."""
    if model.provider in configured or root(model.base_url) == root(operator.base_url):
        return
    raise Unconfigured(
        f"{field}: {model.label!r} is on provider {model.provider!r}, which the operator did not "
        f"configure (its key goes only to the endpoints the operator's options name: -m, "
        f"--base-url, [providers.{model.provider}] in the config file)"
    )
