"""The index of available reservations follows the store change by change, as a fresh build would."""

from __future__ import annotations

import random

import msgspec

from koordsched.api.reservation import Reservation
from koordsched.framework.objects import CHANGE_LOG, ObjectStore
from koordsched.plugins.reservation.index import ReservationIndex


def reservation(i: int, node: str, phase: str, policy: str, owner: str) -> Reservation:
    return msgspec.convert(
        {
            "metadata": {"name": f"r{i}", "uid": f"u{i}"},
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                },
                "owners": [{"labelSelector": {"matchLabels": {"app": owner}}}],
                "allocatePolicy": policy,
            },
            "status": {"phase": phase, "nodeName": node, "allocatable": {"cpu": "1"}},
        },
        Reservation,
    )


def snapshot(index: ReservationIndex) -> tuple[object, ...]:
    return (
        {n: [i.name for i in infos] for n, infos in index.by_node.items()},
        sorted(index.by_name),
        index.policy_nodes,
        {k: sorted(i.name for i in v) for k, v in index._by_owner_key.items()},
    )


def test_changed_since() -> None:
    store = ObjectStore()
    store["a"] = 1
    v = store.version
    store["b"] = 2
    del store["a"]
    assert store.changed_since(v) == {"a", "b"}
    assert store.changed_since(store.version) == set()
    store.clear()
    assert store.changed_since(v) is None
    for i in range(CHANGE_LOG + 1):
        store[str(i)] = i
    assert store.changed_since(v) is None


def test_incremental_index_equals_a_fresh_one() -> None:
    rng = random.Random(3)
    store = ObjectStore()
    live = ReservationIndex()
    for step in range(400):
        i = rng.randrange(30)
        if rng.random() < 0.2:
            store.pop(f"r{i}", None)
        else:
            phase = rng.choice(["Available", "Available", "Pending", "Succeeded"])
            store[f"r{i}"] = reservation(
                i, f"n{rng.randrange(5)}", phase, rng.choice(["", "Aligned"]), rng.choice(["a", "b"])
            )
        if rng.random() < 0.5:
            live.refresh(store)
            assert snapshot(live) == snapshot(ReservationIndex().refresh(dict(store))), step
