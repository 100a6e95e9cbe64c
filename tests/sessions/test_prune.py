"""`agi --prune AGE` and config `keep_sessions` (docs: volume), driven through the real
executable: sessions made by real runs against the scripted server, aged by setting their
files' times back, then pruned; the tree under AGI_HOME is listed afterwards."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from fakeserver import FakeModel, call, text

DAYS = 86400


def make_session(agi, server, *args: str, cwd: Path | None = None) -> Path:
    r = agi("--output", "json", *args, server=server, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return Path(json.loads(r.stdout)["session"])


def age(path: Path, days: float) -> None:
    """Set the times of `path` and everything under it `days` back."""
    then = time.time() - days * DAYS
    for p in [path, *path.rglob("*")]:
        os.utime(p, (then, then), follow_symlinks=False)


def index_paths(home: Path) -> list[str]:
    lines = (home / "index.jsonl").read_text().splitlines()
    return [json.loads(line)["path"] for line in lines]


@pytest.fixture
def home(env) -> Path:
    return Path(env["AGI_HOME"])


def test_old_sessions_go_with_their_index_entries(agi, home) -> None:
    with FakeModel(text("ok")) as server:
        old = [make_session(agi, server, f"old {i}") for i in range(2)]
        new = make_session(agi, server, "recent")
    for path in old:
        age(path, 40)
    listed = agi("--prune", "30d", "--dry-run")
    assert listed.returncode == 0, listed.stderr
    assert sorted(listed.stdout.splitlines()) == sorted(str(p) for p in old)
    assert all(p.exists() for p in old)  # a dry run removes nothing
    assert len(index_paths(home)) == 3
    done = agi("--prune", "30d")
    assert done.returncode == 0 and done.stderr == ""
    assert sorted(done.stdout.splitlines()) == sorted(str(p) for p in old)
    assert not any(p.exists() for p in old) and new.exists()
    assert index_paths(home) == [str(new.resolve())]
    with FakeModel(text("continued")) as server:
        again = agi("-c", "--output", "json", "and then?", server=server)
    assert json.loads(again.stdout)["session"] == str(new)
    assert agi("--prune", "30d").stdout == ""  # nothing left that old


def test_ages_in_hours_and_minutes(agi, home) -> None:
    with FakeModel(text("ok")) as server:
        session = make_session(agi, server, "hi")
    age(session, 2 / 24)  # two hours
    assert agi("--prune", "3h").stdout == ""
    assert agi("--prune", "90m").stdout == f"{session}\n"
    assert not session.exists()


def test_a_locked_session_is_kept(agi, home) -> None:
    with FakeModel(text("ok")) as server:
        session = make_session(agi, server, "busy")
    age(session, 40)
    fd = os.open(session / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a run holds it
        r = agi("--prune", "1d")
        assert r.returncode == 0 and r.stdout == ""
        assert r.stderr == f"agi: kept {session}: a run holds it\n"
        assert (session / "meta.json").exists()
    finally:
        os.close(fd)
    assert agi("--prune", "1d").stdout == f"{session}\n"


def test_nothing_outside_agi_home_is_touched(agi, home, tmp_path) -> None:
    """A link under sessions/ to an old session elsewhere, and a link inside a session to a
    file elsewhere: the session goes, what the links point to stays."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "meta.json").write_text('{"agi_session": 1}\n')
    (outside / "precious.txt").write_text("keep me\n")
    with FakeModel(text("ok")) as server:
        session = make_session(agi, server, "hi")
    (home / "sessions" / "linked").symlink_to(outside)
    (session / "link-out").symlink_to(outside / "precious.txt")
    age(outside, 40)
    age(session, 40)
    r = agi("--prune", "1d")
    assert r.stdout == f"{session}\n", r.stderr
    assert (outside / "precious.txt").read_text() == "keep me\n"
    assert (outside / "meta.json").exists() and (home / "sessions" / "linked").is_symlink()


