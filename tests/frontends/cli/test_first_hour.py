"""What a newcomer trips over in the first hour (issue 41): bad input is a one-line usage error
before anything is sent, and what agi did without saying is said on stderr."""

from __future__ import annotations

from fakeserver import FakeModel, text


def usage_error(result, *words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("agi: ")
    for word in words:
        assert word in result.stderr


def test_a_named_config_file_that_does_not_exist_is_exit_2(agi, tmp_path):
    with FakeModel(text("ran")) as server:
        missing = str(tmp_path / "nonexistent.toml")
        result = agi("--no-stdin", "hi", server=server, extra_env={"AGI_CONFIG": missing})
        usage_error(result, missing, "AGI_CONFIG", "does not exist")
        assert server.requests == []
        assert agi("--no-stdin", "hi", server=server).stdout == "ran\n"  # an existing one runs


def test_a_base_url_without_a_scheme_is_exit_2_and_sends_nothing(agi):
    with FakeModel(text("ran")) as server:
        port = server.url.split(":")[2].split("/")[0]
        bare = f"127.0.0.1:{port}/v1"
        result = agi("--no-stdin", "-m", "fake", "--base-url", bare, "hi")
        usage_error(result, repr(bare), "--base-url", "http://")
        result = agi("--no-stdin", "-m", "fake", "hi", extra_env={"AGI_BASE_URL": bare})
        usage_error(result, "AGI_BASE_URL")
        assert server.requests == []


def test_an_unknown_provider_prefix_is_exit_2_naming_the_closest(agi):
    usage_error(agi("--no-stdin", "-m", "olama:qwen3", "hi"), "'olama'", "ollama, openai")
    assert "did you mean 'ollama'?" in agi("--no-stdin", "-m", "olama:qwen3", "hi").stderr
    with FakeModel(text("ran")) as server:  # a local server's model names hold a colon
        result = agi("--no-stdin", "-m", "qwen3:8b", "hi", extra_env={"AGI_BASE_URL": server.url})
        assert result.returncode == 0 and server.requests[0]["model"] == "qwen3:8b"
        result = agi("--no-stdin", "-m", "olama:qwen3", "hi", server=server)
        usage_error(result, "did you mean 'ollama'?")
