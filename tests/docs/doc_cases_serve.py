"""The cases of docs/protocols/serve.md's curl blocks: each is run against a real `agi --serve`
on the page's address (started by the prelude, ended with the block's shell), which runs the
request against the scripted model."""

from __future__ import annotations

import json

from doc_cases import ok
from docblocks import Case, Ran

from fakeserver import text

# the page's address; the server is ended when the block's shell exits
SERVE = (
    "agi --serve 127.0.0.1:8765 2>serve.log & trap 'kill $!; wait' EXIT\n"
    "for _ in $(seq 300); do\n"
    "  curl -sf localhost:8765/healthz | grep -q '\"ok\"' && break; sleep 0.1\n"
    "done\n"
)


def run_answer(r: Ran) -> None:
    ok(r)
    result = json.loads(r.stdout)
    assert result["answer"] == "12" and result["exit_code"] == 0, r.stdout
    assert "How many Python files" in json.dumps(r.requests[0]["messages"])


def chat_answer(r: Ran) -> None:
    ok(r)
    reply = json.loads(r.stdout)
    assert reply["object"] == "chat.completion", r.stdout
    assert reply["choices"][0]["message"]["content"] == "It adds numbers."


def serve() -> dict[str, Case]:
    page = "docs/protocols/serve.md: "
    return {
        page + "curl -s localhost:8765/v1/runs -d "
        '\'{"prompt": "How many Python files are here?"}\'': Case(
            prelude=SERVE,
            routes={"How many Python files": [text("12")]},
            check=run_answer,
            needs=("curl",),
        ),
        page + "curl -s localhost:8765/v1/chat/completions "
        "-H 'Content-Type: application/json' \\": Case(
            prelude=SERVE,
            routes={"What does this project do?": [text("It adds numbers.")]},
            check=chat_answer,
            needs=("curl",),
        ),
    }