def test_checkpoint_repositories_go_with_the_last_session_using_them(agi, home, tmp_path):
    """Two sessions write in one git working directory (one shadow repository, an index
    each): pruning one leaves the repository to the other; pruning both removes it."""
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    script = lambda name: (call("Write", file_path=str(work / name), content="x\n"), text("ok"))  # noqa: E731
    with FakeModel(*script("a.txt")) as server:
        first = make_session(agi, server, "write a", cwd=work)
    with FakeModel(*script("b.txt")) as server:
        second = make_session(agi, server, "write b", cwd=work)
    repos = [p for p in (home / "checkpoints").iterdir() if p.is_dir() and p.name != "files"]
    assert len(repos) == 1
    (repo,) = repos
    assert len(list(repo.glob("index-*"))) == 2
    age(first, 40)
    assert agi("--prune", "30d").stdout == f"{first}\n"
    assert repo.exists() and len(list(repo.glob("index-*"))) == 1
    age(second, 40)
    assert agi("--prune", "30d").stdout.splitlines() == [str(second), str(repo)]
    assert not repo.exists()
    assert (work / "a.txt").exists() and (work / "b.txt").exists()  # the work is the user's


def test_orphaned_repositories_go_too(agi, home, tmp_path) -> None:
    """A session deleted by hand leaves its checkpoint repository: either prune removes it."""
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    script = (call("Write", file_path=str(work / "a.txt"), content="x\n"), text("ok"))
    with FakeModel(*script) as server:
        session = make_session(agi, server, "write", cwd=work)
    (repo,) = [p for p in (home / "checkpoints").iterdir() if p.is_dir() and p.name != "files"]
    subprocess.run(["rm", "-rf", str(session)], check=True)
    assert agi("--prune", "30d", "--dry-run").stdout == f"{repo}\n"
    assert repo.exists()
    assert agi("--prune", "30d").stdout == f"{repo}\n"
    assert not repo.exists()


@pytest.mark.parametrize("value", ["30", "abc", "-3d", "1y", ""])
def test_a_bad_age_is_a_usage_error(agi, home, value) -> None:
    r = agi(f"--prune={value}")
    assert r.returncode == 2
    assert r.stderr.startswith("agi: --prune: bad age") and r.stderr.count("\n") == 1
    assert r.stdout == ""


def test_a_bad_keep_sessions_is_a_usage_error(agi, env) -> None:
    Path(env["AGI_CONFIG"]).write_text('keep_sessions = "soon"\n')
    with FakeModel(text("never")) as server:
        r = agi("hi", server=server)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "keep_sessions" in r.stderr and "soon" in r.stderr
    assert server.requests == []


def test_keep_sessions_prunes_when_a_run_ends_once_a_day(agi, env, home) -> None:
    with FakeModel(text("ok")) as server:
        first_old = make_session(agi, server, "old one")
        age(first_old, 40)
        Path(env["AGI_CONFIG"]).write_text('keep_sessions = "30d"\n')
        ephemeral = agi("--ephemeral", "hi", server=server)  # writes nothing, prunes nothing
        assert ephemeral.returncode == 0 and first_old.exists()
        assert not (home / "pruned").exists()
        kept = make_session(agi, server, "a run")
        assert not first_old.exists() and kept.exists()
        assert (home / "pruned").exists()
        second_old = make_session(agi, server, "another")
        age(second_old, 40)
        make_session(agi, server, "the same day")
        assert second_old.exists()  # pruned already today
        age(home / "pruned", 2)
        make_session(agi, server, "a day later")
    assert not second_old.exists() and kept.exists()


