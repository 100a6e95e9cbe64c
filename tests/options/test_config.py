"""Model configuration: presets, precedence of flag > env > config file, and config-file errors.

The first half calls `resolve_model` in-process (it reads `os.environ`); the second half drives the
real executable with a config.toml at `$AGI_CONFIG` (the `env` fixture points it at tmp_path).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agi.errors import ConfigError
from agi.options.config import load_file, resolve_model

from conftest import PROVIDER_VARS
from fakeserver import FakeModel, call, text

CONFIG = Path("/nonexistent/agi/config.toml")  # only used in messages


@pytest.fixture
def clean(monkeypatch):
    """No provider or agi variables of the developer's; returns monkeypatch for setting some."""
    for name in list(os.environ):
        if name.startswith(PROVIDER_VARS):
            monkeypatch.delenv(name)
    return monkeypatch


def layered(flags: dict, file: dict, path: Path):
    """resolve_model over the layers a run has: the file, the environment, the flags."""
    from agi.options.values import env_layer, file_layer, overlay
    from agi.options.values import resolve as lay

    layers = [file_layer(file, path), env_layer(), overlay("command line", **flags)]
    return resolve_model(lay(layers), path)


def resolve(model: str | None = None, base_url: str | None = None, file: dict | None = None):
    return layered({"model": model, "base_url": base_url}, file or {}, CONFIG)


# ---------------------------------------------------------------- presets, in-process


def test_openai_preset(clean):
    m = resolve("openai:gpt-4o-mini")
    assert (m.provider, m.model, m.base_url, m.api_key) == (
        "openai",
        "gpt-4o-mini",
        "https://api.openai.com/v1",
        None,
    )
    clean.setenv("OPENAI_API_KEY", "sk-openai")
    clean.setenv("OPENAI_BASE_URL", "https://proxy.example/v1")
    m = resolve("openai:gpt-4o-mini")
    assert (m.base_url, m.api_key) == ("https://proxy.example/v1", "sk-openai")
    assert m.label == "openai:gpt-4o-mini"


def test_deepseek_preset_uses_its_own_key_only(clean):
    clean.setenv("OPENAI_API_KEY", "sk-openai")
    clean.setenv("OPENAI_BASE_URL", "https://proxy.example/v1")
    m = resolve("deepseek:deepseek-chat")
    assert (m.provider, m.model) == ("deepseek", "deepseek-chat")
    assert m.base_url == "https://api.deepseek.com/v1"  # OPENAI_BASE_URL is for openai only
    assert m.api_key is None  # the OpenAI key is not sent to another provider
    clean.setenv("DEEPSEEK_API_KEY", "sk-deepseek")
    assert resolve("deepseek:deepseek-chat").api_key == "sk-deepseek"


def test_openrouter_preset_keeps_slashes_in_the_model(clean):
    clean.setenv("OPENROUTER_API_KEY", "sk-or")
    m = resolve("openrouter:anthropic/claude-3.5-sonnet")
    assert (m.provider, m.model, m.base_url, m.api_key) == (
        "openrouter",
        "anthropic/claude-3.5-sonnet",
        "https://openrouter.ai/api/v1",
        "sk-or",
    )


def test_litellm_preset_with_its_variables(clean):
    m = resolve("litellm:gpt-4o")
    assert (m.provider, m.model, m.base_url, m.api_key) == (
        "litellm",
        "gpt-4o",
        "http://localhost:4000/v1",
        None,
    )
    clean.setenv("LITELLM_BASE_URL", "http://gateway:4000/v1")
    clean.setenv("LITELLM_API_KEY", "sk-litellm")
    m = resolve("litellm:gpt-4o")
    assert (m.base_url, m.api_key) == ("http://gateway:4000/v1", "sk-litellm")


def test_ollama_model_with_a_colon_in_its_tag(clean):
    clean.setenv("OPENAI_API_KEY", "sk-openai")
    m = resolve("ollama:qwen3:8b")
    assert (m.provider, m.model, m.base_url, m.api_key) == (
        "ollama",
        "qwen3:8b",
        "http://localhost:11434/v1",
        None,
    )


