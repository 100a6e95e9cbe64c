"""Background commands and WebFetch through the real `agi` against the scripted model: the
tool results are read from the next request."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fakeserver import FakeModel, call, text


def tool_texts(server: FakeModel) -> list[str]:
    return [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]


def unique_sleep() -> str:
    """`sleep 9NNN.NNNNNNNNN`, random: no other test's command line (`sleep 91234` included)
    holds it, so the process table shows only this run's command."""
    n = uuid.uuid4().int
    return f"sleep 9{n % 1000:03d}.{n // 1000 % 10**9:09d}"


def alive(marker: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if marker in line and "ps -eo" not in line]


def test_background_commands_are_read_killed_judged_and_ended_with_the_run(agi, tmp_path):
    marker = unique_sleep()  # a unique command line: findable
    steps = [
        call("Bash", command="echo started; seq 1 3; exit 3", run_in_background=True),
        call("Bash", command=f"{marker}; true", run_in_background=True),
        call("Bash", command="sleep 0.5"),
        call("BashOutput", bash_id="bash_1", filter="^[0-9]"),
        call("KillShell", shell_id="bash_2"),
        call("BashOutput", bash_id="bash_2"),
        call("Bash", command=f"{marker}; true", run_in_background=True),
        call("Bash", command="touch nope", run_in_background=True),
        call("BashOutput", bash_id="bash_9"),
        text("done"),
    ]
    with FakeModel(*steps) as server:
        r = agi("--tools", "Bash,BashOutput,KillShell", "--deny", "Bash(touch:*)", "go",
                server=server)  # fmt: skip
    assert r.returncode == 0, r.stderr
    got = tool_texts(server)
    assert got[0].startswith("Command running in background with ID: bash_1")
    assert (
        got[3] == "<status>failed</status>\n<exit_code>3</exit_code>\n<stdout>\n1\n2\n3\n</stdout>"
    )
    assert got[4] == f"Successfully killed shell: bash_2 ({marker}; true)"
    assert got[5].startswith("<status>killed</status>")
    assert got[6].startswith("Command running in background with ID: bash_3")
    assert got[7] == 'Error: denied by permission rule "Bash(touch:*)" (command line)'
    assert got[8].startswith("Error: there is no background command 'bash_9'")
    assert not (tmp_path / "nope").exists()
    assert alive(marker) == []  # bash_3 ended with the run: no orphan
    bash = {t["function"]["name"]: t for t in server.requests[0]["tools"]}["Bash"]
    assert "run_in_background" in bash["function"]["parameters"]["properties"]


def test_background_output_is_bounded_and_needs_bash_output(agi, tmp_path):
    steps = [
        call("Bash", command="head -c 200000 /dev/zero | tr '\\0' x", run_in_background=True),
        call("Bash", command="sleep 0.5"),
        call("BashOutput", bash_id="bash_1"),
        text("done"),
    ]
    with FakeModel(*steps) as server:
        assert agi("--tools", "Bash,BashOutput", "go", server=server).returncode == 0
    out = tool_texts(server)[2]
    assert len(out) < 31_000 and "bytes of output omitted" in out
    with FakeModel(call("Bash", command="echo hi", run_in_background=True), text("ok")) as server:
        assert agi("go", server=server).returncode == 0
    assert tool_texts(server) == [
        "Error: run_in_background needs the BashOutput tool, which this run does not offer"
    ]


def gzipped(data: bytes, times: int = 1) -> bytes:
    """`data` repeated `times` times, gzip-compressed as a server sends it."""
    pack = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return b"".join(pack.compress(data) for _ in range(times)) + pack.flush()


# a page of 64 MB once decompressed, 64 KB on the wire (WebFetch keeps 10 MB of it)
BOMB = gzipped(b"agi " * (1 << 18), 64)


class Pages(BaseHTTPRequestHandler):
    """A page server: /page (HTML), /to-page (a redirect), /loop (redirects forever), /gzip
    (a gzip-encoded page), /bomb (BOMB), /brotli (an encoding WebFetch does not read)."""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        if self.path == "/page":
            body = b"<html><head><script>var x=1</script></head><body><h1>Title</h1>"
            body += b"<p>The answer is <b>42</b>.</p></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        encoded = {
            "/gzip": ("gzip", gzipped(b"Plain text, compressed.\n")),
            "/bomb": ("gzip", BOMB),
            "/brotli": ("br", b"\x1b\x00"),
        }.get(self.path)
        if encoded:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Encoding", encoded[0])
            self.send_header("Content-Length", str(len(encoded[1])))
            self.end_headers()
            self.wfile.write(encoded[1])
            return
        where = {"/to-page": f"http://127.0.0.1:{port}/page", "/loop": "/loop",
                 "/to-other": f"http://localhost:{port}/page"}.get(self.path)  # fmt: skip
        self.send_response(302 if where else 404)
        if where:
            self.send_header("Location", where)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def pages():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_webfetch_refuses_loopback_by_default(agi, pages):
    with FakeModel(call("WebFetch", url=f"{pages}/page", prompt="what?"), text("ok")) as server:
        r = agi("--tools", "WebFetch", "go", server=server)
    assert r.returncode == 0, r.stderr
    [result] = tool_texts(server)
    assert result.startswith("Error: 127.0.0.1 is a loopback, link-local or private address")
    assert "web_allow_private = true" in result
    assert len(server.requests) == 2  # no request about a page


