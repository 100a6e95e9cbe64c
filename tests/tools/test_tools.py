"""The native tools as the model meets them: real executable, real Bash, real files.

Each test scripts the fake model to call a tool, then asserts on the `role: tool` message the
model received in the next request, and on the filesystem or the process table.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from conftest import AGI
from fakeserver import FakeModel, call, calls, text

HARNESS = Path(__file__).resolve().parents[2] / "agi" / "prompts" / "harness.md"


# --- helpers ---------------------------------------------------------------------------------


def results(server: FakeModel, request: int) -> list[str]:
    """The contents of the tool results the model had seen by request number `request`."""
    return [m["content"] for m in server.requests[request]["messages"] if m["role"] == "tool"]


def last_result(server: FakeModel, request: int = 1) -> str:
    return results(server, request)[-1]


def run_tool(agi, name: str, cwd: Path | None = None, **args: Any) -> tuple[str, Any]:
    """One tool call, then a final answer; returns (what the model got, the finished run)."""
    with FakeModel(call(name, **args), text("done")) as server:
        r = agi("go", server=server, cwd=cwd)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    assert len(server.requests) == 2
    return last_result(server), r


def raw_call(name: str, arguments: str) -> dict[str, Any]:
    """A streamed tool call whose arguments are sent as the given text, valid JSON or not."""

    def frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": "chatcmpl-raw",
            "object": "chat.completion.chunk",
            "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    fn = {"name": name, "arguments": ""}
    first = {"index": 0, "id": "call_raw", "type": "function", "function": fn}
    frames = [
        frame({"role": "assistant", "content": None}),
        frame({"tool_calls": [first]}),
        frame({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}),
        frame({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]
    return {"kind": "sse", "frames": frames, "delay": 0.0}


def harness_text(name: str) -> str:
    """A section of agi/prompts/harness.md, as the harness sends it."""
    sections = re.split(r"^## ", HARNESS.read_text(), flags=re.M)
    for section in sections[1:]:
        title, _, body = section.partition("\n")
        if title.strip() == name:
            return body.strip()
    raise KeyError(name)


def pids_matching(pattern: str) -> list[int]:
    r = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()]


def reap(pattern: str) -> None:
    """Kill, by pid, the processes a test started that carry its unique marker."""
    for pid in pids_matching(pattern):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def unique_seconds(base: int) -> str:
    """A sleep duration that is also a unique marker in the process table (e.g. 30.4821937)."""
    return f"{base}.{uuid.uuid4().int % 10**7:07d}"


# --- Bash ------------------------------------------------------------------------------------


def test_bash_interleaves_stdout_and_stderr_in_order(agi):
    got, _ = run_tool(agi, "Bash", command="echo 1; echo 2 >&2; echo 3; echo 4 >&2")
    assert got == "1\n2\n3\n4"


def test_bash_nonzero_exit_adds_a_final_exit_code_line(agi):
    got, _ = run_tool(agi, "Bash", command="echo hi; echo oops >&2; exit 3")
    assert got.splitlines() == ["hi", "oops", "exit code 3"]
    got, _ = run_tool(agi, "Bash", command="false")
    assert got.splitlines()[-1] == "exit code 1"


def test_bash_zero_exit_has_no_exit_code_line(agi):
    got, _ = run_tool(agi, "Bash", command="echo fine")
    assert got == "fine"


def test_bash_killed_by_a_signal_reports_it_as_a_shell_would(agi):
    # bash reports a process killed by SIGKILL as 128 + 9 = 137; Python's -9 means nothing
    # to a model that knows shells.
    got, _ = run_tool(agi, "Bash", command="echo going; kill -9 $$")
    assert got.splitlines()[0] == "going"
    last = got.splitlines()[-1]
    assert last == "exit code 137" or "signal" in last.lower() or "SIGKILL" in last, got


def test_bash_empty_output(agi):
    got, _ = run_tool(agi, "Bash", command="true")
    assert "exit code" not in got
    assert got.strip() in ("", "(no output)")


def test_bash_timeout_kills_the_whole_process_group(agi):
    secs = unique_seconds(120)
    try:
        with FakeModel(
            call("Bash", command=f"echo before; sleep {secs} & sleep {secs}", timeout=500),
            text("done"),
        ) as server:
            r = agi("go", server=server, timeout=30)  # a hang guard, far short of the sleep
        assert r.returncode == 0, r.stderr
        assert r.stdout == "done\n"
        got = last_result(server)
        assert got.startswith("before\n")  # what it printed before the timeout is kept
        assert "timed out" in got.lower()
        assert pids_matching(f"sleep {secs}") == []
    finally:
        reap(f"sleep {secs}")


def test_bash_huge_output_is_truncated_in_the_middle(agi):
    with FakeModel(call("Bash", command="seq 1 2000000"), text("done")) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    got = last_result(server)
    lines = got.splitlines()
    assert lines[0] == "1"
    assert lines[-1] == "2000000"
    assert len(got) < 100_000  # the whole output is ~15 MB
    assert re.search(r"omitted|truncated", got, re.I)
    assert "1000000\n" not in got  # the middle is gone


def test_bash_waits_for_a_command_that_closes_its_output_early(agi, tmp_path):
    # End of output is not the end of the command: it must run to its own exit (within the
    # timeout), not be killed, and its exit status is its own.
    got, _ = run_tool(agi, "Bash", command="echo hi; exec >&- 2>&-; sleep 0.3; touch finished")
    assert got == "hi"
    assert (tmp_path / "finished").exists()


def test_bash_background_child_holding_the_pipe_does_not_hang(agi):
    secs = unique_seconds(120)
    try:
        with FakeModel(
            call("Bash", command=f"sleep {secs} & echo started"), text("done")
        ) as server:
            r = agi("go", server=server, timeout=30)  # a hang guard, far short of the sleep
        assert r.returncode == 0, r.stderr
        assert last_result(server) == "started"
    finally:
        reap(f"sleep {secs}")


def test_bash_runs_in_agis_working_directory(agi, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "marker.txt").write_text("x")
    got, _ = run_tool(agi, "Bash", cwd=project, command="pwd -P; ls")
    assert got.splitlines() == [str(project.resolve()), "marker.txt"]


def test_bash_stdin_is_empty_even_when_agis_stdin_stays_open(env, tmp_path):
    # agi's own stdin is a pipe nobody closes; `cat` in Bash must still see EOF at once.
    with FakeModel(call("Bash", command="cat; echo after-cat"), text("done")) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        proc = subprocess.Popen(
            [AGI, "--no-stdin", "go"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        try:
            proc.wait(timeout=20)  # stdin stays open all along: a hang guard
        except subprocess.TimeoutExpired:
            proc.kill()
        finally:
            out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert out == "done\n"
    assert last_result(server) == "after-cat"


# --- the toolbox owns what its tools start ---------------------------------------------------


def test_bash_sees_the_variables_hooks_exported_through_the_context(tmp_path):
    from agi.tools import ToolContext
    from agi.tools.shell import Bash

    ctx = ToolContext(cwd=str(tmp_path), env={"AGI_T_EXPORTED": "from-a-hook"})
    assert Bash().run({"command": "echo $AGI_T_EXPORTED"}, ctx) == "from-a-hook"
    ctx.env["AGI_T_EXPORTED"] = "changed"  # the run updates the same dict as hooks export more
    assert Bash().run({"command": "echo $AGI_T_EXPORTED; echo $HOME"}, ctx) == (
        f"changed\n{os.environ['HOME']}"
    )


def test_interrupt_kills_the_running_command_and_close_ends_background_jobs(tmp_path):
    import threading

    from agi.messages import ToolCall
    from agi.tools import Toolbox, ToolContext
    from agi.tools.shell import Bash

    job, fg = unique_seconds(91), unique_seconds(92)
    box = Toolbox([Bash()], ToolContext(cwd=str(tmp_path)))
    try:
        box.run_one(ToolCall("1", "Bash", json.dumps({"command": f"sleep {job} & echo ok"})))
        slow = ToolCall("2", "Bash", json.dumps({"command": f"sleep {fg}"}))
        worker = threading.Thread(target=box.run_one, args=(slow,))
        worker.start()
        deadline = time.monotonic() + 5
        while not pids_matching(f"sleep {fg}") and time.monotonic() < deadline:
            time.sleep(0.02)
        box.interrupt()
        worker.join(5)
        assert not worker.is_alive() and pids_matching(f"sleep {fg}") == []
        assert pids_matching(f"sleep {job}") != []  # a background job outlives an interrupt
        Toolbox(list(box.tools.values()), owner=False).close()  # a subagent's: not the owner
        assert pids_matching(f"sleep {job}") != []
        box.close()
        assert pids_matching(f"sleep {job}") == []
        box.close()  # idempotent
    finally:
        reap(job)
        reap(fg)


# --- Read ------------------------------------------------------------------------------------


def test_read_numbers_lines(agi, tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("alpha\nbeta\n\ngamma\n")
    got, _ = run_tool(agi, "Read", file_path=str(f))
    assert got == "     1\talpha\n     2\tbeta\n     3\t\n     4\tgamma"


def test_read_relative_path_is_from_the_working_directory(agi, tmp_path):
    (tmp_path / "rel.txt").write_text("hello\n")
    got, _ = run_tool(agi, "Read", file_path="rel.txt")
    assert got == "     1\thello"


def test_read_offset_and_limit_with_a_note_about_more_lines(agi, tmp_path):
    f = tmp_path / "ten.txt"
    f.write_text("".join(f"line {n}\n" for n in range(1, 11)))
    got, _ = run_tool(agi, "Read", file_path=str(f), offset=3, limit=2)
    lines = got.splitlines()
    assert lines[:2] == ["     3\tline 3", "     4\tline 4"]
    assert len(lines) == 3
    note = lines[2]
    assert "6 more lines" in note and "5" in note  # how many are left, and where to go on


def test_read_to_the_end_has_no_note(agi, tmp_path):
    f = tmp_path / "ten.txt"
    f.write_text("".join(f"line {n}\n" for n in range(1, 11)))
    got, _ = run_tool(agi, "Read", file_path=str(f), offset=9)
    assert got == "     9\tline 9\n    10\tline 10"


def test_read_missing_file_is_an_error_result_and_the_run_goes_on(agi, tmp_path):
    missing = tmp_path / "nope" / "missing.txt"
    got, r = run_tool(agi, "Read", file_path=str(missing))
    assert got.startswith("Error:")
    assert "missing.txt" in got
    assert r.returncode == 0 and r.stdout == "done\n"


def test_read_a_directory_is_an_error(agi, tmp_path):
    d = tmp_path / "somedir"
    d.mkdir()
    got, _ = run_tool(agi, "Read", file_path=str(d))
    assert got.startswith("Error:")
    assert "directory" in got.lower()


def test_read_a_binary_file_is_an_error(agi, tmp_path):
    f = tmp_path / "blob.bin"
    f.write_bytes(bytes(range(256)) * 8)
    got, _ = run_tool(agi, "Read", file_path=str(f))
    assert got.startswith("Error:")
    assert "binary" in got.lower()
    assert "\x00" not in got


# --- Write and Edit --------------------------------------------------------------------------


def test_write_creates_parent_directories(agi, tmp_path):
    target = tmp_path / "deep" / "er" / "new.txt"
    got, _ = run_tool(agi, "Write", file_path=str(target), content="one\ntwo\n")
    assert target.read_text() == "one\ntwo\n"
    assert not got.startswith("Error")
    assert str(target) in got


def test_write_replaces_an_existing_file(agi, tmp_path):
    target = tmp_path / "old.txt"
    target.write_text("a much longer previous content\n" * 10)
    got, _ = run_tool(agi, "Write", file_path=str(target), content="short")
    assert target.read_text() == "short"
    assert not got.startswith("Error")


def test_edit_replaces_a_unique_string(agi, tmp_path):
    f = tmp_path / "code.py"
    f.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    got, _ = run_tool(agi, "Edit", file_path=str(f), old_string="return 1", new_string="return 42")
    assert not got.startswith("Error")
    assert f.read_text() == "def f():\n    return 42\n\ndef g():\n    return 2\n"


def test_edit_missing_old_string_is_an_error(agi, tmp_path):
    f = tmp_path / "code.py"
    f.write_text("x = 1\n")
    got, r = run_tool(agi, "Edit", file_path=str(f), old_string="y = 2", new_string="y = 3")
    assert got.startswith("Error:")
    assert "not found" in got.lower()
    assert f.read_text() == "x = 1\n"
    assert r.stdout == "done\n"


def test_edit_not_unique_is_an_error_with_the_count_and_leaves_the_file(agi, tmp_path):
    f = tmp_path / "code.py"
    original = "x = 1\nx = 1\nx = 1\n"
    f.write_text(original)
    got, _ = run_tool(agi, "Edit", file_path=str(f), old_string="x = 1", new_string="x = 2")
    assert got.startswith("Error:")
    assert "3" in got
    assert f.read_text() == original


def test_edit_replace_all(agi, tmp_path):
    f = tmp_path / "code.py"
    f.write_text("x = 1\ny = x\nx = 1\n")
    got, _ = run_tool(
        agi, "Edit", file_path=str(f), old_string="x = 1", new_string="x = 2", replace_all=True
    )
    assert not got.startswith("Error")
    assert f.read_text() == "x = 2\ny = x\nx = 2\n"


# --- TempDir ---------------------------------------------------------------------------------


def test_tempdir_is_a_new_private_directory_per_call(agi, tmp_path):
    """Each call makes its own directory (mode 0700, under TMPDIR), usable while the run goes
    on, and removed when it ends (docs: security)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()

    def look(body: dict) -> dict:  # the two directories, as a command sees them mid-run
        made = [m["content"].strip() for m in body["messages"] if m["role"] == "tool"]
        return call("Bash", command="stat -c '%a %n' " + " ".join(made))

    with FakeModel(call("TempDir"), call("TempDir"), look, text("done")) as server:
        r = agi("go", server=server, extra_env={"TMPDIR": str(tmp)})
    assert r.returncode == 0, r.stderr
    first, second = (p.strip() for p in results(server, 2))
    assert first != second
    for path in (first, second):
        assert Path(path).is_absolute() and Path(path).parent == tmp, path
    seen = results(server, 3)[2].splitlines()
    assert seen[:2] == [f"700 {first}", f"700 {second}"], seen
    assert not Path(first).exists() and not Path(second).exists()  # removed at the end


