"""Default constraints: upstream's DefaultSelector (Services, then the controller) and when they apply."""

from __future__ import annotations

from typing import Any

from koordsched.api.core import LabelSelector, LabelSelectorRequirement
from koordsched.api.kinds import REPLICA_SETS, REPLICATION_CONTROLLERS, SERVICES, STATEFUL_SETS
from koordsched.api.selectors import match_label_selector
from koordsched.framework.status import Code
from koordsched.plugins.podtopologyspread.defaults import DefaultSelectors
from tests.fakes import FakeHandle
from tests.plugins.podtopologyspread.helpers import (
    HOSTNAME,
    cluster,
    filter_codes,
    info,
    node,
    plugin,
    pod,
    scores,
    spread,
)

WEB = {"app": "web", "tier": "front"}


def service(name: str, selector: dict[str, str], namespace: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"selector": selector}}


def replica_set(name: str, selector: dict[str, Any] | None, namespace: str = "default") -> dict[str, Any]:
    spec = {} if selector is None else {"selector": selector}
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


def selector_of(h: FakeHandle, **pod_args: Any) -> LabelSelector | None:
    return DefaultSelectors(h).selector(info(pod("p", **pod_args)))


def test_no_service_no_controller_no_selector() -> None:
    h = FakeHandle()
    h.put(SERVICES, service("other", {"app": "db"}))
    assert selector_of(h, labels=WEB) is None


def test_services_selecting_the_pod_are_merged() -> None:
    h = FakeHandle()
    h.put(SERVICES, service("a", {"app": "web"}))
    h.put(SERVICES, service("b", {"tier": "front"}))
    h.put(SERVICES, service("c", {"app": "db"}))  # does not select the pod
    h.put(SERVICES, service("d", {"app": "web"}, namespace="other"))  # another namespace
    h.put(SERVICES, service("e", {}))  # no selector: selects no pod
    sel = selector_of(h, labels=WEB)
    assert sel == LabelSelector(match_labels={"app": "web", "tier": "front"})


def test_replica_set_requirements_are_added() -> None:
    h = FakeHandle()
    h.put(SERVICES, service("a", {"app": "web"}))
    h.put(
        REPLICA_SETS,
        replica_set(
            "web-abc",
            {
                "matchLabels": {"tier": "front"},
                "matchExpressions": [{"key": "track", "operator": "DoesNotExist"}],
            },
        ),
    )
    sel = selector_of(h, labels=WEB, owner=("apps/v1", "ReplicaSet", "web-abc"))
    assert sel == LabelSelector(
        match_labels={"app": "web"},
        match_expressions=[
            LabelSelectorRequirement(key="tier", operator="In", values=["front"]),
            LabelSelectorRequirement(key="track", operator="DoesNotExist"),
        ],
    )


def test_stateful_set_and_replication_controller() -> None:
    h = FakeHandle()
    h.put(STATEFUL_SETS, replica_set("db", {"matchLabels": {"app": "db"}}))
    h.put(
        REPLICATION_CONTROLLERS,
        {"metadata": {"name": "rc", "namespace": "default"}, "spec": {"selector": {"app": "old"}}},
    )
    ss = selector_of(h, labels={"app": "db"}, owner=("apps/v1", "StatefulSet", "db"))
    assert (
        ss is not None
        and match_label_selector(ss, {"app": "db"})
        and not match_label_selector(ss, {"app": "x"})
    )
    rc = selector_of(h, labels={"app": "old"}, owner=("v1", "ReplicationController", "rc"))
    assert rc == LabelSelector(match_labels={"app": "old"})


def test_controllers_only_by_exact_group_version_and_kind() -> None:
    h = FakeHandle()
    h.put(REPLICA_SETS, replica_set("web", {"matchLabels": {"app": "web"}}))
    # A ReplicaSet named as a Deployment owner, an old extensions/v1beta1 reference, an unknown one
    # in another namespace: none is followed.
    assert selector_of(h, labels=WEB, owner=("apps/v1", "Deployment", "web")) is None
    assert selector_of(h, labels=WEB, owner=("extensions/v1beta1", "ReplicaSet", "web")) is None
    assert selector_of(h, labels=WEB, owner=("apps/v1", "ReplicaSet", "missing")) is None
    assert selector_of(h, labels=WEB, namespace="other", owner=("apps/v1", "ReplicaSet", "web")) is None


