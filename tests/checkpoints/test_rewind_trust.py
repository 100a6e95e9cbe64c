"""Checkpoint records a model cannot turn against the user (docs: checkpoints, security): forged
or malformed records in a session the model can write, object ids that would be git options,
Write and Edit on the session's own files, ignore rules a turn wrote, files holding the API key,
large and sparse files. Each driven through the real executable against the scripted server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_rewind_edges import _all_bytes, state

from conftest import AGI
from fakeserver import FakeModel, call, text

KEY = "sk-trust-0123456789abcdefSECRETKEYvalue"


def turn(agi, work: Path, session: Path, *steps, extra_env=None):
    with FakeModel(*steps, text("ok")) as server:
        r = agi("-s", str(session), "do it", server=server, cwd=work, extra_env=extra_env)
    assert r.returncode == 0, r.stderr
    return r, server


def bash(command: str):
    return call("Bash", command=command)


def refused(r: subprocess.CompletedProcess[str], session: Path) -> None:
    """Exit 2 with one `agi:` line naming the session's records, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("agi: "), r.stderr
    assert str(session / "checkpoints.jsonl") in lines[0] or "checkpoints.jsonl" in lines[0]
    assert "Traceback" not in r.stderr


def tool_results(server: FakeModel) -> list[str]:
    """The tool results of this run's turn (after its prompt)."""
    last = server.requests[-1]["messages"]
    start = max(i for i, m in enumerate(last) if m.get("role") == "user")
    return [m["content"] for m in last[start:] if m.get("role") == "tool"]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    w = tmp_path / "project"
    w.mkdir()
    (w / "a.txt").write_text("alpha\n")
    return w


def test_forged_records_in_a_session_inside_the_project_are_refused(agi, work, tmp_path):
    """`agi -s .sess` inside the project: a model that may only edit the project appends
    records that would have the next rewind delete a file outside it; the rewind refuses the
    records, names the session and touches nothing."""
    outside = tmp_path / "outside" / "keep"
    outside.mkdir(parents=True)
    victim = outside / "v.txt"
    victim.write_text("precious\n")
    session = work / ".sess"
    forged = [
        {"turn": 2, "time": 1, "prompt": "forged", "start": 0, "cwd": str(outside)},
        {"turn": 2, "prior": str(victim), "blob": None},
        {"turn": 2, "untracked": "no git"},
    ]
    (tmp_path / "forged.jsonl").write_text("".join(json.dumps(f) + "\n" for f in forged))
    append = f"cat {tmp_path / 'forged.jsonl'} >> .sess/checkpoints.jsonl"
    turn(agi, work, session, bash(f"echo A > a.txt; {append}"))
    for args in (("--rewind", "last"), ("--rewind",), ("--rewind", "1", "--dry-run")):
        r = agi("-s", str(session), *args, cwd=work)
        refused(r, session)
    assert victim.read_text() == "precious\n"
    assert (work / "a.txt").read_text() == "A\n"  # nothing restored from records in doubt

    # a genuine record altered in place (its directory changed) fails the check too
    lines = (session / "checkpoints.jsonl").read_text().splitlines(keepends=True)
    genuine = [x for x in lines if x.rstrip("\n") not in {json.dumps(f) for f in forged}]
    assert len(genuine) == len(lines) - len(forged)
    altered = genuine[0].replace(os.path.realpath(work), os.path.realpath(outside))
    assert altered != genuine[0]
    (session / "checkpoints.jsonl").write_text("".join([altered, *genuine[1:]]))
    refused(agi("-s", str(session), "--rewind", "1", cwd=work), session)
    assert victim.read_text() == "precious\n"

    # the genuine records alone: the rewind works
    (session / "checkpoints.jsonl").write_text("".join(genuine))
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert (work / "a.txt").read_text() == "alpha\n"


