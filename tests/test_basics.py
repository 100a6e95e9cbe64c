from fakeserver import FakeModel, text


def test_one_answer(agi):
    with FakeModel(text("Hello there")) as server:
        r = agi("hi", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Hello there\n"
    assert r.stderr == ""
    assert server.requests[0]["messages"][-1] == {"role": "user", "content": "hi"}
