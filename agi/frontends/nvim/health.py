"""What `:checkhealth agi` asks the host's Python: can it run the engine, with which model."""

from __future__ import annotations

import os
from typing import Any

import agi.engine.loop  # noqa: F401
from agi.errors import AgiError
from agi.frontends.nvim.engine import nvim_layer
from agi.options.config import PROVIDERS, agi_home, config_path, load_file
from agi.options.settings import model_for
from agi.providers.endpoint import key_required
from agi.providers.protocols import describe


def engine_problem() -> str | None:
    """Why the engine cannot run in this Python (a missing dependency), or None."""
    try:
        import httpx  # noqa: F401  (the transport imports it when it first connects)

        # lazy: :checkhealth reports whether it imports
        import agi.engine.run  # noqa: F401

        # lazy: :checkhealth reports whether it imports
        import agi.frontends.nvim.engine  # noqa: F401

        # lazy: :checkhealth reports whether it imports
        import agi.providers.transport  # noqa: F401
    except ImportError as e:
        return f"{type(e).__name__}: {e}"
    return None


def report(options: dict[str, Any]) -> dict[str, Any]:
    """The engine's state and the model agi would use with these setup() options."""
    out: dict[str, Any] = {"home": str(agi_home())}
    problem = engine_problem()
    if problem:
        out["engine_error"] = problem
    path = config_path()
    out["config"] = str(path)
    out["config_exists"] = path.exists()
    try:
        file = load_file(path)
        model = model_for(nvim_layer(options))
    except AgiError as e:
        out["model_error"] = str(e)
    else:
        out.update(model=model.label, base_url=model.base_url, api_key=model.api_key is not None)
        out.update(provider_report(model, file))
    if isinstance(options.get("nes"), dict):
        out["nes"] = nes_report(options["nes"])
    return out


def nes_report(nes: dict[str, Any]) -> dict[str, Any]:
    """The backend of next-edit suggestions: its format, model and the endpoint it is asked at
    (chat completions for agi's prompt, `/completions` for a next-edit model's own format)."""
    fmt = str(nes.get("format") or "chat")
    try:
        model = model_for(nvim_layer({"model": nes.get("model"), "base_url": nes.get("base_url")}))
    except AgiError as e:
        return {"format": fmt, "error": str(e)}
    if fmt == "chat":
        protocol, endpoint = describe(model)
    else:
        protocol, endpoint = "completions", model.base_url.rstrip("/") + "/completions"
    return {"format": fmt, "model": model.label, "protocol": protocol, "endpoint": endpoint}


def provider_report(model: Any, file: dict[str, Any]) -> dict[str, Any]:
    """The provider's wire protocol and where its API key comes from (never the key itself):
    `api_key_source` names what supplied it, `api_key_var` the variable the provider reads,
    `api_key_needed` is true at a hosted provider's own endpoint (a local server needs none)."""
    key_var = PROVIDERS.get(model.provider, (None, None, None))[1]
    section = (file.get("providers") or {}).get(model.provider) or {}
    key_var = section.get("api_key_env") or key_var
    protocol, endpoint = describe(model)
    out: dict[str, Any] = {
        "provider": model.provider,
        "protocol": protocol,
        "endpoint": endpoint,
        "api_key_var": key_var,
        "api_key_needed": key_required(model) is not None,  # as the run decides it
    }
    sources = (
        ("AGI_API_KEY", os.environ.get("AGI_API_KEY")),
        (key_var, os.environ.get(key_var) if key_var else None),
        (f"[providers.{model.provider}] api_key in the config file", section.get("api_key")),
        ("api_key in the config file", file.get("api_key")),
    )
    if model.api_key is not None:
        out["api_key_source"] = next((name for name, value in sources if value), "the config")
    return out
