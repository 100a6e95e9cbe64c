"""The calculate tool: a table of values and errors; properties against Python's arithmetic."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agi.errors import ToolError
from agi.tools import ToolContext
from agi.tools.calculate import Calculate, evaluate, format_number

SETTINGS = settings(max_examples=300, deadline=None)


def calc(expression: str) -> str:
    return Calculate().run({"expression": expression}, ToolContext())


@pytest.mark.parametrize(
    ("expression", "shown"),
    [
        ("(12 * 9) + 3", "111"),
        ("1 + 2 * 3", "7"),
        ("(1 + 2) * 3", "9"),
        ("10 - 4 - 3", "3"),
        ("2 ** 3 ** 2", "512"),  # right-associative
        ("-2 ** 2", "-4"),  # ** binds tighter than unary minus, as in Python
        ("(-2) ** 2", "4"),
        ("2 ** -1", "0.5"),
        ("2 ^ 10", "1024"),
        ("--3", "3"),
        ("+-+3", "-3"),
        ("7 / 2", "3.5"),
        ("6 / 3", "2"),  # an integer-valued quotient prints as an integer
        ("7 // 2", "3"),
        ("-7 % 3", "2"),
        ("7.5 % 2", "1.5"),
        ("1e3", "1000"),
        ("1.5e-3 * 2", "0.003"),
        (".5 + 1.", "1.5"),
        ("0.1 + 0.2", "0.3"),
        ("2 ** 100", "1267650600228229401496703205376"),  # integers stay exact
        ("10 ** 20 + 1", "100000000000000000001"),
        ("sqrt(16)", "4"),
        ("sqrt(2)", "1.4142135623731"),
        ("abs(-5)", "5"),
        ("round(2.567, 2)", "2.57"),
        ("round(2.5)", "2"),
        ("round(1234, -2)", "1200"),
        ("floor(-2.5) + ceil(2.1)", "0"),
        ("min(3, 1, 2) + max(4, 9)", "10"),
        ("log(e)", "1"),
        ("log(8, 2)", "3"),
        ("log10(1000) + log2(8)", "6"),
        ("exp(0)", "1"),
        ("sin(0) + cos(0) + tan(0)", "1"),
        ("round(sin(pi / 2), 6)", "1"),
        ("2 * pi", "6.28318530717959"),
        ("3 × 4 ÷ 2 − 1", "5"),
        ("  ( ( 1 ) )  ", "1"),
    ],
)
def test_values(expression, shown):
    assert calc(expression) == shown


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 / 0", "division by zero"),
        ("1 // 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("1.5 / 0.0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("log(2, 1)", "division by zero"),
        ("", "the expression is empty"),
        ("1 +", "syntax error at position 4: expected a number, found the end of the expression"),
        ("2 $ 3", "syntax error at position 3: unexpected character '$'"),
        ("(1 + 2", "syntax error at position 7: expected ')', found the end of the expression"),
        ("1 2", "syntax error at position 3: expected an operator, found '2'"),
        ("2 * * 3", "syntax error at position 5: expected a number, found '*'"),
        ("foo(1)", "unknown function 'foo'"),
        ("x + 1", "unknown name 'x'"),
        ("sqrt", "sqrt is a function: write sqrt(x)"),
        ("sqrt(-1)", "sqrt: math domain error"),
        ("round(1, 2, 3)", "round takes 1 or 2 argument(s), got 3"),
        ("min()", "min takes at least 1 argument(s), got 0"),
        ("round(2.5, 0.5)", "round: the number of digits must be an integer"),
        ("9 ** 9 ** 9", "the result has more than 1000 digits"),
        ("10 ** 1000", "the result has more than 1000 digits"),
        ("(10 ** 600) * (10 ** 600)", "the result has more than 1000 digits"),
        ("1" * 1001, "a number has more than 1000 digits"),
        ("10.0 ** 400", "the result is too large"),
        ("exp(1000)", "the result is too large"),
        ("1e999", "the result is too large"),
        ("(-8) ** (1 / 3)", "the result is not a real number"),
        ("(" * 60 + "1" + ")" * 60, "nested more than 50 levels"),
    ],
)
def test_errors(expression, message):
    with pytest.raises(ToolError) as info:
        calc(expression)
    assert message in str(info.value)


def test_division_by_zero_is_exactly_that():
    with pytest.raises(ToolError) as info:
        calc("1 / 0")
    assert str(info.value) == "division by zero"


def test_the_largest_allowed_integer():
    assert calc("10 ** 999") == "1" + "0" * 999


def test_input_must_be_a_string():
    with pytest.raises(ToolError, match="'expression' is required"):
        Calculate().run({"expression": 12}, ToolContext())


def test_format_number():
    assert format_number(111) == "111"
    assert format_number(111.0) == "111"
    assert format_number(-0.0) == "0"
    assert format_number(1e20) == "1e+20"
    assert format_number(1 / 3) == "0.333333333333333"


# --- properties ----------------------------------------------------------------------------

arithmetic_text = st.lists(
    st.one_of(
        st.sampled_from(list("0123456789.eE+-*/%^(),_ ") + ["**", "//", "sqrt(", "pi", "round("]),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=60,
).map("".join)


@SETTINGS
@given(arithmetic_text)
@example("(" * 2000)
@example("-" * 5000 + "1")
@example("2" + "**2" * 500)
@example("round(5, -10**9)")
@example("9" * 5000)
def test_random_text_raises_only_tool_errors(text):
    try:
        assert isinstance(calc(text), str)
    except ToolError:
        pass


def leaf() -> st.SearchStrategy[str]:
    return st.integers(0, 20).map(str)


def combine(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.tuples(children, st.sampled_from(["+", "-", "*", "/", "%", "**"]), children).map(
        " ".join
    )
    return st.one_of(
        binary,
        children.map(lambda c: f"({c})"),
        children.map(lambda c: f"-{c}"),
        children.map(lambda c: f"+ {c}"),
    )


expressions = st.recursive(leaf(), combine, max_leaves=12)


@SETTINGS
@given(expressions)
@example("-2 ** 2")
@example("2 ** -1 ** 2")
@example("0 ** -1")
@example("7 % -3 / 2")
def test_agrees_with_python(expression):
    try:
        ours = evaluate(expression)
    except ToolError as e:
        if str(e) == "division by zero":
            with pytest.raises(ZeroDivisionError):
                eval(expression)  # the oracle; values so far were bounded, so this is quick
        return  # too large, or complex: Python would hang or leave the reals
    theirs = eval(expression)
    assert type(ours) is type(theirs)
    assert ours == theirs or (math.isnan(ours) and math.isnan(theirs))
