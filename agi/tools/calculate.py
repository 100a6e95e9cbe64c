"""The calculate tool: arithmetic by a hand-written recursive-descent parser, never `eval`.

Python's semantics and precedence (`-2**2` is -4, `**` is right-associative, `/` is true
division), with `^` accepted as `**`. Integers stay exact; results are bounded (MAX_DIGITS) so
an expression like `9**9**9` is an error, not a hang.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from agi.errors import ToolError
from agi.tools.protocol import ToolContext, require

Number = int | float

MAX_DIGITS = 1000  # an integer result may have at most this many digits
MAX_DEPTH = 50  # nesting of parentheses, calls and exponents (each level costs ~5 stack frames)
LIMIT = 10**MAX_DIGITS

CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _round(x: Number, ndigits: Number | None = None) -> Number:
    if ndigits is None:
        return round(x)
    if not isinstance(ndigits, int):
        raise ToolError("round: the number of digits must be an integer")
    if abs(ndigits) > MAX_DIGITS:
        raise ToolError(f"round: the number of digits must be within ±{MAX_DIGITS}")
    return round(x, ndigits)


def _log(x: Number, base: Number | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


# name -> (function, fewest arguments, most arguments or None for any number)
FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int | None]] = {
    "sqrt": (math.sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "min": (min, 1, None),
    "max": (max, 1, None),
    "log": (_log, 1, 2),
    "log10": (math.log10, 1, 1),
    "log2": (math.log2, 1, 1),
    "exp": (math.exp, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
}

TOKEN = re.compile(
    r"(?P<number>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z_0-9]*)"
    r"|(?P<op>\*\*|//|[-+*/%^(),])"
)
LOOKALIKES = str.maketrans({"×": "*", "÷": "/", "−": "-"})  # as questions are often typed


def tokenize(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, 1-based position) for each token; kind is number, name or op."""
    tokens, i = [], 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        m = TOKEN.match(text, i)
        if not m:
            raise ToolError(f"syntax error at position {i + 1}: unexpected character {text[i]!r}")
        kind = m.lastgroup or "op"
        tokens.append((kind, m.group(), i + 1))
        i = m.end()
    return tokens


def check(value: Any) -> Number:
    """Reject what is not a finite real number of bounded size."""
    if isinstance(value, complex):
        raise ToolError("the result is not a real number (a negative number to a fractional power)")
    if isinstance(value, float):
        if math.isnan(value):
            raise ToolError("the result is not a number")
        if math.isinf(value):
            raise ToolError("the result is too large")
    elif isinstance(value, int) and abs(value) >= LIMIT:
        raise ToolError(f"the result has more than {MAX_DIGITS} digits")
    return value  # type: ignore[no-any-return]


def power(base: Number, exponent: Number) -> Number:
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and abs(base) >= 2
        and (exponent > 4 * MAX_DIGITS or exponent * math.log10(abs(base)) > MAX_DIGITS)
    ):
        raise ToolError(f"the result has more than {MAX_DIGITS} digits")
    return base**exponent


BINARY: dict[str, Callable[[Number, Number], Number]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "**": power,
    "^": power,
}


