"""Kubernetes' protobuf wire form for the two writes made per scheduled pod: an Event and a Binding.

For ``bench/e2e_write_forms.py``, which measures whether the API server spends less on a write
sent (and answered) as protobuf than as JSON, as kube-scheduler's own clients send them. On
kube-apiserver 1.20.2 it did not, within this machine's noise (bench/README.md), so koordsched
keeps writing JSON and this encoder stays in the bench. Only encoding: the answers are checked
for their status alone.

The envelope is ``k8s\\x00`` followed by a ``runtime.Unknown`` message (typeMeta = 1 {apiVersion = 1,
kind = 2}, raw = 2); the field numbers below are those of the published ``generated.proto`` files of
k8s.io/api and k8s.io/apimachinery (stable across versions: protobuf field numbers never change).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

PROTOBUF = "application/vnd.kubernetes.protobuf"
#: Accept for a write whose answer is only checked: protobuf, JSON for servers or paths without it.
PROTOBUF_ACCEPT = f"{PROTOBUF}, application/json"

_MAGIC = b"k8s\x00"


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64/int32 negatives go out as ten-byte two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _string(number: int, value: str | None) -> bytes:
    """An optional string: absent when empty, as proto2's generated code leaves a zero value out."""
    return _bytes_field(number, value.encode()) if value else b""


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value) if value else b""


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    """``raw`` (an encoded object) wrapped as the API server expects a protobuf request body."""
    type_meta = _string(1, api_version) + _string(2, kind)
    return _MAGIC + _bytes_field(1, type_meta) + _bytes_field(2, raw)


def object_meta(meta: Mapping[str, Any]) -> bytes:
    """ObjectMeta's name (1), namespace (3), uid (5) and annotations (12, a map<string, string>)."""
    out = _string(1, meta.get("name")) + _string(3, meta.get("namespace")) + _string(5, meta.get("uid"))
    for key, value in (meta.get("annotations") or {}).items():
        out += _bytes_field(12, _string(1, key) + _bytes_field(2, str(value).encode()))
    return out


def object_reference(ref: Mapping[str, Any]) -> bytes:
    """core/v1 ObjectReference: kind 1, namespace 2, name 3, uid 4, apiVersion 5,
    resourceVersion 6, fieldPath 7."""
    return (
        _string(1, ref.get("kind"))
        + _string(2, ref.get("namespace"))
        + _string(3, ref.get("name"))
        + _string(4, ref.get("uid"))
        + _string(5, ref.get("apiVersion"))
        + _string(6, ref.get("resourceVersion"))
        + _string(7, ref.get("fieldPath"))
    )


def micro_time(at: datetime) -> bytes:
    """meta/v1 MicroTime (a Timestamp: seconds 1, nanos 2), to the microsecond as its JSON form."""
    seconds = int(at.replace(microsecond=0).timestamp())
    return _int(1, seconds) + _int(2, at.microsecond * 1000)


def event(body: Mapping[str, Any], at: datetime) -> bytes:
    """An events.k8s.io/v1 Event (the dict :func:`events.build_event` makes; ``at`` its eventTime).

    Field numbers: metadata 1, eventTime 2, reportingController 4, reportingInstance 5, action 6,
    reason 7, regarding 8, note 10, type 11. ``series`` and ``related`` are never set on a create.
    """
    raw = (
        _bytes_field(1, object_meta(body["metadata"]))
        + _bytes_field(2, micro_time(at))
        + _string(4, body.get("reportingController"))
        + _string(5, body.get("reportingInstance"))
        + _string(6, body.get("action"))
        + _string(7, body.get("reason"))
        + _bytes_field(8, object_reference(body.get("regarding") or {}))
        + _string(10, body.get("note"))
        + _string(11, body.get("type"))
    )
    return envelope("events.k8s.io/v1", "Event", raw)


def binding(body: Mapping[str, Any]) -> bytes:
    """A core/v1 Binding: metadata 1, target 2 (an ObjectReference)."""
    raw = _bytes_field(1, object_meta(body["metadata"])) + _bytes_field(2, object_reference(body["target"]))
    return envelope("v1", "Binding", raw)
