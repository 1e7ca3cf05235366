"""resource.Quantity parsing, rounding and canonical printing against Kubernetes' behaviour."""

from __future__ import annotations

from fractions import Fraction

import pytest

from koordsched.api.quantity import (
    QuantityError,
    QuantityFormat,
    detect_format,
    format_bytes,
    format_milli_cpu,
    format_quantity,
    int_value,
    milli_value,
    parse_quantity,
    show_quantity,
)

KI = 1024
MI = KI**2
GI = KI**3


@pytest.mark.parametrize(
    ("q", "want"),
    [
        ("0", Fraction(0)),
        ("1", Fraction(1)),
        ("64", Fraction(64)),
        ("+5", Fraction(5)),
        ("-5", Fraction(-5)),
        ("007", Fraction(7)),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("1.", Fraction(1)),
        ("1.5", Fraction(3, 2)),
        ("-1.5", Fraction(-3, 2)),
        ("100m", Fraction(1, 10)),
        ("0.1m", Fraction(1, 10_000)),
        ("1n", Fraction(1, 10**9)),
        ("1u", Fraction(1, 10**6)),
        ("2k", Fraction(2000)),
        ("3M", Fraction(3 * 10**6)),
        ("4G", Fraction(4 * 10**9)),
        ("5T", Fraction(5 * 10**12)),
        ("6P", Fraction(6 * 10**15)),
        ("7E", Fraction(7 * 10**18)),
        ("1Ki", Fraction(KI)),
        ("1Mi", Fraction(MI)),
        ("16Gi", Fraction(16 * GI)),
        ("1Ti", Fraction(KI**4)),
        ("1Pi", Fraction(KI**5)),
        ("1Ei", Fraction(KI**6)),
        ("1.5Gi", Fraction(3 * GI // 2)),
        ("0.5Ki", Fraction(512)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1e+3", Fraction(1000)),
        ("1.5E-2", Fraction(3, 200)),
        ("12e-3", Fraction(3, 250)),
        ("83201216Ki", Fraction(83201216 * KI)),
        (64, Fraction(64)),
        (-3, Fraction(-3)),
        (0.5, Fraction(1, 2)),
        (0.1, Fraction(1, 10)),
        (1e20, Fraction(10**20)),
        (2.5e-3, Fraction(1, 400)),
    ],
)
def test_parse_quantity(q: str | int | float, want: Fraction) -> None:
    assert parse_quantity(q) == want


@pytest.mark.parametrize(
    "q",
    [
        "",
        "abc",
        "1.5.5",
        "10KB",
        "1K",
        "1 Gi",
        " 1",
        "1 ",
        "1\n",
        "1e",
        "1e3.5",
        "1Gi3",
        "1ki",
        "1mi",
        "1Zi",
        "1Z",
        "--1",
        "+",
        "-",
        ".",
        "Ki",
        "m",
        "0x10",
        "1_000",
        "1e99999",
        "1" * 5000,
        True,
        float("nan"),
        float("inf"),
    ],
)
def test_parse_quantity_rejects(q: str | int | float) -> None:
    with pytest.raises(QuantityError) as e:
        parse_quantity(q)
    # Named as written (a 5000-digit value by its first digits).
    assert show_quantity(q) in str(e.value)


def test_parse_rejects_unsupported_type() -> None:
    with pytest.raises(QuantityError, match="unsupported type"):
        parse_quantity([1])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("q", "want"),
    [
        ("0", 0),
        ("1", 1000),
        ("64", 64_000),
        ("100m", 100),
        ("1500m", 1500),
        ("0.1m", 1),
        ("0.9m", 1),
        ("1n", 1),
        ("1.0001", 1001),
        ("-0.1m", 0),
        ("-1.5m", -1),
        ("1e-3", 1),
        ("1e3", 1_000_000),
        ("1Ki", 1_024_000),
        (2, 2000),
        (0.5, 500),
        (0.0001, 1),
    ],
)
def test_milli_value_rounds_up(q: str | int | float, want: int) -> None:
    assert milli_value(q) == want


@pytest.mark.parametrize(
    ("q", "want"),
    [
        ("0", 0),
        ("1", 1),
        ("1.5", 2),
        ("100m", 1),
        ("1n", 1),
        ("-1.5", -1),
        ("-100m", 0),
        ("1Gi", GI),
        ("1.5Gi", 3 * GI // 2),
        ("0.3Ki", 308),
        ("1e-3", 1),
        ("2k", 2000),
        (7, 7),
        (0.5, 1),
        (2.0, 2),
    ],
)
def test_int_value_rounds_up(q: str | int | float, want: int) -> None:
    assert int_value(q) == want


@pytest.mark.parametrize("q", ["abc", "10KB", "", True])
def test_rounding_helpers_reject_bad_quantities(q: str | int | float) -> None:
    with pytest.raises(QuantityError):
        milli_value(q)
    with pytest.raises(QuantityError):
        int_value(q)


@pytest.mark.parametrize(
    ("value", "fmt", "want"),
    [
        # BinarySI: largest binary suffix dividing exactly; below 1024 or fractional -> DecimalSI.
        (16 * GI, "BinarySI", "16Gi"),
        (KI, "BinarySI", "1Ki"),
        (1000, "BinarySI", "1k"),
        (1023, "BinarySI", "1023"),
        (1500, "BinarySI", "1500"),
        (2000, "BinarySI", "2000"),
        (1025, "BinarySI", "1025"),
        (83201216 * KI, "BinarySI", "83201216Ki"),
        (1536 * MI, "BinarySI", "1536Mi"),
        (2048 * MI, "BinarySI", "2Gi"),
        (KI**6, "BinarySI", "1Ei"),
        (KI**7, "BinarySI", "1024Ei"),
        (-2048, "BinarySI", "-2Ki"),
        (-1000, "BinarySI", "-1k"),
        (Fraction(1, 2), "BinarySI", "500m"),
        (Fraction(2049, 2), "BinarySI", "1024500m"),
        (Fraction(4096, 1), "BinarySI", "4Ki"),
        (0, "BinarySI", "0"),
        # DecimalSI: exponent moved down to a multiple of three.
        (0, "DecimalSI", "0"),
        (1, "DecimalSI", "1"),
        (100, "DecimalSI", "100"),
        (1500, "DecimalSI", "1500"),
        (2000, "DecimalSI", "2k"),
        (12000, "DecimalSI", "12k"),
        (10**7, "DecimalSI", "10M"),
        (10**18, "DecimalSI", "1E"),
        (10**21, "DecimalSI", "1000E"),
        (64, "DecimalSI", "64"),
        (-2000, "DecimalSI", "-2k"),
        (Fraction(1, 10), "DecimalSI", "100m"),
        (Fraction(3, 2), "DecimalSI", "1500m"),
        (Fraction(1, 1000), "DecimalSI", "1m"),
        (Fraction(1, 10**6), "DecimalSI", "1u"),
        (Fraction(1, 10**9), "DecimalSI", "1n"),
        (Fraction(-1, 10), "DecimalSI", "-100m"),
        # Finer than 1n: rounded away from zero to whole nanos, as Go's parser does.
        (Fraction(1, 3), "DecimalSI", "333333334n"),
        (Fraction(-1, 3), "DecimalSI", "-333333334n"),
        (Fraction(1, 10**12), "DecimalSI", "1n"),
        # DecimalExponent.
        (1000, "DecimalExponent", "1e3"),
        (1500, "DecimalExponent", "1500"),
        (12 * 10**6, "DecimalExponent", "12e6"),
        (Fraction(1, 10), "DecimalExponent", "100e-3"),
        (5, "DecimalExponent", "5"),
        (0, "DecimalExponent", "0"),
    ],
)
def test_format_quantity(value: int | Fraction, fmt: QuantityFormat, want: str) -> None:
    assert format_quantity(value, fmt) == want


def test_format_quantity_rejects_unknown_format() -> None:
    with pytest.raises(ValueError, match="Binary"):
        format_quantity(1, "Binary")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    ["16Gi", "83201216Ki", "100m", "1500m", "64", "2k", "1Ki", "500Mi", "1500Mi", "12e6", "1e3", "0", "-2k"],
)
def test_canonical_strings_round_trip(text: str) -> None:
    assert format_quantity(parse_quantity(text), detect_format(text)) == text


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1024Mi", "1Gi"),
        ("1000", "1k"),
        ("0.5", "500m"),
        ("1.5Gi", "1536Mi"),
        ("2048Ki", "2Mi"),
        ("1000Ki", "1000Ki"),
        ("1000000m", "1k"),
        ("0.0000000001", "1n"),
        ("1E3", "1e3"),
        ("1000e-3", "1"),
    ],
)
def test_non_canonical_strings_canonicalise(text: str, canonical: str) -> None:
    assert format_quantity(parse_quantity(text), detect_format(text)) == canonical


