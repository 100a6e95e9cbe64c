"""--schema: the DSL, JSON Schema literals, validation, and the ghost exchange over real HTTP."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agi.errors import ProviderError, SchemaFailed, UsageError
from agi.messages import ReasoningDelta, TextDelta, UsageEvent
from agi.options.config import ModelConfig
from agi.providers.transport import Transport
from agi.structured.schema import (
    JUDGE_SCHEMA,
    SchemaError,
    SchemaInvalid,
    build_validator,
    ghost_json,
    judge_instruction,
    parse_schema,
    schema_instruction,
)

from fakeserver import FakeModel, status, text


def obj(properties: dict, required: list[str] | None = None) -> dict:
    """The JSON Schema object one would write by hand; all fields required unless said."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


SEED = (
    'distro:str:"Distribution name", cores:int(1..):"CPU cores", '
    'load:dec(0..):"1-minute load average", swap:bool:"Is swap enabled?"'
)
SEED_SCHEMA = obj(
    {
        "distro": {"type": "string", "description": "Distribution name"},
        "cores": {"type": "integer", "minimum": 1, "description": "CPU cores"},
        "load": {"type": "number", "minimum": 0, "description": "1-minute load average"},
        "swap": {"type": "boolean", "description": "Is swap enabled?"},
    }
)

DSL = [
    (SEED, SEED_SCHEMA),
    (
        '[task_title:string:"Title of the subtask"]',
        {
            "type": "array",
            "items": obj({"task_title": {"type": "string", "description": "Title of the subtask"}}),
        },
    ),
    (
        'score:integer(0..100):"Final score"',
        obj(
            {
                "score": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 100,
                    "description": "Final score",
                }
            }
        ),
    ),
    ("a:str", obj({"a": {"type": "string"}})),
    ("a:string", obj({"a": {"type": "string"}})),
    ("a:int", obj({"a": {"type": "integer"}})),
    ("a:integer", obj({"a": {"type": "integer"}})),
    ("a:dec", obj({"a": {"type": "number"}})),
    ("a:decimal", obj({"a": {"type": "number"}})),
    ("a:float", obj({"a": {"type": "number"}})),
    ("a:number", obj({"a": {"type": "number"}})),
    ("a:bool", obj({"a": {"type": "boolean"}})),
    ("a:boolean", obj({"a": {"type": "boolean"}})),
    (
        "level:enum(low|mid|high)",
        obj({"level": {"type": "string", "enum": ["low", "mid", "high"]}}),
    ),
    ("v:enum(1.0|x-y|a_b)", obj({"v": {"type": "string", "enum": ["1.0", "x-y", "a_b"]}})),
    ("tags:str[]", obj({"tags": {"type": "array", "items": {"type": "string"}}})),
    (
        "ns:int(1..9)[]",
        obj({"ns": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 9}}}),
    ),
    ("a:str?", obj({"a": {"type": "string"}}, [])),
    (
        "a:int, b:str?, c:bool",
        obj(
            {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
            ["a", "c"],
        ),
    ),
    ("a:int(..10)", obj({"a": {"type": "integer", "maximum": 10}})),
    ("a:int(-5..5)", obj({"a": {"type": "integer", "minimum": -5, "maximum": 5}})),
    ("a:dec(0.5..2.5)", obj({"a": {"type": "number", "minimum": 0.5, "maximum": 2.5}})),
    ("a:int(..)", obj({"a": {"type": "integer"}})),
    ("a:str(1..80)", obj({"a": {"type": "string", "minLength": 1, "maxLength": 80}})),
    ("a:str(3..)?", obj({"a": {"type": "string", "minLength": 3}}, [])),
    ("p:{x:int, y:int}", obj({"p": obj({"x": {"type": "integer"}, "y": {"type": "integer"}})})),
    (
        "steps:[n:int, what:str]",
        obj(
            {
                "steps": {
                    "type": "array",
                    "items": obj({"n": {"type": "integer"}, "what": {"type": "string"}}),
                }
            }
        ),
    ),
    (
        "a:{b:[c:{d:str?}]}?",
        obj(
            {
                "a": obj(
                    {
                        "b": {
                            "type": "array",
                            "items": obj({"c": obj({"d": {"type": "string"}}, [])}),
                        }
                    }
                )
            },
            [],
        ),
    ),
    (
        'p:{x:int}:"A point"',
        obj({"p": {**obj({"x": {"type": "integer"}}), "description": "A point"}}),
    ),
    (r'a:str:"say \"hi\"\n\\ok"', obj({"a": {"type": "string", "description": 'say "hi"\n\\ok'}})),
    ("größe:int, top-n:int", obj({"größe": {"type": "integer"}, "top-n": {"type": "integer"}})),
    (
        "schema:str, model_config:int",
        obj({"schema": {"type": "string"}, "model_config": {"type": "integer"}}),
    ),
]


