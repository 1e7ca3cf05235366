"""FindOneNode (koord-scheduler's extension): the first answer that is not Skip, named after its plugin."""

from __future__ import annotations

import numpy as np
import pytest

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.find_one_node import run_find_one_node
from koordsched.framework.interface import Rows
from koordsched.framework.status import Code, PluginError, Status
from koordsched.framework.types import PodInfo
from tests.builders import make_pod, pod_info


class Answers:
    def __init__(self, name: str, answer: tuple[str | None, Status] | BaseException) -> None:
        self.name = name
        self.answer = answer

    def find_one_node(self, state: CycleState, pod: PodInfo, rows: Rows) -> tuple[str | None, Status]:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


ROWS = np.arange(3)


@pytest.mark.parametrize(
    ("plugins", "node", "code", "message"),
    [
        ("none", None, Code.SKIP, ""),
        ("skip then node", "n1", Code.SUCCESS, ""),
        ("returned error, own words", None, Code.ERROR, "no planned pods"),
        ("raised PluginError", None, Code.ERROR, "no pending pods"),
        ("raised bug", None, Code.ERROR, 'running FindOneNode plugin "B": boom'),
    ],
)
def test_first_answer_that_is_not_skip(plugins: str, node: str | None, code: Code, message: str) -> None:
    a = Answers("A", (None, Status(Code.SKIP)))
    table = {
        "none": [],
        "skip then node": [a, Answers("B", ("n1", Status(Code.SUCCESS)))],
        "returned error, own words": [a, Answers("B", (None, Status(Code.ERROR, "no planned pods")))],
        "raised PluginError": [a, Answers("B", PluginError(Status(Code.ERROR, "no pending pods")))],
        "raised bug": [a, Answers("B", RuntimeError("boom"))],
    }
    got_node, status = run_find_one_node(table[plugins], CycleState(), pod_info(make_pod("p")), ROWS)
    assert (got_node, status.code) == (node, code)
    if code is not Code.SKIP:
        assert status.plugin == "B"
    if message:
        assert status.message() == message
