"""pprof's ``Profile`` message for tests, built from a descriptor written here (google/pprof's
proto/profile.proto, the fields koordsched writes), so the protobuf library decodes and checks
what the endpoints answer."""

from __future__ import annotations

import gzip
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_INT64, _UINT64, _STRING, _BOOL, _MESSAGE = (
    _F.TYPE_INT64,
    _F.TYPE_UINT64,
    _F.TYPE_STRING,
    _F.TYPE_BOOL,
    _F.TYPE_MESSAGE,
)
_ONE, _MANY = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

#: message -> (field name, number, type, repeated, message type)
_MESSAGES: dict[str, list[tuple[str, int, int, bool, str]]] = {
    "Profile": [
        ("sample_type", 1, _MESSAGE, True, "ValueType"),
        ("sample", 2, _MESSAGE, True, "Sample"),
        ("mapping", 3, _MESSAGE, True, "Mapping"),
        ("location", 4, _MESSAGE, True, "Location"),
        ("function", 5, _MESSAGE, True, "Function"),
        ("string_table", 6, _STRING, True, ""),
        ("drop_frames", 7, _INT64, False, ""),
        ("keep_frames", 8, _INT64, False, ""),
        ("time_nanos", 9, _INT64, False, ""),
        ("duration_nanos", 10, _INT64, False, ""),
        ("period_type", 11, _MESSAGE, False, "ValueType"),
        ("period", 12, _INT64, False, ""),
        ("comment", 13, _INT64, True, ""),
        ("default_sample_type", 14, _INT64, False, ""),
    ],
    "ValueType": [("type", 1, _INT64, False, ""), ("unit", 2, _INT64, False, "")],
    "Sample": [
        ("location_id", 1, _UINT64, True, ""),
        ("value", 2, _INT64, True, ""),
        ("label", 3, _MESSAGE, True, "Label"),
    ],
    "Label": [
        ("key", 1, _INT64, False, ""),
        ("str", 2, _INT64, False, ""),
        ("num", 3, _INT64, False, ""),
        ("num_unit", 4, _INT64, False, ""),
    ],
    "Mapping": [("id", 1, _UINT64, False, ""), ("filename", 5, _INT64, False, "")],
    "Location": [
        ("id", 1, _UINT64, False, ""),
        ("mapping_id", 2, _UINT64, False, ""),
        ("address", 3, _UINT64, False, ""),
        ("line", 4, _MESSAGE, True, "Line"),
        ("is_folded", 5, _BOOL, False, ""),
    ],
    "Line": [("function_id", 1, _UINT64, False, ""), ("line", 2, _INT64, False, "")],
    "Function": [
        ("id", 1, _UINT64, False, ""),
        ("name", 2, _INT64, False, ""),
        ("system_name", 3, _INT64, False, ""),
        ("filename", 4, _INT64, False, ""),
        ("start_line", 5, _INT64, False, ""),
    ],
}


def _profile_class() -> Any:
    file = descriptor_pb2.FileDescriptorProto(
        name="koordsched_test_profile.proto", package="perftools.profiles", syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        message = file.message_type.add(name=name)
        for field, number, type_, repeated, type_name in fields:
            message.field.add(
                name=field,
                number=number,
                type=type_,
                label=_MANY if repeated else _ONE,
                type_name=f".perftools.profiles.{type_name}" if type_name else None,
            )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("perftools.profiles.Profile"))


Profile = _profile_class()


def decode(gzipped: bytes) -> Any:
    """The profile in ``gzipped``; asserts that it is well-formed protobuf with no unknown field,
    in canonical encoding (re-encoding the decoded message gives the same bytes)."""
    raw = gzip.decompress(gzipped)
    profile = Profile.FromString(raw)
    assert profile.SerializeToString() == raw
    return profile


def check_structure(profile: Any) -> None:
    """What pprof requires: string 0 is "", unique nonzero ids, every reference resolves, every
    sample has one value per sample type."""
    strings = profile.string_table
    assert strings[0] == ""
    functions = {f.id: f for f in profile.function}
    locations = {loc.id: loc for loc in profile.location}
    assert len(functions) == len(profile.function) and 0 not in functions
    assert len(locations) == len(profile.location) and 0 not in locations
    for f in profile.function:
        assert 0 < f.name < len(strings) and 0 <= f.filename < len(strings)
    for loc in profile.location:
        assert loc.line and all(line.function_id in functions for line in loc.line)
    for s in profile.sample:
        assert len(s.value) == len(profile.sample_type)
        assert all(i in locations for i in s.location_id)
    for t in profile.sample_type:
        assert 0 < t.type < len(strings) and 0 < t.unit < len(strings)


def sample_types(profile: Any) -> list[tuple[str, str]]:
    s = profile.string_table
    return [(s[t.type], s[t.unit]) for t in profile.sample_type]


def stacks(profile: Any) -> list[tuple[list[str], list[int]]]:
    """Each sample as (function names leaf first, values)."""
    s = profile.string_table
    functions = {f.id: s[f.name] for f in profile.function}
    locations = {loc.id: functions[loc.line[0].function_id] for loc in profile.location}
    return [([locations[i] for i in sample.location_id], list(sample.value)) for sample in profile.sample]
