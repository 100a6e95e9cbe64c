"""--schema: JSON Schema -> pydantic validation; the ghost exchange (also for --exit-code).

The DSL is parsed in agi.structured.dsl; parse_schema takes either form (or @FILE).

The ghost exchange asks for JSON on a copy of the conversation, so none of it reaches the session.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from agi.errors import ProviderError, SchemaFailed, UsageError
from agi.fileio import loads, read_text
from agi.messages import MAX_NESTING, ReasoningDelta, Reply, Returning, UsageEvent, user
from agi.prompts import harness_text
from agi.providers.capabilities import FORMATS, Formats, request_format
from agi.providers.errors import refuses_format

if TYPE_CHECKING:
    from agi.engine.seams import ModelStream
from agi.structured.dsl import MAX_DEPTH, NAME, Parser, SchemaError, error_at

__all__ = [
    "JUDGE_SCHEMA",
    "SchemaError",
    "SchemaInvalid",
    "build_validator",
    "extract_json",
    "ghost_json",
    "judge_instruction",
    "parse_schema",
    "schema_instruction",
]

JUDGE_SCHEMA: dict[str, Any] = {  # reason first: the model argues before it decides
    "type": "object",
    "properties": {
        "reason": {"type": "string", "description": "One or two sentences: why, with evidence"},
        "success": {"type": "boolean", "description": "Whether the task was achieved"},
    },
    "required": ["reason", "success"],
    "additionalProperties": False,
}


class SchemaInvalid(ValueError):
    """A reply that is not JSON matching the schema; `problems` lists each error with its path."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def named_file(spec: str) -> bool:
    """A DSL value that reads as a file's name: one word ending in .json or naming a file."""
    word = spec.strip()
    if not word or any(c.isspace() for c in word) or ":" in word:
        return False
    return word.lower().endswith((".json", ".schema")) or Path(word).expanduser().is_file()


def parse_schema(spec: str, source: str = "--schema") -> dict[str, Any]:
    """A schema value (DSL, JSON Schema literal, @FILE) as JSON Schema; SchemaError if bad.
    `source` names the option in errors (`--schema`, `config.toml: schema`, an MCP call's)."""
    if spec.startswith("@"):
        if not spec[1:]:
            raise SchemaError(f"bad {source}: a file name must follow @")
        path = Path(spec[1:]).expanduser()
        try:
            spec = read_text(path)  # bounded (docs: security)
        except (OSError, ValueError, UsageError) as e:  # also undecodable text, a NUL in the name
            reason = getattr(e, "strerror", None) or str(e)
            raise SchemaError(f"cannot read {source} file {path}: {reason}") from e
        source = f"{source} file {path}"
    if not spec.lstrip().startswith("{"):
        try:
            return Parser(spec, source).top()
        except SchemaError:
            if named_file(spec):  # `--schema s.json`: the file was meant
                raise SchemaError(
                    f"bad {source}: {spec!r} is not a schema; a schema in a file is @FILE "
                    f"({source} @{spec})"
                ) from None
            raise
    try:
        schema = loads(spec)
    except json.JSONDecodeError as e:
        hint = f"not valid JSON ({e.msg}); a schema starting with {{ is read as JSON Schema"
        raise error_at(spec, e.pos, hint, source) from None
    except (ValueError, RecursionError) as e:
        raise SchemaError(f"bad {source}: not valid JSON ({e})") from None
    build_validator(schema)  # what the validator cannot enforce is a usage error, found now
    return schema


# JSON Schema -> pydantic types. Only keywords the validator enforces are accepted.
ANNOTATIONS = {"title", "description", "examples", "default", "$schema", "$id", "$comment"}
NUMERIC = {"minimum": "ge", "maximum": "le", "exclusiveMinimum": "gt", "exclusiveMaximum": "lt"}
NUMERIC |= {"multipleOf": "multiple_of"}
CONSTRAINTS = {  # per type; JSON Schema ignores a keyword on values of other types
    "integer": NUMERIC, "number": NUMERIC,
    "string": {"minLength": "min_length", "maxLength": "max_length", "pattern": "pattern"},
    "array": {"minItems": "min_length", "maxItems": "max_length"},
}  # fmt: skip
KEYWORDS = {"type", "enum", "properties", "required", "additionalProperties", "items", "anyOf"}
KEYWORDS |= {key for keys in CONSTRAINTS.values() for key in keys}
TYPES = ("string", "integer", "number", "boolean", "object", "array", "null")
NULL = {"type": "null"}


