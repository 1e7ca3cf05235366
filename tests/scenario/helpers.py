"""What the scenario tests share besides fixtures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

#: The ``write_yaml`` fixture: ``write_yaml(text, name="cluster.yaml") -> Path``.
WriteYaml = Callable[..., Path]


def assert_failed_scheduling(message: str, expected: str) -> None:
    """``message`` is exactly ``expected``, give or take the PostFilter's clause.

    kube-scheduler appends what preemption found (`` preemption: 0/3 nodes are available: ...``)
    when a PostFilter plugin is enabled; the filter reasons before it are compared byte for byte.
    """
    if message != expected:
        assert message.startswith(expected + " "), f"{message!r} is not {expected!r}"
        assert message[len(expected) + 1 :].startswith("preemption: "), message
