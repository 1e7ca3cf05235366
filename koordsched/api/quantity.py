"""Kubernetes ``resource.Quantity`` semantics: parsing, rounding and canonical printing.

Values are kept exact (integers or :class:`fractions.Fraction`) so that the simulator
rounds exactly where the Go code rounds and nowhere else. The hot path (``milli_value``
and ``int_value`` on strings) works on integers only and is memoised, because the same
few quantity strings ("100m", "1Gi") recur across thousands of pods.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache
from typing import Final, Literal

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "INT64_MAX",
    "INT64_MIN",
    "QuantityError",
    "QuantityFormat",
    "QuantityRangeError",
    "check_int64",
    "describe_int",
    "detect_format",
    "format_bytes",
    "format_milli_cpu",
    "format_quantity",
    "int_value",
    "int_value_int64",
    "milli_value",
    "milli_value_int64",
    "parse_quantity",
    "show_quantity",
]

QuantityFormat = Literal["BinarySI", "DecimalSI", "DecimalExponent"]
BINARY_SI: Final = "BinarySI"
DECIMAL_SI: Final = "DecimalSI"
DECIMAL_EXPONENT: Final = "DecimalExponent"
_FORMATS: Final = frozenset((BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT))


#: Go reads quantities as int64 (``Value``, ``MilliValue``): the range a canonical amount must fit.
INT64_MAX: Final = 2**63 - 1
INT64_MIN: Final = -(2**63)


class QuantityError(ValueError):
    """A string (or number) that is not a valid Kubernetes quantity (malformed).

    ``quantity`` is the value as written. :class:`QuantityRangeError`, a subclass, is a
    well-formed quantity that is too large where it is read; ``too_large`` tells them apart
    without an isinstance check. Re-raise with :meth:`within` to add context and keep both.
    """

    too_large: bool = False

    def __init__(self, message: str, quantity: object = None) -> None:
        super().__init__(message)
        self.quantity = quantity

    def within(self, context: str) -> QuantityError:
        """The same error (same class, same ``quantity``) with ``context: `` in front of the message."""
        return type(self)(f"{context}: {self}", self.quantity)


class QuantityRangeError(QuantityError):
    """A well-formed quantity whose amount in the unit it is read in does not fit in int64.

    Kubernetes accepts such values (the API server checks the syntax and the sign only), and
    Go then misreads them: ``ParseQuantity`` caps BinarySI values at 2^63-1 (``8Ei``, which is
    2^63, reads as 2^63-1), and ``Value``/``MilliValue`` of a larger DecimalSI or exponent
    value (``"99999999999999999999"``, ``"1e18"`` read in millicores) wrap or saturate
    silently. koordsched raises this instead, so the caller decides what the object gets.
    """

    too_large = True


# sign, integer digits, fraction digits, then one of: binary suffix, decimal SI suffix, exponent.
_QUANTITY_RE: Final = re.compile(
    r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:(Ki|Mi|Gi|Ti|Pi|Ei)|([numkMGTPE])|[eE]([+-]?[0-9]+))?"
)
_BINARY_EXP: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXP: Final = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX: Final = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIX: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
# Bounds that keep a hostile manifest ("1e999999999") from costing unbounded time and memory.
_MAX_EXPONENT_DIGITS: Final = 4
_MAX_MANTISSA_DIGITS: Final = 4000
_NANO: Final = 10**9

# (signed mantissa, base-10 exponent, base-2 exponent): value = mantissa * 10**dec * 2**bin.
_Parts = tuple[int, int, int]


def _invalid(q: object, why: str) -> QuantityError:
    return QuantityError(f"invalid quantity {show_quantity(q)}: {why}", q)


@lru_cache(maxsize=8192)
def _parse_str(s: str) -> _Parts:
    m = _QUANTITY_RE.fullmatch(s)
    if m is None:
        raise _invalid(s, "expected [+-]digits[.digits] then Ki Mi Gi Ti Pi Ei n u m k M G T P E or e<int>")
    sign, whole, frac, bin_suffix, dec_suffix, exp = m.groups()
    frac = frac or ""
    if not whole and not frac:
        # Go accepts "", "+", "." and a bare suffix as zero; a manifest saying that is a mistake.
        raise _invalid(s, "no digits")
    digits = whole + frac
    if len(digits) > _MAX_MANTISSA_DIGITS:
        raise QuantityRangeError(f"invalid quantity {show_quantity(s)}: too many digits", s)
    mantissa = int(digits)
    if sign == "-":
        mantissa = -mantissa
    dec = -len(frac)
    bin_exp = 0
    if bin_suffix is not None:
        bin_exp = _BINARY_EXP[bin_suffix]
    elif dec_suffix is not None:
        dec += _DECIMAL_EXP[dec_suffix]
    elif exp is not None:
        if len(exp.lstrip("+-")) > _MAX_EXPONENT_DIGITS:
            raise QuantityRangeError(f"invalid quantity {show_quantity(s)}: exponent out of range", s)
        dec += int(exp)
    return mantissa, dec, bin_exp


def _parts(q: str | int | float) -> _Parts:
    if isinstance(q, str):
        return _parse_str(q)
    if isinstance(q, bool):
        raise _invalid(q, "a boolean is not a quantity")
    if isinstance(q, int):
        return q, 0, 0
    if isinstance(q, float):
        if not math.isfinite(q):
            raise _invalid(q, "not a finite number")
        # repr is the shortest string that round-trips, i.e. what the YAML author wrote: 0.1 -> "0.1".
        return _parse_str(repr(q))
    raise _invalid(q, f"unsupported type {type(q).__name__}")


def _ceil_scaled(parts: _Parts, extra_dec: int) -> int:
    """ceil(value * 10**extra_dec) using integers only."""
    mantissa, dec, bin_exp = parts
    n = mantissa << bin_exp
    e = dec + extra_dec
    scale: int = 10 ** abs(e)
    if e >= 0:
        return n * scale
    return -((-n) // scale)


def parse_quantity(q: str | int | float) -> Fraction:
    """The exact value of a quantity; raises :class:`QuantityError` for anything Kubernetes would reject.

    Unlike Go, no rounding to nano units happens here: the rounding helpers below give
    the same integers either way, and exact values keep sums exact.
    """
    mantissa, dec, bin_exp = _parts(q)
    num = mantissa << bin_exp
    if dec >= 0:
        return Fraction(num * 10**dec)
    return Fraction(num, 10**-dec)


@lru_cache(maxsize=8192)
def _milli_str(s: str) -> int:
    return _ceil_scaled(_parse_str(s), 3)


@lru_cache(maxsize=8192)
def _int_str(s: str) -> int:
    return _ceil_scaled(_parse_str(s), 0)


def milli_value(q: str | int | float) -> int:
    """ceil(value * 1000), as Go's ``Quantity.MilliValue`` (so "0.1m" is 1, not 0)."""
    if isinstance(q, str):
        return _milli_str(q)
    if isinstance(q, int) and not isinstance(q, bool):
        return q * 1000
    return _ceil_scaled(_parts(q), 3)