def test_object_ids_that_are_options_truncate_nothing(agi, work, tmp_path):
    """Tree ids starting with `--` (`--output=FILE` to git diff-tree): refused whether the
    records are unsigned or signed with agi's own key (a forger who read it)."""
    from agi.checkpoints.snapshots import append_record

    session = tmp_path / "s"
    turn(agi, work, session, bash("echo A > a.txt"))
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    bad = f"--output={victim}"
    forged = [
        {"turn": 2, "time": 1, "prompt": "p", "start": 0, "cwd": str(work)},
        {"turn": 2, "tree": bad, "cwd": str(work), "files": 1},
        {"turn": 2, "end": bad},
    ]
    records = session / "checkpoints.jsonl"
    genuine = records.read_bytes()
    with records.open("a") as f:
        f.write("".join(json.dumps(x) + "\n" for x in forged))
    for args in (("--rewind",), ("--rewind", "2", "--dry-run"), ("--rewind", "2")):
        refused(agi("-s", str(session), *args, cwd=work), session)
        assert victim.read_text() == "precious\n"
    records.write_bytes(genuine)
    for record in forged:
        append_record(session, record, tmp_path / "agi-home")
    for args in (("--rewind",), ("--rewind", "2", "--dry-run"), ("--rewind-files", "2")):
        refused(agi("-s", str(session), *args, cwd=work), session)
        assert victim.read_text() == "precious\n"


def test_listing_and_dry_run_write_nothing_anywhere(agi, work, tmp_path):
    session = tmp_path / "s"
    turn(agi, work, session, bash("echo A > a.txt; echo new > new.txt; rm -f gone.txt"))
    (work / "a.txt").write_text("changed by someone else\n")
    everything = lambda: (state(tmp_path / "agi-home"), state(session), state(work))  # noqa: E731
    before = everything()
    r = agi("-s", str(session), "--rewind", cwd=work)
    assert r.returncode == 0, r.stderr
    r = agi("-s", str(session), "--rewind", "1", "--dry-run", cwd=work)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [
        "would remove new.txt",
        "would restore a.txt",
        "would rewind the conversation to before turn 1",
    ]
    assert everything() == before


def test_write_and_edit_refuse_the_running_sessions_files(agi, work, tmp_path):
    session = work / ".sess"
    turn(agi, work, session, bash("echo A > a.txt"))
    home = tmp_path / "agi-home"
    shadow = next(p for p in (home / "checkpoints").iterdir() if (p / "HEAD").exists())
    targets = {
        "records": session / "checkpoints.jsonl",
        "meta": session / "meta.json",
        "shadow": shadow / "HEAD",
        "new": session / "new.txt",
    }
    before = {name: p.read_bytes() if p.exists() else None for name, p in targets.items()}
    r, server = turn(
        agi,
        work,
        session,
        call("Write", file_path=".sess/checkpoints.jsonl", content="{}\n"),
        call("Edit", file_path=str(targets["meta"]), old_string="{", new_string="[["),
        call("Write", file_path=str(targets["shadow"]), content="ref: x\n"),
        call("Write", file_path=".sess/new.txt", content="x\n"),
        call("Write", file_path="fine.txt", content="fine\n"),
    )
    results = [json.dumps(x) for x in tool_results(server)]
    assert len(results) == 5, results
    for result in results[:4]:
        assert result.startswith('"Error: ') and "session" in result, result
    assert "Created" in results[4]
    assert not targets["new"].exists() and targets["shadow"].read_bytes() == before["shadow"]
    assert b"[[" not in targets["meta"].read_bytes()  # the run itself updates meta.json
    assert targets["records"].read_bytes().startswith(before["records"])
    # the records only grew by agi's own lines, and still check
    r = agi("-s", str(session), "--rewind", cwd=work)
    assert r.returncode == 0, r.stderr


def test_a_gitignore_written_by_the_turn_hides_nothing_from_the_rewind(agi, work, tmp_path):
    session = tmp_path / "s"
    (work / "old.log").write_text("kept\n")
    (work / ".gitignore").write_text("*.tmp\n")
    (work / "scratch.tmp").write_text("ignored before\n")
    turn(
        agi,
        work,
        session,
        bash(
            "echo made > made.txt; mkdir -p gen/deep; echo o > gen/deep/out.o; echo l > new.log;"
            " echo 'scratch changed' > scratch.tmp;"
            " printf 'made.txt\\ngen/\\n*.log\\n' >> .gitignore; mkdir hid;"
            " printf '*\\n' > hid/.gitignore; echo h > hid/h.txt"
        ),
    )
    r = agi("-s", str(session), "--rewind", "1", "--dry-run", cwd=work)
    assert r.returncode == 0, r.stderr
    wanted = {"made.txt", "gen/deep/out.o", "new.log", "hid/.gitignore", "hid/h.txt"}
    assert {x.split()[-1] for x in r.stdout.splitlines() if x.startswith("would remove")} == wanted
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in work.iterdir())
    assert names == [".gitignore", "a.txt", "old.log", "scratch.tmp"]
    assert (work / ".gitignore").read_text() == "*.tmp\n"
    assert (work / "old.log").read_text() == "kept\n"
    # ignored at the checkpoint and changed by a command: not recorded, left, and said so
    assert (work / "scratch.tmp").read_text() == "scratch changed\n"


