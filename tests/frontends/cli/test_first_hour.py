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


def test_exit_code_words_followed_by_more_words_say_criteria_need_equals(agi):
    with FakeModel(text("done")) as server:
        result = agi("--no-stdin", "--exit-code", "the tests pass", "Fix it", server=server)
        notice = [line for line in result.stderr.splitlines() if "--exit-code=CRITERIA" in line]
        assert len(notice) == 1 and notice[0].startswith("agi: ") and "all 2 words" in notice[0]
        assert "the tests pass Fix it" in server.requests[0]["messages"][-1]["content"]
        result = agi("--no-stdin", "--exit-code", "Make the tests pass", server=server)
        assert "CRITERIA" not in result.stderr  # one quoted prompt: nothing to say
        result = agi("--no-stdin", "--exit-code=the tests pass", "Fix it", server=server)
        assert "CRITERIA" not in result.stderr


def test_a_new_session_directory_with_spaces_gets_a_notice(agi, tmp_path):
    with FakeModel(text("ok")) as server:
        result = agi("--no-stdin", "-s", "You are terse", "Say hi", server=server)
        assert result.returncode == 0 and (tmp_path / "You are terse" / "meta.json").exists()
        assert result.stderr.count("\n") == 1
        assert "new session directory 'You are terse'" in result.stderr and "--sys" in result.stderr
        again = agi("--no-stdin", "-s", "You are terse", "Again", server=server)
        assert again.returncode == 0 and again.stderr == ""  # continued: nothing to say
        assert agi("--no-stdin", "-s", "plain", "hi", server=server).stderr == ""


def test_fork_says_where_the_copy_went_in_a_pipe(agi, tmp_path):
    with FakeModel(text("ok")) as server:
        assert agi("--no-stdin", "-s", "orig", "hi", server=server).returncode == 0
        result = agi("--no-stdin", "--fork", "orig", "what if", server=server)
        assert result.returncode == 0 and result.stdout == "ok\n"
        [line] = result.stderr.splitlines()
        assert line.startswith("agi: forked orig to ")
        copy = line.removeprefix("agi: forked orig to ")
        assert (tmp_path / copy / "meta.json").exists() and "orig" != copy
        named = agi("--no-stdin", "--fork", "orig", "-s", "other", "what", server=server)
        assert named.stderr == "agi: forked orig to other\n"
