"""Usage and cost: every provider's usage shape, prices (built-in, config, the provider's own
figure), the totals in --output json, meta.json, --show and --list-sessions, and --max-cost."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agi.messages import Usage
from agi.options.config import ModelConfig
from agi.providers.cost import Meter, Price, find_price, money
from agi.providers.transport import Transport

from conftest import FIXTURES
from fakeserver import USAGE, FakeModel, call, calls, raw, text, with_headers

KEYS = ["input", "output", "cached", "cache_write", "reasoning", "cost"]


def usage_of(*values):
    """A usage object as --output json writes it: values in KEYS' order (cost last)."""
    return dict(zip(KEYS, values, strict=True))


def step_for(path: Path, headers: dict[str, str] | None = None):
    """A recorded response as the fake server's step: SSE bytes as they are, `.jsonl` chunks
    framed as SSE (Anthropic events with their `event:` line), JSON bodies as one completion."""
    if path.suffix == ".sse":
        step = raw(path.read_bytes())
    elif path.suffix == ".jsonl":
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        kinds = [json.loads(line).get("type") for line in lines]
        if "message_start" in kinds:  # Anthropic: each event named, no [DONE]
            frames = [f"event: {k}\ndata: {line}\n\n" for k, line in zip(kinds, lines, strict=True)]
        else:
            frames = [f"data: {line}\n\n" for line in lines] + ["data: [DONE]\n\n"]
        step = raw("".join(frames).encode())
    else:
        data = json.loads(path.read_text())
        body = data["body"] if "body" in data and "status" in data else data
        if "choices" not in body:  # a lone usage chunk (OpenRouter's documented example)
            chunk = json.dumps({"choices": [{"index": 0, "delta": {"content": "ok"}}]})
            finish = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            frames = [f"data: {c}\n\n" for c in (chunk, finish, json.dumps(body))]
            return raw(("".join(frames) + "data: [DONE]\n\n").encode())
        step = raw(json.dumps(body).encode(), content_type="application/json")
    return with_headers(step, **headers) if headers else step


def one_call(path: Path, label: str, prices=None, headers=None) -> tuple[Usage, Usage]:
    """Replay one recorded response over HTTP through the transport agi uses for `label`;
    the reply's usage and the meter's total."""
    from agi.providers.anthropic import AnthropicMessages

    provider, _, model = label.partition(":")
    meter = Meter(prices)
    with FakeModel(step_for(path, headers)) as server:
        config = ModelConfig(provider, model, server.url)
        wire = AnthropicMessages(config) if provider == "anthropic" else None
        transport = Transport(config, meter=meter, protocol=wire)
        events = transport.stream([{"role": "user", "content": "hi"}], [])
        try:
            while True:
                next(events)
        except StopIteration as done:
            reply = done.value
        finally:
            transport.close()
    return reply.usage, meter.total


