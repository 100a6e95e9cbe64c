"""Case 9: long sessions (compaction) and what the size estimate costs per step.

- Per tool step at the large step count, with automatic compaction (the default: the request's
  size is estimated before every call) against `--no-compact` (no estimate): must not be slower.
- Continuing a 2 MB session that needs compaction (`context_window = 16000`, so the history is
  summarised in pieces first) against a fresh one-shot. The scripted server answers at once, so
  the summary requests' server time is nil; what is left is agi's own work.
- What the summarizer is shown: a session with facts planted early (a file name, a decision and
  its reason, a constraint in the user's own words) grown past the window; across the summary
  requests every user message must be shown in full, and the compaction prompt stays under
  1,500 characters. With `AGI_BENCH_LOCAL_MODEL=provider:model` (and its endpoint in
  `AGI_BENCH_LOCAL_URL`, its window in `AGI_BENCH_LOCAL_WINDOW`, default 4096), a real local
  model writes the summary and the case reports how many planted facts it keeps; without one
  that part is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from cases import ANSWER
from measure import alternate, header, measure, ratio, summary

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from fakeserver import FakeModel, text  # noqa: E402

SUMMARY_MARK = "Summarise the conversation above for an assistant"
FACTS = {
    "file": "the settings live in conf/blue-heron.toml",
    "decision": "we chose SQLite over Postgres because the servers have 512 MB of RAM",
    "constraint": "Never touch the migrations folder, not even to read it.",
}


def history(path: Path, size: int, planted: bool = False) -> None:
    """An agi session of about `size` bytes: prompts, Bash calls with long outputs, answers."""
    path.mkdir(parents=True, mode=0o700)
    lines: list[str] = []
    if planted:
        lines += [
            {"role": "user", "content": f"Note: {FACTS['file']}."},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": f"Decision: {FACTS['decision']}."},
            {"role": "assistant", "content": "Understood."},
            {"role": "user", "content": FACTS["constraint"]},
            {"role": "assistant", "content": "I will not touch it."},
        ]
        lines = [json.dumps(m) + "\n" for m in lines]  # type: ignore[misc]
    total, turn = sum(map(len, lines)), 0
    while total < size:
        turn += 1
        out = "\n".join(
            f"{turn}:{i} INFO worker-{i % 7} processed batch {i * 13}" for i in range(180)
        )
        fn = {"name": "Bash", "arguments": json.dumps({"command": f"grep ERROR run-{turn}.log"})}
        for m in (
            {"role": "user", "content": f"Step {turn}: check run {turn} for errors."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"c{turn}", "type": "function", "function": fn}],
            },
            {"role": "tool", "tool_call_id": f"c{turn}", "content": out},
            {"role": "assistant", "content": f"Run {turn} has no errors."},
        ):
            line = json.dumps(m) + "\n"
            lines.append(line)
            total += len(line)
    (path / "messages.jsonl").write_text("".join(lines))
    meta = {"agi_session": 1, "id": path.name, "model": "openai:fake-model", "messages": len(lines)}
    (path / "meta.json").write_text(json.dumps(meta) + "\n")
    for f in path.iterdir():
        f.chmod(0o600)


def windowed_env(base: dict[str, str], work: Path, window: int) -> dict[str, str]:
    config = work / f"config-{window}.toml"
    config.write_text(f"context_window = {window}\n")
    return {**base, "AGI_CONFIG": str(config)}


def per_step(b: Any) -> None:
    large = b.steps[1]
    p = b.programs
    prompt = f"bench steps={large}: use the calculate tool, then answer"
    flags = ["--max-steps", str(large + 1)]
    zero = "bench steps=0: use the calculate tool, then answer"
    variants = {
        "auto, 0 steps": (lambda: p.agi_cmd(zero), p.agi_env, ANSWER),
        "off, 0 steps": (lambda: p.agi_cmd(zero, "--no-compact"), p.agi_env, ANSWER),
        f"auto, {large} steps": (lambda: p.agi_cmd(prompt, *flags), p.agi_env, ANSWER),
        f"off, {large} steps": (
            lambda: p.agi_cmd(prompt, *flags, "--no-compact"),
            p.agi_env,
            ANSWER,
        ),
    }
    got = {k: summary(v) for k, v in alternate(variants, b.runs, b.failures).items()}
    steps: dict[str, float] = {}
    for mode in ("auto", "off"):
        for kind in ("wall", "cpu"):
            full, base = got[f"{mode}, {large} steps"], got[f"{mode}, 0 steps"]
            steps[f"{mode} {kind}"] = (full[f"{kind}_ms"] - base[f"{kind}_ms"]) / large
        b.report.row(
            "compaction",
            f"agi {large} steps, compact {mode}",
            got[f"{mode}, {large} steps"],
            per_step_ms=round(steps[f"{mode} wall"], 3),
            per_step_cpu_ms=round(steps[f"{mode} cpu"], 3),
        )
    also = f"CPU: {ratio(steps['auto cpu'], steps['off cpu'])}x"
    b.report.target(
        f"per tool step ({large}): estimate on / off",
        ratio(steps["auto wall"], steps["off wall"]),
        1.05,
        "x",
        also,
    )
    b.report.raw.setdefault("compaction", {})["per_step"] = {"runs": got, "per_step_ms": steps}


def continuing(b: Any, size: int) -> None:
    p = b.programs
    template = p.work / f"compact-{size}"
    if not template.exists():
        history(template, size)
    env = windowed_env(p.agi_env, p.work, 16_000)
    copies = iter(range(10**6))

    def copy() -> list[str]:
        target = p.work / f"compact-run-{next(copies)}"
        shutil.copytree(template, target)
        return p.agi_cmd("bench steps=0: one more question", "-s", str(target))

    variants = {
        "continue, compacting": (copy, env, ANSWER),
        "fresh one-shot": (lambda: p.agi_cmd("bench steps=0: a question"), p.agi_env, ANSWER),
    }
    got = {k: summary(v) for k, v in alternate(variants, b.runs, b.failures).items()}
    kib = (template / "messages.jsonl").stat().st_size // 1024
    b.report.row("compaction", f"agi continue {kib} KiB, compacting", got["continue, compacting"])
    b.report.row("compaction", "agi fresh one-shot", got["fresh one-shot"])
    r = ratio(got["continue, compacting"]["wall_ms"], got["fresh one-shot"]["wall_ms"])
    b.report.note(f"continuing a {kib} KiB session that needs compaction / fresh one-shot: {r}x")
    b.report.raw.setdefault("compaction", {})["continue"] = {**got, "kib": kib, "ratio": r}


def shown(b: Any, size: int) -> None:
    """Every user message reaches the summarizer in full; the prompt stays small."""
    from agi.context.summarize import text as compact_text

    p = b.programs
    session = p.work / "planted"
    shutil.rmtree(session, ignore_errors=True)
    history(session, size, planted=True)
    server = FakeModel(lambda body: text("SUMMARY" if _is_summary(body) else ANSWER))
    with server:
        env = {**windowed_env(p.agi_env, p.work, 16_000), "AGI_BASE_URL": server.url}
        s = measure(p.agi_cmd("What do you remember?", "-s", str(session)), env)
        b.failures.check("compaction planted facts", s, ANSWER)
        summaries = [r for r in server.requests if _is_summary(r)]
    texts = "".join(str(m.get("content")) for r in summaries for m in r["messages"])
    users = [json.loads(x) for x in (session / "messages.jsonl").read_text().splitlines()]
    kept_from = next(i for i, m in enumerate(users) if "compaction" in m)
    kept = users[kept_from + 1 :]
    users = [m for m in users[:kept_from] if m["role"] == "user" and m not in kept]
    missing = [m["content"][:60] for m in users if m["content"] not in texts]
    prompt = len(compact_text("instruction")) + len(compact_text("focus", focus=""))
    b.report.note(
        f"summarizer: {len(summaries)} requests; {len(users) - len(missing)} of {len(users)} user "
        f"messages shown in full; compaction prompt {prompt} characters (limit 1500)"
    )
    b.report.target("user messages not shown in full to the summarizer", len(missing), 0)
    b.report.target("compaction prompt, characters", prompt, 1500)
    b.report.raw.setdefault("compaction", {})["shown"] = {
        "requests": len(summaries),
        "users": len(users),
        "missing": missing,
        "prompt_chars": prompt,
    }
    local_model(b, size)


def local_model(b: Any, size: int) -> None:
    model, url = os.environ.get("AGI_BENCH_LOCAL_MODEL"), os.environ.get("AGI_BENCH_LOCAL_URL")
    if not model:
        b.report.note("planted facts kept by a real model: skipped (set AGI_BENCH_LOCAL_MODEL)")
        return
    p = b.programs
    session = p.work / "planted-local"
    shutil.rmtree(session, ignore_errors=True)
    window = int(os.environ.get("AGI_BENCH_LOCAL_WINDOW") or 4096)  # a small model's n_ctx
    history(session, min(size, window * 8), planted=True)  # a few pieces: local models are slow
    env = {**windowed_env(p.agi_env, p.work, window), "AGI_MODEL": model}
    env.pop("AGI_BASE_URL", None)
    if url:
        env["AGI_BASE_URL"] = url
    out = subprocess.run(
        [str(p.agi), "--compact", "-s", str(session)], env=env, capture_output=True, text=True
    ).stdout.lower()
    keys = {"file": "blue-heron", "decision": "sqlite", "constraint": "migrations"}
    kept = [k for k, word in keys.items() if word in out]
    b.report.note(f"planted facts kept by {model}: {len(kept)} of {len(keys)} ({', '.join(kept)})")


def _is_summary(body: dict[str, Any]) -> bool:
    return SUMMARY_MARK in json.dumps(body.get("messages", [])[-1:])


def run_case(b: Any) -> None:
    size = 200_000 if b.runs <= 3 else 2_000_000
    header(f"9. long sessions: the estimate per step, continuing {size // 1000} kB, the summarizer")
    per_step(b)
    continuing(b, size)
    shown(b, size)
