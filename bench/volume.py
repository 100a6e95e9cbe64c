"""Volume (issue 36): N classification jobs (`--schema 'kind: enum(sales|support|spam)'`, the
docs' batch example) against the scripted servers, three ways:

- `agi --batch FILE --ephemeral --no-tools --jobs 4` against the loopback chat server;
- `agi --batch FILE --batch-api openai` against the scripted OpenAI Batch API server
  (tests/frontends/batch/batch_server.py), polled every 0.2 s;
- `xargs -P 4 agi --no-stdin` (one process per job, tools offered, sessions kept).

Reported per job: model calls, input tokens sent (estimated from each request the server got,
agi.context.estimate, the same for every way), files left under $AGI_HOME, and for the whole
batch the wall time, peak RSS and cost (the server's usage at gpt-4o-mini's live price, or at
its batch price for the batch API; agi's own `usage.cost` beside it where its output has one).
`llm --schema` in a loop (one process per job, logging to its SQLite database as shipped) is run
too when `llm` is installed beside the Python running the bench, on PATH, or given with --llm
(`pip install llm`; not a dependency of agi), pointed at the loopback chat server through
`extra-openai-models.yaml` in a private LLM_USER_PATH.

    python bench/volume.py                    # 1,000 jobs, writes bench/results/volume.md
    python bench/volume.py --jobs 50          # a quick run (prints, writes nothing)
    python bench/volume.py --big 10000        # also the memory of both batches at 10,000 jobs
    python bench/volume.py --loop-jobs 200    # fewer jobs for the one-process-a-job ways

Not part of CI: a measurement, not a test."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests"), str(ROOT / "tests" / "frontends" / "batch")]

from batch_server import BatchServer  # noqa: E402
from cases import clean_env  # noqa: E402
from measure import measure  # noqa: E402
from run import find_agi  # noqa: E402

from agi.context.estimate import BYTES_PER_TOKEN, estimate  # noqa: E402
from agi.messages import Usage  # noqa: E402
from agi.providers.cost import batch_price, find_price  # noqa: E402

from fakeserver import FakeModel, text  # noqa: E402

SCHEMA = "kind: enum(sales|support|spam)"
MODEL = "openai:gpt-4o-mini"
ANSWER = {"kind": "support"}
OUTPUT_TOKENS = 6
INQUIRIES = (
    "Hi, my invoice for November shows two charges for the same plan. Can you refund one?",
    "We are a team of 40 and would like a quote for the annual enterprise tier.",
    "CONGRATULATIONS!!! You have won a free cruise, click here to claim your prize now",
    "The export to CSV button does nothing since yesterday's update, on Firefox and Chrome.",
    "Do you offer a discount for non-profits? We would buy ten seats.",
    "Cheap watches, best prices, visit our store for replica brands today only.",
    "I cannot log in: the reset e-mail never arrives, and I checked the spam folder.",
    "Could someone call me about moving our account from the monthly to the yearly plan?",
)


def prompts(n: int) -> list[str]:
    return [
        f"Classify this customer inquiry as sales, support or spam (#{i}): "
        f"{INQUIRIES[i % len(INQUIRIES)]}"
        for i in range(n)
    ]


def tokens_of(body: dict[str, Any]) -> int:
    """The input tokens of a chat-completions request, estimated (tools and schema included)."""
    extra = json.dumps(body.get("response_format") or "", ensure_ascii=False)
    return estimate(body.get("messages") or [], body.get("tools")) + int(
        len(extra) / BYTES_PER_TOKEN
    )


class Tally:
    """What a server was sent: calls and input tokens (the requests are not kept)."""

    def __init__(self) -> None:
        self.calls = self.tokens = 0
        self.lock = threading.Lock()

    def add(self, body: dict[str, Any]) -> int:
        tokens = tokens_of(body)
        with self.lock:
            self.calls += 1
            self.tokens += tokens
        return tokens


def live_step(tally: Tally, server: list[FakeModel]) -> Any:
    def step(body: dict[str, Any]) -> dict[str, Any]:
        with server[0].lock:
            server[0].requests.clear()
            server[0].headers.clear()
            server[0].paths.clear()
        tokens = tally.add(body)
        usage = {"prompt_tokens": tokens, "completion_tokens": OUTPUT_TOKENS}
        return text(json.dumps(ANSWER), usage=usage)

    return step


def batch_answer(tally: Tally) -> Any:
    def answer(prompt: str, body: dict[str, Any]) -> dict[str, Any]:
        tokens = tally.add(body)
        usage = {"prompt_tokens": tokens, "completion_tokens": OUTPUT_TOKENS}
        return {"text": json.dumps(ANSWER), "usage": usage}

    return answer


def files_under(path: Path) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def agi_cost(out: str) -> float | None:
    """The sum of `usage.cost` over batch lines (None when a line has none)."""
    total = 0.0
    for line in out.splitlines():
        cost = json.loads(line).get("usage", {}).get("cost")
        if cost is None:
            return None
        total += cost
    return total


def answered(out: str, batch: bool) -> int:
    """How many jobs got the expected answer."""
    if batch:
        lines = [json.loads(x) for x in out.splitlines() if x.strip()]
        return sum(1 for x in lines if x.get("exit") == 0 and x.get("answer") == ANSWER)
    return sum(1 for x in out.splitlines() if x.strip() and json.loads(x) == ANSWER)


def run_way(name: str, agi: Path, work: Path, n: int, servers: dict[str, Any]) -> dict[str, Any]:
    """One way of answering the n jobs, in a fresh $AGI_HOME."""
    case = work / f"{name.replace(' ', '_').replace('-', '')}-{n}"
    case.mkdir()
    home = case / "agi-home"
    jobs, plain = case / "jobs.jsonl", case / "prompts.txt"
    texts = prompts(n)
    jobs.write_text("".join(json.dumps({"id": i, "prompt": p}) + "\n" for i, p in enumerate(texts)))
    plain.write_text("".join(p + "\n" for p in texts))
    (case / "config.toml").write_text("")  # AGI_CONFIG names it: it must exist
    env = clean_env(
        HOME=str(case),
        AGI_HOME=str(home),
        AGI_CONFIG=str(case / "config.toml"),
        AGI_MODEL=MODEL,
        OPENAI_API_KEY="sk-bench",
        AGI_BATCH_POLL="0.2",
        LLM_USER_PATH=str(case / "llm-home"),
    )
    tally: Tally
    batch = name.startswith("agi --batch")
    if name == LLM_WAY:
        server, tally = servers["live"]
        user = case / "llm-home"
        user.mkdir()
        (user / "extra-openai-models.yaml").write_text(
            f"- model_id: bench\n  model_name: gpt-4o-mini\n  api_base: {server.url}\n"
            "  supports_schema: true\n"
        )
        loop = (
            'while IFS= read -r p; do "$0" -m bench --schema "$1" "$p" </dev/null || exit 1; done'
        )
        cmd = ["sh", "-c", loop + f" < {plain}", str(agi), LLM_SCHEMA]
        home = user
    elif name == "agi --batch --batch-api openai":
        server, tally = servers["batch"]
        env["AGI_BASE_URL"] = server.url
        cmd = [str(agi), "--batch", str(jobs), "--batch-api", "openai", "--schema", SCHEMA]
    else:
        server, tally = servers["live"]
        env["AGI_BASE_URL"] = server.url
        if batch:
            cmd = [str(agi), "--batch", str(jobs), "--ephemeral", "--no-tools", "--jobs", "4"]
            cmd += ["--schema", SCHEMA]
        else:
            cmd = ["xargs", "-a", str(plain), "-d", "\n", "-P", "4", "-n", "1"]
            cmd += [str(agi), "--no-stdin", "--schema", SCHEMA]
    calls, tokens = tally.calls, tally.tokens
    sample = measure(cmd, env, timeout=3600, cwd=case)
    calls, tokens = tally.calls - calls, tally.tokens - tokens
    price = batch_price if "batch-api" in name else find_price
    found = price(MODEL, "gpt-4o-mini")
    assert found is not None
    served = found.cost(Usage(input=tokens, output=OUTPUT_TOKENS * calls, calls=calls))
    good = answered(sample.out, batch)
    return {
        "way": name,
        "jobs": n,
        "exit": sample.code,
        "answered": good,
        "calls_per_job": round(calls / n, 3),
        "input_tokens_per_job": round(tokens / n, 1),
        "files_left": (left := files_under(home) - (name == LLM_WAY)),  # not llm's config
        "files_left_per_job": round(left / n, 2),
        "wall_s": round(sample.wall, 2),
        "cpu_s": round(sample.cpu, 2),
        "rss_mib": round(sample.rss, 1),
        "cost_per_job_usd": served / n,
        "agi_cost_per_job_usd": None if not batch else (agi_cost(sample.out) or 0) / n,
        "error": None if sample.code == 0 and good == n else sample.err[-400:],
    }


WAYS = ("agi --batch --ephemeral", "agi --batch --batch-api openai", "xargs -P 4 agi")
LLM_WAY = "llm --schema loop"
LLM_SCHEMA = json.dumps(  # the JSON Schema agi makes of its DSL, as agi sends it
    {
        "type": "object",
        "properties": {"kind": {"type": "string", "enum": ["sales", "support", "spam"]}},
        "required": ["kind"],
        "additionalProperties": False,
    }
)


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| way | jobs | answered | calls/job | input tokens/job | files left | wall s | "
        "jobs/s | peak RSS MiB | cost/job (server) | cost/job (agi) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = ""
    for r in rows:
        agi_cost_text = (
            "-" if r["agi_cost_per_job_usd"] is None else f"${r['agi_cost_per_job_usd']:.8f}"
        )
        body += (
            f"| `{r['way']}` | {r['jobs']} | {r['answered']} | {r['calls_per_job']} | "
            f"{r['input_tokens_per_job']} | {r['files_left']} | {r['wall_s']} | "
            f"{round(r['jobs'] / max(r['wall_s'], 1e-9), 1)} | {r['rss_mib']} | "
            f"${r['cost_per_job_usd']:.8f} | {agi_cost_text} |\n"
        )
    return head + body


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=1000, help="jobs per way (default 1000)")
    p.add_argument("--big", type=int, default=0, help="also both batches at this many jobs")
    p.add_argument("--loop-jobs", type=int, help="jobs for xargs and llm's loop (--jobs)")
    p.add_argument("--agi")
    p.add_argument("--llm", help="the llm to run (default: beside this Python, else on PATH)")
    p.add_argument("--save", action="store_true", help="write bench/results/volume.md")
    args = p.parse_args()
    agi = find_agi(args.agi)
    beside = Path(sys.executable).parent / "llm"
    llm = args.llm or (str(beside) if beside.exists() else shutil.which("llm"))
    loop_jobs = args.loop_jobs or args.jobs
    work = Path(tempfile.mkdtemp(prefix="agi-bench-volume-"))
    holder: list[FakeModel] = []
    live_tally, batch_tally = Tally(), Tally()
    rows: list[dict[str, Any]] = []
    try:
        with (
            FakeModel(live_step(live_tally, holder)) as live,
            BatchServer(batch_answer(batch_tally)) as batches,
        ):
            holder.append(live)
            servers = {"live": (live, live_tally), "batch": (batches, batch_tally)}
            for way in WAYS:
                n = args.jobs if way.startswith("agi --batch") else loop_jobs
                rows.append(run_way(way, agi, work, n, servers))
                print(json.dumps(rows[-1]), flush=True)
            if llm:
                rows.append(run_way(LLM_WAY, Path(llm), work, loop_jobs, servers))
                print(json.dumps(rows[-1]), flush=True)
            if args.big:
                for way in WAYS[:2]:
                    rows.append(run_way(way, agi, work, args.big, servers))
                    print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(table(rows))
    if args.save:
        command = "python bench/volume.py " + " ".join(sys.argv[1:])
        load = round(os.getloadavg()[0], 1)
        page = HERE / "results" / "volume.md"
        page.write_text(report(rows, command, load))
        print(f"bench: saved {page.relative_to(ROOT)}")
    return 0 if all(r["error"] is None for r in rows) else 1


def ratio(row: dict[str, Any], peer: dict[str, Any]) -> float:
    return round(row["input_tokens_per_job"] / max(peer["input_tokens_per_job"], 1e-9), 3)


def report(rows: list[dict[str, Any]], command: str, load: float) -> str:
    by = {(r["way"], r["jobs"]): r for r in rows}
    n = rows[0]["jobs"]
    eph, api = (by[(w, n)] for w in WAYS[:2])
    xargs = rows[2]
    peer = next((r for r in rows if r["way"] == LLM_WAY), None)
    memory = [r for r in rows if r["way"] in WAYS[:2]]
    rate = {k: r["jobs"] / max(r["wall_s"], 1e-9) for k, r in (("eph", eph), ("xargs", xargs))}
    speed = round(rate["eph"] / rate["xargs"], 1)  # jobs a second: the sizes may differ
    half = round(api["cost_per_job_usd"] / max(eph["cost_per_job_usd"], 1e-18), 3)
    return (
        f"# Volume: {n} classification jobs\n\n"
        f"Reproduce: `{command}` (on {time.strftime('%Y-%m-%d')}, load average {load}, "
        "the loopback chat server and the scripted OpenAI Batch API server of the tests; model "
        f"`{MODEL}` for its prices; every job `--schema '{SCHEMA}'`).\n\n"
        + table(rows)
        + "\nInput tokens are estimated from the requests the servers received "
        "(`agi.context.estimate`, the same for every way); the servers report them back as the "
        "usage, so the cost columns are what those tokens cost at gpt-4o-mini's live price "
        "(batch price for `--batch-api`) and what agi's own `usage.cost` summed to.\n\n"
        "Against the issue's targets:\n\n"
        f"- model calls per job: {eph['calls_per_job']} with `--ephemeral --no-tools`, "
        f"{api['calls_per_job']} with `--batch-api`, {xargs['calls_per_job']} for `agi` runs "
        f"that keep a session and offer tools (the answer, then the ghost exchange; "
        f"{xargs['jobs']} jobs).\n"
        f"- files left under `$AGI_HOME`: {eph['files_left']} with `--ephemeral`, "
        f"{api['files_left']} with `--batch-api`, {xargs['files_left']} for `xargs -P 4 agi`.\n"
        f"- cost of the batch API against the same jobs live: {half}x (target 0.5x).\n"
        f"- throughput: `agi --batch --ephemeral` is {speed}x `xargs -P 4 agi` (target 13.5x). "
        "The batch API's wall time is the polling of a scripted server (0.2 s a poll) and says "
        "nothing of a real provider, which answers within 24 hours.\n"
        + (
            "- `llm --schema` in a loop: not measured, `llm` was not found.\n"
            if peer is None
            else f"- input tokens per job against `llm --schema` in a loop ({peer['jobs']} jobs, "
            f"{peer['calls_per_job']} calls/job, {peer['input_tokens_per_job']} tokens/job): "
            f"`--ephemeral` {ratio(eph, peer)}x, `--batch-api` {ratio(api, peer)}x, "
            f"`xargs -P 4 agi` {ratio(xargs, peer)}x (target 1.05x); llm's wall "
            f"{round(peer['wall_s'] / peer['jobs'] * 1000)} ms a job, "
            f"{peer['files_left']} files left (its log database). Both send the same JSON "
            "Schema as `response_format` and no system prompt (agi's lean built-in prompt for "
            "a tool-less run is left out when the server holds the reply to the schema); what "
            "agi sends beyond llm's is `\"strict\": false` and the schema's name. The prompts "
            "are numbered, so more jobs cost a little more (#999 against #199: about 0.1 token "
            "a job).\n"
        )
        + (
            ""
            if len(memory) <= 2
            else "- memory: peak RSS at "
            + ", ".join(f"{r['jobs']} jobs {r['rss_mib']} MiB ({r['way']})" for r in memory)
            + ". `--batch-api` spools its requests to a temporary file and reads results a line "
            "at a time, so what grows with the jobs is what both ways share: the input's jobs, "
            "which `agi --batch` reads whole before it starts.\n"
        )
    )


if __name__ == "__main__":
    sys.exit(main())
