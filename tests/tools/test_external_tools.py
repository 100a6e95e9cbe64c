"""User-defined executable tools (docs: tools): real scripts in Bash and Python.

Unit tests call the tool objects directly; the end-to-end tests drive the real `agi` executable
against the scripted server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from agi.errors import ToolError, UsageError
from agi.tools import ToolContext, spec
from agi.tools.external import (
    ExternalTool,
    describe,
    load_dir,
    load_tool,
    load_tools,
)

from fakeserver import FakeModel, call, calls, text

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tools"


def write_tool(where: Path, filename: str, source: str, mode: int = 0o755) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    path = where / filename
    path.write_text(source.lstrip())
    path.chmod(mode)
    return path


def describing(name: str, body: str, *, lang: str = "bash", counter: Path | None = None) -> str:
    """A tool script whose --describe prints a valid description (and counts itself if asked)."""
    desc = json.dumps(
        {
            "name": name,
            "description": f"the {name} tool",
            "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
        }
    )
    if lang == "bash":
        count = f"echo . >> '{counter}'" if counter else ":"
        return (
            f"#!/usr/bin/env bash\n"
            f"if [ \"$1\" = --describe ]; then {count}; echo '{desc}'; exit 0; fi\n{body}\n"
        )
    count = f"open({str(counter)!r}, 'a').write('.\\n')" if counter else "pass"
    return (
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"if sys.argv[1:] == ['--describe']:\n    {count}\n    print({desc!r})\n    sys.exit(0)\n"
        f"{body}\n"
    )


def pids_matching(pattern: str) -> list[int]:
    r = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()]


def describe_count(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


# --- describe and call -------------------------------------------------------------------------


def test_bash_tool_is_described_and_gets_its_input_on_stdin_in_the_working_directory(tmp_path):
    path = write_tool(tmp_path / "bin", "echo-input", describing("echo_input", "cat; echo; pwd"))
    tool = load_tool(path)
    assert (tool.name, tool.description) == ("echo_input", "the echo_input tool")
    assert spec(tool)["function"]["parameters"]["properties"] == {"x": {"type": "string"}}
    work = tmp_path / "work"
    work.mkdir()
    got = tool.run({"x": 'hé "quoted"\nline'}, ToolContext(cwd=str(work)))
    first, second = got.split("\n")
    assert json.loads(first) == {"x": 'hé "quoted"\nline'}
    assert second == str(work)


def test_python_tool_is_described_and_called(tmp_path):
    body = "args = json.load(sys.stdin)\nprint('hello', args['x'], 'from', os.getcwd())"
    path = write_tool(tmp_path / "bin", "hello.py", describing("hello", body, lang="python"))
    tool = load_tool(path)
    assert tool.name == "hello" and tool.path == str(path)
    assert tool.run({"x": "world"}, ToolContext(cwd=str(tmp_path))) == (
        f"hello world from {tmp_path}"
    )


def test_output_interleaves_stdout_and_stderr_in_order(tmp_path):
    body = "\n".join(
        f"print({word!r}, file=sys.{stream}, flush=True)"
        for word, stream in [("o1", "stdout"), ("e1", "stderr"), ("o2", "stdout"), ("e2", "stderr")]
    )
    tool = load_tool(write_tool(tmp_path, "mix", describing("mix", body, lang="python")))
    assert tool.run({}, ToolContext(cwd=str(tmp_path))) == "o1\ne1\no2\ne2"


def test_nonzero_exit_is_an_error_result_with_the_output(tmp_path):
    tool = load_tool(
        write_tool(tmp_path, "fail", describing("fail", "echo out; echo boom >&2; exit 3"))
    )
    assert tool.run({}, ToolContext(cwd=str(tmp_path))) == "Error (exit 3): out\nboom"
    quiet = load_tool(write_tool(tmp_path, "quiet", describing("quiet", "exit 7")))
    assert quiet.run({}, ToolContext(cwd=str(tmp_path))) == "Error (exit 7): (no output)"


def test_no_output_is_said_so(tmp_path):
    tool = load_tool(write_tool(tmp_path, "silent", describing("silent", "true")))
    assert tool.run({}, ToolContext(cwd=str(tmp_path))) == "(no output)"


def test_timeout_kills_the_whole_process_group(tmp_path):
    secs = f"97.{uuid.uuid4().int % 10**7:07d}"
    body = f"echo started; sleep {secs} & sleep {secs}"
    tool = load_tool(write_tool(tmp_path, "slow", describing("slow", body)))
    tool.timeout = 1
    started = time.monotonic()
    try:
        with pytest.raises(ToolError) as e:
            tool.run({}, ToolContext(cwd=str(tmp_path)))
        assert time.monotonic() - started < 30  # a hang guard: the tool sleeps 97 s
        assert "timed out after 1 s" in str(e.value) and "started" in str(e.value)
        assert pids_matching(f"sleep {secs}") == []
    finally:
        for pid in pids_matching(f"sleep {secs}"):
            os.kill(pid, 9)


def test_the_runs_deadline_shortens_the_timeout(tmp_path):
    secs = f"96.{uuid.uuid4().int % 10**7:07d}"
    tool = load_tool(write_tool(tmp_path, "slow", describing("slow", f"sleep {secs}")))
    started = time.monotonic()
    with pytest.raises(ToolError, match="timed out"):
        tool.run({}, ToolContext(cwd=str(tmp_path), deadline=time.monotonic() + 0.5))
    assert time.monotonic() - started < 30  # a hang guard: the tool sleeps 96 s
    assert pids_matching(f"sleep {secs}") == []


def test_large_input_and_output(tmp_path):
    body = "data = sys.stdin.read(); print(len(data)); print('y' * 100_000)"
    tool = load_tool(write_tool(tmp_path, "big", describing("big", body, lang="python")))
    got = tool.run({"x": "z" * 500_000}, ToolContext(cwd=str(tmp_path)))
    assert got.startswith(f"{len(json.dumps({'x': 'z' * 500_000}))}\n")
    assert "bytes of output omitted" in got and len(got) < 40_000


def test_a_tool_that_ignores_stdin_is_fine(tmp_path):
    tool = load_tool(write_tool(tmp_path, "deaf", describing("deaf", "echo fine")))
    assert tool.run({"x": "q" * 1_000_000}, ToolContext(cwd=str(tmp_path))) == "fine"


def test_a_tool_sees_exported_variables_and_close_ends_its_background_jobs(tmp_path):
    secs = f"95.{uuid.uuid4().int % 10**7:07d}"
    body = f"echo $AGI_T_EXPORTED; sleep {secs} >/dev/null 2>&1 &"
    tool = load_tool(write_tool(tmp_path, "bg", describing("bg", body)))
    ctx = ToolContext(cwd=str(tmp_path), env={"AGI_T_EXPORTED": "from-a-hook"})
    try:
        assert tool.run({}, ctx) == "from-a-hook"
        assert pids_matching(f"sleep {secs}") != []
        tool.close()
        assert pids_matching(f"sleep {secs}") == []
    finally:
        for pid in pids_matching(f"sleep {secs}"):
            os.kill(pid, 9)


def test_a_tool_removed_after_loading_is_an_error_the_model_reads(tmp_path):
    path = write_tool(tmp_path, "gone", describing("gone", "echo hi"))
    tool = load_tool(path)
    path.unlink()
    with pytest.raises(ToolError, match="no longer"):
        tool.run({}, ToolContext(cwd=str(tmp_path)))


# --- bad tools -----------------------------------------------------------------------------------

GOOD_PARAMS = {"type": "object", "properties": {}}
BAD_DESCRIBES = {
    "not-json": ("echo 'this is not json'", "did not print valid JSON"),
    "fails": ("echo 'cannot start: no config' >&2; exit 4", "failed (exit 4): cannot start"),
    "bad-name": (
        f"echo '{json.dumps({'name': 'my tool', 'description': 'd', 'parameters': GOOD_PARAMS})}'",
        "'name' must match",
    ),
    "no-description": (
        f"echo '{json.dumps({'name': 'ok', 'parameters': GOOD_PARAMS})}'",
        "'description'",
    ),
    "params-not-object": (
        f"echo '{json.dumps({'name': 'ok', 'description': 'd', 'parameters': {'type': 'str'}})}'",
        "JSON Schema object",
    ),
    "array": ("echo '[1, 2]'", "must print a JSON object"),
}


@pytest.mark.parametrize("case", sorted(BAD_DESCRIBES))
def test_a_bad_describe_is_a_usage_error_naming_the_file(tmp_path, case):
    script, message = BAD_DESCRIBES[case]
    path = write_tool(tmp_path, case, f"#!/bin/sh\n{script}\n")
    with pytest.raises(UsageError) as e:
        load_tool(path)
    assert str(path) in str(e.value) and message in str(e.value)
    assert e.value.exit_code == 2


def test_a_hanging_describe_times_out(tmp_path):
    secs = f"95.{uuid.uuid4().int % 10**7:07d}"
    path = write_tool(tmp_path, "hang", f"#!/bin/sh\nsleep {secs}\n")
    started = time.monotonic()
    with pytest.raises(UsageError, match="timed out after 0.5 s"):
        describe(str(path), timeout=0.5)
    assert time.monotonic() - started < 30  # a hang guard: the describe sleeps 95 s
    assert pids_matching(f"sleep {secs}") == []


def test_explicit_tool_that_is_missing_or_not_executable_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        load_tool(tmp_path / "nothing")
    plain = write_tool(tmp_path, "plain", describing("plain", "echo"), mode=0o644)
    with pytest.raises(UsageError, match="not executable"):
        load_tool(plain)
    with pytest.raises(UsageError, match="no such file"):
        load_tools(files=[tmp_path / "nothing"])


def test_a_directory_scan_skips_broken_hidden_and_non_executable_files(tmp_path):
    d = tmp_path / "tools"
    write_tool(d, "b-good", describing("good", "echo good"))
    write_tool(d, "a-broken", "#!/bin/sh\necho nope\n")
    write_tool(d, ".hidden", describing("hidden", "echo"))
    write_tool(d, "b-good~", describing("backup", "echo"))
    write_tool(d, "notes.txt", describing("notes", "echo"), mode=0o644)
    (d / "subdir").mkdir()
    tools, warnings = load_dir(d)
    assert [t.name for t in tools] == ["good"]
    assert len(warnings) == 1 and str(d / "a-broken") in warnings[0] and "skipped" in warnings[0]


def test_explicit_errors_raise_but_directory_errors_warn(tmp_path):
    write_tool(tmp_path / "dir", "broken", "#!/bin/sh\nexit 1\n")
    bad = write_tool(tmp_path / "bin", "broken", "#!/bin/sh\nexit 1\n")
    tools, warnings = load_tools(dirs=[tmp_path / "dir"])
    assert tools == [] and len(warnings) == 1
    with pytest.raises(UsageError, match="broken"):
        load_tools(files=[bad], dirs=[tmp_path / "dir"])
    with pytest.raises(UsageError, match="not a directory"):
        load_tools(dirs=[tmp_path / "missing"])


def test_duplicate_names_the_first_wins(tmp_path):
    first = write_tool(tmp_path / "bin", "one", describing("same", "echo first"))
    write_tool(tmp_path / "dir", "two", describing("same", "echo second"))
    tools, warnings = load_tools(files=[first], dirs=[tmp_path / "dir"])
    assert [t.path for t in tools] == [str(first)]
    assert len(warnings) == 1 and "same" in warnings[0] and str(first) in warnings[0]


# --- the description cache ----------------------------------------------------------------------


def test_the_cache_avoids_a_second_describe_and_notices_changes(tmp_path):
    counter, cache = tmp_path / "count", tmp_path / "home" / "tool-cache.json"
    d = tmp_path / "tools"
    path = write_tool(d, "counted", describing("counted", "echo v1", counter=counter))
    tools, _ = load_tools(dirs=[d], cache_file=cache)
    assert describe_count(counter) == 1 and [t.name for t in tools] == ["counted"]
    assert json.loads(cache.read_text())["tools"][str(path.resolve())]["description"]["name"]
    tools, _ = load_tools(dirs=[d], cache_file=cache)
    assert describe_count(counter) == 1
    assert tools[0].run({}, ToolContext(cwd=str(tmp_path))) == "v1"

    st = path.stat()  # a new mtime: described again
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    load_tools(dirs=[d], cache_file=cache)
    assert describe_count(counter) == 2

    st = path.stat()  # same mtime, different size: described again
    path.write_text(path.read_text().replace("echo v1", "echo v22"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    load_tools(dirs=[d], cache_file=cache)
    assert describe_count(counter) == 3
    load_tools(files=[path], cache_file=cache)
    assert describe_count(counter) == 3


def test_a_corrupt_cache_is_ignored_and_replaced(tmp_path):
    counter, cache = tmp_path / "count", tmp_path / "tool-cache.json"
    path = write_tool(tmp_path / "bin", "counted", describing("counted", "echo", counter=counter))
    for garbage in ["{not json", '{"version": 1, "tools": []}', "[]", ""]:
        cache.write_text(garbage)
        tools, warnings = load_tools(files=[path], cache_file=cache)
        assert [t.name for t in tools] == ["counted"] and warnings == []
        assert json.loads(cache.read_text())["version"] == 1
    assert describe_count(counter) == 4  # each kind of garbage is a miss
    entry = json.loads(cache.read_text())
    entry["tools"][str(path.resolve())]["description"]["name"] = "bad name"
    cache.write_text(json.dumps(entry))
    tools, _ = load_tools(files=[path], cache_file=cache)
    assert tools[0].name == "counted" and describe_count(counter) == 5
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tool-cache")] == []


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path):
    (tmp_path / "a-file").write_text("")
    path = write_tool(tmp_path / "bin", "t", describing("t", "echo"))
    tools, warnings = load_tools(files=[path], cache_file=tmp_path / "a-file" / "cache.json")
    assert [t.name for t in tools] == ["t"] and warnings == []


# --- the examples -------------------------------------------------------------------------------


def test_the_example_tools(tmp_path):
    tools, warnings = load_dir(EXAMPLES)
    assert warnings == []
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"word-count", "json-query"}
    ctx = ToolContext(cwd=str(tmp_path))
    (tmp_path / "notes.txt").write_text("one two\nthree\n")
    assert by_name["word-count"].run({"path": "notes.txt"}, ctx) == "lines: 2\nwords: 3\nbytes: 14"
    got = by_name["word-count"].run({"path": "missing.txt"}, ctx)
    assert got == "Error (exit 1): word-count: no such file: missing.txt"
    (tmp_path / "data.json").write_text('{"servers": [{"name": "alpha", "port": 80}]}')
    query = by_name["json-query"]
    assert query.run({"file": "data.json", "query": "servers[0].name"}, ctx) == "alpha"
    assert json.loads(query.run({"file": "data.json", "query": "servers[0]"}, ctx)) == {
        "name": "alpha",
        "port": 80,
    }
    got = query.run({"file": "data.json", "query": "servers[0].host"}, ctx)
    assert got.startswith("Error (exit 1): ") and "'name', 'port'" in got


# --- end to end, through the real executable ----------------------------------------------------


def test_no_bash_with_one_tool_offers_exactly_that_tool(agi, tmp_path):
    path = write_tool(tmp_path / "bin", "greet", describing("greet", 'echo "hi $(cat)"'))
    with FakeModel(call("greet", x="there"), text("done")) as server:
        r = agi("--no-bash", "--tool", str(path), "go", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    assert server.requests[0]["tools"] == [spec(ExternalTool(str(path), **_desc(path)))]
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert results == ['hi {"x": "there"}']


def test_a_bash_tool_and_a_python_tool_are_offered_and_called(agi, tmp_path):
    sh = write_tool(tmp_path / "bin", "sh-tool", describing("sh_tool", "echo from bash; exit 3"))
    py = write_tool(
        tmp_path / "bin",
        "py-tool",
        describing("py_tool", "print('from python', json.load(sys.stdin)['x'])", lang="python"),
    )
    script = [calls(("sh_tool", {}), ("py_tool", {"x": "42"})), text("done")]
    with FakeModel(*script) as server:
        r = agi("--tool", str(sh), "--tool", str(py), "go", server=server)
    assert r.returncode == 0, r.stderr
    offered = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
    assert {"Bash", "sh_tool", "py_tool"} <= set(offered)
    assert offered["py_tool"]["parameters"] == {
        "type": "object",
        "properties": {"x": {"type": "string"}},
    }
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert results == ["Error (exit 3): from bash", "from python 42"]


def test_tools_dir_and_the_config_tools_dir_with_a_cache_in_agi_home(agi, env, tmp_path):
    counter = tmp_path / "count"
    write_tool(tmp_path / "mine", "a", describing("from_flag", "echo a", counter=counter))
    write_tool(tmp_path / "tools", "b", describing("from_config", "echo b", counter=counter))
    for _ in range(2):
        with FakeModel(text("done")) as server:
            r = agi("--tools-dir", str(tmp_path / "mine"), "go", server=server)
        assert r.returncode == 0, r.stderr
        names = {t["function"]["name"] for t in server.requests[0]["tools"]}
        assert {"from_flag", "from_config"} <= names
    assert describe_count(counter) == 2  # the second run used the cache
    assert (Path(env["AGI_HOME"]) / "tool-cache.json").is_file()


def test_a_broken_explicit_tool_is_a_usage_error_before_any_request(agi, tmp_path):
    bad = write_tool(tmp_path / "bin", "bad", "#!/bin/sh\necho nonsense\n")
    with FakeModel(text("done")) as server:
        r = agi("--tool", str(bad), "go", server=server)
    assert r.returncode == 2
    assert r.stderr.startswith("agi: ") and str(bad) in r.stderr
    assert server.requests == []


def test_a_broken_tool_in_a_directory_is_a_warning(agi, tmp_path):
    write_tool(tmp_path / "mine", "bad", "#!/bin/sh\necho nonsense\n")
    with FakeModel(text("done")) as server:
        r = agi("--tools-dir", str(tmp_path / "mine"), "go", server=server)
    assert r.returncode == 0 and r.stdout == "done\n"
    assert r.stderr.startswith("agi: ") and str(tmp_path / "mine" / "bad") in r.stderr


def _desc(path: Path) -> dict:
    out = subprocess.run([str(path), "--describe"], capture_output=True, text=True).stdout
    return json.loads(out)