def test_runs_recording_while_a_prune_rewrites_the_index_lose_nothing(agi, env, home) -> None:
    """Old sessions are pruned while new runs append their index lines: every new run is still
    in the index afterwards (the index is rewritten under its lock)."""
    import threading

    from conftest import AGI

    with FakeModel(text("ok")) as server:
        old = [make_session(agi, server, f"old {i}") for i in range(6)]
        for path in old:
            age(path, 40)
        e = dict(env, AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        runs = [
            subprocess.Popen(
                [AGI, "--output", "json", f"new {i}"],
                env=e,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(6)
        ]
        pruned: list[str] = []
        pruner = threading.Thread(target=lambda: pruned.append(agi("--prune", "30d").stdout))
        pruner.start()
        outputs = [run.communicate(timeout=120) for run in runs]
        pruner.join(120)
    new = [json.loads(out)["session"] for out, _ in outputs]
    assert all(run.returncode == 0 for run in runs), [err for _, err in outputs]
    assert not any(p.exists() for p in old)
    listed = set(index_paths(home))
    assert {str(Path(p).resolve()) for p in new} <= listed
    assert not listed & {str(p.resolve()) for p in old}


def blob_of(home: Path, content: str) -> Path:
    return home / "checkpoints" / "files" / hashlib.sha256(content.encode()).hexdigest()


def test_kept_file_contents_go_with_the_last_session_naming_them(agi, home, tmp_path) -> None:
    """Write keeps what it overwrites in checkpoints/files/ by digest: a content two sessions
    kept stays while one of them exists (and while it is locked), one only a pruned session
    named goes with it."""
    work = tmp_path / "work"
    work.mkdir()
    for name, content in (("a.txt", "same\n"), ("b.txt", "same\n"), ("own.txt", "mine\n")):
        (work / name).write_text(content)
    write = lambda name: call("Write", file_path=str(work / name), content="new\n")  # noqa: E731
    with FakeModel(write("a.txt"), write("own.txt"), text("ok")) as server:
        first = make_session(agi, server, "write a", cwd=work)
    with FakeModel(write("b.txt"), text("ok")) as server:
        second = make_session(agi, server, "write b", cwd=work)
    shared, own = blob_of(home, "same\n"), blob_of(home, "mine\n")
    assert shared.is_file() and own.is_file()
    age(first, 40)
    age(home / "checkpoints" / "files", 40)
    assert agi("--prune", "30d", "--dry-run").stdout.splitlines() == [str(first), str(own)]
    assert own.exists()
    assert agi("--prune", "30d").stdout.splitlines() == [str(first), str(own)]
    assert shared.exists() and not own.exists()
    age(second, 40)
    fd = os.open(second / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a run holds it
        assert agi("--prune", "30d").stdout == ""
        assert shared.exists()
    finally:
        os.close(fd)
    gone = agi("--prune", "30d").stdout.splitlines()  # with the shadow repository between
    assert (gone[0], gone[-1]) == (str(second), str(shared))
    assert not shared.exists() and (work / "a.txt").read_text() == "new\n"


def test_orphaned_file_contents_go_but_nothing_through_a_link(agi, home, tmp_path) -> None:
    """Contents no session names go once they are an hour old; a link in checkpoints/files/
    is not followed, nor is checkpoints/files when it is a link itself."""
    folder = home / "checkpoints" / "files"
    folder.mkdir(parents=True)
    old, young = folder / ("a" * 64), folder / ("b" * 64)
    old.write_bytes(b"x")
    young.write_bytes(b"y")
    outside = tmp_path / "precious"
    outside.write_text("keep me\n")
    (folder / ("c" * 64)).symlink_to(outside)
    age(old, 1)
    os.utime(folder / ("c" * 64), (0, 0), follow_symlinks=False)
    assert agi("--prune", "30d").stdout == f"{old}\n"
    assert young.exists() and outside.read_text() == "keep me\n"
    (folder / ("c" * 64)).unlink()
    elsewhere = tmp_path / "files-elsewhere"
    folder.rename(elsewhere)
    folder.symlink_to(elsewhere)
    age(elsewhere / ("b" * 64), 1)
    assert agi("--prune", "30d").stdout == ""
    assert (elsewhere / ("b" * 64)).exists()