def test_unknown_prefix_is_a_bare_model_at_an_endpoint_given(clean):
    m = resolve("qwen3:8b", base_url="http://gpu-box:8000/v1")
    assert (m.provider, m.model, m.base_url) == ("openai", "qwen3:8b", "http://gpu-box:8000/v1")
    m = resolve("gpt-4o-mini")
    assert (m.provider, m.model) == ("openai", "gpt-4o-mini")
    assert resolve("ft:gpt-4o-mini:org::abc").model == "ft:gpt-4o-mini:org::abc"  # fine-tuned
    with pytest.raises(ConfigError, match="unknown provider 'qwen3'"):  # not at OpenAI's own
        resolve("qwen3:8b")
    with pytest.raises(ConfigError, match="did you mean 'ollama'"):  # a typo, whatever the URL
        resolve("olama:qwen3", base_url="http://gpu-box:8000/v1")


def test_model_precedence_flag_env_file(clean):
    file = {"model": "deepseek:from-file"}
    assert resolve(file=file).label == "deepseek:from-file"
    clean.setenv("AGI_MODEL", "ollama:from-env")
    assert resolve(file=file).label == "ollama:from-env"
    assert resolve("openai:from-flag", file=file).label == "openai:from-flag"


def test_no_model_anywhere_is_a_config_error(clean):
    with pytest.raises(ConfigError) as e:
        resolve()
    assert "AGI_MODEL" in str(e.value) and str(CONFIG) in str(e.value)


def test_base_url_precedence(clean):
    """flag > AGI_BASE_URL > config file > OPENAI_BASE_URL > the provider's default."""
    file = {"base_url": "http://file/v1"}
    assert resolve("openai:m").base_url == "https://api.openai.com/v1"
    clean.setenv("OPENAI_BASE_URL", "http://openai-var/v1")
    assert resolve("openai:m").base_url == "http://openai-var/v1"
    assert resolve("openai:m", file=file).base_url == "http://file/v1"
    clean.setenv("AGI_BASE_URL", "http://agi-var/v1")
    assert resolve("openai:m", file=file).base_url == "http://agi-var/v1"
    assert resolve("openai:m", "http://flag/v1", file=file).base_url == "http://flag/v1"


def test_agi_api_key_beats_the_providers_variable(clean):
    clean.setenv("OPENAI_API_KEY", "sk-openai")
    clean.setenv("DEEPSEEK_API_KEY", "sk-deepseek")
    clean.setenv("AGI_API_KEY", "sk-agi")
    assert resolve("openai:m").api_key == "sk-agi"
    assert resolve("deepseek:m").api_key == "sk-agi"
    assert resolve("ollama:m").api_key == "sk-agi"


