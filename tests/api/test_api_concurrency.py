"""Runs in one process (docs/python.md): threads sharing one `agi.Budget` stop together once it
is spent; a 429 one run gets pauses the process's other runs to that endpoint (one backoff per
endpoint), while another process is not held by it."""

from __future__ import annotations

from api_script import printed, python

from fakeserver import FakeModel, call, status, text

PRICES = {"fake-model": {"input": 1000, "output": 1000}}  # USD per Mtok: 0.015 a call here


def served(env: dict[str, str], server: FakeModel) -> dict[str, str]:
    return {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}


def test_threads_sharing_a_budget_stop_once_it_is_spent(env, tmp_path):
    with FakeModel(call("calculate", expression="1+1")) as server:  # never answers
        done = python(
            f"""
            import threading
            budget = agi.Budget(0.05)
            ended = []

            def work(n):
                try:
                    agi.run(f"job {{n}}", budget=budget, prices={PRICES!r})
                    ended.append(["answered", 0, ""])
                except agi.LimitReached as e:
                    ended.append([type(e).__name__, e.exit_code, e.message])

            threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print(json.dumps([ended, budget.spent, budget.usage.calls]))
            try:
                agi.run("no price", budget=budget, model="unpriced-model")
            except agi.UsageError as e:
                print(json.dumps([e.exit_code, e.message]))
            """,
            served(env, server),
            tmp_path,
        )
    [ended, spent, calls], [code, message] = printed(done)
    assert len(ended) == 4
    assert all(kind == "BudgetSpent" and c == 4 for kind, c, _ in ended), ended
    assert all(m.endswith("for the budget (agi.Budget)") for _, _, m in ended)
    made = len(server.requests)
    assert calls == made and round(spent, 6) == round(made * 0.015, 6)
    assert spent >= 0.05  # spent, then no call is made: at most one more per thread in flight
    assert 4 <= made <= 4 + 3
    assert code == 2 and "agi.Budget needs a price for openai:unpriced-model" in message


def test_a_429_one_run_gets_pauses_the_next_run_of_the_process(env, tmp_path):
    limited = status(429, {"error": {"message": "slow down"}}, headers={"retry-after": "120"})
    with FakeModel(limited, text("ok")) as server:
        done = python(
            """
            for prompt in ("first", "second"):
                try:
                    agi.run(prompt)
                except agi.ProviderError as e:
                    print(json.dumps([prompt, e.exit_code, e.message]))
            """,
            served(env, server),
            tmp_path,
            timeout=60,  # the pause is not waited out: both fail at once
        )
        sent = len(server.requests)
        other = python('print(json.dumps(agi.run("third").answer))', served(env, server), tmp_path)
    first, second = printed(done)
    assert first[:2] == ["first", 3] and "retry after 120 s" in first[2]
    assert second[:2] == ["second", 3] and second[2].startswith("rate limited:")
    assert "not sent" in second[2]
    assert sent == 1  # the second run sent nothing: the pause the first one got held it
    assert printed(other) == ["ok"]  # another process has a pool of its own