T, A, U = FIXTURES / "transport", FIXTURES / "anthropic", FIXTURES / "usage"
# (fixture, provider:model, [prices] of the config, expected usage) — read off the files
SHAPES = {
    "openai, built-in price": (
        T / "openai_tool_call_stream.sse",
        "openai:gpt-4o-mini",
        None,
        [53, 15, 0, 0, 0, (53 * 0.15 + 15 * 0.60) / 1e6],
    ),
    "deepseek reports cache hits twice, counted once": (
        T / "deepseek_thinking_tools_turn1.response.json",
        "deepseek:deepseek-reasoner",
        None,
        [563, 116, 512, 0, 60, (51 * 0.28 + 512 * 0.028 + 116 * 0.42) / 1e6],
    ),
    "deepseek stream, usage on the finish chunk": (
        T / "deepseek_v4_reasoning_then_tool_call.jsonl",
        "deepseek:deepseek-chat",
        None,
        [339, 83, 320, 0, 39, (19 * 0.28 + 320 * 0.028 + 83 * 0.42) / 1e6],
    ),
    "gemini leaves thinking out of completion_tokens": (
        T / "gemini_compat_tool_call_empty_id.response.json",
        "gemini:gemini-2.5-flash",
        None,
        [35, 74, 0, 0, 62, (35 * 0.30 + 74 * 2.50) / 1e6],
    ),
    "mistral cached tokens, no price": (
        T / "mistral_incremental_tool_call.jsonl",
        "mistral:mistral-small",
        None,
        [171, 14, 128, 0, 0, None],
    ),
    "vllm, config price without a cached price": (
        T / "vllm_tool_call_reasoning_turn2.response.json",
        "vllm:glm-5",
        {"vllm:glm-5": {"input": 1, "output": 2}},
        [214, 54, 64, 0, 20, (214 * 1 + 54 * 2) / 1e6],
    ),
    "together's top-level cached_tokens": (
        T / "together_r1_unclosed_think_length.response.json",
        "together:deepseek-r1",
        None,
        [4, 100, 0, 0, 0, None],
    ),
    "openrouter's own cost wins over a price": (
        T / "openrouter_streaming_reasoning.sse",
        "openrouter:anthropic/claude-sonnet-4.5",
        {"openrouter:anthropic/claude-sonnet-4.5": {"input": 1000, "output": 1000}},
        [43, 36, 0, 0, 13, 0.000669],
    ),
    "openrouter cache writes (documented example)": (
        U / "openrouter_usage_accounting_example.json",
        "openrouter:some/model",
        None,
        [194, 2, 0, 100, 0, 0.95],
    ),
    "anthropic cache reads and writes, [prices.MODEL]": (
        A / "cache_usage_server_tools.jsonl",
        "anthropic:claude-sonnet-5",
        {"claude-sonnet-5": {"input": 3, "output": 15, "cached": 0.3, "cache_write": 3.75}},
        [9632, 198, 6289, 3337, 0, (6 * 3 + 6289 * 0.3 + 3337 * 3.75 + 198 * 15) / 1e6],
    ),
    "anthropic thinking tokens": (
        A / "thinking_tool_turn1.sse",
        "anthropic:claude-haiku-4-5",
        None,
        [598, 92, 0, 0, 53, (598 * 1 + 92 * 5) / 1e6],
    ),
    "anthropic message_delta replaces input_tokens; dated model": (
        U / "anthropic_message_delta_input_tokens.jsonl",
        "anthropic:claude-opus-4-5-20251101",
        None,
        [61, 2, 0, 0, 0, (61 * 5 + 2 * 25) / 1e6],
    ),
    "llama.cpp usage with timings": (
        U / "llamacpp_usage_timings.jsonl",
        "llamacpp:qwen3",
        None,
        [1350, 61, 1100, 0, 0, None],
    ),
    "llama.cpp timings only": (
        U / "llamacpp_timings_only.jsonl",
        "llamacpp:qwen3",
        None,
        [1350, 61, 1100, 0, 0, None],
    ),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_usage_shapes(case):
    path, label, prices, want = SHAPES[case]
    usage, total = one_call(path, label, prices)
    got = usage.to_dict()
    assert [got[k] for k in KEYS[:5]] == want[:5]
    assert got["cost"] == (None if want[5] is None else pytest.approx(want[5]))
    assert total.to_dict() == got  # the meter counted the call once


def test_litellm_cost_header_wins_over_the_built_in_price():
    header = json.loads((U / "litellm_response_cost.headers.json").read_text())
    path = T / "openai_nonstream_o3mini_max_completion_tokens.response.json"
    usage, _ = one_call(path, "litellm:o3-mini", headers=header)
    assert usage.to_dict() == usage_of(7, 87, 0, 0, 64, 0.0009885)
    usage, _ = one_call(path, "litellm:o3-mini")  # without the header: o3-mini's price
    assert usage.cost == pytest.approx((7 * 1.10 + 87 * 4.40) / 1e6)


def test_a_zero_cost_header_on_a_stream_is_not_taken_for_free():
    """LiteLLM sets the header before a stream's body: there, 0 means it did not know."""
    step = with_headers(text("ok"), x_litellm_response_cost="0.0")
    meter = Meter({"m": {"input": 1000, "output": 1000}})
    with FakeModel(step) as server:
        transport = Transport(ModelConfig("litellm", "m", server.url), meter=meter)
        list(transport.stream([{"role": "user", "content": "hi"}], []))
        transport.close()
    assert meter.total.cost == pytest.approx(0.015)


FIELDS = [
    "prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "cost",
    "prompt_cache_hit_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
    "input_tokens", "output_tokens", "prompt_tokens_details", "completion_tokens_details",
    "reasoning_tokens", "cache_write_tokens", "is_byok", "cost_details", "upstream_inference_cost",
]  # fmt: skip
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True), st.text(max_size=3)
)
SHAPE = st.recursive(
    VALUES, lambda inner: st.dictionaries(st.sampled_from(FIELDS), inner), max_leaves=12
)


@given(SHAPE, SHAPE)
def test_any_usage_object_reads_as_sane_counts(usage, timings):
    """Whatever a server sends as usage: no exception, no negative counts, the cached and
    written parts within the input, the reasoning within the output."""
    from agi.providers.usage import parse_usage

    got = parse_usage(usage, timings)
    if got is not None:
        assert all(isinstance(n, int) and n >= 0 for n in got.tokens())
        assert got.cached <= got.input and got.cache_write <= got.input
        assert got.reasoning <= got.output
        assert got.cost is None or got.cost >= 0


