"""Case 8: the Anthropic Messages transport against the OpenAI-compatible one (issue 17).

The same agi, the same scripted server, the same prompts; only the model differs:
`-m anthropic:claude-bench-1` (POST /v1/messages, Messages API events) against
`-m openai:fake-model` (POST /v1/chat/completions, chat-completion chunks). Both send an API key.
All six variants (each protocol at 0 and at the two step counts) take turns run by run.

Targets: per tool step, anthropic / openai <= 1.2x; the one-shot (start-up, one request, the
answer) anthropic / openai <= 1.1x. And what the anthropic path imports beyond the openai path,
from `python -X importtime -m agi` on a one-shot with each model.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from cases import ANSWER
from cases import Script as ChatScript
from measure import alternate, header, measure, ratio, summary

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from fakeserver import FakeModel, anthropic_call, anthropic_text  # noqa: E402

PROTOCOLS = {"openai": "openai:fake-model", "anthropic": "anthropic:claude-bench-1"}
KEYS = {"OPENAI_API_KEY": "sk-bench-openai", "ANTHROPIC_API_KEY": "sk-ant-bench"}


def is_messages_api(messages: list[dict[str, Any]]) -> bool:
    """A Messages API body: user turns are lists of content blocks (agi sends prompts as text)."""
    return any(isinstance(m.get("content"), list) for m in messages if m.get("role") == "user")


class Script:
    """`bench steps=N` in the prompt: N calls of `calculate`, then the answer; in the protocol
    the request came in (the OpenAI side is the bench's own script)."""

    def __init__(self, server: FakeModel) -> None:
        self.server = server
        self.openai = ChatScript()
        self.openai.server = server

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.server.lock:  # it keeps every request; a long run needs none of them
            self.server.paths.clear()
        messages = body.get("messages") or []
        if not is_messages_api(messages):
            return self.openai(body)  # clears the requests and headers itself
        with self.server.lock:
            self.server.requests.clear()
            self.server.headers.clear()
        start, prompt = 0, ""
        for i, m in enumerate(messages):
            texts = [b.get("text", "") for b in m.get("content") or [] if b.get("type") == "text"]
            if m.get("role") == "user" and texts:
                start, prompt = i, "\n".join(texts)
        found = re.search(r"bench steps=(\d+)", prompt)
        if found is None:
            return anthropic_text(ANSWER)
        done = sum(
            1
            for m in messages[start + 1 :]
            for b in m.get("content") or []
            if isinstance(b, dict) and b.get("type") == "tool_result"
        )
        if done < int(found.group(1)):
            return anthropic_call("calculate", expression=f"{done}+1")
        return anthropic_text(ANSWER)


def env_for(base: dict[str, str], url: str, protocol: str) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not k.startswith("ANTHROPIC_")}
    return {**env, **KEYS, "AGI_BASE_URL": url, "AGI_MODEL": PROTOCOLS[protocol]}


def imported(b: Any, env: dict[str, str]) -> dict[str, float]:
    """Module -> its own import time (ms), from `python -X importtime -m agi` on a one-shot."""
    cmd = [b.programs.python, "-X", "importtime", "-m", "agi", "bench steps=0: answer"]
    s = b.failures.check("anthropic importtime", measure(cmd, env), ANSWER)
    found: dict[str, float] = {}
    for line in s.err.splitlines():
        parts = line.split("|")
        if line.startswith("import time:") and len(parts) == 3 and parts[0][12:].strip().isdigit():
            found[parts[2].strip()] = int(parts[0][12:].strip()) / 1000
    return found


def run_case(b: Any) -> None:
    small, large = b.steps
    header(f"8. Anthropic Messages transport against OpenAI chat completions: 0, {small}, {large}")
    p = b.programs
    server = FakeModel()
    server.script = [Script(server)]
    with server:
        envs = {name: env_for(p.agi_env, server.url, name) for name in PROTOCOLS}
        variants: dict[str, Any] = {}
        for n in (0, small, large):
            prompt = f"bench steps={n}: use the calculate tool, then answer"
            flags = ["--max-steps", str(n + 1)] if n else []
            for name in PROTOCOLS:
                cmd = lambda prompt=prompt, flags=flags: p.agi_cmd(prompt, *flags)  # noqa: E731
                variants[f"agi {name} {n} steps"] = (cmd, envs[name], ANSWER)
        got = {k: summary(v) for k, v in alternate(variants, b.runs, b.failures).items()}
        modules = {name: imported(b, envs[name]) for name in PROTOCOLS}
    per_step: dict[str, float] = {}
    raw: dict[str, Any] = {}
    for name in PROTOCOLS:
        zero = got[f"agi {name} 0 steps"]
        b.report.row("anthropic", f"agi {name} one-shot", zero)
        raw[f"{name} 0 steps"] = zero
        for n in (small, large):
            s = got[f"agi {name} {n} steps"]
            for kind in ("wall", "cpu"):
                per_step[f"{name} {kind} {n}"] = (s[f"{kind}_ms"] - zero[f"{kind}_ms"]) / n
            extra = {
                "per_step_ms": round(per_step[f"{name} wall {n}"], 2),
                "per_step_cpu_ms": round(per_step[f"{name} cpu {n}"], 2),
            }
            b.report.row("anthropic", f"agi {name} {n} steps", s, **extra)
            raw[f"{name} {n} steps"] = {**s, **extra}
    one_a, one_o = got["agi anthropic 0 steps"], got["agi openai 0 steps"]
    r, also = ratio(one_a["wall_ms"], one_o["wall_ms"]), ratio(one_a["cpu_ms"], one_o["cpu_ms"])
    b.report.target("one-shot: anthropic / openai wall", r, 1.1, "x", f"CPU: {also}x")
    for n in (small, large):
        r = ratio(per_step[f"anthropic wall {n}"], per_step[f"openai wall {n}"])
        also = f"CPU: {ratio(per_step[f'anthropic cpu {n}'], per_step[f'openai cpu {n}'])}x"
        b.report.target(f"per tool step ({n}): anthropic / openai", r, 1.2, "x", also)
    extra = sorted(set(modules["anthropic"]) - set(modules["openai"]))
    missing = sorted(set(modules["openai"]) - set(modules["anthropic"]))
    cost = round(sum(modules["anthropic"][m] for m in extra), 2)
    raw["imports"] = {
        "anthropic_only": {m: modules["anthropic"][m] for m in extra},
        "openai_only": {m: modules["openai"][m] for m in missing},
        "openai_modules": len(modules["openai"]),
        "anthropic_modules": len(modules["anthropic"]),
    }
    b.report.note(
        f"anthropic: imports beyond the openai path: {', '.join(extra) or 'none'} ({cost} ms "
        f"of their own import time); only on the openai path: {', '.join(missing) or 'none'}"
    )
    b.report.raw["anthropic"] = raw