# --- failures are results --------------------------------------------------------------------


def test_unknown_tool_is_an_error_result_and_the_run_finishes(agi):
    with FakeModel(call("NoSuchTool", x=1), text("recovered")) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "recovered\n"
    got = last_result(server)
    assert got.startswith("Error:")
    assert "NoSuchTool" in got


def test_invalid_json_arguments_are_an_error_result_and_the_run_finishes(agi, tmp_path):
    with FakeModel(raw_call("Bash", '{"command": "echo hi'), text("recovered")) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "recovered\n"
    assert len(server.requests) == 2
    got = last_result(server)
    assert got.startswith("Error:")
    assert "JSON" in got


def test_arguments_that_are_json_but_not_an_object_are_an_error(agi):
    with FakeModel(raw_call("Bash", '["echo", "hi"]'), text("recovered")) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "recovered\n"
    assert last_result(server).startswith("Error:")


# --- the harness around the tools -------------------------------------------------------------


def test_empty_reply_gets_the_nudge_and_counts_as_a_step(agi):
    with FakeModel(text(""), text("fine")) as server:
        r = agi("--output", "json", "go", server=server)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["answer"] == "fine"
    assert result["steps"] == 2
    nudge = server.requests[1]["messages"][-1]
    assert nudge["role"] == "user"
    assert nudge["content"] == harness_text("empty_reply")

    with FakeModel(text("")) as server:
        r = agi("--max-steps", "2", "go", server=server)
    assert r.returncode == 4  # empty replies are steps: they use up --max-steps
    assert len(server.requests) == 2


