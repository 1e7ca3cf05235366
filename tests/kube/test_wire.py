"""split_list: a list page's metadata and items found without recursion, strings and all."""

from __future__ import annotations

import json

import pytest

from koordsched.backends.kube.wire import split_list


@pytest.mark.parametrize(
    "body",
    [
        {"metadata": {"resourceVersion": "3"}, "items": [{"a": 1}, {"b": [1, {"c": "x,]}"}]}]},
        {"items": [{"s": 'quote " and \\\\ and \\" ] , {'}], "metadata": {"continue": "t,o]k"}},
        {"kind": "NodeList", "items": [], "metadata": {}},
        {"apiVersion": "v1", "items": None, "metadata": {"resourceVersion": "1"}},
        {"metadata": {"resourceVersion": "9"}, "items": [[1, [2, [3]]], "plain", 4, None]},
    ],
)
def test_split_list_agrees_with_a_json_parser(body: dict[str, object]) -> None:
    raw = json.dumps(body).encode()
    metadata, items = split_list(raw)
    assert json.loads(metadata) == body.get("metadata", {})
    assert [json.loads(i) for i in items] == (body.get("items") or [])


def test_split_list_walks_nesting_no_recursive_parser_can() -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    metadata, items = split_list(b'{"metadata":{"resourceVersion":"5"},"items":[' + deep + b',{"x":1}]}')
    assert json.loads(metadata) == {"resourceVersion": "5"}
    assert len(items) == 2 and items[0] == deep and json.loads(items[1]) == {"x": 1}
