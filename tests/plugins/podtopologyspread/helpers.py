"""Builders and runners for the PodTopologySpread tests: manifests in, codes and scores out.

The plugin runs against a real Snapshot (with the shared per-domain counts attached, as in the
scheduler) and a handle whose watched-kind stores are the scheduler's versioned ObjectStores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np

from koordsched.api.core import Node, Pod
from koordsched.api.resources import pod_requests
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.podtopologyspread import PodTopologySpread, PodTopologySpreadArgs
from tests.builders import make_node, make_pod
from tests.fakes import FakeHandle

HOSTNAME = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
ALLOC = {"cpu": 64_000, "memory": 256 * 1024**3, "pods": 1000}
TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}


def spread(
    max_skew: int,
    key: str,
    when: str = "DoNotSchedule",
    selector: dict[str, Any] | None = None,
    *,
    min_domains: int | None = None,
    affinity_policy: str | None = None,
    taints_policy: str | None = None,
    match_label_keys: Sequence[str] = (),
) -> dict[str, Any]:
    """One ``topologySpreadConstraints`` entry, as a manifest writes it (upstream's SpreadConstraint)."""
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector is not None:
        c["labelSelector"] = selector
    if min_domains is not None:
        c["minDomains"] = min_domains
    if affinity_policy is not None:
        c["nodeAffinityPolicy"] = affinity_policy
    if taints_policy is not None:
        c["nodeTaintsPolicy"] = taints_policy
    if match_label_keys:
        c["matchLabelKeys"] = list(match_label_keys)
    return c


def node(name: str, taints: list[dict[str, str]] | None = None, **labels: str) -> Node:
    """A node named ``name`` with exactly ``labels`` (``zone="zone1"``; no hostname unless given)."""
    return make_node(name, labels=labels, taints=taints)


def pod(
    name: str,
    *constraints: dict[str, Any],
    labels: Mapping[str, str] | None = None,
    namespace: str = "default",
    node_name: str = "",
    terminating: bool = False,
    owner: tuple[str, str, str] | None = None,
    **spec: Any,
) -> Pod:
    """A pod; ``labels`` default to none; ``owner`` is (apiVersion, kind, name) of its controller."""
    owners = None
    if owner is not None:
        api_version, kind, owner_name = owner
        owners = [
            {"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": "u", "controller": True}
        ]
    if constraints:
        spec["topologySpreadConstraints"] = list(constraints)
    return make_pod(
        name,
        namespace=namespace,
        uid=f"uid-{namespace}-{name}",
        labels=labels,
        node_name=node_name,
        owners=owners,
        deletion_timestamp="2026-12-01T00:00:00Z" if terminating else None,
        **spec,
    )


def labelled(*keys: str) -> dict[str, str]:
    """Labels with empty values, as upstream's tests write ``.Label("foo", "")``."""
    return dict.fromkeys(keys, "")


def info(p: Pod) -> PodInfo:
    return PodInfo(p, pod_requests(p))


def cluster(nodes: Sequence[Node], pods: Sequence[Pod] = ()) -> FakeHandle:
    """A handle over a snapshot holding ``nodes`` and the bound ``pods`` (by their nodeName)."""
    h = FakeHandle()
    snap = h.snapshot
    for n in nodes:
        snap.add_node(n, dict(ALLOC))
    for p in pods:
        snap.add_pod(snap.by_name[p.spec.node_name], info(p))
    return h


def plugin(h: FakeHandle, args: dict[str, Any] | None = None) -> PodTopologySpread:
    decoded = msgspec.convert(args if args is not None else {"defaultingType": "List"}, PodTopologySpreadArgs)
    return PodTopologySpread(decoded, h)


def filter_statuses(pl: PodTopologySpread, h: FakeHandle, p: Pod) -> dict[str, Status]:
    """Node name -> status (SUCCESS when it passes), through PreFilter and the batch filter."""
    state = CycleState()
    pi = info(p)
    _, status = pl.pre_filter(state, pi)
    snap = h.snapshot
    if status.code is Code.SKIP:
        return {i.name: Status() for i in snap.infos}
    assert status.ok, status
    rows = np.arange(snap.n, dtype=np.int64)
    codes = pl.filter_batch(state, pi, rows)
    return {
        i.name: Status() if c == 0 else pl.explain(state, pi, int(c))
        for i, c in zip(snap.infos, codes.tolist(), strict=True)
    }


def filter_codes(pl: PodTopologySpread, h: FakeHandle, p: Pod) -> dict[str, Code]:
    return {name: s.code for name, s in filter_statuses(pl, h, p).items()}


def scores(pl: PodTopologySpread, h: FakeHandle, p: Pod, candidates: Sequence[str]) -> dict[str, int] | None:
    """Normalized scores of the candidate nodes (in that order); None when PreScore skips."""
    state = CycleState()
    pi = info(p)
    snap = h.snapshot
    rows = np.asarray([snap.by_name[n].row for n in candidates], dtype=np.int64)
    status = pl.pre_score(state, pi, rows)
    if status.code is Code.SKIP:
        return None
    assert status.ok, status
    raw = pl.score_batch(state, pi, rows)
    assert raw.dtype == np.int64 and raw.shape == (len(rows),)
    assert pl.normalize_score(state, pi, rows, raw).ok
    return dict(zip(candidates, raw.tolist(), strict=True))