@pytest.mark.parametrize(("spec", "expected"), DSL, ids=[d[0][:40] for d in DSL])
def test_dsl_to_json_schema(spec, expected):
    schema = parse_schema(spec)
    assert schema == expected
    assert list(schema.get("properties", schema.get("items", {}).get("properties", {}))) == list(
        expected.get("properties", expected.get("items", {}).get("properties", {}))
    )
    build_validator(schema)  # every DSL schema is enforceable


def test_whitespace_and_newlines_between_tokens_are_free():
    spread = """
        distro : str : "Distribution name" ,
        cores:int ( 1 .. ) :"CPU cores",
        load:dec(0..)
            :"1-minute load average",
        swap:bool:"Is swap enabled?"
    """
    assert parse_schema(spread) == SEED_SCHEMA
    assert parse_schema(" [ t : str [ ] ? ] ") == parse_schema("[t:str[]?]")


ERRORS = [
    # spec, column of the caret, words of the message
    ("a:int b:str", 7, "expected ',' or the end of the schema"),
    ("a:strng", 3, "unknown type 'strng'"),
    ('a:"x"', 3, "expected a type (str, int, dec, bool, enum(...), [..], {..})"),
    ("a:", 3, "expected a type"),
    ("a", 2, "expected ':' after the field name 'a'"),
    ("", 1, "expected a field name"),
    ("a:int,", 7, "expected a field name"),
    ("1a:int", 1, "expected a field name"),
    ("a:int,a:str", 7, "duplicate field 'a'"),
    ("x:int, y:{a:str, a:int}", 18, "duplicate field 'a'"),
    ("a:int(5..1)", 6, "minimum is above its maximum"),
    ("a:bool(1..2)", 7, "a range (MIN..MAX) applies only to numbers and str"),
    ("a:enum(x|y)(1..2)", 12, "a range"),
    ("a:int(1.2)", 10, "expected '..'"),
    ("a:int(1...3)", 10, "expected a number or ')'"),
    ("a:int(1..3", 11, "expected a number or ')'"),
    ("a:str(1.5..)", 7, "a string length must be a whole number"),
    ("a:str(-1..)", 7, "a string length must be a whole number"),
    ("a:enum()", 8, "expected an enum value"),
    ("a:enum", 7, "expected '(' after enum"),
    ("a:enum(x|)", 10, "expected an enum value"),
    ("a:enum(x y)", 10, "expected '|' or ')'"),
    ("a:int[", 7, "expected ']'"),
    ("a:{b:int", 9, "expected ',' or '}'"),
    ("[a:int", 7, "expected ',' or ']'"),
    ("[a:int]]", 8, "expected ',' or the end"),
    ("a:str:desc", 7, 'expected a "double-quoted" description'),
    ('a:str:"open', 7, "unterminated description"),
    ("a:int??", 7, "expected ',' or the end"),
    ("a:[]", 4, "expected a field name"),
    ("{a:int}", 2, "not valid JSON"),
    ('{"type": "object",}', 19, "not valid JSON"),
]


@pytest.mark.parametrize(("spec", "column", "words"), ERRORS, ids=[e[0] or "empty" for e in ERRORS])
def test_error_shows_the_exact_position(spec, column, words):
    with pytest.raises(SchemaError) as info:
        parse_schema(spec)
    error = info.value
    assert isinstance(error, UsageError) and error.exit_code == 2
    message = str(error)
    assert "\n" not in message
    assert message.startswith(f"bad --schema at column {column}: ")
    assert words in message
    line, caret = error.detail.split("\n")
    assert line == spec
    assert caret == " " * (column - 1) + "^"


def test_error_in_a_multiline_schema_names_the_line():
    spec = "a:str,\n\tb:int(1...3),\n  c:bool"
    with pytest.raises(SchemaError) as info:
        parse_schema(spec)
    assert str(info.value).startswith("bad --schema at line 2, column 11: ")
    assert info.value.detail == "\tb:int(1...3),\n\t         ^"  # tabs kept, so the caret lines up


