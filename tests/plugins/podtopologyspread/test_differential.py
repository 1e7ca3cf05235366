"""The kernels against a plain reference of upstream's algorithm, on random clusters.

The reference below is written the way kube-scheduler's code reads: maps keyed by topology
value, a walk over every node and every pod for each incoming pod, no caching. The plugin
keeps per-domain counts incrementally in the snapshot and evaluates over all rows in numba
kernels; both must give the same verdict for every node and the same normalized score for
every candidate. The cluster changes between incoming pods (pods bound, deleted, relabelled
as terminating; nodes added and removed), so the incremental counts are checked too.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import msgspec

from koordsched.api.core import LabelSelector, LabelSelectorRequirement, Node, Pod
from koordsched.api.kinds import REPLICA_SETS, SERVICES
from koordsched.api.selectors import match_label_selector, pod_matches_node_selector_and_affinity
from koordsched.api.taints import find_untolerated_taint
from koordsched.framework.status import Code
from koordsched.plugins.podtopologyspread import PodTopologySpreadArgs
from tests.fakes import FakeHandle
from tests.plugins.podtopologyspread.helpers import (
    ALLOC,
    HOSTNAME,
    filter_codes,
    info,
    plugin,
    scores,
)

ZONE = "topology.kubernetes.io/zone"
KEYS = (ZONE, HOSTNAME, "rack")
APPS = ("web", "db", "cache")
NAMESPACES = ("default", "other")
MAX_INT32 = 2**31 - 1

# --- the reference ------------------------------------------------------------------------------


@dataclass
class RefConstraint:
    max_skew: int
    key: str
    selector: LabelSelector | None
    min_domains: int
    honor_affinity: bool
    honor_taints: bool


def ref_constraints(
    p: Pod, specs: list[Any], action: str, default_selector: LabelSelector | None
) -> list[RefConstraint]:
    out = []
    for c in specs:
        if c.when_unsatisfiable != action:
            continue
        sel = c.label_selector if default_selector is None else default_selector
        if default_selector is None and sel is not None and c.match_label_keys:
            extra = {k: p.metadata.labels[k] for k in c.match_label_keys if k in p.metadata.labels}
            if extra:
                sel = LabelSelector(
                    match_labels=sel.match_labels,
                    match_expressions=[
                        *sel.match_expressions,
                        *(
                            LabelSelectorRequirement(key=k, operator="In", values=[v])
                            for k, v in extra.items()
                        ),
                    ],
                )
        out.append(
            RefConstraint(
                c.max_skew,
                c.topology_key,
                sel,
                c.min_domains or 1,
                (c.node_affinity_policy or "Honor") == "Honor",
                c.node_taints_policy == "Honor",
            )
        )
    return out


def counts_on(node_pods: list[Pod], c: RefConstraint, ns: str) -> int:
    return sum(
        1
        for q in node_pods
        if q.metadata.namespace == ns
        and not q.metadata.deletion_timestamp
        and match_label_selector(c.selector, q.metadata.labels)
    )


def included(c: RefConstraint, p: Pod, n: Node) -> bool:
    if c.honor_affinity and not pod_matches_node_selector_and_affinity(p, n.metadata.labels, n.metadata.name):
        return False
    untolerated = find_untolerated_taint(n.spec.taints, p.spec.tolerations, ("NoSchedule", "NoExecute"))
    return not (c.honor_taints and untolerated is not None)


def ref_filter(
    nodes: list[Node], on: dict[str, list[Pod]], p: Pod, cs: list[RefConstraint]
) -> dict[str, Code]:
    if not cs:
        return {n.metadata.name: Code.SUCCESS for n in nodes}
    ns = p.metadata.namespace
    tp: list[dict[str, int]] = [{} for _ in cs]
    for n in nodes:
        labels = n.metadata.labels
        if not all(c.key in labels for c in cs):
            continue
        for i, c in enumerate(cs):
            if included(c, p, n):
                v = labels[c.key]
                tp[i][v] = tp[i].get(v, 0) + counts_on(on[n.metadata.name], c, ns)
    out = {}
    for n in nodes:
        code = Code.SUCCESS
        for i, c in enumerate(cs):
            v = n.metadata.labels.get(c.key)
            if v is None:
                code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
                break
            least = min(tp[i].values()) if tp[i] else MAX_INT32
            if len(tp[i]) < c.min_domains:
                least = 0
            me = 1 if match_label_selector(c.selector, p.metadata.labels) else 0
            if tp[i].get(v, 0) + me - least > c.max_skew:
                code = Code.UNSCHEDULABLE
                break
        out[n.metadata.name] = code
    return out


def ref_scores(
    nodes: list[Node],
    on: dict[str, list[Pod]],
    p: Pod,
    cs: list[RefConstraint],
    candidates: list[str],
    require_all: bool,
) -> dict[str, int] | None:
    if not cs or not candidates:
        return None
    by_name = {n.metadata.name: n for n in nodes}
    ns = p.metadata.namespace
    ignored = {
        name
        for name in candidates
        if require_all and not all(c.key in by_name[name].metadata.labels for c in cs)
    }
    pair_counts: dict[tuple[str, str], int] = {}
    size = [0] * len(cs)
    for name in candidates:
        if name in ignored:
            continue
        for i, c in enumerate(cs):
            if c.key == HOSTNAME:
                continue
            pair = (c.key, by_name[name].metadata.labels.get(c.key, ""))
            if pair not in pair_counts:
                pair_counts[pair] = 0
                size[i] += 1
    weights = [
        math.log((len(candidates) - len(ignored) if c.key == HOSTNAME else size[i]) + 2)
        for i, c in enumerate(cs)
    ]
    for n in nodes:
        if require_all and not all(c.key in n.metadata.labels for c in cs):
            continue
        for c in cs:
            if not included(c, p, n):
                continue
            pair = (c.key, n.metadata.labels.get(c.key, ""))
            if pair in pair_counts:
                pair_counts[pair] += counts_on(on[n.metadata.name], c, ns)
    raw: dict[str, int] = {}
    for name in candidates:
        if name in ignored:
            raw[name] = 0
            continue
        labels = by_name[name].metadata.labels
        total = 0.0
        for i, c in enumerate(cs):
            if c.key not in labels:
                continue
            cnt = counts_on(on[name], c, ns) if c.key == HOSTNAME else pair_counts[(c.key, labels[c.key])]
            total += float(cnt) * weights[i] + float(c.max_skew - 1)
        raw[name] = math.floor(total + 0.5)
    live = [raw[n] for n in candidates if n not in ignored]
    lo, hi = (min(live), max(live)) if live else (0, 0)
    out = {}
    for name in candidates:
        if name in ignored:
            out[name] = 0
        elif hi == 0:
            out[name] = 100
        else:
            out[name] = 100 * (hi + lo - raw[name]) // hi
    return out


def ref_default_selector(h: FakeHandle, p: Pod) -> LabelSelector | None:
    merged: dict[str, str] = {}
    for svc in h.objects(SERVICES).values():
        sel = svc.spec.selector
        if (
            svc.metadata.namespace == p.metadata.namespace
            and sel
            and all(p.metadata.labels.get(k) == v for k, v in sel.items())
        ):
            merged.update(sel)
    exprs = []
    for ref in p.metadata.owner_references:
        if ref.controller and (ref.api_version, ref.kind) == ("apps/v1", "ReplicaSet"):
            rs = h.objects(REPLICA_SETS).get(f"{p.metadata.namespace}/{ref.name}")
            if rs is not None and rs.spec.selector is not None:
                exprs = [
                    LabelSelectorRequirement(key=k, operator="In", values=[v])
                    for k, v in rs.spec.selector.match_labels.items()
                ]
    if not merged and not exprs:
        return None
    return LabelSelector(match_labels=merged, match_expressions=exprs)


# --- random clusters ----------------------------------------------------------------------------


def random_node(rng: random.Random, name: str) -> Node:
    labels: dict[str, str] = {}
    if rng.random() < 0.85:
        labels[ZONE] = rng.choice(["z1", "z2", "z3", ""])
    if rng.random() < 0.9:
        labels[HOSTNAME] = name
    if rng.random() < 0.6:
        labels["rack"] = rng.choice(["r1", "r2"])
    if rng.random() < 0.5:
        labels["disk"] = rng.choice(["ssd", "hdd"])
    taints = (
        [{"key": "dedicated", "value": "gpu", "effect": rng.choice(["NoSchedule", "PreferNoSchedule"])}]
        if rng.random() < 0.2
        else []
    )
    return msgspec.convert({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}}, Node)


def random_labels(rng: random.Random) -> dict[str, str]:
    labels = {"app": rng.choice(APPS)}
    if rng.random() < 0.5:
        labels["ver"] = rng.choice(["1", "2"])
    return labels


def random_selector(rng: random.Random) -> dict[str, Any] | None:
    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.2:
        return {}
    if r < 0.7:
        return {"matchLabels": {"app": rng.choice(APPS)}}
    return {
        "matchExpressions": [
            {"key": "app", "operator": rng.choice(["In", "NotIn"]), "values": rng.sample(APPS, 2)}
        ]
    }


def random_constraints(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for when in ("DoNotSchedule", "ScheduleAnyway"):
        for key in rng.sample(KEYS, rng.randint(0, 2)):
            c: dict[str, Any] = {"maxSkew": rng.randint(1, 3), "topologyKey": key, "whenUnsatisfiable": when}
            sel = random_selector(rng)
            if sel is not None:
                c["labelSelector"] = sel
                if rng.random() < 0.3 and "ver" not in sel.get("matchLabels", {}):
                    c["matchLabelKeys"] = ["ver"]
            if when == "DoNotSchedule" and rng.random() < 0.3:
                c["minDomains"] = rng.randint(1, 5)
            if rng.random() < 0.3:
                c["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
            if rng.random() < 0.3:
                c["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
            out.append(c)
    return out


def random_pod(rng: random.Random, name: str, *, bound_to: str = "") -> Pod:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": rng.choice(NAMESPACES),
        "uid": name,
        "labels": random_labels(rng),
    }
    if bound_to and rng.random() < 0.1:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    if rng.random() < 0.3:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"rs-{meta['labels']['app']}",
                "controller": True,
            }
        ]
    spec: dict[str, Any] = {"containers": []}
    if bound_to:
        spec["nodeName"] = bound_to
    else:
        if rng.random() < 0.7:
            spec["topologySpreadConstraints"] = random_constraints(rng)
        if rng.random() < 0.25:
            spec["nodeSelector"] = {"disk": rng.choice(["ssd", "hdd"])}
        elif rng.random() < 0.2:
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "rack", "operator": rng.choice(["In", "NotIn"]), "values": ["r1"]}
                                ]
                            }
                        ]
                    }
                }
            }
        if rng.random() < 0.3:
            spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    return msgspec.convert({"metadata": meta, "spec": spec}, Pod)


def test_kernels_agree_with_the_reference_on_random_clusters() -> None:
    rng = random.Random(20261201)
    checked_filters = checked_scores = 0
    for trial in range(40):
        h = FakeHandle()
        snap = h.snapshot
        nodes: dict[str, Node] = {}
        on: dict[str, list[Pod]] = {}
        for i in range(rng.randint(1, 12)):
            n = random_node(rng, f"t{trial}-n{i}")
            nodes[n.metadata.name] = n
            on[n.metadata.name] = []
            snap.add_node(n, dict(ALLOC))
        for ns in NAMESPACES:
            for app in APPS:
                if rng.random() < 0.4:
                    h.put(
                        SERVICES,
                        {
                            "metadata": {"name": f"svc-{app}", "namespace": ns},
                            "spec": {"selector": {"app": app}},
                        },
                    )
                if rng.random() < 0.6:
                    h.put(
                        REPLICA_SETS,
                        {
                            "metadata": {"name": f"rs-{app}", "namespace": ns},
                            "spec": {"selector": {"matchLabels": {"app": app}}},
                        },
                    )
        system = rng.random() < 0.5
        args: dict[str, Any] = (
            {"defaultingType": "System"}
            if system
            else {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"},
                ],
            }
        )
        pl = plugin(h, args)
        # The specs the plugin applies to pods without constraints.
        defaults = msgspec.convert(args, PodTopologySpreadArgs).constraints()
        serial = 0
        for step in range(25):
            # Change the cluster a little: bind, delete, add or remove a node.
            for _ in range(rng.randint(0, 4)):
                r = rng.random()
                names = list(nodes)
                if r < 0.7 and names:
                    serial += 1
                    target = rng.choice(names)
                    q = random_pod(rng, f"t{trial}-q{serial}", bound_to=target)
                    on[target].append(q)
                    snap.add_pod(snap.by_name[target], info(q))
                elif r < 0.85:
                    placed = [(n, q) for n, qs in on.items() for q in qs]
                    if placed:
                        n, q = rng.choice(placed)
                        on[n].remove(q)
                        snap.remove_pod(snap.by_name[n], info(q))
                elif r < 0.95:
                    serial += 1
                    n = random_node(rng, f"t{trial}-m{serial}")
                    nodes[n.metadata.name] = n
                    on[n.metadata.name] = []
                    snap.add_node(n, dict(ALLOC))
                elif len(names) > 1:
                    gone = rng.choice(names)
                    for q in on.pop(gone):
                        snap.remove_pod(snap.by_name[gone], info(q))
                    snap.remove_node(gone)
                    del nodes[gone]
            p = random_pod(rng, f"t{trial}-p{step}")
            ordered = [i.node for i in snap.infos]
            own = p.spec.topology_spread_constraints
            default_sel = None if own else ref_default_selector(h, p)
            specs = own if own else (list(defaults) if default_sel is not None else [])
            hard = ref_constraints(p, specs, "DoNotSchedule", default_sel if not own else None)
            soft = ref_constraints(p, specs, "ScheduleAnyway", default_sel if not own else None)
            spread = msgspec.json.encode(p.spec.topology_spread_constraints).decode()
            where = f"trial {trial} step {step}: {spread}"
            assert filter_codes(pl, h, p) == ref_filter(ordered, on, p, hard), where
            checked_filters += 1
            candidates = [n.metadata.name for n in ordered if rng.random() < 0.7]
            require_all = bool(own) or not system
            want = ref_scores(ordered, on, p, soft, candidates, require_all)
            assert scores(pl, h, p, candidates) == want, where
            checked_scores += want is not None
    assert checked_filters == 40 * 25
    assert checked_scores > 300  # the soft paths were exercised, not skipped