def test_price_formula_and_lookup_order():
    usage = Usage(input=1000, output=10, cached=400, cache_write=100, calls=1)
    # fresh input, cache reads at their price, cache writes at the input price (none given)
    assert Price(2, 8, cached=0.5).cost(usage) == pytest.approx(
        (500 * 2 + 400 * 0.5 + 100 * 2 + 80) / 1e6
    )
    prices = {"openai:gpt-4o": {"input": 1, "output": 1}, "gpt-4o": {"input": 2, "output": 2}}
    assert find_price("openai:gpt-4o", "gpt-4o", prices) == Price(1, 1)
    assert find_price("litellm:gpt-4o", "gpt-4o", prices) == Price(2, 2)
    assert find_price("litellm:gpt-4o", "gpt-4o") == Price(2.50, 10.00, 1.25)
    assert find_price("openrouter:openai/gpt-4o", "openai/gpt-4o") == Price(2.50, 10.00, 1.25)
    assert find_price("anthropic:claude-3-7-sonnet-latest", "claude-3-7-sonnet-latest")
    assert find_price("ollama:qwen3", "qwen3") is None


def test_a_sum_with_an_unknown_part_is_unknown():
    known, unknown = Usage(10, 5, cost=0.01, calls=1), Usage(10, 5, calls=1)
    assert (Usage() + known).cost == 0.01
    assert (known + unknown).cost is None and (unknown + known).cost is None
    assert (known + unknown).to_dict() == usage_of(20, 10, 0, 0, 0, None)
    assert Usage().to_dict()["cost"] == 0.0  # no call made: nothing spent


def test_money():
    assert [money(x) for x in (0.0123, 0.01, 1.5, 0.00007159, 0, 0.03)] == [
        "$0.0123",
        "$0.01",
        "$1.50",
        "$0.000072",
        "$0.00",
        "$0.03",
    ]


def test_the_meter_adds_calls_from_many_threads():
    meter = Meter({"m": {"input": 1, "output": 1}})

    def work():
        for _ in range(200):
            meter.record("p:m", "m", Usage(1000, 1000, calls=1))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = meter.total
    assert (total.calls, total.input) == (1600, 1_600_000)
    assert total.cost == pytest.approx(1600 * 0.002)


# --- the real executable -----------------------------------------------------------------

PRICED = '[prices."fake-model"]\ninput = 1000\noutput = 1000\n'  # fakeserver's USAGE: $0.015
DEEPSEEK = {  # both of DeepSeek's reports of the same cache hits, and reasoning tokens
    "prompt_tokens": 1000,
    "completion_tokens": 100,
    "total_tokens": 1100,
    "prompt_tokens_details": {"cached_tokens": 800},
    "prompt_cache_hit_tokens": 800,
    "prompt_cache_miss_tokens": 200,
    "completion_tokens_details": {"reasoning_tokens": 40},
}


def config(tmp_path: Path, text_: str) -> None:
    (tmp_path / "config.toml").write_text(text_)


def test_output_json_has_the_usage_object(agi):
    script = [calls(("Bash", {"command": "true"}), usage=DEEPSEEK), text("done", usage=DEEPSEEK)]
    with FakeModel(*script) as server:
        r = agi("-m", "deepseek:deepseek-chat", "--output", "json", "go", server=server)
    assert r.returncode == 0, r.stderr
    usage = json.loads(r.stdout)["usage"]
    assert list(usage) == KEYS
    one = (200 * 0.28 + 800 * 0.028 + 100 * 0.42) / 1e6
    assert usage == {**usage_of(2000, 200, 1600, 0, 80, None), "cost": pytest.approx(2 * one)}


def test_jsonl_usage_events_and_result(agi, tmp_path):
    config(tmp_path, PRICED)
    with FakeModel(call("Bash", command="true"), text("done")) as server:
        r = agi("--output", "jsonl", "go", server=server)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    usages = [e["usage"] for e in lines if e["type"] == "usage"]
    assert usages == [usage_of(10, 5, 0, 0, 0, 0.015)] * 2
    assert lines[-1]["type"] == "result"
    assert lines[-1]["usage"] == usage_of(20, 10, 0, 0, 0, 0.03)


