"""The PodGroup status: the phase machine (table-driven, Koordinator's controller) and the kube
backend's controller writing it through the status subresource of a (fake) API server."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from koordsched.api.core import ObjectMeta, OwnerReference, Pod, PodStatus
from koordsched.api.podgroup import PodGroup, PodGroupSpec, PodGroupStatus
from koordsched.backends.kube.client import KubeClient
from koordsched.backends.kube.controllers import ControllerRunner
from koordsched.backends.kube.handlers import CRD_KINDS, ObjectHandler
from koordsched.backends.kube.reflector import Reflector
from koordsched.backends.sim.port import SimPort
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.observability.metrics import SchedulerMetrics
from koordsched.plugins.coscheduling.controllers import PodGroupStatusController, status_patch
from koordsched.plugins.coscheduling.pod_group_status import next_status
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler
from tests.kube.fake_apiserver import Collection, FakeApiServer
from tests.kube.helpers import eventually

NOW = "2026-01-01T00:00:00Z"
PG_KIND = next(k for k in CRD_KINDS if k.kind == "PodGroup")


def members(*phases: str, owner: str = "job") -> list[Pod]:
    return [
        Pod(
            metadata=ObjectMeta(
                name=f"p{i}", namespace="ns", uid=f"u{i}", owner_references=[OwnerReference(name=owner)]
            ),
            status=PodStatus(phase=phase),
        )
        for i, phase in enumerate(phases)
    ]


def pg(min_member: int, phase: str = "", **status: Any) -> PodGroup:
    return PodGroup(
        metadata=ObjectMeta(name="pg", namespace="ns"),
        spec=PodGroupSpec(min_member=min_member),
        status=PodGroupStatus(phase=phase, **status),
    )


@pytest.mark.parametrize(
    ("group", "pods", "scheduled", "finished", "phase", "counts"),
    [
        # No phase yet, not enough pods: Pending.
        (pg(3), ["Pending"] * 2, 0, {}, "Pending", {}),
        # Enough pods: PreScheduling, then Scheduling (none bound yet) in the same pass.
        (pg(3), ["Pending"] * 3, 0, {}, "Scheduling", {"scheduled": 0}),
        (pg(3, "Scheduling"), ["Pending"] * 3, 2, {}, "Scheduling", {"scheduled": 2}),
        (pg(3, "Scheduling"), ["Pending"] * 3, 3, {}, "Scheduled", {"scheduled": 3}),
        (pg(2, "Scheduled"), ["Running", "Running"], 2, {}, "Running", {"running": 2}),
        (pg(2, "Running"), ["Running"], 2, {"x": "Failed"}, "Failed", {"running": 1, "failed": 1}),
        (pg(2, "Running"), [], 2, {"x": "Succeeded", "y": "Succeeded"}, "Finished", {"succeeded": 2}),
        # Every pod gone: back to Pending.
        (pg(2, "Scheduled"), [], 0, {}, "Pending", {}),
    ],
)
def test_phase_machine(
    group: PodGroup,
    pods: list[str],
    scheduled: int,
    finished: dict[str, str],
    phase: str,
    counts: dict[str, int],
) -> None:
    status = next_status(group, members(*pods), scheduled, finished, NOW)
    assert status.phase == phase
    for field, value in counts.items():
        assert getattr(status, field) == value, field


def test_pre_scheduling_records_the_owner_and_scheduling_its_start_once() -> None:
    status = next_status(pg(2), members("Pending", "Pending"), 0, {}, NOW)
    assert (status.occupied_by, status.schedule_start_time) == ("ns/job", NOW)
    again = next_status(pg(2, "Scheduling", schedule_start_time=NOW), members("Pending"), 1, {}, "later")
    assert again.schedule_start_time == NOW


def test_patch_spells_out_every_status_field_and_the_uid() -> None:
    group = msgspec.structs.replace(pg(2), metadata=ObjectMeta(name="pg", namespace="ns", uid="u-1"))
    body = status_patch(group, PodGroupStatus(phase="Scheduled", scheduled=2))
    assert body == {
        "status": {
            "phase": "Scheduled",
            "occupiedBy": None,
            "scheduled": 2,
            "running": 0,
            "succeeded": 0,
            "failed": 0,
            "scheduleStartTime": None,
        },
        "metadata": {"uid": "u-1"},
    }


async def test_controller_writes_each_status_once(api: FakeApiServer, client: KubeClient) -> None:
    registry = in_tree_registry()
    config = load_config(default_profile_path().read_bytes(), registry)
    metrics = SchedulerMetrics()
    sched = Scheduler(config, registry, SimPort(), VirtualClock(), metrics=metrics)
    api.collections[PG_KIND.path] = Collection(PG_KIND.path, True, "PodGroup")
    api.add(PG_KIND.path, {"metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": 2}})
    r = Reflector(client, PG_KIND, ObjectHandler(sched, metrics, PG_KIND), optional=True)
    r.start()
    try:
        await eventually(lambda: "ns/pg" in sched.objects.get("PodGroup", {}))
        for p in members("Pending", "Pending"):
            p = msgspec.structs.replace(
                p,
                metadata=msgspec.structs.replace(
                    p.metadata, labels={"pod-group.scheduling.sigs.k8s.io": "pg"}
                ),
            )
            sched.on_pod_add(p)
        (controller,) = [c for c in sched.controllers() if isinstance(c, PodGroupStatusController)]
        runner = ControllerRunner(controller, client)
        assert await runner.round() == 1
        # Sent, the watch not back yet: not sent again.
        assert await runner.round() == 0
        await eventually(
            lambda: api.get(PG_KIND.path, "ns/pg").get("status", {}).get("phase") == "Scheduling"
        )
        written = api.get(PG_KIND.path, "ns/pg")["status"]
        assert written["scheduled"] == 0 and written["scheduleStartTime"]
        await eventually(lambda: sched.objects["PodGroup"]["ns/pg"].status.phase == "Scheduling")
        assert await runner.round() == 0
        patches = [q for q in api.requests if q.method == "PATCH" and q.path.endswith("/podgroups/pg/status")]
        assert len(patches) == 1
        assert patches[0].content_type == "application/merge-patch+json"
        stop = asyncio.Event()
        stop.set()
        await runner.run(stop)  # closes its writer
    finally:
        await r.stop()