def test_json_schema_literal():
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "pattern": "^[a-z]+$", "title": "Name"},
            "n": {"type": ["integer", "null"], "exclusiveMinimum": 0},
            "opt": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
            "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 2},
        },
        "required": ["name", "n"],
    }
    assert parse_schema(json.dumps(schema)) == schema
    assert parse_schema("  " + json.dumps(schema, indent=2)) == schema


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "string", "format": "email"}}},
            "'format'",
        ),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "'oneOf'"),
        ({"$defs": {"A": {"type": "string"}}, "$ref": "#/$defs/A"}, "'$defs'"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "additionalProperties"),
        ({"type": "strin"}, "type must be one of"),
        ({"type": ["string", "integer"]}, "several types"),
        ({"type": "integer", "minimum": "1"}, "minimum must be a number"),
        ({"type": "object", "required": ["x"]}, "required must list names from properties"),
        ({"enum": []}, "enum must be a list of JSON scalars"),
        ({"type": "object", "properties": {"a": 3}}, "/properties/a: a schema must be an object"),
    ],
)
def test_json_schema_the_validator_cannot_enforce_is_refused(schema, words):
    with pytest.raises(SchemaError) as info:
        parse_schema(json.dumps(schema))
    assert words in str(info.value)
    assert "\n" not in str(info.value)


def test_schema_from_file(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(SEED_SCHEMA))
    (tmp_path / "s.dsl").write_text(SEED + "\n")
    (tmp_path / "bad.dsl").write_text("a:int,\nb:nope\n")
    assert parse_schema(f"@{tmp_path / 's.json'}") == SEED_SCHEMA
    assert parse_schema(f"@{tmp_path / 's.dsl'}") == SEED_SCHEMA
    with pytest.raises(SchemaError) as info:
        parse_schema(f"@{tmp_path / 'bad.dsl'}")
    assert str(info.value).startswith(
        f"bad --schema file {tmp_path / 'bad.dsl'} at line 2, column 3"
    )
    for spec in (f"@{tmp_path / 'missing.json'}", f"@{tmp_path}", "@"):
        with pytest.raises(SchemaError) as info:
            parse_schema(spec)
        assert "\n" not in str(info.value) and info.value.detail == ""


TOKENS = ["a", "b", "x1", ":", ",", "str", "int", "dec", "bool", "enum(", "|", ")", "(", "..",
          "1", "-2", "0.5", "[", "]", "{", "}", "?", "[]", '"d"', '"', "\\", " ", "\n", "\t",
          "é", "#", "\x00", "\r", "\u2028", "$", "'"]  # fmt: skip
ALPHABET = "abeimnorstu0123456789:,()[]{}?|.\"\\- \n\t@#é\x00\r\x85'$;"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(ALPHABET, max_size=40), st.lists(st.sampled_from(TOKENS), max_size=25).map("".join)
    )
)
def test_random_schema_strings_parse_or_fail_with_a_caret(spec):
    try:
        schema = parse_schema(spec)
    except SchemaError as e:
        assert "\n" not in str(e)
        if not spec.startswith("@") and not spec.lstrip().startswith("{"):
            line, caret = e.detail.split("\n")
            column = int(re.search(r"column (\d+):", str(e)).group(1))
            assert caret.endswith("^") and len(caret) == column <= len(line) + 1
        return
    assert isinstance(schema, dict)
    json.dumps(schema)
    build_validator(schema)


SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4)
)
KEYS = ["type", "properties", "items", "required", "enum", "minimum", "maxLength", "pattern",
        "anyOf", "additionalProperties", "minItems", "format", "a"]  # fmt: skip