@pytest.mark.parametrize(
    ("milli", "want"),
    [(64_000, "64"), (500, "500m"), (1500, "1500m"), (2000, "2"), (0, "0"), (1, "1m"), (1_000_000, "1k")],
)
def test_format_milli_cpu(milli: int, want: str) -> None:
    assert format_milli_cpu(milli) == want


@pytest.mark.parametrize(
    ("n", "want"),
    [(16 * GI, "16Gi"), (KI, "1Ki"), (1000, "1k"), (1500, "1500"), (0, "0"), (512, "512"), (3 * MI, "3Mi")],
)
def test_format_bytes(n: int, want: str) -> None:
    assert format_bytes(n) == want


@pytest.mark.parametrize(
    ("q", "want"),
    [
        ("1Gi", "BinarySI"),
        ("1.5Ki", "BinarySI"),
        ("1Ei", "BinarySI"),
        ("1E", "DecimalSI"),
        ("100m", "DecimalSI"),
        ("64", "DecimalSI"),
        ("1e3", "DecimalExponent"),
        ("1E-3", "DecimalExponent"),
        (64, "DecimalSI"),
        (0.5, "DecimalSI"),
        (1e20, "DecimalExponent"),
    ],
)
def test_detect_format(q: str | int | float, want: str) -> None:
    assert detect_format(q) == want


@pytest.mark.parametrize("q", ["10KB", "", "1e", True])
def test_detect_format_rejects(q: str | int | float) -> None:
    with pytest.raises(QuantityError):
        detect_format(q)