def int_value(q: str | int | float) -> int:
    """ceil(value), as Go's ``Quantity.Value`` ("1.5" is 2, "100m" is 1, "-1.5" is -1)."""
    if isinstance(q, str):
        return _int_str(q)
    if isinstance(q, int) and not isinstance(q, bool):
        return q
    return _ceil_scaled(_parts(q), 0)


def describe_int(n: int) -> str:
    """``n`` in decimal, or its order of magnitude when printing it would be long (Python refuses
    to print integers of more than 4300 digits, which "1e4299" read in millicores is)."""
    if abs(n) < 10**40:
        return str(n)
    return f"{'-' if n < 0 else ''}about 10^{int(abs(n).bit_length() * 0.30103)}"


def check_int64(amount: int, q: object, unit: str = "") -> int:
    """``amount`` (``q`` read in ``unit``) when it fits in int64, else :class:`QuantityRangeError`."""
    if INT64_MIN <= amount <= INT64_MAX:
        return amount
    side = "above the int64 maximum 9223372036854775807" if amount > 0 else "below the int64 minimum"
    what = describe_int(amount) + (f" {unit}" if unit else "")
    raise QuantityRangeError(f"quantity {show_quantity(q)} is too large: {what} is {side}", q)


def show_quantity(q: object) -> str:
    """``repr(q)``, shortened: a quantity of 5000 digits is not worth 5000 characters of log line."""
    text = repr(q) if not isinstance(q, int) else describe_int(q)
    return text if len(text) <= 60 else text[:57] + "..."