JSONISH = st.recursive(
    SCALARS | st.sampled_from(["string", "integer", "number", "object", "array", "null"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(KEYS), JSONISH, max_size=4))
def test_random_json_schemas_are_enforced_or_refused(schema):
    try:
        validator = build_validator(parse_schema(json.dumps(schema)))
    except SchemaError as e:
        assert "\n" not in str(e)
        return
    for reply in ("{}", "[]", "1", '"x"', '{"a": 1}', "null", "true", "no json"):
        try:
            json.dumps(validator.validate(reply))
        except SchemaInvalid:
            pass


def test_deep_nesting_is_an_error_not_a_crash():
    with pytest.raises(SchemaError, match="nested more than"):
        parse_schema("a:{" * 500)
    with pytest.raises(SchemaError):
        parse_schema('{"type": "array", "items": ' * 2000 + "{}" + "}" * 2000)


# Validation

GOOD = {"distro": "Debian", "cores": 8, "load": 0.4, "swap": True}


def test_validator_accepts_and_returns_plain_json():
    v = build_validator(parse_schema(SEED))
    good = {"distro": "Debian", "cores": 8, "load": 0.5, "swap": True}
    assert v.validate(json.dumps(good)) == good
    assert v.validate('{"distro": "Arch", "cores": 4.0, "load": 1, "swap": false}') == {
        "distro": "Arch", "cores": 4, "load": 1, "swap": False,
    }  # fmt: skip


def seed_reply(**changes):
    """A reply for the seed schema: the good values with `changes` (None deletes a key)."""
    data = {k: v for k, v in {**GOOD, **changes}.items() if v is not None}
    return json.dumps(data)


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (seed_reply(cores="3"), '$.cores: Input should be a valid integer (got "3")'),
        (seed_reply(cores=2.5), "$.cores: Input should be a valid integer (got 2.5)"),
        (seed_reply(cores=True), "$.cores: Input should be a valid integer (got true)"),
        (seed_reply(cores=0), "$.cores: Input should be greater than or equal to 1 (got 0)"),
        (seed_reply(load=-0.1), "$.load: Input should be greater than or equal to 0 (got -0.1)"),
        (seed_reply(load="0.3"), '$.load: Input should be a valid number (got "0.3")'),
        (seed_reply(swap="yes"), '$.swap: Input should be a valid boolean (got "yes")'),
        (seed_reply(swap=1), "$.swap: Input should be a valid boolean (got 1)"),
        (seed_reply(distro=7), "$.distro: Input should be a valid string (got 7)"),
        (seed_reply(distro=None), "$.distro: required field is missing"),
        (seed_reply(ram=4), "$.ram: field not allowed by the schema (remove it)"),
        ('["Debian", 8]', "$: expected a JSON object"),
        ("I could not find out.", "the reply is not valid JSON"),
        ("", "the reply is empty"),
    ],
)
def test_validator_rejects(reply, problem):
    with pytest.raises(SchemaInvalid) as info:
        build_validator(parse_schema(SEED)).validate(reply)
    assert problem in info.value.problems[0]


def test_validator_lists_every_problem_with_its_path():
    v = build_validator(parse_schema("[title:str(1..), level:enum(low|high), sub:{n:int}?]"))
    with pytest.raises(SchemaInvalid) as info:
        v.validate(
            '[{"title": "ok", "level": "low"}, {"title": "", "level": "mid", "sub": {"n": "x"}}]'
        )
    assert info.value.problems == [
        '$[1].title: String should have at least 1 character (got "")',
        "$[1].level: Input should be 'low' or 'high' (got \"mid\")",
        '$[1].sub.n: Input should be a valid integer (got "x")',
    ]
    assert str(info.value) == "; ".join(info.value.problems)


@pytest.mark.parametrize(
    "reply",
    [
        '```json\n{"n": 3, "tags": ["a"]}\n```',
        '```\n{"n": 3, "tags": ["a"]}\n```',
        'Here is the JSON:\n\n```json\n{"n": 3, "tags": ["a"]}\n```\nHope it helps.',
        'Sure! {"n": 3, "tags": ["a"]} That is all.',
        'The answer [as asked] is {"n": 3, "tags": ["a"]}',
        '  {"n": 3, "tags": ["a"], "note": null}  ',
    ],
)
def test_validator_finds_the_json_in_fences_and_prose(reply):
    v = build_validator(parse_schema("n:int, tags:str[], note:str?"))
    assert v.validate(reply) == {
        "n": 3,
        "tags": ["a"],
        **({"note": None} if "note" in reply else {}),
    }


def test_optional_fields_may_be_missing_or_null_and_stay_so():
    v = build_validator(parse_schema("a:int, b:str?, c:{d:int}?"))
    assert v.validate('{"a": 1}') == {"a": 1}
    assert v.validate('{"a": 1, "b": null, "c": {"d": 2}}') == {"a": 1, "b": None, "c": {"d": 2}}


