"""Wire shapes shared by every kind: lists, watch events, ``Status`` and bookmarks.

Watch lines are decoded in two stages: ``WatchEvent`` keeps ``object`` as raw JSON, and the
object is decoded once we know what it is (the kind's Struct, a ``Status`` for ``ERROR``, just
the metadata for ``BOOKMARK``). Nothing is parsed twice and nothing goes through dicts.
"""

from __future__ import annotations

import re
from typing import Generic, TypeVar

import msgspec

T = TypeVar("T")

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"
ERROR = "ERROR"

#: The annotation a watch-list's closing bookmark carries (KEP-3157); read, not relied on.
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class ListMeta(msgspec.Struct, kw_only=True, rename="camel"):
    resource_version: str = ""
    continue_: str = msgspec.field(default="", name="continue")
    remaining_item_count: int | None = None


class ObjectList(msgspec.Struct, Generic[T], kw_only=True):
    """``<Kind>List``: one page of a list; ``items`` is null in some empty lists."""

    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[T] | None = None


class WatchEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


class MinimalMeta(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    annotations: dict[str, str] | None = None


class MinimalObject(msgspec.Struct, kw_only=True):
    """Just the metadata: a bookmark, or an object that failed to decode as its kind."""

    metadata: MinimalMeta = msgspec.field(default_factory=MinimalMeta)


class Status(msgspec.Struct, kw_only=True):
    """``metav1.Status``: what the API server sends for errors (and, oddly, a successful bind)."""

    kind: str = ""
    status: str = ""
    message: str = ""
    reason: str = ""
    code: int = 0


STATUS_DECODER = msgspec.json.Decoder(Status)
EVENT_DECODER = msgspec.json.Decoder(WatchEvent)
MINIMAL_DECODER = msgspec.json.Decoder(MinimalObject)
LIST_META_DECODER = msgspec.json.Decoder(ListMeta)


def decode_status(body: bytes) -> Status | None:
    """The ``Status`` in an error body, or None when the body is not one (a proxy's HTML page)."""
    try:
        status = STATUS_DECODER.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return status if status.kind == "Status" or status.code else None


#: JSON strings (with escapes) and the structural characters, for :func:`split_list`.
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{},:]', re.DOTALL)


def split_list(body: bytes) -> tuple[bytes, list[bytes]]:
    """A list body's ``metadata`` and each of its ``items`` as raw JSON, found without recursion.

    msgspec decodes (and even skips) nested values recursively, so an object nested past its
    depth limit fails the whole page. This walks the tokens with a depth counter instead: a
    slow path, only for a page whose normal decoding failed. ``metadata`` is ``b"{}"`` when absent.
    """
    depth = 0
    key: bytes | None = None
    expect_key = False
    metadata = b"{}"
    items: list[bytes] = []
    value_start = -1
    item_start = -1
    in_items = False
    for match in _TOKENS.finditer(body):
        tok = match.group()
        pos = match.start()
        if tok == b"{" or tok == b"[":
            if depth == 1 and key == b'"items"' and tok == b"[":
                in_items = True
                item_start = match.end()
            elif depth == 1 and key == b'"metadata"':
                value_start = pos
            depth += 1
            expect_key = tok == b"{" and depth == 1
        elif tok == b"}" or tok == b"]":
            depth -= 1
            if in_items and depth == 1:
                piece = body[item_start:pos].strip()
                if piece:
                    items.append(piece)
                in_items = False
            elif depth == 1 and value_start >= 0:
                metadata = body[value_start : match.end()]
                value_start = -1
        elif tok == b",":
            if in_items and depth == 2:
                items.append(body[item_start:pos].strip())
                item_start = match.end()
            elif depth == 1:
                expect_key = True
        elif tok == b":":
            expect_key = False
        elif depth == 1 and expect_key:
            key = tok
    return metadata, items