def milli_value_int64(q: str | int | float) -> int:
    """:func:`milli_value`, or :class:`QuantityRangeError` when outside int64 (Go's ``MilliValue``)."""
    return check_int64(milli_value(q), q, "milli-units")


def int_value_int64(q: str | int | float) -> int:
    """:func:`int_value`, or :class:`QuantityRangeError` when it does not fit in int64 (Go's ``Value``)."""
    return check_int64(int_value(q), q)


def detect_format(q: str | int | float) -> QuantityFormat:
    """The format a quantity's suffix implies, which is what Go keeps for printing it back."""
    _parts(q)  # validates, raising QuantityError
    if isinstance(q, float):
        q = repr(q)
    if not isinstance(q, str):
        return DECIMAL_SI
    m = _QUANTITY_RE.fullmatch(q)
    if m is None:  # pragma: no cover - _parts has already rejected it
        raise _invalid(q, "unparseable")
    if m.group(4) is not None:
        return BINARY_SI
    if m.group(6) is not None:
        return DECIMAL_EXPONENT
    return DECIMAL_SI


def _strip_tens(mantissa: int, exp10: int) -> tuple[int, int]:
    if mantissa == 0:
        return 0, 0
    while mantissa % 10 == 0:
        mantissa //= 10
        exp10 += 1
    return mantissa, exp10


def _format_decimal(mantissa: int, exp10: int, fmt: str) -> str:
    """Print mantissa * 10**exp10 with the exponent moved to a multiple of three, as Go does."""
    mantissa, exp10 = _strip_tens(mantissa, exp10)
    if mantissa == 0:
        return "0"
    shift = exp10 % 3  # Python's modulo is non-negative, so this always lowers the exponent
    if shift:
        mantissa *= 10**shift
        exp10 -= shift
    if fmt == DECIMAL_EXPONENT:
        return f"{mantissa}e{exp10}" if exp10 else str(mantissa)
    if exp10 > 18:
        # Go has no suffix beyond E and would print a wrong number; keep it exact with "E".
        mantissa *= 10 ** (exp10 - 18)
        exp10 = 18
    return f"{mantissa}{_DECIMAL_SUFFIX[exp10]}"


def _nano_parts(value: Fraction) -> tuple[int, int]:
    """Round a fraction to nano units away from zero, as Go's parser does, as (mantissa, exp10)."""
    scaled = value * _NANO
    if scaled.denominator == 1:
        return scaled.numerator, -9
    return (math.ceil(scaled) if scaled > 0 else math.floor(scaled)), -9


def format_quantity(value: int | Fraction, fmt: QuantityFormat) -> str:
    """``Quantity.String()`` for a value held in ``fmt``.

    BinarySI falls back to DecimalSI for magnitudes below 1024 and for non-integers
    (so BinarySI 1000 prints "1k" and 0.5 prints "500m"); integers at or above 1024 print
    with the largest binary suffix that divides them exactly, else bare ("1500", "2000").
    Non-integers finer than 1n are rounded away from zero to 1n, as parsing does in Go.
    """
    if fmt not in _FORMATS:
        raise ValueError(f"unknown quantity format {fmt!r}")
    if isinstance(value, Fraction) and value.denominator == 1:
        value = value.numerator
    if isinstance(value, int):
        if value == 0:
            return "0"
        if fmt == BINARY_SI and abs(value) >= 1024:
            magnitude, exp = abs(value), 0
            while exp < len(_BINARY_SUFFIX) - 1 and magnitude % 1024 == 0:
                magnitude //= 1024
                exp += 1
            return f"{'-' if value < 0 else ''}{magnitude}{_BINARY_SUFFIX[exp]}"
        return _format_decimal(value, 0, DECIMAL_SI if fmt == BINARY_SI else fmt)
    mantissa, exp10 = _nano_parts(value)
    return _format_decimal(mantissa, exp10, DECIMAL_SI if fmt == BINARY_SI else fmt)


def format_milli_cpu(milli: int) -> str:
    """A CPU amount in millicores printed as Kubernetes would: 64000 -> "64", 1500 -> "1500m"."""
    return _format_decimal(milli, -3, DECIMAL_SI)


def format_bytes(n: int) -> str:
    """A byte count printed as a BinarySI quantity: 17179869184 -> "16Gi", 1000 -> "1k"."""
    return format_quantity(n, BINARY_SI)
