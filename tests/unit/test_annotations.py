"""Hand-written JSON annotations: strict first, comments tolerated only when strict decoding fails."""

from __future__ import annotations

import msgspec
import pytest

from koordsched.api.annotations import decode_annotation, strip_json_comments
from koordsched.api.koordinator import DeviceHint, DeviceJointAllocate


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', '{"a": 1}'),
        ('{"a": {} //apply VF\n}', '{"a": {} \n}'),
        ('{"a": /* inline */ 1}', '{"a":  1}'),
        (
            '{"url": "http://x//y", "s": "/* not a comment */"}',
            '{"url": "http://x//y", "s": "/* not a comment */"}',
        ),
        ('{"q": "say \\"//\\" here"} // end', '{"q": "say \\"//\\" here"} '),
        ("{} /* unterminated", "{} "),
    ],
)
def test_strip_json_comments(text: str, expected: str) -> None:
    assert strip_json_comments(text) == expected


def test_the_published_vf_hint_decodes() -> None:
    published = '{\n  "rdma": {\n    "vfSelector": {} //apply VF\n  }\n}'
    hints = decode_annotation(published, dict[str, DeviceHint])
    assert hints["rdma"].vf_selector is not None


def test_invalid_json_still_fails_with_the_strict_error() -> None:
    with pytest.raises(msgspec.DecodeError) as err:
        decode_annotation('{"deviceTypes": ["gpu",]} // trailing comma', DeviceJointAllocate)
    assert "malformed" in str(err.value)


def test_type_errors_are_not_retried() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"\$\.deviceTypes"):
        decode_annotation('{"deviceTypes": "gpu"}', DeviceJointAllocate)
