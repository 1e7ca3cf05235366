"""Per-pod values kept once per shared part (``framework.shared_memo``) and one PodInfo per bound pod.

Pods of one template share their spec object and requests dict; what plugins work out from those
parts is then one object for all of them, never handed to a merely equal part, and the answer is
the one each pod would get alone. When our bind is confirmed, the cache swaps the pod's PodInfo:
listeners that keep PodInfos (LoadAware's assign cache) are told, so the assumed one is let go.
"""

from __future__ import annotations

import sys
from typing import Any

import msgspec

from koordsched.api.core import Pod
from koordsched.framework.shared_memo import IdentityMemo
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare.requests import pod_device_request
from koordsched.plugins.elasticquota.ledger import quota_requests
from koordsched.plugins.loadaware.assign_cache import AssignCache
from koordsched.plugins.nodenumaresource.node_state import _cached_allocation
from koordsched.plugins.noderesources.nonzero import pod_nonzero
from koordsched.plugins.noderesourcesfitplus.request import pod_request
from koordsched.plugins.reservation.matching import pod_spec
from koordsched.plugins.scarceresourceavoidance.plugin import requested_set
from koordsched.scheduler.cache import Cache
from koordsched.scheduler.podinfo import PriorityClasses, RequestsMemo, new_pod_info
from tests.builders import node, pod


def twin(p: Pod, name: str) -> Pod:
    """Another pod holding the very same spec object (as ``api.sharing`` leaves them)."""
    meta = msgspec.structs.replace(p.metadata, name=name, uid=f"uid-{name}")
    return msgspec.structs.replace(p, metadata=meta)


def test_identity_memo_answers_only_for_the_same_objects() -> None:
    memo: IdentityMemo[str] = IdentityMemo(limit=2)
    a, equal, b = {"cpu": 1}, {"cpu": 1}, {"cpu": 2}
    assert memo.get(a) is None
    assert memo.put(a, "A") == "A"
    assert memo.get(a) == "A"
    assert memo.get(equal) is None  # equal is not the same
    marker = object()
    memo.put(b, "B", marker)
    assert memo.get(b) is None and memo.get(b, object()) is None  # a different second part
    assert memo.get(b, marker) == "B"
    memo.put(equal, "E")  # the third entry: it starts again
    assert len(memo) == 1 and memo.get(a) is None and memo.get(equal) == "E"


def test_values_are_shared_by_twins_and_equal_for_equal_specs() -> None:
    memo, classes = RequestsMemo(), PriorityClasses()
    a = pod("a", "250m", "1Gi", nodeSelector={"zone": "z1"})
    b = twin(a, "b")
    equal = pod("c", "250m", "1Gi", nodeSelector={"zone": "z1"})
    ia, ib, ic = (new_pod_info(p, classes, memo) for p in (a, b, equal))
    assert pod_nonzero(ia) is pod_nonzero(ib)
    assert pod_nonzero(ic) == pod_nonzero(ia) and pod_nonzero(ic) is not pod_nonzero(ia)
    assert quota_requests(ia) is quota_requests(ib)
    assert quota_requests(ic) == quota_requests(ia) == {"cpu": 250, "memory": 1024**3}
    assert quota_requests(ic) is not quota_requests(ia)
    assert pod_request(ia) is pod_request(ib) and pod_request(ic) == pod_request(ia)
    assert requested_set(ia) is requested_set(ib) and requested_set(ic) == requested_set(ia)
    assert pod_device_request(ia) is None
    # Nothing of it was kept per pod.
    assert ia.extra == {} and ib.extra == {} and ic.extra == {}


def test_nonzero_follows_the_requests_dict_too() -> None:
    """Two PodInfos of one spec with different requests (a PodInfo made elsewhere) are not merged."""
    a = pod("a", "250m", "1Gi")
    one = PodInfo(a, {"cpu": 250, "memory": 1024**3})
    other = PodInfo(twin(a, "b"), {"cpu": 500, "memory": 1024**3})
    assert pod_nonzero(one)[0] == 250 and pod_nonzero(other)[0] == 500


