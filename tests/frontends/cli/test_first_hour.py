"""What a newcomer trips over in the first hour (issue 41): bad input is a one-line usage error
before anything is sent, and what agi did without saying is said on stderr."""

from __future__ import annotations

import shutil

import pytest

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
        assert (tmp_path / copy / "meta.json").exists() and copy != "orig"
        named = agi("--no-stdin", "--fork", "orig", "-s", "other", "what", server=server)
        assert named.stderr == "agi: forked orig to other\n"


def test_continue_skips_batch_jobs_which_are_still_listed(agi, tmp_path):
    (tmp_path / "prompts.txt").write_text("Classify inquiry 1\nClassify inquiry 2\n")
    with FakeModel(text("ok")) as server:
        assert agi("--no-stdin", "-s", "mine", "Read main.py", server=server).returncode == 0
        batch = agi("--batch", "prompts.txt", "--batch-out", "out.jsonl", server=server)
        assert batch.returncode == 0, batch.stderr
        done = agi("--no-stdin", "-c", "where were we?", server=server)
        assert done.returncode == 0, done.stderr
        sent = [m.get("content") for m in server.requests[-1]["messages"]]
        assert "Read main.py" in sent and not any("inquiry" in str(m) for m in sent)
        listed = agi("--list-sessions").stdout  # in a pipe: every session, no header
        assert listed.count("Classify inquiry") == 2 and "Read main.py" in listed


def on_a_terminal(argv: list[str], env: dict[str, str], cwd) -> str:
    """What agi writes to stdout when stdout is a terminal (a pseudo-terminal here)."""
    import os
    import pty
    import subprocess

    leader, follower = pty.openpty()
    done = subprocess.run(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=subprocess.PIPE,
        timeout=60,
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other side is closed and drained
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert done.returncode == 0, done.stderr
    return out.decode().replace("\r\n", "\n")


def test_list_sessions_on_a_terminal_has_a_header_and_the_newest_twenty(agi, env, tmp_path):
    from conftest import AGI

    home = tmp_path / "agi-home"
    home.mkdir()
    lines = []
    for n in range(23):  # sessions as the index knows them: a directory with meta.json
        session = tmp_path / f"s{n}"
        session.mkdir()
        (session / "meta.json").write_text(f'{{"first_prompt": "question {n}"}}')
        lines.append(f'{{"path": "{session}", "time": {n}}}\n')
    (home / "index.jsonl").write_text("".join(lines))
    shown = on_a_terminal([AGI, "--list-sessions"], env, tmp_path).splitlines()
    assert shown[0].split("\t")[0] == "PATH" and "FIRST PROMPT" in shown[0]
    assert len(shown) == 22 and "question 22" in shown[1] and "question 3" in shown[20]
    assert shown[21] == "(3 older not shown: agi --list-sessions | cat lists every one)"
    piped = agi("--list-sessions").stdout.splitlines()
    assert len(piped) == 23 and "question 0" in piped[22]


def test_show_of_a_path_that_is_no_directory_says_it_is_not_a_session(agi, tmp_path):
    usage_error(agi("--show", "/nonexistent"), "/nonexistent is not a session (no such directory)")
    (tmp_path / "file").write_text("x")
    usage_error(agi("--show", "file"), "file is not a session (not a directory)")


def test_the_big_file_notice_is_once_a_session_and_not_in_a_pipe(agi, tmp_path):
    from fakeserver import call

    if shutil.which("git") is None:
        pytest.skip("checkpoints snapshot with git: not installed")
    work = tmp_path / "work"
    work.mkdir()
    with (work / "big.bin").open("wb") as f:
        f.truncate(6 << 20)  # over 5 MB: left out of the snapshot

    def run(session: str, *flags: str) -> list[str]:
        with FakeModel(call("Bash", command="echo x > a.txt"), text("ok")) as server:
            done = agi("--no-stdin", "-s", session, *flags, "do it", server=server, cwd=work)
        assert done.returncode == 0, done.stderr
        return [line for line in done.stderr.splitlines() if "over 5 MB" in line]

    assert run("../piped") == []  # a pipe: not a word
    [notice] = run("../watched", "-v")
    assert notice.startswith("agi: checkpoints: 1 file(s) over 5 MB") and "big.bin" in notice
    assert run("../watched", "-v") == []  # the session was told


def test_rewind_files_of_a_turn_without_a_snapshot_is_exit_2(agi, tmp_path):
    from fakeserver import call

    with FakeModel(call("Bash", command="echo x > a.txt"), text("ok")) as server:
        ran = agi("--no-stdin", "--no-checkpoints", "-s", "s", "do it", server=server)
    assert ran.returncode == 0 and (tmp_path / "a.txt").exists()
    before = (tmp_path / "s" / "messages.jsonl").read_bytes()
    result = agi("-s", "s", "--rewind-files", "1")
    usage_error(result, "turn 1 had no snapshot", "nothing was changed")
    assert (tmp_path / "a.txt").exists() and (
        tmp_path / "s" / "messages.jsonl"
    ).read_bytes() == before


def test_schema_naming_a_file_hints_at_the_at_sign(agi, tmp_path):
    (tmp_path / "s.json").write_text('{"type": "object", "properties": {"n": {"type": "integer"}}}')
    with FakeModel(text('{"n": 1}')) as server:
        usage_error(
            agi("--no-stdin", "--schema", "s.json", "hi", server=server), "--schema @s.json"
        )
        assert server.requests == []
        assert agi("--no-stdin", "--schema", "@s.json", "hi", server=server).stdout == '{"n":1}\n'


def test_batch_verbose_in_a_pipe_shows_progress_lines(agi, tmp_path):
    (tmp_path / "prompts.txt").write_text("one\ntwo\nthree\n")
    with FakeModel(text("ok")) as server:
        quiet = agi("--batch", "prompts.txt", server=server)
        assert quiet.returncode == 0 and "agi batch:" not in quiet.stderr  # a pipe: silent
        shown = agi("--batch", "prompts.txt", "-v", server=server)
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stderr.splitlines() if line.startswith("agi batch: ")]
    assert lines and lines[-1].startswith("agi batch: 3/3 done, 0 failed, 0 running")
    assert "\r" not in shown.stderr and "\x1b" not in shown.stderr  # lines, not redraws