def test_third_identical_call_in_a_row_gets_the_repeat_note(agi):
    same = {"command": "echo same", "description": "say same"}
    reordered = {"description": "say same", "command": "echo same"}  # same input, other key order
    script = [
        calls(("Bash", same)),
        calls(("Bash", same)),
        calls(("Bash", reordered)),
        text("done"),
    ]
    with FakeModel(*script) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    first, second, third = results(server, 3)
    assert first == "same"
    assert second == "same"
    assert third.startswith("same")
    note = harness_text("repeated_call").format(count=3)
    assert third == "same\n\n" + note


def test_a_different_call_in_between_resets_the_repeat_count(agi):
    script = [
        call("Bash", command="echo a"),
        call("Bash", command="echo a"),
        call("Bash", command="echo b"),
        call("Bash", command="echo a"),
        text("done"),
    ]
    with FakeModel(*script) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    assert results(server, 4) == ["a", "a", "b", "a"]


def test_background_jobs_end_with_the_run(agi, tmp_path):
    secs = unique_seconds(40)
    with FakeModel(
        call("Bash", command=f"sleep {secs} & echo started"),
        call("Bash", command=f"pgrep -f 'sleep {secs}' >/dev/null && echo alive"),
        text("done"),
    ) as server:
        r = agi("go", server=server, timeout=30)
    assert r.returncode == 0, r.stderr
    results = [m["content"] for m in server.requests[2]["messages"] if m["role"] == "tool"]
    assert results == ["started", "alive"]  # alive for the next call of the same run
    assert subprocess.run(["pgrep", "-f", f"sleep {secs}"], capture_output=True).returncode == 1
