"""Checkpoints and rewind (docs: checkpoints): the real executable, real Bash commands, in a
git work tree and in a plain directory, against the scripted model server."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_nvim import NVIM, editor, manifest, until  # noqa: F401  (Neovim fixtures)

from conftest import AGI, start_agi
from fakeserver import FakeModel, call, calls, text

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


def git(work: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args]
    return subprocess.run(cmd, cwd=work, check=True, capture_output=True, text=True).stdout


def dot_git(work: Path) -> dict[str, bytes]:
    """Every file of the project's .git, byte for byte."""
    root = work / ".git"
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def tree(work: Path) -> dict[str, bytes]:
    """The working directory's files (not .git), byte for byte."""
    out = {}
    for p in sorted(work.rglob("*")):
        rel = p.relative_to(work)
        if rel.parts[0] != ".git" and (p.is_file() or p.is_symlink()):
            out[str(rel)] = os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
    return out


def turn(agi, work: Path, session: Path, *steps, prompt: str = "do it", args=()):
    """One run in `work` whose model makes the given tool calls (one step each), then answers."""
    with FakeModel(*steps, text("ok")) as server:
        r = agi("-s", str(session), *args, prompt, server=server, cwd=work)
    assert r.returncode == 0, r.stderr
    return r, server


def bash(command: str):
    return call("Bash", command=command)


