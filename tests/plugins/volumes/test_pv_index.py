"""The PV index followed key by key (store changes, assumptions made and undone, stale ones
dropped) holds what a fresh walk over every PV would."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from koordsched.api.kinds import PERSISTENT_VOLUMES
from koordsched.api.storage import ClaimReference, PersistentVolume
from koordsched.framework.objects import ObjectStore
from koordsched.plugins.volumebinding.assume import AssumeCache
from koordsched.plugins.volumebinding.binder import VolumeBinder
from koordsched.plugins.volumebinding.matching import PVIndex
from tests.plugins.volumes.helpers import StorageHandle, pv

NAMES = [f"pv{i}" for i in range(6)]


def shape(index: PVIndex) -> dict[str, Any]:
    """Each class's claimed, local and other PVs as sorted names (ties may be ordered either way)."""
    out: dict[str, Any] = {}
    for cls, idx in index.classes.items():
        claimed = {k: sorted(e.pv.metadata.name for e in v) for k, v in idx.claimed.items() if v}
        local = {h: sorted(e.pv.metadata.name for e in v) for h, v in idx.local.items() if v}
        other = sorted(e.pv.metadata.name for e in idx.other)
        for entries in (*idx.local.values(), idx.other):
            assert [e.size for e in entries] == sorted(e.size for e in entries)
        if claimed or local or other:
            out[cls] = (claimed, local, other)
    return out


def make(name: str, variant: int) -> PersistentVolume:
    cls = ("a", "b")[variant % 2]
    host = (None, "n1", "n2")[variant % 3]
    size = ("1Gi", "5Gi", "10Gi")[variant % 3]
    out = pv(name, cls=cls, host=host, size=size)
    if variant % 4 == 3:
        ref = ClaimReference(kind="PersistentVolumeClaim", namespace="ns", name=f"c{variant}", uid="u")
        out = msgspec.structs.replace(out, spec=msgspec.structs.replace(out.spec, claim_ref=ref))
    return out


OPS = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete", "assume", "restore", "look"]),
        st.sampled_from(NAMES),
        st.integers(0, 11),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_incremental_index_matches_a_fresh_walk(ops: list[tuple[str, str, int]]) -> None:
    handle = StorageHandle()
    binder = VolumeBinder(handle)
    store = handle.objects(PERSISTENT_VOLUMES)
    assert isinstance(store, ObjectStore)
    for op, name, variant in ops:
        if op == "put":
            store[name] = make(name, variant)
        elif op == "delete":
            store.pop(name, None)
        elif op == "assume" and name in store:
            binder.pvs.assume(name, make(name, variant + 1))
        elif op == "restore":
            binder.pvs.restore(name)
        else:
            binder.index()
        fresh = PVIndex()
        view = AssumeCache(lambda: store)
        view._assumed = dict(binder.pvs._assumed)
        fresh.sync(view.items(), store.__contains__, len(store))
        assert shape(binder.index()) == shape(fresh)