def test_files_the_rewind_leaves_in_place_are_named(agi, work, tmp_path):
    session = tmp_path / "s"
    (work / "big.bin").write_bytes(b"\0" * (6 << 20))
    turn(agi, work, session, bash("echo A > a.txt; echo tail >> big.bin"))
    r = agi("-s", str(session), "--rewind-files", "1", "--dry-run", "--output", "json", cwd=work)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["left"] == [os.path.join(os.path.realpath(work), "big.bin")]
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "restored a.txt\n"
    named = [x for x in r.stderr.splitlines() if "big.bin" in x]
    assert len(named) == 1 and named[0].startswith("agi: ") and "5 MB" in named[0], r.stderr
    assert (work / "big.bin").stat().st_size == (6 << 20) + 5


def test_a_file_holding_the_key_stays_out_of_the_checkpoints(agi, work, tmp_path):
    """A key in the working tree (`.env`) and in a file Edit changes: neither is kept by a
    checkpoint, so once the files are gone no byte of agi's state holds the key; the rewind
    leaves the edited one as it is and says so."""
    session = tmp_path / "s"
    (work / ".env").write_text(f"OPENAI_API_KEY={KEY}\n")
    (work / "notes.txt").write_text(f"hello {KEY}\n")
    extra = {"AGI_API_KEY": KEY}
    turn(
        agi,
        work,
        session,
        bash("echo A > a.txt"),
        call("Edit", file_path="notes.txt", old_string="hello", new_string="bye"),
        extra_env=extra,
    )
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work, extra_env=extra)
    assert r.returncode == 0, r.stderr
    assert (work / "a.txt").read_text() == "alpha\n"
    assert (work / "notes.txt").read_text() == f"bye {KEY}\n"
    named = [x for x in r.stderr.splitlines() if "notes.txt" in x]
    assert len(named) == 1 and "key" in named[0], r.stderr
    (work / ".env").unlink()
    (work / "notes.txt").unlink()
    everything = _all_bytes(tmp_path / "agi-home") + _all_bytes(session)
    for part in (KEY, KEY[:16], KEY[-16:]):
        assert part.encode() not in everything, part


def _limited(env: dict[str, str], cwd: Path, *args: str, server: FakeModel) -> tuple[int, str, int]:
    """agi under a wrapper that reports the peak memory (kB) of agi and its children."""
    probe = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL, capture_output=True)\n"
        "sys.stderr.buffer.write(r.stderr)\n"
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    e = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
    done = subprocess.run(
        [sys.executable, "-c", probe, AGI, *args],
        capture_output=True,
        text=True,
        env=e,
        cwd=cwd,
        timeout=120,
    )
    code, peak = done.stdout.split()
    return int(code), done.stderr, int(peak)


def test_write_and_edit_of_a_sparse_file_read_only_what_they_need(agi, env, work, tmp_path):
    """A 1 GB sparse file: Edit refuses it unread, Write replaces it without the checkpoint
    reading it (its prior content is over 5 MB: not kept), and the rewind says so."""
    session = tmp_path / "s"
    sparse = work / "sparse.img"
    with sparse.open("wb") as f:
        f.truncate(1 << 30)
    (work / "six.bin").write_bytes(b"6" * (6 << 20))
    with FakeModel(
        call("Edit", file_path="sparse.img", old_string="x", new_string="y"),
        call("Write", file_path="sparse.img", content="small now\n"),
        call("Write", file_path="six.bin", content="six\n"),
        text("ok"),
    ) as server:
        code, err, peak = _limited(env, work, "-s", str(session), "do it", server=server)
    assert code == 0, err
    noted = [x for x in err.splitlines() if "checkpoints:" in x]
    assert all("over 5 MB are not recorded" in x for x in noted), err
    assert peak < 400 * 1024, peak  # kB: neither the tool nor the checkpoint read 1 GB
    results = tool_results(server)
    assert results[0].startswith("Error: ") and "sparse.img" in results[0], results
    assert sparse.read_text() == "small now\n"
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert sparse.read_text() == "small now\n" and (work / "six.bin").read_text() == "six\n"
    for name in ("sparse.img", "six.bin"):
        named = [x for x in r.stderr.splitlines() if name in x]
        assert len(named) == 1 and "5 MB" in named[0], r.stderr


