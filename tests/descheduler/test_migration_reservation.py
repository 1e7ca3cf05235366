"""The Reservation a ReservationFirst job creates, read back the way the scheduler reads it.

Semantics (Koordinator's CreateOrUpdateReservationOptions): the template is the pod without its
nodeName; the owner is the pod's controller with the pod's namespace; allocateOnce; the job's
TTL; ``metadata.name NotIn [source node]`` added to every required node affinity term.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.core import ObjectMeta, Pod
from koordsched.api.reservation import Reservation, check_reservation, owner_matches, reserve_pod
from koordsched.api.selectors import match_node_selector_term
from koordsched.descheduler.migration import job as pmj
from koordsched.descheduler.migration.controller import node_restricted_template, template_affinity
from koordsched.descheduler.migration.reservation import reservation_body, skip_node_affinity
from tests.descheduler.helpers import pod

REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def job(name: str = "web-0-abc", ttl: str | None = "2m") -> pmj.PodMigrationJob:
    return pmj.PodMigrationJob(
        metadata=ObjectMeta(name=name),
        spec=pmj.PodMigrationJobSpec(ttl=ttl, mode="ReservationFirst"),
        status=pmj.PodMigrationJobStatus(phase=pmj.PENDING),
    )


def decoded(body: dict[str, Any]) -> Reservation:
    r = msgspec.convert(body, Reservation)
    check_reservation(r)  # what the scheduler's decode refuses
    return r


ZONES = {"hot": "a", "cold": "a", "warm": "b", "far": "c"}


def nodes_allowed(r: Reservation, names: list[str]) -> list[str]:
    """The node names the reservation's required node affinity admits (labels: ZONES)."""
    assert r.spec.template is not None and r.spec.template.spec.affinity is not None
    na = r.spec.template.spec.affinity.node_affinity
    assert na is not None and na.required_during_scheduling_ignored_during_execution is not None
    terms = na.required_during_scheduling_ignored_during_execution.node_selector_terms
    return [n for n in names if any(match_node_selector_term(t, {"zone": ZONES[n]}, n) for t in terms)]


def with_affinity(p: Pod, affinity: dict[str, Any]) -> Pod:
    return msgspec.convert(
        {**msgspec.to_builtins(p), "spec": {**msgspec.to_builtins(p.spec), "affinity": affinity}}, Pod
    )


def zones(*values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": "zone", "operator": "In", "values": list(values)}]}


def replacement(src: Pod, name: str, *, owner: str = "rs", ns: str | None = None) -> Pod:
    new = pod(name, "", owner=owner, labels=dict(src.metadata.labels), namespace=ns or src.metadata.namespace)
    return new


def test_template_owner_ttl_and_the_source_node_excluded() -> None:
    old = pod("web-0", "hot", labels={"app": "web"}, annotations={"scheduling.koordinator.sh/x": "1"})
    r = decoded(reservation_body(old, job(), None))
    assert r.metadata.name == "web-0-abc"
    assert r.metadata.labels == {"koordinator.sh/migration-job": "web-0-abc"}
    assert r.spec.allocate_once is True and r.spec.ttl == "2m"
    t = r.spec.template
    assert t is not None
    assert t.metadata.namespace == "default" and t.metadata.labels == {"app": "web"}
    assert t.metadata.annotations == {}  # what the pod was allocated is not carried over
    assert t.spec.node_name == "" and t.spec.scheduler_name == "koord-scheduler"
    assert t.spec.containers == old.spec.containers
    assert nodes_allowed(r, ["hot", "cold", "warm"]) == ["cold", "warm"]
    # The reserve pod the scheduler makes of it is pending and asks what the pod asked.
    rp = reserve_pod(r)
    assert rp is not None and rp.spec.node_name == "" and rp.spec.containers == old.spec.containers


@pytest.mark.parametrize(
    ("owner", "ns", "matches"),
    [
        ("rs", None, True),  # the controller's next pod
        ("other", None, False),  # another workload's pod
        ("rs", "elsewhere", False),  # same name of controller, another namespace
    ],
)
def test_the_owner_is_the_pods_controller(owner: str, ns: str | None, matches: bool) -> None:
    old = pod("web-0", "hot", labels={"app": "web"})
    r = decoded(reservation_body(old, job(), None))
    (o,) = r.spec.owners
    assert o.controller is not None and o.object is None and o.label_selector is None
    assert (o.controller.kind, o.controller.name, o.controller.uid) == ("ReplicaSet", "rs", "uid-rs")
    assert (o.controller.controller, o.controller.namespace) == (True, "default")
    assert owner_matches(o, replacement(old, "web-1", owner=owner, ns=ns)) is matches


def test_a_bare_pod_owns_it_by_name() -> None:
    old = pod("solo", "hot", owner=None)
    (o,) = decoded(reservation_body(old, job(), None)).spec.owners
    assert o.object is not None and (o.object.kind, o.object.name, o.object.namespace) == (
        "Pod",
        "solo",
        "default",
    )
    assert owner_matches(o, pod("solo", "", owner=None))
    assert not owner_matches(o, pod("solo-2", "", owner=None))


def test_no_job_ttl_falls_back_to_five_minutes() -> None:
    r = decoded(reservation_body(pod("web-0", "hot"), job(ttl=None), None))
    assert r.spec.ttl == "5m"


def test_planned_nodes_are_anded_with_the_pods_affinity_and_still_skip_the_source() -> None:
    old = pod("web-0", "hot")
    planned = template_affinity(node_restricted_template(("cold", "hot", "warm")))
    assert planned is not None
    r = decoded(reservation_body(old, job(), planned))
    assert nodes_allowed(r, ["hot", "cold", "warm", "far"]) == ["cold", "warm"]
    # The pod's own terms (zone a or c) still hold for its replacement, so for the reservation.
    own = {"nodeAffinity": {REQ: {"nodeSelectorTerms": [zones("a"), zones("c")]}}}
    r = decoded(reservation_body(with_affinity(old, own), job(), planned))
    assert nodes_allowed(r, ["hot", "cold", "warm", "far"]) == ["cold"]


def test_the_pods_own_terms_each_gain_the_exclusion() -> None:
    affinity = {
        "nodeAffinity": {REQ: {"nodeSelectorTerms": [zones("a"), zones("b")]}},
        "podAntiAffinity": {REQ: [{"topologyKey": "zone", "labelSelector": {"matchLabels": {"x": "y"}}}]},
    }
    old = with_affinity(pod("web-0", "hot"), affinity)
    r = decoded(reservation_body(old, job(), None))
    assert nodes_allowed(r, ["hot", "cold", "warm", "far"]) == ["cold", "warm"]
    assert r.spec.template is not None and r.spec.template.spec.affinity is not None
    assert old.spec.affinity is not None
    assert r.spec.template.spec.affinity.pod_anti_affinity == old.spec.affinity.pod_anti_affinity
    # The pod's own affinity is not changed.
    assert "matchFields" not in affinity["nodeAffinity"][REQ]["nodeSelectorTerms"][0]  # type: ignore[index]


def test_skip_node_affinity_without_a_node_leaves_it_alone() -> None:
    assert skip_node_affinity(None, "") is None
    a = {"nodeAffinity": {}}
    assert skip_node_affinity(a, "") is a
    assert skip_node_affinity({"nodeAffinity": {}}, "n") == {
        "nodeAffinity": {
            REQ: {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n"]}]}
                ]
            }
        }
    }