def test_provider_figures_win_over_prices(agi, tmp_path):
    config(tmp_path, '[prices."gpt-4o"]\ninput = 1000\noutput = 1000\n')
    openrouter = {**USAGE, "cost": 0.25}
    with FakeModel(text("a", usage=openrouter)) as server:
        r = agi("-m", "openrouter:gpt-4o", "--output", "json", "hi", server=server)
    assert json.loads(r.stdout)["usage"]["cost"] == 0.25
    step = with_headers(text("b"), x_litellm_response_cost="0.5")
    with FakeModel(step) as server:
        r = agi("-m", "litellm:gpt-4o", "--output", "json", "hi", server=server)
    assert json.loads(r.stdout)["usage"]["cost"] == 0.5
    with FakeModel(text("c")) as server:  # neither: the config's price
        r = agi("-m", "litellm:gpt-4o", "--output", "json", "hi", server=server)
    assert json.loads(r.stdout)["usage"]["cost"] == 0.015


def test_unknown_cost_is_shown_as_unknown(agi, tmp_path):
    session = tmp_path / "s"
    with FakeModel(text("hello")) as server:
        r = agi("-v", "--output", "json", "-s", str(session), "hi", server=server)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["usage"]["cost"] is None
    assert "10 in, 5 out, cost unknown" in r.stderr  # the terminal view's summary
    assert "$0.00" not in r.stderr
    meta = json.loads((session / "meta.json").read_text())
    assert meta["usage"] == usage_of(10, 5, 0, 0, 0, None)
    assert "cost unknown" in agi("--list-sessions").stdout
    assert "cost unknown" in agi("--show", str(session)).stdout


def test_terminal_summary_shows_tokens_cached_and_cost(agi, tmp_path):
    config(tmp_path, PRICED)
    with FakeModel(text("hello", usage=DEEPSEEK)) as server:
        r = agi("-v", "hi", server=server)
    assert r.returncode == 0, r.stderr
    summary = next(line for line in r.stderr.splitlines() if line.startswith("✓"))
    assert "1000 in (800 cached), 100 out (40 reasoning), $" in summary


def test_meta_json_accumulates_across_runs_and_show_and_list_show_it(agi, tmp_path):
    config(tmp_path, PRICED)
    session = tmp_path / "s"
    for prompt in ("one", "two"):
        with FakeModel(text(f"answer {prompt}")) as server:
            r = agi("-s", str(session), prompt, server=server)
        assert r.returncode == 0, r.stderr
    meta = json.loads((session / "meta.json").read_text())
    assert meta["usage"] == usage_of(20, 10, 0, 0, 0, 0.03)
    shown = agi("--show", str(session)).stdout
    assert "usage 20 in, 10 out, $0.03" in shown.splitlines()[1]
    assert "◀ assistant  (" in shown and "10 in, 5 out, $0.015)" in shown  # each reply's
    row = agi("--list-sessions").stdout.splitlines()[0]
    assert row.startswith(str(session)) and "\t20 in, 10 out, $0.03\t" in row


def test_an_unknown_cost_in_meta_stays_unknown_after_a_priced_run(agi, tmp_path):
    config(tmp_path, PRICED)
    session = tmp_path / "s"
    with FakeModel(text("no usage reported", usage=None)) as server:
        assert agi("-s", str(session), "one", server=server).returncode == 0
    assert json.loads((session / "meta.json").read_text())["usage"]["cost"] is None
    with FakeModel(text("priced")) as server:
        assert agi("-s", str(session), "two", server=server).returncode == 0
    meta = json.loads((session / "meta.json").read_text())
    assert meta["usage"]["input"] == 10 and meta["usage"]["cost"] is None
    row = agi("--list-sessions").stdout.splitlines()[0]
    assert "cost unknown" in row


def test_ghost_exchanges_are_counted(agi, tmp_path):
    config(tmp_path, PRICED)
    with FakeModel(text("forty-two"), text('{"n": 42}')) as server:
        r = agi("--schema", "n:int", "--output", "json", "q", server=server)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["answer"] == {"n": 42}
    assert result["usage"] == usage_of(20, 10, 0, 0, 0, 0.03)


@pytest.mark.parametrize("where", ["flag", "config"])
def test_max_cost_stops_before_the_next_call(agi, tmp_path, where):
    config(tmp_path, ("max_cost = 0.02\n" if where == "config" else "") + PRICED)
    flag = ["--max-cost", "0.02"] if where == "flag" else []
    session = tmp_path / "s"
    script = [call("Bash", command=f"echo {i}") for i in range(1, 4)] + [text("done")]
    with FakeModel(*script) as server:
        r = agi(*flag, "-s", str(session), "count", server=server)
    assert r.returncode == 4, r.stderr
    assert r.stderr == "agi: cost limit reached ($0.03 of $0.02)\n"
    assert len(server.requests) == 2  # $0.015 after one call, $0.03 after two: no third
    messages = [json.loads(line) for line in (session / "messages.jsonl").read_text().splitlines()]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert json.loads((session / "meta.json").read_text())["usage"]["cost"] == 0.03
    # the session stays valid: it continues (with the budget of a new run)
    config(tmp_path, PRICED)
    with FakeModel(text("carried on")) as server:
        r = agi("-s", str(session), "go on", server=server)
    assert r.returncode == 0 and r.stdout == "carried on\n", r.stderr
    sent = server.requests[0]["messages"]
    assert [m["role"] for m in sent[-3:]] == ["assistant", "tool", "user"]
    assert json.loads((session / "meta.json").read_text())["usage"]["cost"] == 0.045


