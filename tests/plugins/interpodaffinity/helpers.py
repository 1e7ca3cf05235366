"""Builders for InterPodAffinity's tests: pods with terms, zoned nodes, a handle with Namespaces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import numpy as np

from koordsched.api.core import Node, Pod
from koordsched.api.kinds import NAMESPACES
from koordsched.api.workloads import Namespace
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from tests.builders import make_node, make_pod
from tests.fakes import FakeHandle

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
ALLOC = {"cpu": 64_000, "memory": 256 * 1024**3, "pods": 110}

AFFINITY_REASON = "node(s) didn't match pod affinity rules"
ANTI_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"


def set_namespace(handle: FakeHandle, name: str, **labels: str) -> None:
    """Give the handle a Namespace object with these labels (what namespace selectors read)."""
    handle.put(NAMESPACES, msgspec.convert({"metadata": {"name": name, "labels": labels}}, Namespace))


def sel(**labels: str) -> dict[str, Any]:
    return {"matchLabels": labels}


def exprs(*items: tuple[str, str, list[str]]) -> dict[str, Any]:
    return {"matchExpressions": [{"key": k, "operator": op, "values": v} for k, op, v in items]}


def term(
    selector: dict[str, Any] | None,
    key: str = HOST,
    *,
    namespaces: list[str] | None = None,
    ns_selector: dict[str, Any] | None = None,
    match_keys: list[str] | None = None,
    mismatch_keys: list[str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": key}
    if selector is not None:
        out["labelSelector"] = selector
    if namespaces is not None:
        out["namespaces"] = namespaces
    if ns_selector is not None:
        out["namespaceSelector"] = ns_selector
    if match_keys:
        out["matchLabelKeys"] = match_keys
    if mismatch_keys:
        out["mismatchLabelKeys"] = mismatch_keys
    return out


def weighted(weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": t}


def affinity(
    *,
    required: list[dict[str, Any]] | None = None,
    anti: list[dict[str, Any]] | None = None,
    preferred: list[dict[str, Any]] | None = None,
    preferred_anti: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if required is not None or preferred is not None:
        out["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": required or [],
            "preferredDuringSchedulingIgnoredDuringExecution": preferred or [],
        }
    if anti is not None or preferred_anti is not None:
        out["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": anti or [],
            "preferredDuringSchedulingIgnoredDuringExecution": preferred_anti or [],
        }
    return out


_seq = [0]


def apod(
    name: str = "",
    labels: Mapping[str, str] | None = None,
    *,
    namespace: str = "default",
    aff: dict[str, Any] | None = None,
    node_name: str = "",
    terminating: bool = False,
) -> Pod:
    if not name:
        _seq[0] += 1
        name = f"p{_seq[0]}"
    return make_pod(
        name,
        namespace=namespace,
        uid=f"uid-{namespace}-{name}",
        scheduler="koord-scheduler",
        labels=labels,
        node_name=node_name,
        deletion_timestamp="2026-12-01T00:00:00Z" if terminating else None,
        **({"affinity": aff} if aff else {}),
    )


def anode(name: str, **labels: str) -> Node:
    return make_node(name, labels={HOST: name, **labels})


def info(pod: Pod) -> PodInfo:
    return PodInfo(pod, {})


def cluster(nodes: list[Node], placed: list[tuple[str, Pod]]) -> tuple[Snapshot, FakeHandle]:
    snap = Snapshot()
    for n in nodes:
        snap.add_node(n, dict(ALLOC))
    for node_name, p in placed:
        snap.add_pod(snap.by_name[node_name], info(p))
    return snap, FakeHandle(snap)


def plugin(handle: FakeHandle, **args: Any) -> InterPodAffinity:
    return InterPodAffinity(msgspec.convert(args, InterPodAffinityArgs), handle)


def verdicts(pl: InterPodAffinity, pod: Pod, snap: Snapshot) -> tuple[Status, dict[str, Status | None]]:
    """PreFilter's status, then each node's Filter verdict (None: passes)."""
    state = CycleState()
    p = info(pod)
    _, pre = pl.pre_filter(state, p)
    if pre.code is Code.SKIP:
        return pre, {i.name: None for i in snap.infos}
    if not pre.ok:
        return pre, {}
    rows = np.arange(snap.n, dtype=np.int64)
    codes = pl.filter_batch(state, p, rows)
    return pre, {
        i.name: None if c == 0 else pl.explain(state, p, int(c))
        for i, c in zip(snap.infos, codes.tolist(), strict=True)
    }


def reasons(pl: InterPodAffinity, pod: Pod, snap: Snapshot) -> dict[str, str | None]:
    """Each node's reason, "" for a pass (PreFilter must succeed or Skip)."""
    pre, per_node = verdicts(pl, pod, snap)
    assert pre.ok or pre.code is Code.SKIP, pre
    return {k: None if v is None else v.message() for k, v in per_node.items()}


def scores(pl: InterPodAffinity, pod: Pod, snap: Snapshot) -> dict[str, int] | None:
    """Normalized scores per node (every node a candidate); None when PreScore skips."""
    state = CycleState()
    p = info(pod)
    rows = np.arange(snap.n, dtype=np.int64)
    status = pl.pre_score(state, p, rows)
    if status.code is Code.SKIP:
        return None
    assert status.ok, status
    raw = pl.score_batch(state, p, rows)
    assert pl.normalize_score(state, p, rows, raw).ok
    return {i.name: int(s) for i, s in zip(snap.infos, raw.tolist(), strict=True)}


def raw_scores(pl: InterPodAffinity, pod: Pod, snap: Snapshot) -> dict[str, int] | None:
    state = CycleState()
    p = info(pod)
    rows = np.arange(snap.n, dtype=np.int64)
    status = pl.pre_score(state, p, rows)
    if status.code is Code.SKIP:
        return None
    raw = pl.score_batch(state, p, rows)
    return {i.name: int(s) for i, s in zip(snap.infos, raw.tolist(), strict=True)}