def test_custom_provider_table_makes_name_model_work(clean, tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(
        '[providers.vllm]\nbase_url = "http://gpu-box:8000/v1"\napi_key_env = "VLLM_TOKEN"\n'
    )
    file = load_file(path)
    m = layered({"model": "vllm:meta-llama/Llama-3-8B"}, file, path)
    assert (m.provider, m.model, m.base_url, m.api_key) == (
        "vllm",
        "meta-llama/Llama-3-8B",
        "http://gpu-box:8000/v1",
        None,
    )
    clean.setenv("VLLM_TOKEN", "tok-vllm")
    clean.setenv("OPENAI_API_KEY", "sk-openai")
    m = layered({"model": "vllm:meta-llama/Llama-3-8B"}, file, path)
    assert m.api_key == "tok-vllm"
    # a name not in the table is a usage error naming the table's providers too
    with pytest.raises(ConfigError, match="openrouter, vllm"):
        layered({"model": "other:thing"}, file, path)


def test_missing_config_file_is_empty(tmp_path):
    assert load_file(tmp_path / "absent.toml") == {}


# ---------------------------------------------------------------- through the executable


def write_config(env: dict[str, str], text_: str) -> Path:
    path = Path(env["AGI_CONFIG"])
    path.write_text(text_)
    return path


def test_config_file_model_provider_and_max_steps_are_used(agi, env):
    with FakeModel(call("Bash", command="true")) as server:
        write_config(
            env,
            f'model = "local:file-model"\nmax_steps = 2\n\n'
            f'[providers.local]\nbase_url = "{server.url}"\n',
        )
        r = agi("loop")
    assert r.returncode == 4, r.stderr  # max_steps from the file
    assert "step limit" in r.stderr and r.stderr.count("\n") == 1
    assert len(server.requests) == 2
    assert [req["model"] for req in server.requests] == ["file-model", "file-model"]


def test_config_file_alone_answers(agi, env):
    with FakeModel(text("from the config")) as server:
        write_config(env, f'model = "local:m"\n[providers.local]\nbase_url = "{server.url}"\n')
        r = agi("hi")
    assert (r.returncode, r.stdout, r.stderr) == (0, "from the config\n", "")
    assert server.requests[0]["model"] == "m"


def test_model_flag_beats_env_beats_file(agi, env):
    with FakeModel(text("ok")) as server:
        write_config(
            env, f'model = "local:file-model"\n[providers.local]\nbase_url = "{server.url}"\n'
        )
        both = {"AGI_MODEL": "local:env-model"}
        r_flag = agi("-m", "local:flag-model", "hi", extra_env=both)
        r_env = agi("hi", extra_env=both)
        r_file = agi("hi")
    for r in (r_flag, r_env, r_file):
        assert r.returncode == 0, r.stderr
    assert [req["model"] for req in server.requests] == ["flag-model", "env-model", "file-model"]


def test_base_url_flag_beats_env_beats_file(agi, env):
    with FakeModel(text("flag")) as s1, FakeModel(text("env")) as s2, FakeModel(text("file")) as s3:
        write_config(env, f'model = "m"\nbase_url = "{s3.url}"\n')
        r_flag = agi("--base-url", s1.url, "hi", extra_env={"AGI_BASE_URL": s2.url})
        r_env = agi("hi", extra_env={"AGI_BASE_URL": s2.url, "OPENAI_BASE_URL": s1.url})
        r_file = agi("hi", extra_env={"OPENAI_BASE_URL": s1.url})
    assert [r.stdout for r in (r_flag, r_env, r_file)] == ["flag\n", "env\n", "file\n"]
    assert (len(s1.requests), len(s2.requests), len(s3.requests)) == (1, 1, 1)


def assert_config_error(r, path: Path, server: FakeModel, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stdout == ""
    assert r.stderr.startswith("agi: ") and r.stderr.count("\n") == 1, r.stderr
    assert str(path) in r.stderr, r.stderr
    for word in words:
        assert word in r.stderr, r.stderr
    assert server.requests == []


def test_malformed_toml_exits_2_naming_the_file(agi, env):
    with FakeModel(text("never")) as server:
        path = write_config(env, 'model = "m"\nmax_steps = \n')
        r = agi("hi", server=server)
    assert_config_error(r, path, server, "line 2")


def test_unknown_setting_exits_2_naming_it(agi, env):
    with FakeModel(text("never")) as server:
        path = write_config(env, 'colour = "red"\n')
        r = agi("hi", server=server)
    assert_config_error(r, path, server, "colour")


@pytest.mark.parametrize(
    "content, key",
    [
        ('max_steps = "ten"\n', "max_steps"),
        ("verbose = 1\n", "verbose"),
        ('model = ["a", "b"]\n', "model"),
        ("max_steps = true\n", "max_steps"),
        ("timeout = true\n", "timeout"),  # a bool is not a number of seconds
        ("sys = [1]\n", "sys"),
        ("tools = [1, 2]\n", "tools"),
        ('model = "local:m"\n[providers.local]\nbase_url = 5\n', "base_url"),
    ],
    ids=[
        "max_steps-str",
        "verbose-int",
        "model-list",
        "max_steps-bool",
        "timeout-bool",
        "sys-list-of-int",
        "tools-list-of-int",
        "provider-base_url-int",
    ],
)
def test_wrong_type_exits_2_naming_the_file(agi, env, content, key):
    with FakeModel(text("never")) as server:
        path = write_config(env, content)
        extra = {"AGI_MODEL": "local:m", "AGI_BASE_URL": ""} if "providers" in content else {}
        r = agi("hi", server=server, extra_env=extra)
    assert_config_error(r, path, server, key)


@pytest.mark.parametrize(
    "content, key",
    [
        ("max_steps = 0\n", "max_steps"),
        ("timeout = -1\n", "timeout"),
        ('output = "yaml"\n', "output"),
    ],
    ids=["max_steps-zero", "timeout-negative", "output-unknown"],
)
def test_file_values_are_checked_like_their_flags(agi, env, content, key):
    """`--max-steps 0`, `--timeout -1`, `--output yaml` exit 2; the same values in the file too."""
    with FakeModel(text("never")) as server:
        flag = "--" + key.replace("_", "-")
        value = content.split("=")[1].strip().strip('"')
        r_flag = agi(f"{flag}={value}", "hi", server=server)
        assert r_flag.returncode == 2, r_flag.stderr
        path = write_config(env, content)
        r = agi("hi", server=server)
    assert_config_error(r, path, server, key)
