"""Checkpoints and rewind (docs: checkpoints), further: what
tests/checkpoints/test_checkpoints.py leaves out, each driven through the real executable
against real commands.

- a user's global git configuration (hooks, fsmonitor, hooksPath, attributes, filters, in
  HOME/.gitconfig and XDG) and the project's own: agi's shadow git runs none of it, and the
  project's .git stays byte-identical (every file and directory, nothing new);
- MCP tools, user tools and Terminal count as file-changing;
- a plain directory with sed -i, rm, mv, cp, redirections, links and modes;
- --dry-run changes nothing; a files-only rewind shows in --show and --list-sessions;
- the API key reaches no checkpoint file (git objects and kept contents decompressed);
- links: restored as links, never written through, not even for Write's created files;
- files over 5 MB: grown past the limit by a turn or created by it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from test_nvim import NVIM, editor, manifest, until  # noqa: F401  (Neovim fixtures)

from conftest import AGI, start_agi
from fakeserver import FakeModel, call, text

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")
KEY = "sk-review-0123456789abcdefSECRETKEYvalue"


def git(work: Path, *args: str, home: Path | None = None) -> str:
    """The user's own git, with a neutral configuration (before the hostile one is written)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "XDG_"))}
    env.update(HOME=str(home or work), GIT_CONFIG_NOSYSTEM="1")
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args]
    done = subprocess.run(cmd, cwd=work, check=True, capture_output=True, text=True, env=env)
    return done.stdout


def state(root: Path) -> dict[str, str]:
    """Every entry under `root`, byte for byte: files (content, mode, mtime), directories,
    links; nothing may appear, vanish or change."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if os.path.islink(path):
                out[rel] = "link " + os.readlink(path)
            elif os.path.isdir(path):
                out[rel] = f"dir {oct(st.st_mode)}"
            else:
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                out[rel] = f"file {oct(st.st_mode)} {st.st_mtime_ns} {digest}"
    return out


def tree(work: Path) -> dict[str, tuple[str, bytes]]:
    """The working directory (not .git): files with their executable bit, links as links."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(os.fsencode(work)):
        if dirpath == os.fsencode(work) and b".git" in dirnames:
            dirnames.remove(b".git")
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, os.fsencode(work))
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                out[rel] = ("dir", b"")
            elif not os.path.isfile(path):
                out[rel] = ("special", b"")
            else:
                with open(path, "rb") as f:
                    kind = "exec" if os.access(path, os.X_OK) else "file"
                    out[rel] = (kind, f.read())
    return out


def turn(agi, work: Path, session: Path, *steps, prompt="do it", extra_env=None, args=()):
    with FakeModel(*steps, text("ok")) as server:
        r = agi("-s", str(session), *args, prompt, server=server, cwd=work, extra_env=extra_env)
    assert r.returncode == 0, r.stderr
    return r


def bash(command: str):
    return call("Bash", command=command)


