"""Requests are parsed once per shared spec object (``scheduler.podinfo.RequestsMemo``).

Pods of one template share their spec object (``api.sharing``); their PodInfos then share one
requests dict. What must not change: a pending pod that cannot be placed is refused every time,
a bound pod's unreadable requests are logged for every pod, and a spec that is merely equal (a
different object) is parsed on its own.
"""

from __future__ import annotations

import logging

import msgspec
import pytest

from koordsched.api.core import Pod
from koordsched.api.resources import INT64_MAX
from koordsched.scheduler import podinfo
from koordsched.scheduler.podinfo import InvalidPodError, PriorityClasses, RequestsMemo, new_pod_info
from tests.builders import pod


def twin(p: Pod, name: str) -> Pod:
    """Another pod holding the very same spec object (as ``api.sharing`` leaves them)."""
    meta = msgspec.structs.replace(p.metadata, name=name, uid=f"uid-{name}")
    return msgspec.structs.replace(p, metadata=meta)


def test_pods_sharing_a_spec_share_their_requests() -> None:
    memo, classes = RequestsMemo(), PriorityClasses()
    a = pod("a", "250m", "1Gi")
    b = twin(a, "b")
    equal = pod("c", "250m", "1Gi")  # equal, but its own object
    ia, ib, ic = (new_pod_info(p, classes, memo) for p in (a, b, equal))
    assert ia.requests == {"cpu": 250, "memory": 1024**3}
    assert ia.requests is ib.requests
    assert ic.requests == ia.requests and ic.requests is not ia.requests
    assert (ia.key, ib.key, ib.uid) == ("default/a", "default/b", "uid-b")


def test_a_refused_pending_pod_is_refused_each_time() -> None:
    memo, classes = RequestsMemo(), PriorityClasses()
    bad = pod("bad", "-1")
    for p in (bad, twin(bad, "bad2")):
        with pytest.raises(InvalidPodError, match="must be greater than or equal to 0"):
            new_pod_info(p, classes, memo)


def test_a_bound_pods_unreadable_request_is_logged_for_every_pod(caplog: pytest.LogCaptureFixture) -> None:
    memo, classes = RequestsMemo(), PriorityClasses()
    held = pod("held", "lots", node_name="n1")
    with caplog.at_level(logging.WARNING, logger=podinfo.__name__):
        infos = [new_pod_info(p, classes, memo) for p in (held, twin(held, "held2"))]
    assert [i.requests["cpu"] for i in infos] == [INT64_MAX, INT64_MAX]
    assert infos[0].requests is infos[1].requests
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2
    assert logged[0].startswith("pod default/held bound to node n1: container 'c': resource 'cpu'")
    assert logged[1].startswith("pod default/held2 bound to node n1: container 'c': resource 'cpu'")


def test_the_memo_is_bounded_and_stays_right(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(podinfo, "MEMO_LIMIT", 4)
    memo, classes = RequestsMemo(), PriorityClasses()
    pods = [pod(f"p{i}", f"{i + 1}m") for i in range(20)]
    for _ in range(2):
        assert [new_pod_info(p, classes, memo).requests["cpu"] for p in pods] == list(range(1, 21))
    assert len(memo._pending) <= 4


def test_bound_pods_of_one_template_on_many_nodes_share_their_requests() -> None:
    from koordsched.api.sharing import PodSharing

    memo, classes, sharing = RequestsMemo(), PriorityClasses(), PodSharing()
    template = pod("t", "250m", "1Gi")
    pods = []
    for i in range(6):
        p = twin(template, f"b{i}")
        spec = msgspec.convert(msgspec.to_builtins(p.spec), type(p.spec))  # decoded on its own
        pods.append(
            sharing.pod(msgspec.structs.replace(p, spec=msgspec.structs.replace(spec, node_name=f"n{i % 3}")))
        )
    infos = [new_pod_info(p, classes, memo) for p in pods]
    assert len({id(p.spec) for p in pods}) == 3
    assert all(i.requests is infos[0].requests for i in infos)
    assert infos[0].requests == {"cpu": 250, "memory": 1024**3}
    # Same containers list, other overhead: parsed on its own.
    heavy = msgspec.structs.replace(
        pods[0], spec=msgspec.structs.replace(pods[0].spec, overhead={"cpu": "1"})
    )
    assert new_pod_info(heavy, classes, memo).requests == {"cpu": 1250, "memory": 1024**3}
