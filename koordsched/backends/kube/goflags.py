"""Flag values read as pflag and component-base read them, for kube-scheduler's flags on ``run``.

Each parser raises :class:`argparse.ArgumentTypeError` with the text kube-scheduler prints for
the same value (pflag wraps a value's error as ``invalid argument "V" for "--NAME" flag: ...``),
so a bad value is a usage error of ``run`` that reads like kube-scheduler's.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence

from koordsched.api.durations import DurationError, format_duration, parse_duration
from koordsched.api.quantity import QuantityError, parse_quantity
from koordsched.observability.logs import LogConfigError, vmodule_pairs

__all__ = [
    "LOGGING_FORMATS",
    "AppendJoined",
    "StringSlice",
    "StringToString",
    "go_bool",
    "go_duration",
    "go_duration_text",
    "go_float32",
    "go_int",
    "go_int32",
    "logging_format",
    "quantity",
    "tls_version",
    "vmodule",
]

#: component-base's registered log formats (json is beta, on by default, in 1.28).
LOGGING_FORMATS = ("text", "json")
#: What ``--tls-min-version`` takes (component-base's cliflag.TLSVersion names).
TLS_VERSIONS = ("VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13")
#: math.MaxFloat32: a larger --kube-api-qps is out of range for strconv.ParseFloat(s, 32).
_FLOAT32_MAX = 3.4028234663852886e38

# strconv.ParseInt(s, 0, bits): a sign, then decimal, 0x hex, 0o or leading-0 octal, 0b binary.
_GO_INT = re.compile(
    r"[+-]?(?:0[xX](?P<hex>[0-9a-fA-F]+)|0[bB](?P<bin>[01]+)|0[oO]?(?P<oct>[0-7]+)|(?P<dec>[0-9]+))"
)
_GO_FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])"
)


_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def go_bool(text: str) -> bool:
    """A bool flag's value as Go's ``strconv.ParseBool`` reads it."""
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    raise argparse.ArgumentTypeError(f'strconv.ParseBool: parsing "{text}": invalid syntax')


def go_duration(text: str) -> float:
    try:
        return parse_duration(text)
    except DurationError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


class StringSlice(argparse.Action):
    """pflag's StringSlice: comma-separated; repeating appends; the first use replaces the default."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | object,
        option_string: str | None = None,
    ) -> None:
        # As pflag reads it (a CSV record): "" is no path at all, an empty item is "/".
        items = str(values).split(",") if values else []
        current = getattr(namespace, self.dest)
        kept = () if current is self.default else tuple(current)
        setattr(namespace, self.dest, (*kept, *items))


def invalid(flag: str, value: str, why: str) -> argparse.ArgumentTypeError:
    """pflag's wording for a value its flag refuses."""
    return argparse.ArgumentTypeError(f'invalid argument "{value}" for "{flag}" flag: {why}')


def go_int(flag: str, bits: int = 64) -> Callable[[str], int]:
    """pflag's Int/Int32 flags: ``strconv.ParseInt(s, 0, bits)``."""

    def parse(text: str) -> int:
        m = _GO_INT.fullmatch(text)
        if m is None:
            raise invalid(flag, text, f'strconv.ParseInt: parsing "{text}": invalid syntax')
        base = 16 if m["hex"] else 2 if m["bin"] else 8 if m["oct"] else 10
        digits = m["hex"] or m["bin"] or m["oct"] or m["dec"]
        value = int(digits, base) * (-1 if text.startswith("-") else 1)
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise invalid(flag, text, f'strconv.ParseInt: parsing "{text}": value out of range')
        return value

    return parse


def go_int32(flag: str) -> Callable[[str], int]:
    return go_int(flag, 32)


def go_float32(flag: str) -> Callable[[str], float]:
    """pflag's Float32 flags: ``strconv.ParseFloat(s, 32)``."""

    def parse(text: str) -> float:
        if _GO_FLOAT.fullmatch(text) is None:
            raise invalid(flag, text, f'strconv.ParseFloat: parsing "{text}": invalid syntax')
        value = float(text)
        if abs(value) > _FLOAT32_MAX and abs(value) != float("inf"):
            raise invalid(flag, text, f'strconv.ParseFloat: parsing "{text}": value out of range')
        return value

    return parse


def go_duration_text(flag: str) -> Callable[[str], str]:
    """pflag's Duration flags, kept as Go prints the value (``90s`` -> ``1m30s``), as the config's
    metav1.Duration fields hold it."""

    def parse(text: str) -> str:
        try:
            return format_duration(parse_duration(text))
        except DurationError as err:
            raise invalid(flag, text, str(err)) from None

    return parse


def quantity(flag: str) -> Callable[[str], str]:
    """component-base's QuantityValue (``--log-json-info-buffer-size``): a resource.Quantity."""

    def parse(text: str) -> str:
        try:
            parse_quantity(text)
        except QuantityError as err:
            raise invalid(flag, text, str(err)) from None
        return text

    return parse


def logging_format(text: str) -> str:
    """``--logging-format``: a registered format, else component-base's validation error."""
    if text not in LOGGING_FORMATS:
        raise argparse.ArgumentTypeError(f'format: Invalid value: "{text}": Unsupported log format')
    return text


def tls_version(text: str) -> str:
    """``--tls-min-version``: one of Go's TLS version names (or empty for the default)."""
    if text and text not in TLS_VERSIONS:
        raise argparse.ArgumentTypeError(f'unknown tls version "{text}"')
    return text


def vmodule(text: str) -> str:
    """``--vmodule``'s value, checked; kept as text (logging compiles it)."""
    try:
        vmodule_pairs(text)
    except LogConfigError as err:
        raise invalid("--vmodule", text, str(err)) from None
    return text


class AppendJoined(argparse.Action):
    """A flag that accumulates when repeated, as pflag's list values do, joined by commas
    (``--vmodule a=1 --vmodule b=2`` is ``a=1,b=2``)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        current = getattr(namespace, self.dest)
        value = str(values)
        setattr(namespace, self.dest, f"{current},{value}" if current and value else current or value)


class StringToString(argparse.Action):
    """pflag's StringToString (``--allow-metric-labels``): ``key=value`` pairs into a dict.

    As pflag: a value with one ``=`` is a single pair (so ``m,l=v1,v2`` is key ``m,l``, value
    ``v1,v2``; surrounding double quotes dropped); with more, the value is a CSV record of pairs.
    Repeating the flag merges, later keys winning.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        import csv

        text = str(values)
        flag = option_string or self.dest
        count = text.count("=")
        if count == 0:
            parser.error(f"argument {flag}: {invalid(flag, text, f'{text} must be formatted as key=value')}")
        items = [text.strip('"')] if count == 1 else next(csv.reader([text]), [])
        pairs: dict[str, str] = {}
        for item in items:
            key, sep, value = item.partition("=")
            if not sep:
                parser.error(
                    f"argument {flag}: {invalid(flag, text, f'{item} must be formatted as key=value')}"
                )
            pairs[key] = value
        current = getattr(namespace, self.dest)
        setattr(namespace, self.dest, {**(current or {}), **pairs})