def _whole(value: Any) -> Any:
    """JSON Schema counts 3.0 as an integer: accept it, as 3."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _compact(value: float) -> float | int:
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _bad(path: str, message: str) -> NoReturn:
    raise SchemaError(f"bad --schema (JSON Schema) at {path or '/'}: {message}")


def _pydantic_type(node: Any, path: str = "", depth: int = 0) -> Any:
    """The pydantic type enforcing `node`; SchemaError for anything it could not enforce."""
    from typing import Literal, Optional

    if depth > MAX_DEPTH:
        _bad(path, f"nested more than {MAX_DEPTH} levels deep")
    if node is True or node == {}:
        return Any
    if not isinstance(node, dict):
        _bad(path, "a schema must be an object")
    for key in sorted(set(node) - KEYWORDS - ANNOTATIONS):
        _bad(path, f"agi cannot enforce {key!r} (it knows {', '.join(sorted(KEYWORDS))})")
    if "anyOf" in node:  # only as pydantic writes Optional[X]
        options = node["anyOf"]
        if not (isinstance(options, list) and len(options) == 2 and NULL in options):
            _bad(path, 'anyOf is supported only as [SCHEMA, {"type": "null"}]')
        other = options[1 - options.index(NULL)]
        return Optional[_pydantic_type(other, f"{path}/anyOf", depth + 1)]  # noqa: UP045
    if "enum" in node:
        values = node["enum"]
        if not (isinstance(values, list) and values) or any(
            isinstance(v, list | dict) for v in values
        ):
            _bad(path, "enum must be a list of JSON scalars")
        return Literal[tuple(values)]
    types = node.get("type", [])
    types = [types] if isinstance(types, str) else types
    if not isinstance(types, list) or any(t not in TYPES for t in types):
        _bad(path, f"type must be one of {', '.join(TYPES)}, or a list of them")
    base = _typed(_kind(node, types, path), node, path, depth)
    return Optional[base] if "null" in types else base  # noqa: UP045


def _kind(node: dict[str, Any], types: list[str], path: str) -> str:
    """The one JSON type a node stands for besides null, '' for any; implied by its keywords."""
    kinds = [t for t in types if t != "null"]
    if len(kinds) > 1:
        _bad(path, 'several types are supported only as [TYPE, "null"]')
    if kinds:
        return kinds[0]
    return "object" if "properties" in node else "array" if "items" in node else ""


def _typed(kind: str, node: dict[str, Any], path: str, depth: int) -> Any:
    """The pydantic type of one JSON type, with the node's constraints on it."""
    from typing import Annotated

    from pydantic import BeforeValidator, Field, PlainSerializer

    limits: dict[str, Any] = {}
    for key, name in CONSTRAINTS.get(kind, {}).items():
        value, want = node.get(key), str if key == "pattern" else (int, float)
        if value is not None and (isinstance(value, bool) or not isinstance(value, want)):
            _bad(path, f"{key} must be a {'string' if want is str else 'number'}")
        limits |= {name: value} if value is not None else {}
    if kind == "object":
        return _model(node, path, depth)
    if kind == "array":
        item = _pydantic_type(node.get("items", True), f"{path}/items", depth + 1)
        return Annotated[list[item], Field(**limits)]  # type: ignore[valid-type]
    if kind == "integer":
        return Annotated[int, Field(**limits), BeforeValidator(_whole)]
    if kind == "number":
        return Annotated[float, Field(**limits), PlainSerializer(_compact)]
    if kind:
        python = str if kind == "string" else bool
        return Annotated[python, Field(**limits)]  # type: ignore[valid-type]
    return Any