def records(session: Path) -> list[dict]:
    lines = (session / "checkpoints.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines if x.strip()]


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """A git work tree whose user has every hook and program git can run configured globally
    (HOME/.gitconfig, XDG_CONFIG_HOME/git/*) and in the project (.git/config, .git/hooks,
    .gitattributes); each one, when run, appends to `ran`. Returns (work, extra_env, ran)."""
    if GIT is None:
        pytest.skip("git is not installed")
    work, home, xdg = tmp_path / "project", tmp_path / "home", tmp_path / "xdg"
    ran = tmp_path / "ran.log"
    for d in (work, home, xdg / "git", tmp_path / "hooks"):
        d.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    for name, data in {"a.txt": "alpha\n", "b.txt": "beta\n", "c.txt": "gamma\n"}.items():
        (work / name).write_text(data)
    (work / "sub").mkdir()
    (work / "sub" / "x.txt").write_text("x\n")
    (work / ".gitignore").write_text("build/\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "one")

    def script(path: Path, what: str) -> Path:
        path.write_text(f"#!/bin/sh\necho '{what}' \"$@\" >> '{ran}'\ncat\nexit 0\n")
        path.chmod(0o755)
        return path

    hooks = [
        "pre-commit",
        "post-commit",
        "post-checkout",
        "post-merge",
        "post-index-change",
        "reference-transaction",
        "pre-auto-gc",
        "post-rewrite",
        "fsmonitor-watchman",
    ]
    for hook in hooks:
        script(tmp_path / "hooks" / hook, f"global hook {hook}")
        script(work / ".git" / "hooks" / hook, f"project hook {hook}")
    fsmonitor = script(tmp_path / "fsmonitor", "fsmonitor")
    filt = script(tmp_path / "filter", "filter")
    (home / "attributes").write_text("* filter=evil diff=evil merge=evil\n")
    (home / "excludes").write_text("*\n")  # were it read, nothing would be snapshotted
    (home / "included").write_text(f"[core]\n\tpager = {filt}\n\tfsmonitor = {fsmonitor}\n")
    global_config = (
        "[core]\n"
        f"\thooksPath = {tmp_path / 'hooks'}\n\tfsmonitor = {fsmonitor}\n"
        f"\tattributesFile = {home / 'attributes'}\n\texcludesFile = {home / 'excludes'}\n"
        "\tuntrackedCache = true\n\tsplitIndex = true\n\tautocrlf = true\n"
        f'[filter "evil"]\n\tclean = {filt} clean\n\tsmudge = {filt} smudge\n'
        f"\tprocess = {filt} process\n\trequired = true\n"
        f'[diff "evil"]\n\ttextconv = {filt}\n\tcommand = {filt}\n'
        f"[diff]\n\texternal = {filt}\n"
        f"[include]\n\tpath = {home / 'included'}\n"
        f"[gc]\n\tauto = 1\n\tautoDetach = false\n"
        "[index]\n\tversion = 4\n"
        "[feature]\n\tmanyFiles = true\n"
    )
    (home / ".gitconfig").write_text(global_config)
    (xdg / "git" / "config").write_text(global_config)
    (xdg / "git" / "attributes").write_text("* filter=evil\n")
    (xdg / "git" / "ignore").write_text("*\n")
    with (work / ".git" / "config").open("a") as f:
        f.write(global_config)
    (work / ".gitattributes").write_text("* filter=evil\n")  # the user's own, uncommitted
    extra = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(xdg),
        "GIT_CONFIG_PARAMETERS": f"'core.fsmonitor'='{fsmonitor}'",
        "GIT_DIR": str(work / ".git"),  # a shell that exported these: never agi's git's
        "GIT_INDEX_FILE": str(work / ".git" / "index"),
        "GIT_WORK_TREE": str(work),
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.hooksPath",
        "GIT_CONFIG_VALUE_0": str(tmp_path / "hooks"),
        "GIT_TEMPLATE_DIR": str(tmp_path / "templates"),
    }
    (tmp_path / "templates" / "hooks").mkdir(parents=True)
    for hook in hooks:
        script(tmp_path / "templates" / "hooks" / hook, f"template hook {hook}")
    return work, extra, ran


@needs_git
def test_a_hostile_git_configuration_runs_nothing_and_dot_git_stays_byte_identical(
    agi, hostile, tmp_path
):
    work, extra, ran = hostile
    session = tmp_path / "s"
    dot_git = state(work / ".git")
    before = tree(work)
    turn(
        agi,
        work,
        session,
        bash(
            "unset ${!GIT_*}; sed -i s/alpha/ALPHA/ a.txt"
            " && rm b.txt && mv c.txt c2.txt && echo new > new.txt && printf 'm\\n' >> sub/x.txt"
            " && mkdir -p made/deep && echo m > made/deep/m.txt && echo b > build/out 2>/dev/null"
            "; true"
        ),
        extra_env=extra,
    )
    turn(agi, work, session, bash("echo two >> a.txt; rm -r sub"), prompt="two", extra_env=extra)
    listed = agi("-s", str(session), "--rewind", cwd=work, extra_env=extra)
    assert listed.returncode == 0, listed.stderr
    assert "new.txt" in listed.stdout and "made/deep/m.txt" in listed.stdout  # nothing excluded
    dry = agi("-s", str(session), "--rewind", "1", "--dry-run", cwd=work, extra_env=extra)
    assert dry.returncode == 0, dry.stderr
    r = agi("-s", str(session), "--rewind-files", "2", cwd=work, extra_env=extra)
    assert r.returncode == 0, r.stderr
    r = agi("-s", str(session), "--rewind", "1", cwd=work, extra_env=extra)
    assert r.returncode == 0, r.stderr
    assert tree(work) == before
    assert state(work / ".git") == dot_git  # byte for byte, and nothing new
    assert not ran.exists(), ran.read_text()  # no hook, fsmonitor, filter, pager, diff driver
    shadow = next((tmp_path / "agi-home" / "checkpoints").glob("*-project"))
    assert all(p.name.endswith(".sample") for p in shadow.glob("hooks/*"))


@needs_git
def test_a_plain_directory_with_real_commands(agi, tmp_path):
    work = tmp_path / "plain"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    (work / "b.txt").write_text("beta\n")
    (work / "c.txt").write_text("gamma\n")
    (work / "run.sh").write_text("echo hi\n")
    (work / "data").mkdir()
    (work / "data" / "d.csv").write_text("1,2\n")
    (work / "link").symlink_to("a.txt")
    (work / "with space.txt").write_text("space\n")
    with open(os.fsencode(work) + b"/caf\xe9\nold.txt", "wb") as f:
        f.write(b"latin-1 name\n")
    os.mkfifo(work / "pipe")  # neither snapshotted nor waited on
    session = tmp_path / "s"
    before = tree(work)
    turn(
        agi,
        work,
        session,
        bash(
            "echo changed > 'with space.txt' && rm caf*old.txt && echo n > $'new\\nline \\xff.txt'"
            " && mkfifo pipe2 && sed -i 's/alpha/ALPHA/' a.txt && rm b.txt && mv c.txt moved.txt"
            " && cp moved.txt copy.txt && echo over > data/d.csv && echo more >> a.txt"
            " && chmod +x run.sh && rm link && ln -s moved.txt link && mkdir -p x/y"
            " && echo z > x/y/z.txt && mv data data2"
        ),
    )
    assert not (work / "data").exists() and (work / "link").resolve().name == "moved.txt"
    assert not (tmp_path / "agi-home" / "checkpoints" / "files").exists()  # Bash: no copies
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert {k: v for k, v in tree(work).items() if k != b"pipe2"} == before
    assert not (work / "x").exists() and not (work / "data2").exists()
    assert not [p for p in work.rglob("*.agi-rewind.tmp")]
    assert (work / "pipe2").exists()  # not a file: left alone


def _user_tool(where: Path) -> Path:
    desc = {
        "name": "stamp",
        "description": "writes stamp.txt",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
    }
    where.mkdir()
    path = where / "stamp"
    path.write_text(
        "#!/bin/sh\n"
        f"if [ \"$1\" = --describe ]; then echo '{json.dumps(desc)}'; exit 0; fi\n"
        "cat > stamp.txt\necho stamped\n"
    )
    path.chmod(0o755)
    return path


MCP_SERVER = """
import sys
try:
    from mcp.server.mcpserver import MCPServer as FastMCP
except ImportError:
    from mcp.server.fastmcp import FastMCP

server = FastMCP("files")

@server.tool()
def put(path: str, text: str) -> str:
    "Write a file."
    with open(path, "w") as f:
        f.write(text)
    return "written"

server.run()
"""


@needs_git
def test_user_tools_mcp_tools_and_terminal_take_a_checkpoint(agi, tmp_path):
    """Each turn's only tool call is a user tool, an MCP tool or a Terminal: each gets a
    snapshot before it, and rewinding removes what it made and restores what it changed."""
    pytest.importorskip("mcp", reason="the mcp package is not installed")
    work = tmp_path / "w"
    work.mkdir()
    (work / "kept.txt").write_text("kept\n")
    (work / "stamp.txt").write_text("old stamp\n")
    tool = _user_tool(tmp_path / "tools")
    server = tmp_path / "files_server.py"
    server.write_text(MCP_SERVER)
    mcp = tmp_path / "mcp.json"
    spec = {"command": sys.executable, "args": [str(server)], "cwd": str(work)}
    mcp.write_text(json.dumps({"mcpServers": {"files": spec}}))
    session = tmp_path / "s"
    before = tree(work)
    with FakeModel(call("stamp", word="new"), text("ok")) as model:
        r = agi("-s", str(session), "--tool", str(tool), "user", server=model, cwd=work)
    assert r.returncode == 0, r.stderr
    assert "word" in (work / "stamp.txt").read_text()
    with FakeModel(call("mcp__files__put", path="mcp.txt", text="from mcp\n"), text("ok")) as m:
        r = agi("-s", str(session), "--mcp", str(mcp), "mcp", server=m, cwd=work)
    assert r.returncode == 0, r.stderr
    assert (work / "mcp.txt").read_text() == "from mcp\n"
    start = call("Terminal", action="start", command="echo t > term.txt; rm kept.txt")
    with FakeModel(start, text("ok")) as model:
        r = agi("-s", str(session), "terminal", server=model, cwd=work)
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 30
    while not (work / "term.txt").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    trees = {x["turn"]: x for x in records(session) if "tree" in x}
    assert sorted(trees) == [1, 2, 3]  # a snapshot before each turn's only tool call
    listed = json.loads(agi("-s", str(session), "--rewind", "--output", "json", cwd=work).stdout)
    files = [t["files"] for t in listed["turns"]]
    assert files == [["stamp.txt"], ["mcp.txt"], ["kept.txt", "term.txt"]]
    r = agi("-s", str(session), "--rewind-files", "3", cwd=work)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["removed term.txt", "restored kept.txt"]
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert tree(work) == before


def test_checkpoints_off_take_nothing_and_a_rewind_says_so(agi, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    session = tmp_path / "s"
    steps = (bash("echo A > a.txt"), call("Write", file_path="b.txt", content="b\n"))
    r = turn(agi, work, session, *steps, extra_env=None, prompt="one", args=("--no-checkpoints",))
    assert r.stderr == ""
    (tmp_path / "config.toml").write_text("checkpoints = false\n")
    turn(agi, work, session, call("Edit", file_path="b.txt", old_string="b", new_string="c"))
    assert not (tmp_path / "agi-home" / "checkpoints").exists()  # no shadow, no kept contents
    listed = agi("-s", str(session), "--rewind", cwd=work).stdout.splitlines()
    assert listed[1].strip() == listed[3].strip() == "files unknown (checkpoints off)"
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 2 and r.stdout == ""  # nothing restored is not a success
    assert r.stderr == (
        "agi: turn 1 had no snapshot (checkpoints off): none of its files can be restored, "
        "and nothing was changed\n"
    )
    assert (work / "a.txt").read_text() == "A\n" and (work / "b.txt").read_text() == "c\n"


def test_a_read_only_turn_takes_no_snapshot(agi, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    session = tmp_path / "s"
    turn(agi, work, session, call("Read", file_path="a.txt"))
    assert [x for x in records(session) if "tree" in x or "untracked" in x] == []
    assert not (tmp_path / "agi-home" / "checkpoints").exists()


@needs_git
def test_dry_run_changes_nothing(agi, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    session = tmp_path / "s"
    turn(agi, work, session, bash("echo A > a.txt; echo n > n.txt"))
    (work / "a.txt").write_text("by someone else\n")
    with (session / "checkpoints.jsonl").open("a") as f:
        f.write('{"turn": 7, "torn')  # even a torn line is left as it is
    work_before, session_before = state(work), state(session)
    for flags in (["--rewind", "1"], ["--rewind-files", "1"], ["--rewind-conversation", "1"]):
        r = agi("-s", str(session), *flags, "--dry-run", cwd=work)
        assert r.returncode == 0, r.stderr
        assert state(work) == work_before and state(session) == session_before
    r = agi("-s", str(session), "--rewind", "1", "--dry-run", cwd=work)
    assert sorted(r.stdout.splitlines()) == [
        "would remove n.txt",
        "would restore a.txt",
        "would rewind the conversation to before turn 1",
    ]
    assert r.stderr == "agi: a.txt was changed by someone else since turn 1; it would be restored\n"


@needs_git
def test_a_files_rewind_shows_in_show_and_list_sessions(agi, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    session = tmp_path / "s"
    turn(agi, work, session, bash("echo n > n.txt"), prompt="one")
    turn(agi, work, session, prompt="two")
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "removed n.txt\n"
    shown = agi("--show", str(session))
    assert shown.returncode == 0, shown.stderr
    assert "── files rewound to before turn 1 (1 file) ──" in shown.stdout
    assert "1 rewind" in agi("--list-sessions").stdout
    with FakeModel(text("three")) as model:
        assert agi("-s", str(session), "three", server=model, cwd=work).returncode == 0
    sent = [m["content"] for m in model.requests[0]["messages"] if m["role"] == "user"]
    assert sent == ["one", "two", "three"]  # the conversation is untouched
    r = agi("-s", str(session), "--rewind-conversation", "2", cwd=work)
    assert r.returncode == 0, r.stderr
    assert "2 rewinds" in agi("--list-sessions").stdout
    listing = agi("-s", str(session), "--rewind", cwd=work).stdout
    assert "to before turn 1 (files)" in listing and "to before turn 2 (conversation)" in listing


def _all_bytes(root: Path) -> bytes:
    """Every file under root, with git's loose objects, packs and agi's kept contents
    decompressed."""
    out = []
    for path in root.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        out.append(data)
        try:
            out.append(zlib.decompress(data))
        except zlib.error:
            pass
    for shadow in root.rglob("checkpoints/*"):
        if (shadow / "objects").is_dir():
            env = {**os.environ, "GIT_DIR": str(shadow)}
            done = subprocess.run(
                ["git", "cat-file", "--batch-all-objects", "--batch"],
                env=env,
                capture_output=True,
                check=True,
            )
            out.append(done.stdout)
    return b"\n".join(out)


@needs_git
def test_the_api_key_reaches_no_checkpoint_file(agi, tmp_path):
    """The key sits in the prompt's first line where the recorded prompt is cut (200
    characters), and in the environment a command dumps: no checkpoint file holds any of it."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    session = tmp_path / "s"
    prompt = "x" * 186 + f" {KEY} and more\nsecond line {KEY}"
    extra = {"AGI_API_KEY": KEY, "MY_TOKEN_COPY": f"prefix-{KEY}"}
    with FakeModel(
        bash('env > env.txt; echo "$AGI_API_KEY$MY_TOKEN_COPY" > key.txt'),
        call("Write", file_path="w.txt", content="written\n"),
        call("Edit", file_path="a.txt", old_string="alpha", new_string="beta"),
        text("ok"),
    ) as server:
        r = agi("-s", str(session), prompt, server=server, cwd=work, extra_env=extra)
    assert r.returncode == 0, r.stderr
    assert "MY_TOKEN_COPY" not in (work / "env.txt").read_text()
    with FakeModel(bash("echo again > w.txt"), text("ok")) as server:
        r = agi("-s", str(session), prompt, server=server, cwd=work, extra_env=extra)
    assert r.returncode == 0, r.stderr
    r = agi("-s", str(session), "--rewind", "1", cwd=work, extra_env=extra)
    assert r.returncode == 0, r.stderr
    listed = agi("-s", str(session), "--rewind", cwd=work, extra_env=extra).stdout
    everything = _all_bytes(tmp_path / "agi-home") + _all_bytes(session) + listed.encode()
    assert b"xxxxxxxx" in everything  # the prompt is there (redacted)
    for part in (KEY, KEY[:12], KEY[-12:]):
        assert part.encode() not in everything, part


@needs_git
def test_a_config_file_holding_the_key_is_never_snapshotted_nor_removed(agi, tmp_path):
    """agi run where its config file (with the API key) lies inside the working directory
    (a home directory): the file is kept out of every snapshot, and a rewind run without
    AGI_CONFIG (so it does not know the file) still leaves it alone."""
    work = tmp_path / "home"
    (work / ".config" / "agi").mkdir(parents=True)
    config = work / ".config" / "agi" / "config.toml"
    config.write_text(f'api_key = "{KEY}"\n')
    (work / "a.txt").write_text("alpha\n")
    session = tmp_path / "s"
    extra = {"AGI_CONFIG": str(config)}
    turn(agi, work, session, bash("echo A > a.txt"), extra_env=extra)
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work, extra_env={"AGI_CONFIG": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "restored a.txt\n"
    assert config.read_text() == f'api_key = "{KEY}"\n'
    assert KEY.encode() not in _all_bytes(tmp_path / "agi-home")


@needs_git
def test_links_are_restored_as_links_and_never_written_through(agi, tmp_path):
    """A turn replaces a file and a directory by links to places outside the working
    directory; the rewind puts the file and the directory back and leaves the outside alone."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.txt").write_text("outside x\n")
    (outside / "a.txt").write_text("outside a\n")
    work = tmp_path / "w"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "x.txt").write_text("inside x\n")
    (work / "a.txt").write_text("inside a\n")
    (work / "rel").symlink_to("a.txt")
    (work / "abs").symlink_to(outside / "a.txt")
    session = tmp_path / "s"
    before, outside_before = tree(work), state(outside)
    turn(
        agi,
        work,
        session,
        bash(
            f"rm a.txt && ln -s {outside}/a.txt a.txt && mv sub sub.bak && ln -s {outside} sub"
            " && rm rel && echo plain > rel && rm abs && ln -s a.txt abs"
        ),
    )
    outside_now = state(outside)
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert tree(work) == before
    assert os.readlink(work / "rel") == "a.txt" and os.readlink(work / "abs") == str(
        outside / "a.txt"
    )
    assert not (work / "sub").is_symlink() and (work / "sub" / "x.txt").read_text() == "inside x\n"
    assert state(outside) == outside_now == outside_before


@needs_git
def test_a_rewind_never_removes_through_a_link_put_where_write_made_a_file(agi, tmp_path):
    """Write creates a file in an ignored directory (only Write's record covers it); someone
    then replaces that directory by a link to a place holding a file of the same name. The
    rewind must not remove that file through the link."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "new.txt").write_text("precious\n")
    work = tmp_path / "w"
    (work / "build").mkdir(parents=True)
    (work / ".gitignore").write_text("build/\n")
    session = tmp_path / "s"
    turn(agi, work, session, call("Write", file_path="build/gen/new.txt", content="gen\n"))
    shutil.rmtree(work / "build" / "gen")
    (work / "build" / "gen").symlink_to(outside)
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert (outside / "new.txt").read_text() == "precious\n"
    assert r.returncode == 1 and "symbolic link" in r.stderr, r.stderr


@needs_git
def test_files_over_5_mb_grown_or_created_by_a_turn(agi, tmp_path):
    """A file that grew past 5 MB in a turn is put back (its prior content is in the
    snapshot); one the turn created over 5 MB is removed; one over 5 MB before is left alone."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "grows.bin").write_bytes(b"small\n")
    (work / "was_big.bin").write_bytes(b"\0" * (6 << 20))
    session = tmp_path / "s"
    turn(
        agi,
        work,
        session,
        bash(
            "head -c 6000000 /dev/zero >> grows.bin && head -c 6000000 /dev/zero > made.bin"
            " && echo tail >> was_big.bin"
        ),
    )
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert (work / "grows.bin").read_bytes() == b"small\n"
    assert not (work / "made.bin").exists()
    assert (work / "was_big.bin").stat().st_size == (6 << 20) + 5


@needs_git
def test_an_acp_sessions_turns_can_be_rewound_from_the_shell(agi, env, tmp_path):
    """An editor that cannot rewind: its session's turns are listed and rewound by `agi
    --rewind` in a shell."""
    pytest.importorskip("acp", reason="the acp package is not installed")
    from acp_client import Agent, Recorder, agi_argv, run

    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    (work / "w.txt").write_text("before\n")
    before = tree(work)
    steps = (
        bash("sed -i s/alpha/ALPHA/ a.txt && echo n > made.txt"),
        call("Write", file_path=str(work / "w.txt"), content="after\n"),
        text("done"),
    )

    async def go(server: FakeModel) -> str:
        client = Recorder()
        argv = agi_argv(AGI, "--permission-mode", "bypassPermissions")
        e = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        async with Agent(argv, e, work, client) as agent:
            sid = await agent.start()
            assert (await agent.prompt(sid, "change things")).stop_reason == "end_turn"
            assert await agent.close() == 0
        return sid

    with FakeModel(*steps) as server:
        sid = run(go(server))
    assert (work / "w.txt").read_text() == "after\n"
    listed = agi("-s", sid, "--rewind", cwd=work).stdout.splitlines()
    assert listed[0].endswith("change things")
    assert listed[1].strip() == "a.txt, made.txt, w.txt"
    r = agi("-s", sid, "--rewind", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert tree(work) == before


@needs_git
def test_json_output_with_names_that_are_not_utf8(agi, tmp_path):
    """--output json of the listing and of a rewind, with a name of Latin-1 bytes: valid
    JSON, the bytes kept as surrogate escapes (what os.fsdecode makes of them)."""
    work = tmp_path / "w"
    work.mkdir()
    session = tmp_path / "s"
    turn(agi, work, session, bash("echo x > $'caf\\xe9.txt'"))
    listed = agi("-s", str(session), "--rewind", "--output", "json", cwd=work)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["turns"][0]["files"] == ["caf\udce9.txt"]
    r = agi("-s", str(session), "--rewind-files", "1", "--output", "json", cwd=work)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["removed"] == [str(work) + "/caf\udce9.txt"]
    assert os.listdir(work) == []


@needs_git
def test_a_rewinds_own_changes_are_not_someone_elses(agi, tmp_path):
    """After a rewind of turn 2, a rewind of turn 1 names no file as changed by someone else:
    the files the first rewind put back were agi's doing."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    (work / "b.txt").write_text("beta\n")
    session = tmp_path / "s"
    turn(agi, work, session, bash("echo A > a.txt"), prompt="one")
    turn(agi, work, session, bash("echo AA > a.txt; echo B > b.txt"), prompt="two")
    r = agi("-s", str(session), "--rewind-files", "2", cwd=work)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    (work / "person.txt").write_text("a person's\n")
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["removed person.txt", "restored a.txt"]
    assert r.stderr == "agi: person.txt was changed by someone else since turn 1; restored\n"


def test_a_conversation_rewind_after_a_torn_line_stands_alone(agi, tmp_path):
    """A run killed mid-write left a torn last line in messages.jsonl: the rewind record is
    appended on a line of its own, and the session goes on."""
    session = tmp_path / "s"
    turn(agi, tmp_path, session, prompt="one")
    turn(agi, tmp_path, session, prompt="two")
    with (session / "messages.jsonl").open("a") as f:
        f.write('{"role": "assistant", "content": "tor')
    r = agi("-s", str(session), "--rewind-conversation", "2")
    assert r.returncode == 0, r.stderr
    last = json.loads((session / "messages.jsonl").read_text().splitlines()[-1])
    assert last["rewind"]["turn"] == 2
    with FakeModel(text("three")) as model:
        assert agi("-s", str(session), "three", server=model).returncode == 0
    sent = [m["content"] for m in model.requests[0]["messages"] if m["role"] == "user"]
    assert sent == ["one", "three"]


@needs_git
def test_one_session_in_two_directories(agi, tmp_path):
    """Turns of one session that worked in two directories: a rewind restores both."""
    one, two = tmp_path / "one", tmp_path / "two"
    for d in (one, two):
        d.mkdir()
        (d / "a.txt").write_text(f"{d.name}\n")
    session = tmp_path / "s"
    before = (tree(one), tree(two))
    turn(agi, one, session, bash("echo changed > a.txt; echo n > n.txt"), prompt="in one")
    turn(agi, two, session, bash("rm a.txt; mkdir d; echo m > d/m.txt"), prompt="in two")
    r = agi("-s", str(session), "--rewind-files", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [
        "removed one/n.txt",
        "removed two/d/m.txt",
        "restored one/a.txt",
        "restored two/a.txt",
    ]
    assert (tree(one), tree(two)) == before


@needs_git
def test_a_damaged_shadow_index_or_a_stale_lock_is_rebuilt(agi, tmp_path):
    """What a git killed with agi may leave (a torn index, a lock): the next snapshot starts
    the session's index afresh, silently, and the rewinds still work."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    session = tmp_path / "s"
    turn(agi, work, session, bash("echo one > a.txt"), prompt="one")
    (index,) = (tmp_path / "agi-home" / "checkpoints").glob("*/index-*")
    index.write_bytes(b"x" * 100)  # unreadable
    index.with_name(index.name + ".lock").write_bytes(b"")
    r = turn(agi, work, session, bash("echo two > a.txt; echo b > b.txt"), prompt="two")
    assert "checkpoints" not in r.stderr
    assert [x["turn"] for x in records(session) if "tree" in x] == [1, 2]
    r = agi("-s", str(session), "--rewind-files", "2", cwd=work)
    assert r.returncode == 0, r.stderr
    assert (work / "a.txt").read_text() == "one\n" and not (work / "b.txt").exists()
    index.write_bytes(b"DIRC garbage")
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert (work / "a.txt").read_text() == "alpha\n"


@needs_git
def test_kills_during_a_restore_in_a_git_work_tree_leave_dot_git_alone(agi, tmp_path, env):
    work = tmp_path / "w"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    for i in range(600):
        (work / f"f{i:04}.txt").write_text(f"old {i}\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "one")
    dot_git, before = state(work / ".git"), tree(work)
    session = tmp_path / "s"
    turn(agi, work, session, bash("sed -i s/old/new/ *.txt && rm f0001.txt && mv f0002.txt m"))
    for delay in (0.15, 0.3, 0.5, 0.8):
        proc = start_agi([AGI, "-s", str(session), "--rewind-files", "1"], {**env, "PWD": "/"})
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        assert state(work / ".git") == dot_git
        for name, (_, data) in tree(work).items():
            if name.endswith(b".agi-rewind.tmp") or name == b"m":
                continue
            i = int(name[1:5])
            assert data in (f"old {i}\n".encode(), f"new {i}\n".encode()), name
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert tree(work) == before and state(work / ".git") == dot_git


@needs_git
@pytest.mark.skipif(NVIM is None, reason="needs nvim >= 0.10 and pynvim")
def test_agirewind_reloads_unmodified_buffers_and_names_modified_ones(tmp_path, editor):  # noqa: F811
    """:AgiRewind in a real headless Neovim: of the buffers whose files the request changed,
    the unmodified one (a name with a space) is reloaded, the one with unsaved edits is kept
    and named; a file the request created is removed."""
    work = tmp_path / "w"
    work.mkdir()
    one, two = work / "one file.txt", work / "two.txt"
    one.write_text("one\n")
    two.write_text("two\n")
    change = bash("echo ONE > 'one file.txt'; echo TWO > two.txt; echo new > made.txt")
    with FakeModel(change, text("```python\nX = 2\n```")) as server:
        ed = editor(server, setup={"tools": ["Bash"], "warmup": False})
        ed.command(f"cd {work}")
        bufs = {}
        for path in (one, two):
            ed.lua("vim.cmd.edit(vim.fn.fnameescape(...))", str(path))
            bufs[path] = int(ed.nvim.current.buffer.number)
        ed.buffer(["X = 1"])
        ed.command("AgiRefactor make it two")
        (event,) = ed.done()
        assert event["status"] == "done", event
        for path in (one, two):
            ed.lua(f"vim.api.nvim_buf_call({bufs[path]}, function() vim.cmd('edit!') end)")
        assert ed.lines(bufs[one]) == ["ONE"]
        ed.lua(f"vim.api.nvim_buf_set_lines({bufs[two]}, 0, -1, false, {{'my unsaved edit'}})")
        ed.command("AgiRewind")
        until(lambda: ed.lines(bufs[one]) == ["one"], "the unmodified buffer is reloaded", 30)
        until(lambda: "rewound 3 files" in ed.messages(), "the rewind is reported", 30)
        assert ed.lines(bufs[two]) == ["my unsaved edit"]
        assert "not reloaded (unsaved changes): two.txt" in ed.messages()
    assert one.read_text() == "one\n" and two.read_text() == "two\n"
    assert not (work / "made.txt").exists()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
