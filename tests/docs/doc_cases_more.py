"""How the shell blocks of the guides on scripting, structure, tools and protocols are run."""

from __future__ import annotations

import json
from pathlib import Path

from doc_cases import MCP_JSON, TIME, files, git_log, ok, turns
from docblocks import REPO, Case, Ran

from fakeserver import call, calls, text

POW = "1267650600228229401496703205376"  # 2**100


def commit_message(r: Ran) -> None:
    ok(r)
    assert git_log(r).splitlines()[0] == "Tidy main.py"


def described(r: Ran) -> None:
    ok(r)
    assert r.stdout == "xxxx: 1 files, tests: true\n", r.stdout


def wrapped(r: Ran) -> None:
    ok(r)
    answer, session, output = r.stdout.splitlines()
    assert answer == "Done." and Path(session).is_dir() and output == "5"


def judged(message: str):
    def check(r: Ran) -> None:
        ok(r)
        assert message in git_log(r)

    return check


def looped(r: Ran) -> None:
    ok(r)
    lines = [json.loads(line) for line in (r.work / "summaries.jsonl").read_text().splitlines()]
    assert [line["file"] for line in lines] == ["main.py", "util.py"]  # --no-stdin: both read
    assert all(set(line) == {"file", "summary", "todo"} for line in lines)


def batched(r: Ran) -> None:
    ok(r)
    assert r.stdout.splitlines() == ["Done."] * 3


def chained(r: Ran) -> None:
    ok(r)
    assert r.stdout == "Done.\nDone.\nxxxx\n"
    assert r.users()[:2] == ["Read main.py", "What would you change?"]


def managed(r: Ran) -> None:
    ok(r)
    assert "First question" in r.stdout  # --list-sessions and --show
    assert turns(r.work / "DIR") == 1  # --fork left the original as it was


def skilled(r: Ran) -> None:
    ok(r)
    assert "Write a haiku about the subject the user gives" in r.systems()[0]


def delegated(r: Ran) -> None:
    ok(r)
    assert any(s.startswith("You review code.") for s in r.systems())


def schema_examples(r: Ran) -> None:
    ok(r)
    lines = r.stdout.splitlines()
    assert lines[0] == "0.5" and lines[1] == "Done."  # jq .load; the loop's one task
    assert json.loads(lines[2]) == {"score": 1, "verdict": "pass", "notes": ["xxxx"]}
    assert any(u.startswith("Grade the essay\n\n<stdin>\nPipes") for u in r.users())


def recipe(r: Ran) -> None:
    ok(r)
    assert set(json.loads((r.work / "recipe.json").read_text())) == {
        "dish",
        "minutes",
        "ingredients",
    }


def terminal(r: Ran) -> None:
    ok(r)
    assert any(POW in t for t in r.tool_results()), r.tool_results()


def tools(r: Ran) -> None:
    ok(r)
    results = r.tool_results()
    assert any(t.strip() == "34" for t in results), results
    assert any("1.2.3" in t for t in results)
    assert any("words: 8" in t for t in results), results  # word-count
    assert r.offered(0) == ["Read", "calculate"]
    assert r.offered(-1) == ["json-query", "word-count"]  # --no-bash: only the user's tools


def classified(r: Ran) -> None:
    ok(r)
    lines = [json.loads(line) for line in (r.work / "results.jsonl").read_text().splitlines()]
    assert sorted(line["id"] for line in lines) == ["a", "b", "c"]
    assert all(line["answer"] == {"kind": "sales"} and line["exit"] == 0 for line in lines)


def sharded(r: Ran) -> None:
    ok(r)
    assert len((r.work / "out" / "0.jsonl").read_text().splitlines()) == 2


def limited(r: Ran) -> None:
    assert r.stdout == "exit 4\n", r.stderr


def outputs(r: Ran) -> None:
    ok(r)
    assert r.stdout.splitlines() == ["Done.", '{"command":"ls | wc -l"}']


def timed(r: Ran) -> None:
    ok(r)
    assert any("Asia/Tokyo" in t for t in r.tool_results())


