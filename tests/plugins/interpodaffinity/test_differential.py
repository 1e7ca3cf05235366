"""The plugin against the plain reference (``reference.py``) on random clusters with random terms.

Random nodes (hostname, and a zone and region or not), random placed pods in three namespaces
with random labels and random terms of all four kinds (selectors with every operator, nil and
empty ones, namespaces lists, namespace selectors, matchLabelKeys), random Namespace labels and
args; then random incoming pods. Filter codes and normalized scores must agree on every node,
also after PreFilter's AddPod/RemovePod (preemption) and while pods and nodes come, go and
change labels between cycles (what the plugin keeps must follow).
"""

from __future__ import annotations

import random
from typing import Any

import msgspec
import numpy as np
import pytest

from koordsched.api import kinds
from koordsched.api.core import Node, Pod
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code
from koordsched.scheduler.cache import Cache
from tests.builders import make_pod, node
from tests.fakes import FakeHandle
from tests.plugins.interpodaffinity import reference
from tests.plugins.interpodaffinity.helpers import HOST, REGION, ZONE, info, plugin, set_namespace

NAMESPACES = ["default", "other", "third"]
KEYS = [HOST, ZONE, REGION]


def _labels(rng: random.Random) -> dict[str, str]:
    out = {}
    if rng.random() < 0.7:
        out["app"] = rng.choice("abc")
    if rng.random() < 0.5:
        out["tier"] = rng.choice("xy")
    return out


def _selector(rng: random.Random) -> dict[str, Any] | None:
    r = rng.random()
    if r < 0.08:
        return None
    if r < 0.15:
        return {}
    if r < 0.6:
        return {"matchLabels": {"app": rng.choice("abc")}}
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
    values = rng.sample("abc", rng.randint(1, 2)) if op in ("In", "NotIn") else []
    return {"matchExpressions": [{"key": rng.choice(["app", "tier"]), "operator": op, "values": values}]}


def _term(rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": rng.choice(KEYS)}
    sel = _selector(rng)
    if sel is not None:
        out["labelSelector"] = sel
    r = rng.random()
    if r < 0.15:
        out["namespaces"] = rng.sample(NAMESPACES, rng.randint(1, 2))
    if 0.1 < r < 0.3:
        out["namespaceSelector"] = rng.choice([{}, {"matchLabels": {"team": rng.choice("ab")}}])
    if rng.random() < 0.15:
        out["matchLabelKeys"] = ["tier"]
    if rng.random() < 0.1:
        out["mismatchLabelKeys"] = ["tier"]
    return out


def _affinity(rng: random.Random, busy: float) -> dict[str, Any] | None:
    if rng.random() > busy:
        return None
    out: dict[str, Any] = {}
    for group in ("podAffinity", "podAntiAffinity"):
        if rng.random() < 0.6:
            out[group] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    _term(rng) for _ in range(rng.choice([0, 0, 1, 1, 2]))
                ],
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": rng.randint(1, 100), "podAffinityTerm": _term(rng)}
                    for _ in range(rng.choice([0, 1, 2]))
                ],
            }
    return out or None


def _pod(rng: random.Random, name: str, busy: float, node_name: str = "") -> Pod:
    aff = _affinity(rng, busy)
    namespace = rng.choice(NAMESPACES)
    labels = _labels(rng)
    terminating = rng.random() < 0.1
    return make_pod(
        name,
        namespace=namespace,
        uid=name,
        labels=labels,
        node_name=node_name,
        deletion_timestamp="2026-12-01T00:00:00Z" if terminating else None,
        **({"affinity": aff} if aff else {}),
    )


def _node(rng: random.Random, name: str) -> Node:
    labels = {HOST: name}
    if rng.random() < 0.8:
        labels[ZONE] = rng.choice(["z1", "z2", "z3"])
    if rng.random() < 0.7:
        labels[REGION] = rng.choice(["r1", "r2"])
    return node(name, "64", "64Gi", 500, labels=labels, capacity=False)


