"""The pprof profile format (google/pprof's ``proto/profile.proto``), written by hand.

A profile is a list of samples, each a stack of locations (leaf first) and one value per sample
type; locations point at functions, and every string lives once in a string table whose entry 0
is "". What is written is gzip-compressed, as ``go tool pprof`` and speedscope expect it.

The protobuf wire format needs only two encodings here: varints (field numbers with wire type 0)
and length-delimited bytes (wire type 2, for strings, sub-messages and packed repeated ints), so
this module writes them itself instead of depending on a protobuf runtime at run time.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

_VARINT = 0
_BYTES = 2

# Field numbers of profile.proto.
_PROFILE_SAMPLE_TYPE = 1
_PROFILE_SAMPLE = 2
_PROFILE_LOCATION = 4
_PROFILE_FUNCTION = 5
_PROFILE_STRING_TABLE = 6
_PROFILE_TIME_NANOS = 9
_PROFILE_DURATION_NANOS = 10
_PROFILE_PERIOD_TYPE = 11
_PROFILE_PERIOD = 12
_PROFILE_COMMENT = 13
_VALUE_TYPE_TYPE, _VALUE_TYPE_UNIT = 1, 2
_SAMPLE_LOCATION_ID, _SAMPLE_VALUE, _SAMPLE_LABEL = 1, 2, 3
_LABEL_KEY, _LABEL_STR = 1, 2
_LOCATION_ID, _LOCATION_LINE = 1, 4
_LINE_FUNCTION_ID, _LINE_LINE = 1, 2
_FUNCTION_ID, _FUNCTION_NAME, _FUNCTION_SYSTEM_NAME, _FUNCTION_FILENAME, _FUNCTION_START_LINE = 1, 2, 3, 4, 5


def _varint(value: int) -> bytes:
    """Base-128, little end first; a negative int64 is its two's complement (ten bytes)."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _int_field(number: int, value: int) -> bytes:
    """A scalar field; proto3 leaves out a zero."""
    return _key(number, _VARINT) + _varint(value) if value else b""


def _bytes_field(number: int, data: bytes) -> bytes:
    return _key(number, _BYTES) + _varint(len(data)) + data


def _packed(number: int, values: Iterable[int]) -> bytes:
    data = b"".join(_varint(v) for v in values)
    return _bytes_field(number, data) if data else b""


@dataclass(frozen=True)
class Frame:
    """One frame of a stack: the function (with where it starts) and the line running in it."""

    name: str
    filename: str
    line: int
    start_line: int = 0


@dataclass
class ProfileBuilder:
    """Samples in, a gzip-compressed ``Profile`` out.

    ``sample_types`` are (type, unit) pairs, e.g. ``("samples", "count"), ("wall", "nanoseconds")``;
    every sample carries one value per type. Identical stacks (with identical labels) are merged by
    summing their values, as pprof itself does.
    """

    sample_types: Sequence[tuple[str, str]]
    period_type: tuple[str, str] | None = None
    period: int = 0
    time_nanos: int = 0
    duration_nanos: int = 0
    comments: Sequence[str] = ()
    _strings: dict[str, int] = field(default_factory=lambda: {"": 0})
    _functions: dict[tuple[str, str, int], int] = field(default_factory=dict)
    _locations: dict[tuple[int, int], int] = field(default_factory=dict)
    _samples: dict[tuple[tuple[int, ...], tuple[tuple[str, str], ...]], list[int]] = field(
        default_factory=dict
    )

    def string(self, s: str) -> int:
        return self._strings.setdefault(s, len(self._strings))

    def add(
        self, stack: Sequence[Frame], values: Sequence[int], labels: dict[str, str] | None = None
    ) -> None:
        """One sample: ``stack`` leaf first, ``values`` in the order of the sample types."""
        if len(values) != len(self.sample_types):
            raise ValueError(f"a sample has {len(values)} values for {len(self.sample_types)} sample types")
        ids = tuple(self._location(f) for f in stack)
        key = (ids, tuple(sorted((labels or {}).items())))
        total = self._samples.get(key)
        if total is None:
            self._samples[key] = list(values)
        else:
            for i, v in enumerate(values):
                total[i] += v

    def _location(self, frame: Frame) -> int:
        fkey = (frame.name, frame.filename, frame.start_line)
        function_id = self._functions.setdefault(fkey, len(self._functions) + 1)
        return self._locations.setdefault((function_id, frame.line), len(self._locations) + 1)

    def encode(self) -> bytes:
        """The serialized ``Profile``, not compressed, fields in number order (as protobuf
        serializers write them, so a decode and re-encode gives the same bytes)."""
        # Strings are interned while the other messages are built; the table is written after.
        head = [_bytes_field(_PROFILE_SAMPLE_TYPE, self._value_type(t, u)) for t, u in self.sample_types]
        for (ids, labels), values in self._samples.items():
            sample = _packed(_SAMPLE_LOCATION_ID, ids) + _packed(_SAMPLE_VALUE, values)
            for k, v in labels:
                label = _int_field(_LABEL_KEY, self.string(k)) + _int_field(_LABEL_STR, self.string(v))
                sample += _bytes_field(_SAMPLE_LABEL, label)
            head.append(_bytes_field(_PROFILE_SAMPLE, sample))
        for (function_id, line), location_id in self._locations.items():
            line_msg = _int_field(_LINE_FUNCTION_ID, function_id) + _int_field(_LINE_LINE, line)
            location = _int_field(_LOCATION_ID, location_id) + _bytes_field(_LOCATION_LINE, line_msg)
            head.append(_bytes_field(_PROFILE_LOCATION, location))
        for (name, filename, start_line), function_id in self._functions.items():
            function = (
                _int_field(_FUNCTION_ID, function_id)
                + _int_field(_FUNCTION_NAME, self.string(name))
                + _int_field(_FUNCTION_SYSTEM_NAME, self.string(name))
                + _int_field(_FUNCTION_FILENAME, self.string(filename))
                + _int_field(_FUNCTION_START_LINE, start_line)
            )
            head.append(_bytes_field(_PROFILE_FUNCTION, function))
        tail = [
            _int_field(_PROFILE_TIME_NANOS, self.time_nanos),
            _int_field(_PROFILE_DURATION_NANOS, self.duration_nanos),
        ]
        if self.period_type is not None:
            tail.append(_bytes_field(_PROFILE_PERIOD_TYPE, self._value_type(*self.period_type)))
        tail.append(_int_field(_PROFILE_PERIOD, self.period))
        tail.append(_packed(_PROFILE_COMMENT, [self.string(c) for c in self.comments]))
        # Every string is interned by now: the table, in index order, between the two.
        table = [_bytes_field(_PROFILE_STRING_TABLE, s.encode()) for s in self._strings]
        return b"".join(head + table + tail)

    def _value_type(self, type_: str, unit: str) -> bytes:
        return _int_field(_VALUE_TYPE_TYPE, self.string(type_)) + _int_field(
            _VALUE_TYPE_UNIT, self.string(unit)
        )

    def gzipped(self) -> bytes:
        """What a pprof endpoint answers: the profile, gzip-compressed."""
        return gzip.compress(self.encode(), compresslevel=6)