def _model(node: dict[str, Any], path: str, depth: int) -> Any:
    """A model per object; fields are aliased, so any property name works (even `schema`)."""
    from typing import Optional

    from pydantic import ConfigDict, Field, create_model

    properties, required = node.get("properties", {}), node.get("required", [])
    extra = node.get("additionalProperties", True)
    if not isinstance(properties, dict):
        _bad(path, "properties must be an object")
    if not isinstance(required, list) or not all(
        isinstance(r, str) and r in properties for r in required
    ):
        _bad(path, "required must list names from properties")
    if not isinstance(extra, bool):
        _bad(path, "additionalProperties is supported only as true or false")
    fields: dict[str, Any] = {}
    for i, (name, sub) in enumerate(properties.items()):
        t = _pydantic_type(sub, f"{path}/properties/{name}", depth + 1)
        desc = sub.get("description") if isinstance(sub, dict) else None
        if name in required:
            fields[f"f{i}"] = (t, Field(alias=name, description=desc))
        else:  # optional: may be missing or null
            fields[f"f{i}"] = (Optional[t], Field(None, alias=name, description=desc))  # noqa: UP045
    config = ConfigDict(extra="allow" if extra else "forbid")
    return create_model("Object", __config__=config, **fields)


class Validator:
    """Finds the JSON value in a reply and validates it strictly against the schema."""

    def __init__(self, schema: dict[str, Any]):
        from pydantic import TypeAdapter

        built = _pydantic_type(schema)
        try:
            self.adapter: Any = TypeAdapter(built)
        except Exception as e:  # pydantic's own refusal, e.g. a pattern its regex engine rejects
            raise SchemaError(f"bad --schema (JSON Schema): {str(e).splitlines()[0]}") from None
        kind = str(schema.get("type")) if isinstance(schema, dict) else ""
        self.starts = {"object": "{", "array": "["}.get(kind, "{[")

    def validate(self, text: str) -> Any:
        """The reply's JSON as plain data; SchemaInvalid naming each problem with its JSON path."""
        from pydantic import ValidationError

        data = extract_json(text, self.starts)
        try:
            value = self.adapter.validate_python(data, strict=True)  # "3" is no int, "yes" no bool
        except ValidationError as e:
            raise SchemaInvalid(_problems(e)) from None
        return self.adapter.dump_python(value, mode="json", by_alias=True, exclude_unset=True)


def build_validator(schema: dict[str, Any]) -> Validator:
    return Validator(schema)


def extract_json(text: str, starts: str = "{[") -> Any:
    """The single JSON value in a reply: bare, inside a ``` fence, or surrounded by prose."""
    text = text.strip()
    try:
        return shallow(loads(text))  # nested too deep: a problem told to the model, no traceback
    except ValueError as e:
        first = e
    if "nested too deep" in str(first):
        raise SchemaInvalid([f"the reply is not valid JSON ({first}); it must be one JSON value"])
    for block in re.findall(r"```[\w-]*[ \t]*\n(.*?)```", text, re.S):
        try:
            return shallow(loads(block))
        except ValueError:
            pass
    for m in re.finditer("[" + re.escape(starts) + "]", text):
        try:
            return shallow(json.JSONDecoder().raw_decode(text, m.start())[0])
        except (ValueError, RecursionError):
            continue
    reason = "is empty" if not text else f"is not valid JSON ({first})"
    raise SchemaInvalid([f"the reply {reason}; it must be one JSON value"])


