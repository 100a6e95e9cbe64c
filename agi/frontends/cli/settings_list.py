"""`agi --list-settings`: the effective options, as the config file would write them, each with
the source it came from (default, the config file's path, the environment's variable, the
flag), secrets redacted; then the model, endpoint and key a run would use. Reads the config
file; sends nothing."""

from __future__ import annotations

import argparse
import json
import os
import re
from typing import Any

from agi.errors import ConfigError
from agi.frontends.cli.flags import flags_layer
from agi.options.config import config_path, load_file, resolve_model
from agi.options.table import ordered
from agi.options.values import Layer, ToolChoice, env_layer, file_layer, resolve

SECRET = re.compile(r"key|token|secret|password|authorization", re.IGNORECASE)
REDACTED = "<redacted>"


def list_settings(args: argparse.Namespace) -> str:
    """The listing: `key = value  # source`, one line an option, in the table's order."""
    path = config_path()
    layers = [file_layer(load_file(path), path), env_layer(), flags_layer(args)]
    r = resolve(layers)
    lines = [f"# config file: {path}" + ("" if path.exists() else " (none)")]
    for option in ordered():
        if not option.option or option.field != option.name:  # no_bash, no_compact: folded
            continue
        value = getattr(r.options, option.name)
        layer = r.layer_of(option.name)
        if value is None and option.default is None:
            lines.append(f"# {option.name}: not set")
            continue
        shown = _toml(option.name, option.default if value is None else value)
        lines.append(f"{option.name} = {shown}  # {_source(option.name, layer)}")
    lines.append(_model_line(r))
    return "\n".join(lines) + "\n"


def _source(name: str, layer: Layer | None) -> str:
    if layer is None:
        return "default"
    if layer.path is not None:
        return layer.path
    spelled = layer.spelled.get(name, name)
    return f"env {spelled}" if layer.source == "environment" else f"flag {spelled}"


def _toml(name: str, value: Any) -> str:
    """The value as TOML would hold it (inline tables, arrays), secrets redacted."""
    if isinstance(value, ToolChoice):
        if value.none:
            return "[]  # no tools"
        if value.allow is not None:
            value = list(value.allow)
        else:
            return '"built-in"' if value.builtin else '"none built-in"'
    if name == "api_key" and value:
        return json.dumps(REDACTED)
    return _inline(_hidden(value))


def _hidden(value: Any) -> Any:
    """Tables' secrets (`api_key`, a header's token) redacted; `api_key_env` names a variable."""
    if isinstance(value, dict):
        secret = lambda k, v: SECRET.search(k) and v and not k.endswith("_env")  # noqa: E731
        return {k: REDACTED if secret(str(k), v) else _hidden(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_hidden(v) for v in value]
    return value


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        inner = ", ".join(f"{_key(k)} = {_inline(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _model_line(r: Any) -> str:
    """What `model`, `base_url` and the keys make of it: the provider, endpoint and where the
    key comes from (its variable), never the key."""
    try:
        model = resolve_model(r, config_path())
    except ConfigError as e:
        return f"# the model: {e}"
    given = r.layer_of("api_key")
    if not model.api_key:
        key = "no key"
    elif given is not None and given.path is None and r.options.api_key == model.api_key:
        key = f"the key of {r.where('api_key')}"  # AGI_API_KEY, a front end's
    elif model.key_env and os.environ.get(model.key_env) == model.api_key:
        key = f"the key of {model.key_env}"
    elif ((r.options.providers or {}).get(model.provider) or {}).get("api_key"):
        key = f"the api_key of [providers.{model.provider}] in {config_path()}"
    else:
        key = f"the api_key of {config_path()}"
    return f"# the model: {model.label} at {model.base_url}, {key}"
