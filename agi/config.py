"""One merge of the settings: defaults < config.toml < environment < command-line flags."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agi.errors import ConfigError

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

# what each config-file key may hold: (check, description); keys are the flags' names
_str = (lambda v: isinstance(v, str) and v != "", "a non-empty string")
_bool = (lambda v: isinstance(v, bool), "true or false")
_positive = (
    lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf"),
    "a positive number",
)
MAX_SECONDS = 1e6  # a longer timeout is this one (about eleven days): no overflow, no surprise


def seconds(value: float | None) -> float | None:
    return None if value is None else min(float(value), MAX_SECONDS)


_names = (
    lambda v: isinstance(v, str) or isinstance(v, list) and all(isinstance(x, str) for x in v),
    "a string or a list of strings",
)
FILE_KEYS: dict[str, tuple[Any, str]] = {
    "model": _str,
    "base_url": _str,
    "api_key": _str,
    "provider": _str,
    "max_steps": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
        "a positive integer",
    ),
    "timeout": _positive,
    "idle_timeout": _positive,
    "max_tokens": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
        "a positive integer",
    ),
    "sys": _names,
    "tools": _names,
    "no_bash": _bool,
    "no_tools": _bool,
    "verbose": _bool,
    "quiet": _bool,
    "output": (lambda v: v in ("text", "json", "jsonl"), "one of text, json, jsonl"),
    "params": (lambda v: isinstance(v, dict), "a table"),
    "providers": (lambda v: isinstance(v, dict), "a table of tables"),
    "hooks": _names,
    "skills": _names,
    "agents": _names,
    "tool": _names,
    "tools_dir": _names,
    "mcp": _names,
    "schema": _str,
    "exit_code": (lambda v: isinstance(v, (bool, str)), "true, false or the criteria"),
    "react": _bool,
    "sandbox": (
        lambda v: v in ("off", "read-only", "workspace"),
        "one of off, read-only, workspace",
    ),
    "allow_write": _names,
    "no_network": _bool,
    "max_cost": _positive,
    "context_window": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 256,
        "a number of tokens (at least 256)",
    ),
    "compact": (lambda v: v in ("auto", "off"), 'one of "auto", "off"'),
    "no_compact": _bool,
    "compact_threshold": (
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1,
        "a fraction of the context window, above 0 and at most 1",
    ),
    "models": (lambda v: isinstance(v, dict), 'a table of [models."NAME"] tables'),
    "prices": (lambda v: isinstance(v, dict), 'a table of [prices."MODEL"] tables'),
    "plugins": _names,
    "settings": _names,
    "allow": _names,
    "ask": _names,
    "deny": _names,
    "permission_mode": (lambda v: v in ("default", "dontAsk"), 'one of "default", "dontAsk"'),
}
MODEL_KEYS: dict[str, tuple[Any, str]] = {"context_window": FILE_KEYS["context_window"]}
PROVIDER_KEYS: dict[str, tuple[Any, str]] = {
    "base_url": _str,
    "api_key": _str,
    "api_key_env": _str,
    "params": (lambda v: isinstance(v, dict), "a table"),
}
_price = (
    lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
    "a number of USD per million tokens",
)
PRICE_KEYS: dict[str, tuple[Any, str]] = dict.fromkeys(
    ("input", "output", "cached", "cache_write"), _price
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
        raise ConfigError(f"config file {path}: unknown setting {name!r}")
    valid, description = rules[key]
    if not valid(value):
        raise ConfigError(f"config file {path}: {name} must be {description}, not {value!r}")


def config_path() -> Path:
    if os.environ.get("AGI_CONFIG"):
        return Path(os.environ["AGI_CONFIG"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "agi" / "config.toml"


def agi_home() -> Path:
    if os.environ.get("AGI_HOME"):
        return Path(os.environ["AGI_HOME"]).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "agi"


def load_file(path: Path) -> dict[str, Any]:
    """The config file's settings; a missing file is empty, a broken one a ConfigError."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e
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

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"


def split_model(spec: str, known: dict[str, Any]) -> tuple[str | None, str]:
    """`provider:model` when the prefix names a provider; else a bare model (which may hold `:`)."""
    prefix, sep, rest = spec.partition(":")
    if sep and rest and (prefix in PROVIDERS or prefix in known):
        return prefix, rest
    return None, spec


def resolve_model(flags: dict[str, Any], file: dict[str, Any], path: Path) -> ModelConfig:
    """Pick model, endpoint and key by the contract's precedence."""
    env = os.environ
    custom: dict[str, Any] = file.get("providers") or {}
    spec = flags.get("model") or env.get("AGI_MODEL") or file.get("model")
    if not spec:
        raise ConfigError(NO_MODEL.format(path=path))
    provider, model = split_model(spec, custom)
    provider = provider or file.get("provider") or "openai"
    section = custom.get(provider) or {}
    if not isinstance(section, dict):
        raise ConfigError(f"config file {path}: providers.{provider} must be a table")
    default_url, key_var, url_var = PROVIDERS.get(provider, (None, None, None))
    base_url = (
        flags.get("base_url")
        or env.get("AGI_BASE_URL")
        or file.get("base_url")
        or section.get("base_url")
        or (env.get(url_var) if url_var else None)
        or default_url
    )
    if not base_url:
        raise ConfigError(
            f"no endpoint for provider {provider!r}: pass --base-url URL, set AGI_BASE_URL, "
            f'or add [providers.{provider}] base_url = "..." to {path}'
        )
    key_var = section.get("api_key_env") or key_var
    api_key = (
        env.get("AGI_API_KEY")
        or (env.get(key_var) if key_var else None)
        or section.get("api_key")
        or file.get("api_key")
    )
    params = dict(file.get("params") or {})
    params.update(section.get("params") or {})
    idle = seconds(file.get("idle_timeout") or 300.0) or 300.0
    max_tokens = file.get("max_tokens")
    return ModelConfig(provider, model, base_url, api_key or None, params, idle, max_tokens)


def merged(flags: dict[str, Any], file: dict[str, Any], key: str, default: Any = None) -> Any:
    """A flag if given, else the config file's value, else the default."""
    value = flags.get(key)
    if value is not None:
        return value
    return file.get(key, default)


def paths(flags: dict[str, Any], file: dict[str, Any], key: str, default: Path) -> list[Path]:
    """A repeatable path option: the config directory's default (if present), then the flags'
    values, or the config file's when no flag is given. A path named twice counts once."""
    value = flags.get(key) if flags.get(key) is not None else file.get(key)
    given = [value] if isinstance(value, str) else list(value or [])
    found = [default] if default.exists() else []
    unique: dict[str, Path] = {}
    for path in [*found, *(Path(p).expanduser() for p in given)]:
        unique.setdefault(os.path.realpath(path), path)
    return list(unique.values())