def with_annotations(p: Pod, annotations: dict[str, str]) -> Pod:
    return msgspec.structs.replace(p, metadata=msgspec.structs.replace(p.metadata, annotations=annotations))


def test_reservation_and_numa_readings_of_a_plain_pod_keep_nothing() -> None:
    plain = PodInfo(pod("a"), {"cpu": 100})
    assert pod_spec(plain) == pod_spec(PodInfo(pod("b"), {"cpu": 100}))
    assert not pod_spec(plain).has_affinity and pod_spec(plain).exact_names is None
    assert _cached_allocation(plain) == (None, None)
    assert plain.extra == {}
    # An annotated pod is still read (and its reading kept on it).
    annotated = PodInfo(
        with_annotations(pod("c"), {"scheduling.koordinator.sh/reservation-affinity": "{}"}), {"cpu": 100}
    )
    assert pod_spec(annotated).has_affinity
    status = PodInfo(
        with_annotations(pod("d", node_name="n1"), {"scheduling.koordinator.sh/resource-status": "{"}),
        {"cpu": 100},
    )
    alloc, error = _cached_allocation(status)
    assert alloc is None and error


class _Replacements:
    def __init__(self) -> None:
        self.seen: list[tuple[str, PodInfo, PodInfo]] = []

    def on_node_added(self, info: NodeInfo) -> None: ...
    def on_node_updated(self, info: NodeInfo, old: Any) -> None: ...
    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None: ...
    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None: ...
    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None: ...

    def on_pod_replaced(self, info: NodeInfo, old: PodInfo, new: PodInfo) -> None:
        self.seen.append((info.name, old, new))


def test_a_confirmed_bind_leaves_one_podinfo() -> None:
    cache = Cache()
    cache.add_node(node("n1"))
    assign = AssignCache.of(cache.snapshot, lambda: 1000.0)
    told = _Replacements()
    cache.snapshot.listeners.append(told)
    assumed = PodInfo(pod("a"), {"cpu": 500})
    cache.assume(assumed, "n1")
    assign.reserve("n1", assumed)
    confirmed = PodInfo(pod("a", node_name="n1"), assumed.requests)
    cache.add_pod(confirmed, "n1")
    assert told.seen == [("n1", assumed, confirmed)]
    (held,) = assign.pods_on("n1").values()
    assert held.pod is confirmed and held.timestamp == 1000.0  # the first stamp stays
    told.seen.clear()
    # Nothing but this test refers to the assumed PodInfo any more (getrefcount's own argument
    # is the other reference).
    assert sys.getrefcount(assumed) == 2
    # Its key is the confirmed one's string.
    assert confirmed.key is assumed.key


def test_parts_memo_by_identity_of_every_part() -> None:
    from koordsched.framework.shared_memo import PartsMemo

    memo: PartsMemo[str] = PartsMemo(limit=4)
    ann, labels, spec, requests = {"a": "1"}, {"l": "1"}, object(), {"cpu": 1}
    assert memo.get(ann, labels, spec, requests, 0) is None
    memo.put(ann, labels, spec, requests, "v", 0)
    assert memo.get(ann, labels, spec, requests, 0) == "v"
    # An equal but different object, or another plain value, is another entry.
    assert memo.get(dict(ann), labels, spec, requests, 0) is None
    assert memo.get(ann, dict(labels), spec, requests, 0) is None
    assert memo.get(ann, labels, object(), requests, 0) is None
    assert memo.get(ann, labels, spec, dict(requests), 0) is None
    assert memo.get(ann, labels, spec, requests, 1) is None
    # None stands for an empty part: every such pod shares it.
    memo.put(None, None, spec, requests, "empty")
    assert memo.get(None, None, spec, requests) == "empty"
    # Bounded: at the limit it starts again.
    for i in range(4):
        memo.put(None, None, spec, requests, str(i), i + 10)
    assert len(memo) <= 4
    assert memo.get(ann, labels, spec, requests, 0) is None
