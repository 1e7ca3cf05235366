"""Integers as Go's strconv reads them (issue 24, item 7): what Python's int() reads besides."""

from __future__ import annotations

import pytest

from koordsched.api.goint import GoIntError, parse_int


@pytest.mark.parametrize(
    ("text", "bits", "expected"),
    [
        ("0", 64, 0),
        ("2", 64, 2),
        ("+2", 64, 2),
        ("-2", 64, -2),
        ("007", 64, 7),
        ("9223372036854775807", 64, 2**63 - 1),
        ("-9223372036854775808", 64, -(2**63)),
        ("2147483647", 32, 2**31 - 1),
    ],
)
def test_read(text: str, bits: int, expected: int) -> None:
    assert parse_int(text, bits) == expected


@pytest.mark.parametrize(
    ("text", "bits", "why"),
    [
        ("", 64, "invalid syntax"),
        ("+", 64, "invalid syntax"),
        (" 2", 64, "invalid syntax"),
        ("2 ", 64, "invalid syntax"),
        ("2_0", 64, "invalid syntax"),
        ("\u0968", 64, "invalid syntax"),  # Devanagari two: int() reads it as 2
        ("\uff12", 64, "invalid syntax"),  # fullwidth two
        ("0x10", 64, "invalid syntax"),
        ("1e3", 64, "invalid syntax"),
        ("--2", 64, "invalid syntax"),
        ("9223372036854775808", 64, "value out of range"),
        ("2147483648", 32, "value out of range"),
    ],
)
def test_refused_as_go_refuses(text: str, bits: int, why: str) -> None:
    with pytest.raises(GoIntError, match=why):
        parse_int(text, bits)
