"""A Responses API step against a chat-completions step of the same size (issue 37), in the same
run: `agi -m openai:gpt-5.1 --api responses|chat --tools calculate` makes N tool calls to the
scripted server on 127.0.0.1, then answers. Both protocols get the same replies: one
`calculate` call a step, a reasoning payload of the same size (an encrypted reasoning item over
Responses, `reasoning_content` over chat, both sent back with every later request), the same
usage and the same answer. The variants take turns run by run after one warm-up each; per-step
cost at N = (median at N - median at 0) / N, in wall and in CPU time.

    python bench/responses.py         # N = 0 and 40, 9 runs: bench/results/DATE-responses.json
    python bench/responses.py --steps 10 --runs 3 --no-save

Not part of CI: a measurement, not a test; no time is asserted. The exit status is 1 only when
a run fails (wrong exit code or answer)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests")]

from cases import clean_env  # noqa: E402
from measure import Failures, alternate, ratio, summary  # noqa: E402
from run import find_agi  # noqa: E402

from fakeresponses import r_call, r_text  # noqa: E402
from fakeserver import FakeModel, _chunk  # noqa: E402

ANSWER = "all the sums are done"
REASONING = "r" * 1200  # the size of one step's reasoning payload, in characters
EXPRESSION = {"expression": "1+1"}
USED = {"input": 400, "cached": 300, "output": 30, "reasoning": 12}


def steps_of(prompt: str) -> int:
    return int(prompt.rpartition("steps=")[2].split()[0])


def chat_call(step: int) -> dict[str, Any]:
    """A chat-completions tool call with its reasoning, the same usage as the Responses one."""
    arguments = json.dumps(EXPRESSION)
    usage = {
        "prompt_tokens": USED["input"],
        "completion_tokens": USED["output"],
        "prompt_tokens_details": {"cached_tokens": USED["cached"]},
        "completion_tokens_details": {"reasoning_tokens": USED["reasoning"]},
    }
    call = {
        "index": 0,
        "id": f"call_{step:06d}",
        "type": "function",
        "function": {"name": "calculate", "arguments": arguments},
    }
    frames = [
        _chunk({"role": "assistant", "content": None}),
        _chunk({"reasoning_content": REASONING}),
        _chunk({"tool_calls": [call]}),
        _chunk({}, "tool_calls", usage=usage),
        b"data: [DONE]\n\n",
    ]
    return {"kind": "sse", "frames": frames, "delay": 0.0}


def chat_text() -> dict[str, Any]:
    usage = {"prompt_tokens": USED["input"], "completion_tokens": USED["output"]}
    frames = [
        _chunk({"role": "assistant", "content": ANSWER}),
        _chunk({}, "stop", usage=usage),
        b"data: [DONE]\n\n",
    ]
    return {"kind": "sse", "frames": frames, "delay": 0.0}


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """Either protocol's reply to a request: a call until N calls were answered, then the text."""
    from fakeresponses import usage

    used = usage(**USED)
    if "input" in body:  # the Responses API
        done = sum(1 for i in body["input"] if i.get("type") == "function_call_output")
        first = next(i for i in body["input"] if i.get("role") == "user")
        if done < steps_of(str(first["content"])):
            return r_call("calculate", EXPRESSION, encrypted=REASONING, used=used)
        return r_text(ANSWER, encrypted=REASONING, used=used)
    done = sum(1 for m in body["messages"] if m["role"] == "tool")
    first = next(m for m in body["messages"] if m["role"] == "user")
    if done < steps_of(str(first["content"])):
        return chat_call(done)
    return chat_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--agi", help="the agi to measure (default: the one beside this Python)")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    agi = find_agi(args.agi)
    failures = Failures()
    with tempfile.TemporaryDirectory() as tmp, FakeModel(answer) as server:
        home = Path(tmp)
        env = clean_env(
            AGI_HOME=str(home / "agi-home"),
            AGI_CONFIG=str(home / "config.toml"),
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-bench",
            HOME=str(home),
        )

        def variant(api: str, n: int) -> Any:
            argv = [str(agi), "-m", "openai:gpt-5.1", "--api", api, "--tools", "calculate"]
            return (lambda: [*argv, f"bench steps={n}"], env, ANSWER)

        variants = {
            f"{api} N={n}": variant(api, n)
            for n in (0, args.steps)
            for api in ("responses", "chat")
        }
        print(f"load average {os.getloadavg()[0]:.1f}; {args.runs} runs each", flush=True)
        started = time.time()
        samples = alternate(variants, args.runs, failures)
    results: dict[str, Any] = {name: summary(s) for name, s in samples.items()}
    per_step: dict[str, dict[str, float]] = {}
    for api in ("responses", "chat"):
        low, high = results[f"{api} N=0"], results[f"{api} N={args.steps}"]
        per_step[api] = {
            k: round((high[k] - low[k]) / args.steps, 3) for k in ("wall_ms", "cpu_ms")
        }
    ratios = {
        k: ratio(per_step["responses"][k], per_step["chat"][k]) for k in ("wall_ms", "cpu_ms")
    }
    report = {
        "date": time.strftime("%Y-%m-%d", time.gmtime(started)),
        "steps": args.steps,
        "runs": args.runs,
        "load": round(os.getloadavg()[0], 1),
        "results": results,
        "per_step_ms": per_step,
        "responses_over_chat": ratios,
        "failures": failures,
    }
    for name, row in results.items():
        print(f"{name:>16}: wall {row['wall_ms']:8.1f} ms  cpu {row['cpu_ms']:8.1f} ms")
    for api, row in per_step.items():
        print(f"{api:>9} per step: wall {row['wall_ms']:6.2f} ms  cpu {row['cpu_ms']:6.2f} ms")
    print(f"responses / chat per step: wall {ratios['wall_ms']}, cpu {ratios['cpu_ms']}")
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    if not args.no_save:
        out = HERE / "results" / f"{report['date']}-responses.json"
        out.write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {out.relative_to(ROOT)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