def test_top_level_array_and_json_schema_semantics():
    tasks = build_validator(parse_schema('[task_title:string:"Title of the subtask"]'))
    assert tasks.validate('[{"task_title": "a"}, {"task_title": "b"}]') == [
        {"task_title": "a"},
        {"task_title": "b"},
    ]
    loose = build_validator({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert loose.validate('{"a": 1, "extra": [1]}') == {"a": 1, "extra": [1]}  # JSON Schema default
    assert build_validator({"type": "string", "maxLength": 3}).validate('"abc"') == "abc"
    assert build_validator({"type": "number"}).validate("2.50") == 2.5


# The ghost exchange


def run(gen):
    """Drive a generator to its end: (events, return value)."""
    events = []
    while True:
        try:
            events.append(next(gen))
        except StopIteration as done:
            return events, done.value


CONVERSATION = [
    {"role": "system", "content": "You are agi."},
    {"role": "user", "content": "Describe this machine."},
    {"role": "assistant", "content": "It runs Debian with 8 cores; load 0.4; swap on."},
]


def ghost(server, messages, schema, **kw):
    records = []
    transport = Transport(ModelConfig("test", "m", server.url), trace=records.append)
    try:
        events, value = run(
            ghost_json(transport, messages, schema, schema_instruction(schema), **kw)
        )
    finally:
        transport.close()
    return events, value, records


def test_ghost_json_retries_with_the_validation_error():
    schema = parse_schema(SEED)
    bad = dict(GOOD, cores=0)
    messages = copy.deepcopy(CONVERSATION)
    with FakeModel(text(json.dumps(bad), reasoning="hmm"), text(json.dumps(GOOD))) as server:
        events, value, records = ghost(server, messages, schema)
    assert value == GOOD
    assert messages == CONVERSATION  # the caller's conversation is untouched
    assert len(server.requests) == 2
    first, second = server.requests
    for body in server.requests:
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": schema, "strict": False},
        }
        assert "tools" not in body
    assert first["messages"][:3] == CONVERSATION
    ask = first["messages"][3]
    assert (
        ask["role"] == "user" and '"cores"' in ask["content"] and "only the JSON" in ask["content"]
    )
    assert second["messages"][:4] == first["messages"]
    assert second["messages"][4] == {"role": "assistant", "content": json.dumps(bad)}
    retry = second["messages"][5]["content"]
    assert "$.cores: Input should be greater than or equal to 1 (got 0)" in retry
    assert not any(isinstance(e, TextDelta) for e in events)
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["hmm"]
    assert sum(isinstance(e, UsageEvent) for e in events) == 2
    assert records and all(r.get("ghost") is True for r in records)


def test_ghost_json_gives_up_after_three_invalid_replies():
    bad = json.dumps(dict(GOOD, cores="8"))
    messages = copy.deepcopy(CONVERSATION)
    with FakeModel(text(bad)) as server, pytest.raises(SchemaFailed) as info:
        ghost(server, messages, parse_schema(SEED))
    assert len(server.requests) == 3
    assert info.value.exit_code == 5
    last = '$.cores: Input should be a valid integer (got "8")'
    assert str(info.value) == f"no valid JSON after 3 attempts; last problem: {last}"
    assert messages == CONVERSATION


def test_ghost_json_falls_back_when_response_format_is_rejected():
    rejected = status(400, {"error": {"message": "response_format json_schema is not supported"}})
    with FakeModel(rejected, text("```json\n" + json.dumps(GOOD) + "\n```")) as server:
        _, value, _ = ghost(server, list(CONVERSATION), parse_schema(SEED))
    assert value == GOOD
    kinds = [body.get("response_format", {}).get("type") for body in server.requests]
    assert kinds == ["json_schema", "json_object"]  # the next form: json_object with the schema
    assert server.requests[1]["response_format"]["schema"] == parse_schema(SEED)
    assert server.requests[0]["messages"] == server.requests[1]["messages"]


def test_ghost_json_without_response_format_and_other_provider_errors():
    with FakeModel(text(json.dumps(GOOD))) as server:
        _, value, _ = ghost(
            server, list(CONVERSATION), parse_schema(SEED), use_response_format=False
        )
    assert value == GOOD and "response_format" not in server.requests[0]
    other = status(400, {"error": {"message": "max_tokens is too large"}})
    with FakeModel(other) as server, pytest.raises(ProviderError):
        ghost(server, list(CONVERSATION), parse_schema(SEED))
    assert len(server.requests) == 1


def test_judge():
    generic = judge_instruction(None)
    assert "achievable and was achieved" in generic and "P=NP" in generic
    assert judge_instruction("  ") == generic
    strict = judge_instruction("all tests pass")
    assert "all tests pass" in strict and "P=NP" not in strict
    verdict = {"reason": "P=NP is an open problem; no proof was given.", "success": False}
    with FakeModel(text(json.dumps(verdict))) as server:
        transport = Transport(ModelConfig("test", "m", server.url))
        _, value = run(ghost_json(transport, list(CONVERSATION), JUDGE_SCHEMA, generic))
        transport.close()
    assert value == verdict
    assert server.requests[0]["messages"][-1]["content"].startswith(generic)


def test_schema_instruction_names_the_shape():
    assert "a JSON object" in schema_instruction(parse_schema(SEED))
    assert "a JSON array" in schema_instruction(parse_schema("[a:int]"))


def test_importing_the_module_does_not_import_pydantic():
    code = "import sys, agi.structured.schema; print('pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
