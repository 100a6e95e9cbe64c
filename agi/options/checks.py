"""What an option's value may be: the config file's checks (a test and the words an error uses)
and the command line's converters. Imported for `agi --help` too, so it imports nothing."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: --version and --help import no typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Check = tuple[Callable[[Any], bool], str]


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


TEXT: Check = (lambda v: isinstance(v, str) and v != "", "a non-empty string")
BOOL: Check = (lambda v: isinstance(v, bool), "true or false")
POSITIVE: Check = (lambda v: _number(v) and 0 < v < float("inf"), "a positive number")
COUNT: Check = (lambda v: _integer(v) and v >= 1, "a positive integer")
NAMES: Check = (
    lambda v: isinstance(v, str) or isinstance(v, list) and all(isinstance(x, str) for x in v),
    "a string or a list of strings",
)
CRITERIA: Check = (lambda v: isinstance(v, (bool, str)), "true, false or the criteria")
TOKENS: Check = (lambda v: _integer(v) and v >= 256, "a number of tokens (at least 256)")
FRACTION: Check = (
    lambda v: _number(v) and 0 < v <= 1,
    "a fraction of the context window, above 0 and at most 1",
)
BYTES: Check = (lambda v: _integer(v) and v >= 1, "a positive number of bytes")
PRICE: Check = (lambda v: _number(v) and v >= 0, "a number of USD per million tokens")


def table(description: str) -> Check:
    """A TOML table (`params = { temperature = 0.2 }`, `[providers.NAME]`)."""
    return (lambda v: isinstance(v, dict), description)


def one_of(*values: str, quoted: bool = False) -> Check:
    """One of a few words; `quoted` shows them in quotes, as TOML writes them."""
    shown = ", ".join(f'"{v}"' if quoted else v for v in values)
    return (lambda v: v in values, f"one of {shown}")


def number(text: str, kind: type = int) -> Any:
    """`text` as an int (ASCII digits only) or a float (ASCII digits, one point, an exponent):
    int() and float() would also take `1_0`, spaces and other scripts' digits. ValueError
    when it is none of these."""
    import re

    shape = r"[+-]?[0-9]+" if kind is int else r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
    if not isinstance(text, str) or not re.fullmatch(shape, text, re.ASCII):
        raise ValueError(f"not a number: {text!r}")
    return kind(text)


def positive(kind: type) -> Any:
    """The command line's converter to a finite positive number (agi.options.config caps
    timeouts: 1e12 s is no overflow)."""

    def convert(text: str) -> Any:
        import argparse
        import math

        try:
            value = number(text, kind)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number: {text!r}")
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value

    convert.__name__ = kind.__name__
    return convert


def whole(low: int, high: int) -> Any:
    """The command line's converter to a whole number from `low` to `high` (`--jobs`)."""

    def convert(text: str) -> int:
        import argparse

        try:
            value = number(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low} to {high}: {text!r}")
        return value

    convert.__name__ = "int"
    return convert
