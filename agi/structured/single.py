"""--schema in one model call (docs: volume): a run that keeps no conversation and offers no
tools sends the schema with its first request, and a valid reply is the answer.

The request carries the strongest form of structured output the endpoint has not refused
(agi.providers.capabilities, remembered per endpoint): `json_schema`, or `json_object` with the
schema (a grammar), both of which the server enforces, so the prompt goes as it is; with the
weaker forms (`json_object` alone, nothing) the schema instruction is added to that request
only, as a last user message. An invalid reply is answered with its problems, within the
ghost exchange's attempts (docs: structured); runs that keep a session or offer tools keep the
ghost exchange of agi.structured.schema."""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from agi.errors import ProviderError, SchemaFailed
from agi.messages import Reply, StepStart, user
from agi.prompts import harness_text, tool_less_system
from agi.providers.capabilities import Formats, request_format
from agi.providers.errors import refuses_format
from agi.structured.schema import SchemaInvalid, ask_once, build_validator

if TYPE_CHECKING:
    from agi.engine.seams import ModelStream

ENFORCED = ("json_schema", "json_object_schema")  # the server holds the reply to the schema


def answer_instruction(schema: dict[str, Any]) -> str:
    """What a request in a weaker form adds: answer as JSON of this schema."""
    kinds = {"object": "a JSON object", "array": "a JSON array"}
    asked = harness_text("schema_answer").format(kind=kinds.get(str(schema.get("type")), "JSON"))
    layout = json.dumps(schema, indent=2, ensure_ascii=False)
    return asked + "\n\n" + harness_text("json_format").format(schema=layout)


def held(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages of a request whose reply the server holds to the schema: the lean built-in
    system prompt, which says nothing the schema does not, left out (docs: prompts)."""
    first = messages[0] if messages else {}
    if first.get("role") != "system" or not isinstance(first.get("content"), str):
        return messages
    system = tool_less_system(first["content"], enforced=True)
    if system == first["content"]:
        return messages
    return ([{**first, "content": system}] if system else []) + messages[1:]


def one_call_json(
    transport: ModelStream,
    messages: list[dict[str, Any]],
    schema: dict[str, Any],
    formats: Formats,
    attempts: int = 3,
) -> Generator[Any, None, tuple[Any, Reply, int]]:
    """The answer to `messages` (the system prompt and the user's prompt) as JSON valid under
    `schema`: (the data, the reply that held it, the model calls made). Yields a StepStart
    before each call, ReasoningDelta, and one UsageEvent per reply (the JSON text is not
    streamed); SchemaFailed after
    `attempts` invalid replies. A refused form costs a call but no attempt."""
    validator = build_validator(schema)
    convo = list(messages)
    calls, problem = 0, ""
    for _ in range(max(1, attempts)):
        while True:
            kind = formats.order()[0]
            asked = held(convo) if kind in ENFORCED else [*convo, user(answer_instruction(schema))]
            calls += 1
            yield StepStart(calls)
            try:
                reply = yield from ask_once(transport, asked, request_format(kind, schema))
                break
            except ProviderError as e:
                if kind == "instructions" or not refuses_format(e):
                    raise
                formats.refuse(kind)
        try:
            return validator.validate(reply.text), reply, calls
        except SchemaInvalid as e:
            problem = str(e)
            bullets = "\n".join(f"- {p}" for p in e.problems)
            retry = user(harness_text("json_retry").format(problems=bullets))
            convo = [*asked, reply.to_message(), retry]
    problem = problem if len(problem) <= 300 else problem[:297] + "..."
    raise SchemaFailed(f"no valid JSON after {max(1, attempts)} attempts; last problem: {problem}")