def test_max_cost_in_json_output(agi, tmp_path):
    config(tmp_path, PRICED)
    with FakeModel(call("Bash", command="true")) as server:
        r = agi("--max-cost", "0.01", "--output", "json", "go", server=server)
    assert r.returncode == 4
    result = json.loads(r.stdout)
    assert result["exit_code"] == 4 and result["error"].startswith("cost limit reached ($0.015")
    assert result["usage"]["cost"] == 0.015 and len(server.requests) == 1


def test_max_cost_counts_ghost_exchanges(agi, tmp_path):
    config(tmp_path, PRICED)
    with FakeModel(text("forty-two"), text('{"n": 42}')) as server:
        r = agi("--max-cost", "0.01", "--schema", "n:int", "q", server=server)
    assert r.returncode == 4, r.stderr
    assert "cost limit reached ($0.015 of $0.01)" in r.stderr
    assert len(server.requests) == 1  # the schema's ghost request was not sent


def test_max_cost_counts_subagents(agi, tmp_path):
    config(tmp_path, PRICED)

    def respond(body):
        first = next(m for m in body["messages"] if m["role"] == "user")
        if first["content"] == "sub":
            return call("Bash", command="true")  # the subagent works on and on
        if any(m["role"] == "tool" for m in body["messages"]):
            return text("done")
        return call("Task", description="x", prompt="sub")

    with FakeModel(respond) as server:
        r = agi("--max-cost", "0.04", "go", server=server)
    assert r.returncode == 4, r.stderr
    assert "cost limit reached ($0.045 of $0.04)" in r.stderr
    assert len(server.requests) == 3  # the parent's call and two of the subagent's


def test_max_cost_without_a_price_is_a_usage_error(agi, tmp_path):
    with FakeModel(text("never")) as server:
        r = agi("--max-cost", "1", "hi", server=server)
    assert r.returncode == 2
    assert r.stderr.startswith("agi: --max-cost needs a price for openai:fake-model")
    assert '[prices."openai:fake-model"]' in r.stderr
    assert server.requests == []
    assert not (tmp_path / "agi-home" / "sessions").exists()


@pytest.mark.parametrize(
    "toml,message",
    [
        ('[prices."m"]\ninput = 1\n', 'prices."m" needs output'),
        ('[prices."m"]\ninput = 1\noutput = "x"\n', 'prices."m".output must be a number'),
        (
            '[prices."m"]\ninput = 1\noutput = 2\nextra = 3\n',
            "unknown setting 'prices.\"m\".extra'",
        ),
        ("max_cost = -1\n", "max_cost must be a positive number"),
        ('prices = "cheap"\n', "prices must be a table"),
    ],
)
def test_bad_prices_in_the_config_are_usage_errors(agi, tmp_path, toml, message):
    config(tmp_path, toml)
    with FakeModel(text("never")) as server:
        r = agi("hi", server=server)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert server.requests == []


def test_max_cost_with_an_unpriced_subagent_model_is_a_usage_error_before_any_call(agi, tmp_path):
    config(tmp_path, PRICED)
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "helper.md").write_text(
        "---\nname: helper\ndescription: helps\nmodel: openai:unpriced-model\n---\nHelp.\n"
    )
    with FakeModel(text("never")) as server:
        r = agi("--agents", str(agents), "--max-cost", "1", "go", server=server)
    assert r.returncode == 2 and server.requests == [], r.stderr
    (line,) = r.stderr.splitlines()
    assert 'prices."openai:unpriced-model"' in line


def test_max_cost_stops_when_a_call_reports_no_usage(agi, tmp_path):
    config(tmp_path, PRICED)
    script = [calls(("Bash", {"command": "true"}), usage=None), text("never")]
    with FakeModel(*script) as server:
        r = agi("--max-cost", "1", "go", server=server)
    assert r.returncode == 4 and len(server.requests) == 1
    (line,) = r.stderr.splitlines()
    assert line.startswith("agi: ") and "reported no usage" in line