def more() -> dict[str, Case]:
    """The cases of the guides' and protocols' blocks, by name."""
    inquiries = "".join(
        json.dumps({"id": i, "prompt": f"Classify: {p}"}) + "\n"
        for i, p in (("a", "I want to buy"), ("b", "Price list?"), ("c", "Discount?"))
    )
    prices = '[prices."fake-model"]\ninput = 0\noutput = 0\n'
    return {
        'docs/guides/scripting.md: msg=$(git diff | agi "Write a one-line commit message for '
        'this diff")': Case(
            routes={"one-line commit message": [text("Tidy main.py")]},
            check=commit_message,
            needs=("git",),
        ),
        "docs/guides/scripting.md: agi --schema 'language:str, files:int, tests:bool:\"Are there "
        'tests?"\' "Describe this repository" \\': Case(check=described, needs=("jq",)),
        'docs/guides/scripting.md: agi --output json "Summarise main.py in one sentence" | jq -r '
        "'.answer, .session, .usage.output'": Case(check=wrapped, needs=("jq",)),
        'docs/guides/scripting.md: if agi --exit-code="main.py runs without errors" "Fix '
        'main.py"; then': Case(check=judged("Fix main.py"), needs=("git",)),
        'docs/guides/scripting.md: agi --timeout 300 --max-steps 20 "Tidy up main.py"': Case(
            check=lambda r: ok(r) or _equal(r.stdout, "Done.\ndone\n"), errexit=False
        ),
        "docs/guides/scripting.md: printf '%s\\n' main.py util.py | while read -r f; do": Case(
            check=looped, needs=("jq",)
        ),
        'docs/guides/scripting.md: printf \'%s\\n\' "Name a prime above 100" "Name a colour" '
        '"Name a river" > prompts.txt': Case(check=batched, needs=("jq",)),
        "docs/guides/scripting.md: S=$(mktemp -d)": Case(check=chained, needs=("jq",)),
        "docs/guides/sessions.md: agi --list-sessions": Case(
            prelude='agi -s DIR "First question"\n', check=managed
        ),
        "docs/guides/skills-and-subagents.md: mkdir -p skills/haiku && cat > "
        "skills/haiku/SKILL.md <<'EOF'": Case(check=skilled),
        "docs/guides/skills-and-subagents.md: mkdir -p agents && cat > agents/reviewer.md "
        "<<'EOF'": Case(
            routes={
                "Have the reviewer": [
                    call(
                        "Task",
                        description="review",
                        prompt="Review the diff",
                        subagent_type="reviewer",
                    ),
                    text("One bug: the list grew."),
                ]
            },
            check=delegated,
            needs=("git",),
        ),
        'docs/guides/structured.md: agi --schema \'distro:str:"Distribution name", '
        'cores:int(1..):"CPU cores",': Case(check=schema_examples, needs=("jq",)),
        "docs/guides/structured.md: S=$(mktemp -d)": Case(check=recipe),
        'docs/guides/structured.md: if agi --exit-code="the tests pass" "Fix the failing test in '
        'tests/test_io.py"; then': Case(check=judged("Fix test_io"), needs=("git",)),
        'docs/guides/terminal.md: agi "Start python3 in a terminal, compute 2**100 in it, and '
        'tell me the result"': Case(
            routes={
                "Start python3 in a terminal": [
                    call("Terminal", action="start", id="t1", command="python3 -q"),
                    call("Terminal", action="send", id="t1", keys="2**100<Enter>", wait_ms=3000),
                    text(POW),
                ]
            },
            check=terminal,
        ),
        'docs/guides/tools.md: agi --tools Read,calculate "What is 17% of the total in '
        'totals.txt?"': Case(
            setup=_examples,
            routes={
                "17% of the total": [call("calculate", expression="0.17 * 200"), text("34")],
                "Which version": [
                    call("json-query", file="package.json", query="version"),
                    text("1.2.3"),
                ],
                "How many words": [call("word-count", path="README.md"), text("7")],
            },
            check=tools,
        ),
        'docs/guides/mcp.md: echo \'{"mcpServers": {"time": {"command": '
        '"mcp-server-time"}}}\' > mcp.json': Case(
            routes=TIME, check=timed, needs=("mcp-server-time",)
        ),
        "docs/protocols/batch.md: agi --batch inquiries.jsonl --jobs 8 --schema 'kind: "
        "enum(sales|support|spam)' \\": Case(
            setup=files(**{"inquiries.jsonl": inquiries}),
            check=classified,
            config=prices,
        ),
        "docs/protocols/batch.md: agi --batch jobs.jsonl --shard "
        '"$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT" \\': Case(
            setup=files(**{"jobs.jsonl": "First job\nSecond job\n", "out/.keep": ""}),
            check=sharded,
            env={"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "1"},
        ),
        'docs/reference/exit-codes.md: agi --max-steps 1 "Count the lines of every file here"; '
        'echo "exit $?"': Case(
            routes={"Count the lines": [calls(("Bash", {"command": "wc -l *"}))]},
            check=limited,
            errexit=False,
        ),
        'docs/reference/output.md: agi --output json "What is 6 * 7?" | jq -r .answer': Case(
            routes={"Count the files here": [call("Bash", command="ls | wc -l"), text("9")]},
            check=outputs,
            needs=("jq",),
        ),
    }


def _equal(a: object, b: object) -> None:
    assert a == b, (a, b)


def _examples(work: Path, home: Path) -> None:
    (work / "examples").symlink_to(REPO / "examples")


__all__ = ["MCP_JSON", "more"]