class World:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.cache = Cache()
        self.handle = FakeHandle(self.cache.snapshot)
        for ns in NAMESPACES:
            if rng.random() < 0.85:
                set_namespace(self.handle, ns, **({"team": rng.choice("ab")} if rng.random() < 0.8 else {}))
        self.placed: dict[str, tuple[str, Pod]] = {}
        self.count = 0

    def add_node(self) -> None:
        self.count += 1
        self.cache.add_node(_node(self.rng, f"n{self.count}"))

    def add_pod(self, busy: float) -> None:
        nodes = [i.name for i in self.cache.snapshot.infos]
        self.count += 1
        name = f"p{self.count}"
        where = self.rng.choice(nodes)
        p = _pod(self.rng, name, busy, where)
        self.cache.add_pod(info(p), where)
        self.placed[name] = (where, p)

    def remove_pod(self) -> None:
        name = self.rng.choice(sorted(self.placed))
        self.cache.remove_pod(name)
        del self.placed[name]

    def remove_node(self) -> None:
        infos = self.cache.snapshot.infos
        if len(infos) < 2:
            return
        gone = self.rng.choice(infos).name
        for name in [n for n, (where, _) in self.placed.items() if where == gone]:
            self.cache.remove_pod(name)
            del self.placed[name]
        self.cache.remove_node(gone)

    def relabel_node(self) -> None:
        node = self.rng.choice(self.cache.snapshot.infos).node
        fresh = _node(self.rng, node.metadata.name)
        self.cache.update_node(msgspec.structs.replace(fresh, status=node.status))

    def relabel_pod(self) -> None:
        name = self.rng.choice(sorted(self.placed))
        where, p = self.placed[name]
        fresh = msgspec.structs.replace(
            p, metadata=msgspec.structs.replace(p.metadata, labels=_labels(self.rng))
        )
        self.cache.update_pod(info(fresh), where)
        self.placed[name] = (where, fresh)

    def ref_placed(self, skip: str | None = None) -> list[tuple[Node, Pod]]:
        snap = self.cache.snapshot
        return [(snap.by_name[n].node, p) for name, (n, p) in self.placed.items() if name != skip]

    def namespaces(self) -> dict[str, dict[str, str]]:
        return {k: dict(v.metadata.labels) for k, v in self.handle.objects(kinds.NAMESPACES).items()}


def _check(world: World, pod: Pod, args: dict[str, Any]) -> None:
    snap = world.cache.snapshot
    nodes = [i.node for i in snap.infos]
    rows = np.arange(snap.n, dtype=np.int64)
    pl = plugin(world.handle, **args)
    state = CycleState()
    p = info(pod)
    _, status = pl.pre_filter(state, p)
    expected = reference.filter_codes(pod, world.ref_placed(), nodes, world.namespaces())
    if status.code is Code.SKIP:
        assert expected == [0] * len(nodes)
    else:
        assert status.ok, status
        assert pl.filter_batch(state, p, rows).tolist() == expected
        # Preemption: take a placed pod away, then put it on another node.
        if world.placed:
            name = world.rng.choice(sorted(world.placed))
            where, victim = world.placed[name]
            fork = state.clone()
            assert pl.remove_pod(fork, p, info(victim), snap.by_name[where]).ok
            without = world.ref_placed(skip=name)
            assert pl.filter_batch(fork, p, rows).tolist() == reference.filter_codes(
                pod, without, nodes, world.namespaces()
            )
            other = world.rng.choice(snap.infos)
            assert pl.add_pod(fork, p, info(victim), other).ok
            moved = [*without, (other.node, victim)]
            assert pl.filter_batch(fork, p, rows).tolist() == reference.filter_codes(
                pod, moved, nodes, world.namespaces()
            )
            assert pl.filter_batch(state, p, rows).tolist() == expected
    score_state = CycleState()
    status = pl.pre_score(score_state, p, rows)
    want = reference.scores(
        pod,
        world.ref_placed(),
        nodes,
        world.namespaces(),
        args.get("hardPodAffinityWeight", 1),
        args.get("ignorePreferredTermsOfExistingPods", False),
    )
    if status.code is Code.SKIP:
        assert want is None
    else:
        assert status.ok, status
        got = pl.score_batch(score_state, p, rows)
        pl.normalize_score(score_state, p, rows, got)
        assert got.tolist() == want


@pytest.mark.parametrize("seed", range(40))
def test_plugin_agrees_with_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    world = World(rng)
    for _ in range(rng.randint(3, 9)):
        world.add_node()
    busy = rng.choice([0.2, 0.5, 0.9])
    for _ in range(rng.randint(0, 30)):
        world.add_pod(busy)
    for step in range(12):
        args: dict[str, Any] = {}
        if rng.random() < 0.3:
            args["hardPodAffinityWeight"] = rng.choice([0, 1, 5, 100])
        if rng.random() < 0.2:
            args["ignorePreferredTermsOfExistingPods"] = True
        _check(world, _pod(rng, f"in-{seed}-{step}", 0.9), args)
        # The cluster moves between cycles: the plugin's kept counts must follow.
        r = rng.random()
        if r < 0.3:
            world.add_pod(busy)
        elif r < 0.5 and world.placed:
            world.remove_pod()
        elif r < 0.6 and world.placed:
            world.relabel_pod()
        elif r < 0.7:
            world.add_node()
        elif r < 0.8:
            world.remove_node()
        elif r < 0.9:
            world.relabel_node()