def test_batch_progress_after_ctrl_c_has_no_eta(env, tmp_path):
    import signal
    import time

    from conftest import AGI, start_agi

    (tmp_path / "prompts.txt").write_text("one\ntwo\nthree\n")
    with FakeModel(text("ok"), text("ok", delay=1.5)) as server:  # job 2 still running at ^C
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        argv = [AGI, "--batch", str(tmp_path / "prompts.txt"), "--jobs", "1", "-v"]
        proc = start_agi(argv, env)
        deadline = time.monotonic() + 30
        while len(server.requests) < 2 and time.monotonic() < deadline:  # one done, one waits
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    last = [line for line in err.splitlines() if line.startswith("agi batch: ")][-1]
    assert last.startswith("agi batch: 2/3 done") and "ETA" not in last, err  # job 3 never ran


def test_a_huge_stdin_to_an_unknown_window_is_warned_about_before_it_is_sent(agi):
    from fakeserver import hang

    big = "word " * (2 * 1024 * 1024 // 5)  # 2 MB: about 500,000 tokens
    with FakeModel(hang()) as server:  # no answer ever comes: what is said, is said before
        result = agi("--timeout", "3", "summarize", input=big, server=server)
        assert len(server.requests) == 1  # sent whole, as the contract has it
    assert result.returncode != 0
    [line] = [x for x in result.stderr.splitlines() if "is unknown: it is sent whole" in x]
    assert line.startswith("agi: this request is about ") and "openai:fake-model" in line
    with FakeModel(text("ok")) as server:
        small = agi("summarize", input="word " * 1000, server=server)
    assert small.returncode == 0 and "unknown" not in small.stderr


def test_a_subagents_tool_calls_are_shown_under_verbose(agi, tmp_path):
    from fakeserver import call

    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: Reviews\ntools: Bash\n---\nYou review code.\n"
    )
    script = [
        call("Task", description="review", prompt="Review it", subagent_type="reviewer"),
        call("Bash", command="echo child-ran"),  # the subagent's own call
        text("one bug"),  # the subagent's answer
        text("summed up"),
    ]
    with FakeModel(*script) as server:
        shown = agi(
            "--no-stdin", "--agents", "agents", "-v", "Have the reviewer look", server=server
        )
    assert shown.returncode == 0 and shown.stdout == "summed up\n", shown.stderr
    lines = shown.stderr.splitlines()
    task = next(i for i, line in enumerate(lines) if "Task(" in line)
    child = next(i for i, line in enumerate(lines) if "↳ Bash(" in line)
    assert task < child and "echo child-ran" in lines[child]
    assert any("⎿ child-ran" in line for line in lines[child + 1 :])
    with FakeModel(*script) as server:
        piped = agi("--no-stdin", "--agents", "agents", "Have the reviewer look", server=server)
    assert piped.returncode == 0 and "↳" not in piped.stderr  # a pipe without -v: silent
