"""The --schema DSL (docs: structured) -> JSON Schema, with errors that point at the spot.

For example `name: str, age: int(0..150)?, tags: str[], kind: enum(a|b): "what it is"`.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from agi.errors import UsageError

BASES = {"str": "string", "int": "integer", "dec": "number", "bool": "boolean"}
BASES |= {"decimal": "number", "float": "number"} | {t: t for t in BASES.values()}
EXPECTED_TYPE = "expected a type (str, int, dec, bool, enum(...), [..], {..})"
NAME = re.compile(r"[^\W\d][\w-]*")
WORD = re.compile(r"[^\s|(),:\"\[\]{}?]+")
NUMBER = re.compile(r"-?\d{1,30}(?:\.\d{1,30})?(?:[eE][-+]?\d{1,2})?")  # always finite
MAX_DEPTH = 32


class SchemaError(UsageError):
    """A bad --schema (exit 2); `detail` is the offending line and a caret under the spot, or ''."""

    def __init__(self, message: str, detail: str = ""):
        super().__init__("".join(c if c.isprintable() else repr(c)[1:-1] for c in message))
        self.detail = detail


def error_at(text: str, pos: int, message: str, source: str = "--schema") -> SchemaError:
    """A SchemaError at `pos` of `text`: a one-line message, and the line with a caret as detail."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    line, column = text[start : end if end >= 0 else len(text)], pos - start + 1
    where = f"column {column}"
    if "\n" in text.strip():
        where = f"line {text.count(chr(10), 0, pos) + 1}, {where}"
    shown = "".join(c if c.isprintable() or c == "\t" else " " for c in line)
    caret = "".join(c if c == "\t" else " " for c in shown[: column - 1]) + "^"
    return SchemaError(f"bad {source} at {where}: {message}", f"{shown}\n{caret}")


class Parser:
    """A recursive-descent parser of the grammar in docs: structured (with exact positions)."""

    def __init__(self, text: str, source: str):
        self.text, self.source, self.pos, self.depth = text, source, 0, 0

    def fail(self, message: str, pos: int | None = None) -> NoReturn:
        raise error_at(self.text, self.pos if pos is None else pos, message, self.source)

    def skip(self) -> int:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        return self.pos

    def peek(self) -> str:
        return self.text[self.skip() : self.pos + 1]

    def eat(self, token: str) -> bool:
        found = self.text.startswith(token, self.skip())
        self.pos += len(token) if found else 0
        return found

    def expect(self, token: str, message: str) -> None:
        if not self.eat(token):
            self.fail(message)

    def match(self, pattern: re.Pattern[str]) -> str | None:
        m = pattern.match(self.text, self.skip())
        self.pos = m.end() if m else self.pos
        return m.group() if m else None

    def top(self) -> dict[str, Any]:
        schema = self.objects() if self.eat("[") else self.fields()
        if self.peek():
            self.fail("expected ',' or the end of the schema")
        return schema

    def fields(self) -> dict[str, Any]:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail(f"nested more than {MAX_DEPTH} levels deep")
        properties: dict[str, Any] = {}
        required: list[str] = []
        while True:
            start = self.skip()
            name = self.match(NAME)
            if name is None:
                self.fail("expected a field name")
            if name in properties:
                self.fail(f"duplicate field {name!r}", start)
            self.expect(":", f"expected ':' after the field name {name!r}")
            properties[name], optional = self.type()
            if self.eat(":"):
                properties[name]["description"] = self.description()
            required += [] if optional else [name]
            if not self.eat(","):
                break
        self.depth -= 1
        object_ = {"type": "object", "properties": properties, "required": required}
        return {**object_, "additionalProperties": False}

    def objects(self) -> dict[str, Any]:
        schema = {"type": "array", "items": self.fields()}
        self.expect("]", "expected ',' or ']'")
        return schema

    def type(self) -> tuple[dict[str, Any], bool]:
        """`base`, `base(MIN..MAX)`, `base[]`, `[fields]` or `{fields}`; any may end in `?`."""
        if self.eat("["):
            schema = self.objects()
        elif self.eat("{"):
            schema = self.fields()
            self.expect("}", "expected ',' or '}'")
        else:
            start = self.skip()
            word = self.match(NAME)
            if word is None or (word not in BASES and word != "enum"):
                self.fail(
                    f"unknown type {word!r}; {EXPECTED_TYPE}" if word else EXPECTED_TYPE, start
                )
            schema = self.enum() if word == "enum" else {"type": BASES[word]}
            if self.peek() == "(":
                self.range(schema)
            if self.eat("["):
                self.expect("]", "expected ']' (a list of values is written like str[])")
                schema = {"type": "array", "items": schema}
        return schema, self.eat("?")

    def enum(self) -> dict[str, Any]:
        self.expect("(", "expected '(' after enum, as in enum(a|b)")
        words: list[str] = []
        while True:
            word = self.match(WORD)
            if word is None:
                self.fail("expected an enum value")
            words.append(word)
            if not self.eat("|"):
                break
        self.expect(")", "expected '|' or ')'")
        return {"type": "string", "enum": list(dict.fromkeys(words))}

    def range(self, schema: dict[str, Any]) -> None:
        start, kind = self.pos, schema["type"]
        if kind not in ("string", "integer", "number") or "enum" in schema:
            self.fail("a range (MIN..MAX) applies only to numbers and str")
        self.eat("(")
        low = self.number(kind)
        self.expect("..", "expected '..' in the range (MIN..MAX)")
        high = self.number(kind)
        self.expect(")", "expected a number or ')'")
        if low is not None and high is not None and low > high:
            self.fail("the range's minimum is above its maximum", start)
        keys = ("minLength", "maxLength") if kind == "string" else ("minimum", "maximum")
        schema.update({k: v for k, v in zip(keys, (low, high), strict=True) if v is not None})

    def number(self, kind: str) -> int | float | None:
        start = self.skip()
        token = self.match(NUMBER)
        if token is None:
            return None
        whole = re.fullmatch(r"-?\d+", token) is not None
        if kind == "string" and (not whole or token.startswith("-")):
            self.fail("a string length must be a whole number, 0 or more", start)
        return int(token) if whole else float(token)

    def description(self) -> str:
        start = self.skip()
        if not self.eat('"'):
            self.fail('expected a "double-quoted" description')
        out: list[str] = []
        while self.pos < len(self.text):
            c = self.text[self.pos]
            self.pos += 1
            if c == '"':
                return "".join(out)
            if c == "\\" and self.pos < len(self.text):
                c, self.pos = self.text[self.pos], self.pos + 1
                c = {"n": "\n", "t": "\t", "r": "\r"}.get(c, c)
            out.append(c)
        self.fail('unterminated description: no closing "', start)