def rewind(agi, work: Path, session: Path, *args: str, **kw):
    return agi("-s", str(session), *args, cwd=work, **kw)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git work tree with a commit, a second branch, an ignored directory."""
    if GIT is None:
        pytest.skip("git is not installed")
    work = tmp_path / "project"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "a.txt").write_text("alpha\n")
    (work / "b.txt").write_text("beta\n")
    (work / "c.txt").write_text("gamma\n")
    (work / "sub").mkdir()
    (work / "sub" / "x.txt").write_text("x\n")
    (work / "d.txt").write_text("delta on main\n")
    (work / ".gitignore").write_text("build/\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "one")
    git(work, "checkout", "-q", "-b", "other")
    (work / "d.txt").write_text("delta on other\n")
    git(work, "commit", "-q", "-am", "two")
    git(work, "checkout", "-q", "main")
    return work


@needs_git
def test_rewind_undoes_bash_in_a_git_work_tree(agi, project, tmp_path):
    session = tmp_path / "s"
    before = tree(project)
    git_before = dot_git(project)
    turn(
        agi,
        project,
        session,
        bash(
            "sed -i s/alpha/ALPHA/ a.txt && rm b.txt && mv c.txt c2.txt && echo new > new.txt"
            " && printf 'more\\n' >> sub/x.txt && mkdir -p made/deep && echo m > made/deep/m.txt"
        ),
        prompt="first turn\nsecond line",
    )
    assert dot_git(project) == git_before  # a checkpoint never touches the project's .git
    after_one = tree(project)
    turn(
        agi,
        project,
        session,
        bash("git checkout other -- d.txt && echo again >> a.txt"),
        prompt="second turn",
    )
    assert (project / "d.txt").read_text() == "delta on other\n"

    r = rewind(agi, project, session, "--rewind")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[0] == "1" and lines[0].endswith("first turn")
    assert "a.txt" in lines[1] and "b.txt" in lines[1] and "made/deep/m.txt" in lines[1]
    assert lines[2].split()[0] == "2" and lines[2].endswith("second turn")
    assert lines[3].split(", ") == ["       a.txt", "d.txt"]

    git_now = dot_git(project)
    r = rewind(agi, project, session, "--rewind", "2", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [
        "would restore a.txt",
        "would restore d.txt",
        "would rewind the conversation to before turn 2",
    ]
    assert r.stderr == ""
    r = rewind(agi, project, session, "--rewind-files", "2")
    assert r.returncode == 0, r.stderr
    assert tree(project) == after_one
    r = rewind(agi, project, session, "--rewind", "1")
    assert r.returncode == 0, r.stderr
    assert tree(project) == before
    assert not (project / "made").exists()  # the directories the turn made go with its files
    assert dot_git(project) == git_now  # a rewind never touches the project's .git
    assert "conversation rewound to before turn 1" in r.stdout


@needs_git
def test_conversation_rewind_is_an_appended_record(agi, project, tmp_path):
    session = tmp_path / "s"
    turn(agi, project, session, prompt="one")
    turn(agi, project, session, bash("echo x > x.txt"), prompt="two")
    turn(agi, project, session, prompt="three")
    stored = (session / "messages.jsonl").read_bytes()
    r = rewind(agi, project, session, "--rewind-conversation", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "conversation rewound to before turn 2\n"
    assert (project / "x.txt").exists()  # files untouched
    assert (session / "messages.jsonl").read_bytes().startswith(stored)  # nothing erased
    _, server = turn(agi, project, session, prompt="four")
    sent = [m["content"] for m in server.requests[0]["messages"] if m["role"] != "system"]
    assert sent == ["one", "ok", "four"]
    # rewinding to a rewound turn brings it back: the view as it was when it began
    r = rewind(agi, project, session, "--rewind-conversation", "3")
    assert r.returncode == 0, r.stderr
    _, server = turn(agi, project, session, prompt="five")
    sent = [m["content"] for m in server.requests[0]["messages"] if m["role"] != "system"]
    assert sent[:2] == ["one", "ok"] and sent[2] == "two" and sent[-1] == "five"
    assert "three" not in sent and "four" not in sent

    shown = agi("--show", str(session))
    assert shown.returncode == 0, shown.stderr
    assert "── rewound to before turn 2 ──" in shown.stdout
    assert "── rewound to before turn 3 ──" in shown.stdout
    listed = agi("--list-sessions")
    assert "2 rewinds" in listed.stdout
    r = rewind(agi, project, session, "--rewind")
    assert "(rewound)" in r.stdout and "to before turn 2 (conversation)" in r.stdout
    assert agi("--rewind", "-c", cwd=project).stdout == r.stdout  # -c: the last session used
    with (session / "checkpoints.jsonl").open("a") as f:
        f.write('{"turn": 9, "tor')  # a torn last line (a killed write) is skipped and ended
    assert rewind(agi, project, session, "--rewind-conversation", "5", "--dry-run").returncode == 0
    listed = json.loads(rewind(agi, project, session, "--rewind", "--output", "json").stdout)
    assert [t["turn"] for t in listed["turns"]] == [1, 2, 3, 4, 5]
    assert [t["rewound"] for t in listed["turns"]] == [False, False, True, True, False]
    assert listed["turns"][1]["files"] == ["x.txt"] and listed["rewinds"] == 2


def test_a_rewind_across_a_compaction(agi, tmp_path):
    """The view after a rewind is the view the session had before that turn's prompt, a
    compaction record and its kept copies included; rewinding past it brings the full history."""
    session, work = tmp_path / "s", tmp_path
    for prompt in ("one", "two"):
        turn(agi, work, session, prompt=prompt)
    with FakeModel(text("SUMMARY of one and two.")) as server:
        r = agi("--compact", "-s", str(session), server=server)
    assert r.returncode == 0, r.stderr
    _, three = turn(agi, work, session, prompt="three")
    assert rewind(agi, work, session, "--rewind-conversation", "3").returncode == 0
    _, four = turn(agi, work, session, prompt="four")
    assert four.requests[0]["messages"][:-1] == three.requests[0]["messages"][:-1]
    assert "SUMMARY of one and two." in json.dumps(four.requests[0]["messages"])
    assert rewind(agi, work, session, "--rewind-conversation", "2").returncode == 0
    _, five = turn(agi, work, session, prompt="five")
    sent = [m["content"] for m in five.requests[0]["messages"] if m["role"] != "system"]
    assert sent == ["one", "ok", "five"]  # from before the compaction: the history in full


@needs_git
def test_someone_elses_changes_are_restored_and_named(agi, project, tmp_path):
    session = tmp_path / "s"
    turn(agi, project, session, bash("echo changed > a.txt"))
    (project / "b.txt").write_text("edited by a person\n")
    (project / "person.txt").write_text("new\n")
    r = rewind(agi, project, session, "--rewind-files", "1", "--dry-run", "--output", "json")
    planned = json.loads(r.stdout)
    assert planned["dry_run"] and not planned["conversation"] and planned["failed"] == []
    assert sorted(planned["restored"]) == [str(project / n) for n in ("a.txt", "b.txt")]
    assert planned["removed"] == [str(project / "person.txt")]
    assert planned["others"] == [str(project / n) for n in ("b.txt", "person.txt")]
    r = rewind(agi, project, session, "--rewind-files", "1")
    assert r.returncode == 0, r.stderr
    assert (project / "a.txt").read_text() == "alpha\n"
    assert (project / "b.txt").read_text() == "beta\n"
    assert not (project / "person.txt").exists()
    named = sorted(line for line in r.stderr.splitlines())
    assert named == [
        "agi: b.txt was changed by someone else since turn 1; restored",
        "agi: person.txt was changed by someone else since turn 1; restored",
    ]


def test_plain_directory_ignored_outside_and_big_files(agi, tmp_path):
    if GIT is None:
        pytest.skip("git is not installed")
    work = tmp_path / "plain"
    (work / "build").mkdir(parents=True)
    (work / ".gitignore").write_text("build/\n")
    (work / "a.txt").write_text("alpha\n")
    (work / "build" / "out.txt").write_text("built\n")
    (work / "big.bin").write_bytes(b"\0" * (6 * 1024 * 1024))
    outside = tmp_path / "outside.txt"
    outside.write_text("outside\n")
    nested = work / "vendor" / "lib"  # a repository of its own inside: a gitlink to the shadow
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    (nested / "x.txt").write_text("vendored\n")
    git(nested, "add", "-A")
    git(nested, "commit", "-q", "-m", "v")
    session = tmp_path / "s"
    r, _ = turn(
        agi,
        work,
        session,
        calls(
            (
                "Edit",
                {"file_path": "vendor/lib/x.txt", "old_string": "vendored", "new_string": "V"},
            ),
            ("Bash", {"command": "echo A > a.txt; echo tail >> big.bin; echo gen > build/gen.txt"}),
            ("Write", {"file_path": "build/out.txt", "content": "rewritten\n"}),
            ("Edit", {"file_path": str(outside), "old_string": "outside", "new_string": "EDITED"}),
            ("Write", {"file_path": str(tmp_path / "created.txt"), "content": "c\n"}),
        ),
        args=("-v",),  # the notice is for a person: a terminal or -v
    )
    warnings = [line for line in r.stderr.splitlines() if "over 5 MB" in line]
    assert len(warnings) == 1 and "big.bin" in warnings[0]
    assert outside.read_text() == "EDITED\n"
    r = rewind(agi, work, session, "--rewind-files", "1")
    assert r.returncode == 0, r.stderr
    assert (work / "a.txt").read_text() == "alpha\n"
    assert (work / "build" / "out.txt").read_text() == "built\n"  # Write's record
    assert outside.read_text() == "outside\n"  # wherever it lies
    assert not (tmp_path / "created.txt").exists()
    assert (nested / "x.txt").read_text() == "vendored\n"  # Edit's record, in a nested repository
    assert (work / "build" / "gen.txt").exists()  # ignored and not Write/Edit: left alone
    assert (work / "big.bin").stat().st_size == 6 * 1024 * 1024 + 5  # over 5 MB: left alone


@needs_git
def test_links_modes_odd_names_and_a_session_inside_the_tree(agi, project, tmp_path):
    """Symbolic links, the executable bit, names with spaces, newlines and bytes that are not
    UTF-8; a session directory (and AGI_HOME) inside the work tree is never snapshotted."""
    odd = os.fsencode(project) + b"/caf\xe9 \n name.txt"
    with open(odd, "wb") as f:
        f.write(b"odd\n")
    (project / "link").symlink_to("a.txt")
    (project / "tool.sh").write_text("echo hi\n")
    session = project / ".sessions" / "s"
    home = project / ".agi-home"
    env = {"AGI_HOME": str(home)}
    before = tree(project)
    with FakeModel(
        bash(
            "rm link && ln -s b.txt link2 && chmod +x tool.sh && rm -- caf*"
            " && echo 'x' > 'with space.txt'"
        ),
        text("ok"),
    ) as server:
        r = agi("-s", str(session), "go", server=server, cwd=project, extra_env=env)
    assert r.returncode == 0, r.stderr
    assert os.access(project / "tool.sh", os.X_OK)
    listed = agi("-s", str(session), "--rewind", cwd=project, extra_env=env).stdout
    assert "link2" in listed and "tool.sh" in listed and ".sessions" not in listed
    r = agi("-s", str(session), "--rewind", "1", cwd=project, extra_env=env)
    assert r.returncode == 0, r.stderr
    assert '"caf\\351 \\n name.txt"' in r.stdout.splitlines()[0]  # quoted as git quotes
    now = tree(project)
    assert {k: v for k, v in now.items() if not k.startswith((".sessions", ".agi-home"))} == {
        k: v for k, v in before.items() if not k.startswith((".sessions", ".agi-home"))
    }
    assert os.readlink(project / "link") == "a.txt" and not (project / "link2").exists()
    assert not os.access(project / "tool.sh", os.X_OK)
    with open(odd, "rb") as f:
        assert f.read() == b"odd\n"
    lines = (session / "messages.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["rewind"]["turn"] == 1  # the log itself was left alone
    records = [json.loads(x) for x in (session / "checkpoints.jsonl").read_text().splitlines()]
    assert [r["turn"] for r in records if "tree" in r] == [1]
    assert all(r["seconds"] >= 0 for r in records if "tree" in r)


@needs_git
def test_a_subdirectory_of_a_work_tree_honours_the_ignore_rules_above_it(agi, project, tmp_path):
    (project / ".gitignore").write_text("build/\nnode_modules/\n*.log\n/only-at-top.txt\n")
    (project / ".git" / "info" / "exclude").write_text("secret.env\n")
    work = project / "sub"
    git_before = dot_git(project)
    session = tmp_path / "s"
    turn(
        agi,
        work,
        session,
        bash(
            "mkdir -p node_modules && echo m > node_modules/m.js && echo l > debug.log"
            " && echo s > secret.env && echo k > keep.txt && echo t > only-at-top.txt"
        ),
    )
    r = rewind(agi, work, session, "--rewind-files", "1")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["removed keep.txt", "removed only-at-top.txt"]
    for kept in ("node_modules/m.js", "debug.log", "secret.env"):
        assert (work / kept).exists(), kept
    assert dot_git(project) == git_before


@needs_git
def test_two_sessions_in_one_directory_keep_separate_checkpoints(agi, project, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    turn(agi, project, one, bash("echo ONE > a.txt"), prompt="session one")
    turn(agi, project, two, bash("echo TWO > b.txt"), prompt="session two")
    listed = rewind(agi, project, two, "--rewind").stdout
    assert "session two" in listed and "session one" not in listed and "a.txt" not in listed
    r = rewind(agi, project, two, "--rewind-files", "1")
    assert r.returncode == 0, r.stderr
    assert (project / "b.txt").read_text() == "beta\n"
    assert (project / "a.txt").read_text() == "ONE\n"  # session one's change came before
    r = rewind(agi, project, one, "--rewind-files", "1")
    assert r.returncode == 0, r.stderr
    assert (project / "a.txt").read_text() == "alpha\n"


@needs_git
def test_two_sessions_at_once_in_one_directory(project, tmp_path, env):
    """Two runs snapshot the same directory at the same time (one shadow repository, an index
    each): each keeps its own turn list and snapshots. What a snapshot cannot tell is who
    changed a file during a turn: each run's turn lists both files (README says so)."""
    procs = []
    with FakeModel(lambda body: _two_step(body)) as server:
        e = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        for name in ("one", "two"):
            argv = [AGI, "-s", str(tmp_path / name), f"make {name}.txt"]
            procs.append(
                subprocess.Popen(
                    argv,
                    cwd=project,
                    env=e,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
    for name in ("one", "two"):
        r = subprocess.run(
            [AGI, "-s", str(tmp_path / name), "--rewind", "--output", "json"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
        )
        (only,) = json.loads(r.stdout)["turns"]
        assert only["prompt"] == f"make {name}.txt" and f"{name}.txt" in only["files"]
    r = subprocess.run(
        [AGI, "-s", str(tmp_path / "one"), "--rewind-files", "1"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert not (project / "one.txt").exists() and (project / "a.txt").read_text() == "alpha\n"


def _two_step(body):
    """Bash `echo > NAME.txt` for the prompt `make NAME.txt`, then an answer."""
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return text("ok")
    name = messages[-1]["content"].split()[-1]
    return bash(f"sleep 0.3; echo x > {name}")


@needs_git
def test_subagents_changes_belong_to_the_parents_turn(agi, project, tmp_path):
    session = tmp_path / "s"
    task = call(
        "Task", description="make a file", prompt="make sub.txt", subagent_type="general-purpose"
    )
    with FakeModel(task, bash("echo sub > sub.txt"), text("made"), text("all done")) as server:
        r = agi("-s", str(session), "delegate", server=server, cwd=project)
    assert r.returncode == 0, r.stderr
    assert (project / "sub.txt").read_text() == "sub\n"
    listed = rewind(agi, project, session, "--rewind").stdout.splitlines()
    assert len(listed) == 2 and "sub.txt" in listed[1]
    assert not list(session.glob("subagents/*/checkpoints.jsonl"))
    r = rewind(agi, project, session, "--rewind-files", "1")
    assert r.returncode == 0, r.stderr
    assert not (project / "sub.txt").exists()


@needs_git
def test_no_checkpoints_flag_and_config(agi, project, tmp_path):
    session = tmp_path / "s"
    turn(agi, project, session, bash("echo X > a.txt"), args=("--no-checkpoints",))
    home = tmp_path / "agi-home"
    assert not (home / "checkpoints").exists()
    (tmp_path / "config.toml").write_text("checkpoints = false\n")
    turn(agi, project, session, bash("echo Y > b.txt"))
    assert not (home / "checkpoints").exists()
    r = rewind(agi, project, session, "--rewind-files", "1")
    assert r.returncode == 2, r.stderr  # nothing can be restored: not a success
    assert (project / "a.txt").read_text() == "X\n"
    assert rewind(agi, project, session, "--rewind-conversation", "2").returncode == 0


def test_without_git_write_and_edit_alone_with_one_warning(agi, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    (work / "b.txt").write_text("beta\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("bash", "sh", "sed", "cat", "echo"):
        found = shutil.which(name)
        if found:
            (bin_dir / name).symlink_to(found)
    session = tmp_path / "s"
    env = {"PATH": str(bin_dir)}
    with FakeModel(
        bash("sed -i s/beta/BETA/ b.txt"),
        call("Write", file_path="a.txt", content="new\n"),
        bash("echo more >> b.txt"),
        text("ok"),
    ) as server:
        r = agi("-s", str(session), "go", server=server, cwd=work, extra_env=env)
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stderr.splitlines() if "git is not installed" in line] == [
        "agi: checkpoints: git is not installed; only the files Write and Edit change are "
        "recorded (not what commands change)"
    ]
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work, extra_env=env)
    assert r.returncode == 0, r.stderr
    assert (work / "a.txt").read_text() == "alpha\n"
    assert (work / "b.txt").read_text() == "BETA\nmore\n"  # a command's change: not tracked
    assert "had no snapshot" in r.stderr


def test_a_huge_tree_records_write_and_edit_only(agi, tmp_path):
    if GIT is None:
        pytest.skip("git is not installed")
    work = tmp_path / "huge"
    for d in range(51):
        folder = work / f"d{d}"
        folder.mkdir(parents=True)
        for f in range(1000):
            (folder / f"{f}").touch()
    (work / "a.txt").write_text("alpha\n")
    (work / "b.txt").write_text("beta\n")
    session = tmp_path / "s"
    r, _ = turn(
        agi,
        work,
        session,
        bash("echo A > a.txt"),
        call("Write", file_path="b.txt", content="B\n"),
        bash("echo AA > a.txt"),
    )
    many = [line for line in r.stderr.splitlines() if "more than 50000 files" in line]
    assert len(many) == 1, r.stderr
    r = rewind(agi, work, session, "--rewind-files", "1")
    assert r.returncode == 0, r.stderr
    assert (work / "b.txt").read_text() == "beta\n"
    assert (work / "a.txt").read_text() == "AA\n"


@needs_git
def test_a_rewind_waits_for_the_session_lock(agi, project, tmp_path, env):
    session = tmp_path / "s"
    log = tmp_path / "log"
    with FakeModel(bash(f"echo start >> {log}; sleep 1.5; echo end >> {log}"), text("ok")) as s:
        e = {**env, "AGI_BASE_URL": s.url, "AGI_MODEL": "fake-model"}
        proc = subprocess.Popen(
            [AGI, "-s", str(session), "go"],
            cwd=project,
            env=e,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while not (log.exists() and "start" in log.read_text()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        r = rewind(agi, project, session, "--rewind-conversation", "1")
        proc.communicate(timeout=30)
    assert r.returncode == 0, r.stderr
    assert log.read_text() == "start\nend\n"  # the rewind ran only after the run let go
    lines = [json.loads(x) for x in (session / "messages.jsonl").read_text().splitlines()]
    assert lines[-2]["content"] == "ok" and "rewind" in lines[-1]


def _many(work: Path, count: int, word: str) -> None:
    for i in range(count):
        (work / f"f{i:04}.txt").write_text(f"{word} {i}\n")


@needs_git
def test_kills_during_snapshots_leave_work_tree_and_session_valid(agi, tmp_path, env):
    work = tmp_path / "w"
    work.mkdir()
    _many(work, 2000, "old")
    session = tmp_path / "s"
    before = tree(work)
    rng = random.Random(18)

    def step(body):  # a tool call, then an answer, whatever the killed runs left
        return text("ok") if body["messages"][-1]["role"] == "tool" else bash("true")

    turn(agi, work, session, prompt="the session exists")
    with FakeModel(step) as server:
        e = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        for n in range(8):
            _many(work, 2000, f"v{n}")  # every file changed: the snapshot hashes them all again
            before = tree(work)
            proc = subprocess.Popen(
                [AGI, "-s", str(session), "go"],
                cwd=work,
                env=e,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(rng.uniform(0.0, 1.5))  # a run takes about 1 s
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            assert tree(work) == before
            assert agi("--show", str(session)).returncode == 0
            assert rewind(agi, work, session, "--rewind").returncode == 0
    _many(work, 2000, "old")
    before = tree(work)
    turn(agi, work, session, bash("sed -i s/old/new/ f0001.txt && rm f0002.txt"))
    r = rewind(agi, work, session, "--rewind-files", "last")
    assert r.returncode == 0, r.stderr
    assert tree(work) == before


@needs_git
def test_kills_during_a_restore_leave_every_file_whole(agi, tmp_path, env):
    work = tmp_path / "w"
    work.mkdir()
    _many(work, 1000, "old")
    session = tmp_path / "s"
    before = tree(work)
    turn(agi, work, session, bash("sed -i s/old/new/ *.txt"))
    rng = random.Random(29)
    for _ in range(8):
        _many(work, 1000, "new")  # changed again (as by someone else): a whole restore to do
        proc = start_agi([AGI, "-s", str(session), "--rewind", "1"], env)  # files and conversation
        time.sleep(rng.uniform(0.2, 1.0))  # the restore: under 1 s
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        for name, data in tree(work).items():
            if name.endswith(".agi-rewind.tmp"):
                continue  # a killed restore's, removed by the next one
            i = int(name[1:5])
            assert data in (f"old {i}\n".encode(), f"new {i}\n".encode()), name
        assert agi("--show", str(session)).returncode == 0
    r = rewind(agi, work, session, "--rewind", "1")
    assert r.returncode == 0, r.stderr
    assert tree(work) == before  # no temporary file left either
    _, server = turn(agi, work, session, prompt="again")
    sent = [m["content"] for m in server.requests[0]["messages"] if m["role"] != "system"]
    assert sent == ["again"]  # the conversation as before turn 1: empty


def test_usage_errors(agi, tmp_path):
    r = agi("--rewind")
    assert r.returncode == 2 and r.stderr.startswith("agi: --rewind works on a session")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "meta.json").write_text("{}")
    r = agi("--rewind", "x", "-s", str(tmp_path / "s"))
    assert r.returncode == 2 and "turn number" in r.stderr
    r = agi("--rewind", "3", "-s", str(tmp_path / "s"))
    assert r.returncode == 2 and "has no turn 3" in r.stderr
    r = agi("--rewind-files", "1", "--rewind-conversation", "1", "-s", str(tmp_path / "s"))
    assert r.returncode == 2
    r = agi("--dry-run", "hello")
    assert r.returncode == 2 and r.stderr.startswith("agi: --dry-run goes with --rewind")


def test_neovim_rewind_parses_agis_output():
    """The Lua side of :AgiRewind reads agi's `--output json` result."""
    nvim = shutil.which("nvim")
    if nvim is None:
        pytest.skip("nvim is not installed")
    root = Path(__file__).resolve().parents[2]
    lua = (
        "local p, n = require('agi.rewind')._changed({restored = {'a.txt', 'a\\nb'},"
        " removed = {'/x/b'}}, '/w');"
        " io.stdout:write(vim.inspect({p, n}))"
    )
    argv = [nvim, "--headless", "--clean", "--cmd", f"set rtp^={root}", "-c", "lua " + lua]
    r = subprocess.run([*argv, "-c", "qa!"], capture_output=True, text=True, timeout=30)
    out = r.stdout + r.stderr
    assert '"/w/a.txt"' in out and '"/x/b"' in out and '"/w/a\\nb"' in out and "3" in out


@needs_git
@pytest.mark.skipif(NVIM is None, reason="needs nvim >= 0.10 and pynvim")
def test_agirewind_restores_the_files_of_the_buffers_last_request(tmp_path, editor):  # noqa: F811
    """:AgiRewind in a real headless Neovim: the request's Bash change undone, buffer reloaded."""
    work = tmp_path / "w"
    work.mkdir()
    notes = work / "notes.txt"
    notes.write_text("one\n")
    script = [call("Bash", command=f"echo two > {notes}"), text("```python\nX = 2\n```")]
    with FakeModel(*script) as server:
        ed = editor(server, setup={"tools": ["Bash"], "warmup": False})
        ed.command(f"cd {work}")
        ed.command(f"edit {notes}")
        notes_buf = int(ed.nvim.current.buffer.number)
        ed.buffer(["X = 1"])
        ed.command("AgiRefactor make it two")
        (event,) = ed.done()
        assert event["status"] == "done", event
        assert notes.read_text() == "two\n"
        ed.lua(f"vim.api.nvim_buf_call({notes_buf}, function() vim.cmd('edit!') end)")
        assert ed.lines(notes_buf) == ["two"]
        ed.command("AgiRewind")
        until(lambda: ed.lines(notes_buf) == ["one"], "the buffer is reloaded", 30)
    assert notes.read_text() == "one\n"
    assert "rewound 1 file" in ed.messages()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
