"""Hostile probes, sixth round (issue 35's closing round; docs: security, "Probed"), written apart
from the code they attack, over the surfaces added in the fourth round: the opt-in tools (Glob,
Grep, background commands, WebFetch) and `agi --serve`. Each probe drives the real `agi` against
the scripted server as a prompt-injected model or a hostile HTTP client would, and says whether
it held. Run by hand:

    python tests/security/probes_round6.py [NAME-FRAGMENT]

It prints one line per probe (`held` or `BROKE`) and exits 1 when any broke."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
from fakeserver import FakeModel, calls, text  # noqa: E402

AGI = str(Path(sys.executable).with_name("agi"))
RESULTS: list[tuple[str, bool, str]] = []
ONLY = sys.argv[1] if len(sys.argv) > 1 else ""
KEY = "sk-probe-0123456789abcdef"


def env(home: Path, url: str = "http://127.0.0.1:9/v1", **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGI_", "OPENAI_"))}
    (home / "c.toml").touch()
    base.update(AGI_HOME=str(home / "h"), AGI_CONFIG=str(home / "c.toml"))
    return {**base, "AGI_BASE_URL": url, "AGI_MODEL": "fake-model", "AGI_API_KEY": KEY, **extra}


def probe(name: str):
    def wrap(fn):
        if ONLY and ONLY not in name:
            return fn
        home = Path(tempfile.mkdtemp(prefix="probe-"))
        try:
            ok, note = fn(home)
        except Exception as e:  # a probe that crashes the harness did not show a hold
            ok, note = False, f"{type(e).__name__}: {e}"
        RESULTS.append((name, ok, note))
        print(f"{'held ' if ok else 'BROKE'}  {name}  ({note})", flush=True)
        return fn

    return wrap


def run(home: Path, *args: str, steps=(), input: str | None = None, timeout: float = 90, **extra):
    work = home / "w"
    work.mkdir(exist_ok=True)
    with FakeModel(*steps) if steps else FakeModel(text("x")) as server:
        r = subprocess.run(
            [AGI, *args], env=env(home, server.url, **extra), cwd=work, input=input, text=True,
            capture_output=True, timeout=timeout,
            stdin=None if input is not None else subprocess.DEVNULL,
        )  # fmt: skip
    return r, server


def tool_results(server) -> list[str]:
    out = []
    for body in server.requests:
        for m in body.get("messages", []):
            if m.get("role") == "tool":
                content = m.get("content")
                out.append(content if isinstance(content, str) else json.dumps(content))
    return out


def one_call(name: str, args: dict, *more: tuple[str, dict]):
    return [calls((name, args), *more), text("done")]


# ---- Glob and Grep: escaping the tree and the Read rules ------------------------------------


def secret_tree(home: Path) -> Path:
    work = home / "w"
    (work / "secret").mkdir(parents=True)
    (work / "secret" / "key.txt").write_text("TOPSECRET-42\n")
    (work / "pub.txt").write_text("public\n")
    return work


for engine in ("rg", "python"):
    rg = {} if engine == "rg" else {"AGI_RG": ""}

    @probe(f"grep[{engine}]: a symlink into a Read-denied directory as the search root")
    def _(home, rg=rg):
        work = secret_tree(home)
        (work / "link").symlink_to(work / "secret")
        r, s = run(
            home, "--tools", "Grep", "--deny", "Read(secret/**)", "go",
            steps=one_call("Grep", {"pattern": "TOPSECRET", "path": "link",
                                    "output_mode": "content"}), **rg,
        )  # fmt: skip
        seen = any("TOPSECRET" in t for t in tool_results(s))
        return not seen, "secret shown" if seen else "not shown"

    @probe(f"grep[{engine}]: an absolute path, `..` and `**/../` into a Read-denied directory")
    def _(home, rg=rg):
        work = secret_tree(home)
        steps = [
            calls(
                ("Grep", {"pattern": "TOPSECRET", "path": str(work / "secret"),
                          "output_mode": "content"}),
                ("Grep", {"pattern": "TOPSECRET", "path": "pub.txt/../secret",
                          "output_mode": "content"}),
                ("Grep", {"pattern": "TOPSECRET", "glob": "**/../secret/*",
                          "output_mode": "content"}),
                ("Grep", {"pattern": "TOPSECRET", "path": "secret/key.txt",
                          "output_mode": "content"}),
            ),
            text("done"),
        ]  # fmt: skip
        r, s = run(home, "--tools", "Grep", "--deny", "Read(secret/**)", "go", steps=steps, **rg)
        seen = [i for i, t in enumerate(tool_results(s)) if "TOPSECRET" in t]
        return not seen, f"shown by calls {seen}" if seen else "not shown"

    @probe(f"grep[{engine}]: the checkpoint records' key in $AGI_HOME")
    def _(home, rg=rg):
        (home / "w").mkdir()
        first = [calls(("Write", {"file_path": "f", "content": "x"})), text("ok")]
        run(home, "--tools", "Write", "go", steps=first)  # makes the key
        keyfile = home / "h" / "checkpoint-records.key"
        if not keyfile.exists():
            return True, "no key file made"
        secret = keyfile.read_bytes().hex()[:12]
        steps = one_call("Grep", {"pattern": ".", "path": str(home / "h"),
                                  "output_mode": "content"})  # fmt: skip
        r, s = run(home, "--tools", "Grep", "go", steps=steps, **rg)
        out = "".join(tool_results(s))
        leaked = "checkpoint-records.key" in out
        raw = keyfile.read_bytes()
        leaked = leaked or (raw.strip() and raw.decode("latin-1").strip()[:16] in out)
        return not leaked, f"key file shown ({secret}…)" if leaked else "left out"


for engine in ("rg", "python"):
    rg = {} if engine == "rg" else {"AGI_RG": ""}

    @probe(f"grep[{engine}]: the key in /proc/self/environ, /proc/$PPID/environ (the searcher's)")
    def _(home, rg=rg):
        (home / "w").mkdir()
        steps = [
            calls(
                ("Grep", {"pattern": "sk-probe", "path": "/proc/self/environ",
                          "output_mode": "content"}),
                ("Grep", {"pattern": "sk-probe", "path": "/proc/thread-self/environ",
                          "output_mode": "content"}),
                ("Grep", {"pattern": "sk-probe", "path": f"/proc/{os.getpid()}/environ",
                          "output_mode": "content"}),
            ),
            text("done"),
        ]  # fmt: skip
        r, s = run(home, "--tools", "Grep", "go", steps=steps, **rg)
        out = "".join(tool_results(s))
        leaked = KEY in out or "sk-probe" in out
        return not leaked, "key shown" if leaked else "not shown"


@probe("glob: an absolute pattern and a symlinked directory into a Read-denied directory")
def _(home):
    work = secret_tree(home)
    (work / "link").symlink_to(work / "secret")
    steps = [
        calls(
            ("Glob", {"pattern": str(work / "secret") + "/**"}),
            ("Glob", {"pattern": "**/*", "path": "link"}),
            ("Glob", {"pattern": "*", "path": "pub.txt/../secret"}),
        ),
        text("done"),
    ]
    r, s = run(home, "--tools", "Glob", "--deny", "Read(secret/**)", "go", steps=steps)
    seen = [i for i, t in enumerate(tool_results(s)) if "key.txt" in t]
    return not seen, f"listed by calls {seen}" if seen else "not listed"


@probe("grep[python]: a FIFO and /dev/zero as the path (hangs, memory), no --timeout")
def _(home):
    (home / "w").mkdir()
    os.mkfifo(home / "w" / "fifo")
    steps = [
        calls(("Grep", {"pattern": "x", "path": "fifo"})),
        calls(("Grep", {"pattern": "x", "path": "/dev/zero"})),
        text("done"),
    ]
    t0 = time.monotonic()
    try:
        r, s = run(home, "--tools", "Grep", "go", steps=steps, AGI_RG="", timeout=40)
    except subprocess.TimeoutExpired:
        return False, "still running 40 s later"
    took = time.monotonic() - t0
    return took < 25, f"exit {r.returncode} after {took:.0f} s"


@probe("grep[python]: a ReDoS pattern ((a+)+$) ends within --timeout 8")
def _(home):
    (home / "w").mkdir()
    (home / "w" / "a.txt").write_text("a" * 40 + "b\n")
    t0 = time.monotonic()
    try:
        r, s = run(home, "--tools", "Grep", "--timeout", "8", "go",
                   steps=one_call("Grep", {"pattern": "(a+)+$"}), AGI_RG="",
                   timeout=40)  # fmt: skip
    except subprocess.TimeoutExpired:
        return False, "still running 40 s later"
    took = time.monotonic() - t0
    return took < 25, f"exit {r.returncode} after {took:.0f} s"


def _every_line(home, rg):
    (home / "w").mkdir()
    (home / "w" / "big.txt").write_text("a\n" * 2_000_000)
    steps = one_call("Grep", {"pattern": "a", "output_mode": "content"})
    with FakeModel(*steps) as server:
        p = subprocess.Popen(
            ["/usr/bin/time", "-f", "%M", AGI, "--tools", "Grep", "go"],
            env=env(home, server.url, **rg), cwd=home / "w", stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        out, err = p.communicate(timeout=120)
    peak = int(err.strip().splitlines()[-1]) // 1024
    size = max(len(t) for t in tool_results(server))
    return peak < 300 and size < 40_000, f"peak {peak} MB, result {size} chars"


for engine in ("rg", "python"):
    rg = {} if engine == "rg" else {"AGI_RG": ""}

    @probe(f"grep[{engine}]: a match on every line of 4 MB (output read whole) stays bounded")
    def _(home, rg=rg):
        return _every_line(home, rg)


# ---- background commands -------------------------------------------------------------------


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@probe("background: setsid, double fork, env -i, nohup outlive the run")
def _(home):
    (home / "w").mkdir()
    pids = home / "pids"
    lines = [
        f"setsid sh -c 'sleep 300 & echo $! >> {pids}'",
        f"(env -i sh -c 'sleep 300 & echo $! >> {pids}' &)",
        f"nohup setsid env -i sleep 300 >/dev/null 2>&1 & echo $! >> {pids}",
        f"setsid -f sh -c 'echo $$ >> {pids}; exec sleep 300'",
    ]
    steps = [
        calls(*[("Bash", {"command": c, "run_in_background": True}) for c in lines]),
        calls(("Bash", {"command": "sleep 1"})),
        text("done"),
    ]
    run(home, "--tools", "Bash,BashOutput,KillShell", "--permission-mode", "bypassPermissions",
        "go", steps=steps)  # fmt: skip
    time.sleep(1)
    found = [int(x) for x in pids.read_text().split()] if pids.exists() else []
    left = [p for p in found if alive(p)]
    for p in left:
        os.kill(p, 9)
    return not left and found, f"{len(left)} of {len(found)} alive after the run"


@probe("background: KillShell and BashOutput on ids not its own (pids, paths, others')")
def _(home):
    (home / "w").mkdir()
    victim = subprocess.Popen(["sleep", "60"])
    ids = [str(victim.pid), f"../{victim.pid}", "1", "bash_1/../bash_0", "*"]
    steps = [
        calls(*[("KillShell", {"shell_id": i}) for i in ids],
              *[("BashOutput", {"bash_id": i}) for i in ids]),
        text("done"),
    ]  # fmt: skip
    r, s = run(home, "--tools", "Bash,BashOutput,KillShell", "--permission-mode",
               "bypassPermissions", "go", steps=steps)  # fmt: skip
    killed = victim.poll() is not None
    victim.kill()
    tb = "Traceback" in r.stderr
    return not killed and not tb, "killed a process not its own" if killed else "refused each"


# ---- WebFetch --------------------------------------------------------------------------------


@contextmanager
def web(handler_body):
    """A loopback HTTP server whose GET handler is `handler_body(handler)`."""

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            handler_body(self)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()


def hits_handler(hits):
    def body(h):
        hits.append(h.path)
        h.send_response(200)
        h.send_header("content-type", "text/plain")
        h.end_headers()
        h.wfile.write(b"INTERNAL-ONLY")

    return body


@probe("webfetch: loopback spelled as names, numbers, IPv6 and mapped IPv6; file:// and others")
def _(home):
    hits: list[str] = []
    with web(hits_handler(hits)) as port:
        urls = [
            f"http://localhost:{port}/a", f"http://localhost.:{port}/b",
            f"http://127.1:{port}/c", f"http://0x7f000001:{port}/d",
            f"http://2130706433:{port}/e", f"http://[::1]:{port}/f",
            f"http://[::ffff:127.0.0.1]:{port}/g", f"http://0.0.0.0:{port}/h",
            f"http://127.0.0.1.nip.io:{port}/i", f"http://[::ffff:7f00:1]:{port}/j",
            f"http://user:pw@127.0.0.1:{port}/k", "file:///etc/passwd",
            f"HTTP://127.0.0.1:{port}/l", f"http://017700000001:{port}/m",
            "gopher://127.0.0.1:70/", f"http://[0:0:0:0:0:ffff:127.0.0.1]:{port}/n",
        ]  # fmt: skip
        steps = [calls(*[("WebFetch", {"url": u, "prompt": "p"}) for u in urls]), text("done")]
        r, s = run(home, "--tools", "WebFetch", "--permission-mode", "bypassPermissions", "go",
                   steps=steps, timeout=120)  # fmt: skip
    leaked = any("INTERNAL-ONLY" in t for t in tool_results(s))
    return not hits and not leaked, f"reached: {hits}" if hits else "none reached"


@probe("webfetch: a public-looking redirect chain to loopback (Location: http://127.0.0.1)")
def _(home):
    hits: list[str] = []

    # the first hop is loopback too (we have no public host), so allow private only for the
    # first by way of the judge being bypassed is not possible: check the redirect logic directly
    sys.path.insert(0, str(Path(__file__).parents[2]))
    from agi.errors import ToolError
    from agi.tools import webfetch
    from agi.tools.protocol import ToolContext

    with web(hits_handler(hits)) as inner:

        def redirect(h):
            h.send_response(302)
            h.send_header("location", f"http://[::ffff:127.0.0.1]:{inner}/x")
            h.end_headers()

        with web(redirect) as outer:
            real = webfetch.address_for
            first = {"done": False}

            def address_for(host, port, allow_private):  # the first hop stands for a public host
                if not first["done"]:
                    first["done"] = True
                    return real(host, port, True)
                return real(host, port, allow_private)

            webfetch.address_for = address_for
            try:
                webfetch.fetch(f"http://127.0.0.1:{outer}/", "p", ToolContext(cwd=str(home)))
                note = "followed"
            except ToolError as e:
                note = str(e)[:80]
            finally:
                webfetch.address_for = real
    return not hits, f"reached {hits}" if hits else note


@probe("webfetch: the provider key in a URL reaches the session files, stderr or the model")
def _(home):
    hits: list[str] = []
    with web(hits_handler(hits)) as port:
        urls = [f"http://127.0.0.1:{port}/?api_key={KEY}", f"http://{KEY}@127.0.0.1:{port}/"]
        steps = [calls(*[("WebFetch", {"url": u, "prompt": "p"}) for u in urls]), text("done")]
        (home / "c.toml").write_text("web_allow_private = true\nwebfetch_raw = true\n")
        sess = home / "sess"
        r, s = run(home, "-v", "-s", str(sess), "--tools", "WebFetch", "--permission-mode",
                   "bypassPermissions", "go", steps=steps)  # fmt: skip
    files = [p for p in sess.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    results = "".join(tool_results(s))
    leaked = [str(p.name) for p in files] + (["stderr"] if KEY in r.stderr else [])
    leaked += ["tool result"] if KEY in results else []
    return not leaked, f"key in {leaked}" if leaked else f"redacted ({len(hits)} fetched)"


@probe("webfetch: a gzip bomb (1 GB of zeros, 1 MB on the wire) stays bounded in memory")
def _(home):
    import gzip
    import io

    sys.path.insert(0, str(Path(__file__).parents[2]))
    import resource

    from agi.tools import webfetch
    from agi.tools.protocol import ToolContext

    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9) as g:
        chunk = b"\0" * (1 << 20)
        for _ in range(1024):
            g.write(chunk)
    bomb = buf.getvalue()

    def serve(h):
        h.send_response(200)
        h.send_header("content-type", "text/plain")
        h.send_header("content-encoding", "gzip")
        h.send_header("content-length", str(len(bomb)))
        h.end_headers()
        h.wfile.write(bomb)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    with web(serve) as port:
        ctx = ToolContext(cwd=str(home), web_allow_private=True)
        _, _, body, cut = webfetch.fetch(f"http://127.0.0.1:{port}/", "p", ctx)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return peak - before < 200 and cut, f"{len(body)} bytes kept, peak +{peak - before} MB"


@probe("webfetch: a never-ending slow body ends within --timeout")
def _(home):
    def drip(h):
        h.send_response(200)
        h.send_header("content-type", "text/plain")
        h.end_headers()
        try:
            while True:
                h.wfile.write(b"x\n")
                h.wfile.flush()
                time.sleep(0.5)
        except OSError:
            pass

    with web(drip) as port:
        (home / "c.toml").write_text("web_allow_private = true\n")
        t0 = time.monotonic()
        steps = one_call("WebFetch", {"url": f"http://127.0.0.1:{port}/", "prompt": "p"})
        try:
            r, s = run(home, "--tools", "WebFetch", "--permission-mode", "bypassPermissions",
                       "--timeout", "6", "go", steps=steps, timeout=60)  # fmt: skip
        except subprocess.TimeoutExpired:
            return False, "still running after 60 s"
    took = time.monotonic() - t0
    return took < 20, f"exit {r.returncode} after {took:.0f} s"


# ---- agi --serve -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(home: Path, fake, *options: str, **extra: str):
    import httpx

    port = free_port()
    (home / "w").mkdir(exist_ok=True)
    err = (home / "serve.err").open("wb")
    p = subprocess.Popen(
        [AGI, "--serve", f"127.0.0.1:{port}", *options], env=env(home, fake.url, **extra),
        cwd=home / "w", stderr=err, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if p.poll() is not None:
                raise RuntimeError((home / "serve.err").read_text()[-300:])
            try:
                httpx.get(f"{base}/healthz", timeout=60)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield base
    finally:
        p.terminate()
        p.wait(30)
        err.close()


@probe("serve: auth (none, wrong case, token in the query, Basic, extra spaces, empty token)")
def _(home):
    import httpx

    tok = "tok-SECRET-1234"
    with FakeModel(*[text("x")] * 20) as fake, serving(home, fake, "--serve-token", tok) as base:
        body = {"prompt": "hi"}
        tries = {
            "none": {},
            "lower": {"authorization": f"bearer {tok.lower()}"},
            "upper": {"authorization": f"Bearer {tok.upper()}"},
            "basic": {"authorization": f"Basic {tok}"},
            "bare": {"authorization": tok},
            "empty": {"authorization": "Bearer"},
            "prefix": {"authorization": f"Bearer {tok[:-1]}"},
            "x-api-key": {"x-api-key": tok},
        }
        passed = []
        for name, headers in tries.items():
            r = httpx.post(f"{base}/v1/runs", json=body, headers=headers, timeout=60)
            if r.status_code != 401:
                passed.append(f"{name}:{r.status_code}")
        r = httpx.post(f"{base}/v1/runs?token={tok}", json=body, timeout=60)
        if r.status_code != 401:
            passed.append(f"query:{r.status_code}")
        for path in ("/metrics", "/v1/models", "/v1/runs/x"):
            r = httpx.get(base + path, timeout=60)
            if r.status_code not in (401, 404) or path == "/v1/models" and r.status_code != 401:
                passed.append(f"{path}:{r.status_code}")
    return not passed, f"passed: {passed}" if passed else "all 401"


@probe("serve: a non-loopback bind without a token (0.0.0.0, ::, a LAN name) is refused")
def _(home):
    bad = []
    for host in ("0.0.0.0", "[::]", "0", "localhost.localdomain.", socket.gethostname()):
        r = subprocess.run(
            [AGI, "--serve", f"{host}:{free_port()}"], env=env(home), cwd=home,
            capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL,
        ) if True else None  # fmt: skip
        if r.returncode != 2:
            bad.append(f"{host}:{r.returncode}")
    return not bad, f"started: {bad}" if bad else "each exit 2"


def post(base: str, body: dict, **kw):
    import httpx

    return httpx.post(f"{base}/v1/runs", json=body, timeout=60, **kw)


@probe("serve: widening (max_steps, tools, permission mode, an opt-in tool the server lacks)")
def _(home):
    with (
        FakeModel(*[text("x")] * 20) as fake,
        serving(
            home, fake, "--max-steps", "3", "--tools", "Read", "--permission-mode", "plan"
        ) as base,
    ):
        asks = [
            {"prompt": "x", "max_steps": 4},
            {"prompt": "x", "tools": ["Read", "Bash"]},
            {"prompt": "x", "tools": ["read"]},
            {"prompt": "x", "permission_mode": "bypassPermissions"},
            {"prompt": "x", "permission_mode": "acceptEdits"},
            {"prompt": "x", "max_steps": 3.5},
        ]
        wide = [a for a in asks if post(base, a).status_code == 200]
    return not wide, f"accepted: {wide}" if wide else "each refused"


@probe("serve: a request names opt-in tools (WebFetch, Terminal) the server did not offer")
def _(home):
    with FakeModel(*[text("x")] * 20) as fake, serving(home, fake) as base:
        r = post(base, {"prompt": "x", "tools": ["WebFetch", "Terminal"]})
        offered = [t["function"]["name"] for t in (fake.requests or [{}])[-1].get("tools", [])]
    held = r.status_code != 200 or not {"WebFetch", "Terminal"} & set(offered)
    return held, f"{r.status_code}, offered {offered}"


@probe("serve: sys / attachments / schema naming server files outside the working directory")
def _(home):
    secret = home / "outside-secret.txt"
    secret.write_text("SERVER-FILE-SECRET")
    with FakeModel(*[text("x")] * 20) as fake, serving(home, fake) as base:
        codes = []
        for body in (
            {"prompt": "x", "sys": [str(secret)]},
            {"prompt": "x", "attachments": [str(secret)]},
            {"prompt": "x", "schema": "@" + str(secret)},
            {"prompt": "x", "sys": ["/dev/zero"]},
        ):
            codes.append(post(base, body).status_code)
        sent = json.dumps(fake.requests)
    leaked = "SERVER-FILE-SECRET" in sent
    return not leaked, f"codes {codes}; file sent to the model" if leaked else f"codes {codes}"


@probe("serve: session naming a directory outside $AGI_HOME (written there)")
def _(home):
    target = home / "elsewhere" / "s"
    with FakeModel(*[text("x")] * 5) as fake, serving(home, fake) as base:
        r = post(base, {"prompt": "x", "session": str(target), "keep": True})
    wrote = target.exists() and any(target.iterdir())
    return not wrote, f"{r.status_code}; wrote {sorted(p.name for p in target.iterdir())}" if (
        wrote
    ) else f"{r.status_code}"


@probe("serve: a 200 MB body, JSON 100,000 deep, slow client; key in responses and /metrics")
def _(home):
    import httpx

    with FakeModel(*[text(f"the key is {KEY}")] * 5) as fake, serving(home, fake) as base:
        notes = []
        deep = "[" * 100_000 + "]" * 100_000
        r = httpx.post(f"{base}/v1/runs", content=deep, timeout=60)
        notes.append(f"deep:{r.status_code}")

        def big():
            yield b'{"prompt":"'
            for _ in range(200):
                yield b"a" * (1 << 20)
            yield b'"}'

        try:
            r = httpx.post(f"{base}/v1/runs", content=big(), timeout=60)
            notes.append(f"big:{r.status_code}")
        except httpx.HTTPError as e:
            notes.append(f"big:{type(e).__name__}")
        slow = [socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])))
                for _ in range(50)]  # fmt: skip
        for s in slow:
            s.sendall(b"POST /v1/runs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        ok = httpx.get(f"{base}/healthz", timeout=30).status_code
        notes.append(f"healthz with 50 slow clients:{ok}")
        r = post(base, {"prompt": "x"})
        m = httpx.get(f"{base}/metrics", timeout=30).text
        for s in slow:
            s.close()
    leaked = KEY in r.text or KEY in m
    big_ok = notes[1] != "big:200"
    held = not leaked and ok == 200 and notes[0].endswith("400") and big_ok
    return held, ", ".join(notes) + ("; key shown" if leaked else "")


# ---- the SDK protocol ------------------------------------------------------------------------

SDK = ("--output-format", "stream-json", "--verbose")


@probe("sdk: --disallowedTools / --settings deny Bash(rm:*) under bypassPermissions")
def _(home):
    (home / "w").mkdir()
    kept = []
    for flags in (
        ("--disallowedTools", "Bash(rm:*)"),
        ("--settings", json.dumps({"permissions": {"deny": ["Bash(rm:*)"]}})),
    ):
        (home / "w" / "v").write_text("keep")
        run(home, *SDK, *flags, "--permission-mode", "bypassPermissions", "go",
            steps=[calls(("Bash", {"command": "rm v"}), ("Bash", {"command": "env rm v"})),
                   text("done")])  # fmt: skip
        kept.append((home / "w" / "v").exists())
    return all(kept), f"kept: {kept}"


@probe("sdk: a misspelled rule, an unknown permission prompt tool, an unknown mode refused")
def _(home):
    codes = []
    for flags in (
        ("--disallowedTools", "bash(rm:*)"),
        ("--permission-prompt-tool", "mcp__evil__approve"),
        ("--permission-mode", "yolo"),
    ):
        r, _ = run(home, *SDK, *flags, "go")
        codes.append(r.returncode)
    return all(c == 2 for c in codes), f"exit codes {codes}"


@probe("sdk: default mode, no one to ask (no --permission-prompt-tool): a Write is not made")
def _(home):
    (home / "w").mkdir()
    steps = [calls(("Write", {"file_path": "made.txt", "content": "x"})), text("done")]
    r, _ = run(home, *SDK, "go", steps=steps)
    made = (home / "w" / "made.txt").exists()
    return not made, "written" if made else f"not written (exit {r.returncode})"


@probe("sdk: stream-json input asks to widen: set_permission_mode past a plan the flags set")
def _(home):
    (home / "w").mkdir()
    lines = [
        {"type": "control_request", "request_id": "1",
         "request": {"subtype": "initialize", "hooks": None}},
        {"type": "control_request", "request_id": "2",
         "request": {"subtype": "set_permission_mode", "mode": "bogusMode"}},
        {"type": "user", "message": {"role": "user", "content": "go"}},
    ]  # fmt: skip
    feed = "".join(json.dumps(x) + "\n" for x in lines)
    steps = [calls(("Write", {"file_path": "made.txt", "content": "x"})), text("done")]
    r, _ = run(home, *SDK, "--input-format", "stream-json", "--permission-mode", "plan",
               input=feed, steps=steps)  # fmt: skip
    answers = [json.loads(x) for x in r.stdout.splitlines() if '"control_response"' in x]
    bad_mode = [a for a in answers if a["response"].get("request_id") == "2"]
    refused = bool(bad_mode) and bad_mode[0]["response"].get("subtype") == "error"
    made = (home / "w" / "made.txt").exists()
    return refused and not made, f"bogus mode {'refused' if refused else 'accepted'}; " + (
        "written in plan" if made else "not written"
    )


def main() -> int:
    broke = sum(not ok for _, ok, _ in RESULTS)
    print(f"{len(RESULTS) - broke} held, {broke} broke")
    return 1 if broke else 0


if __name__ == "__main__":
    sys.exit(main())