def test_malformed_records_are_one_line_errors(agi, work, tmp_path):
    from agi.checkpoints.snapshots import append_record

    session = tmp_path / "s"
    turn(agi, work, session, bash("echo A > a.txt"))
    records = session / "checkpoints.jsonl"
    genuine = records.read_bytes()
    bad_lines = [
        "[" * 100_000 + "]" * 100_000,
        '{"turn": 1, "tree": ' + "[" * 100_000,
        "{not json",
        json.dumps({"turn": 1, "prompt": "x", "start": "zz", "time": "noon"}),
        json.dumps({"turn": 1, "prior": "/etc/x", "blob": 7}),
        json.dumps({"rewind": 1, "time": "x", "before": [1], "after": "y"}),
    ]
    for line in bad_lines:
        records.write_bytes(genuine + line.encode() + b"\n")
        for args in (("--rewind",), ("--rewind", "1", "--dry-run"), ("--rewind", "1")):
            refused(agi("-s", str(session), *args, cwd=work), session)
    signed = [
        {"turn": 1, "prompt": 5, "start": "zz", "time": "noon"},
        {"turn": 1, "prior": "relative/x", "blob": 7, "mode": []},
        {"turn": 1, "tree": "0" * 39, "cwd": 3, "skipped": 5},
        {"rewind": 1, "time": "x", "kind": 3, "before": [1], "after": "y", "files": 4},
        {"turn": 2, "prompt": "x", "time": float("inf"), "start": 0, "cwd": str(work)},
        {"rewind": 1, "time": 1e300, "kind": "files", "files": []},
    ]
    for record in signed:
        records.write_bytes(genuine)
        append_record(session, record, tmp_path / "agi-home")
        for args in (("--rewind",), ("--rewind", "1", "--dry-run"), ("--rewind", "1")):
            refused(agi("-s", str(session), *args, cwd=work), session)
    assert (work / "a.txt").read_text() == "A\n"
    # a line torn by a kill (no newline yet) is not an error: the run in progress is writing it
    records.write_bytes(genuine + b'{"turn": 2, "prom')
    r = agi("-s", str(session), "--rewind", cwd=work)
    assert r.returncode == 0, r.stderr
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert (work / "a.txt").read_text() == "alpha\n"
    r = agi("-s", str(session), "--rewind", cwd=work)  # the repaired torn line checks too
    assert r.returncode == 0, r.stderr


def test_the_records_key_is_private_and_outside_every_session(agi, work, tmp_path):
    session = work / ".sess"
    turn(agi, work, session, bash("echo A > a.txt"))
    home = tmp_path / "agi-home"
    keys = [p for p in home.rglob("*") if p.is_file() and "key" in p.name]
    assert len(keys) == 1, keys
    assert oct(keys[0].stat().st_mode & 0o777) == "0o600"
    assert session not in keys[0].parents
    assert os.path.getsize(keys[0]) >= 32