def shallow(value: Any) -> Any:
    """`value` when it nests at most MAX_NESTING levels (what takes it apart later may recurse);
    else a ValueError saying so. Walked without recursion."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= MAX_NESTING:
                raise ValueError(f"nested too deep: more than {MAX_NESTING} levels")
            stack += [(v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)]
    return value


MESSAGES = {
    "missing": "required field is missing",
    "extra_forbidden": "field not allowed by the schema (remove it)",
    "model_type": "expected a JSON object",
}


def _problems(error: Any, limit: int = 10) -> list[str]:
    """Each pydantic error as `$.path[0].to: what is wrong (got VALUE)`, for the model to fix."""
    out: list[str] = []
    for err in error.errors(include_url=False):
        path = "$"
        for p in err["loc"]:
            key = isinstance(p, str) and NAME.fullmatch(p)
            path += f".{p}" if key else f"[{p if isinstance(p, int) else json.dumps(p)}]"
        got = json.dumps(err["input"], ensure_ascii=False, default=repr)
        got = got if len(got) <= 60 else got[:57] + "..."
        message = MESSAGES.get(err["type"], err["msg"])
        out.append(f"{path}: {message}" + ("" if err["type"] in MESSAGES else f" (got {got})"))
    return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])


def schema_instruction(schema: dict[str, Any]) -> str:
    """The ghost request of plain --schema: give the answer as JSON of the schema's shape."""
    kinds = {"object": "a JSON object", "array": "a JSON array"}
    return harness_text("schema_request").format(kind=kinds.get(str(schema.get("type")), "JSON"))


def judge_instruction(criteria: str | None) -> str:
    """The ghost request of --exit-code: was the task achieved (by CRITERIA or the generic rule)?"""
    if criteria and criteria.strip():
        rule = harness_text("judge_criteria").format(criteria=criteria.strip())
    else:
        rule = harness_text("judge_generic")
    return harness_text("judge").format(rule=rule)


def ask_once(
    transport: ModelStream, messages: list[Any], extra: dict[str, Any]
) -> Generator[Any, None, Reply]:
    """One request without tools (a ghost one, or a one-call answer): pass reasoning on, keep
    the JSON text to ourselves, report usage."""
    stream = Returning(transport.stream(messages, [], **extra))
    for event in stream:
        if isinstance(event, ReasoningDelta):
            yield event
    reply: Reply = stream.value  # type: ignore[assignment]  # set once the stream ends
    if reply.usage:
        yield UsageEvent(reply.usage)
    return reply


def ghost_json(
    transport: ModelStream,
    messages: list[dict[str, Any]],
    schema: dict[str, Any],
    instruction: str,
    attempts: int = 3,
    use_response_format: bool = True,
    formats: Formats | None = None,
) -> Generator[Any, None, Any]:
    """Ask for JSON matching `schema` on a copy of `messages`; return the validated data.

    Yields only ReasoningDelta and UsageEvent (one per reply): the JSON text is never streamed,
    so no renderer can mistake it for the answer. Raises SchemaFailed after `attempts` invalid
    replies, SchemaError for a schema it cannot enforce; the caller's list is never changed.
    `formats` says which forms of structured output the endpoint may take
    (agi.providers.capabilities);
    a refused form is not counted as an attempt.
    """
    validator = build_validator(schema)
    layout = json.dumps(schema, indent=2, ensure_ascii=False)
    prompt = instruction.rstrip() + "\n\n" + harness_text("json_format").format(schema=layout)
    convo = [*messages, user(prompt)]
    formats = formats or Formats()
    if not use_response_format:
        formats.refused = [k for k in FORMATS if k != "instructions"]
    problem = ""
    for _ in range(max(1, attempts)):
        reply = yield from _negotiate(transport, convo, schema, formats)
        try:
            return validator.validate(reply.text)
        except SchemaInvalid as e:
            problem = str(e)
            bullets = "\n".join(f"- {p}" for p in e.problems)
            convo += [reply.to_message(), user(harness_text("json_retry").format(problems=bullets))]
    problem = problem if len(problem) <= 300 else problem[:297] + "..."
    raise SchemaFailed(f"no valid JSON after {max(1, attempts)} attempts; last problem: {problem}")


def _negotiate(
    transport: ModelStream, convo: list[Any], schema: dict[str, Any], formats: Formats
) -> Generator[Any, None, Reply]:
    """One reply, in the strongest form of structured output the endpoint has not refused:
    json_schema, then json_object with the schema, then json_object, then the prompt alone."""
    while True:
        kind = formats.order()[0]
        try:
            ghost = {"mark": {"ghost": True}, **request_format(kind, schema)}
            return (yield from ask_once(transport, convo, ghost))
        except ProviderError as e:
            if kind == "instructions" or not refuses_format(e):
                raise
            formats.refuse(kind)
