"""The config file (read and checked), where agi keeps its state, and the model's endpoint and key
as the resolved options (agi.options.values) and the provider presets decide."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.errors import ConfigError
from agi.fileio import read_limited
from agi.options import checks
from agi.options.table import file_checks

if TYPE_CHECKING:
    from agi.options.values import Resolved

# provider: (default base URL, API key variable, base URL variable)
PROVIDERS: dict[str, tuple[str, str | None, str | None]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "deepseek": ("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", None),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", None),
    "litellm": ("http://localhost:4000/v1", "LITELLM_API_KEY", "LITELLM_BASE_URL"),
    "ollama": ("http://localhost:11434/v1", None, None),
    # the Messages API (agi.providers.anthropic), not chat completions: its base has no /v1
    "anthropic": ("https://api.anthropic.com", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "gemini": ("https://generativelanguage.googleapis.com/v1beta/openai", "GEMINI_API_KEY", None),
}

NO_MODEL = (
    "no model configured: pass -m PROVIDER:MODEL (e.g. -m openai:gpt-4o-mini or "
    '-m ollama:qwen3), set AGI_MODEL, or put model = "..." in {path}'
)


class NoModel(ConfigError):
    """No model is configured (NO_MODEL): the servers report it to their clients (docs: acp)."""


MAX_SECONDS = 1e6  # a longer timeout is this one (about eleven days): no overflow, no surprise


def seconds(value: float | None) -> float | None:
    return None if value is None else min(float(value), MAX_SECONDS)


# what each config-file key may hold: (check, description), from the option table
FILE_KEYS: dict[str, tuple[Any, str]] = file_checks()
MODEL_KEYS: dict[str, tuple[Any, str]] = {
    "context_window": FILE_KEYS["context_window"],
    "api": FILE_KEYS["api"],
}
PROVIDER_KEYS: dict[str, tuple[Any, str]] = {
    "base_url": checks.TEXT,
    "api_key": checks.TEXT,
    "api_key_env": checks.TEXT,
    "params": checks.table("a table"),
    "rpm": checks.POSITIVE,  # pacing (docs: volume)
    "tpm": checks.POSITIVE,
    "max_concurrent": checks.COUNT,
    "api": FILE_KEYS["api"],
}
PROFILE_KEYS: dict[str, tuple[Any, str]] = {  # `[profiles.NAME]` (agi --serve, docs: serve)
    k: FILE_KEYS[k]
    for k in ("model", "sys", "tools", "permission_mode", "max_steps", "timeout", "max_cost")
}
PROFILE_KEYS["schema"] = (lambda v: isinstance(v, (str, dict)), "the --schema DSL or a table")
PRICE_KEYS: dict[str, tuple[Any, str]] = dict.fromkeys(
    ("input", "output", "cached", "cache_write", "batch_input", "batch_output"), checks.PRICE
)


def _check_tables(
    path: Path, section: str, tables: dict[str, Any], rules: dict[str, tuple[Any, str]]
) -> None:
    """`[SECTION."NAME"]` tables: each a table whose keys follow `rules`."""
    for name, table in tables.items():
        where = f"{section}.{name}" if section == "providers" else f'{section}."{name}"'
        if not isinstance(table, dict):
            raise ConfigError(f"config file {path}: {where} must be a table")
        for key, value in table.items():
            _check(path, f"{where}.{key}", value, rules)


def _check_prices(path: Path, prices: dict[str, Any]) -> None:
    """`[prices."MODEL"]` tables: input and output required, cached and cache_write optional."""
    _check_tables(path, "prices", prices, PRICE_KEYS)
    for name, table in prices.items():
        missing = [k for k in ("input", "output") if k not in table]
        if missing:
            raise ConfigError(
                f'config file {path}: prices."{name}" needs {" and ".join(missing)} '
                "(USD per million tokens)"
            )


def _check(path: Path, name: str, value: Any, rules: dict[str, tuple[Any, str]]) -> None:
    key = name.rpartition(".")[2]
    if key not in rules:
        import difflib  # lazy: only for a key that is not one

        close = difflib.get_close_matches(key, list(rules), n=1, cutoff=0.6)
        hint = f"; did you mean {name[: len(name) - len(key)] + close[0]!r}?" if close else ""
        raise ConfigError(f"config file {path}: unknown setting {name!r}{hint}")
    valid, description = rules[key]
    if not valid(value):
        raise ConfigError(f"config file {path}: {name} must be {description}, not {value!r}")


def config_path() -> Path:
    if os.environ.get("AGI_CONFIG"):
        return Path(os.environ["AGI_CONFIG"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "agi" / "config.toml"


def check_named_config() -> None:
    """A config file named by `$AGI_CONFIG` must exist: a typo would otherwise run without it
    (the default path may be missing; docs: configuration)."""
    named = os.environ.get("AGI_CONFIG")
    if named and not Path(named).expanduser().exists():
        raise ConfigError(
            f"config file {named} (AGI_CONFIG) does not exist: create it, or unset AGI_CONFIG "
            "to use the default"
        )


def agi_home() -> Path:
    if os.environ.get("AGI_HOME"):
        return Path(os.environ["AGI_HOME"]).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "agi"


_parsed: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}  # path -> (stamp, settings)


def load_file(path: Path) -> dict[str, Any]:
    """The config file's settings; a missing file is empty, a broken one a ConfigError. A
    process serving many runs (MCP server, batch, ACP) parses it again only when it changed."""
    try:
        raw = read_limited(path)  # bounded, regular files only (docs: security)
        stat = path.stat()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e
    stamp = (stat.st_mtime_ns, len(raw))
    cached = _parsed.get(str(path))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8", "replace"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path}: {e}") from e
    for key, value in data.items():
        _check(path, key, value, FILE_KEYS)
    _check_tables(path, "providers", data.get("providers") or {}, PROVIDER_KEYS)
    _check_prices(path, data.get("prices") or {})
    _check_tables(path, "models", data.get("models") or {}, MODEL_KEYS)
    _check_tables(path, "profiles", data.get("profiles") or {}, PROFILE_KEYS)
    _parsed[str(path)] = (stamp, data)
    return data


@dataclass
class ModelConfig:
    provider: str
    model: str
    base_url: str
    api_key: str | None = field(default=None, repr=False)
    params: dict[str, Any] = field(default_factory=dict)
    idle_timeout: float = 300.0
    max_tokens: int | None = None  # the Messages API requires one; else a per-model default
    key_env: str | None = None  # the variable the key comes from (agi.providers.endpoint)
    api: str | None = None  # "responses" or "chat": the wire protocol (docs: responses)
    service_tier: str | None = None  # OpenAI's processing tier (docs: responses)
    cache_key: bool = True  # send OpenAI a prompt_cache_key (docs: volume)
    rpm: float | None = None  # pacing: requests a minute to this provider (docs: volume)
    tpm: float | None = None  # tokens a minute
    max_concurrent: int | None = None  # requests in flight at once

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"


def split_model(spec: str, known: dict[str, Any]) -> tuple[str | None, str]:
    """`provider:model` when the prefix names a provider; else a bare model (which may hold `:`)."""
    prefix, sep, rest = spec.partition(":")
    if sep and rest and (prefix in PROVIDERS or prefix in known):
        return prefix, rest
    return None, spec


def unknown_prefix(spec: str, known: dict[str, Any], endpoint_given: bool) -> None:
    """`-m olama:qwen3`: a prefix that names no provider is a usage error when it is close to
    one, or when no endpoint was given that could serve a model named with a colon (a local
    server's `qwen3:8b`); OpenAI's fine-tuned `ft:...` names pass."""
    import difflib  # lazy: only for a model named with a colon

    prefix, sep, rest = spec.partition(":")
    if not (sep and rest and prefix) or prefix == "ft" or "/" in prefix:
        return
    names = sorted({*PROVIDERS, *known})
    # a typo is one letter off (olama, opnai: 0.9); a local model's name is further (llama3: 0.83)
    if endpoint_given and not difflib.get_close_matches(prefix, names, n=1, cutoff=0.86):
        return
    close = difflib.get_close_matches(prefix, names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown provider {prefix!r} in -m {spec} (known: {', '.join(names)}){hint}")


def check_base_url(r: Resolved, base_url: str) -> None:
    """A base URL is `http(s)://HOST...`; anything else is a usage error before a byte is sent."""
    from urllib.parse import urlsplit  # lazy: only once an endpoint is chosen

    try:
        parts = urlsplit(base_url)
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok:
        layer = r.layer_of("base_url")
        where = f" ({layer.where('base_url')})" if layer is not None else ""
        raise ConfigError(
            f"base URL {base_url!r}{where} must start with http:// or https:// and name a host"
        )


def resolve_model(r: Resolved, path: Path) -> ModelConfig:
    """Pick model, endpoint and key by the contract's precedence: the options' layers (config
    file < environment < front end), then the provider's table, its variables, its preset."""
    env = os.environ
    o = r.options
    custom: dict[str, Any] = o.providers or {}
    spec = o.model
    if not spec:
        raise NoModel(NO_MODEL.format(path=path))
    provider, model = split_model(spec, custom)
    named = provider is not None
    provider = provider or o.provider or "openai"
    section = custom.get(provider) or {}
    if not isinstance(section, dict):
        raise ConfigError(f"config file {path}: providers.{provider} must be a table")
    default_url, key_var, url_var = PROVIDERS.get(provider, (None, None, None))
    base_url = (
        o.base_url
        or section.get("base_url")
        or (env.get(url_var) if url_var else None)
        or default_url
    )
    if not base_url:
        raise ConfigError(
            f"no endpoint for provider {provider!r}: pass --base-url URL, set AGI_BASE_URL, "
            f'or add [providers.{provider}] base_url = "..." to {path}'
        )
    if not named:
        unknown_prefix(spec, custom, base_url != default_url)
    check_base_url(r, base_url)
    key_var = section.get("api_key_env") or key_var
    given = r.layer_of("api_key")  # AGI_API_KEY or a front end's key: before the provider's
    later = o.api_key if given is not None and given.path is None else None
    api_key = (
        later or (env.get(key_var) if key_var else None) or section.get("api_key") or o.api_key
    )
    params = dict(o.params or {})
    params.update(section.get("params") or {})
    idle = seconds(o.idle_timeout or 300.0) or 300.0
    return ModelConfig(
        provider,
        model,
        base_url,
        api_key or None,
        params,
        idle,
        o.max_tokens,
        key_var,
        chosen_api(r, section, model),
        o.service_tier,
        cache_key=o.prompt_cache_key is not False,
        rpm=o.rpm or section.get("rpm"),
        tpm=o.tpm or section.get("tpm"),
        max_concurrent=section.get("max_concurrent"),
    )


def chosen_api(r: Resolved, section: dict[str, Any], model: str) -> str | None:
    """`api`: the command line's or a front end's (`--api`), else the model's table
    (`[models."NAME"]`), else the provider's, else the config file's own key (docs: responses)."""
    o = r.options
    given = r.layer_of("api")
    if o.api and given is not None and given.path is None:
        return o.api
    table = (o.models or {}).get(model)
    for found in (table if isinstance(table, dict) else {}, section):
        if found.get("api") in ("responses", "chat"):
            return str(found["api"])
    return o.api