def test_a_working_directory_swapped_for_a_link_is_not_restored_through(agi, work, tmp_path):
    """The directory a checkpoint recorded is replaced, after the turn, by a link to another
    place holding the same names: the rewind writes nothing there and says why (exit 1)."""
    session = tmp_path / "s"
    turn(agi, work, session, bash("echo A > a.txt; echo new > new.txt"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a.txt").write_text("elsewhere\n")
    (elsewhere / "new.txt").write_text("elsewhere new\n")
    work.rename(tmp_path / "moved")
    work.symlink_to(elsewhere)
    before = state(elsewhere)
    for args in (("--rewind-files", "1", "--dry-run"), ("--rewind-files", "1")):
        r = agi("-s", str(session), *args, cwd=tmp_path)
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert "no longer the directory" in r.stderr and "Traceback" not in r.stderr
        assert state(elsewhere) == before


def test_files_ignored_at_the_checkpoint_stay_when_a_turn_drops_the_rule(agi, work, tmp_path):
    """The turn deletes the .gitignore that hid build/: the files that were there before are
    not taken for the turn's and stay; the .gitignore comes back."""
    session = tmp_path / "s"
    (work / ".gitignore").write_text("build/\n")
    (work / "build").mkdir()
    (work / "build" / "out.txt").write_text("built before\n")
    turn(agi, work, session, bash("rm .gitignore; echo A > a.txt"))
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["restored .gitignore", "restored a.txt"]
    assert (work / "build" / "out.txt").read_text() == "built before\n"
    assert (work / ".gitignore").read_text() == "build/\n"


def test_no_tool_reads_or_writes_the_records_key(agi, work, tmp_path):
    """Read, Write and Edit refuse the key; in a sandbox a command reads nothing of it (an
    AGI_HOME outside /tmp, which the sandbox would hide anyway)."""
    import shutil
    import uuid

    home = Path.home() / f".agi-h35-test-{uuid.uuid4().hex[:8]}"
    try:
        extra = {"AGI_HOME": str(home)}
        session = tmp_path / "s"
        turn(agi, work, session, bash("echo A > a.txt"), extra_env=extra)
        key = home / "checkpoint-records.key"
        secret = key.read_bytes()
        assert len(secret) >= 32
        sandboxed = ("--sandbox", "workspace")
        with FakeModel(
            call("Read", file_path=str(key)),
            call("Write", file_path=str(key), content="x"),
            call("Edit", file_path=str(key), old_string="a", new_string="b"),
            bash(f"od -An -tx1 {key} | tr -d ' \\n'"),
            text("ok"),
        ) as server:
            r = agi("-s", str(session), *sandboxed, "go", server=server, cwd=work, extra_env=extra)
        if r.returncode != 0 and "sandbox" in r.stderr:
            pytest.skip(f"no working sandbox here: {r.stderr.strip()}")
        assert r.returncode == 0, r.stderr
        results = tool_results(server)
        for result in results[:3]:
            assert result.startswith("Error: ") and "key" in result, result
        assert secret.hex() not in results[3], results[3]  # empty, or "Permission denied"
        assert key.read_bytes() == secret
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_records_of_another_session_do_not_check_here_but_a_forks_do(agi, work, tmp_path):
    """A model that reads another session's records (a project elsewhere) and copies them into
    a session it can write: refused, the other project untouched. `--fork` signs its copy for
    the new session, whose rewind works."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.txt").write_text("other before\n")
    other_session = tmp_path / "other-session"
    turn(agi, other, other_session, bash("echo changed > o.txt"))
    session = work / ".sess"
    copy = f"cp {other_session / 'checkpoints.jsonl'} .sess/checkpoints.jsonl"
    turn(agi, work, session, bash(f"echo A > a.txt; {copy}"))
    refused(agi("-s", str(session), "--rewind-files", "1", cwd=work), session)
    assert (other / "o.txt").read_text() == "changed\n"

    forked = tmp_path / "forked"
    with FakeModel(text("ok")) as server:
        r = agi("--fork", str(other_session), "-s", str(forked), "hi", server=server, cwd=other)
    assert r.returncode == 0, r.stderr
    r = agi("-s", str(forked), "--rewind-files", "1", cwd=other)
    assert r.returncode == 0, r.stderr
    assert (other / "o.txt").read_text() == "other before\n"


def test_a_rule_the_turn_adds_to_the_projects_own_excludes_hides_nothing(agi, work, tmp_path):
    """`.git/info/exclude` is the project's too: a rule added there by the turn does not keep
    the file the turn made from the rewind."""
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    session = tmp_path / "s"
    turn(agi, work, session, bash("echo made > made.txt; echo made.txt >> .git/info/exclude"))
    r = agi("-s", str(session), "--rewind-files", "1", cwd=work)
    assert r.returncode == 0, r.stderr
    assert "removed made.txt" in r.stdout.splitlines()
    assert not (work / "made.txt").exists()
