"""VolumeBinding's ``scheduler_volume_scheduling_stage_error_total``, as kube-scheduler's binder counts it.

Upstream counts an error returned by FindPodVolumes ("predicate", once per node: Filter's error,
not its unschedulable reasons), by AssumePodVolumes ("assume") and by BindPodVolumes ("bind",
whatever made it fail). Each case runs the plugin's real path and reads the exported series.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
import pytest

from koordsched.api.storage import PersistentVolume
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code
from koordsched.framework.types import BindingPlan
from koordsched.plugins.volumebinding import VolumeBinding
from tests.builders import pod_info
from tests.fakes import FakeBinder
from tests.plugins.volumes.helpers import StorageHandle, claim_pod, pv, pvc, sc
from tests.plugins.volumes.test_volumebinding import LOCAL, NODES, FakeWriter, _schedule, run, setup

CSI = sc("csi", provisioner="csi.example.com")


def _unschedulable_everywhere() -> tuple[VolumeBinding, StorageHandle, dict[str, float]]:
    plugin, handle = setup(LOCAL, pvc("c"), pv("p1", host="n9"))
    _, statuses, _ = run(plugin, handle, claim_pod("p", "c"))
    assert all(s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE for s in statuses.values())
    return plugin, handle, {}


def _class_gone_after_prefilter() -> tuple[VolumeBinding, StorageHandle, dict[str, float]]:
    plugin, handle = setup(CSI, pvc("c", cls="csi"))
    state = CycleState()
    info = pod_info(claim_pod("p", "c"))
    assert plugin.pre_filter(state, info)[1].ok
    del handle.stores["StorageClass"]["csi"]
    rows = [handle.snapshot.by_name[n].row for n in NODES]
    codes = plugin.filter_batch(state, info, np.array(rows, dtype=np.int64))
    status = plugin.explain(state, info, int(codes[0]))
    assert status.code is Code.ERROR and status.reasons == ('failed to find storage class "csi"',)
    return plugin, handle, {"predicate": float(len(NODES))}


def _bound_fine() -> tuple[VolumeBinding, StorageHandle, dict[str, float]]:
    plugin, handle = setup(LOCAL, pvc("c"), pv("p1", host="n1"))
    assert _schedule(plugin, claim_pod("p", "c"), "n1", handle).ok
    return plugin, handle, {}


def _provisioning_times_out() -> tuple[VolumeBinding, StorageHandle, dict[str, float]]:
    plugin, handle = setup(CSI, pvc("c", cls="csi"))
    status = _schedule(plugin, claim_pod("p", "c"), "n2", handle)
    assert status.reasons == ("binding volumes: timed out waiting for the condition",)
    return plugin, handle, {"bind": 1.0}


def _pod_deleted_while_binding() -> tuple[VolumeBinding, StorageHandle, dict[str, float]]:
    plugin, handle = setup(LOCAL, pvc("c"), pv("p1", host="n1"))
    writer: FakeWriter = handle.binder  # type: ignore[assignment]
    writer.controller = False
    status = _schedule(plugin, claim_pod("p", "c"), "n1", handle, assume=False)
    assert status.reasons == ('binding volumes: pod does not exist any more: pods "p" not found',)
    return plugin, handle, {"bind": 1.0}


def _output_cannot_write_volumes() -> tuple[VolumeBinding, StorageHandle, dict[str, float]]:
    plugin, handle = setup(LOCAL, pvc("c"), pv("p1", host="n1"))
    handle._binder = FakeBinder()
    status = _schedule(plugin, claim_pod("p", "c"), "n1", handle)
    assert status.reasons == ("binding volumes: this scheduler's output cannot write PersistentVolumes",)
    return plugin, handle, {"bind": 1.0}


def _pv_write_refused() -> tuple[VolumeBinding, StorageHandle, dict[str, float]]:
    plugin, handle = setup(LOCAL, pvc("c"), pv("p1", host="n1"))
    writer: FakeWriter = handle.binder  # type: ignore[assignment]

    async def refuse(v: PersistentVolume) -> PersistentVolume:
        raise RuntimeError(f'persistentvolumes "{v.metadata.name}" is forbidden')

    writer.update_persistent_volume = refuse  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="forbidden"):
        _schedule(plugin, claim_pod("p", "c"), "n1", handle)
    return plugin, handle, {"bind": 1.0}


def _prebind_without_reserve() -> tuple[VolumeBinding, StorageHandle, dict[str, float]]:
    # The plugin's own check before BindPodVolumes runs: upstream does not count it.
    plugin, handle = setup(LOCAL, pvc("c"), pv("p1", host="n1"))
    _, _, state = run(plugin, handle, claim_pod("p", "c"))
    status = asyncio.run(plugin.pre_bind(state, pod_info(claim_pod("p", "c")), "n1", BindingPlan()))
    assert status.reasons == ('no pod volumes found for node "n1"',)
    return plugin, handle, {}


CASES: dict[str, Callable[[], tuple[VolumeBinding, StorageHandle, dict[str, float]]]] = {
    "unschedulable reasons are not errors": _unschedulable_everywhere,
    "a class gone after PreFilter fails every node's search": _class_gone_after_prefilter,
    "scheduled and bound": _bound_fine,
    "provisioning never finishes": _provisioning_times_out,
    "the pod is deleted while its volumes bind": _pod_deleted_while_binding,
    "an output that cannot write volumes": _output_cannot_write_volumes,
    "the PV write is refused": _pv_write_refused,
    "PreBind before Reserve": _prebind_without_reserve,
}


@pytest.mark.parametrize("case", list(CASES))
def test_stage_errors(case: str) -> None:
    _, handle, expected = CASES[case]()
    assert handle.stage_errors() == expected


def test_counts_add_up_across_pods() -> None:
    plugin, handle = setup(CSI, *(pvc(f"c{i}", cls="csi") for i in range(3)))
    for i in range(3):
        _schedule(plugin, claim_pod(f"p{i}", f"c{i}"), NODES[i], handle)
    assert handle.stage_errors() == {"bind": 3.0}
    assert (
        handle.sink.registry.get_sample_value(
            "scheduler_volume_scheduling_stage_error_total", {"operation": "predicate"}
        )
        is None
    )
