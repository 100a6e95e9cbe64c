"""Glob and Grep through the real `agi` against the scripted model: offered only when named,
.gitignore-aware, the same results with ripgrep and without it, hidden by Read rules, seen
by hooks, bounded."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from fakeserver import FakeModel, call, text

HAS_RG = shutil.which("rg") is not None
BACKENDS = [
    pytest.param({"AGI_RG": ""}, id="python"),
    pytest.param(
        {}, id="ripgrep", marks=pytest.mark.skipif(not HAS_RG, reason="ripgrep not installed")
    ),
]


def tree(root: Path) -> Path:
    """A small project: a .gitignore, an ignored build directory, a log, a secret."""
    (root / "src" / "build").mkdir(parents=True)
    (root / "secrets").mkdir()
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "src" / "app.py").write_text("import os\nneedle = 1\nprint(needle)\n")
    (root / "src" / "util.py").write_text("def helper():\n    return 'no match'\n")
    (root / "src" / "build" / "gen.py").write_text("needle = 'generated'\n")
    (root / "notes.md").write_text("# Notes\nthe Needle in\nthe haystack\n")
    (root / "run.log").write_text("needle in a log\n")
    (root / "secrets" / "key.txt").write_text("needle secret\n")
    (root / ".env").write_text("TOKEN=needle\n")
    return root


def tool_texts(server: FakeModel) -> list[str]:
    last = server.requests[-1]["messages"]
    return [m["content"] for m in last if m["role"] == "tool"]


def offered(request: dict) -> dict[str, dict]:
    return {t["function"]["name"]: t["function"] for t in request.get("tools", [])}


SEARCHES = [
    ("Glob", {"pattern": "**/*.py"}),
    ("Glob", {"pattern": "*.md"}),
    ("Grep", {"pattern": "needle"}),
    ("Grep", {"pattern": "needle", "-i": True, "output_mode": "content", "-C": 1}),
    ("Grep", {"pattern": "needle", "output_mode": "count", "-i": True}),
    ("Grep", {"pattern": "needle", "path": "src", "glob": "*.py", "output_mode": "content"}),
    ("Grep", {"pattern": "import os\nneedle", "multiline": True, "output_mode": "content"}),
    ("Grep", {"pattern": "needle", "type": "md", "-i": True, "output_mode": "files_with_matches"}),
    ("Grep", {"pattern": "(unclosed"}),
]


def run_searches(agi, cwd: Path, extra_env: dict[str, str], *flags: str) -> list[str]:
    steps = [call(name, **args) for name, args in SEARCHES]
    with FakeModel(*steps, text("done")) as server:
        r = agi("--tools", "Glob,Grep", *flags, "go", server=server, cwd=cwd, extra_env=extra_env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    return tool_texts(server)


@pytest.mark.parametrize("backend", BACKENDS)
def test_glob_and_grep_skip_ignored_files_and_show_claude_code_s_shapes(agi, tmp_path, backend):
    cwd = tree(tmp_path / "project")
    got = run_searches(agi, cwd, backend)
    assert sorted(got[0].splitlines()) == ["src/app.py", "src/util.py"]  # not src/build/
    assert got[1] == "notes.md"
    files = got[2].splitlines()  # case matters; build/ and *.log are ignored, .env is not
    assert files[0] == "Found 3 files"
    assert sorted(files[1:]) == [".env", "secrets/key.txt", "src/app.py"]
    assert got[3].splitlines() == [
        ".env:1:TOKEN=needle",
        "--",
        "notes.md-1-# Notes",
        "notes.md:2:the Needle in",
        "notes.md-3-the haystack",
        "--",
        "secrets/key.txt:1:needle secret",
        "--",
        "src/app.py-1-import os",
        "src/app.py:2:needle = 1",
        "src/app.py:3:print(needle)",
    ]
    assert got[4] == (
        ".env:1\nnotes.md:1\nsecrets/key.txt:1\nsrc/app.py:2\n\n"
        "Found 5 total occurrences across 4 files."
    )
    assert got[5] == "src/app.py:2:needle = 1\nsrc/app.py:3:print(needle)"
    assert got[6] == "src/app.py:1:import os\nsrc/app.py:2:needle = 1"
    assert got[7] == "Found 1 file\nnotes.md"
    assert got[8].startswith("Error: the pattern is not a valid regular expression")


def test_ripgrep_and_the_python_search_give_the_same_results(agi, tmp_path):
    if not HAS_RG:
        pytest.skip("ripgrep not installed")
    cwd = tree(tmp_path / "project")
    with_rg = run_searches(agi, cwd, {})
    without = run_searches(agi, cwd, {"AGI_RG": ""})
    assert with_rg[:-1] == without[:-1]  # the last: each engine's own words for a bad pattern


def test_read_deny_rules_hide_files_and_refuse_a_search_rooted_in_a_denied_directory(agi, tmp_path):
    cwd = tree(tmp_path / "project")
    steps = [
        call("Grep", pattern="needle"),
        call("Glob", pattern="**/*"),
        call("Grep", pattern="needle", path="secrets"),
        call("Grep", pattern="needle", path="secrets/key.txt", output_mode="content"),
        text("done"),
    ]
    for env in ({"AGI_RG": ""}, {}):
        with FakeModel(*steps) as server:
            r = agi(
                "--tools", "Glob,Grep", "--deny", "Read(secrets/**)", "--deny", "Read(.env)",
                "go", server=server, cwd=cwd, extra_env=env,
            )  # fmt: skip
        assert r.returncode == 0, r.stderr
        grep, glob, rooted, file = tool_texts(server)
        assert grep == "Found 1 file\nsrc/app.py"
        assert "secrets/key.txt" not in glob and ".env" not in glob and "notes.md" in glob
        assert rooted == 'Error: denied by permission rule "Read(secrets/**)" (command line)'
        assert file == 'Error: denied by permission rule "Read(secrets/**)" (command line)'


def test_none_is_offered_unless_named_and_plan_mode_offers_the_searches(agi, tmp_path):
    with FakeModel(text("a"), text("b"), text("c")) as server:
        assert agi("go", server=server).returncode == 0
        r = agi("--tools", "Bash,Glob,Grep", "--permission-mode", "plan", "go", server=server)
        assert r.returncode == 0, r.stderr
        r = agi("--tools", "Bash,Read,Grep", "go", server=server)
        assert r.returncode == 0, r.stderr
    default, plan, named = (offered(q) for q in server.requests)
    assert {"Glob", "Grep", "BashOutput", "KillShell", "WebFetch"}.isdisjoint(default)
    assert "run_in_background" not in default["Bash"]["parameters"]["properties"]
    assert set(plan) == {"Glob", "Grep"}  # Bash can change something
    assert set(named) == {"Bash", "Read", "Grep"}
    props = named["Grep"]["parameters"]["properties"]
    assert {"pattern", "path", "glob", "type", "output_mode", "-i", "-n", "-A", "-B", "-C"} <= set(
        props
    )
    assert {"head_limit", "multiline"} <= set(props)


def test_hooks_with_a_grep_or_glob_matcher_see_the_searches(agi, tmp_path):
    cwd = tree(tmp_path / "project")
    log = tmp_path / "hook.log"
    command = f"jq -c '{{tool_name, tool_input}}' >> {log}"
    settings = tmp_path / "settings.json"
    hook = {"matcher": "Grep|Glob", "hooks": [{"type": "command", "command": command}]}
    block = {
        "matcher": "Glob",
        "hooks": [{"type": "command", "command": "echo no globs >&2; exit 2"}],
    }
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [hook, block]}}))
    steps = [
        call("Grep", pattern="needle", path="src"),
        call("Glob", pattern="*.md"),
        call("Bash", command="echo bash"),
        text("done"),
    ]
    with FakeModel(*steps) as server:
        r = agi("--tools", "Bash,Glob,Grep", "--settings", str(settings), "go", server=server,
                cwd=cwd)  # fmt: skip
    assert r.returncode == 0, r.stderr
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert [s["tool_name"] for s in seen] == ["Grep", "Glob"]
    assert seen[0]["tool_input"] == {"pattern": "needle", "path": "src"}
    grep, glob, bash = tool_texts(server)
    assert grep == "Found 1 file\nsrc/app.py"
    assert "no globs" in glob and "notes.md" not in glob
    assert bash == "bash"


@pytest.mark.parametrize("backend", BACKENDS)
def test_results_are_bounded_with_a_note(agi, tmp_path, backend):
    cwd = tmp_path / "many"
    cwd.mkdir()
    for i in range(130):
        (cwd / f"f{i:03}.txt").write_text(("word " * 40 + "\n") * 8)
    os.utime(cwd / "f007.txt", (2_000_000_000, 2_000_000_000))  # the newest comes first
    steps = [
        call("Glob", pattern="*.txt"),
        call("Grep", pattern="word", output_mode="content"),
        call("Grep", pattern="word", head_limit=3),
        text("done"),
    ]
    with FakeModel(*steps) as server:
        r = agi("--tools", "Glob,Grep", "go", server=server, cwd=cwd, extra_env=backend)
    assert r.returncode == 0, r.stderr
    glob, content, head = tool_texts(server)
    lines = glob.splitlines()
    assert len(lines) == 101 and lines[0] == "f007.txt"
    assert lines[-1].startswith("(Results are truncated.")
    assert len(content) < 31_000
    assert content.splitlines()[-1].startswith("[... ") and "more lines not shown" in content
    assert head.splitlines()[:2] == ["Found 3 files", "f007.txt"]
    assert head.splitlines()[-1].startswith("[... 127 more files not shown")


def test_a_command_s_allowed_tools_offer_the_opt_in_tools_it_names(agi, tmp_path):
    cwd = tree(tmp_path / "project")
    commands = tmp_path / "commands"  # beside the config file (AGI_CONFIG is tmp_path/config.toml)
    commands.mkdir()
    (commands / "find.md").write_text("---\nallowed-tools: Grep, Bash(git:*)\n---\nFind it.\n")
    steps = [call("Grep", pattern="needle", path="src"), text("found"), text("plain")]
    with FakeModel(*steps, text("restricted")) as server:
        r = agi("/find", server=server, cwd=cwd)
        assert r.returncode == 0, r.stderr
        assert agi("a plain prompt", server=server, cwd=cwd).returncode == 0
        r = agi("--tools", "Read", "/find", server=server, cwd=cwd)  # --tools still decides
        assert r.returncode == 0, r.stderr
    command, after, plain, restricted = (offered(q) for q in server.requests)
    assert "Grep" in command and "Read" in command and "Bash" in command
    assert {"Glob", "BashOutput", "KillShell", "WebFetch"}.isdisjoint(command)  # only what it names
    assert server.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": server.requests[1]["messages"][-1]["tool_call_id"],
        "content": "Found 1 file\nsrc/app.py",
    }
    assert "Grep" in after and "Grep" not in plain and set(restricted) == {"Read"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_search_stops_gathering_at_its_bound_and_says_so(agi, tmp_path, backend):
    # a match on every line of a few MB took hundreds of MB before the output bound applied:
    # the records gathered are bounded too, and the result says the search stopped
    (tmp_path / "big.txt").write_text("a\n" * 30_000)
    steps = [call("Grep", pattern="a", output_mode="content", offset=25_000, head_limit=5)]
    with FakeModel(*steps, text("done")) as server:
        r = agi("--tools", "Grep", "go", server=server, cwd=tmp_path, extra_env=backend)
    assert r.returncode == 0, r.stderr
    (result,) = tool_texts(server)
    assert "big.txt:25001:a" not in result
    assert "the search stopped after 20000 lines" in result


def test_content_from_ripgrep_s_lines_matches_the_python_search_and_its_bound(agi, tmp_path):
    """ripgrep's content lines are read from `rg -n --null`: context and block separators,
    a line that is not UTF-8, a file name with a newline in it (read again as JSON), and the
    bound on the lines gathered give what the Python search gives."""
    if not HAS_RG:
        pytest.skip("ripgrep not installed")
    cwd = tree(tmp_path / "project")
    (cwd / "odd\nname.txt").write_text("x\nneedle -- here\ny\n")
    (cwd / "latin.txt").write_bytes(b"caf\xe9 needle\r\n--\nz\n")
    (cwd / "big").mkdir()
    (cwd / "big" / "all.data").write_text("needle\n" * 20_500)
    steps = [
        call("Grep", pattern="needle", output_mode="content", glob="*.{txt,py,md}", **{"-C": 1}),
        call("Grep", pattern="needle", output_mode="content", path="src", **{"-A": 1}),
        call("Grep", pattern="needle", output_mode="content", path="big", offset=19_990),
    ]
    results = []
    for backend in ({}, {"AGI_RG": ""}):
        with FakeModel(*steps, text("done")) as server:
            r = agi("--tools", "Grep", "go", server=server, cwd=cwd, extra_env=backend)
        assert r.returncode == 0, r.stderr
        results.append(tool_texts(server))
    with_rg, without = results
    assert with_rg == without
    assert (
        "odd\nname.txt:2:needle -- here" in with_rg[0]
        and "latin.txt:1:caf\ufffd needle" in with_rg[0]
    )
    assert "src/app.py:3:print(needle)" in with_rg[1].splitlines()
    assert "the search stopped after 20000 lines" in with_rg[2]


@pytest.mark.skipif(not HAS_RG, reason="ripgrep not installed")
def test_ripgrep_s_output_is_read_only_up_to_its_bound(agi, tmp_path):
    # 20 matching lines of 1 MB: few records, but more output than is read (it had been read
    # whole, however large); ripgrep is stopped and the result says the search stopped
    (tmp_path / "wide.txt").write_text(("a" * (1 << 20) + "\n") * 20)
    with FakeModel(call("Grep", pattern="a", output_mode="content"), text("done")) as server:
        r = agi("--tools", "Grep", "go", server=server, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (result,) = tool_texts(server)
    assert "the search stopped" in result and result.count("wide.txt:") < 20


def test_a_skill_s_allowed_tools_offer_the_opt_in_tools_it_names(agi, tmp_path):
    cwd = tree(tmp_path / "project")
    skill = tmp_path / "skills" / "finder"  # beside the config file
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: finder\ndescription: Find code\nallowed-tools: [Glob, 'Bash(git:*)']\n---\n"
        "Use Glob.\n"
    )
    hidden = tmp_path / "hidden-skills" / "quiet"
    hidden.mkdir(parents=True)
    (hidden / "SKILL.md").write_text(
        "---\nname: quiet\ndescription: Not for the model\nallowed-tools: WebFetch\n"
        "disable-model-invocation: true\n---\nx\n"
    )
    steps = [call("Skill", skill="finder"), call("Glob", pattern="*.md"), text("found")]
    with FakeModel(*steps, text("restricted")) as server:
        more = ("--skills", str(tmp_path / "hidden-skills"))
        r = agi(*more, "go", server=server, cwd=cwd)
        assert r.returncode == 0, r.stderr
        assert agi("--tools", "Read", "go", server=server, cwd=cwd).returncode == 0
    first, restricted = offered(server.requests[0]), offered(server.requests[-1])
    assert "Glob" in first and {"Grep", "WebFetch", "BashOutput"}.isdisjoint(first)
    last = [m["content"] for m in server.requests[2]["messages"] if m["role"] == "tool"]
    assert last[-1] == "notes.md"
    assert set(restricted) == {"Read"}


def test_in_the_repl_a_command_s_opt_in_tools_are_offered_for_its_turn_only(agi, tmp_path):
    cwd = tree(tmp_path / "project")
    commands = tmp_path / "commands"
    commands.mkdir()
    (commands / "find.md").write_text("---\nallowed-tools: [Grep]\n---\nFind it.\n")
    steps = [text("plain"), call("Grep", pattern="needle", path="src"), text("found")]
    with FakeModel(*steps, text("plain again")) as server:
        r = agi("-i", server=server, cwd=cwd, input="hello\n/find\nagain\n")
    assert r.returncode == 0, r.stderr
    before, command, _, after = (offered(q) for q in server.requests)
    assert "Grep" not in before and "Grep" in command and "Grep" not in after
    assert server.requests[2]["messages"][-1]["content"] == "Found 1 file\nsrc/app.py"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_path_that_is_no_file_nor_directory_is_refused(agi, tmp_path, backend):
    # a FIFO with no writer hung the search (the Python one for good); /dev/zero was read on
    # and on: only a directory or a regular file is searched
    os.mkfifo(tmp_path / "fifo")
    steps = [call("Grep", pattern="x", path="fifo"), call("Grep", pattern="x", path="/dev/zero")]
    with FakeModel(*steps, text("done")) as server:
        r = agi("--tools", "Grep", "go", server=server, cwd=tmp_path, extra_env=backend, timeout=30)
    assert r.returncode == 0, r.stderr
    fifo, zero = tool_texts(server)
    assert "fifo is not a regular file or a directory" in fifo
    assert "/dev/zero is not a regular file or a directory" in zero


@pytest.mark.skipif(not HAS_RG, reason="ripgrep not installed")
def test_a_big_file_is_searched_a_line_at_a_time_with_ripgrep_s_records(agi, tmp_path):
    """A file over 8 MB is read a line at a time by the Python search (it was read whole,
    and decoded and split besides): the same content with context, counts and file names as
    ripgrep's, and the line numbers right past a line longer than the 1 MB kept of one."""
    filler = "filler line with nothing to find in it, padded out to sixty\n"
    lines = [filler] * 160_000
    for n in (10, 11, 5_000, 159_999):
        lines[n] = f"needle number {n}\n"
    lines[80_000] = "x" * (3 << 20) + "\n"  # a 3 MB line
    lines[80_001] = "needle after the long line\n"
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "big.log").write_text("".join(lines))
    steps = [
        call("Grep", pattern="needle", output_mode="content", **{"-n": True, "-C": 2}),
        call("Grep", pattern="needle", output_mode="count"),
        call("Grep", pattern="needle"),
    ]
    results = []
    for backend in ({}, {"AGI_RG": ""}):
        with FakeModel(*steps, text("done")) as server:
            r = agi("--tools", "Grep", "go", server=server, cwd=cwd, extra_env=backend)
        assert r.returncode == 0, r.stderr
        results.append(tool_texts(server))
    with_rg, without = results
    assert with_rg == without
    assert "big.log:80002:needle after the long line" in without[0]
    assert "big.log-13-" + filler.strip() in without[0]
    assert without[1].startswith("big.log:5")