def test_webfetch_asks_the_model_about_the_page_counted_in_usage(agi, tmp_path, pages):
    (tmp_path / "config.toml").write_text("web_allow_private = true\n")
    steps = [call("WebFetch", url=f"{pages}/to-page", prompt="What is the answer?"),
             text("It is 42."), text("done")]  # fmt: skip
    with FakeModel(*steps) as server:
        r = agi("--tools", "WebFetch", "--output", "json", "go", server=server)
    assert r.returncode == 0, r.stderr
    asked = server.requests[1]
    assert "tools" not in asked or not asked["tools"]
    content = asked["messages"][-1]["content"]
    assert "# Title\n\nThe answer is **42**." in content and "var x" not in content
    assert "What is the answer?" in content
    assert tool_texts(server) == [f"Fetched {pages}/page\n\nIt is 42."]
    usage = json.loads(r.stdout)["usage"]
    assert (usage["input"], usage["output"]) == (30, 15)  # three requests, the page's too


def test_webfetch_raw_redirect_limits_and_domain_rules(agi, tmp_path, pages):
    (tmp_path / "config.toml").write_text("web_allow_private = true\nwebfetch_raw = true\n")
    port = pages.rsplit(":", 1)[1]
    steps = [
        call("WebFetch", url=f"{pages}/page", prompt="p"),
        call("WebFetch", url=f"{pages}/loop", prompt="p"),
        call("WebFetch", url=f"http://localhost:{port}/page", prompt="p"),
        call("WebFetch", url=f"http://localhost:{port}/to-other", prompt="p"),
        call("WebFetch", url=f"{pages}/to-other", prompt="p"),
        call("WebFetch", url="file:///etc/passwd", prompt="p"),
        text("done"),
    ]
    with FakeModel(*steps) as server:
        r = agi("--tools", "WebFetch", "--deny", "WebFetch(domain:localhost)", "go",
                server=server)  # fmt: skip
    assert r.returncode == 0, r.stderr
    raw, loop, denied, _, redirected, scheme = tool_texts(server)[:6]
    assert raw == "# Title\n\nThe answer is **42**."
    assert loop == f"Error: more than 5 redirects from {pages}/loop"
    assert denied == 'Error: denied by permission rule "WebFetch(domain:localhost)" (command line)'
    assert redirected.startswith(f"Error: redirected to http://localhost:{port}/page, which is")
    assert "WebFetch(domain:localhost)" in redirected
    assert scheme.startswith("Error: WebFetch fetches http and https URLs only")
    assert len(server.requests) == 7  # raw: no request about a page


def test_the_process_table_helper_sees_a_live_process(tmp_path):
    marker = unique_sleep()
    proc = subprocess.Popen(["bash", "-c", f"{marker}; true"], start_new_session=True)
    try:
        assert alive(marker)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert alive(marker) == []


def test_webfetch_decodes_gzip_and_keeps_at_most_10_mb_of_a_bomb(agi, tmp_path, pages):
    (tmp_path / "config.toml").write_text("web_allow_private = true\nwebfetch_raw = true\n")
    steps = [call("WebFetch", url=f"{pages}/{path}", prompt="p") for path in ("gzip", "bomb")]
    steps += [call("WebFetch", url=f"{pages}/brotli", prompt="p"), text("done")]
    with FakeModel(*steps) as server:
        r = agi("--tools", "WebFetch", "go", server=server)
    assert r.returncode == 0, r.stderr
    plain, bomb, brotli = tool_texts(server)[:3]
    assert plain == "Plain text, compressed."
    assert bomb.startswith("agi agi agi ") and bomb.count("agi") < 20_000  # the raw cut
    assert bomb.endswith(f"[... the page was cut at {10 << 20} bytes ...]")
    assert brotli == f"Error: {pages}/brotli: the page is sent as 'br', not gzip or deflate"
