"""MCP client (issue 11): real servers nobody here wrote, over stdio and HTTP, called for real.

`mcp-server-time` (PyPI) and `@modelcontextprotocol/server-everything` (npm, run with node) over
stdio, and a FastMCP server (tests/mcp_servers/server.py) over stdio and streamable HTTP. Unit
tests call the tool objects; end-to-end tests drive the real `agi` executable against the scripted
model. The directory is not named `mcp`: with tests/ on
sys.path it would pass for the SDK when the SDK is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agi.errors import ConfigError, ToolError
from agi.messages import ToolCall
from agi.tools import Toolbox, ToolContext, mcp
from agi.tools.mcp import Runtime
from agi.tools.mcp_config import expand, read_configs

from conftest import AGI, start_agi
from fakeserver import FakeModel, call, calls, text

HERE = Path(__file__).parents[1] / "mcp_servers"
HELPER = HERE / "server.py"
EVERYTHING = HERE / "node_modules" / "@modelcontextprotocol" / "server-everything"

needs_sdk = pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None, reason="the mcp package is not installed"
)


_opened: list[Runtime] = []


def load_mcp(paths: list[Path], cache: Path | None) -> tuple[list, list[str]]:
    """agi.tools.mcp.load_mcp, with a runtime that close_all() below can reach."""
    runtime = Runtime()
    _opened.append(runtime)
    return mcp.load_mcp(paths, cache, runtime)


def close_all() -> None:
    """Close every runtime the test loaded (what a toolbox's close() does for its own)."""
    for runtime in _opened:
        runtime.close()
    _opened.clear()


@pytest.fixture(autouse=True)
def closed():
    """Every test ends with no MCP session or server left."""
    yield
    close_all()


def config(where: Path, servers: dict, name: str = "mcp.json") -> Path:
    path = where / name
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def helper(**env: str) -> dict:
    return {"command": sys.executable, "args": [str(HELPER)], "env": env}


TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


def starts(log: Path) -> int:
    return len(log.read_text().split()) if log.exists() else 0


def children() -> dict[int, str]:
    """This process's children (pid -> state letter), from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(errors="replace")
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == os.getpid():
            found[int(entry.name)] = state
    return found


def run(tools: list, tool: str, /, **args) -> str:
    return next(t for t in tools if t.name == tool).run(args, ToolContext())


@pytest.fixture(scope="session")
def everything() -> dict:
    """server-everything, installed under tests/mcp_servers/ by .ci/run (tests use no network)."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    if not EVERYTHING.exists():
        pytest.skip(
            "server-everything is not installed (.ci/run does it: "
            "npm install --prefix tests/mcp_servers --no-package-lock)"
        )
    entry = json.loads((EVERYTHING / "package.json").read_text())["bin"]
    main = EVERYTHING / (entry if isinstance(entry, str) else next(iter(entry.values())))
    return {"command": "node", "args": [str(main), "stdio"]}


@pytest.fixture
def http_url(tmp_path):
    """The FastMCP helper serving streamable HTTP on a free port of 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "http-starts"
    proc = subprocess.Popen(
        [sys.executable, str(HELPER), "--http", str(port)],
        env={**os.environ, "MCP_START_LOG": str(log)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    close_all()  # while the server still answers the session's DELETE
    proc.terminate()
    proc.wait(10)


# --- configuration -----------------------------------------------------------------------------


def test_expansion_follows_claude_code(monkeypatch):
    monkeypatch.setenv("AGI_T_SET", "value")
    monkeypatch.setenv("AGI_T_EMPTY", "")
    monkeypatch.delenv("AGI_T_UNSET", raising=False)
    missing: list[str] = []
    assert expand("a-${AGI_T_SET}-b", missing) == "a-value-b"
    assert expand("${AGI_T_UNSET:-fallback}/x", missing) == "fallback/x"
    assert expand("${AGI_T_SET:-fallback}", missing) == "value"
    assert expand("[${AGI_T_EMPTY:-fallback}]", missing) == "[]"  # set, though empty
    assert expand("$AGI_T_SET and ${AGI_T_UNSET:-}", missing) == "$AGI_T_SET and "
    assert missing == []
    assert expand("${AGI_T_UNSET}", missing) == "${AGI_T_UNSET}"
    assert missing == ["AGI_T_UNSET"]


def test_expansion_applies_to_every_field_and_unset_variables_skip_the_server(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("AGI_T_TOKEN", "s3cret")
    monkeypatch.setenv("AGI_T_BIN", "/opt/bin")
    monkeypatch.delenv("AGI_T_NOPE", raising=False)
    path = config(
        tmp_path,
        {
            "local": {
                "command": "${AGI_T_BIN}/srv",
                "args": ["--token=${AGI_T_TOKEN}", "${AGI_T_NOPE:-dflt}"],
                "env": {"KEY": "${AGI_T_TOKEN}"},
            },
            "remote": {
                "type": "http",
                "url": "https://example.invalid/${AGI_T_TOKEN}",
                "headers": {"Authorization": "Bearer ${AGI_T_TOKEN}"},
            },
            "broken": {"type": "sse", "url": "${AGI_T_NOPE}/sse"},
        },
    )
    servers, warnings = read_configs([path])
    specs = {s.name: s.spec for s in servers}
    assert specs["local"] == {
        "type": "stdio",
        "command": "/opt/bin/srv",
        "args": ["--token=s3cret", "dflt"],
        "env": {"KEY": "s3cret"},
    }
    assert specs["remote"]["url"] == "https://example.invalid/s3cret"
    assert specs["remote"]["headers"] == {"Authorization": "Bearer s3cret"}
    assert "broken" not in specs
    assert len(warnings) == 1 and "broken" in warnings[0] and "AGI_T_NOPE" in warnings[0]


@pytest.mark.parametrize(
    "content, problem",
    [
        ("{not json", "not valid JSON"),
        ("[]", "mcpServers"),
        ('{"servers": {}}', "mcpServers"),
        ('{"mcpServers": {"a": "python"}}', "mcpServers.a must be an object"),
        ('{"mcpServers": {"a": {"args": []}}}', "mcpServers.a.command"),
        ('{"mcpServers": {"a": {"command": "x", "args": "-v"}}}', "mcpServers.a.args"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"A": 1}}}}', "mcpServers.a.env"),
        ('{"mcpServers": {"a": {"type": "ws", "url": "ws://x"}}}', "mcpServers.a.type"),
        ('{"mcpServers": {"a": {"type": "http"}}}', "mcpServers.a.url"),
    ],
)
def test_a_malformed_config_is_a_config_error_naming_the_file(tmp_path, content, problem):
    path = tmp_path / "servers.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as e:
        load_mcp([path], tmp_path / "cache.json")
    assert str(path) in str(e.value) and problem in str(e.value)
    assert e.value.exit_code == 2
    with pytest.raises(ConfigError, match="cannot read"):
        load_mcp([tmp_path / "missing.json"], None)


def test_a_later_file_replaces_a_server_of_the_same_name(tmp_path):
    first = config(tmp_path, {"a": {"command": "one"}, "b": {"command": "b"}}, "1.json")
    second = config(tmp_path, {"a": {"command": "two"}}, "2.json")
    servers, _ = read_configs([first, second])
    assert {s.name: s.spec["command"] for s in servers} == {"a": "two", "b": "b"}


# --- real servers ------------------------------------------------------------------------------


@needs_sdk
def test_time_server_over_stdio_gives_the_real_time(tmp_path):
    tools, warnings = load_mcp([config(tmp_path, {"time": TIME})], tmp_path / "cache.json")
    assert warnings == []
    names = {t.name for t in tools}
    assert {"mcp__time__get_current_time", "mcp__time__convert_time"} <= names
    tool = next(t for t in tools if t.name == "mcp__time__get_current_time")
    assert "timezone" in tool.parameters["properties"]
    answer = json.loads(tool.run({"timezone": "UTC"}, ToolContext()))
    assert answer["timezone"] == "UTC"
    told = datetime.fromisoformat(answer["datetime"])
    assert abs((told - datetime.now(UTC)).total_seconds()) < 120
    with pytest.raises(ToolError):  # the server's own refusal of an unknown zone
        tool.run({"timezone": "Mars/Olympus_Mons"}, ToolContext())


@needs_sdk
def test_server_everything_over_stdio(tmp_path, everything):
    tools, warnings = load_mcp(
        [config(tmp_path, {"everything": everything})], tmp_path / "cache.json"
    )
    assert warnings == []
    box = Toolbox(tools)
    echo = box.run_one(ToolCall("1", "mcp__everything__echo", '{"message": "hello there"}'))
    assert (echo.text, echo.is_error) == ("Echo: hello there", False)
    total = box.run_one(ToolCall("2", "mcp__everything__get-sum", '{"a": 2, "b": 40}'))
    assert not total.is_error and "42" in total.text
    bad = box.run_one(ToolCall("3", "mcp__everything__get-sum", '{"a": "two"}'))
    assert bad.is_error and bad.text.startswith("Error: ") and "b" in bad.text
    image = box.run_one(ToolCall("4", "mcp__everything__get-tiny-image", "{}"))
    assert not image.is_error and "[image: image/png, " in image.text
    ref = box.run_one(ToolCall("5", "mcp__everything__get-resource-reference", "{}"))
    assert "[resource demo://" in ref.text


@needs_sdk
def test_fastmcp_over_streamable_http(tmp_path, http_url, monkeypatch):
    monkeypatch.setenv("AGI_T_HEADER", "yes")
    servers = {"web": {"type": "http", "url": http_url, "headers": {"X-Test": "${AGI_T_HEADER}"}}}
    tools, warnings = load_mcp([config(tmp_path, servers)], tmp_path / "cache.json")
    assert warnings == []
    assert run(tools, "mcp__web__add", a=2, b=3) == "5"
    assert run(tools, "mcp__web__greet", name="HTTP") == "Hello, HTTP!"
    assert run(tools, "mcp__web__picture") == "[image: image/png, 70 bytes]"
    box = Toolbox(tools)
    failed = box.run_one(ToolCall("1", "mcp__web__fail", '{"message": "boom"}'))
    assert failed.is_error and failed.text.startswith("Error: ")
    wrong = box.run_one(ToolCall("2", "mcp__web__add", '{"a": "x", "b": 1}'))
    assert wrong.is_error and wrong.text.startswith("Error: ")


@needs_sdk
def test_a_missing_command_is_a_warning_and_other_servers_work(tmp_path):
    path = config(tmp_path, {"ghost": {"command": "agi-no-such-mcp-server"}, "t": helper()})
    tools, warnings = load_mcp([path], tmp_path / "cache.json")
    assert len(warnings) == 1
    assert "ghost" in warnings[0] and "agi-no-such-mcp-server" in warnings[0]
    assert not any(t.name.startswith("mcp__ghost__") for t in tools)
    assert run(tools, "mcp__t__greet", name="you") == "Hello, you!"


@needs_sdk
def test_a_server_that_exits_at_start_is_a_warning_with_its_stderr(tmp_path):
    dying = {"command": sys.executable, "args": ["-c", "import sys; sys.exit('no licence key')"]}
    tools, warnings = load_mcp([config(tmp_path, {"dying": dying})], tmp_path / "cache.json")
    assert tools == []
    assert len(warnings) == 1 and "dying" in warnings[0] and "no licence key" in warnings[0]


@needs_sdk
def test_the_cache_offers_tools_without_starting_the_server(tmp_path):
    log, cache = tmp_path / "starts", tmp_path / "cache.json"
    path = config(tmp_path, {"t": helper(MCP_START_LOG=str(log))})
    cold, _ = load_mcp([path], cache)
    assert starts(log) == 1
    close_all()
    warm, warnings = load_mcp([path], cache)
    assert warnings == []
    assert starts(log) == 0 + 1  # nothing started at load
    assert [(t.name, t.parameters) for t in warm] == [(t.name, t.parameters) for t in cold]
    assert run(warm, "mcp__t__add", a=20, b=22) == "42"  # started on first use
    assert starts(log) == 2
    close_all()
    # a changed configuration is another cache key: the server starts at load again
    changed = config(tmp_path, {"t": helper(MCP_START_LOG=str(log), OTHER="1")})
    load_mcp([changed], cache)
    assert starts(log) == 3
    close_all()
    load_mcp([changed], cache)
    assert starts(log) == 3


@needs_sdk
def test_an_edited_server_file_starts_the_server_again(tmp_path):
    log, cache = tmp_path / "starts", tmp_path / "cache.json"
    script = tmp_path / "server.py"
    shutil.copy(HELPER, script)
    entry = {"command": sys.executable, "args": [str(script)], "env": {"MCP_START_LOG": str(log)}}
    path = config(tmp_path, {"t": entry})
    load_mcp([path], cache)
    close_all()
    load_mcp([path], cache)
    assert starts(log) == 1
    close_all()
    later = script.stat().st_mtime_ns + 10**9
    os.utime(script, ns=(later, later))
    load_mcp([path], cache)
    assert starts(log) == 2


@needs_sdk
def test_an_expired_entry_starts_the_server_again(tmp_path):
    log, cache = tmp_path / "starts", tmp_path / "cache.json"
    path = config(tmp_path, {"t": helper(MCP_START_LOG=str(log))})
    load_mcp([path], cache)
    close_all()
    data = json.loads(cache.read_text())
    for entry in data["servers"].values():
        entry["saved"] -= 2 * 24 * 3600
    cache.write_text(json.dumps(data))
    load_mcp([path], cache)
    assert starts(log) == 2


@needs_sdk
def test_a_slow_server_does_not_delay_a_warm_start_and_starts_once_for_parallel_calls(tmp_path):
    log, cache = tmp_path / "starts", tmp_path / "cache.json"
    path = config(tmp_path, {"slow": helper(MCP_START_LOG=str(log), MCP_START_DELAY="1")})
    load_mcp([path], cache)
    close_all()
    tools, _ = load_mcp([path], cache)
    assert starts(log) == 1  # the warm load started nothing
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda n: run(tools, "mcp__slow__add", a=n, b=1), range(4)))
    assert results == ["1", "2", "3", "4"]
    assert starts(log) == 2  # one at the first load, one for all four calls


@needs_sdk
def test_a_tool_gone_from_the_server_is_an_error_and_refreshes_the_cache(tmp_path):
    cache = tmp_path / "cache.json"
    path = config(tmp_path, {"t": helper()})
    load_mcp([path], cache)
    close_all()
    data = json.loads(cache.read_text())
    (entry,) = data["servers"].values()
    entry["tools"].append({"name": "vanished", "inputSchema": {"type": "object"}})
    cache.write_text(json.dumps(data))
    tools, _ = load_mcp([path], cache)
    with pytest.raises(ToolError, match="no longer has a tool 'vanished'"):
        run(tools, "mcp__t__vanished")
    (entry,) = json.loads(cache.read_text())["servers"].values()
    assert "vanished" not in [t["name"] for t in entry["tools"]]


@needs_sdk
def test_a_crash_mid_call_is_an_error_and_the_next_call_restarts_it(tmp_path):
    tools, _ = load_mcp([config(tmp_path, {"t": helper()})], tmp_path / "cache.json")
    first = int(run(tools, "mcp__t__pid"))
    with pytest.raises(ToolError, match="closed the connection"):
        run(tools, "mcp__t__crash")
    second = int(run(tools, "mcp__t__pid"))
    assert second != first


@needs_sdk
def test_a_call_past_the_deadline_is_an_error(tmp_path, monkeypatch):
    tools, _ = load_mcp([config(tmp_path, {"t": helper()})], tmp_path / "cache.json")
    tool = next(t for t in tools if t.name == "mcp__t__sleep")
    began = time.monotonic()
    with pytest.raises(ToolError, match="did not answer within"):
        tool.run({"seconds": 30}, ToolContext(deadline=time.monotonic() + 1))
    assert time.monotonic() - began < 15  # a hang guard: the call sleeps 30 s
    monkeypatch.setenv("MCP_TOOL_TIMEOUT", "500")  # milliseconds, as in Claude Code
    with pytest.raises(ToolError, match="did not answer within 0.5 s"):
        tool.run({"seconds": 30}, ToolContext())
    assert run(tools, "mcp__t__add", a=1, b=1) == "2"  # the server still serves


@needs_sdk
def test_the_toolbox_close_leaves_no_process_and_no_thread(tmp_path, everything):
    before = set(children())
    servers = {"t": helper(), "time": TIME, "everything": everything}
    tools, _ = mcp.load_mcp([config(tmp_path, servers)], tmp_path / "cache.json")
    box = Toolbox(tools)
    pid = int(run(tools, "mcp__t__pid"))
    assert len(set(children()) - before) == 3 and pid in children()
    Toolbox(tools, owner=False).close()  # a subagent's toolbox leaves its parent's tools alone
    assert pid in children()
    box.close()
    assert set(children()) - before == set()
    assert not any(t.name == "agi-mcp" for t in threading.enumerate())
    assert not Path(f"/proc/{pid}").exists()
    box.close()  # again: nothing left to do, and no error
    # a tool used after close starts its server again
    assert run(tools, "mcp__t__add", a=1, b=2) == "3"
    box.close()


@needs_sdk
def test_closing_while_a_server_starts_ends_it_at_once(tmp_path):
    log = tmp_path / "starts"
    path = config(tmp_path, {"slow": helper(MCP_START_LOG=str(log), MCP_START_DELAY="60")})
    loaded: list = []
    loader = threading.Thread(target=lambda: loaded.append(load_mcp([path], None)))
    loader.start()
    deadline = time.monotonic() + 30
    while not starts(log) and time.monotonic() < deadline:
        time.sleep(0.05)
    began = time.monotonic()
    close_all()
    loader.join(40)
    # the SDK's 2 s grace after EOF, then SIGTERM; a hang guard, far short of the 60 s start
    assert time.monotonic() - began < 30
    (pid,) = map(int, log.read_text().split())
    assert not Path(f"/proc/{pid}").exists()
    ((tools, warnings),) = loaded
    assert tools == [] and len(warnings) == 1 and "slow" in warnings[0]


def test_without_the_sdk_a_server_is_a_warning_that_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if it were not installed
    tools, warnings = load_mcp([config(tmp_path, {"t": helper()})], None)
    assert tools == []
    assert warnings == [
        "MCP server t did not start: the mcp package is not installed "
        "(pip install mcp, or agi-cli's [mcp] extra); its tools are not offered"
    ]


@needs_sdk
def test_names_are_safe_and_hook_matchers_see_them(tmp_path):
    from agi.claude.hooks.settings import _name_matcher

    tools, _ = load_mcp([config(tmp_path, {"my.srv": helper()})], tmp_path / "cache.json")
    assert all(t.name.startswith("mcp__my_srv__") for t in tools)
    matcher = _name_matcher("mcp__my_srv__.*", "matcher", ValueError)
    assert all(matcher.matches(t.name, {}) for t in tools)
    assert all("$schema" not in t.parameters for t in tools)


# --- the agi executable ------------------------------------------------------------------------


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


@needs_sdk
def test_cli_the_next_request_holds_the_time_servers_answer(agi, tmp_path):
    cfg = config(tmp_path, {"time": TIME})
    session = tmp_path / "session"
    script = [call("mcp__time__get_current_time", timezone="UTC"), text("done")]
    with FakeModel(*script) as server:
        r = agi("--mcp", str(cfg), "-s", str(session), "what time is it", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n" and r.stderr == ""
    offered = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
    assert "timezone" in offered["mcp__time__get_current_time"]["parameters"]["properties"]
    (result,) = tool_results(server.requests[1])
    answer = json.loads(result)
    assert answer["timezone"] == "UTC"
    told = datetime.fromisoformat(answer["datetime"])
    assert abs((told - datetime.now(UTC)).total_seconds()) < 120
    shown = agi("--show", str(session))
    assert "mcp__time__get_current_time" in shown.stdout


@needs_sdk
def test_cli_parallel_calls_over_stdio_and_http(agi, tmp_path, http_url, everything):
    cfg = config(tmp_path, {"everything": everything, "web": {"type": "http", "url": http_url}})
    script = [
        calls(("mcp__everything__echo", {"message": "hi"}), ("mcp__web__add", {"a": 1, "b": 2})),
        call("mcp__everything__get-sum", a="one"),
        text("done"),
    ]
    with FakeModel(*script) as server:
        r = agi("--mcp", str(cfg), "go", server=server)
    assert r.returncode == 0, r.stderr
    assert tool_results(server.requests[1]) == ["Echo: hi", "3"]
    assert tool_results(server.requests[2])[-1].startswith("Error: ")


@needs_sdk
def test_cli_a_missing_server_command_is_one_warning_and_the_run_answers(agi, tmp_path):
    cfg = config(tmp_path, {"ghost": {"command": "agi-no-such-mcp-server"}, "time": TIME})
    with FakeModel(call("mcp__time__get_current_time", timezone="UTC"), text("ok")) as server:
        r = agi("--mcp", str(cfg), "hi", server=server)
    assert r.returncode == 0 and r.stdout == "ok\n"
    assert r.stderr.startswith("agi: ") and r.stderr.count("\n") == 1
    assert "ghost" in r.stderr and "agi-no-such-mcp-server" in r.stderr
    assert '"timezone": "UTC"' in tool_results(server.requests[1])[0]


def test_cli_a_malformed_mcp_config_exits_2(agi, tmp_path):
    cfg = tmp_path / "broken.json"
    cfg.write_text('{"mcpServers": {"x": {"args": []}}}')
    with FakeModel(text("never")) as server:
        r = agi("--mcp", str(cfg), "hi", server=server)
    assert r.returncode == 2
    assert r.stderr.startswith("agi: ") and str(cfg) in r.stderr
    assert server.requests == []


@needs_sdk
def test_cli_config_dir_mcp_json_and_a_warm_second_run(agi, tmp_path):
    log = tmp_path / "starts"
    config(tmp_path, {"t": helper(MCP_START_LOG=str(log))})  # beside $AGI_CONFIG
    with FakeModel(text("first")) as server:
        assert agi("hi", server=server).returncode == 0
    assert "mcp__t__add" in [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert starts(log) == 1
    with FakeModel(text("second")) as server:
        r = agi("hi", server=server)
    assert r.stdout == "second\n"
    assert "mcp__t__add" in [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert starts(log) == 1  # the cached list was offered; the server never started
    with FakeModel(call("mcp__t__add", a=2, b=2), text("third")) as server:
        r = agi("hi", server=server)
    assert tool_results(server.requests[1]) == ["4"] and starts(log) == 2


@needs_sdk
def test_cli_hooks_match_mcp_tools(agi, tmp_path):
    hooks = tmp_path / "hooks.json"
    deny = "echo 'no MCP today' >&2; exit 2"
    group = {"matcher": "mcp__t__.*", "hooks": [{"type": "command", "command": deny}]}
    hooks.write_text(json.dumps({"hooks": {"PreToolUse": [group]}}))
    cfg = config(tmp_path, {"t": helper()})
    with FakeModel(call("mcp__t__add", a=1, b=1), text("ok")) as server:
        r = agi("--mcp", str(cfg), "--hooks", str(hooks), "hi", server=server)
    assert r.returncode == 0, r.stderr
    assert "no MCP today" in tool_results(server.requests[1])[0]


@needs_sdk
@pytest.mark.parametrize("when", ["starting", "mid-call"])
def test_cli_sigint_leaves_no_server_process(env, tmp_path, when):
    mark, log = tmp_path / "called", tmp_path / "starts"
    server_env = {"MCP_CALL_MARK": str(mark), "MCP_START_LOG": str(log)}
    if when == "starting":
        server_env["MCP_START_DELAY"] = "60"
    cfg = config(tmp_path, {"t": helper(**server_env)})
    with FakeModel(call("mcp__t__sleep", seconds=60), text("after")) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        proc = start_agi([AGI, "--mcp", str(cfg), "wait"], env)
        awaited = log if when == "starting" else mark
        deadline = time.monotonic() + 30
        while not awaited.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert out == "" and err.startswith("agi: interrupted") and err.count("\n") == 1
    (pid,) = map(int, log.read_text().split())
    assert not Path(f"/proc/{pid}").exists()


def test_ci_has_the_mcp_sdk_and_node():
    """CI installs the mcp extra and npm's server (.ci/run): there, no MCP test may skip."""
    if os.environ.get("CI") == "true":
        assert importlib.util.find_spec("mcp") is not None
        assert shutil.which("node") and shutil.which("npm")
        assert EVERYTHING.exists(), "tests/mcp_servers: npm install has not run"