class Parser:
    """expression := term (('+'|'-') term)*     term := unary (('*'|'/'|'//'|'%') unary)*
    unary := ('-'|'+')* power                  power := primary (('**'|'^') unary)?
    primary := number | name | name '(' expression (',' expression)* ')' | '(' expression ')'
    """

    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0

    def peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def error(self, expected: str) -> ToolError:
        if self.i >= len(self.tokens):
            where, found = len(self.text) + 1, "the end of the expression"
        else:
            _, tok, where = self.tokens[self.i]
            found = repr(tok)
        return ToolError(f"syntax error at position {where}: expected {expected}, found {found}")

    def expect(self, op: str) -> None:
        if self.peek() != op:
            raise self.error(repr(op))
        self.i += 1

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ToolError(f"the expression is nested more than {MAX_DEPTH} levels deep")

    def parse(self) -> Number:
        if not self.tokens:
            raise ToolError("the expression is empty")
        value = self.expression()
        if self.i < len(self.tokens):
            raise self.error("an operator")
        return value

    def expression(self) -> Number:
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.tokens[self.i][1]
            self.i += 1
            value = check(BINARY[op](value, self.term()))
        return value

    def term(self) -> Number:
        value = self.unary()
        while self.peek() in ("*", "/", "//", "%"):
            op = self.tokens[self.i][1]
            self.i += 1
            value = check(BINARY[op](value, self.unary()))
        return value

    def unary(self) -> Number:
        signs = []
        while self.peek() in ("+", "-"):
            signs.append(self.tokens[self.i][1])
            self.i += 1
        value = self.power()
        for sign in reversed(signs):
            value = -value if sign == "-" else +value
        return value

    def power(self) -> Number:
        base = self.primary()
        if self.peek() in ("**", "^"):
            self.i += 1
            self.enter()
            exponent = self.unary()
            self.depth -= 1
            return check(power(base, exponent))
        return base

    def primary(self) -> Number:
        if self.i >= len(self.tokens):
            raise self.error("a number")
        kind, tok, _ = self.tokens[self.i]
        if kind == "number":
            self.i += 1
            return self.number(tok)
        if tok == "(":
            self.i += 1
            self.enter()
            value = self.expression()
            self.expect(")")
            self.depth -= 1
            return value
        if kind == "name":
            self.i += 1
            if self.peek() == "(":
                return self.call(tok)
            if tok in CONSTANTS:
                return CONSTANTS[tok]
            if tok in FUNCTIONS:
                raise ToolError(f"{tok} is a function: write {tok}(x)")
            raise ToolError(f"unknown name {tok!r} (known constants: {', '.join(CONSTANTS)})")
        raise self.error("a number")

    @staticmethod
    def number(tok: str) -> Number:
        if "." in tok or "e" in tok or "E" in tok:
            return check(float(tok))
        if len(tok) > MAX_DIGITS:
            raise ToolError(f"a number has more than {MAX_DIGITS} digits")
        return int(tok)

    def call(self, name: str) -> Number:
        if name not in FUNCTIONS:
            raise ToolError(f"unknown function {name!r} (known: {', '.join(FUNCTIONS)})")
        function, fewest, most = FUNCTIONS[name]
        self.expect("(")
        self.enter()
        args = [] if self.peek() == ")" else [self.expression()]
        while self.peek() == ",":
            self.i += 1
            args.append(self.expression())
        self.expect(")")
        self.depth -= 1
        if len(args) < fewest or (most is not None and len(args) > most):
            wanted = str(fewest) if most == fewest else f"{fewest} or {most}"
            if most is None:
                wanted = f"at least {fewest}"
            raise ToolError(f"{name} takes {wanted} argument(s), got {len(args)}")
        try:
            return check(function(*args))
        except ValueError as e:
            raise ToolError(f"{name}: {e}") from e


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression; every failure is a ToolError with a clear message."""
    try:
        return Parser(expression.translate(LOOKALIKES)).parse()
    except ZeroDivisionError as e:
        raise ToolError("division by zero") from e
    except OverflowError as e:
        raise ToolError("the result is too large") from e
    except ValueError as e:  # a math domain error outside a function: float ** float
        raise ToolError(str(e)) from e
    except RecursionError as e:
        raise ToolError("the expression is nested too deeply") from e


def format_number(value: Number) -> str:
    """Integers as integers; integer-valued floats without `.0`; others to 15 significant digits."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return format(value, ".15g")


class Calculate:
    name = "calculate"
    description = (
        "Evaluate an arithmetic expression exactly and safely: numbers (1e3), + - * / // % ** "
        "(or ^), parentheses, sqrt abs round floor ceil min max log exp sin cos tan (radians), "
        "pi, e."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "expression": {"type": "string", "description": "e.g. (12 * 9) + 3"},
        },
        "required": ["expression"],
    }

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        return format_number(evaluate(require(input, "expression")))
