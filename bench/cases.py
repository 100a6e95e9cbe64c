"""The cases: each runs agi (and llm, where it has a counterpart) against the scripted server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from measure import (
    Failures,
    Report,
    alternate,
    header,
    measure,
    measure_many,
    ratio,
    summary,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

from fakeserver import call, text  # noqa: E402

ANSWER = "The answer is 42."
CASES = (
    "startup",
    "oneshot",
    "tools",
    "session",
    "concurrent",
    "nvim",
    "mcp",
    "anthropic",
    "compaction",
    "batch",
    "mcp_serve",
    "acp",
)
# llm's side of the trivial tool; agi's is its built-in `calculate`
LLM_FUNCTION = (
    "def calculate(expression: str) -> str:\n"
    '    """Evaluate a sum like 1+2."""\n'
    '    return str(sum(int(x) for x in expression.split("+")))\n'
)
ThreadingHTTPServer.request_queue_size = 128  # a provider does not drop 50 simultaneous connects


# ---------------------------------------------------------------- the scripted model


def last_user(messages: list[dict[str, Any]]) -> int:
    return max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)


class Script:
    """The server's answers, read from the prompt: `bench steps=N` calls the tool N times,
    then answers. Anything else gets `fallback` (the Neovim case streams slowly there)."""

    def __init__(self) -> None:
        self.fallback = text(ANSWER)
        self.server: Any = None

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.server is not None:  # it keeps every request; a long run needs none of them
            with self.server.lock:
                self.server.requests.clear()
                self.server.headers.clear()
        messages = body.get("messages") or []
        start = last_user(messages)
        prompt = str(messages[start].get("content") if messages else "")
        found = re.search(r"bench steps=(\d+)", prompt)
        if found is None:
            return self.fallback
        done = sum(1 for m in messages[start + 1 :] if m.get("role") == "tool")
        if done < int(found.group(1)):
            return call("calculate", expression=f"{done}+1")  # varied: no repeat notes
        return text(ANSWER)


# ---------------------------------------------------------------- the programs under test


def clean_env(**extra: str) -> dict[str, str]:
    drop = ("AGI_", "OPENAI_", "LLM_", "XDG_", "PYTHON", "NVIM")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(extra)
    return env


def interpreter_of(script: Path) -> str:
    """The Python a console script runs with (its shebang), for the `python -c pass` baseline."""
    first = script.read_bytes().split(b"\n", 1)[0].decode()
    if first.startswith("#!") and "python" in first:
        return first[2:].strip().split()[0]
    return sys.executable


class Programs:
    """agi and llm, each pointed at the one server through its own private state."""

    def __init__(self, agi: Path, llm: Path | None, url: str, work: Path):
        self.agi, self.llm, self.work = agi, llm, work
        self.python = interpreter_of(agi)
        home, config = work / "agi-home", work / "agi-config"
        config.mkdir(parents=True, exist_ok=True)
        (config / "config.toml").touch()  # a named config file must exist (docs: configuration)
        (work / "home").mkdir(exist_ok=True)  # no user state: ~/.claude.json, ~/.config, ...
        self.agi_env = clean_env(
            HOME=str(work / "home"),
            AGI_HOME=str(home),
            AGI_CONFIG=str(config / "config.toml"),  # empty: defaults, no hooks or tools dirs
            AGI_BASE_URL=url,
            AGI_MODEL="fake-model",
        )
        user = work / "llm-home"
        user.mkdir(parents=True, exist_ok=True)
        (user / "extra-openai-models.yaml").write_text(
            f"- model_id: fake\n  model_name: fake-model\n  api_base: {url}\n"
            "  supports_tools: true\n"
        )
        self.llm_env = clean_env(HOME=str(work / "home"), LLM_USER_PATH=str(user))

    def agi_cmd(self, prompt: str, *flags: str) -> list[str]:
        return [str(self.agi), *flags, prompt]

    def llm_cmd(self, prompt: str, tools: bool = False) -> list[str]:
        assert self.llm is not None
        extra = ["--functions", LLM_FUNCTION, "--chain-limit", "0"] if tools else []
        return [str(self.llm), "prompt", "-m", "fake", *extra, prompt]


# ---------------------------------------------------------------- the cases


@dataclass
class Bench:
    programs: Programs
    script: Script
    report: Report
    failures: Failures
    runs: int
    tool_runs: int
    steps: tuple[int, int]
    messages: int
    concurrency: int

    @property
    def peer(self) -> bool:
        return self.programs.llm is not None

    def variants(self, steps: int, peer: bool = True) -> dict[str, Any]:
        p, prompt = self.programs, f"bench steps={steps}: use the calculate tool, then answer"
        flags = ["--max-steps", str(steps + 1)] if steps else []
        out = {f"agi {steps} steps": (lambda: p.agi_cmd(prompt, *flags), p.agi_env, ANSWER)}
        if peer and self.peer:
            cmd = lambda: p.llm_cmd(prompt, tools=steps > 0)  # noqa: E731
            out[f"llm {steps} steps"] = (cmd, p.llm_env, ANSWER)
        return out


def case_startup(b: Bench) -> None:
    header("1. startup")
    p = b.programs
    variants = {
        "agi --version": (lambda: [str(p.agi), "--version"], p.agi_env, "agi "),
        "python -c pass": (lambda: [p.python, "-c", "pass"], p.agi_env, None),
        # the Python library: `import agi` alone, and with its public names resolved (no run)
        "python -c 'import agi'": (lambda: [p.python, "-c", "import agi"], p.agi_env, None),
        "python -c 'import agi; agi.run'": (
            lambda: [p.python, "-c", "import agi; agi.run, agi.Result"],
            p.agi_env,
            None,
        ),
    }
    if b.peer:
        variants["llm --version"] = (lambda: [str(p.llm), "--version"], p.llm_env, "version")
    samples = alternate(variants, b.runs, b.failures)
    s = {name: summary(v) for name, v in samples.items()}
    b.report.raw["startup"] = s
    for name, v in s.items():
        b.report.row("startup", name, v)
    agi, py = s["agi --version"]["wall_ms"], s["python -c pass"]["wall_ms"]
    b.report.target("startup: agi --version / python -c pass", ratio(agi, py), 3, "x")
    library = s["python -c 'import agi'"]["wall_ms"]
    b.report.target("startup: python -c 'import agi' / agi --version", ratio(library, agi), 1, "x")
    if b.peer:
        print(f"  agi / llm --version: {ratio(agi, s['llm --version']['wall_ms'])}x")


def case_oneshot(b: Bench) -> None:
    header("2. one-shot: a one-step answer")
    samples = alternate(b.variants(0), b.runs, b.failures)
    s = {name.split()[0]: summary(v) for name, v in samples.items()}
    b.report.raw["oneshot"] = s
    for name, v in s.items():
        b.report.row("oneshot", f"{name} one-shot", v)
    if b.peer:
        b.report.target(
            "one-shot: agi / llm wall", ratio(s["agi"]["wall_ms"], s["llm"]["wall_ms"]), 0.2, "x"
        )
    b.report.target("one-shot: agi peak RSS", s["agi"]["rss_mib"], 40, " MiB")


def newest_session(home: Path) -> Path:
    lines = (home / "index.jsonl").read_text().splitlines()
    return Path(json.loads(lines[-1])["path"])


def case_tools(b: Bench) -> None:
    """Per-step cost at N steps: (median(N steps) - median(0 steps)) / N, in wall and CPU time."""
    small, large = b.steps
    header(f"3. tool steps: {small} and {large} calls of a trivial tool")
    base = {k: summary(v) for k, v in alternate(b.variants(0), b.runs, b.failures).items()}
    per_step: dict[str, dict[str, float]] = {}  # "agi wall 20" -> ms
    raw: dict[str, Any] = {"baseline": base}
    for name, v in base.items():
        b.report.row("tools", name, v)
    for n in b.steps:
        few = {f"llm {n} steps": b.tool_runs} if n == large else {}
        got = alternate(b.variants(n), b.runs, b.failures, few)
        trace = (newest_session(Path(b.programs.agi_env["AGI_HOME"])) / "trace.jsonl").stat()
        for name, v in got.items():
            s, prog = summary(v), name.split()[0]
            zero = base[f"{prog} 0 steps"]
            for kind in ("wall", "cpu"):
                per_step[f"{prog} {kind} {n}"] = (s[f"{kind}_ms"] - zero[f"{kind}_ms"]) / n
            extra = {
                "per_step_ms": round(per_step[f"{prog} wall {n}"], 2),
                "per_step_cpu_ms": round(per_step[f"{prog} cpu {n}"], 2),
            }
            if prog == "agi":
                extra["trace_kib"] = round(trace.st_size / 1024)
            b.report.row("tools", name, s, **extra)
            raw[name] = {**s, **extra}
    b.report.raw["tools"] = raw
    cpu = lambda a, c: f"CPU: {ratio(per_step[a], per_step[c])}x"  # noqa: E731
    if b.peer:
        for n in b.steps:
            r = ratio(per_step[f"agi wall {n}"], per_step[f"llm wall {n}"])
            also = cpu(f"agi cpu {n}", f"llm cpu {n}")
            b.report.target(f"per tool step ({n}): agi / llm", r, 0.1, "x", also)
    r = ratio(per_step[f"agi wall {large}"], per_step[f"agi wall {small}"])
    also = cpu(f"agi cpu {large}", f"agi cpu {small}")
    b.report.target(f"agi per-step cost, {large} / {small} steps", r, 1.5, "x", also)


def write_session(path: Path, count: int) -> None:
    """A session of `count` messages in agi's format: turns of a prompt, a Bash call, its output
    and an answer, with contents of realistic size."""
    path.mkdir(parents=True, mode=0o700)
    lines = []
    for i in range(count):
        turn, kind = divmod(i, 4)
        if kind == 0:
            m: dict[str, Any] = {"role": "user", "content": f"Question {turn}: " + "why? " * 40}
        elif kind == 1:
            args = json.dumps({"command": f"grep -rn 'item{turn}' src/ | head -50"})
            tc = {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": "Bash", "arguments": args},
            }
            m = {"role": "assistant", "content": None, "tool_calls": [tc]}
        elif kind == 2:
            out = "".join(f"src/mod{j}.py:{j * 7}: item{turn} = compute({j})\n" for j in range(40))
            m = {"role": "tool", "tool_call_id": f"call_{turn}", "content": out}
        else:
            m = {"role": "assistant", "content": f"Answer {turn}: " + "because of this. " * 30}
        lines.append(json.dumps(m, ensure_ascii=False) + "\n")
    (path / "messages.jsonl").write_text("".join(lines))
    meta = {
        "agi_session": 1,
        "id": path.name,
        "created": "2025-01-01T00:00:00+0000",
        "model": "openai:fake-model",
        "first_prompt": "Question 0",
        "messages": count,
        "updated": "2025-01-01T00:00:00+0000",
    }
    (path / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    for f in path.iterdir():
        f.chmod(0o600)


def case_session(b: Bench) -> None:
    header(f"4. long session: continuing {b.messages} messages vs a fresh one-shot")
    p = b.programs
    template = p.work / f"long-{b.messages}"
    if not template.exists():
        write_session(template, b.messages)
    copies = iter(range(10**6))

    def continuing() -> list[str]:  # a fresh copy each run, made before the clock starts
        target = p.work / f"long-run-{next(copies)}"
        shutil.copytree(template, target)
        return p.agi_cmd("bench steps=0: one more question", "-s", str(target))

    variants = {
        "agi continue": (continuing, p.agi_env, ANSWER),
        "agi fresh": (lambda: p.agi_cmd("bench steps=0: a question"), p.agi_env, ANSWER),
    }
    s = {k: summary(v) for k, v in alternate(variants, b.runs, b.failures).items()}
    size = (template / "messages.jsonl").stat().st_size
    b.report.raw["session"] = {**s, "messages": b.messages, "messages_kib": round(size / 1024)}
    b.report.row(
        "session", f"agi continue ({b.messages} msgs, {size // 1024} KiB)", s["agi continue"]
    )
    b.report.row("session", "agi fresh one-shot", s["agi fresh"])
    r = ratio(s["agi continue"]["wall_ms"], s["agi fresh"]["wall_ms"])
    b.report.target(f"continue {b.messages} messages / fresh one-shot", r, 2, "x")


def case_concurrent(b: Bench) -> None:
    n = b.concurrency
    header(f"5. throughput: {n} concurrent agi runs (2 tool steps each)")
    p = b.programs
    cmd = p.agi_cmd("bench steps=2: use the calculate tool, then answer")
    b.failures.check("concurrent (warm-up)", measure(cmd, p.agi_env), ANSWER)
    index = Path(p.agi_env["AGI_HOME"]) / "index.jsonl"
    before = len(index.read_text().splitlines())
    total, samples = measure_many([cmd] * n, p.agi_env)
    ok = [s for s in samples if s.code == 0 and ANSWER in s.out]
    for s in samples:
        b.failures.check("concurrent", s, ANSWER)
    recorded = len(index.read_text().splitlines()) - before
    s = summary(samples)
    s["max_wall_ms"] = round(max(x.wall for x in samples) * 1000, 1)
    b.report.raw["concurrent"] = {
        **s,
        "total_s": round(total, 3),
        "succeeded": len(ok),
        "runs": n,
        "index_lines": recorded,
    }
    b.report.row(
        "concurrent",
        f"{n} at once, per run",
        s,
        total_s=round(total, 2),
        runs_per_s=round(n / total, 1),
    )
    b.report.target(f"{n} concurrent runs: failures", n - len(ok), 0)
    if recorded != n:
        b.report.note(f"index.jsonl gained {recorded} lines for {n} runs")


def case_nvim(b: Bench) -> None:
    header("6. Neovim: :AgiRefactor, and nvim_eval round trips during a streamed answer")
    sys.path.insert(0, str(HERE))
    from nvim_case import run_case

    run_case(b)


def case_mcp(b: Bench) -> None:
    """A one-shot with one stdio MCP server configured: none, a cold tool-list cache, a warm one."""
    header("7. MCP: a one-shot with one configured stdio server (mcp-server-time)")
    p = b.programs
    probe = subprocess.run([p.python, "-c", "import mcp, mcp_server_time"], capture_output=True)
    if probe.returncode != 0:
        b.report.note("mcp: skipped; the agi measured lacks `mcp` and `mcp-server-time`")
        return
    config = p.work / "mcp.json"
    server = {"command": p.python, "args": ["-m", "mcp_server_time"]}
    config.write_text(json.dumps({"mcpServers": {"time": server}}))
    cache = Path(p.agi_env["AGI_HOME"]) / "mcp-cache.json"
    prompt = "bench steps=0: answer"

    def warm() -> list[str]:
        return p.agi_cmd(prompt, "--mcp", str(config))

    def cold() -> list[str]:
        cache.unlink(missing_ok=True)  # the server must start to list its tools
        return warm()

    variants = {
        "agi, no MCP server": (lambda: p.agi_cmd(prompt), p.agi_env, ANSWER),
        "agi, MCP, cold cache": (cold, p.agi_env, ANSWER),
        "agi, MCP, warm cache": (warm, p.agi_env, ANSWER),
    }
    s = {name: summary(v) for name, v in alternate(variants, b.runs, b.failures).items()}
    b.report.raw["mcp"] = s
    for name, v in s.items():
        b.report.row("mcp", name, v)


def case_anthropic(b: Bench) -> None:
    """The Messages API transport against the OpenAI one: bench/anthropic_case.py."""
    from anthropic_case import run_case

    run_case(b)


def case_compaction(b: Bench) -> None:
    """Long sessions: bench/compaction_case.py."""
    from compaction_case import run_case

    run_case(b)


def case_batch(b: Bench) -> None:
    """Many prompts in one process: bench/batch_case.py."""
    from batch_case import run_case

    run_case(b)


def case_mcp_serve(b: Bench) -> None:
    """`agi --mcp-serve` against `agi PROMPT`: bench/mcp_serve_case.py."""
    from mcp_serve_case import run_case

    run_case(b)


def case_acp(b: Bench) -> None:
    """`agi --acp` driven by an editor's protocol: bench/acp_case.py."""
    from acp_case import run_case

    run_case(b)
