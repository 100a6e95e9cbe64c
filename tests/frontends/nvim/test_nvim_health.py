"""`:checkhealth agi` names the provider, its wire protocol and endpoint, and whether an API key
was found (never the key). A real headless Neovim started with the model in its environment,
as a user's shell would start it; the report is the buffer :checkhealth writes."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import test_nvim
from test_nvim import editor, manifest, needs_nvim  # noqa: F401  (fixtures)

from conftest import PROVIDER_VARS
from fakeserver import FakeModel, text

SECRET = "sk-ant-health-0123456789abcdef"


@pytest.fixture
def health(editor: Any, monkeypatch: pytest.MonkeyPatch) -> Any:  # noqa: F811
    """health(env, server=None) -> the :checkhealth agi report of a Neovim started with `env`
    added to its environment (which has no provider variables of the developer's)."""

    base = test_nvim.nvim_env

    def run(env: dict[str, str], server: FakeModel | None = None) -> str:
        def with_env(home: Any, python: str) -> dict[str, str]:
            return {**base(home, python), **env}

        monkeypatch.setattr(test_nvim, "nvim_env", with_env)
        ed = editor(server)
        ed.nvim.command("checkhealth agi")
        return "\n".join(ed.lines())

    return run


@needs_nvim
def test_checkhealth_names_the_anthropic_provider_and_a_missing_key(health):
    report = health({"AGI_MODEL": "anthropic:claude-x"})
    assert "ERROR" not in report, report
    assert (
        "OK model: anthropic:claude-x at https://api.anthropic.com "
        "(Anthropic Messages API: POST https://api.anthropic.com/v1/messages)"
    ) in report, report
    assert "WARNING API key: none found; anthropic needs one at https://api.anthropic.com" in report
    assert "Set ANTHROPIC_API_KEY (or AGI_API_KEY)" in report, report
    assert "the python3 host runs agi" in report, report  # the rest of the report is there


@needs_nvim
def test_checkhealth_says_where_the_key_came_from_and_never_shows_it(health):
    report = health({"AGI_MODEL": "anthropic:claude-x", "ANTHROPIC_API_KEY": SECRET})
    assert "ERROR" not in report and "WARNING" not in report, report
    assert "Anthropic Messages API" in report, report
    assert "OK API key: found (from ANTHROPIC_API_KEY)" in report, report
    assert SECRET not in report and SECRET[:12] not in report, report


@needs_nvim
def test_checkhealth_openai_compatible_local_server_needs_no_key(health):
    with FakeModel(text("ok")) as server:  # AGI_MODEL=fake-model, AGI_BASE_URL=server.url
        report = health({}, server)
    assert "ERROR" not in report and "WARNING" not in report, report
    assert (
        f"OK model: openai:fake-model at {server.url} "
        f"(OpenAI-compatible chat completions: POST {server.url}/chat/completions)"
    ) in report, report
    assert "API key: none set (fine for a local server); OPENAI_API_KEY would supply one" in report


@needs_nvim
def test_checkhealth_a_hosted_openai_compatible_provider_without_its_key(health):
    report = health({"AGI_MODEL": "gemini:gemini-2.5-flash"})
    base = "https://generativelanguage.googleapis.com/v1beta/openai"
    assert f"OK model: gemini:gemini-2.5-flash at {base} (OpenAI-compatible" in report, report
    assert "WARNING API key: none found; gemini needs one" in report, report
    assert "Set GEMINI_API_KEY (or AGI_API_KEY)" in report, report


def test_the_report_names_where_the_key_came_from_and_never_holds_it(tmp_path, monkeypatch):
    """The Python side (agi.frontends.nvim.health.report), each source of a key in order."""
    from agi.frontends.nvim.health import report

    for name in list(os.environ):
        if name.startswith(PROVIDER_VARS):
            monkeypatch.delenv(name)
    config = tmp_path / "config.toml"
    monkeypatch.setenv("AGI_CONFIG", str(config))
    monkeypatch.setenv("AGI_HOME", str(tmp_path / "home"))
    config.write_text(
        'model = "corp:big"\n[providers.corp]\nbase_url = "https://llm.corp.example/v1"\n'
        'api_key_env = "CORP_TOKEN"\n'
    )
    found = report({})
    assert found["protocol"] == "OpenAI-compatible chat completions"
    assert found["endpoint"] == "https://llm.corp.example/v1/chat/completions"
    assert (found["api_key"], found["api_key_var"], found["api_key_needed"]) == (
        False,
        "CORP_TOKEN",
        False,  # not a known provider's own endpoint: agi cannot tell it needs one
    )
    monkeypatch.setenv("CORP_TOKEN", SECRET)
    assert report({})["api_key_source"] == "CORP_TOKEN"
    monkeypatch.setenv("AGI_API_KEY", SECRET)
    assert report({})["api_key_source"] == "AGI_API_KEY"  # it wins over the provider's
    monkeypatch.delenv("AGI_API_KEY")
    monkeypatch.delenv("CORP_TOKEN")
    config.write_text(f'model = "anthropic:claude-x"\napi_key = "{SECRET}"\n')
    found = report({})
    assert found["provider"] == "anthropic" and found["protocol"] == "Anthropic Messages API"
    assert found["endpoint"] == "https://api.anthropic.com/v1/messages"
    assert found["api_key_needed"] and found["api_key_source"] == "api_key in the config file"
    assert SECRET not in json.dumps(found)
    found = report({"model": "anthropic:claude-x", "base_url": "http://127.0.0.1:9/v1"})
    assert found["endpoint"] == "http://127.0.0.1:9/v1/messages"  # setup() options win
    monkeypatch.setenv("AGI_MODEL", "litellm:gpt-4o")  # a local proxy by default: none needed
    found = report({})
    assert found["api_key_var"] == "LITELLM_API_KEY" and not found["api_key_needed"]