def test_controller_selector_that_selects_nothing_or_cannot_parse_adds_nothing() -> None:
    h = FakeHandle()
    h.put(REPLICA_SETS, replica_set("nil", None))
    h.put(REPLICA_SETS, replica_set("empty", {}))
    h.put(REPLICA_SETS, replica_set("bad", {"matchExpressions": [{"key": "app", "operator": "In"}]}))
    for name in ("nil", "empty", "bad"):
        assert selector_of(h, labels=WEB, owner=("apps/v1", "ReplicaSet", name)) is None, name


def test_the_answer_follows_store_changes() -> None:
    h = FakeHandle()
    sel = DefaultSelectors(h)
    p = info(pod("p", labels=WEB))
    assert sel.selector(p) is None
    h.put(SERVICES, service("a", {"app": "web"}))
    assert sel.selector(p) == LabelSelector(match_labels={"app": "web"})
    first = sel.selector(p)
    assert sel.selector(p) is first  # remembered while nothing moved
    del h.stores["Service"]["default/a"]
    assert sel.selector(p) is None


def test_defaults_apply_only_to_pods_without_constraints() -> None:
    """List defaults with a DoNotSchedule constraint: a ReplicaSet's pods are spread by it; a pod
    with its own constraints is not; a pod no Service or controller claims gets none."""
    args = {
        "defaultingType": "List",
        "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
    }
    h = cluster(
        [node("a", zone="z1"), node("b", zone="z2")],
        [pod("w1", labels={"app": "web"}, node_name="a"), pod("w2", labels={"app": "web"}, node_name="a")],
    )
    h.put(REPLICA_SETS, replica_set("web", {"matchLabels": {"app": "web"}}))
    pl = plugin(h, args)
    owned = pod("w3", labels={"app": "web"}, owner=("apps/v1", "ReplicaSet", "web"))
    assert filter_codes(pl, h, owned) == {"a": Code.UNSCHEDULABLE, "b": Code.SUCCESS}
    unowned = pod("w4", labels={"app": "web"})
    assert filter_codes(pl, h, unowned) == {"a": Code.SUCCESS, "b": Code.SUCCESS}
    # Its own (soft) constraint replaces the defaults entirely.
    own = pod(
        "w5",
        spread(1, HOSTNAME, "ScheduleAnyway", {"matchLabels": {"app": "web"}}),
        labels={"app": "web"},
        owner=("apps/v1", "ReplicaSet", "web"),
    )
    assert filter_codes(pl, h, own) == {"a": Code.SUCCESS, "b": Code.SUCCESS}


def test_system_defaults_score_a_replica_set_by_hostname_and_zone() -> None:
    h = cluster(
        [
            node(n, **{HOSTNAME: n, "topology.kubernetes.io/zone": z})
            for n, z in (("a", "z1"), ("b", "z1"), ("c", "z2"))
        ],
        [pod("w1", labels={"app": "web"}, node_name="a"), pod("w2", labels={"app": "web"}, node_name="b")],
    )
    h.put(REPLICA_SETS, replica_set("web", {"matchLabels": {"app": "web"}}))
    pl = plugin(h, {})
    got = scores(
        pl, h, pod("w3", labels={"app": "web"}, owner=("apps/v1", "ReplicaSet", "web")), ["a", "b", "c"]
    )
    assert got is not None and got["c"] == 100 and got["a"] == got["b"] < 100
    # The same pod without the ReplicaSet: no defaults, PreScore skips.
    assert scores(pl, h, pod("w4", labels={"app": "web"}), ["a", "b", "c"]) is None


def test_pods_of_one_replica_set_share_the_answer_until_a_store_moves() -> None:
    h = FakeHandle()
    h.put(REPLICA_SETS, replica_set("web", {"matchLabels": {"app": "web"}}))
    sel = DefaultSelectors(h)
    rs = ("apps/v1", "ReplicaSet", "web")
    first = sel.selector(info(pod("w1", labels={"app": "web"}, owner=rs)))
    assert first is not None
    assert sel.selector(info(pod("w2", labels={"app": "web"}, owner=rs))) is first
    other = sel.selector(info(pod("w3", labels={"app": "web", "x": "y"}, owner=rs)))
    assert other == first and other is not first  # other labels: its own answer
    h.put(REPLICA_SETS, replica_set("web", {"matchLabels": {"app": "web", "tier": "front"}}))
    moved = sel.selector(info(pod("w4", labels={"app": "web"}, owner=rs)))
    assert moved is not None and moved != first
