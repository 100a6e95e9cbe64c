"""asyncio (docs/python.md): `agi.arun`, `agi.astream` and `Session.aask`, several at once on
one loop; cancelling the awaiting task cancels the run — its command is gone when the task's
cancellation returns."""

from __future__ import annotations

import subprocess

from api_script import printed, python

from conftest import unique_seconds
from fakeserver import FakeModel, call, text


def served(env: dict[str, str], server: FakeModel) -> dict[str, str]:
    return {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}


def test_arun_astream_and_aask(env, tmp_path):
    with FakeModel(text("hello")) as server:
        done = python(
            """
            import asyncio

            async def main():
                results = await asyncio.gather(*(agi.arun(f"q{i}") for i in range(3)))
                kinds = []
                async with agi.astream("stream it") as events:
                    async for event in events:
                        kinds.append(event.type)
                plain = [e.type async for e in agi.astream("without a block")]
                s = agi.Session()
                a = await s.aask("one")
                b = await s.aask("two")
                return [[r.answer for r in results], kinds, plain, a.session == b.session,
                        event.result.answer]

            print(json.dumps(asyncio.run(main())))
            """,
            served(env, server),
            tmp_path,
        )
    [[answers, kinds, plain, same, last]] = printed(done)
    assert answers == ["hello"] * 3 and last == "hello" and same
    assert kinds == plain == ["step", "text", "text", "text", "usage", "result"]
    prompts = sorted(r["messages"][-1]["content"] for r in server.requests[:3])
    assert prompts == ["q0", "q1", "q2"]


CANCELS = """
import asyncio, subprocess

def alive():
    found = subprocess.run(["pgrep", "-f", os.environ["MARKER"]], capture_output=True)
    return found.stdout.decode()

async def until_started():
    while not alive():
        await asyncio.sleep(0.05)

async def cancelled(work):
    task = asyncio.ensure_future(work)
    await until_started()  # the run's command is running
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return alive()
    return "not cancelled"

async def streamed():
    async for event in agi.astream("wait"):
        pass

async def main():
    return [await cancelled(agi.arun("wait")), await cancelled(streamed()),
            await cancelled(agi.Session().aask("wait"))]

print(json.dumps(asyncio.run(main())))
"""


def test_cancelling_the_task_cancels_the_run(env, tmp_path):
    marker = unique_seconds(300)  # a hang guard too: uncancelled, the command takes 300 s

    def step(body: dict) -> dict:
        if body["messages"][-1]["role"] == "tool":
            return text("the command ended")
        return call("Bash", command=f"sleep {marker}")

    with FakeModel(step) as server:
        done = python(
            CANCELS,
            {**served(env, server), "MARKER": f"sleep {marker}"},
            tmp_path,
            timeout=90,
        )
    assert printed(done) == [["", "", ""]]  # after each cancel, no command is left running
    gone = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert gone.stdout == ""
    assert len(server.requests) == 3  # no run went on to ask the model again
